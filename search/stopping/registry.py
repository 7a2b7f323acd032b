"""Stopping rules by name (``scheduler.type``): ``register_rule`` and the lookups.

Every module of :mod:`sublayer_search.search.stopping.rules` declares one rule; they are
imported on the first lookup. The experiment's ``scheduler`` section is the union of the
registered rules' settings (:func:`scheduler_section`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Discriminator, Tag

from sublayer_search.search.core.modules import import_every_module
from sublayer_search.search.core.problems import Problem
from sublayer_search.search.stopping.rule import StoppingRule, StoppingSettings
from sublayer_search.spaces.problems import ProblemError

__all__ = ["DEFAULT_RULE", "register_rule", "rule_names", "scheduler_section", "stopping_rule"]

BUILTIN = "sublayer_search.search.stopping.rules"
DEFAULT_RULE = "fifo"
"""What a sweep runs without ``scheduler.type``: every trial to the end."""
_RULES: dict[str, type[StoppingRule]] = {}


def register_rule(name: str) -> Callable[[type[StoppingRule]], type[StoppingRule]]:
    """Make the decorated class the rule of ``scheduler.type: <name>``."""

    def add(cls: type[StoppingRule]) -> type[StoppingRule]:
        cls.name = name
        _RULES[name] = cls
        return cls

    return add


def _load() -> None:
    import_every_module(BUILTIN)


def rule_names() -> tuple[str, ...]:
    """Registered names in listing order."""
    _load()
    return tuple(sorted(_RULES, key=lambda n: (_RULES[n].position, n)))


def stopping_rule(name: str) -> type[StoppingRule]:
    """The rule registered as ``name`` (KeyError if none is)."""
    _load()
    return _RULES[name]


def _tag(name: str) -> str:
    """The union member's tag: a class-like name, so problems drop it from YAML paths."""
    return f"{name.capitalize()}Rule"


def _rule_of(value: Any) -> str | None:
    name = value.get("type", DEFAULT_RULE) if isinstance(value, dict) else getattr(value, "type", None)
    return _tag(name) if isinstance(name, str) and name in _RULES else None


def _listed(names: list[str], word: str = "or") -> str:
    return f" {word} ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]


def _checked_section(value: Any) -> Any:
    """The section's ``type`` checked against the registry first (the one problem of a
    section with an unknown type: its other keys mean nothing without one), and a setting
    of another rule named as such (``grace_period`` under ``type: fifo``)."""
    if isinstance(value, StoppingSettings):
        return value
    if not isinstance(value, dict):
        raise ValueError("a mapping")
    names = rule_names()
    name = value.get("type", DEFAULT_RULE)
    if name not in names:
        raise ValueError(f"type: got {name!r}, expected one of "
                         f"{_listed([repr(n) for n in names])}")
    own = set(stopping_rule(name).settings.model_fields)
    misplaced = []
    for key in value:
        takers = [n for n in names if n != name and key in stopping_rule(n).settings.model_fields]
        if key not in own and takers:
            misplaced.append(Problem(str(key), value[key], f"no {key} with type {name} (a "
                                     f"setting of {_listed(takers)})"))
    if misplaced:
        raise ProblemError(misplaced)
    return value


def scheduler_section() -> object:
    """The type of the ``scheduler`` section: the union of every registered rule's
    settings, chosen by ``type`` (``fifo`` when left out)."""
    members = tuple(Annotated[stopping_rule(n).settings, Tag(_tag(n))] for n in rule_names())
    return Annotated[Union[members],  # noqa: UP007 - a union built at run time
                     Discriminator(_rule_of), BeforeValidator(_checked_section)]
