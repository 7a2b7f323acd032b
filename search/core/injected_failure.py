"""Fault injection: trials (or the one-shot supernet) named in ``$SUBLAYER_FAIL_TRIALS``
raise before training, for tests and for checking a cluster's failure policy."""

from __future__ import annotations

import os

__all__ = ["FAIL_ENV", "InjectedFailure", "fail_if_listed"]

FAIL_ENV = "SUBLAYER_FAIL_TRIALS"
"""Comma-separated trial names that raise before training (fault injection for tests and
for checking a cluster's failure policy)."""


class InjectedFailure(RuntimeError):
    """Raised on purpose: the name was listed in :data:`FAIL_ENV`."""


def fail_if_listed(name: str, what: str) -> None:
    """Raise :class:`InjectedFailure` when ``name`` is listed in :data:`FAIL_ENV`."""
    if name in os.environ.get(FAIL_ENV, "").split(","):
        raise InjectedFailure(f"{what} failed on purpose (listed in ${FAIL_ENV})")
