"""Parsing orders: notations, canonical forms and errors (positions are 0-based)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sublayer_search.spaces import (
    MAX_LENGTH,
    OrderError,
    SpaceError,
    counts,
    interleaved,
    parse_order,
    sandwich_order,
)

lm_orders = st.text(alphabet="sf", min_size=1, max_size=200)
decoder_orders = st.text(alphabet="scf", min_size=1, max_size=200)


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("sfsf", "lm", "sfsf"),
        ("sf|ff|ss", "lm", "sfffss"),
        ("sf | ff |", "lm", "sfff"),
        ("s.s.sf.f.f", "lm", "sssfff"),
        ("s^6 (sf)^10 f^6", "lm", "s" * 6 + "sf" * 10 + "f" * 6),
        ("sf^2", "lm", "sff"),
        ("((sf)^2 s)^3", "lm", "sfsfs" * 3),
        ("(s(f)^2)^2", "lm", "sffsff"),
        ("s ^ 3", "lm", "sss"),
        ("sandwich(3,1)", "lm", "ssfsff"),
        ("sandwich( 16 , 6 )", "lm", "s" * 6 + "sf" * 10 + "f" * 6),
        ("interleaved(3)", "lm", "sfsfsf"),
        ("interleaved(2)", "decoder", "scfscf"),
        ("interleaved(2)^2 s", "lm", "sfsfsfsfs"),
        ("sandwich(3,1)", "decoder", "scscfscff"),  # the paper's (sc)(sc)f(sc)ff
        ("scf|fcs", "decoder", "scffcs"),
        ("s" * MAX_LENGTH, "lm", "s" * MAX_LENGTH),
        ("s^1024", "lm", "s" * 1024),
    ],
)
def test_notations_give_canonical_strings(text: str, kind: str, expected: str) -> None:
    assert parse_order(text, kind=kind) == expected


def test_named_families_match_helpers() -> None:
    assert parse_order("sandwich(16,6)") == sandwich_order(16, 6)
    assert sandwich_order(16, 0) == interleaved(16) == "sf" * 16
    assert sandwich_order(16, 15) == "s" * 16 + "f" * 16
    assert interleaved(3, kind="decoder") == "scf" * 3


@given(lm_orders)
def test_canonical_is_a_fixed_point(order: str) -> None:
    assert parse_order(order) == order


@given(decoder_orders)
def test_canonical_is_a_fixed_point_for_decoders(order: str) -> None:
    assert parse_order(order, kind="decoder") == order


def _runs(order: str) -> list[tuple[str, int]]:
    runs: list[tuple[str, int]] = []
    for ch in order:
        if runs and runs[-1][0] == ch:
            runs[-1] = (ch, runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs


@given(lm_orders, st.sampled_from([" ", "|", ".", " | "]))
def test_shorthand_round_trip(order: str, sep: str) -> None:
    shorthand = " ".join(f"{ch}^{n}" for ch, n in _runs(order))
    assert parse_order(shorthand) == order
    assert parse_order(sep.join(order)) == order
    assert parse_order(f"({order})^2") == order * 2 or len(order) * 2 > MAX_LENGTH


@given(st.text(alphabet="sfcx()^0123456789 |.-,", max_size=30))
def test_any_text_parses_or_names_a_position(text: str) -> None:
    try:
        result = parse_order(text)
    except OrderError as err:
        assert 0 <= err.position <= len(text)
        assert "expected" in err.problem
        assert str(err).startswith(f"invalid order {text!r}: position {err.position}: ")
    else:
        assert result and set(result) <= {"s", "f"}


@pytest.mark.parametrize(
    ("text", "kind", "position", "fragment"),
    [
        ("sfx", "lm", 2, "unknown symbol 'x' (expected one of s, f, w, r, e)"),
        ("", "lm", 0, "empty order (expected at least one sublayer"),
        ("| . |", "lm", 0, "empty order"),
        ("s(sf", "lm", 1, "'(' is never closed (expected ')')"),
        ("sf)s", "lm", 2, "')' without a matching '('"),
        ("s()^2", "lm", 1, "empty group"),
        ("s^0", "lm", 2, "exponent 0 (expected a positive integer)"),
        ("s^-2", "lm", 2, "negative exponent -2 (expected a positive integer)"),
        ("sf^", "lm", 3, "missing exponent after '^' (expected a positive integer)"),
        ("s^f", "lm", 2, "missing exponent"),
        ("^2", "lm", 0, "nothing to repeat"),
        ("s6", "lm", 1, "unexpected digit '6'"),
        ("sfcf", "lm", 2, "'c' is not allowed in an order for kind 'lm' (expected one of s, f, w, r, e)"),
        ("scf", "encoder", 1, "'c' is not allowed"),
        ("scx", "decoder", 2, "unknown symbol 'x' (expected one of s, c, f)"),
        ("ss s^1023", "lm", 3, "longer than 1024 sublayers (expected at most 1024)"),
        ("s" * 1025, "lm", 1024, "longer than 1024 sublayers"),
        ("(sf)^99999999999999999999", "lm", 0, "longer than 1024"),
        ("sandwich(3,3)", "lm", 11, "k = 3 in sandwich (expected an integer in 0..2)"),
        ("sandwich(0,0)", "lm", 9, "n = 0 in sandwich (expected a positive integer)"),
        ("sandwich(3)", "lm", 0, "sandwich takes 2 argument(s), got 1"),
        ("sandwich(3,1", "lm", 8, "'(' is never closed"),
        ("sandwich(3;1)", "lm", 10, "unexpected ';'"),
        ("sandwich", "lm", 0, "without arguments (expected sandwich(n,k))"),
        ("interleaved(x)", "lm", 12, "expected an integer argument"),
        ("interleaved(600)", "lm", 0, "longer than 1024"),
        ("foo(3)", "lm", 0, "unknown family 'foo' (expected one of sandwich(n,k)"),
    ],
)
def test_errors_name_position_and_problem(text: str, kind: str, position: int,
                                          fragment: str) -> None:
    with pytest.raises(OrderError) as info:
        parse_order(text, kind=kind)
    err = info.value
    assert err.position == position
    assert fragment in err.problem
    assert str(err) == f"invalid order {text!r}: position {position}: {err.problem}"
    assert isinstance(err, ValueError)


def test_contract_message_and_pickling() -> None:
    with pytest.raises(OrderError) as info:
        parse_order("sfx")
    assert str(info.value) == (
        "invalid order 'sfx': position 2: unknown symbol 'x' (expected one of s, f, w, r, e)"
    )
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value) and again.position == 2


def test_max_length_is_a_setting() -> None:
    assert parse_order("s^4", max_length=4) == "ssss"
    with pytest.raises(OrderError, match="longer than 3"):
        parse_order("s^4", max_length=3)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(OrderError, match="nested too deeply"):
        parse_order("(" * 2000 + "s" + ")" * 2000)


def test_bad_kind_and_non_string() -> None:
    with pytest.raises(SpaceError, match="kind: got 'gpt', expected one of lm, encoder, decoder"):
        parse_order("sf", kind="gpt")
    with pytest.raises(OrderError, match="not a string"):
        parse_order(42)  # type: ignore[arg-type]


def test_counts() -> None:
    assert counts("sfsf") == {"s": 2, "f": 2, "c": 0}
    assert counts("scff") == {"s": 1, "f": 2, "c": 1}
    with pytest.raises(OrderError) as info:
        counts("sfx")
    assert info.value.position == 2


def test_ended_status_of_a_trial_ray_ended() -> None:
    from sublayer_search.spaces.records import TrialStatus, ended_status

    assert ended_status({"status": "running", "step": 30}, 30) == TrialStatus.FINISHED
    assert ended_status({"status": "running", "step": 10}, 30) == TrialStatus.STOPPED
    assert ended_status({"status": "diverged", "step": 10}, 30) == TrialStatus.DIVERGED
    assert ended_status({"status": "finished", "step": 30}, 30) == TrialStatus.FINISHED
    assert ended_status({}, 30) == TrialStatus.FINISHED
