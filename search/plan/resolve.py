"""Planning, step 2 of 3: *resolve*. Everything outside the file, explicitly.

Where the sweep runs and writes (tracking store, Ray storage, a cluster's address:
checked for a real sweep, only for secrets in a dry run), the resources the trials ask,
the prior's tables (``search.prior``), and the corpus and vocabulary the task needs (on
disk, or to fetch: a dry run only reports what it would fetch). Problems are collected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.plan.preflight import place_problems, secret_problems
from sublayer_search.search.plan.resources import worker_problems
from sublayer_search.search.plan.validate import Validated
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.queue import search_prior

__all__ = ["Resolved", "resolve"]


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What planning found outside the file."""

    template: Any
    """The model config with what the data decides filled in (the vocabulary)."""
    prior: OrderPrior | None
    """``search.prior``, read and fitted once."""


def resolve(v: Validated, problems: list[Problem], *, address: str | None = None,
            check_resources: bool = True, tracking_uri: str | None = None,
            notes: list[str] | None = None) -> Resolved:
    """Step 2: places, resources, the prior and the task's data; problems are appended.

    Resources are checked against this machine unless a cluster ``address`` is given or
    ``check_resources`` is false (a dry run: only secrets in URIs are refused there). A
    ``notes`` list (a dry run) collects what could only be estimated."""
    exp, template = v.experiment, v.template
    if check_resources:  # a real sweep: where it will run and write
        problems += place_problems(exp, exp.data, address=address, tracking_uri=tracking_uri)
    else:  # a dry run still refuses a secret in a URI
        problems += secret_problems(exp, tracking_uri)
    problems += worker_problems(exp)
    prior = search_prior(exp.search, tracking_uri or exp.tracking.uri, problems)
    if template is not None and exp.data is not None and not problems:
        template = v.task.resolve(template, exp.data, v.baseline, problems, notes)
    return Resolved(template=template, prior=prior)
