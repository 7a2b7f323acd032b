"""Cross-layer guidance as a sweep axis: ``model.guidance`` is one setting or a list.

Every candidate of the space is crossed with every setting: a guided candidate is named
``<candidate>+<label>`` (``sandwich16_6+hg-kq``) and its :class:`~.variant.Variant`
carries the :class:`~models.guidance.config.GuidanceConfig` itself; a ``mode: none``
setting keeps the candidate as it is. The baseline is never guided. The label is derived
from the setting for names, the trial table and MLflow tags; a trial's guidance is part
of its identity (reuse never takes an unguided run for a guided trial).

A guided copy of an explicit order that happens to be a sandwich (``(scf)^3`` is the
sandwich with k = 0) is not a sandwich trial: its family is its space, ``explicit``,
and it has no ``k`` (a guidance experiment must not read as a sandwich one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.search.core.problems import Problem
from sublayer_search.search.core.variant import VariantCandidate
from sublayer_search.spaces.problems import ProblemError
from sublayer_search.spaces.registry import ALL_SPACES

__all__ = ["Settings", "check_guided", "cross", "guidance_settings"]

Settings = dict[str, tuple[str, GuidanceConfig]]
"""label → (YAML path, setting) of ``model.guidance``."""

def _rebase(field: str, prefix: str) -> str:
    return prefix + field[len("model.guidance"):] if field.startswith("model.guidance") else prefix


def _at(exc: ValueError, prefix: str, value: Any, why: str = "") -> Problem:
    """The error's (first) problem at the setting's YAML path ``prefix``."""
    if isinstance(exc, ProblemError):
        first = exc.problems[0]
        return Problem(_rebase(first.path, prefix), first.value, first.expected + why)
    return Problem(prefix, value, str(exc) + why)


def guidance_settings(raw: object, problems: list[Problem]) -> Settings:
    """label → (YAML path, setting) of ``model.guidance`` (absent: unguided only)."""
    if raw is None:
        return {"none": ("model.guidance", GuidanceConfig())}
    many = isinstance(raw, list)
    items: list[object] = list(raw) if isinstance(raw, list) else [raw]
    if many and not items:
        problems.append(Problem("model.guidance", raw, "a guidance setting or a non-empty list"))
    out: Settings = {}
    for i, item in enumerate(items):
        prefix = f"model.guidance[{i}]" if many else "model.guidance"
        try:
            setting = GuidanceConfig.from_dict(item)
        except ValueError as exc:
            problems.append(_at(exc, prefix, item))
            continue
        if setting.label in out:
            problems.append(Problem(prefix, item, f"distinct guidance settings ({setting.label} "
                                    f"is also {out[setting.label][0]})"))
            continue
        out[setting.label] = (prefix, setting)
    return out


def _guided(cand: VariantCandidate, setting: GuidanceConfig) -> VariantCandidate:
    copy = cand.guided(setting)
    facts = ALL_SPACES[cand.space].order_facts if cand.space in ALL_SPACES else ()
    if copy is cand or not facts:  # facts of the order (an explicit sandwich's k): dropped
        return copy
    return replace(copy, params={k: v for k, v in copy.params.items() if k not in facts})


def cross(pool: Sequence[VariantCandidate],
          settings: Sequence[GuidanceConfig]) -> list[VariantCandidate]:
    """Every candidate under every guidance setting (candidate-major)."""
    return [_guided(c, setting) for c in pool for setting in settings]


def check_guided(pool: Sequence[VariantCandidate], settings: Settings,
                 build: Callable[[VariantCandidate], Any], problems: list[Problem]) -> None:
    """One problem per guidance setting that some candidate's order cannot take (hard
    guidance where a guided kind occurs once), at the setting's YAML path. ``build`` makes
    a candidate's model config, guidance applied."""
    failed: set[str] = set()
    for cand in pool:
        label = cand.variant.label
        if not cand.variant.guided or label in failed:
            continue
        try:
            build(cand)
        except ValueError as exc:
            failed.add(label)
            problems.append(_at(exc, settings[label][0], label, f" (candidate {cand.name})"))
