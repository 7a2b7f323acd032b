"""What a searcher trains once per seed: a *variant*, keyed by its order and its identity.

The order alone does not tell two models apart. An IOT subset is named after its first
order, so the subsets {1, 2} and {1, 4, 6} of a decoder share it. A guided model shares
its order with the unguided one. The task's identity (:meth:`~.tasks.base.Task.identity`,
which ``reuse`` and warm start match runs by: the stack and subset, the translation
side, the guidance label) does tell them apart. The plain decoder's key is its order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sublayer_search.search.tasks.lm import LMTask

__all__ = ["Identity", "PLAIN", "default_identity", "variant_key"]

Identity = Callable[[Any], str]
"""A task's identity of a candidate, trial or run (anything with ``params``)."""

PLAIN = "decoder"
"""The identity of an unguided language model or plain decoder."""

default_identity: Identity = LMTask().identity
"""What searchers built without a plan assume: language models (order and guidance)."""


def variant_key(order: str, identity: str) -> str:
    """``order`` for the plain model, else ``order|identity`` (``scfscf|decoder:146``,
    ``ssfsff|decoder+hg-kq``)."""
    return order if identity == PLAIN else f"{order}|{identity}"
