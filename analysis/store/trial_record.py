"""One trial as MLflow holds it: :class:`TrialRecord`, written by the sweep's tracking
callback (:meth:`TrialRecord.to_mlflow`) and read back by analysis, ``sublayer export``
and ``sublayer replay`` (:meth:`TrialRecord.from_mlflow`).

Every MLflow name of a trial run is declared here once, beside the field that holds it:
params (``order``, ``seed``, …), tags (``sublayer.family``, …), the summary metrics of
the experiment's metric (``final_<metric>``, ``best_<metric>``) and the artifacts
(:data:`ROUTING_ARTIFACT`). The metric is recorded (param ``metric``) and read back,
never guessed. Params the record does not type (the experiment's settings:
``model.d_model``, ``train.lr``, …, and a task's own facts) stay as written in
:attr:`TrialRecord.settings`. Pure Python: no pandas, no mlflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeGuard

from sublayer_search.spaces.records import Role, Tag, TrialStatus, best, final

__all__ = ["CHECKPOINT_ARTIFACT", "MODEL_ARTIFACT", "ROUTING_ARTIFACT", "MlflowRun", "TrialRecord",
           "outcome_to_mlflow", "param_value"]

ROUTING_ARTIFACT: Final = "routing_bleu.json"
"""IOT trials: the BLEU of each validation split decoded with each order
(``{"<routed code>": {"<forced code>": bleu}}``)."""
CHECKPOINT_ARTIFACT: Final = "checkpoint"
"""A finished trial's checkpoint folder (``tracking.log_checkpoints: true``)."""
MODEL_ARTIFACT: Final = f"{CHECKPOINT_ARTIFACT}/model.json"
"""Its model config as JSON, which rebuilds the model (``search.tracking.attention``)."""
_MAX_PARAM = 6000  # MLflow's longest param value
_RUN_STATUS = {"FINISHED": TrialStatus.FINISHED, "FAILED": TrialStatus.FAILED,
               "KILLED": TrialStatus.KILLED, "RUNNING": TrialStatus.RUNNING,
               "SCHEDULED": TrialStatus.RUNNING}
"""MLflow run status -> trial status, for runs whose status tag is missing or unknown."""
_READ_STATUSES = frozenset(TrialStatus) - {TrialStatus.WAITING}


def param_value(value: object) -> str:
    """A value as an MLflow param or tag: ``None`` as empty, cut to MLflow's 6000 characters."""
    text = "" if value is None else str(value)
    return text[:_MAX_PARAM]


class _RunInfo(Protocol):
    run_id: str
    run_name: str | None
    status: str
    end_time: int | None


class _RunData(Protocol):
    params: Mapping[str, str]
    tags: Mapping[str, str]
    metrics: Mapping[str, float]


class MlflowRun(Protocol):
    """What :meth:`TrialRecord.from_mlflow` reads of an ``mlflow.entities.Run``."""

    info: _RunInfo
    data: _RunData


def _param(name: str) -> Any:
    return field(default=None, metadata={"param": name})


