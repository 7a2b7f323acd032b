"""What differs between language-model and translation sweeps.

A :class:`Task` turns the ``model``/``data``/``translation`` sections of an experiment
into configs, says which alphabet the spaces use, which baseline to train, how to
build one trial's spec and table row, and which ``fit`` trains it. The sweep machinery
(plan, searchers, Ray, MLflow) is the same for both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pydantic

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.config import ModelConfig, model_preset
from sublayer_search.models.data import DataConfig, DataError, corpus_info, load_corpus
from sublayer_search.models.data.download import cache_root, resolve_files
from sublayer_search.models.data.registry import get_spec
from sublayer_search.models.train import TrainConfig, TrialSpec, fit, main_metric
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.cost import units
from sublayer_search.spaces.order import counts, interleaved

from .problems import Problem, from_exception, from_validation_error

__all__ = ["Task", "LMTask", "TranslationTask", "task_for", "build"]

_PLACEHOLDER = "sf"


def build(cls: Any, raw: Any, prefix: str, problems: list[Problem]) -> Any:
    """Validate ``raw`` into dataclass ``cls`` with pydantic, collecting problems.

    The dataclass sits in a wrapper model that forbids unknown keys (pydantic applies
    the enclosing model's ``extra`` rule to nested stdlib dataclasses).
    """
    wrapper = pydantic.create_model("Section", __config__=pydantic.ConfigDict(extra="forbid"),
                                    section=(cls, ...))
    try:
        return wrapper.model_validate({"section": raw if raw is not None else {}}).section
    except pydantic.ValidationError as err:
        problems.extend(from_validation_error(err, prefix, strip=1))
    except ValueError as exc:
        problems.append(from_exception(exc, prefix, raw))
    return None


def f_units(d_model: int, d_ff: int) -> float:
    """Cost of one ``f`` in units of one ``s`` (2 at d_ff = 4d)."""
    return (2 * d_model * d_ff) / (4 * d_model**2)


class Task:
    """The interface both tasks implement (see the module docstring)."""

    name: str = ""
    kind: str = "lm"
    mode: str = "min"
    fit: Callable[..., Any]

    def data(self, raw: Any, problems: list[Problem]) -> Any:
        raise NotImplementedError

    def metric(self, data: Any) -> str:
        raise NotImplementedError

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> Any:
        raise NotImplementedError

    def space_args(self, space: str,
                   args: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(model kind for the space's alphabet, the space's own arguments, extra params
        recorded on each of its candidates)."""
        return self.kind, args, {}

    def baseline(self, pool: Sequence[Candidate], template: Any,
                 problems: list[Problem]) -> Candidate | None:
        raise NotImplementedError

    def resolve(self, template: Any, data: Any, base: Candidate | None,
                problems: list[Problem], notes: list[str]) -> Any:
        """The template with the baseline's order and the corpus vocabulary filled in.

        With ``notes`` not None (a dry run) a corpus that cannot be read yet gives an
        estimated vocabulary and a note instead of a problem.
        """
        raise NotImplementedError

    def model_for(self, template: Any, order: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def spec(self, model: Any, data: Any, train: TrainConfig, extra: Any) -> Any:
        raise NotImplementedError

    def row(self, model: Any, order: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class LMTask(Task):
    """Decoder-only language models (``OrderedLM``) on a corpus of the registry."""

    name, kind, mode = "lm", "lm", "min"
    fit = staticmethod(fit)

    def data(self, raw: Any, problems: list[Problem]) -> DataConfig | None:
        data = build(DataConfig, raw, "data", problems)
        if data is None:
            return None
        try:
            resolve_files(replace(data, download=False), get_spec(data.name))
        except DataError as exc:
            if not data.download:
                problems.append(Problem("data.name", data.name, f"an available corpus: {exc}"))
        return data

    def metric(self, data: DataConfig) -> str:
        return main_metric(data.resolved_level)

    @staticmethod
    def _obtain(data: DataConfig, problems: list[Problem], notes: list[str] | None) -> bool:
        """A corpus that is not on disk is downloaded now, by the driver, before Ray starts:
        a failed download is a problem of the file, not of every trial (``--dry-run``
        only notes it)."""
        spec = get_spec(data.name)
        try:
            resolve_files(replace(data, download=False), spec)
            return True
        except DataError:
            pass
        if notes is not None:
            notes.append(f"data.name: {data.name} is not on disk here; the sweep downloads it "
                         f"into {cache_root(data) / data.name} before it starts")
            return True
        try:
            resolve_files(data, spec)
        except DataError as exc:
            problems.append(Problem("data.name", data.name, f"an available corpus: {exc}"))
            return False
        return True

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> ModelConfig | None:
        raw = dict(raw)
        if "order" in raw:
            problems.append(Problem("model.order", raw.pop("order"),
                                    "no order here: orders come from the space and the baseline"))
        preset = raw.pop("preset", None)
        try:
            if preset is not None:
                return model_preset(str(preset), order=_PLACEHOLDER, **raw)
            return ModelConfig.from_dict({"order": _PLACEHOLDER, **raw})
        except (ValueError, TypeError) as exc:
            problems.append(from_exception(exc, "model", value=raw))
            return None

    def baseline(self, pool: Sequence[Candidate], template: ModelConfig | None,
                 problems: list[Problem]) -> Candidate | None:
        if not pool:
            return None
        fu = f_units(template.d_model, template.d_ff) if template is not None else 2.0
        budgets = sorted({units(c.order, f_units=fu) for c in pool})
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
        return Candidate(order=interleaved(int(n)), space="baseline", name=f"interleaved{int(n)}",
                         baseline=True)

    def resolve(self, template: ModelConfig, data: DataConfig, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> ModelConfig:
        if base is not None:
            template = replace(template, order=base.order)
        if not self._obtain(data, problems, notes):
            return template
        if template.vocab_size is None:
            vocab = corpus_info(data.name).vocab_size
            if vocab is None:
                try:
                    vocab = load_corpus(data).vocab_size
                except (DataError, OSError) as exc:
                    problems.append(Problem("data.name", data.name, f"a readable corpus: {exc}"))
                    return template
            template = template.with_vocab(vocab)
        return template

    def model_for(self, template: ModelConfig, order: str, params: dict[str, Any]) -> ModelConfig:
        return replace(template, order=order)

    def spec(self, model: ModelConfig, data: DataConfig, train: TrainConfig,
             extra: Any) -> TrialSpec:
        return TrialSpec(model=model, data=data, train=train)

    def row(self, model: ModelConfig, order: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"units": units(order, f_units=f_units(model.d_model, model.d_ff)),
                "params": param_count(model), "flops_per_token": flops_per_token(model)}


_IOT_KEYS = ("tau_start", "tau_end", "anneal_steps", "c1", "c2", "floor")


class TranslationTask(Task):
    """Encoder–decoder models (``OrderedSeq2Seq``, ``IOTSeq2Seq``) on a parallel corpus.

    Spaces take a ``side`` argument (``decoder``, the default, or ``encoder``) except
    ``iot_subsets``, whose ``stack`` says it. The baseline is the standard Transformer
    (``(sf)^n`` encoder, ``(scf)^n`` decoder) with as many layers as the space's orders.
    """

    name, kind, mode = "translation", "decoder", "max"

    def __init__(self) -> None:
        self.iot_settings: dict[str, Any] = {}
        """IOT routing settings from the model section (tau_start, c1, …)."""

    @property
    def fit(self) -> Callable[..., Any]:  # type: ignore[override]
        from sublayer_search.models.translate import fit_translation

        return fit_translation

    def data(self, raw: Any, problems: list[Problem]) -> Any:
        from sublayer_search.models.data.parallel import ParallelDataConfig

        return build(ParallelDataConfig, raw, "data", problems)

    def metric(self, data: Any) -> str:
        return "val_bleu"

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> Any:
        from sublayer_search.models.seq2seq import Seq2SeqConfig, seq2seq_preset

        raw = dict(raw)
        self.iot_settings = {k: raw.pop(k) for k in _IOT_KEYS if k in raw}
        preset = raw.pop("preset", None)
        try:
            if preset is not None:
                return seq2seq_preset(str(preset), **raw)
            return Seq2SeqConfig.from_dict({"encoder_order": "sf", "decoder_order": "scf", **raw})
        except (ValueError, TypeError) as exc:
            problems.append(from_exception(exc, "model", value=raw))
            return None

    def space_args(self, space: str,
                   args: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        args = dict(args)
        if space == "iot_subsets":
            return "decoder", args, {}
        side = args.pop("side", "decoder")
        if side not in ("encoder", "decoder"):
            from sublayer_search.spaces.errors import SpaceError

            raise SpaceError("side", side, "encoder or decoder")
        return side, args, {"side": side}

    def baseline(self, pool: Sequence[Candidate], template: Any,
                 problems: list[Problem]) -> Candidate | None:
        if not pool:
            return None
        layers = sorted({_layers(c) for c in pool})
        if len(layers) != 1:
            problems.append(Problem("baseline.enabled", True,
                                    f"false: the space mixes models of {layers} layers"))
            return None
        n = layers[0]
        return Candidate(order=interleaved(n, kind="decoder"), space="baseline",
                         name=f"transformer{n}", params={"side": "decoder", "layers": n},
                         baseline=True)

    def resolve(self, template: Any, data: Any, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> Any:
        from sublayer_search.models.data.parallel import load_parallel, resolve_parallel_files

        if base is not None:
            n = base.params["layers"]
            template = replace(template, encoder_order=interleaved(n),
                               decoder_order=base.order)
        try:  # on disk? else the driver downloads it now (see LMTask._obtain)
            resolve_parallel_files(replace(data, download=False))
        except DataError:
            if notes is not None:
                notes.append(f"data.name: {data.name} is not on disk here; the sweep downloads "
                             "it before it starts")
            else:
                try:
                    resolve_parallel_files(data)
                except DataError as exc:
                    problems.append(Problem("data.name", data.name, f"an available corpus: {exc}"))
                    return template
        if template.src_vocab_size is None or template.tgt_vocab_size is None:
            try:
                corpus = load_parallel(data)
            except (ValueError, OSError) as exc:
                if notes is None:
                    problems.append(Problem("data.name", data.name, f"a readable corpus: {exc}"))
                    return template
                notes.append(f"data.name: {data.name} is not readable here, so parameter counts "
                             f"assume a vocabulary of data.vocab_size = {data.vocab_size} "
                             f"(a sweep checks the corpus again): {exc}")
                return template.with_vocab(data.vocab_size, data.vocab_size)
            template = template.with_vocab(corpus.src_vocab_size, corpus.tgt_vocab_size)
        return template

    def model_for(self, template: Any, order: str, params: dict[str, Any]) -> Any:
        from sublayer_search.models.iot import IOTConfig
        from sublayer_search.models.seq2seq import Seq2SeqDims

        if "subset" in params:
            dims = {f.name: getattr(template, f.name) for f in dataclasses.fields(Seq2SeqDims)}
            stack = params.get("stack", "decoder")
            codes = {f"{stack}_codes": tuple(params["codes"])}
            return IOTConfig(**dims, encoder_layers=params["layers"],
                             decoder_layers=params["layers"], **codes, **self.iot_settings)
        side = params.get("side", "decoder")
        return replace(template, **{f"{side}_order": order})

    def spec(self, model: Any, data: Any, train: TrainConfig, extra: Any) -> Any:
        from sublayer_search.models.translate import TranslationSpec

        return TranslationSpec(model=model, data=data, train=train, translation=extra)

    def row(self, model: Any, order: str, params: dict[str, Any]) -> dict[str, Any]:
        from sublayer_search.models.seq2seq import seq2seq_flops_per_token
        from sublayer_search.models.translate import translation_param_count

        fu = f_units(model.d_model, model.d_ff)
        base = model.base_config() if hasattr(model, "base_config") else model  # IOT: one path
        return {"units": units(order, f_units=fu), "params": translation_param_count(model),
                "flops_per_token": seq2seq_flops_per_token(base)}


def _layers(cand: Candidate) -> int:
    if "layers" in cand.params:
        return int(cand.params["layers"])
    return counts(cand.order)["f"]


def task_for(name: str) -> Task:
    return TranslationTask() if name == "translation" else LMTask()
