"""Priors transferred from earlier studies (``search.prior``): what finished studies say
about orders, as a prior mean for the surrogate before its first trial (and the order
in which evolution draws its first population).

A study is a set of tables of order -> metric: the built-in ``press2020`` (Press et al.
2020, Tables 1 and 2, WikiText-103 dev perplexity), ``mini_press2020`` (the shipped
small-scale study: its permutations and budgeted draws; val_bpc) and ``replay40`` (the
shipped 40 permutations of 6 s + 6 f on the same corpus), an export of ``sublayer
export`` (its folder or ``<name>_meta.json``), a trials CSV (columns ``order``,
``final``), or an experiment of the MLflow store (its finished trials).

Transfer across scales, corpora and metrics (ppl vs bpc, min vs max) uses only what
carries: within each table the results become rank scores (standardised ranks, best
lowest), and an order is seen through features free of scale and of counts, where its
``s`` lie on its parameter budget, input first (:func:`prior_features`; the paper's
Fig. 4 pattern: attention low, feedforward high): how many ``s`` pay off differs between
corpora and scales (more is better on characters, no matter on WikiText-103), where they
go is what the paper claims carries. A ridge regression over the pooled tables
predicts an order's rank score. Its weight is the evidence: the mean Spearman
correlation of the fit on each source table when that table (with sources of several
studies: its whole study) is left out of the fit (one table alone: its own correlation
shrunk by its size); a weight <= 0 means no prior.
Nothing is fitted or chosen per judged table: the features and the ridge strength are
fixed; an earlier design (the ``s`` share of each budget quarter, count-dependent) was
measured by the leave-one-study-out benchmark (``benchmarks/searcher_oracle.py``) and
replaced on the argument above, before the present one was measured (docs/search.md).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sublayer_search.spaces.cost import f_units_for, unit_weights
from sublayer_search.spaces.features import order_features
from sublayer_search.spaces.order import parse_order
from sublayer_search.spaces.problems import Problem, ProblemError
from sublayer_search.spaces.records import Tag, TrialStatus, direction, final

__all__ = ["BUILTIN_PRIORS", "OrderPrior", "PriorError", "PriorTable",
           "builtin_tables", "fit_prior", "load_tables", "prior_features", "resolve_prior", "same_study"]

BUILTIN_PRIORS = ("press2020", "mini_press2020", "replay40")
"""Studies shipped with the product (``analysis/data``)."""
RIDGE = 1.0
"""Ridge strength on standardised features (fixed a priori, never tuned per table)."""
ONE_TABLE_SHRINK = 20.0
"""With a single source table its own correlation counts as ``n / (n + this)``."""


class PriorError(ProblemError):
    """A ``search.prior`` entry that names no study: one problem at ``search.prior``."""

    def __init__(self, value: object, expected: str) -> None:
        super().__init__([Problem("search.prior", value, expected)])
        self.args = (self.problems[0].plain(),)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes
        return (type(self), (self.value, self.expected))


@dataclass(frozen=True, kw_only=True)
class PriorTable:
    """One table of one study: raw (order, value) records and how to read them."""

    study: str
    """The study's identity (a built-in name, an export's name, a CSV's path)."""
    table: str
    """The table's name within the study (``press2020/table1``)."""
    records: tuple[tuple[str, float], ...]
    """Canonical order and one recorded value (seeds are separate records)."""
    mode: str = "min"
    f_units: float = 2.0
    """Cost of one ``f`` in ``s``-units in that study (2 at d_ff = 4d)."""

    def values(self) -> dict[str, float]:
        """Mean value per order."""
        found: dict[str, list[float]] = defaultdict(list)
        for order, value in self.records:
            found[order].append(value)
        return {o: sum(v) / len(v) for o, v in found.items()}

    def fingerprint(self) -> set[tuple[str, float]]:
        """(order, value to 9 significant digits): equal results mean the same study."""
        return {(o, float(f"{v:.9g}")) for o, v in self.records}


def same_study(a: PriorTable, b: PriorTable) -> bool:
    """Whether ``a`` and ``b`` come from one study: its name, or any shared record (the
    benchmark's leave-one-study-out rule holds by content, not by what a file is called)."""
    return a.study == b.study or bool(a.fingerprint() & b.fingerprint())


def prior_features(order: str, *, f_units: float = 2.0, c_units: float = 1.0) -> list[float]:
    """Free of scale and counts: the share of the order's ``s`` in the bottom half of the
    budget (0 to 1; 0.5 without ``s``) and the s/f balance, the mean budget position
    (0 input, 1 output) of its feedforward units (``f``, ``h``) minus that of its ``s``
    units (-1 to 1; 0 without either)."""
    values = order_features(order, f_units=f_units, c_units=c_units).values
    n_s = values["bottom_s"] + values["top_s"]
    weights = unit_weights(f_units, c_units)
    canonical = parse_order(order, kind="decoder")
    total = sum(weights[ch] for ch in canonical)
    mass: dict[str, list[float]] = {"s": [0.0, 0.0], "f": [0.0, 0.0]}
    start = 0.0
    for ch in canonical:
        width = weights[ch]
        kind = "f" if ch in "fh" else ch
        if kind in mass:
            mass[kind][0] += width * (start + width / 2) / total
            mass[kind][1] += width
        start += width
    centre = {k: m / w for k, (m, w) in mass.items() if w > 0}
    balance = centre["f"] - centre["s"] if len(centre) == 2 else 0.0
    return [values["bottom_s"] / n_s if n_s > 0 else 0.5, balance]


