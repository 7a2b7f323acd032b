"""The ``lm`` task: decoder-only language models (``OrderedLM``) on a corpus of the registry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sublayer_search.models.accounting import active_param_count, flops_per_token, param_count
from sublayer_search.models.config import ModelConfig, model_preset
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.data.corpus import (
    check_text_files,
    load_corpus,
    vocab_size_on_disk,
)
from sublayer_search.models.data.download import cache_root, resolve_files
from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.registry import corpus_info, get_spec
from sublayer_search.models.specs import TrialSpec, main_metric
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.variant import Variant, VariantCandidate
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.cost import f_units_for, kind_units_of, units
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.order import interleaved
from sublayer_search.spaces.registry import ALL_SPACES

if TYPE_CHECKING:
    from sublayer_search.models.training_loop import FitResult, Reporter

from sublayer_search.search.core.problems import Problem, problems_from
from sublayer_search.search.tasks.base import (
    Task,
    fetch_into_data_dir,
    obtain_corpus,
    validate_section,
)
from sublayer_search.search.tasks.registry import register

__all__ = ["LMTask"]


@register
class LMTask(Task[ModelConfig, DataConfig, None, TrialSpec]):
    """Decoder-only language models; the baseline is ``(sf)^n`` at the pool's budget."""

    name = "lm"
    kind = "lm"

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> ModelConfig | None:
        raw = dict(raw)
        if "order" in raw:
            problems.append(Problem("model.order", raw.pop("order"),
                                    "no order here: orders come from the space and the baseline"))
        preset = raw.pop("preset", None)
        stand_in = interleaved(1)  # until the baseline's order is known (resolve)
        try:
            if preset is not None:
                return model_preset(str(preset), order=stand_in, **raw)
            return ModelConfig.from_dict({"order": stand_in, **raw})
        except (ValueError, TypeError) as exc:
            problems.extend(problems_from(exc, "model", value=raw))
            return None

    def data(self, raw: dict[str, Any], problems: list[Problem]) -> DataConfig | None:
        data = validate_section(DataConfig, raw, "data", problems)
        if data is None:
            return None
        try:
            resolve_files(replace(data, download=False), get_spec(data.name))
        except DataError as exc:
            if not data.download:
                problems.append(Problem("data.name", data.name, f"an available corpus: {exc}"))
        return data

    def extra(self, raw: dict[str, Any], problems: list[Problem]) -> None:
        if raw:
            problems.append(Problem("translation", raw, "no translation section in an lm "
                                    "experiment (set task: translation)"))

    def corpus_on_disk(self, data: DataConfig) -> list[Path]:
        return list(resolve_files(replace(data, download=False), get_spec(data.name)).values())

    def fetch_corpus(self, data: DataConfig) -> list[Path]:
        return fetch_into_data_dir(data, lambda cfg: resolve_files(cfg, get_spec(cfg.name)))

    def metric(self, data: DataConfig) -> str:
        return main_metric(data.resolved_level)

    def space_problem(self, space_type: str) -> str | None:
        if ALL_SPACES[space_type].order_sets:  # one model holds several orders: IOT
            return f"a language-model space ({space_type} needs task: translation)"
        return None

    def baseline(self, pool: Sequence[Candidate], template: ModelConfig | None,
                 problems: list[Problem]) -> VariantCandidate | None:
        if not pool:
            return None
        fu = f_units_for(template.d_model, template.d_ff) if template is not None else 2.0
        dims = template.dims if template is not None else None
        try:
            budgets = sorted({units(c.order, f_units=fu, dims=dims) for c in pool})
        except SpaceError:  # hybrid kinds, and no model to weigh them by
            problems.append(Problem("baseline.order", None, "an explicit baseline order: "
                                    "the space's hybrid kinds weigh by the model section"))
            return None
        if len(budgets) != 1:
            problems.append(Problem("baseline.order", None,
                                    f"an explicit baseline order: the space mixes budgets {budgets}"))
            return None
        n, rest = divmod(budgets[0], 1 + fu)
        if rest or n < 1:
            problems.append(Problem("baseline.order", None,
                                    f"an explicit baseline order: a budget of {budgets[0]:g} units "
                                    f"is not a whole number of (sf) layers ({1 + fu:g} units each)"))
            return None
        order = interleaved(int(n))
        return VariantCandidate(order=order, space="baseline", name=f"interleaved{int(n)}",
                                baseline=True, variant=Variant(order=order))

    def resolve(self, template: ModelConfig, data: DataConfig, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> ModelConfig:
        if base is not None:
            template = replace(template, order=base.order)
        spec = get_spec(data.name)
        if not obtain_corpus(data.name, lambda: resolve_files(replace(data, download=False), spec),
                             lambda: resolve_files(data, spec), problems, notes,
                             where=str(cache_root(data) / data.name)):
            return template
        try:  # trials would fail on a binary or non-UTF-8 corpus: say so now
            check_text_files(data)
        except DataError as exc:
            field = "data.path" if data.path else "data.name"
            problems.append(Problem(field, data.path or data.name, f"a UTF-8 text corpus: {exc}"))
            return template
        if template.vocab_size is None:
            vocab = corpus_info(data.name).vocab_size
            if vocab is None:
                try:  # a dry run counts it without building the token cache
                    vocab = (vocab_size_on_disk(data) if notes is not None
                             else load_corpus(data).vocab_size)
                except (DataError, OSError) as exc:
                    problems.append(Problem("data.name", data.name, f"a readable corpus: {exc}"))
                    return template
            template = template.with_vocab(vocab)
        return template

    def model_for(self, template: ModelConfig, variant: Variant) -> ModelConfig:
        return replace(template, order=variant.order)

    def spec(self, model: ModelConfig, data: DataConfig, train: TrainConfig,
             extra: None) -> TrialSpec:
        return TrialSpec(model=model, data=data, train=train)

    def unit_costs(self, model: ModelConfig) -> tuple[float, float]:
        return f_units_for(model.d_model, model.d_ff), 1.0

    def row(self, model: ModelConfig, variant: Variant) -> dict[str, Any]:
        row: dict[str, Any] = {"units": units(variant.order, f_units=f_units_for(model.d_model, model.d_ff),
                              dims=model.dims),
               "params": param_count(model), "flops_per_token": flops_per_token(model)}
        active = active_param_count(model)
        if active != row["params"]:  # experts: a token passes through some of them only
            row["active_params"] = active
        weighed = kind_units_of(variant.order, model.dims)
        if weighed:  # hybrid kinds: their s-units, for the halves study
            row["kind_units"] = weighed
        return row

    def reported_metrics(self, data: DataConfig) -> frozenset[str]:
        return super().reported_metrics(data) | {"guidance_loss"}

    def flat(self, spec: TrialSpec) -> dict[str, Any]:
        """Every setting; guidance as ``model.guidance.mode`` / ``.blocks`` / ``.alpha`` /
        ``.pairing``."""
        return spec.flat()

    def fit(self, spec: TrialSpec, report: Reporter, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> FitResult:
        from sublayer_search.models.lm_workload import fit  # torch: only to train

        return fit(spec, report, checkpoint_dir=checkpoint_dir, resume_from=resume_from)
