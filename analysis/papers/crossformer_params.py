"""The Crossformer paper's parameter counts (Tables 1–3) against the product's.

The product's count of a row is spaces-level arithmetic (:func:`spaces.cost.sublayer_costs`
with ``exact``: every weight, bias and LayerNorm of a sublayer), the same sum as
``models.seq2seq.config.seq2seq_param_count`` (analysis never imports ``models``; the
tests check the two agree on every row): embeddings + the sublayers of both stacks + two
final LayerNorms − the matrices hard guidance shares. Soft guidance adds nothing.

**Setup** (the paper states Transformer-base, 6 + 6 or 36 + 6 layers, not its vocabulary):
d 512, d_ff 2048, pre-LN, sinusoidal positions, output tied to the target embedding; a
vocabulary per dataset (:data:`SETUPS`) that reproduces the paper's Transformer rows.
Savings do not depend on the vocabulary.

**Readings** of hard guidance, the saving of each block per stack of T sublayers of a kind
(d² per attention pair, d·d_ff per feedforward pair):

* ``eq5`` (the product, the paper's Eq. 5): T − 1 shared pairs per stack; cross-attention
  as is. Lands 1.3–3.4M above the paper's 6 + 6 rows.
* ``ffn_every_layer``: the FFN block halves every layer's feedforward (the paper's "8d² →
  4d² per layer": T per stack, one more than Eq. 5 allows). Fits the FFN rows.
* ``cross_chain``: Key-Query and Value also guide the decoder's cross-attention as a chain
  of its own (T_dec − 1 more pairs; the product's ``cross_attention: true``). Fits the
  6 + 6 Key-Query and Value rows and Table 3's En-Fr ones, not its En-De ones.
* ``per_block``: the paper's own per-block rule (its Sec. 2: 1d², 4d², 1d² saved per
  guided block for Key-Query, FFN and Value) applied to every block of the kind, the
  decoder's cross-attention included: T per stack, and T_dec cross-attention blocks
  more. Fits all ten Key-Query and Value rows of Tables 1–3 (6 + 6: 18d² = 4.72M;
  36 + 6: 48d² = 12.58M) and, as ``ffn_every_layer``, the FFN rows it fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sublayer_search.analysis.papers import crossformer_paper as cp
from sublayer_search.spaces.cost import sublayer_costs

__all__ = ["COLUMNS", "READINGS", "SETUPS", "Setup", "params_table", "row_params"]

READINGS = ("eq5", "ffn_every_layer", "cross_chain", "per_block")
"""Ways to count what hard guidance shares (module docstring); ``eq5`` is the product's."""
D_MODEL, D_FF = 512, 2048
"""Transformer-base, as the paper states for every table."""
HG_ALL_DEPTH = 16
"""Table 2's "HG-All with 16 layers": read as a 16-layer encoder over the 6-layer decoder
(the split is not stated), both stacks guided on all three blocks."""
TOLERANCE_M = 1.0
"""The paper prints whole millions, so its saving (the Transformer's count minus the row's)
is off by up to 1M: a reading fits when its saving is within 1M of the paper's. Savings do
not depend on the vocabulary, the counts themselves do."""


@dataclass(frozen=True)
class Setup:
    """The vocabulary of a dataset's models (not stated by the paper)."""

    vocab: int
    shared_embeddings: bool
    note: str


SETUPS = {
    "iwslt14-de-en": Setup(8000, False, "8,000-piece joint BPE, separate source and target "
                           "embeddings (configs/crossformer_iwslt14.yaml)"),
    "wmt14-en-de": Setup(32768, True, "32K joint BPE, one shared embedding"),
    "wmt14-en-fr": Setup(43500, False, "43.5K pieces per side, separate embeddings (fitted to "
                         "the paper's 89M and 183M Transformers)"),
}
COLUMNS = ["table", "dataset", "model", "label", "encoder_layers", "decoder_layers",
           "paper_params_m", "product_params_m", "gap_m", "ffn_every_layer_m", "cross_chain_m",
           "per_block_m", "paper_saved_m", "product_saved_m", "ffn_every_layer_saved_m",
           "cross_chain_saved_m", "per_block_saved_m", "fits", "closest", "reading"]


def _pairs(n: int, reading: str, *, block: str) -> int:
    """Shared matrices of ``block`` along a chain of ``n`` sublayers of one kind."""
    every = reading == "per_block" or (reading == "ffn_every_layer" and block == "ffn")
    return n if every else max(n - 1, 0)


def row_params(encoder_layers: int, decoder_layers: int, dataset: str, *,
               blocks: tuple[str, ...] = (), reading: str = "eq5") -> int:
    """Exact parameters of a (sf)^E encoder and (scf)^D decoder Transformer-base with hard
    guidance on ``blocks`` counted by ``reading`` (no blocks: the unguided model, also
    every soft-guidance model)."""
    if reading not in READINGS:
        raise ValueError(f"reading: got {reading!r}, expected one of {', '.join(READINGS)}")
    setup = SETUPS[dataset]
    d, ff = D_MODEL, D_FF
    cost = sublayer_costs(d_model=d, d_ff=ff, exact=True)
    embeddings = setup.vocab * d * (1 if setup.shared_embeddings else 2)
    sublayers = encoder_layers * (cost["s"] + cost["f"]) \
        + decoder_layers * (2 * cost["s"] + cost["f"])
    saved = 0
    for block in blocks:
        for layers in (encoder_layers, decoder_layers):
            pairs = _pairs(layers, reading, block=block)
            saved += pairs * d * ff if block == "ffn" else pairs * d * d
        if block != "ffn" and reading in ("cross_chain", "per_block"):
            saved += _pairs(decoder_layers, reading, block=block) * d * d
    return embeddings + sublayers + 2 * 2 * d - saved


