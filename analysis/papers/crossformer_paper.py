"""Published results of "Crossformer: Transformer with Alternated Cross-Layer Guidance"
(ICLR 2022 submission, anonymous) as analysis frames.

Only numbers stated in the project's sources (``shared/papers/README.md`` §4) are here,
from the packaged ``data/crossformer_tables.csv``: Table 1 (IWSLT'14 De-En, soft and hard
guidance per block), Tables 2 and 3 (WMT'14 En-De / En-Fr, hard guidance, 6-layer and
36-layer encoders) and Table 6 (the pairing ablation of hard guidance on IWSLT'14).
Columns of every table (``COLUMNS``): ``mode`` none|soft|hard, ``blocks`` key_query|value|
ffn joined by ``+`` (empty for none), ``label`` the sweep label (``sg-kq``, ``hg-kq+v+ffn``;
a pairing other than the paper's choice adds ``.qq``, ``.kk``, ``.qk`` or ``.w1w2``),
``pairing`` (key_query, query_query, key_key, query_key; w2_w1, w1_w2; alternating),
``layers`` as stated, ``params_m`` in millions (NaN: not stated), ``bleu``, and the
differences from the table's Transformer on the same dataset (``bleu_gain``,
``params_saved_m``; Table 6 against Table 1's Transformer, same setup).

Reading choices, stated here because the sources leave them open: Table 2's "6 layers"
is read as 6 + 6 (the Transformer-base 61M on WMT'14 En-De); "HG-All with 16 layers"
shares all three blocks, its encoder/decoder split is not stated (left empty).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError

__all__ = [
    "BLOCK_LABELS",
    "COLUMNS",
    "METRIC",
    "PAIRING_LABELS",
    "PAPER",
    "SOURCE",
    "TABLES",
    "caption",
    "guidance_label",
    "published_tables",
    "statements",
    "table",
    "table1",
    "table2",
    "table3",
    "table6",
]

PAPER = "crossformer"
SOURCE = "Crossformer (ICLR 2022 submission)"
METRIC = "bleu"
TABLES = (1, 2, 3, 6)
BLOCK_LABELS = {"key_query": "kq", "value": "v", "ffn": "ffn"}
"""Short names of the guided blocks in sweep labels (``hg-kq+ffn``)."""
_MODE_PREFIX = {"soft": "sg", "hard": "hg"}
PAIRING_LABELS = {"query_key": "qk", "query_query": "qq", "key_key": "kk", "w1_w2": "w1w2"}
"""Label suffixes of the pairings other than the paper's choice (key_query, w2_w1)."""
_CAPTIONS = {
    1: "Table 1: IWSLT'14 De-En, soft and hard guidance per block",
    2: "Table 2: WMT'14 En-De and En-Fr, 6 layers, hard guidance",
    3: "Table 3: WMT'14 En-De and En-Fr, 36-layer encoder, 6-layer decoder, hard guidance",
    6: "Table 6: IWSLT'14 De-En, hard guidance, which matrices are paired",
}
COLUMNS = [
    "table",
    "dataset",
    "model",
    "mode",
    "blocks",
    "label",
    "pairing",
    "layers",
    "encoder_layers",
    "decoder_layers",
    "params_m",
    "bleu",
    "reference_bleu",
    "bleu_gain",
    "params_saved_m",
    "metric",
    "source",
]


def guidance_label(mode: str, blocks: str, pairing: str = "") -> str:
    """The sweep label of a guidance setting: ``none``, ``sg-kq``, ``hg-kq+v+ffn``; a
    ``pairing`` other than the paper's (``query_key``, ``w1_w2``...) adds ``.qk``..."""
    if mode == "none":
        return "none"
    if mode not in _MODE_PREFIX:
        raise AnalysisError(f"guidance mode: got {mode!r}, expected none, soft or hard")
    names = [b for b in blocks.split("+") if b]
    unknown = [b for b in names if b not in BLOCK_LABELS]
    if unknown or not names:
        raise AnalysisError(
            f"guidance blocks: got {blocks!r}, expected key_query, value and/or ffn joined by '+'"
        )
    quals = "".join(f".{PAIRING_LABELS[p]}" for p in pairing.split("+") if p in PAIRING_LABELS)
    return f"{_MODE_PREFIX[mode]}-" + "+".join(BLOCK_LABELS[b] for b in names) + quals