def _data_dir() -> Path:
    """``analysis/data`` located without importing ``analysis`` (search may not import it)."""
    spec = importlib.util.find_spec("sublayer_search.analysis")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _finite(value: object) -> float | None:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _press2020() -> list[PriorTable]:
    rows = _csv_rows(_data_dir() / "press2020_tables.csv")
    return [
        PriorTable(study="press2020", table=f"press2020/table{t}", records=tuple(
            (parse_order(r["order"], kind="decoder"), float(r["dev_ppl"]))
            for r in rows if r["table"] == t))
        for t in ("1", "2")
    ]


def _trials_tables(study: str, rows: list[dict[str, str]], *, mode: str, f_units: float,
                   source: str) -> list[PriorTable]:
    """Finished trials, one table per space (the baseline in each); no ``space``: one."""
    if not rows or not {"order", "final"} <= set(rows[0]):
        raise PriorError(source, "a trials table with columns order and final")
    done = [r for r in rows if r.get("status", "finished").lower() == "finished"
            and r.get("order") and _finite(r["final"]) is not None]
    spaces = sorted({r.get("space") or "all" for r in done} - {"baseline"}) or ["all"]
    tables = []
    for space in spaces:
        recs = tuple((parse_order(r["order"], kind="decoder"), float(r["final"])) for r in done
                     if (r.get("space") or "all") in (space, "baseline"))
        if len({o for o, _ in recs}) >= 3:
            tables.append(PriorTable(study=study, table=f"{study}/{space}", records=recs,
                                     mode=mode, f_units=f_units))
    return tables


def _export(meta_path: Path) -> list[PriorTable]:
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    name = str(meta.get("name") or meta.get("experiment") or meta_path.stem.removesuffix("_meta"))
    trials = meta_path.with_name(meta_path.name.replace("_meta.json", "_trials.csv"))
    model = meta.get("model") or {}
    d, ff = model.get("d_model"), model.get("d_ff")
    f_units = f_units_for(int(d), int(ff)) if d and ff else 2.0
    return _trials_tables(name, _csv_rows(trials), mode=str(meta.get("mode", "min")),
                          f_units=f_units, source=str(meta_path))


def builtin_tables(name: str) -> list[PriorTable]:
    """The tables of a built-in study (:data:`BUILTIN_PRIORS`)."""
    if name == "press2020":
        return _press2020()
    if name == "mini_press2020":
        tables = _export(_data_dir() / "mini_press2020_meta.json")
        return [t for t in tables if not t.table.endswith("/sandwich")]  # Fig. 5, not a draw
    if name == "replay40":
        return _export(_data_dir() / "replay40_meta.json")
    raise PriorError(name, f"one of {', '.join(BUILTIN_PRIORS)}, an export or a trials CSV")


def _store(name: str, uri: str) -> list[PriorTable]:
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).expanduser().is_file():
        raise PriorError(name, f"{', '.join(BUILTIN_PRIORS)}, an export folder or "
                         "<name>_meta.json or a trials CSV (the MLflow store does not exist yet)")
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(name)
    if found is None:
        raise PriorError(name, f"{', '.join(BUILTIN_PRIORS)}, an export folder or "
                         "<name>_meta.json, a trials CSV, or an MLflow experiment of the store")
    runs = client.search_runs([found.experiment_id], max_results=50000,
                              filter_string="attributes.status = 'FINISHED'")
    rows = []
    for run in runs:
        params, tags = run.data.params, run.data.tags
        metric = tags.get(Tag.METRIC) or ""
        value = run.data.metrics.get(final(metric)) if metric else None
        if params.get("order") and value is not None and tags.get(Tag.STATUS) in (
                None, TrialStatus.FINISHED):
            rows.append({"order": params["order"], "final": str(value), "metric": metric,
                         "space": params.get("space") or tags.get(Tag.SPACE) or "all"})
    mode = direction(rows[0]["metric"]) if rows else "min"
    return _trials_tables(f"store:{name}", rows, mode=mode, f_units=2.0, source=name)


def load_tables(name: str, *, tracking_uri: str | None = None,
                mode: str = "min") -> list[PriorTable]:
    """The tables one ``search.prior`` entry names (see the module docstring); ``mode``:
    the direction of a plain trials CSV (an export's and the store's are recorded)."""
    if name in BUILTIN_PRIORS:
        return builtin_tables(name)
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        metas = sorted(path.glob("*_meta.json"))
        if len(metas) != 1:
            raise PriorError(name, "an export folder with one <name>_meta.json")
        return _export(metas[0])
    if path.is_file():
        if path.name.endswith("_meta.json"):
            return _export(path)
        return _trials_tables(str(path.resolve()), _csv_rows(path), mode=mode, f_units=2.0,
                              source=name)
    if tracking_uri is None:
        raise PriorError(name, f"one of {', '.join(BUILTIN_PRIORS)}, an export or a trials CSV")
    return _store(name, tracking_uri)


