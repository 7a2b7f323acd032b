"""Planning in three named steps, every problem of all three reported at once:
*validate* (:mod:`.validate`: the file alone, no I/O), *resolve* (:mod:`.resolve`: places,
resources, the prior, the task's data) and *expand* (:mod:`.expand`: pure, the typed
plan). It never starts Ray nor touches MLflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.plan.expand import expand, model_configs
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.plan.resolve import resolve
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.plan.validate import validate

__all__ = ["plan_sweep"]


def plan_sweep(exp: Experiment, source: str = "<experiment>", *, address: str | None = None,
               check_resources: bool = True, notes: list[str] | None = None,
               tracking_uri: str | None = None,
               found: Sequence[Problem] = ()) -> SweepPlan[Any, Any, Any, Any]:
    """The three steps of planning, every problem of all three reported at once in one
    :class:`ExperimentError`: :func:`~.validate.validate` (the file alone),
    :func:`~.resolve.resolve` (places, resources, prior, data) and
    :func:`~.expand.expand` (models, specs, trials).

    ``check_resources`` false (``--dry-run``) only warns about this machine's resources;
    a cluster ``address`` is checked after connecting (:func:`search.run.sweep.check_cluster`).
    ``notes`` (``--dry-run``) collects what could only be estimated; ``found``: the file's
    problems :func:`~.experiment.parse_experiment` left to report with these.
    """
    problems: list[Problem] = list(found)
    validated = validate(exp, problems)
    resolved = resolve(validated, problems, address=address, check_resources=check_resources,
                       tracking_uri=tracking_uri, notes=notes)
    models = model_configs(validated, resolved, problems) if (
        resolved.template is not None and not problems) else {}
    if problems or resolved.template is None or exp.data is None:
        raise ExperimentError(source, problems)
    plan = expand(validated, resolved, models, source)
    if notes is not None:
        notes += [d.note() for d in plan.duplicates]
    return plan
