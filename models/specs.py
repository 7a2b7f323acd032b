"""What defines one trial, without torch: :class:`TrialSpec` (a language model) and
:class:`TranslationSpec` (a translation model), their settings and parameter counts.

``sublayer sweep --dry-run`` plans a sweep from these alone; training lives in
:mod:`models.lm_workload` and :mod:`models.seq2seq.translation_workload` (which re-export these names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.data.parallel.config import ParallelDataConfig
from sublayer_search.models.errors import ConfigError, check, is_positive_int
from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.models.seq2seq.config import Seq2SeqConfig, seq2seq_param_count
from sublayer_search.models.seq2seq.iot_config import IOTConfig, iot_param_count
from sublayer_search.models.train_config import TrainConfig, flat_settings
from sublayer_search.spaces.records import main_metric_for_level

__all__ = [
    "TranslationConfig",
    "TranslationSpec",
    "TrialSpec",
    "guidance_flat",
    "main_metric",
    "translation_param_count",
]

main_metric = main_metric_for_level
"""``val_ppl`` for word-level corpora, ``val_bpc`` for characters and bytes."""


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """Everything that defines one trained model: order (in ``model``), data, training."""

    __pydantic_config__ = {"extra": "forbid"}

    model: ModelConfig
    data: DataConfig
    train: TrainConfig = field(default_factory=TrainConfig)

    def flat(self) -> dict[str, Any]:
        """``{"model.d_model": 64, "train.lr": 0.003, …}``: every setting, for tracking
        (guidance as ``model.guidance.mode``, ``.blocks``, ``.alpha``, ``.pairing``)."""
        return guidance_flat(flat_settings(self), self.model.guidance)


def guidance_flat(flat: dict[str, Any], guidance: GuidanceConfig) -> dict[str, Any]:
    """``flat`` with its ``model.guidance`` mapping spelled out as four params."""
    out = {k: v for k, v in flat.items() if k != "model.guidance"}
    return {**out, **guidance.flat()}


def _check(cond: bool, field_: str, value: object, expected: str) -> None:
    check(cond, f"translation.{field_}", value, expected)


BLEU_TOKENIZE = ("13a", "none")
"""``translation.bleu_tokenize`` choices (sacrebleu tokenisers)."""


@dataclass(frozen=True, kw_only=True)
class TranslationConfig:
    """Decoding and evaluation settings of a translation trial."""

    __pydantic_config__ = {"extra": "forbid"}

    beam: int = 5
    """Beam size for BLEU (1 = greedy)."""
    length_penalty: float = 1.0
    """Finished beam scores are divided by ``len^length_penalty``."""
    max_len: int = 200
    """Most generated target tokens, ``</s>`` included (also capped by the context)."""
    label_smoothing: float = 0.1
    """Label smoothing of the training loss (the validation loss is plain NLL)."""
    bleu_every: int | None = None
    """Compute BLEU at evaluations whose step is a multiple of this (and at the end);
    ``None`` = at every evaluation."""
    eval_sentences: int | None = None
    """Evaluate on the first this many validation pairs; ``None`` = ``train.eval_batches``
    batches, or the whole split."""
    eval_at_start: bool = False
    """Also evaluate (and report) the untrained model at step 0."""
    routing_bleu: bool = True
    """IOT: compute the routed-split × order BLEU matrix at the last evaluation."""
    max_tokens: int | None = None
    """Training batches of at most this many tokens per worker and micro-batch (fairseq's
    ``--max-tokens``: length-sorted batches, :func:`models.data.parallel.token_batches`),
    one drawn at random per micro-batch; ``None``: ``train.batch_size`` random pairs.
    ``train.batch_size`` then sets only the evaluation batch (``eval_batch_size``'s default)."""
    bleu_tokenize: str = "13a"
    """sacrebleu's tokenisation of BLEU: ``13a`` (sacrebleu's default, on detokenised
    text) or ``none``: the text as it is, as multi-bleu.perl scores fairseq's tokenised
    output and references (the IOT paper's BLEU on IWSLT14)."""
    test_bleu: bool = False
    """At the final evaluation also score the test split (``test_bleu``, ``test_loss``),
    where the corpus has one; the papers report the test split."""
    batch_multiple: int = 8
    """With ``max_tokens``: a full batch is cut to a multiple of this many pairs, the rest
    carried to the next batch, as fairseq's ``--required-batch-size-multiple`` (default 8)
    does; 1 cuts where the tokens run out (the product before issue 46)."""

    def __post_init__(self) -> None:
        _check(is_positive_int(self.beam), "beam", self.beam, "a positive integer")
        _check(is_positive_int(self.max_len), "max_len", self.max_len, "a positive integer")
        _check(
            isinstance(self.length_penalty, int | float) and math.isfinite(self.length_penalty),
            "length_penalty",
            self.length_penalty,
            "a finite number",
        )
        _check(
            isinstance(self.label_smoothing, int | float) and 0 <= self.label_smoothing < 1,
            "label_smoothing",
            self.label_smoothing,
            "a number in [0, 1)",
        )
        _check(self.bleu_tokenize in BLEU_TOKENIZE, "bleu_tokenize", self.bleu_tokenize,
               " or ".join(BLEU_TOKENIZE))
        _check(is_positive_int(self.batch_multiple), "batch_multiple", self.batch_multiple,
               "a positive integer")
        for name in ("bleu_every", "eval_sentences", "max_tokens"):
            value = getattr(self, name)
            _check(
                value is None or is_positive_int(value), name, value, "a positive integer or null"
            )
        for name in ("eval_at_start", "routing_bleu", "test_bleu"):
            _check(
                isinstance(getattr(self, name), bool), name, getattr(self, name), "true or false"
            )


@dataclass(frozen=True, kw_only=True)
class TranslationSpec:
    """Everything that defines one trained translation model."""

    __pydantic_config__ = {"extra": "forbid"}

    model: Seq2SeqConfig | IOTConfig
    data: ParallelDataConfig
    train: TrainConfig = field(default_factory=TrainConfig)
    translation: TranslationConfig = field(default_factory=TranslationConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.model, Seq2SeqConfig | IOTConfig):
            raise ConfigError("model", type(self.model).__name__, "a Seq2SeqConfig or IOTConfig")

    def flat(self) -> dict[str, Any]:
        """``{"model.d_model": 64, "translation.beam": 5, …}``: every setting, for tracking
        (guidance as ``model.guidance.mode``, ``.blocks``, ``.alpha``, ``.pairing``)."""
        return guidance_flat(flat_settings(self), self.model.guidance)


def translation_param_count(cfg: Seq2SeqConfig | IOTConfig) -> int:
    return iot_param_count(cfg) if isinstance(cfg, IOTConfig) else seq2seq_param_count(cfg)