def _layers(row: pd.Series) -> tuple[int, int]:
    if pd.isna(row["encoder_layers"]):  # HG-All, 16 layers
        return HG_ALL_DEPTH, 6
    return int(row["encoder_layers"]), int(row["decoder_layers"])


def _reading(row: pd.Series, saved: dict[str, float], fits: list[str], enc: int,
             dec: int) -> str:
    paper = f"the paper saves {row['params_saved_m']:.0f}M"
    eq5 = f"Eq. 5 (T-1 pairs per stack, {enc - 1}+{dec - 1}) saves {saved['eq5']:.2f}M"
    if row["mode"] == "none":
        return f"the setup ({SETUPS[row['dataset']].note}) reproduces the Transformer"
    if row["mode"] == "soft":
        return "soft guidance shares nothing: the Transformer's count"
    if pd.isna(row["encoder_layers"]):
        return (f"split not stated, read as {enc}+{dec} with all blocks guided: {eq5}, about "
                f"the Transformer's count as the paper says ({paper}); no reading fits exactly")
    if row["blocks"] == "ffn":
        every = (f"halving every layer's FFN (8d^2 -> 4d^2, {enc}+{dec} of d*d_ff, one more "
                 f"per stack than Eq. 5 allows) saves {saved['ffn_every_layer']:.2f}M")
        verdict = "fits" if "ffn_every_layer" in fits else "comes closest but saves less"
        return f"{eq5}; {paper}: {every}, which {verdict}"
    cross = (f"guiding the decoder's cross-attention as well, as a chain ({dec - 1} more "
             f"pairs of d^2; cross_attention: true), saves {saved['cross_chain']:.2f}M, "
             f"which {'fits' if 'cross_chain' in fits else 'does not fit'}")
    block = (f"the paper's per-block rule (1d^2 per guided attention block, every one: "
             f"{enc}+{dec} self and {dec} cross) saves {saved['per_block']:.2f}M, which "
             f"{'fits' if 'per_block' in fits else 'does not fit'}")
    return f"{eq5}, cross-attention as is; {paper}: {cross}; {block}"


def params_table() -> pd.DataFrame:
    """Every row of Tables 1–3: the paper's count, the product's (Eq. 5) and each
    reading's; the savings against the table's Transformer; the readings whose saving fits
    the paper's (``all`` for a model without hard guidance, ``none``), the closest one,
    and the reading that explains the difference."""
    rows = []
    for number in (1, 2, 3):
        t = cp.table(number)
        for _, r in t.iterrows():
            enc, dec = _layers(r)
            blocks = tuple(b for b in r["blocks"].split("+") if b) if r["mode"] == "hard" else ()
            counts = {reading: row_params(enc, dec, r["dataset"], blocks=blocks, reading=reading)
                      for reading in READINGS}
            base = row_params(*_base_layers(t, r), r["dataset"])
            saved = {name: round((base - n) / 1e6, 2) for name, n in counts.items()}
            miss = {name: abs(s - r["params_saved_m"]) for name, s in saved.items()}
            fits = [name for name in READINGS if miss[name] <= TOLERANCE_M]
            rows.append({
                "table": number, "dataset": r["dataset"], "model": r["model"],
                "label": r["label"], "encoder_layers": enc, "decoder_layers": dec,
                "paper_params_m": float(r["params_m"]),
                "product_params_m": round(counts["eq5"] / 1e6, 2),
                "gap_m": round(counts["eq5"] / 1e6 - r["params_m"], 2),
                "ffn_every_layer_m": round(counts["ffn_every_layer"] / 1e6, 2),
                "cross_chain_m": round(counts["cross_chain"] / 1e6, 2),
                "per_block_m": round(counts["per_block"] / 1e6, 2),
                "paper_saved_m": float(r["params_saved_m"]),
                "product_saved_m": saved["eq5"],
                "ffn_every_layer_saved_m": saved["ffn_every_layer"],
                "cross_chain_saved_m": saved["cross_chain"],
                "per_block_saved_m": saved["per_block"],
                "fits": ("all" if fits else "none") if not blocks else "+".join(fits) or "none",
                "closest": "all" if not blocks else min(READINGS, key=miss.__getitem__),
                "reading": _reading(r, saved, fits, enc, dec),
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def _base_layers(table: pd.DataFrame, row: pd.Series) -> tuple[int, int]:
    """The layers of the table's Transformer on the row's dataset."""
    base = table[(table["mode"] == "none") & (table["dataset"] == row["dataset"])].iloc[0]
    return int(base["encoder_layers"]), int(base["decoder_layers"])
