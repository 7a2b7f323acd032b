"""Driver-side objects that a restored sweep takes from the run that resumes it, not from
its pickle.

Tune pickles a sweep's callbacks with its state and, on ``Tuner.restore``, hands back those
pickled objects; Ray offers no public way to give a restored Tuner new ones. An object of a
class that mixes in :class:`Rebound` pickles as usual, but unpickles as the live object of
its class while :func:`rebinding` holds one: a resumed sweep tracks with this run's
callback (its tracking URI, outage limit and the runs its backlog replay found) and keeps
the experiment file's ``ray.keep_checkpoints``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Rebound", "rebinding"]

_LIVE: dict[type, object] = {}


def _rebind(cls: type, state: dict[str, Any]) -> object:
    live = _LIVE.get(cls)
    if live is not None:
        return live
    obj: object = object.__new__(cls)
    obj.__dict__.update(state)
    return obj


class Rebound:
    """Unpickles as the live object of its class while :func:`rebinding` holds one."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebind, (type(self), self.__getstate__()))


@contextmanager
def rebinding(*live: object) -> Iterator[None]:
    """While inside, a pickled object of the class of one of ``live`` unpickles as it."""
    for obj in live:
        _LIVE[type(obj)] = obj
    try:
        yield
    finally:
        for obj in live:
            _LIVE.pop(type(obj), None)
