"""``--resume`` of a sweep whose Ray state was saved before the Trial change: exit 2 with
a message naming ``--resume``, the run and the way out (``reuse: true``), before Ray starts
or any MLflow run is created. A state saved by this version is not refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray
import yaml
from ray.tune.utils.serialization import TuneFunctionEncoder

from sublayer_search.search.cli.main import main
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Variant
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.run.state_format import legacy_trials

RUN = "legacy-20261126-040352"


def _state(folder: Path, trials: list[object], stamp: str = "2026-11-26_05-36-23") -> None:
    """A Tune experiment state as Ray writes it: each trial's JSON state, its config encoded
    with Tune's encoder (objects become pickled ``CLOUDPICKLE_FALLBACK`` entries)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [[json.dumps({"trial_id": f"t{i}", "config": {"trial": t}}, cls=TuneFunctionEncoder),
             "{}"] for i, t in enumerate(trials)]
    (folder / f"experiment_state-{stamp}.json").write_text(
        json.dumps({"trial_data": rows, "runner_data": {}, "stats": {}}))


def _now(seed: int) -> Trial:
    return Trial(name=f"interleaved2@seed{seed}", candidate="interleaved2",
                 variant=Variant(order="sfsf"), seed=seed, space="baseline", baseline=True)


def _then(seed: int) -> dict[str, object]:
    return {"name": f"interleaved2@seed{seed}", "candidate": "interleaved2", "order": "sfsf",
            "seed": seed, "space": "baseline", "baseline": True, "params": {}}


def test_counts_trials_saved_as_dicts(tmp_path: Path) -> None:
    storage = Storage.of(str(tmp_path))
    _state(tmp_path / "old", [_then(0), _then(1), _then(2)])
    _state(tmp_path / "new", [_now(0), _now(1)])
    _state(tmp_path / "mixed", [_now(0)], stamp="2026-11-26_04-00-00")
    _state(tmp_path / "mixed", [_now(0), _then(1)], stamp="2026-11-26_05-00-00")  # newest
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "experiment_state-2026-11-26_05-00-00.json").write_text("{not json")
    assert legacy_trials(storage, "old") == 3
    assert legacy_trials(storage, "new") == 0
    assert legacy_trials(storage, "mixed") == 1
    assert legacy_trials(storage, "garbled") == 0  # Tune's restore reports it
    assert legacy_trials(storage, "missing") == 0


def _config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load((Path(__file__).parents[2] / "configs" / "quickstart.yaml").read_text())
    cfg.update(name="legacy", tracking={"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
               ray={"storage_path": str(tmp_path / "ray_results")})
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_resume_of_a_legacy_sweep_exits_2_before_ray(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    path = _config(tmp_path)
    results = tmp_path / "ray_results"
    _state(results / RUN, [_then(0), _then(1)])
    (results / "legacy.latest").write_text(RUN + "\n")
    assert not ray.is_initialized()
    code = main(["sweep", str(path), "--resume"])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert f"--resume: got '{RUN}', expected a sweep this version can continue" in err, err
    assert f"2 of the trials in {results / RUN} were saved by a version before" in err, err
    assert "reuse: true" in err and "Traceback" not in err, err
    assert not ray.is_initialized() and not (tmp_path / "mlflow.db").exists()
    assert sorted(p.name for p in (results / RUN).iterdir()) == [
        "experiment_state-2026-11-26_05-36-23.json"]  # nothing lost
