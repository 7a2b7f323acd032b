"""The MAD proxy's settings, without torch: its six tasks, a task's difficulty, the
``data`` section of a ``task: mad`` experiment and the two protocols.

Mechanistic Architecture Design (Poli et al., ICML 2024) ranks sequence-model designs by
six small synthetic tasks. A *setting* is one task at one difficulty; a *run* trains one
model on one setting with one learning rate and weight decay; an order's score is the
mean over tasks of the mean over a task's settings of the best accuracy over the
learning-rate × weight-decay grid (MAD's aggregate).

* ``full``: MAD's difficulty grid (its paper's appendix, "Manipulating task difficulty")
  × learning rates {1e-4, 5e-4, 1e-3} × weight decay {0, 0.1}, batch 128, 200 epochs,
  AdamW (0.9, 0.98), cosine decay: 4,836 runs per order.
* ``reduced``: one setting per task (MAD's easiest difficulty: vocabulary 16, sequences
  of 128, compression of 32, memorization of vocabulary 256; selective copying of 16
  tokens in 128, shorter than MAD's shortest, 256, which took 129 s a run against 38 s
  for a recall task), trained as the experiment's ``train`` section says (steps, batch,
  learning rate, weight decay). Chosen for cost, before any agreement was measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.errors import check, is_positive_int
from sublayer_search.models.train_config import TrainConfig, flat_settings

__all__ = ["FULL_LRS", "FULL_WEIGHT_DECAYS", "MadData", "MadSpec", "PROTOCOLS", "Run", "Setting",
           "TASKS", "full_settings", "reduced_settings", "runs", "score"]

TASKS = ("in_context_recall", "fuzzy_recall", "noisy_recall", "selective_copying",
         "compression", "memorization")
"""The six MAD tasks, in the order a trial runs them."""

PROTOCOLS = ("reduced", "full")

FULL_LRS = (1e-4, 5e-4, 1e-3)
FULL_WEIGHT_DECAYS = (0.0, 0.1)
FULL_BATCH = 128
FULL_EPOCHS = 200


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One task at one difficulty (the fields a task does not read keep their default)."""

    task: str
    seq_len: int = 128
    """Tokens per sample (the model's context)."""
    vocab: int = 16
    """Content tokens (recall tasks: half keys, half values)."""
    train_samples: int = 12_800
    noise_frac: float = 0.0
    """``noisy_recall``: share of the sequence that is noise tokens."""
    noise_vocab: int = 16
    """``noisy_recall``: noise tokens, apart from keys and values."""
    copy_tokens: int = 16
    """``selective_copying``: tokens to copy."""
    motif: int = 3
    """``fuzzy_recall``: longest key and value (1 to ``motif`` tokens each)."""

    def __post_init__(self) -> None:
        check(self.task in TASKS, "task", self.task, "one of " + ", ".join(TASKS))
        for name in ("seq_len", "vocab", "train_samples", "noise_vocab", "copy_tokens", "motif"):
            check(is_positive_int(getattr(self, name)), name, getattr(self, name),
                  "a positive integer")
        check(0 <= self.noise_frac < 1, "noise_frac", self.noise_frac, "a share in [0, 1)")
        check(self.vocab % 2 == 0 and self.vocab >= 2, "vocab", self.vocab,
              "an even number of tokens (half keys, half values)")
        check(self.task != "selective_copying" or self.copy_tokens < self.seq_len // 2,
              "copy_tokens", self.copy_tokens, f"fewer than half of seq_len ({self.seq_len})")

    @property
    def vocab_size(self) -> int:
        """Every token a model of this setting sees: content plus the task's own."""
        extra = {"noisy_recall": self.noise_vocab, "selective_copying": 2, "compression": 1}
        return self.vocab + extra.get(self.task, 0)

    @property
    def label(self) -> str:
        """``in_context_recall L128 V16 N12800`` (with the task's own knobs)."""
        own = {"noisy_recall": f" noise{self.noise_frac:g}", "selective_copying":
               f" copy{self.copy_tokens}"}.get(self.task, "")
        return f"{self.task} L{self.seq_len} V{self.vocab} N{self.train_samples}{own}"


def reduced_settings(tasks: tuple[str, ...] = TASKS) -> list[Setting]:
    """One setting per task: MAD's baseline difficulty."""
    base = {"in_context_recall": Setting(task="in_context_recall"),
            "fuzzy_recall": Setting(task="fuzzy_recall"),
            "noisy_recall": Setting(task="noisy_recall", noise_frac=0.2),
            "selective_copying": Setting(task="selective_copying", copy_tokens=16),
            "compression": Setting(task="compression", seq_len=32),
            "memorization": Setting(task="memorization", seq_len=32, vocab=256,
                                    train_samples=256)}
    return [base[t] for t in tasks]


