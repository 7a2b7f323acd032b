"""``benchmarks/gpu_check.sh``: its CPU smoke mode runs every part (the real sweep, the
LM, seq2seq, FSDP and DDP code paths) so that the GPU check cannot rot where no GPU is at
hand; its usage, its time caps, its report of a part that ran past its cap, and its floors
(fed failing figures: the report fails the part and exits 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
PARTS = ("lm", "sweep", "seq2seq", "fsdp", "ddp")
GPU_BUDGET_S = 8 * 60


def _run(*args: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PYTHON": sys.executable}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=home)


def test_help_bad_usage_and_no_gpu(tmp_path: Path) -> None:
    shown = _run("--help", home=tmp_path)
    assert shown.returncode == 0 and "--cpu-smoke" in shown.stdout
    for part in PARTS:
        assert re.search(rf"^  {part} ", shown.stdout, re.M), part
    bad = _run("--only", "lm,gpt", home=tmp_path)
    assert bad.returncode == 2 and "--only: got 'gpt'" in bad.stderr
    assert _run("--bogus", home=tmp_path).returncode == 2
    assert _run("--peak-tflops", "many", home=tmp_path).returncode == 2
    # this machine has no GPU: the GPU mode says so and what to run instead
    nogpu = _run("--only", "lm", home=tmp_path)
    assert nogpu.returncode == 2 and "--cpu-smoke" in nogpu.stderr, nogpu.stderr


def test_the_gpu_time_caps_fit_in_eight_minutes() -> None:
    text = SCRIPT.read_text()
    caps = re.findall(r"declare -A cap=\((.*?)\)", text)
    gpu = dict(re.findall(r"\[(\w+)\]=(\d+)", caps[0]))  # the first: the GPU mode's
    assert set(gpu) == set(PARTS)
    # each cap plus timeout's grace (--kill-after) and the start-up and report, in budget
    grace = int(re.search(r"--kill-after=(\d+)", text)[1])
    assert sum(int(v) for v in gpu.values()) + grace <= GPU_BUDGET_S - 10, gpu
    help_caps = dict(re.findall(r"^  (\w+) .*?cap +(\d+) s$", _help(), re.M | re.S))
    assert help_caps == gpu  # --help tells the caps the script uses


def _help() -> str:
    return subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True,
                          timeout=30).stdout


def test_a_part_past_its_cap_is_reported_failed(tmp_path: Path) -> None:
    ok = {"part": "seq2seq", "status": "ok", "figures": {
        "ours_tokens_per_s": 100_000.0, "m2m100_tokens_per_s": "skipped: transformers not installed",
        "ours_over_m2m100": None}, "note": ""}
    (tmp_path / "seq2seq.json").write_text(json.dumps(ok))
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check_report.py"), "--work",
         str(tmp_path), "--out", str(out), "--mode", "gpu", "--device", "X",
         "--ran", "seq2seq:0:3.5", "lm:124:170.0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    parts = json.loads(out.read_text())["parts"]
    assert parts["seq2seq"]["status"] == "ok" and parts["seq2seq"]["wall_s"] == 3.5
    assert parts["lm"] == {"part": "lm", "status": "failed", "figures": {},
                           "note": "ran past its time cap (170 s)", "wall_s": 170.0}
    assert "M2M100 skipped: transformers not installed" in done.stdout
    assert re.search(r"^lm +failed +170\.0 +ran past its time cap", done.stdout, re.M)


@pytest.mark.slow
def test_the_cpu_smoke_mode_runs_every_part(tmp_path: Path) -> None:
    out = tmp_path / "smoke" / "gpu_check.json"
    done = _run("--cpu-smoke", "--out", str(out), home=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    table = done.stdout[done.stdout.index("gpu_check (smoke) on"):]
    for part in PARTS:  # every part printed its row with its figure
        assert re.search(rf"^{part} +ok +\d+\.\d +\S", table, re.M), (part, table)
    result = json.loads(out.read_text())
    assert result["mode"] == "smoke" and list(result["parts"]) == list(PARTS)
    lm, sweep = result["parts"]["lm"]["figures"], result["parts"]["sweep"]["figures"]
    seq2seq, fsdp = result["parts"]["seq2seq"]["figures"], result["parts"]["fsdp"]["figures"]
    assert lm["tokens_per_s"] > 0 and lm["mfu"] > 0 and lm["autocast_bf16"]
    assert lm["shape"]["cutoffs"] == [2000, 6000]  # the press2020 preset's heads, scaled
    assert (sweep["exit_code"], sweep["trials"], sweep["finished"]) == (0, 4, 4)
    assert sweep["gpu_per_trial"] == 0.25 and sweep["most_at_once"] >= 2
    assert len(sweep["tokens_per_s_per_trial"]) == 4
    assert all(v > 0 for v in sweep["tokens_per_s_per_trial"])
    assert seq2seq["ours_tokens_per_s"] > 0
    try:
        import transformers  # noqa: F401
    except ImportError:
        assert seq2seq["m2m100_tokens_per_s"] == "skipped: transformers not installed"
        assert "skipped: transformers not installed" in table
    else:
        assert seq2seq["m2m100_tokens_per_s"] > 0
    assert fsdp["fsdp"]["dtensor_params"] and not fsdp["unsharded"]["dtensor_params"]
    assert fsdp["fsdp"]["weight_dtype_in_forward"] == "bfloat16"  # the bf16 policy gathers
    assert fsdp["checkpoint_gathered"] and fsdp["backend"] == "gloo"
    assert fsdp["fsdp"]["val_loss"] == pytest.approx(fsdp["unsharded"]["val_loss"], rel=0.05)
    ddp = result["parts"]["ddp"]["figures"]
    assert ddp["workers"] == 2 and ddp["device"] == "cpu" and ddp["scaling"] > 0
    assert all(d in (None, "cpu") for d in sweep["devices"]), sweep["devices"]
    assert result["parts"]["sweep"]["below_floor"] == []
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("gpu-check.*"))  # cleaned
