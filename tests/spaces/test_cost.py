"""Parameter cost, units and the bottom/top halves."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sublayer_search.spaces import (
    STRADDLE,
    Halves,
    SpaceError,
    counts,
    halves,
    order_params,
    unit_costs,
    units,
)


def test_unit_costs_plain_and_exact() -> None:
    assert unit_costs(d_model=1024, d_ff=4096) == {
        "s": 4 * 1024**2, "f": 8 * 1024**2, "c": 4 * 1024**2}
    d, ff = 8, 32
    exact = unit_costs(d_model=d, d_ff=ff, exact=True)
    # q,k,v,out Linear(d,d) with bias + LayerNorm(d) weight and bias
    assert exact["s"] == exact["c"] == 4 * (d * d + d) + 2 * d
    # Linear(d,ff) + Linear(ff,d) with bias + LayerNorm(d)
    assert exact["f"] == (d * ff + ff) + (ff * d + d) + 2 * d


def test_order_params() -> None:
    assert order_params("sfsf", d_model=4, d_ff=16) == 2 * 64 + 2 * 128
    assert order_params("s^2 f", d_model=4, d_ff=16, exact=True) == (
        2 * unit_costs(d_model=4, d_ff=16, exact=True)["s"]
        + unit_costs(d_model=4, d_ff=16, exact=True)["f"])
    with pytest.raises(SpaceError, match="d_model: got 0, expected a positive integer"):
        order_params("sf", d_model=0, d_ff=4)


def test_units() -> None:
    assert units("sfsf") == 6
    assert units("scf") == 4
    assert units("sff", f_units=2.5) == 6
    assert units("scf", c_units=2) == 5
    with pytest.raises(SpaceError, match="f_units"):
        units("sf", f_units=0)


def test_every_paper_model_costs_48_units(papers_dir: Path) -> None:
    with open(papers_dir / "press2020_tables.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 50
    for row in rows:
        assert units(row["order"]) == 48, row
        assert order_params(row["order"], d_model=1024, d_ff=4096) == 48 * 4 * 1024**2


def _h(s: float = 0, f: float = 0) -> dict[str, float]:
    return {"s": s, "f": f, "c": 0.0}


def test_halves_paper_example() -> None:
    result = halves("ssssff")
    assert result == Halves(bottom=_h(s=4), top=_h(f=2))
    assert result.bottom == _h(s=4) and result.top == _h(f=2)


def test_halves_exact_cut_has_no_straddle() -> None:
    # sfsf: s[0,1) f[1,3) | s[3,4) f[4,6): cut at 3 falls on a boundary
    for mode in STRADDLE:
        assert halves("sfsf", straddle=mode) == Halves(bottom=_h(1, 1), top=_h(1, 1))


@pytest.mark.parametrize(
    ("mode", "bottom", "top"),
    [
        ("fractional", _h(s=1, f=0.5), _h(s=1, f=0.5)),
        ("bottom", _h(s=1, f=1), _h(s=1)),
        ("top", _h(s=1), _h(s=1, f=1)),
        ("drop", _h(s=1), _h(s=1)),
    ],
)
def test_halves_straddling_f(mode: str, bottom: dict[str, float], top: dict[str, float]) -> None:
    # sfs: s[0,1) f[1,3) s[3,4), cut at 2 splits the f evenly
    assert halves("sfs", straddle=mode) == Halves(bottom=bottom, top=top)


def test_halves_uneven_straddle() -> None:
    # ffs: f[0,2) f[2,4) s[4,5), cut 2.5: the second f has 0.5 of 2 units below
    result = halves("ffs")
    assert result.bottom == _h(f=1.25)
    assert result.top == _h(s=1, f=0.75)
    # a straddling s with f_units=3: sf (4 units, cut 2) -> f[1,4) has 1 of 3 below
    assert halves("sf", f_units=3).bottom == pytest.approx(_h(s=1, f=1 / 3))


def test_halves_bad_straddle() -> None:
    with pytest.raises(SpaceError, match="straddle: got 'middle', expected one of fractional"):
        halves("sf", straddle="middle")


@given(st.text(alphabet="sf", min_size=1, max_size=80))
def test_halves_fractional_conserves_counts_and_units(order: str) -> None:
    result = halves(order)
    n = counts(order)
    for kind in "sf":
        assert result.bottom[kind] + result.top[kind] == pytest.approx(n[kind])
    bottom_units = result.bottom["s"] + 2 * result.bottom["f"]
    assert bottom_units == pytest.approx(units(order) / 2)
