"""Published results of Press, Smith & Levy (2020) as analysis frames.

Only numbers the paper states are here (see ``shared/papers/README.md``); nothing is
interpolated. Tables 1 and 2 come from the packaged ``data/press2020_tables.csv``.
``params`` of paper rows is the sublayer parameter count implied by the paper's model
(d = 1024, d_ff = 4096, biases and norms excluded, ``spaces.cost.order_params``);
the paper itself does not list per-model counts.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd

from sublayer_search.analysis.store.frame import trials_frame
from sublayer_search.spaces.cost import order_params, units
from sublayer_search.spaces.order import counts, sandwich_order
from sublayer_search.spaces.records import TrialStatus

__all__ = [
    "D_FF",
    "D_MODEL",
    "METRIC",
    "PAPER",
    "SOURCE",
    "attention_distances",
    "baseline_dev",
    "books",
    "character_level",
    "pooled_trials",
    "published_tables",
    "sandwich_points",
    "sandwich_seed_summary",
    "sandwich_statements",
    "table1",
    "table2",
    "wikitext103_test",
    "translation",
    "trials",
]

PAPER = "press2020"
SOURCE = "Press et al. (2020)"
METRIC = "val_ppl"
D_MODEL = 1024
D_FF = 4096
_N = 16
_TABLE_SPACE = {1: "permutations", 2: "budgeted"}
_TABLE_PREFIX = {1: "perm", 2: "budget"}


@cache
def _raw_tables() -> pd.DataFrame:
    path = resources.files("sublayer_search.analysis") / "data" / "press2020_tables.csv"
    with resources.as_file(path) as file:
        return pd.read_csv(file, comment="#", dtype={"order": str})


def _row(order: str, **fields: object) -> dict[str, object]:
    n = counts(order)
    row: dict[str, object] = {
        "order": order,
        "n_s": n["s"],
        "n_f": n["f"],
        "units": units(order),
        "params": order_params(order, d_model=D_MODEL, d_ff=D_FF),
        "metric": METRIC,
        "status": TrialStatus.FINISHED.value,
    }
    row.update(fields)
    if "best" not in row:
        row["best"] = row.get("final")
    return row


def trials(table: int) -> pd.DataFrame:
    """Table 1 (20 random permutations) or Table 2 (20 budgeted draws), each with the
    5 baseline seeds, as a trial frame (``final`` = ``best`` = dev perplexity)."""
    if table not in _TABLE_SPACE:
        from sublayer_search.analysis.errors import AnalysisError

        raise AnalysisError(f"Press et al. (2020) has trial tables 1 and 2, not {table!r}")
    raw = _raw_tables()
    raw = raw[raw["table"] == table]
    space = _TABLE_SPACE[table]
    rows: list[dict[str, object]] = []
    n_model = n_base = 0
    for rec in raw.itertuples(index=False):
        is_base = bool(rec.is_baseline)
        if is_base:
            name, seed, family = f"interleaved{_N}@seed{n_base}", n_base, "baseline"
            n_base += 1
        else:
            n_model += 1
            name, seed, family = f"{_TABLE_PREFIX[table]}{n_model:02d}", None, space
        rows.append(
            _row(
                rec.order,
                run_id=f"{PAPER}-t{table}-{len(rows) + 1:02d}",
                name=name,
                family=family,
                space=space,
                seed=seed,
                final=float(rec.dev_ppl),
                baseline=is_base,
                table=table,
                source=f"{SOURCE}, Table {table}",
            )
        )
    return trials_frame(rows)


def table1() -> pd.DataFrame:
    """Table 1: 20 random permutations of 16 s + 16 f, plus 5 baselines."""
    return trials(1)


def table2() -> pd.DataFrame:
    """Table 2: 20 parameter-budgeted random models (48 units), plus 5 baselines."""
    return trials(2)


def pooled_trials() -> pd.DataFrame:
    """Fig. 4's population: the 40 random models of Tables 1 and 2 together, with the
    five baselines once (both tables list the same five; Table 1's rows are kept)."""
    t1, t2 = table1(), table2()
    frame = pd.concat([t1, t2[~t2["baseline"]]], ignore_index=True)
    return trials_frame(frame.to_dict("records"))


def baseline_dev() -> tuple[float, ...]:
    """The five baseline dev perplexities (19.13, 18.83, 18.54, 18.49, 18.25)."""
    t1 = table1()
    return tuple(float(v) for v in t1.loc[t1["baseline"], "final"])


def sandwich_points() -> pd.DataFrame:
    """The sandwich^16_k dev perplexities the paper states (k = 6: 17.84; k = 15, i.e.
    s^16 f^16: 18.82), with the 5 baseline seeds, as a trial frame."""
    stated = {6: 17.84, 15: 18.82}
    rows = [
        _row(
            sandwich_order(_N, k),
            run_id=f"{PAPER}-sandwich-k{k:02d}",
            name=f"sandwich{_N}_{k}",
            family="sandwich",
            space="sandwich",
            k=k,
            final=value,
            baseline=False,
            source=f"{SOURCE}, Fig. 5 / §4",
        )
        for k, value in stated.items()
    ]
    base = table1()
    base = base[base["baseline"]].assign(space="sandwich", k=0, source=f"{SOURCE}, §3")
    frame = pd.concat([trials_frame(rows), base.drop(columns=["table"])], ignore_index=True)
    return trials_frame(frame.to_dict("records"))


def sandwich_statements() -> pd.DataFrame:
    """Which sandwich^16_k the paper says beat the average / best baseline (Fig. 5):
    all but k = 14, 15 beat the average; k = 5, 6, 8, 9, 10, 11 beat the best.
    Statements, not measured values (the other dev perplexities are only plotted)."""
    best = {5, 6, 8, 9, 10, 11}
    return pd.DataFrame(
        {
            "k": list(range(_N)),
            "beats_average": [k not in (14, 15) for k in range(_N)],
            "beats_best": [k in best for k in range(_N)],
            "source": f"{SOURCE}, Fig. 5 (statement)",
        }
    )


def sandwich_seed_summary() -> pd.DataFrame:
    """sandwich^16_6 over 5 seeds (17.98 ± 0.10, taken as mean ± sd) and the baseline
    (the 5 seeds of Table 1: mean 18.648, sample sd 0.339)."""
    base = baseline_dev()
    ser = pd.Series(base)
    return pd.DataFrame(
        [
            {"name": f"sandwich{_N}_6", "order": sandwich_order(_N, 6), "baseline": False,
             "n": 5, "mean": 17.98, "sd": 0.10, "metric": METRIC,
             "source": f"{SOURCE}, §4 (17.98 ± 0.10 over 5 seeds)"},
            {"name": f"interleaved{_N}", "order": sandwich_order(_N, 0), "baseline": True,
             "n": len(base), "mean": float(ser.mean()), "sd": float(ser.std(ddof=1)),
             "metric": METRIC, "source": f"{SOURCE}, §3 (5 seeds)"},
        ]
    )


def _published(rows: list[dict[str, object]]) -> pd.DataFrame:
    columns = ["dataset", "model", "metric", "value", "sd", "low", "high", "n_runs", "note",
               "source"]
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame.columns:
            frame[column] = None
    frame = frame[columns]
    for column in ("value", "sd", "low", "high"):
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    frame["n_runs"] = pd.to_numeric(frame["n_runs"]).astype("Int64")
    return frame


def wikitext103_test() -> pd.DataFrame:
    """WikiText-103 test perplexity."""
    t3 = f"{SOURCE}, Table 3"
    return _published([
        {"dataset": "wikitext-103", "model": "baseline (interleaved16)", "metric": "test_ppl",
         "value": 18.63, "sd": 0.26, "n_runs": 5, "source": f"{SOURCE}, §3"},
        {"dataset": "wikitext-103", "model": "Baevski & Auli (2019)", "metric": "test_ppl",
         "value": 18.70, "note": "as reported by Baevski & Auli", "source": f"{SOURCE}, §3"},
        {"dataset": "wikitext-103", "model": "sandwich16_6", "metric": "test_ppl",
         "value": 17.96, "source": t3},
        {"dataset": "wikitext-103", "model": "Transformer-XL", "metric": "test_ppl",
         "value": 18.30, "source": t3},
        {"dataset": "wikitext-103", "model": "kNN-LM", "metric": "test_ppl",
         "value": 15.79, "source": t3},
    ])


def books() -> pd.DataFrame:
    """Toronto Books Corpus perplexity (k tuned over 4..8)."""
    src = f"{SOURCE}, Tables 4–6 (Toronto Books)"
    return _published([
        {"dataset": "toronto-books", "model": "baseline", "metric": "ppl", "value": 11.89,
         "sd": 0.35, "n_runs": 5, "source": src},
        {"dataset": "toronto-books", "model": "sandwich16_7", "metric": "ppl", "value": 10.83,
         "note": "k tuned over 4..8", "source": src},
    ])


def character_level() -> pd.DataFrame:
    """text8 / enwik8 bits per character (adaptive-span model, 24 layers, 209M params)."""
    src = f"{SOURCE}, Tables 4–6 (text8/enwik8)"
    return _published([
        {"dataset": "text8", "model": "baseline", "metric": "bpc", "value": 1.0802,
         "sd": 0.0103, "source": src},
        {"dataset": "text8", "model": "sandwich24_3", "metric": "bpc", "value": 1.076,
         "source": src},
        {"dataset": "enwik8", "model": "baseline", "metric": "bpc", "value": 0.9752,
         "sd": 0.0008, "source": src},
        {"dataset": "enwik8", "model": "sandwich24_5", "metric": "bpc", "value": 0.968,
         "source": src},
    ])


def translation() -> pd.DataFrame:
    """WMT14 En-De BLEU (Transformer-large 6+6): sandwich encoders/decoders k = 1..5
    are only given as a range; no significant effect."""
    src = f"{SOURCE}, Tables 4–6 (WMT14 En-De)"
    return _published([
        {"dataset": "wmt14-en-de", "model": "baseline", "metric": "bleu", "value": 28.74,
         "sd": 0.15, "source": src},
        {"dataset": "wmt14-en-de", "model": "sandwich encoder/decoder, k = 1..5",
         "metric": "bleu", "low": 28.45, "high": 28.81,
         "note": "range over all variants; no significant effect", "source": src},
    ])


def attention_distances() -> pd.DataFrame:
    """Table 7: mean attention distance between models (Hungarian-matched heads, EMD)."""
    src = f"{SOURCE}, Table 7"
    return _published([
        {"dataset": "wikitext-103", "model": "baseline vs baseline",
         "metric": "attention_distance", "value": 1.081e-3, "source": src},
        {"dataset": "wikitext-103", "model": "sandwich vs sandwich",
         "metric": "attention_distance", "value": 1.067e-3, "source": src},
        {"dataset": "wikitext-103", "model": "baseline vs sandwich",
         "metric": "attention_distance", "value": 1.289e-3, "sd": 0.049e-3, "source": src},
    ])


def published_tables() -> dict[str, pd.DataFrame]:
    """Every published table that is not a trial frame, by name."""
    return {
        "wikitext103_test": wikitext103_test(),
        "books": books(),
        "character_level": character_level(),
        "translation": translation(),
        "attention_distances": attention_distances(),
        "sandwich_statements": sandwich_statements(),
        "sandwich_seed_summary": sandwich_seed_summary(),
    }
