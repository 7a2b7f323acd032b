"""``benchmarks/gpu_sharing.py`` end to end on its CPU mirror: a real local Ray with one
declared (fake) GPU, k trials of the real training loop given fractions of GPU 0."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEPS, WARMUP, BATCH = 20, 2, 8


def test_the_cpu_mirror_gives_every_share_gpu_0(tmp_path, monkeypatch, capsys, shared_data):
    monkeypatch.setenv("HOME", str(tmp_path))  # Ray's token (unless the session's) and caches
    spec = importlib.util.spec_from_file_location(
        "gpu_sharing", REPO / "benchmarks" / "gpu_sharing.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["--device", "cpu", "--shares", "1", "2", "--steps", str(STEPS),
            "--warmup", str(WARMUP), "--batch", str(BATCH), "--json"]
    assert bench.main(argv) == 0
    out = json.loads(capsys.readouterr().out)

    assert (out["device"], out["fake_gpu"], out["ray_gpus"]) == ("cpu", True, 1.0)
    assert out["argv"] == argv and out["command"].endswith("gpu_sharing.py " + " ".join(argv))
    runs = {r["k"]: r for r in out["results"]}
    assert sorted(runs) == [1, 2]
    assert runs[1]["ratio_to_k1"] == 1.0
    for k, run in runs.items():
        assert run["gpu_per_trial"] == 1 / k and len(run["trials"]) == k
        # the tokens the loop trained in the timed steps, counted inside each trial
        assert run["tokens"] == (STEPS - WARMUP) * BATCH * out["context"] * k
        assert run["aggregate_tokens_per_s"] > 0
        assert len(run["per_trial_tokens_per_s"]) == k
        assert all(v > 0 for v in run["per_trial_tokens_per_s"])
        assert run["shared_one_gpu"] and run["gpu_ids"] == ["0"]
        for trial in run["trials"]:
            assert trial["gpu_ids"] == ["0"] and trial["cuda_visible_devices"] == "0"
            assert trial["status"] == "finished" and trial["timed_steps"] == STEPS - WARMUP
            assert trial["peak_mem_mib"] is None  # CUDA only
    pair = runs[2]["trials"]
    assert len({t["pid"] for t in pair}) == 2  # two processes ...
    assert max(t["start"] for t in pair) < min(t["end"] for t in pair)  # ... training at once