def full_settings(tasks: tuple[str, ...] = TASKS) -> list[Setting]:
    """MAD's difficulty grid for ``tasks``."""
    samples = (12_800, 6_400, 3_200, 1_600, 800)
    vocabs = (16, 32, 64, 128)
    out: list[Setting] = []
    for task in tasks:
        if task in ("in_context_recall", "fuzzy_recall"):
            out += [Setting(task=task, seq_len=L, vocab=v, train_samples=n)
                    for L, n, v in itertools.product((128, 256, 512, 1024), samples, vocabs)]
        elif task == "noisy_recall":
            out += [Setting(task=task, seq_len=L, vocab=v, train_samples=n, noise_frac=f)
                    for L, n, v, f in itertools.product((128, 256, 512, 1024), samples, vocabs,
                                                        (0.2, 0.4, 0.6, 0.8))]
        elif task == "selective_copying":
            out += [Setting(task=task, seq_len=L, vocab=v, train_samples=n, copy_tokens=c)
                    for L, n, v, c in itertools.product((256, 512, 1024), samples, vocabs,
                                                        (16, 32, 64, 96))]
        elif task == "compression":
            out += [Setting(task=task, seq_len=L, vocab=v, train_samples=n)
                    for L, n, v in itertools.product((32, 64, 128, 256), samples, vocabs)]
        else:
            out += [Setting(task=task, seq_len=32, vocab=v, train_samples=256)
                    for v in (256, 512, 1024, 2048, 4096, 8192)]
    return out


@dataclass(frozen=True, kw_only=True)
class MadData:
    """The ``data`` section of a ``task: mad`` experiment: which tasks, which protocol."""

    __pydantic_config__ = {"extra": "forbid"}

    protocol: Literal["reduced", "full"] = "reduced"
    """``reduced``: one setting per task, trained per the ``train`` section; ``full``:
    MAD's difficulty and learning-rate × weight-decay grids (see the module doc)."""
    tasks: tuple[str, ...] = TASKS
    """Which of the six tasks to run (the score is their mean)."""
    seed: int = 0
    """Seed of the generated samples (a trial's training seed is ``train.seed``)."""
    test_samples: int = 1_280
    """Samples each run is scored on (MAD: 1,280)."""
    train_samples: int | None = None
    """``reduced``: samples each setting trains on instead of its own (a debug run's few);
    ``None``: the setting's (MAD's 12,800; memorization's 256)."""

    def __post_init__(self) -> None:
        check(self.protocol in PROTOCOLS, "protocol", self.protocol, " or ".join(PROTOCOLS))
        check(bool(self.tasks) and len(set(self.tasks)) == len(self.tasks)
              and set(self.tasks) <= set(TASKS), "tasks", list(self.tasks),
              "distinct task names among " + ", ".join(TASKS))
        check(isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0,
              "seed", self.seed, "a non-negative integer")
        check(is_positive_int(self.test_samples), "test_samples", self.test_samples,
              "a positive integer")
        check(self.train_samples is None or is_positive_int(self.train_samples),
              "train_samples", self.train_samples, "a positive integer or null")
        check(self.train_samples is None or self.protocol == "reduced", "train_samples",
              self.train_samples, "null with protocol full (its grid sets them)")

    @property
    def settings(self) -> list[Setting]:
        if self.protocol == "full":
            return full_settings(self.tasks)
        chosen = reduced_settings(self.tasks)
        n = self.train_samples
        return chosen if n is None else [replace(s, train_samples=n) for s in chosen]

    @property
    def context(self) -> int:
        """The longest sequence any setting trains: the model's context."""
        return max(s.seq_len for s in self.settings)

    @property
    def vocab_size(self) -> int:
        """The largest vocabulary any setting trains (what ``params`` counts)."""
        return max(s.vocab_size for s in self.settings)


@dataclass(frozen=True, kw_only=True)
class Run:
    """One training: a setting with its training settings."""

    setting: Setting
    train: TrainConfig


def runs(data: MadData, train: TrainConfig) -> Iterator[list[Run]]:
    """The protocol's runs, grouped by setting (a setting's score is its best run)."""
    for setting in data.settings:
        if data.protocol == "reduced":
            yield [Run(setting=setting, train=replace(train, eval_every=train.steps))]
            continue
        steps = FULL_EPOCHS * max(setting.train_samples // FULL_BATCH, 1)
        yield [Run(setting=setting, train=replace(
            train, lr=lr, weight_decay=wd, batch_size=FULL_BATCH, steps=steps,
            eval_every=steps, betas=(0.9, 0.98), schedule="cosine", warmup_steps=0))
            for lr, wd in itertools.product(FULL_LRS, FULL_WEIGHT_DECAYS)]


def score(by_setting: dict[Setting, float]) -> dict[str, float]:
    """``acc_<task>`` (mean over its settings) per task met, and ``mad_acc``: their mean."""
    per_task: dict[str, list[float]] = {}
    for setting, acc in by_setting.items():
        per_task.setdefault(setting.task, []).append(acc)
    out = {f"acc_{task}": sum(v) / len(v) for task, v in per_task.items()}
    if out:
        out["mad_acc"] = sum(out.values()) / len(out)
    return out


@dataclass(frozen=True, kw_only=True)
class MadSpec:
    """One proxy trial: an order (in ``model``) scored on the tasks of ``data``."""

    __pydantic_config__ = {"extra": "forbid"}

    model: ModelConfig
    data: MadData
    train: TrainConfig = field(default_factory=TrainConfig)

    def flat(self) -> dict[str, object]:
        return flat_settings(self)

    def model_for(self, setting: Setting) -> ModelConfig:
        """The model of one setting: its vocabulary and sequence length."""
        return replace(self.model, vocab_size=setting.vocab_size, context=setting.seq_len)