def _rank_scores(table: PriorTable) -> tuple[list[str], np.ndarray]:
    """Orders and their standardised ranks (best lowest, mean 0, sd 1)."""
    from scipy.stats import rankdata  # scipy only once a prior is fitted: not at --dry-run

    values = table.values()
    orders = sorted(values)
    sign = 1.0 if table.mode == "min" else -1.0
    ranks = rankdata([sign * values[o] for o in orders])
    sd = ranks.std()
    return orders, (ranks - ranks.mean()) / (sd if sd > 0 else 1.0)


def _ridge(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    xs = (x - mean) / sd
    coef = np.linalg.solve(xs.T @ xs + RIDGE * np.eye(x.shape[1]), xs.T @ y)
    return mean, sd, coef


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    from scipy.stats import spearmanr

    rho = float(spearmanr(a, b)[0])
    return rho if math.isfinite(rho) else 0.0


@dataclass(frozen=True, kw_only=True)
class OrderPrior:
    """A fitted prior: predicted rank score of an order (lower is better) times its weight."""

    sources: tuple[str, ...]
    """The tables it was fitted on."""
    mean: tuple[float, ...]
    sd: tuple[float, ...]
    coef: tuple[float, ...]
    weight: float
    """The evidence (0 to 1): held-out rank correlation over the source tables."""
    rows: int = 0
    held_out: dict[str, float] = field(default_factory=dict)
    """Each source table's Spearman correlation when left out of the fit."""

    def predict(self, orders: Sequence[str], *, f_units: float = 2.0,
                c_units: float = 1.0) -> np.ndarray:
        """``weight`` x the predicted rank score of each order (0 for no evidence)."""
        x = np.array([prior_features(o, f_units=f_units, c_units=c_units) for o in orders],
                     dtype=float).reshape(len(orders), -1)
        raw = ((x - np.array(self.mean)) / np.array(self.sd)) @ np.array(self.coef)
        return np.asarray(self.weight * raw)

    def describe(self) -> str:
        """One line for the dry run."""
        held = ", ".join(f"{t} {r:+.2f}" for t, r in self.held_out.items())
        unused = "; no evidence: not used" if self.weight <= 0 else ""
        return (f"prior from {', '.join(self.sources)} ({self.rows} orders), weight "
                f"{self.weight:.2f}" + (f" (held-out rank correlation: {held})" if held else "")
                + unused)


def _design(tables: Iterable[PriorTable]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for table in tables:
        orders, y = _rank_scores(table)
        xs += [prior_features(o, f_units=table.f_units) for o in orders]
        ys.append(y)
    return np.array(xs, dtype=float), np.concatenate(ys)


def fit_prior(tables: Sequence[PriorTable]) -> OrderPrior:
    """Ridge regression of rank scores on :func:`prior_features` over ``tables``, weighted
    by its held-out agreement (module docstring)."""
    tables = [t for t in tables if len(t.values()) >= 3]
    if not tables:
        raise PriorError("", "studies with at least 3 orders in a table")
    x, y = _design(tables)
    mean, sd, coef = _ridge(x, y)
    held: dict[str, float] = {}
    across = len({t.study for t in tables}) > 1  # transfer across studies is what counts
    if len(tables) > 1:
        for i, table in enumerate(tables):
            xo, yo = _design([t for j, t in enumerate(tables)
                              if j != i and not (across and t.study == table.study)])
            m, s, c = _ridge(xo, yo)
            xt, yt = _design([table])
            held[table.table] = _spearman(((xt - m) / s) @ c, yt)
        weight = float(np.mean(list(held.values())))
    else:
        n = len(y)
        weight = _spearman(((x - mean) / sd) @ coef, y) * n / (n + ONE_TABLE_SHRINK)
    return OrderPrior(sources=tuple(t.table for t in tables), mean=tuple(mean), sd=tuple(sd),
                      coef=tuple(coef), weight=max(0.0, min(1.0, weight)), rows=len(y),
                      held_out=held)


def resolve_prior(names: str | Sequence[str], *, tracking_uri: str | None = None,
                  exclude: Sequence[PriorTable] = ()) -> OrderPrior:
    """The prior ``search.prior`` names, fitted; tables of the studies of ``exclude`` are
    left out (:func:`same_study`)."""
    names = [names] if isinstance(names, str) else list(names)
    tables = [t for n in names for t in load_tables(n, tracking_uri=tracking_uri)
              if not any(same_study(t, e) for e in exclude)]
    if not tables:
        raise PriorError(", ".join(names), "a study other than the one judged")
    return fit_prior(tables)
