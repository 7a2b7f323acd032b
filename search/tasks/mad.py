"""The ``mad`` task: score each order on MAD's synthetic tasks, a proxy of its LM quality.

The ``model`` section is a language model's (``d_model: 128`` is MAD's width); its
vocabulary and context come from the tasks. The ``data`` section picks the tasks and the
protocol (:class:`~sublayer_search.models.mad.settings.MadData`). A trial reports
``mad_acc`` (the mean accuracy over the tasks, higher is better) and ``acc_<task>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.mad.settings import TASKS, MadData, MadSpec, runs
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.problems import Problem
from sublayer_search.search.core.variant import Variant, VariantCandidate
from sublayer_search.search.tasks.base import Task, validate_section
from sublayer_search.search.tasks.lm import LMTask
from sublayer_search.search.tasks.registry import register
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.records import best

if TYPE_CHECKING:
    from sublayer_search.models.training_loop import FitResult, Reporter

__all__ = ["MadTask"]

METRIC = "mad_acc"


@register
class MadTask(Task[ModelConfig, MadData, None, MadSpec]):
    """Orders scored on the MAD proxy tasks; the baseline is ``(sf)^n`` at the pool's budget."""

    name = "mad"
    kind = "lm"
    checkpoints = False  # a proxy trial takes minutes: it starts again
    refusals = {
        "fsdp": "a proxy model is small: one worker trains it (task mad)",
        "supernet": "a supernet ranks language-model orders on a corpus: task lm",
        "proxy": "a proxy sweep (task: mad)",
    }

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> ModelConfig | None:
        for key in ("vocab_size", "context"):
            if key in raw:
                problems.append(Problem(f"model.{key}", raw[key], "no value here: each MAD "
                                        "task sets the vocabulary and sequence length"))
        raw = {k: v for k, v in raw.items() if k not in ("vocab_size", "context")}
        return LMTask().template({"context": 8, **raw}, problems)

    def data(self, raw: dict[str, Any], problems: list[Problem]) -> MadData | None:
        return validate_section(MadData, raw, "data", problems)

    def metric(self, data: MadData) -> str:
        return METRIC

    def reported_metrics(self, data: MadData) -> frozenset[str]:
        tasks = {f"acc_{t}" for t in data.tasks}
        return frozenset({METRIC, best(METRIC), "train_loss", "lr", "runs", "proxy_seconds",
                          *tasks})

    def space_problem(self, space_type: str) -> str | None:
        return LMTask().space_problem(space_type)

    def baseline(self, pool: Sequence[Candidate], template: ModelConfig | None,
                 problems: list[Problem]) -> VariantCandidate | None:
        return LMTask().baseline(pool, template, problems)

    def resolve(self, template: ModelConfig, data: MadData, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> ModelConfig:
        if base is not None:
            template = replace(template, order=base.order)
        if notes is not None:
            notes.append(protocol_note(data))
        return replace(template, vocab_size=data.vocab_size, context=data.context)

    def model_for(self, template: ModelConfig, variant: Variant) -> ModelConfig:
        return replace(template, order=variant.order)

    def spec(self, model: ModelConfig, data: MadData, train: TrainConfig,
             extra: None) -> MadSpec:
        return MadSpec(model=model, data=data, train=train)

    def unit_costs(self, model: ModelConfig) -> tuple[float, float]:
        return LMTask().unit_costs(model)

    def row(self, model: ModelConfig, variant: Variant) -> dict[str, Any]:
        """As a language model's, at the largest vocabulary and context of the tasks."""
        return LMTask().row(model, variant)

    def flat(self, spec: MadSpec) -> dict[str, Any]:
        return spec.flat()

    def fit(self, spec: MadSpec, report: Reporter, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> FitResult:
        from sublayer_search.models.mad.workload import fit  # torch: only to train

        return fit(spec, report)


def protocol_note(data: MadData) -> str:
    """What one trial of ``data``'s protocol trains, for the dry run."""
    groups = list(runs(data, TrainConfig()))
    n_runs = sum(len(group) for group in groups)
    tasks = ", ".join(t for t in TASKS if t in data.tasks)
    if data.protocol == "reduced":
        return (f"data.protocol: reduced: {len(groups)} setting(s), one per task ({tasks}), "
                "each one run as the train section says (steps, batch_size, lr, weight_decay)")
    steps = sum(run.train.steps for group in groups for run in group)
    return (f"data.protocol: full: {len(groups):,} settings of {tasks}, {n_runs:,} runs "
            f"(MAD's learning-rate x weight-decay grid), {steps:,} optimizer steps of batch "
            "128 per order; the train section's steps, batch_size, lr and weight_decay are "
            "the protocol's")
