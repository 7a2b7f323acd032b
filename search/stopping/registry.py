"""Stopping rules by name (``scheduler.type``): ``register_rule`` and the lookups.

Every module of :mod:`sublayer_search.search.stopping.rules` declares one rule; they are
imported on the first lookup. The experiment's ``scheduler`` section is read as the
settings of the rule its ``type`` names (:func:`read_scheduler`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pydantic
from pydantic import PlainValidator

from sublayer_search.search.core.modules import import_every_module
from sublayer_search.search.core.plugins import claim, declare_group
from sublayer_search.search.core.problems import Problem, from_validation_error
from sublayer_search.search.core.scalars import OWN_CHECKS, strict_scalars
from sublayer_search.search.core.section import Refused
from sublayer_search.search.stopping.rule import StoppingRule, StoppingSettings
from sublayer_search.spaces.problems import ProblemError

__all__ = ["DEFAULT_RULE", "read_scheduler", "register_rule", "rule_names", "scheduler_section",
           "stopping_rule", "unregister_rule"]

BUILTIN = "sublayer_search.search.stopping.rules"
DEFAULT_RULE = "fifo"
"""What a sweep runs without ``scheduler.type``: every trial to the end."""
_RULES: dict[str, type[StoppingRule]] = {}


def register_rule(name: str) -> Callable[[type[StoppingRule]], type[StoppingRule]]:
    """Make the decorated class the rule of ``scheduler.type: <name>``."""

    def add(cls: type[StoppingRule]) -> type[StoppingRule]:
        contract: list[str] = []
        if not (isinstance(cls, type) and issubclass(cls, StoppingRule)):
            contract.append("a subclass of StoppingRule")
        elif not (isinstance(cls.settings, type) and issubclass(cls.settings, StoppingSettings)):
            contract.append("settings: a subclass of StoppingSettings")
        claim("stopping rule", name, cls, dict(_RULES), contract)
        cls.name = name
        _RULES[name] = cls
        return cls

    return add


def unregister_rule(name: str) -> None:
    _RULES.pop(name, None)


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


def read_scheduler(raw: object) -> StoppingSettings | Refused:
    """The ``scheduler`` section as the settings of the rule its ``type`` names (looked up
    now: a rule registered by a plugin is read like a built-in one); a :class:`Refused`
    keeping them when only a quoted number is wrong, a ``ProblemError`` otherwise."""
    if isinstance(raw, StoppingSettings):
        return raw
    section = _checked_section(raw)
    settings = stopping_rule(section.get("type", DEFAULT_RULE)).settings
    rest, quoted = strict_scalars(settings, section, "scheduler")
    try:
        value = settings.model_validate(rest)
    except pydantic.ValidationError as err:
        raise ProblemError(quoted + from_validation_error(err, "scheduler", model=settings)) \
            from None
    return Refused(tuple(quoted), value) if quoted else value


def scheduler_section() -> object:
    """The type of the ``scheduler`` section: the settings of a registered rule, chosen by
    ``type`` (``fifo`` when left out) and read by that rule's settings model."""
    return Annotated[StoppingSettings, OWN_CHECKS, PlainValidator(read_scheduler)]


declare_group("stopping rule", lambda: tuple(_RULES))