@cache
def _raw() -> pd.DataFrame:
    path = resources.files("sublayer_search.analysis") / "data" / "crossformer_tables.csv"
    with resources.as_file(path) as file:
        return pd.read_csv(
            file,
            comment="#",
            dtype={"blocks": str, "pairing": str, "layers": str},
            keep_default_na=False,
            na_values={
                "params_m": [""],
                "bleu": [""],
                "encoder_layers": [""],
                "decoder_layers": [""],
            },
        )


def table(number: int) -> pd.DataFrame:
    """One of the paper's Tables 1, 2, 3, 6 (``COLUMNS``), in the paper's row order."""
    if number not in TABLES:
        raise AnalysisError(
            f"Crossformer tables built in: {', '.join(map(str, TABLES))}; got {number!r}"
        )
    raw = _raw()
    out = raw[raw["table"] == number].copy()
    ref_table = 1 if number == 6 else number
    refs = raw[(raw["table"] == ref_table) & (raw["mode"] == "none")].set_index("dataset")
    out["label"] = [
        guidance_label(m, b, p)
        for m, b, p in zip(out["mode"], out["blocks"], out["pairing"], strict=True)
    ]
    out["reference_bleu"] = out["dataset"].map(refs["bleu"]).astype(float)
    out["bleu_gain"] = (out["bleu"] - out["reference_bleu"]).round(2)
    saved = out["dataset"].map(refs["params_m"]).astype(float) - out["params_m"]
    out["params_saved_m"] = saved.round(1)
    for column in ("encoder_layers", "decoder_layers"):
        out[column] = pd.to_numeric(out[column]).astype("Int64")
    out["params_m"] = out["params_m"].astype(float)
    out["metric"] = METRIC
    reference = "" if number != 6 else "; reference: Table 1's Transformer"
    out["source"] = f"{SOURCE}, Table {number}{reference}"
    return out[COLUMNS].reset_index(drop=True)


def table1() -> pd.DataFrame:
    """Table 1 (IWSLT'14 De-En, Transformer-base): the Transformer (52M, 33.64), soft
    guidance per block (52M each) and hard guidance per block (FFN 39M, Value and
    Key-Query 48M)."""
    return table(1)


def table2() -> pd.DataFrame:
    """Table 2 (WMT'14 En-De and En-Fr, 6 layers): the Transformer, hard guidance per
    block, and hard guidance on all blocks with 16 layers at about the same parameters."""
    return table(2)


def table3() -> pd.DataFrame:
    """Table 3 (WMT'14 En-De and En-Fr, 36-layer encoder, 6-layer decoder): the
    Transformer and hard guidance per block."""
    return table(3)


def table6() -> pd.DataFrame:
    """Table 6 (IWSLT'14 De-En, hard guidance): which matrices are shared. Attention:
    query-query, key-key, query-key, key-query; FFN: w1-w2, w2-w1. Parameter counts are
    not stated. The paper fixes key-query and w2-w1 everywhere (its best pairs)."""
    return table(6)


def caption(number: int) -> str:
    """The report caption of a table."""
    return _CAPTIONS[number]


def statements() -> pd.DataFrame:
    """The paper's findings that carry no table of numbers, and the open questions."""
    src = f"{SOURCE} (statement)"
    return pd.DataFrame(
        [
            {
                "statement": "soft guidance: L = L_nll + alpha * sum_t ||A(t) - sg(B(t+1))|| (L2 "
                "norm, alpha = 0.01 on IWSLT'14); only the lower layer is pulled",
                "source": src,
            },
            {
                "statement": "hard guidance saves per layer: Key-Query d^2, Value/fusion d^2, FFN "
                "4d^2 (8d^2 -> 4d^2); all three 6d^2 of the 12d^2 block",
                "source": src,
            },
            {
                "statement": "deeper models (84 encoder layers) keep improving (Fig. 3, no numbers)",
                "source": src,
            },
            {
                "statement": "not stated: which layer is 'the layer above' when sublayers are "
                "reordered; this project reads it as the next sublayer of the same kind",
                "source": "sublayer-search",
            },
        ]
    )


def published_tables() -> dict[str, pd.DataFrame]:
    """The four tables and the statements, by report name."""
    out = {f"crossformer_table{n}": table(n) for n in TABLES}
    out["crossformer_statements"] = statements()
    return out
