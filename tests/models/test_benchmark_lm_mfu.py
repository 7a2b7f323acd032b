"""``benchmarks/lm_mfu.py`` on its CPU mirror: the GPU run's code path (the ``press2020``
preset's adaptive input and softmax, bf16 autocast, ``torch.compile``, AdamW, the MFU
formula) at a small shape, so that it is exercised where no GPU is at hand."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

from sublayer_search.models.accounting import flops_per_token
from sublayer_search.models.config import model_preset

REPO = Path(__file__).resolve().parents[2]


def test_the_cpu_mirror_trains_the_compiled_bf16_preset_and_reports_its_mfu(capsys) -> None:
    spec = importlib.util.spec_from_file_location("lm_mfu", REPO / "benchmarks" / "lm_mfu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--cpu-mirror", "--warmup", "2", "--steps", "3",
                      "--peak-tflops", "0.5", "--json"])
    assert json.loads(capsys.readouterr().out) == out

    assert (out["device"], out["preset"], out["autocast_bf16"], out["compiled"]) == (
        "cpu", "press2020", True, True)
    shape = out["shape"]
    assert (shape["d_model"], shape["order"], shape["context"], shape["cutoffs"]) == (
        128, "sfsf", 256, [2000, 6000])
    cfg = model_preset("press2020", d_model=128, n_heads=4, d_ff=512, order="sfsf",
                       context=256, vocab_size=8192, cutoffs=(2000, 6000))
    assert cfg.adaptive_input and cfg.adaptive_softmax  # the preset's heads, scaled down
    # the MFU formula: tokens/s · 3 · forward FLOPs per token over the peak
    achieved = out["tokens_per_s"] * 3 * flops_per_token(cfg) / 1e12
    assert out["achieved_tflops"] == round(achieved, 4)
    assert out["mfu"] == round(achieved / 0.5, 4)
    # five steps on one batch: the compiled bf16 model trains
    assert math.isfinite(out["loss_first"]) and out["loss_last"] < out["loss_first"]
