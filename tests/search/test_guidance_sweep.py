"""Cross-layer guidance as a sweep axis: planning (names, identity, exact parameters),
bad settings (exit 2 naming the field), and a tiny real sweep on Multi30k through the CLI
(real Ray and MLflow): params, tag and the ``guidance_loss`` metric of every trial."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from bad_input_cases import check_bad_sweep
from test_bad_input import untouched  # noqa: F401  # the fixture

from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.models.lm import OrderedLM
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import trial_table

GUIDANCE = [{"mode": "none"}, {"mode": "soft", "blocks": ["key_query"]},
            {"mode": "hard", "blocks": ["ffn", "key_query"]}]


def _lm(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "guided", "space": {"type": "sandwich", "n": 3, "k": [0, 1]}, "seeds": [0],
        "baseline": {"seeds": 2}, "model": {"preset": "debug", "guidance": GUIDANCE},
        "data": {"name": "tinyshakespeare"}, "train": {"steps": 4, "eval_every": 2},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2},
    }
    doc.update(overrides)
    return doc


def _numel(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def test_plan_crosses_orders_with_guidance(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_sweep(parse_experiment(_lm(tmp_path)))
    names = [t.name for t in plan.trials]
    # k = 0 is the baseline order: its unguided trial is the baseline's seed 0
    assert names == ["interleaved3@seed0", "interleaved3@seed1", "sandwich3_0+sg-kq@seed0",
                     "sandwich3_0+hg-kq+ffn@seed0", "sandwich3_1@seed0",
                     "sandwich3_1+sg-kq@seed0", "sandwich3_1+hg-kq+ffn@seed0"]
    rows = {r["name"]: r for r in trial_table(plan)}
    for trial in plan.trials:
        model = plan.model_for(trial)
        assert rows[trial.name]["params"] == _numel(OrderedLM(model)), trial.name
        assert rows[trial.name]["guidance"] == trial.guidance == model.guidance.label
    assert all(t.guidance == "none" for t in plan.trials if t.baseline)
    d, ff = 32, 128  # debug preset; sandwich3_1 = s sfsf f: 3 s, 3 f
    soft, hard = rows["sandwich3_1+sg-kq@seed0"], rows["sandwich3_1+hg-kq+ffn@seed0"]
    assert rows["sandwich3_1@seed0"]["params"] == soft["params"]
    assert soft["params"] - hard["params"] == 2 * d * d + 2 * d * ff
    assert soft["flops_per_token"] == hard["flops_per_token"]
    identities = {plan.task.identity(t.variant) for t in plan.trials if t.order == "ssfsff"}
    assert len(identities) == 3  # reuse keys differ by guidance
    unguided = _lm(tmp_path, model={"preset": "debug"})
    assert plan.config_hash == plan_sweep(parse_experiment(unguided)).config_hash
    path = tmp_path / "guided.yaml"
    path.write_text(yaml.safe_dump(_lm(tmp_path)))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "guidance" in out.splitlines()[0] and "hg-kq+ffn" in out and "7 trial(s)" in out


def _guidance(setting: Any, **extra: Any) -> Callable[[dict[str, Any], Path], None]:
    def spoil(cfg: dict[str, Any], tmp_path: Path) -> None:
        cfg["model"] = {"preset": "debug", "guidance": setting}
        cfg.update(extra)
    return spoil


BAD = [
    ("unknown-block", _guidance([{"mode": "soft", "blocks": ["query"]}]),
     ("model.guidance[0].blocks[0]: got 'query', expected one of key_query, value, ffn",)),
    ("negative-alpha", _guidance({"mode": "soft", "blocks": ["ffn"], "alpha": -1}),
     ("model.guidance.alpha: got -1, expected a finite number >= 0",)),
    ("unknown-pairing", _guidance([{"mode": "none"}, {"mode": "hard", "blocks": ["ffn"],
                                                      "pairing": "w2_w2"}]),
     ("model.guidance[1].pairing: got 'w2_w2'",)),
    ("hard-single-kind", _guidance([{"mode": "hard", "blocks": ["ffn"]}],
                                   space={"type": "explicit", "orders": ["sssf", "ssff"]},
                                   baseline={"order": "sfsf"}),
     ("model.guidance[0].mode: got 'hard', expected soft or none for block ffn: the order "
      "'sssf' has one f sublayer", "(candidate sssf+hg-ffn)")),
    ("repeated", _guidance([{"mode": "soft", "blocks": ["ffn"]},
                            {"mode": "soft", "blocks": ["ffn"], "alpha": 0.01}]),
     ("model.guidance[1]:", "distinct guidance settings (sg-ffn is also model.guidance[0])")),
    ("evolution", _guidance([{"mode": "soft", "blocks": ["ffn"]}],
                            search={"algorithm": "evolution", "num_samples": 2}),
     ("search.algorithm: got 'evolution', expected grid, optuna or surrogate with model.guidance "
      "(mutations keep no guidance)",)),
]


@pytest.mark.parametrize("spoil,expect", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_guidance_exits_2(spoil: Callable[[dict[str, Any], Path], None],
                              expect: tuple[str, ...], tmp_path: Path,
                              untouched: Callable[[set[str]], None],  # noqa: F811
                              capsys: pytest.CaptureFixture[str]) -> None:
    from bad_input_cases import _base

    cfg = _base(tmp_path)
    spoil(cfg, tmp_path)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    check_bad_sweep(path, tmp_path, expect, capsys, untouched)


@pytest.mark.slow
def test_tiny_real_sweep_over_guidance_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    doc = _lm(tmp_path, task="translation", space={"type": "explicit", "orders": ["(scf)^2"]},
              baseline={"seeds": 1}, max_concurrent=2,
              model={"preset": "debug", "dropout": 0.0, "guidance": [
                  {"mode": "soft", "blocks": ["key_query"]}, {"mode": "hard", "blocks": ["ffn"]}]},
              data={"name": "multi30k", "vocab_size": 300, "max_train_pairs": 500},
              train={"steps": 4, "batch_size": 8, "eval_every": 2, "eval_batches": 1},
              translation={"beam": 1, "max_len": 8, "eval_sentences": 8})
    path = tmp_path / "guided.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path)]) == 0, capsys.readouterr().err
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("guided")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get("sublayer.role") == "trial"}
    assert set(runs) == {"transformer2@seed0", "scfscf+sg-kq@seed0", "scfscf+hg-ffn@seed0"}
    expected = {"transformer2@seed0": ("none", "none", "", ""),  # unguided: nothing to pair
                "scfscf+sg-kq@seed0": ("sg-kq", "soft", "key_query", "key_query+w2_w1"),
                "scfscf+hg-ffn@seed0": ("hg-ffn", "hard", "ffn", "key_query+w2_w1")}
    for name, (label, mode, blocks, pairing) in expected.items():
        run = runs[name]
        assert run.info.status == "FINISHED", name
        assert run.data.tags["sublayer.guidance"] == label
        params = run.data.params
        assert params["model.guidance.mode"] == mode
        assert params.get("model.guidance.blocks", "") == blocks  # MLflow may drop ""
        # an unguided run's alpha and pairing are empty (MLflow may drop "")
        assert params.get("model.guidance.alpha", "") == ("0.01" if mode != "none" else "")
        assert params.get("model.guidance.pairing", "") == pairing
        assert ("guidance_loss" in run.data.metrics) == (mode == "soft"), name
    assert runs["scfscf+sg-kq@seed0"].data.metrics["guidance_loss"] > 0
    base = int(runs["transformer2@seed0"].data.params["params"])
    assert base - int(runs["scfscf+hg-ffn@seed0"].data.params["params"]) == 2 * 32 * 64


def test_optuna_chooses_guidance_as_a_categorical(tmp_path: Path) -> None:
    from sublayer_search.search.searchers.optuna_study import OptunaTrials

    plan = plan_sweep(parse_experiment(_lm(tmp_path, search={"algorithm": "optuna",
                                                              "num_samples": 8})))
    assert len(plan.candidates) == 6  # sandwich k in {0, 1} x three guidance settings
    searcher = OptunaTrials(plan.candidates, num_samples=8, seeds=[0], metric="val_bpc",
                            mode="min")
    seen = []
    for i in range(8):
        got = searcher.suggest(f"t{i}")
        assert isinstance(got, dict)
        trial = got["trial"].describe()
        label = GuidanceConfig.from_dict(trial["variant"]["guidance"]).label
        assert trial["name"] == f"{trial['candidate']}@seed{trial['seed']}"
        assert label == "none" or trial["candidate"].endswith(f"+{label}")
        seen.append((trial["order"], label, trial["seed"]))
        searcher.on_trial_complete(f"t{i}", {"val_bpc": 5.0 - i % 3})
    assert len(set(seen)) == len(seen)  # never one (order, guidance, seed) twice
    assert len({label for _, label, _ in seen}) >= 2
    assert {order for order, _, _ in seen} <= {"sfsfsf", "ssfsff"}


def test_guided_explicit_orders_are_not_sandwiches(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The Crossformer configs guide the standard decoder, an explicit order that is the
    sandwich k = 0: a guided copy reads as family ``explicit`` (no ``k``), never as a
    sandwich trial; the unguided order inside a sandwich space keeps its family."""
    doc = _lm(tmp_path, task="translation",
              space=[{"type": "explicit", "orders": ["(scf)^2"]},
                     {"type": "sandwich", "n": 2, "k": [1]}],
              baseline={"seeds": 1},
              model={"preset": "debug", "guidance": [
                  {"mode": "none"}, {"mode": "soft", "blocks": ["key_query"]}]},
              data={"name": "multi30k", "vocab_size": 300})
    plan = plan_sweep(parse_experiment(doc), check_resources=False, notes=[])
    rows = {r["name"]: r for r in trial_table(plan)}
    guided = rows["scfscf+sg-kq@seed0"]
    assert guided["family"] == "explicit" and guided["k"] is None
    assert rows["sandwich2_1+sg-kq@seed0"]["family"] == "sandwich"
    assert rows["sandwich2_1+sg-kq@seed0"]["k"] == 1
    assert rows["transformer2@seed0"]["family"] == "baseline"  # the unguided explicit order
    path = tmp_path / "crossformer.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "scfscf+sg-kq" in ln)
    assert "explicit" in line.split() and "sandwich" not in line.split()


def test_unguided_trials_record_no_alpha_or_pairing() -> None:
    """An unguided model's ``model.guidance.alpha`` and ``.pairing`` are empty in its
    params (they read as a setting it never used); a guided one's are its own."""
    none = GuidanceConfig(mode="none", alpha=0.5, pairing="query_key").flat()
    assert none == {"model.guidance.mode": "none", "model.guidance.blocks": "",
                    "model.guidance.alpha": "", "model.guidance.pairing": ""}
    # the trial frame (analyze's trials.csv) then shows them empty
    from sublayer_search.analysis.store.guidance_frame import guidance_fields

    fields = guidance_fields({k: str(v) for k, v in none.items()}, {}, {})
    assert math.isnan(fields["guidance_alpha"]) and fields["guidance_pairing"] is None
    soft = GuidanceConfig(mode="soft", blocks=("ffn",)).flat()
    assert soft["model.guidance.alpha"] == 0.01
    assert soft["model.guidance.pairing"] == "key_query+w2_w1"
