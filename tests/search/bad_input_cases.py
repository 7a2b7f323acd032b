"""The catalogue of bad experiment files for ``test_bad_input.py``: the valid base file,
the ways to spoil it, and every case with the fragments stderr must contain.

A plain module (imported by name, like ``helpers``), so the cases can be read apart from
the checks that run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import golden
import pytest

N_GPUS = __import__("torch").cuda.device_count()
N_CPUS = os.cpu_count() or 1

Mutation = Callable[[dict[str, Any], Path], "dict[str, Any] | str | None"]


@dataclass(frozen=True)
class Bad:
    """A malformed experiment: how to spoil the base file and what stderr must say."""

    id: str
    spoil: Mutation
    expect: tuple[str, ...]
    """Fragments of stderr (``{tmp}`` is replaced by ``tmp_path``)."""
    within: float | None = None
    """Seconds the refusal may take at most (the whole command, in-process)."""


def _base(tmp_path: Path) -> dict[str, Any]:
    return {
        "name": "bad-input",
        "space": {"type": "sandwich", "n": 4, "k": [1, 2]},
        "seeds": 1,
        "model": {"preset": "debug"},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": 10, "lr": 0.003},
        "resources": {"cpu": 1},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }


def _set(path: str, value: Any) -> Mutation:
    """Set a dotted key (``train.lr``) in the base file."""

    def spoil(cfg: dict[str, Any], tmp_path: Path) -> None:
        *parents, last = path.split(".")
        node = cfg
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return spoil


def _space(space: Any) -> Mutation:
    return _set("space", space)


def _do(*mutations: Mutation) -> Mutation:
    def spoil(cfg: dict[str, Any], tmp_path: Path) -> None:
        for m in mutations:
            m(cfg, tmp_path)

    return spoil


def _raw(text: str) -> Mutation:
    return lambda cfg, tmp_path: text


def _translation(space: dict[str, Any]) -> Mutation:
    """Turn the base file into a translation sweep on Multi30k with ``space``."""

    def spoil(cfg: dict[str, Any], tmp_path: Path) -> None:
        cfg.update(task="translation", space=space, model={"preset": "debug"},
                   data={"name": "multi30k", "vocab_size": 300, "max_train_pairs": 500})

    return spoil


def _mismatched_parallel_files(cfg: dict[str, Any], tmp_path: Path) -> None:
    files = {}
    for split, n_src, n_tgt in (("train", 5, 4), ("valid", 2, 2)):
        for side, n in (("src", n_src), ("tgt", n_tgt)):
            path = tmp_path / f"{split}.{side}"
            path.write_text("".join(f"sentence {i}\n" for i in range(n)))
            files[f"{split}_{side}"] = str(path)
    cfg["data"] = {"name": "parallel-files", "vocab_size": 50, **files}


def _drop(key: str) -> Mutation:
    return lambda cfg, tmp_path: cfg.pop(key) and None


def _empty_corpus_dirs(cfg: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "empty_data").mkdir()
    (tmp_path / "empty_cache").mkdir()
    cfg["data"] = {"name": "tinyshakespeare", "data_dir": str(tmp_path / "empty_data"),
                   "cache_dir": str(tmp_path / "empty_cache"), "download": False}


UNKNOWN = "unknown key (remove it or check its spelling)"
EXPLICIT = "space.orders[1]: got {!r}, expected a valid lm order (position {}: "

CASES = [
    # unknown keys, at the top and in every section
    Bad("unknown-top-key", _set("colour", "blue"), (f"colour: {UNKNOWN}",)),
    Bad("unknown-train-key", _set("train.stepz", 10), ("train.stepz: unknown key (did you mean 'steps'?)",)),
    Bad("unknown-model-key", _set("model.d_modle", 64),
        ("model.d_modle: got 64", "one of the model settings: order, vocab_size, d_model")),
    Bad("unknown-data-key", _set("data.nmae", "x"), ("data.nmae: unknown key (did you mean 'name'?)",)),
    Bad("unknown-resources-key", _set("resources.gpus", 1), ("resources.gpus: unknown key (did you mean 'gpu'?)",)),
    Bad("unknown-scheduler-key", _set("scheduler", {"type": "asha", "rungs": 2}),
        (f"scheduler.rungs: {UNKNOWN}",)),
    Bad("unknown-search-key", _set("search", {"algorithm": "grid", "samples": 4}),
        ("search.samples: unknown key (did you mean 'num_samples'?)",)),
    Bad("unknown-baseline-key", _set("baseline", {"seed": 3}), ("baseline.seed: unknown key (did you mean 'seeds'?)",)),
    Bad("capitalised-unknown-key", _set("train.Steps", 10), ("train.Steps: unknown key (did you mean 'steps'?)",)),
    # a misspelt key names the nearest valid one (at the top, in a section, shortened)
    Bad("misspelt-top-key", _set("trian", {"steps": 10}), ("trian: unknown key (did you mean "
                                                           "'train'?)",)),
    Bad("misspelt-max-concurrent", _set("max_concurent", 2),
        ("max_concurent: unknown key (did you mean 'max_concurrent'?)",)),
    Bad("misspelt-train-key", _set("train.stpes", 10),
        ("train.stpes: unknown key (did you mean 'steps'?)",)),
    Bad("misspelt-data-key", _set("data.data_dri", "x"),
        ("data.data_dri: unknown key (did you mean 'data_dir'?)",)),
    Bad("shortened-scheduler-key", _set("scheduler", {"type": "asha", "grace": 2}),
        ("scheduler.grace: unknown key (did you mean 'grace_period'?)",)),
    Bad("unknown-space-argument", _set("space.depth", 3),
        ("space.depth: got 3, expected no such argument for space 'sandwich'",)),
    # wrong types
    Bad("steps-not-int", _set("train.steps", "ten"),
        ("train.steps: got 'ten', expected an integer",)),
    Bad("lr-not-number", _set("train.lr", "fast"), ("train.lr: got 'fast', expected a number",)),
    Bad("parallel-unknown", _set("train.parallel", "zero3"),
        ("train.parallel: got 'zero3', expected one of 'ddp' or 'fsdp'",)),
    Bad("fsdp-with-guidance", _do(_set("train.parallel", "fsdp"),
                                  _set("model.guidance", {"mode": "soft", "blocks": ["ffn"]})),
        ("train.parallel: got 'fsdp', expected ddp with model.guidance",)),
    Bad("seeds-not-int-or-list", _set("seeds", "x"),
        ("seeds: got 'x', expected an integer or a list",)),
    Bad("cpu-not-number", _set("resources.cpu", "two"),
        ("resources.cpu: got 'two', expected a number",)),
    Bad("baseline-seeds-wrong-type", _set("baseline", {"seeds": "three"}),
        ("baseline.seeds: got 'three', expected an integer or a list",)),
    Bad("seed-list-item-wrong-type", _set("seeds", [0, "one"]),
        ("seeds[1]: got 'one', expected an integer",)),
    Bad("data-not-mapping", _set("data", "tinyshakespeare"),
        ("data: got 'tinyshakespeare', expected a mapping",)),
    Bad("download-not-bool", _set("data.download", "maybe"),
        ("data.download: got 'maybe', expected true or false",)),
    Bad("model-context-not-int", _set("model.context", "long"),
        ("model.context: got 'long', expected a positive integer",)),
    # negative and zero values
    Bad("steps-zero", _set("train.steps", 0), ("train.steps: got 0, expected a positive integer",)),
    Bad("lr-negative", _set("train.lr", -0.1),
        ("train.lr: got -0.1, expected a positive number",)),
    Bad("cpu-zero", _set("resources.cpu", 0), ("resources.cpu: got 0, expected a number > 0",)),
    Bad("gpu-negative", _set("resources.gpu", -1),
        ("resources.gpu: got -1, expected a number >= 0",)),
    Bad("seeds-zero", _set("seeds", 0), ("seeds: got 0, expected a number >= 1",)),
    Bad("seed-negative", _set("seeds", [-1]), ("seeds[0]: got -1, expected a number >= 0",)),
    Bad("baseline-seeds-negative", _set("baseline", {"seeds": -2}),
        ("baseline.seeds: got -2, expected a number >= 1",)),
    Bad("seeds-empty-list", _set("seeds", []), ("seeds: got [], expected a non-empty list",)),
    Bad("max-concurrent-zero", _set("max_concurrent", 0),
        ("max_concurrent: got 0, expected a number >= 1",)),
    Bad("dropout-above-one", _set("model.dropout", 1.5),
        ("model.dropout: got 1.5, expected a number in [0, 1)",)),
    # spaces
    Bad("sandwich-k-equals-n", _set("space.k", [0, 4]),
        ("space.k[1]: got 4, expected an integer in 0..3",)),
    Bad("sandwich-k-negative", _set("space.k", [-2]),
        ("space.k[0]: got -2, expected an integer in 0..3",)),
    Bad("sandwich-k-not-int", _set("space.k", [1, "two"]), ("space.k[1]: got 'two'",)),
    Bad("second-space-bad-n_s",
        _space([{"type": "sandwich", "n": 4, "k": [1]},
                {"type": "permutations", "n_s": -1, "n_f": 4, "count": 2}]),
        ("space[1].n_s: got -1, expected an integer in 0..1024",)),
    Bad("permutations-count-zero", _space({"type": "permutations", "n_s": 4, "n_f": 4,
                                           "count": 0}),
        ("space.count: got 0, expected an integer in 1..",)),
    Bad("budgeted-zero-budget", _space({"type": "budgeted", "budget_units": 0, "count": 2}),
        ("space.budget_units: got 0, expected an integer in 1..1024",)),
    Bad("budgeted-fractional-budget",
        _space({"type": "budgeted", "budget_units": 2.5, "count": 1}),
        ("space.budget_units: got 2.5, expected an integer in 1..1024",)),
    Bad("budgeted-count-above-distinct-orders",
        _space({"type": "budgeted", "budget_units": 3, "count": 50}),
        ("space.count: got 50, expected at most 3 (the number of distinct orders of 3 units)",)),
    Bad("explicit-unknown-symbol", _space({"type": "explicit", "orders": ["sfsf", "sfx"]}),
        (EXPLICIT.format("sfx", 2) + "unknown symbol 'x'",)),
    Bad("explicit-unbalanced-parenthesis",
        _space({"type": "explicit", "orders": ["sfsf", "(sf^2"]}),
        (EXPLICIT.format("(sf^2", 0) + "unbalanced parenthesis",)),
    Bad("explicit-zero-exponent", _space({"type": "explicit", "orders": ["sfsf", "s^0 f"]}),
        (EXPLICIT.format("s^0 f", 2) + "exponent 0",)),
    Bad("explicit-c-in-lm", _space({"type": "explicit", "orders": ["sfsf", "scf"]}),
        (EXPLICIT.format("scf", 1) + "'c' is not allowed in an order for kind 'lm'",)),
    Bad("explicit-empty-order", _space({"type": "explicit", "orders": ["sfsf", ""]}),
        (EXPLICIT.format("", 0) + "empty order",)),
    Bad("explicit-too-long", _space({"type": "explicit", "orders": ["sfsf", "s^2000"]}),
        (EXPLICIT.format("s^2000", 0) + "order is longer than 1024 sublayers",)),
    Bad("explicit-not-a-list", _space({"type": "explicit", "orders": "sfsf"}),
        ("space.orders: got 'sfsf', expected a non-empty list of order strings",)),
    Bad("iot-subsets-in-lm", _space({"type": "iot_subsets", "size": 4}),
        ("space.type: got 'iot_subsets', expected a language-model space",)),
    Bad("unknown-space-type", _space({"type": "zigzag", "n": 4}),
        ("space.type: got 'zigzag', expected one of 'permutations', 'budgeted', 'sandwich'",)),
    Bad("unknown-type-of-second-space",
        _space([{"type": "sandwich", "n": 4, "k": [1]}, {"type": "zigzag"}]),
        ("space[1].type: got 'zigzag', expected one of 'permutations'",)),
    Bad("missing-space-argument", _space({"type": "sandwich", "k": [1]}),
        ("space.n: got None, expected a value: 'n' is required by space 'sandwich'",)),
    Bad("missing-space", _drop("space"), ("space: a value for this required key",)),
    Bad("space-not-mapping", _space("sandwich"),
        ("space: got 'sandwich', expected a mapping or a list",)),
    Bad("mixed-budgets-without-baseline-order",
        _space([{"type": "sandwich", "n": 4, "k": [1]}, {"type": "sandwich", "n": 3, "k": [1]}]),
        ("baseline.order: got None, expected an explicit baseline order: "
         "the space mixes budgets [9.0, 12.0]",)),
    Bad("baseline-order-with-c", _set("baseline", {"order": "scf"}),
        ("baseline.order: got 'scf', expected a valid lm order (position 1: 'c' is not allowed",)),
    Bad("baseline-order-unknown-symbol", _set("baseline", {"order": "sfsq"}),
        ("baseline.order: got 'sfsq', expected a valid lm order (position 3: unknown symbol 'q'",)),
    # model
    Bad("d-model-not-divisible", _set("model", {"preset": "debug", "d_model": 30, "n_heads": 4}),
        ("model.d_model: got 30, expected a multiple of n_heads (4)",)),
    Bad("unknown-preset", _set("model.preset", "huge"),
        ("model.preset: got 'huge', expected one of debug, tiny, press2020",)),
    Bad("unknown-activation", _set("model.activation", "swish"),
        ("model.activation: got 'swish', expected one of relu, gelu",)),
    Bad("model-order-given", _set("model.order", "sfsf"),
        ("model.order: got 'sfsf', expected no order here: orders come from the space",)),
    Bad("vocab-too-small", _set("model.vocab_size", 1),
        ("model.vocab_size: got 1, expected an integer >= 2 or null",)),
    # data
    Bad("unknown-corpus", _set("data.name", "shakespeare-full"),
        ("data.name: got 'shakespeare-full', expected one of tinyshakespeare, wikitext-2",)),
    Bad("text-files-missing", _set("data", {"name": "text-files",
                                            "train_path": "missing/train.txt",
                                            "valid_path": "missing/valid.txt",
                                            "download": False}),
        # relative paths are resolved against the experiment file's folder (tmp_path)
        ("data.train_path: got '{tmp}/missing/train.txt', expected an existing file",)),
    Bad("tinyshakespeare-not-downloaded", _empty_corpus_dirs,
        ("data.name: got 'tinyshakespeare', expected an available corpus",
         "cannot find input.txt", "{tmp}/empty_data/tinyshakespeare",
         "{tmp}/empty_cache/tinyshakespeare", "data.download=false")),
    Bad("fixed-level-corpus", _set("data.level", "word"),
        ("data.level: got 'word', expected null or 'char'",)),
    Bad("missing-data", _drop("data"), ("data: a value for this required key",)),
    # resources
    pytest.param(Bad("four-gpus", _set("resources.gpu", 4),
                     (f"resources.gpu: got 4.0, expected at most {N_GPUS} (GPUs of this machine",)),
                 marks=pytest.mark.skipif(N_GPUS >= 4, reason="this machine has 4 GPUs")),
    pytest.param(Bad("64-cpus", _set("resources.cpu", 64),
                     (f"resources.cpu: got 64.0, expected at most {N_CPUS} (CPUs of this",)),
                 marks=pytest.mark.skipif(N_CPUS >= 64, reason="this machine has 64 CPUs")),
    Bad("gpu-fraction-above-one", _do(_set("resources.gpu", 1.5), _set("ray.num_gpus", 2)),
        ("resources.gpu: got 1.5, expected at most 1 per worker: the training loop drives one "
         "device per worker; ask for more workers instead",)),
    Bad("two-gpus-per-trial", _do(_set("resources.gpu", 2), _set("ray.num_gpus", 4)),
        ("resources.gpu: got 2.0, expected at most 1 per worker: the training loop drives one "
         "device per worker; ask for more workers instead",)),
    # scheduler and search
    Bad("unknown-scheduler", _set("scheduler", {"type": "hyperband"}),
        ("scheduler.type: got 'hyperband', expected one of 'fifo', 'asha'",)),
    Bad("asha-unknown-metric", _set("scheduler", {"type": "asha", "metric": "val_acc"}),
        ("scheduler.metric: got 'val_acc', expected val_loss or train_loss",)),
    Bad("unknown-search-algorithm", _set("search", {"algorithm": "bayes"}),
        ("search.algorithm: got 'bayes', expected one of 'grid', 'optuna', 'surrogate', "
         "'evolution'",)),
    Bad("optuna-without-num-samples", _set("search", {"algorithm": "optuna"}),
        ("search.num_samples: got None, expected a trial budget (a positive integer) for "
         "search.algorithm optuna",)),
    Bad("objectives-with-grid", _set("search", {"algorithm": "grid",
                                                "objectives": ["val_bpc", "params"]}),
        ("search.objectives: got ['val_bpc', 'params'], expected no objectives for "
         "search.algorithm grid (multi-objective search needs optuna)",)),
    Bad("objectives-with-surrogate", _set("search", {"algorithm": "surrogate", "num_samples": 3,
                                                     "objectives": ["val_bpc", "params"]}),
        ("search.objectives: got ['val_bpc', 'params'], expected no objectives for "
         "search.algorithm surrogate",)),
    Bad("unknown-objective", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                             "objectives": ["val_bpc", "latency"]}),
        ("search.objectives[1]: got 'latency', expected a metric the trials report (",
         "or one of params, flops_per_token")),
    Bad("one-objective", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                         "objectives": ["val_bpc"]}),
        ("search.objectives: got ['val_bpc'], expected two or more objectives",)),
    Bad("static-first-objective", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                                  "objectives": ["flops_per_token", "val_bpc"]}),
        ("search.objectives[0]: got 'flops_per_token', expected a metric the trials report",)),
    Bad("repeated-objective", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                              "objectives": ["val_bpc", "val_bpc"]}),
        ("search.objectives: got ['val_bpc', 'val_bpc'], expected distinct objectives",)),
    Bad("metric-not-first-objective", _set("search", {
        "algorithm": "optuna", "num_samples": 3, "metric": "val_loss",
        "objectives": ["val_bpc", "params"]}),
        ("search.metric: got 'val_loss', expected the first objective, val_bpc",)),
    Bad("unknown-sampler", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                           "sampler": "cmaes"}),
        ("search.sampler: got 'cmaes', expected one of 'tpe' or 'nsga2'",)),
    Bad("warm-start-grid", _set("search", {"algorithm": "grid", "warm_start": True}),
        ("search.warm_start: got True, expected false for search.algorithm grid (reuse: "
         "true takes finished trials of a grid)",)),
    Bad("warm-start-number", _set("search", {"algorithm": "optuna", "num_samples": 3,
                                             "warm_start": 3}),
        ("search.warm_start: got 3, expected true or false or a string or a list",)),
    # the file itself
    Bad("name-with-spaces", _set("name", "my sweep"),
        ("name: got 'my sweep', expected a string matching",)),
    Bad("empty-name", _set("name", ""), ("name: got '', expected a non-empty string",)),
    Bad("unknown-task", _set("task", "seq2seq"),
        ("task: got 'seq2seq', expected one of 'lm'",)),
    Bad("translation-section-in-lm", _set("translation", {"beam": 2}),
        ("translation: got {'beam': 2}, expected no translation section in an lm experiment",)),
    Bad("top-level-list", _raw("- name: a\n- name: b\n"),
        ("got 'list', expected a YAML mapping at the top level",)),
    Bad("empty-file", _raw(""), ("got 'NoneType', expected a YAML mapping at the top level",)),
    Bad("invalid-yaml", _raw("name: quick\nspace: {type: sandwich, n: [4\n"),
        ("invalid YAML at line", "expected well-formed YAML")),
    # translation (task: translation)
    Bad("translation-c-in-encoder", _translation({"type": "explicit", "side": "encoder",
                                                  "orders": ["scf"]}),
        ("space.orders[0]:", "'c'")),
    Bad("translation-subset-too-big", _translation({"type": "iot_subsets", "size": 7}),
        ("space.size: got 7",)),
    Bad("translation-unknown-subset-mode", _translation({"type": "iot_subsets", "size": 2,
                                                        "mode": "best"}),
        ("space.mode: got 'best'",)),
    Bad("translation-bad-side", _translation({"type": "sandwich", "n": 3, "side": "middle"}),
        ("space.side: got 'middle', expected encoder or decoder",)),
    Bad("translation-mismatched-files", _do(_translation({"type": "sandwich", "n": 2}),
                                            _mismatched_parallel_files),
        ("data.name: got 'parallel-files'", "line")),
    Bad("translation-corpus-absent", _do(
        _translation({"type": "sandwich", "n": 2}),
        _set("model", {"preset": "debug", "src_vocab_size": 300, "tgt_vocab_size": 300}),
        lambda cfg, tmp: (tmp / "no_data").mkdir() or cfg.update(
            data={"name": "iwslt14-de-en", "data_dir": str(tmp / "no_data"),
                  "cache_dir": str(tmp / "no_data")})),
        ("data.name: got 'iwslt14-de-en', expected an available corpus",
         "iwslt14-de-en: cannot find")),
    Bad("translation-unknown-setting", _do(_translation({"type": "sandwich", "n": 2}),
                                           _set("translation", {"beams": 4})),
        ("translation.beams: unknown key",)),
    Bad("translation-evolution-iot", _do(_translation({"type": "iot_subsets", "size": 2}),
                                         _set("search", {"algorithm": "evolution",
                                                         "num_samples": 2})),
        ("search.algorithm: got 'evolution', expected grid, optuna or surrogate for "
         "iot_subsets (an IOT model is a set of orders, not one to mutate)",)),
]


def _case_id(case: Any) -> str:
    return case.id if isinstance(case, Bad) else case.values[0].id


def check_bad_sweep(path: Path, tmp_path: Path, expect: tuple[str, ...],
                    capsys: pytest.CaptureFixture[str],
                    untouched: Callable[[set[str]], None], within: float | None = None,
                    dry_run: bool = False) -> None:
    """``sublayer sweep path``: exit 2, every fragment of ``expect`` in stderr (``{tmp}``
    is ``tmp_path``), no traceback, nothing printed to stdout, nothing created; in at most
    ``within`` seconds when given; the whole message as the golden text says
    (``golden.py``)."""
    import time

    from sublayer_search.search.cli.main import main

    before = {p.name for p in tmp_path.iterdir()}
    t0 = time.monotonic()
    code = main(["sweep", str(path), *(["--dry-run"] if dry_run else [])])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert within is None or took < within, f"refused after {took:.1f} s (at most {within})"
    assert code == 2, (out, err)
    assert err.startswith(f"sublayer: error: {path}: "), err
    for fragment in expect:
        assert fragment.replace("{tmp}", str(tmp_path)) in err, err
    assert "Traceback" not in err and out == ""
    golden.check("messages", golden.normalise(err, tmp=tmp_path))
    untouched(before)
