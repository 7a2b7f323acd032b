"""Cross-layer guidance as a sweep axis: ``model.guidance`` is one setting or a list.

Every candidate of the space is crossed with every setting: a guided candidate is named
``<candidate>+<label>`` (``sandwich16_6+hg-kq``) and carries ``params["guidance"]`` = the
label (:attr:`models.guidance.config.GuidanceConfig.label`, which is invertible); a
``mode: none`` setting keeps the candidate as it is. The baseline is never guided. The
label is part of a trial's identity (reuse never takes an unguided run for a guided
trial) and of its MLflow params and tags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.search.plan.problems import Problem
from sublayer_search.spaces.candidate import Candidate

__all__ = ["GUIDANCE_PARAM", "check_guided", "cross", "guidance_settings", "label_of",
           "with_guidance"]

GUIDANCE_PARAM = "guidance"
"""The candidate/trial param holding the guidance label."""


def label_of(params: Any) -> str:
    """The guidance label of a candidate's, trial's or run's params (``none`` if absent)."""
    return str(params.get(GUIDANCE_PARAM) or "none")


def _rebase(field: str, prefix: str) -> str:
    return prefix + field[len("model.guidance"):] if field.startswith("model.guidance") else prefix


def guidance_settings(raw: Any, problems: list[Problem]) -> dict[str, tuple[str, GuidanceConfig]]:
    """label → (YAML path, setting) of ``model.guidance`` (absent: unguided only)."""
    if raw is None:
        return {"none": ("model.guidance", GuidanceConfig())}
    many = isinstance(raw, list)
    items = raw if many else [raw]
    if many and not items:
        problems.append(Problem("model.guidance", raw, "a guidance setting or a non-empty list"))
    out: dict[str, tuple[str, GuidanceConfig]] = {}
    for i, item in enumerate(items):
        prefix = f"model.guidance[{i}]" if many else "model.guidance"
        try:
            setting = GuidanceConfig.from_dict(item)
        except ValueError as exc:
            field = str(getattr(exc, "field", "model.guidance"))
            problems.append(Problem(_rebase(field, prefix), getattr(exc, "value", item),
                                    str(getattr(exc, "expected", exc))))
            continue
        if setting.label in out:
            problems.append(Problem(prefix, item, f"distinct guidance settings ({setting.label} "
                                    f"is also {out[setting.label][0]})"))
            continue
        out[setting.label] = (prefix, setting)
    return out


def cross(pool: Sequence[Candidate], labels: Sequence[str]) -> list[Candidate]:
    """Every candidate under every guidance label (candidate-major)."""
    if list(labels) == ["none"]:
        return list(pool)
    return [c if label == "none" else
            replace(c, name=f"{c.name}+{label}", params={**c.params, GUIDANCE_PARAM: label})
            for c in pool for label in labels]


def with_guidance(model: Any, params: Any) -> Any:
    """``model`` (a model config) with the guidance its params name (validated again)."""
    label = label_of(params)
    if label == "none":
        return model
    return replace(model, guidance=GuidanceConfig.from_label(label))


def check_guided(pool: Sequence[Candidate], settings: dict[str, tuple[str, GuidanceConfig]],
                 build: Callable[[Candidate], Any], problems: list[Problem]) -> None:
    """One problem per guidance setting that some candidate's order cannot take (hard
    guidance where a guided kind occurs once), at the setting's YAML path."""
    failed: set[str] = set()
    for cand in pool:
        label = label_of(cand.params)
        if label == "none" or label in failed:
            continue
        try:
            with_guidance(build(cand), cand.params)
        except ValueError as exc:
            failed.add(label)
            prefix = settings[label][0]
            field = str(getattr(exc, "field", "model.guidance"))
            problems.append(Problem(_rebase(field, prefix), getattr(exc, "value", label),
                                    f"{getattr(exc, 'expected', exc)} (candidate {cand.name})"))
