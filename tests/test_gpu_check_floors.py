"""The floors of ``benchmarks/gpu_check.sh`` (benchmarks/gpu_check_floors.py), fed figures
that fall under them: each part is judged short and named; the report then fails the part
and exits 1. No GPU here: the judging is what can be tested on a CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from gpu_check_floors import FLOORS, judge, parse_floors  # noqa: E402

GOOD: dict[str, dict[str, Any]] = {  # figures a sound GPU run gives, as the parts record them
    "lm": {"tokens_per_s": 210_000.0, "mfu": 0.41, "achieved_tflops": 405.0,
           "peak_tflops": 989.0, "params": 247_000_000, "warmup_s": 40.0},
    "seq2seq": {"ours_tokens_per_s": 400_000.0, "m2m100_tokens_per_s": 380_000.0,
                "ours_over_m2m100": 1.05},
    "fsdp": {"fsdp_over_unsharded": 0.93, "backend": "nccl", "precision": "bf16",
             "fsdp": {"tokens_per_s": 93.0, "weight_dtype_in_forward": "bfloat16",
                      "val_loss": 6.0},
             "unsharded": {"tokens_per_s": 100.0}},
    "ddp": {"gpus": 8, "workers": 8, "efficiency": 0.9, "scaling": 7.2, "device": "cuda",
            "tokens_per_s_1": 100.0, "tokens_per_s_8": 720.0},
    "sweep": {"devices": ["cuda"] * 4, "most_at_once": 4, "trials": 4, "finished": 4,
              "gpu_per_trial": 0.25, "tokens_per_s_per_trial": [1.0] * 4,
              "tokens_per_s_total": 4.0, "wall_s": 60.0},
}


def _parts(**figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: {"part": name, "status": "ok", "figures": {**GOOD[name], **figures.get(name, {})}}
            for name in GOOD}


def test_a_sound_gpu_run_passes_every_floor():
    assert judge(_parts(), "gpu") == {name: [] for name in GOOD}


@pytest.mark.parametrize(("part", "figures", "said"), [
    ("lm", {"mfu": 0.12}, "MFU 0.120 (floor 0.2) under the floor"),
    ("lm", {"tokens_per_s": 9_000.0}, "tokens/s 9000.0 (floor 30000) under the floor"),
    ("lm", {"tokens_per_s": None}, "tokens/s: no figure"),
    ("seq2seq", {"ours_tokens_per_s": 3_000.0}, "target tokens/s 3000.0"),
    ("fsdp", {"fsdp_over_unsharded": 0.2}, "FSDP / unsharded tokens/s 0.2"),
    ("ddp", {"efficiency": 0.4}, "DDP scaling efficiency on 8 GPUs 0.4"),
    ("sweep", {"devices": ["cuda", "cpu", "cuda", "cuda"]},
     "trials did not train on CUDA (sublayer.device: cpu)"),
    ("sweep", {"devices": [None] * 4}, "sublayer.device: none recorded"),
    ("sweep", {"devices": []}, "sublayer.device: no trial"),
    ("sweep", {"most_at_once": 1}, "only 1 trial(s) ran at once, expected 4"),
])
def test_a_figure_under_its_floor_is_named(part, figures, said):
    short = judge(_parts(**{part: figures}), "gpu")
    assert any(said in line for line in short[part]), short[part]
    assert all(not lines for name, lines in short.items() if name != part), short


def test_one_gpu_has_no_scaling_to_judge_and_the_cpu_no_speed():
    one = _parts(ddp={"gpus": 1, "workers": 1, "efficiency": None})
    assert judge(one, "gpu")["ddp"] == []
    slow = _parts(lm={"mfu": 0.001, "tokens_per_s": 10.0}, sweep={"devices": ["cpu"] * 4,
                                                                 "most_at_once": 2})
    assert judge(slow, "smoke") == {name: [] for name in GOOD}
    assert judge(_parts(sweep={"devices": ["cuda"] * 4, "most_at_once": 2}), "smoke")["sweep"]
    assert judge(_parts(sweep={"devices": ["cpu"] * 4, "most_at_once": 1}), "smoke")["sweep"]


def test_floors_can_be_set_and_a_bad_one_is_named():
    assert parse_floors(["lm.mfu=0.3"]) == {**FLOORS, "lm.mfu": 0.3}
    assert judge(_parts(lm={"mfu": 0.25}), "gpu", parse_floors(["lm.mfu=0.3"]))["lm"]
    with pytest.raises(ValueError, match="--floor: got 'mfu=1', expected NAME=VALUE"):
        parse_floors(["mfu=1"])
    with pytest.raises(ValueError, match="--floor lm.mfu: got 'high'"):
        parse_floors(["lm.mfu=high"])


def test_the_report_fails_a_part_under_a_floor_and_exits_1(tmp_path: Path) -> None:
    for name, rec in _parts(lm={"mfu": 0.05}, sweep={"devices": ["cpu"] * 4}).items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    out = tmp_path / "figures.json"
    ran = [f"{name}:0:1.0" for name in GOOD]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check_report.py"), "--work",
         str(tmp_path), "--out", str(out), "--mode", "gpu", "--device", "X", "--ran", *ran],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    parts = json.loads(out.read_text())["parts"]
    assert parts["lm"]["status"] == "failed" and "MFU 0.050" in parts["lm"]["note"]
    assert parts["sweep"]["status"] == "failed" and "cpu" in parts["sweep"]["below_floor"][0]
    assert all(parts[n]["status"] == "ok" for n in ("seq2seq", "fsdp", "ddp"))
    assert "under the floor" in done.stdout
    # a sound run: the same report exits 0
    for name, rec in _parts().items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    again = subprocess.run(done.args, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