def _tag(name: str, *, param: str | None = None) -> Any:
    return field(default=None, metadata={"tag": name, "param": param})


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """A trial run: what the plan said of it (params and tags written when it starts), how
    it ended (``status``, ``steps``, ``final``, ``best``) and where it is in MLflow."""

    name: str
    """The run's name: ``sandwich3_1@seed0``."""
    order: str = _param("order")
    seed: int = _param("seed")
    space: str = _tag(Tag.SPACE, param="space")
    family: str = _tag(Tag.FAMILY)
    """``baseline``, the order's family (an explicit sandwich's ``k``), or the space."""
    baseline: bool = field(default=False, metadata={"tag": Tag.BASELINE})
    metric: str | None = _param("metric")
    """The experiment's metric (``val_bpc``): what :attr:`final` and :attr:`best` are of."""
    objectives: tuple[str, ...] = field(default=(), metadata={"param": "objectives"})
    """A Pareto front's objectives (``search.objectives``); empty for one metric."""
    task: str | None = _param("task")
    candidate: str | None = _param("candidate")
    config_hash: str | None = _param("config_hash")
    k: int | None = _param("k")
    n_s: int | None = _param("n_s")
    n_f: int | None = _param("n_f")
    n_c: int | None = _param("n_c")
    n_h: int | None = _param("n_h")
    kind_units: str | None = _param("kind_units")
    """An order with hybrid kinds (``w``, ``r``, ``e``): each one's weight in s-units at the
    trial's model (``r=1.015625,e=4.015625``), what the halves study cuts it by."""
    units: float | None = _param("units")
    params: int | None = _param("params")
    flops_per_token: int | None = _param("flops_per_token")
    guidance: str | None = _tag(Tag.GUIDANCE)
    """The guidance label, for display (the setting is in the ``model.guidance.*`` params)."""
    encoder_order: str | None = _param("encoder_order")
    decoder_order: str | None = _param("decoder_order")
    side: str | None = _param("side")
    subset: str | None = _param("subset")
    subset_size: int | None = _param("subset_size")
    codes: str | None = _param("codes")
    oneshot_rank: int | None = _tag(Tag.ONESHOT_RANK, param="oneshot_rank")
    oneshot_estimate: float | None = _tag(Tag.ONESHOT_ESTIMATE, param="oneshot_estimate")
    settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Every other param, as written: ``model.d_model``, ``train.lr``, ``stacks``, …"""
    status: TrialStatus | None = _tag(Tag.STATUS)
    steps: int | None = _tag(Tag.STEPS)
    """Optimizer steps the trial trained (less than planned for a stopped one)."""
    final: float | None = field(default=None, metadata={"metric": final})
    best: float | None = field(default=None, metadata={"metric": best})
    parent_run_id: str | None = _tag(Tag.PARENT)
    trial_id: str | None = _tag(Tag.RAY_TRIAL_ID)
    run_id: str | None = field(default=None, compare=False)
    end_ms: int | None = field(default=None, compare=False)
    latest: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}),
                                        compare=False)
    """Read back only: every metric's latest value (``val_loss``, ``route_share_3``, …)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "latest", MappingProxyType(dict(self.latest)))

    @classmethod
    def planned_from(cls, written: Mapping[str, Any], *, name: str, family: str,
                     baseline: bool, guidance: str | None) -> TrialRecord:
        """The record of a trial whose run is given the params ``written`` (``None`` values
        are not written): each declared param to its field, the rest to :attr:`settings`."""
        values: dict[str, Any] = {}
        by_param = {f.metadata["param"]: f.name for f in fields(cls) if f.metadata.get("param")}
        settings: dict[str, str] = {}
        for key, value in written.items():
            if value is None:
                continue
            if key in by_param:
                values[by_param[key]] = value
            else:
                settings[key] = param_value(value)
        return cls(name=name, family=family, baseline=baseline, guidance=guidance,
                   settings=settings, **values)

    # -- writing --------------------------------------------------------------------------
    def to_mlflow(self) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
        """``(params, tags, metrics)`` of the run: every declared name with a value, the
        settings, the trial role; the summary metrics where the trial has them."""
        params = {k: param_value(v) for k, v in self.settings.items()}
        tags = {Tag.ROLE: Role.TRIAL.value}
        metrics: dict[str, float] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == () or "metric" in f.metadata and self.metric is None:
                continue
            text = _text(value)
            if f.metadata.get("param"):
                params[f.metadata["param"]] = text
            if f.metadata.get("tag"):
                tags[f.metadata["tag"]] = text
            if "metric" in f.metadata and math.isfinite(value):
                metrics[f.metadata["metric"](self.metric)] = float(value)
        return params, tags, metrics

    # -- reading --------------------------------------------------------------------------
    @classmethod
    def from_mlflow(cls, run: MlflowRun) -> TrialRecord:
        """The record of a trial run (``mlflow.entities.Run``); runs of earlier releases
        too: a run without the family tag is of its space's family, one without a status
        tag has its MLflow status."""
        params, tags, metrics = run.data.params, run.data.tags, run.data.metrics
        values: dict[str, Any] = {}
        taken: set[str] = set()
        metric = params.get("metric") or None
        for f in fields(cls):
            meta = f.metadata
            if "param" in meta or "tag" in meta:
                text = tags.get(meta["tag"]) if meta.get("tag") else None
                if text is None and meta.get("param"):
                    text = params.get(meta["param"])
                taken.add(meta.get("param") or "")
                if text is not None and text != "":
                    values[f.name] = _parse(f.type, text, f.name)
            elif "metric" in meta and metric:
                key = meta["metric"](metric)
                values[f.name] = metrics.get(key, metrics.get(metric) if f.name == "final"
                                             else None)
        status = tags.get(Tag.STATUS, "").strip().lower()
        values["status"] = (TrialStatus(status) if status in _READ_STATUSES
                            else _RUN_STATUS.get(run.info.status, TrialStatus.FAILED))
        values.setdefault("family", values.get("space"))
        values["baseline"] = values.get("baseline", False) or values["family"] == "baseline"
        return cls(name=run.info.run_name or tags.get("mlflow.runName", ""),
                   settings={k: v for k, v in params.items() if k not in taken},
                   run_id=run.info.run_id, end_ms=run.info.end_time,
                   latest=dict(metrics), **values)

    def planned(self) -> TrialRecord:
        """This record as planned: without how it ended or where it is in MLflow."""
        return replace(self, status=None, steps=None, final=None, best=None,
                       parent_run_id=None, trial_id=None, run_id=None, end_ms=None, latest={})


def outcome_to_mlflow(*, metric: str, status: TrialStatus, steps: int,
                      final_value: object) -> tuple[dict[str, str], dict[str, float]]:
    """``(tags, metrics)`` a trial's end adds: its status, steps and ``final_<metric>``
    (where the last value is a finite number; ``best_<metric>`` is in every report)."""
    record = TrialRecord(name="", metric=metric, status=status, steps=steps,
                         final=float(final_value) if _finite(final_value) else None)
    _, tags, metrics = record.to_mlflow()
    return ({k: tags[k] for k in (Tag.STATUS, Tag.STEPS)},
            {k: v for k, v in metrics.items() if k == final(metric)})


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return param_value(value)


def _parse(kind: Any, text: str, name: str) -> Any:
    """``text`` as the field's type (``int | None`` -> int); a number that does not parse
    (a hand-edited run) reads as missing."""
    kind = str(kind)
    if kind.startswith("tuple"):
        return tuple(t for t in text.split(",") if t)
    if kind.startswith("bool"):
        return text.strip().lower() == "true"
    if kind.startswith("TrialStatus"):
        return None  # read separately, with the MLflow status as its fallback
    if kind.startswith(("int", "float")):
        try:
            value = float(text)
        except ValueError:
            return None
        if kind.startswith("float"):
            return value
        return int(value) if math.isfinite(value) and value == int(value) else None
    return text
