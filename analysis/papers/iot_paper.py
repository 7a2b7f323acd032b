"""Published results of Zhu et al., "IOT: Instance-wise Layer Reordering for Transformer
Structures" (ICLR 2021), as analysis frames.

Only numbers stated in the project's sources (``shared/papers/README.md`` §2) are here:
IWSLT14 De→En BLEU of the Transformer (34.64) and of IOT with N = 2..6 decoder orders
(labelled the paper's Table 3), the subsets used for each N, and the training-cost
ratios. The issue also names the paper's Table 13; it is **not included** because its
numbers are not in the project's sources, and none are invented here. The Press et al.
(2020) WMT14 En-De translation facts are :func:`analysis.papers.press_paper.translation`.
"""

from __future__ import annotations

import pandas as pd

from sublayer_search.analysis.papers import press_paper as press
from sublayer_search.analysis.store.frame import trials_frame
from sublayer_search.spaces.generators.iot_subsets import DECODER_BLOCKS, PAPER_SUBSETS
from sublayer_search.spaces.records import TrialStatus

__all__ = [
    "DATASET",
    "LAYERS",
    "METRIC",
    "PAPER",
    "SCORED",
    "SOURCE",
    "TABLE3",
    "published_tables",
    "statements",
    "table3",
    "training_cost",
    "trials",
]

PAPER = "zhu2021"
SOURCE = "Zhu et al. (2021)"
TABLE3 = f"{SOURCE}, Table 3 (IWSLT14 De→En)"
DATASET = "iwslt14-de-en"
METRIC = "bleu"
SCORED = "multi-bleu.perl on tokenised text (sacrebleu tokenize none), test split"
"""How the paper's BLEU is scored (fairseq's IWSLT14 recipe, their seed-003 checkpoint)."""
LAYERS = 6
"""Decoder blocks of ``transformer_iwslt_de_en`` (6 + 6)."""

_BLEU: dict[int, float] = {1: 34.64, 2: 35.32, 3: 35.58, 4: 35.62, 5: 35.65, 6: 35.60}
"""BLEU by number N of decoder orders; N = 1 is the Transformer baseline (code 1)."""


def table3() -> pd.DataFrame:
    """IWSLT14 De→En BLEU by number of decoder orders N (N = 1: the Transformer), with
    the subset used for each N and the gain over the Transformer."""
    subsets = PAPER_SUBSETS["decoder"]
    rows = []
    for n, value in _BLEU.items():
        codes = subsets[n]
        rows.append({
            "model": "Transformer" if n == 1 else f"IOT (N={n})",
            "size": n,
            "subset": "".join(str(c) for c in codes),
            "codes": ",".join(str(c) for c in codes),
            "blocks": " ".join(DECODER_BLOCKS[c] for c in codes),
            "dataset": DATASET,
            "metric": METRIC,
            "value": value,
            "gain": round(value - _BLEU[1], 2),
            "source": TABLE3,
        })
    return pd.DataFrame(rows)


def trials() -> pd.DataFrame:
    """Table 3 as a trial frame (one row per N, ``final`` = ``best`` = BLEU): the
    Transformer is the baseline (family ``baseline``, subset {1}); ``order`` is the first
    block of the subset stacked 6 times, ``params`` is not given by the paper."""
    rows = []
    for rec in table3().itertuples(index=False):
        first = DECODER_BLOCKS[int(rec.subset[0])] * LAYERS
        is_base = rec.size == 1
        rows.append({
            "run_id": f"{PAPER}-t3-n{rec.size}",
            "name": "transformer" if is_base else f"iot{rec.subset}",
            "order": first,
            "family": "baseline" if is_base else "iot_subsets",
            "space": "iot_subsets",
            "metric": METRIC,
            "final": rec.value,
            "best": rec.value,
            "status": TrialStatus.FINISHED.value,
            "baseline": is_base,
            "task": "translation",
            "subset": rec.subset,
            "subset_size": rec.size,
            "codes": rec.codes,
            "stack": "decoder",
            "source": TABLE3,
        })
    return trials_frame(rows)


def training_cost() -> pd.DataFrame:
    """Training cost of IOT relative to the Transformer (per epoch and in total; the
    total is lower than per epoch because fewer epochs are needed)."""
    src = f"{SOURCE}, §2 facts (training cost)"
    return pd.DataFrame([
        {"size": 2, "per_epoch": 1.72, "total": 1.08, "source": src},
        {"size": 3, "per_epoch": 2.47, "total": 1.44, "source": src},
    ])


def statements() -> pd.DataFrame:
    """The paper's verbal findings that carry no table of numbers."""
    src = f"{SOURCE} (statement)"
    return pd.DataFrame([
        {"statement": "other 5-subsets score within ±0.1 BLEU of {1,2,4,5,6}; no algorithm "
                      "picks the subsets", "source": src},
        {"statement": "encoder and decoder orders together (M = 2) are worse than "
                      "decoder-only", "source": src},
        {"statement": "inference time is about unchanged (argmax routing, one decoding)",
         "source": src},
        {"statement": "Table 13 is not reproduced: its numbers are not in the project's "
                      "sources", "source": "sublayer-search"},
    ])


def published_tables() -> dict[str, pd.DataFrame]:
    """Every published table of the IOT comparison, by name (with Press et al.'s
    WMT14 En-De translation results)."""
    return {
        "zhu2021_table3": table3(),
        "zhu2021_training_cost": training_cost(),
        "zhu2021_statements": statements(),
        "press2020_translation": press.translation(),
    }
