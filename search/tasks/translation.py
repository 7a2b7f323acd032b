"""The ``translation`` task: encoder–decoder models (``OrderedSeq2Seq``, ``IOTSeq2Seq``).

Spaces take a ``side`` argument (``decoder``, the default, or ``encoder``) except
``iot_subsets``, whose ``stack`` says it. The baseline is the standard Transformer
(``(sf)^n`` encoder, ``(scf)^n`` decoder) with as many layers as the space's orders.

The stack a sweep does not search keeps the order the model section gives (a 36+6 model
keeps its 36-layer encoder), in the baseline, a reordered model and an IOT model alike:
an IOT subset reorders the blocks of its ``stack``, stacked ``layers`` times, and the
other stack keeps its given depth and block (``(sf)^36`` is 36 blocks of code 1). An
order there that is not one block stacked (a sandwich) cannot be an IOT stack: refused.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sublayer_search.analysis.store.trial_record import ROUTING_ARTIFACT
from sublayer_search.models.data.download import cache_root
from sublayer_search.models.data.parallel.config import ParallelDataConfig, parallel_info
from sublayer_search.models.data.parallel.corpus import built_vocab_sizes, load_parallel
from sublayer_search.models.data.parallel.files import resolve_parallel_files
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.config import (
    Seq2SeqConfig,
    Seq2SeqDims,
    seq2seq_flops_per_token,
    seq2seq_preset,
)
from sublayer_search.models.seq2seq.iot_config import IOTConfig
from sublayer_search.models.specs import TranslationConfig, TranslationSpec, translation_param_count
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.variant import Subset, Variant, VariantCandidate, plain_identity
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.cost import f_units_for, units
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.iot_subsets import DECODER_BLOCKS, ENCODER_BLOCKS
from sublayer_search.spaces.order import counts, interleaved
from sublayer_search.spaces.records import route_share_code
from sublayer_search.spaces.registry import ALL_SPACES

if TYPE_CHECKING:
    from sublayer_search.models.training_loop import FitResult, Reporter

from sublayer_search.search.core.problems import Problem, from_exception, problems_from
from sublayer_search.search.tasks.base import (
    ModelSection,
    Task,
    fetch_into_data_dir,
    obtain_corpus,
    validate_section,
)
from sublayer_search.search.tasks.registry import register

__all__ = ["TranslationTask"]

TranslationModel = Seq2SeqConfig | IOTConfig

_IOT_KEYS = ("tau_schedule", "tau_start", "tau_end", "anneal_steps", "tau_decay", "tau_interval",
             "c1", "c2", "floor", "clamp", "gumbel_from", "explore_clamp", "predictor_dropout",
             "predictor_dropout_at", "predictor_init_std", "path_smoothing", "path_passes",
             "routing")


@register
class TranslationTask(Task[TranslationModel, ParallelDataConfig, TranslationConfig,
                           TranslationSpec]):
    """Encoder–decoder models on a parallel corpus; main metric ``val_bleu``."""

    name = "translation"
    kind = "decoder"
    section = "translation"
    refusals = {
        "fsdp": "FSDP shards language models only (task: lm); IOT routes each input through "
                "some layers only",
        "supernet": "a supernet ranks language-model orders: task lm",
    }

    def __init__(self) -> None:
        self.iot_settings: dict[str, Any] = {}
        """IOT routing settings from the model section (tau_start, c1, …)."""
        self.given_orders: frozenset[str] = frozenset()
        """``encoder_order`` / ``decoder_order`` written in the model section: the stack the
        sweep does not search keeps them (the baseline included)."""
        self.iot_stacks: set[str] = set()
        """The stacks ``iot_subsets`` spaces reorder (the other one must be one block)."""

    def own_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The IOT routing settings (taken out) and which stack orders are written."""
        return {"iot": {k: raw.pop(k) for k in _IOT_KEYS if k in raw},
                "given_orders": frozenset(k for k in ("encoder_order", "decoder_order")
                                          if k in raw)}

    def bind(self, model: ModelSection[TranslationModel]) -> None:
        self.iot_settings = dict(model.own.get("iot", {}))
        self.given_orders = frozenset(model.own.get("given_orders", ()))

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> Seq2SeqConfig | None:
        raw = dict(raw)
        preset = raw.pop("preset", None)
        try:
            if preset is not None:
                return seq2seq_preset(str(preset), **raw)
            return Seq2SeqConfig.from_dict({"encoder_order": interleaved(1, kind="encoder"),
                                            "decoder_order": interleaved(1, kind="decoder"),
                                            **raw})
        except (ValueError, TypeError) as exc:
            problems.extend(problems_from(exc, "model", value=raw))
            return None

    def data(self, raw: dict[str, Any], problems: list[Problem]) -> ParallelDataConfig | None:
        return validate_section(ParallelDataConfig, raw, "data", problems)

    def extra(self, raw: dict[str, Any], problems: list[Problem]) -> TranslationConfig | None:
        return validate_section(TranslationConfig, raw, "translation", problems)

    def corpus_on_disk(self, data: ParallelDataConfig) -> list[Path]:
        return [p for pair in resolve_parallel_files(replace(data, download=False)).values()
                for p in pair]

    def fetch_corpus(self, data: ParallelDataConfig) -> list[Path]:
        return fetch_into_data_dir(data, resolve_parallel_files)

    def metric(self, data: ParallelDataConfig) -> str:
        return "val_bleu"

    def reports(self, name: str, data: ParallelDataConfig) -> bool:
        """Besides the common metrics: IOT's ``tau`` and ``route_share_<code>``."""
        return (super().reports(name, data) or name in ("tau", "guidance_loss")
                or route_share_code(name) is not None)

    def space_args(self, space: str,
                   args: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
        args = dict(args)
        if ALL_SPACES[space].order_sets:  # IOT subsets: one stack's set of orders
            self.iot_stacks.add(str(args.get("stack", "decoder")))
            return "decoder", args, None
        side = args.pop("side", "decoder")
        if side not in ("encoder", "decoder"):
            raise SpaceError("side", side, "encoder or decoder")
        return side, args, side

    def settings(self) -> dict[str, Any]:
        """The IOT routing settings of the model section (tau_schedule, clamp, …); with an
        IOT space and the other stack's order given, ``iot_keeps`` (that order's field):
        IOT models planned before they kept it had the subset's depth there, and reuse
        must never take one of them."""
        kept = sorted(f"{'encoder' if stack == 'decoder' else 'decoder'}_order"
                      for stack in self.iot_stacks)
        kept = [k for k in kept if k in self.given_orders]
        # `routing: authors` follows their criterion since issue 39 (dropout on the logits,
        # summed smoothing, a pass per path): runs of its older meaning are never reused
        detail = {"routing_detail": "criterion"} if self.iot_settings.get("routing") == \
            "authors" else {}
        return {**self.iot_settings, **({"iot_keeps": ",".join(kept)} if kept else {}), **detail}

    def baseline(self, pool: Sequence[Candidate], template: TranslationModel | None,
                 problems: list[Problem]) -> VariantCandidate | None:
        if not pool:
            return None
        layers = sorted({_layers(c) for c in pool})
        if len(layers) != 1:
            problems.append(Problem("baseline.enabled", True,
                                    f"false: the space mixes models of {layers} layers"))
            return None
        sides = {_side(c) for c in pool}
        side = sides.pop() if len(sides) == 1 else "decoder"  # the searched stack's baseline
        return _standard(interleaved(layers[0], kind=side), f"transformer{layers[0]}", side)

    def explicit_baseline(self, order: str) -> VariantCandidate:
        return _standard(order, f"baseline_{len(order)}", "decoder" if "c" in order else "encoder")

    def identity(self, variant: Variant) -> str:
        """An IOT subset of one standard block (code 1) is the plain model itself; a
        guided model adds its guidance label."""
        subset = variant.subset
        if subset is None or (subset.name == "1" and subset.stack == "decoder"):
            return plain_identity(variant)
        return f"{subset.stack}:{subset.name}" + (f"+{variant.label}" if variant.guided else "")

    def resolve(self, template: TranslationModel, data: ParallelDataConfig,
                base: Candidate | None, problems: list[Problem],
                notes: list[str] | None = None) -> TranslationModel:
        if base is not None and isinstance(template, Seq2SeqConfig):
            # the baseline's order on the searched stack; the other stack stays the one the
            # model section gives (a 36+6 model keeps its 36-layer encoder), else (sf)^n
            side = _side(base)
            other = "encoder" if side == "decoder" else "decoder"
            orders: dict[str, Any] = {f"{side}_order": base.order}
            if f"{other}_order" not in self.given_orders:
                orders[f"{other}_order"] = interleaved(base.params["layers"], kind=other)
            template = replace(template, **orders)
        for stack in sorted(self.iot_stacks & {"encoder", "decoder"}):
            try:  # the given order of the stack an IOT subset does not reorder
                _kept_stack(template, stack, 1, self.given_orders)
            except ConfigError as exc:
                problems.append(from_exception(exc))
        spec = parallel_info(data.name)
        if not obtain_corpus(data.name, lambda: resolve_parallel_files(replace(data, download=False)),
                             lambda: resolve_parallel_files(data), problems, notes,
                             where=str(cache_root(data) / data.name),
                             downloadable=bool(spec.urls) and data.download and data.path is None):
            return template
        if template.src_vocab_size is not None and template.tgt_vocab_size is not None:
            return template
        if notes is not None:  # a dry run reads a vocabulary already learned, never learns one
            sizes = built_vocab_sizes(data)
            if sizes is not None:
                return template.with_vocab(*sizes)
            self.estimate = (f"a vocabulary of {data.vocab_size} (data.vocab_size): the sweep "
                             f"learns the BPE vocabulary of {data.name} before it starts")
            return template.with_vocab(data.vocab_size, data.vocab_size)
        try:
            corpus = load_parallel(data)
        except (ValueError, OSError) as exc:
            problems.append(Problem("data.name", data.name, f"a readable corpus: {exc}"))
            return template
        return template.with_vocab(corpus.src_vocab_size, corpus.tgt_vocab_size)

    def model_for(self, template: TranslationModel, variant: Variant) -> TranslationModel:
        subset = variant.subset
        if subset is not None:
            return self._iot(template, subset)
        side: dict[str, Any] = {f"{variant.side or 'decoder'}_order": variant.order}
        return replace(template, **side)

    def _iot(self, template: TranslationModel, subset: Subset) -> IOTConfig:
        """The IOT model of ``subset``: its stack's blocks stacked ``subset.layers`` times,
        the other stack as the model section gives it (:func:`_kept_stack`)."""
        dims = {f.name: getattr(template, f.name) for f in dataclasses.fields(Seq2SeqDims)}
        settings: dict[str, Any] = {**dims, f"{subset.stack}_layers": subset.layers,
                                    f"{subset.stack}_codes": subset.codes,
                                    **_kept_stack(template, subset.stack, subset.layers,
                                                  self.given_orders),
                                    **self.iot_settings}
        return IOTConfig(**settings)

    def describe_models(self, models: Sequence[tuple[str, Variant, TranslationModel]],
                        ) -> list[str]:
        """``models: 1 baseline trial(s), 36+6 layers, … params; 4 IOT trial(s), 36+6
        layers, … params``: each kind of planned model's depths (encoder+decoder layers)
        and parameters (a range where they differ)."""
        groups: dict[tuple[str, str], list[int]] = {}
        for role, variant, model in models:
            kind = f"IOT {role}" if variant.subset is not None else role
            base = model.base_config() if isinstance(model, IOTConfig) else model
            depth = f"{_depth(base.encoder_order)}+{_depth(base.decoder_order)}"
            groups.setdefault((kind, depth), []).append(translation_param_count(model))
        mark = "~" if self.estimate else ""
        parts = []
        for (kind, depth), params in groups.items():
            low, high = min(params), max(params)
            counted = f"{mark}{low:,}" + (f" to {mark}{high:,}" if high != low else "")
            parts.append(f"{len(params)} {kind}(s), {depth} layers, {counted} params")
        return ["models: " + "; ".join(parts)] if parts else []

    def spec(self, model: TranslationModel, data: ParallelDataConfig, train: TrainConfig,
             extra: TranslationConfig | None) -> TranslationSpec:
        return TranslationSpec(model=model, data=data, train=train,
                               translation=extra if extra is not None else TranslationConfig())

    def unit_costs(self, model: TranslationModel) -> tuple[float, float]:
        return f_units_for(model.d_model, model.d_ff), 1.0

    def row(self, model: TranslationModel, variant: Variant) -> dict[str, Any]:
        fu = f_units_for(model.d_model, model.d_ff)
        base = model.base_config() if isinstance(model, IOTConfig) else model  # IOT: one path
        return {"units": units(variant.order, f_units=fu), "params": translation_param_count(model),
                "flops_per_token": seq2seq_flops_per_token(base),
                "stacks": f"enc {_counted(base.encoder_order)} | dec {_counted(base.decoder_order)}"}

    def tracking_params(self, model: TranslationModel, variant: Variant) -> dict[str, Any]:
        """Both orders of a plain model, the subset of an IOT model."""
        out: dict[str, Any] = {}
        for side in ("encoder", "decoder"):
            if hasattr(model, f"{side}_order"):
                out[f"{side}_order"] = getattr(model, f"{side}_order")
        subset = variant.subset
        if subset is not None:
            out.update(subset=subset.name, subset_size=len(subset.codes),
                       codes=",".join(str(c) for c in subset.codes),
                       orders=",".join(subset.orders))
        return out

    def result_artifacts(self, last: Mapping[str, Any]) -> dict[str, str]:
        """An IOT trial's BLEU of each split decoded with each order (its last report's
        ``routing_bleu``), as :data:`ROUTING_ARTIFACT`."""
        matrix = last.get("routing_bleu")
        if not isinstance(matrix, str | dict):
            return {}
        return {ROUTING_ARTIFACT: matrix if isinstance(matrix, str)
                else json.dumps(matrix, indent=1)}

    def flat(self, spec: TranslationSpec) -> dict[str, Any]:
        """Every setting; guidance as ``model.guidance.mode`` / ``.blocks`` / ``.alpha`` /
        ``.pairing``."""
        return spec.flat()

    def fit(self, spec: TranslationSpec, report: Reporter, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> FitResult:
        from sublayer_search.models.seq2seq.translation_workload import (
            fit_translation,  # torch: only to train
        )

        return fit_translation(spec, report, checkpoint_dir=checkpoint_dir,
                               resume_from=resume_from)


def _standard(order: str, name: str, side: str = "decoder") -> VariantCandidate:
    """The standard Transformer's ``order`` on ``side`` as the baseline (the other stack:
    the model section's, else interleaved; see ``resolve``)."""
    return VariantCandidate(order=order, space="baseline", name=name, baseline=True,
                            params={"layers": counts(order)["f"]},
                            variant=Variant(order=order, side=side))


def _side(cand: Candidate) -> str:
    """The stack a candidate reorders: its variant's side (an IOT subset's stack)."""
    if isinstance(cand, VariantCandidate):
        if cand.variant.subset is not None:
            return cand.variant.subset.stack
        return cand.variant.side or "decoder"
    return "decoder" if "c" in cand.order else "encoder"


def _kept_stack(template: TranslationModel, stack: str, layers: int,
                given: frozenset[str]) -> dict[str, Any]:
    """The IOT settings of the stack ``stack``'s subset does not reorder: the order the
    model section gives (its depth, and its block as that stack's one order), else the
    standard block as deep as ``layers``. Raises ConfigError for a given order that is
    not one block stacked."""
    other = "encoder" if stack == "decoder" else "decoder"
    if f"{other}_order" not in given:
        return {f"{other}_layers": layers}
    order = getattr(template, f"{other}_order")
    blocks = ENCODER_BLOCKS if other == "encoder" else DECODER_BLOCKS
    for code, block in blocks.items():
        n = len(order) // len(block)
        if n and block * n == order:
            return {f"{other}_layers": n, f"{other}_codes": (code,)}
    shapes = ", ".join(f"({b})^n" for b in blocks.values())
    raise ConfigError(f"model.{other}_order", order,
                      f"one {other} block stacked n times ({shapes}) when iot_subsets "
                      f"reorders the {stack}: an IOT model keeps the {other}'s depth and "
                      "repeats one block")


def _depth(order: str) -> int:
    """Layers of one stack: its ``f`` sublayers (a macaron layer's two halves: one)."""
    n = counts(order)
    return n["f"] + n.get("h", 0) // 2


def _counted(order: str) -> str:
    """``36 s 36 f``: the sublayer counts of one stack."""
    c = counts(order)
    return " ".join(f"{c[k]} {k}" for k in "scfh" if c.get(k))


def _layers(cand: Candidate) -> int:
    if isinstance(cand, VariantCandidate) and cand.variant.subset is not None:
        return cand.variant.subset.layers
    if "layers" in cand.params:
        return int(cand.params["layers"])
    return _depth(cand.order)
