"""The registry of sublayer kinds: the classic four as registrations that change nothing,
the hybrid kinds' accounting, and the order algebra and messages for the new symbols."""

from __future__ import annotations

import dataclasses

import pytest

from sublayer_search.spaces.cost import halves, order_params, sublayer_costs, unit_costs, units
from sublayer_search.spaces.errors import OrderError, SpaceError
from sublayer_search.spaces.kinds import (
    CLASSIC,
    Dims,
    KindSettings,
    SublayerKind,
    kind_of,
    register_kind,
    registered_kinds,
    symbols_for,
)
from sublayer_search.spaces.order import ALPHABETS, SYMBOLS, counts, parse_order

DIMS = [(64, 256, 4), (32, 128, 2), (48, 96, 3), (1024, 4096, 16)]


def test_the_built_in_kinds_their_roles_and_alphabets() -> None:
    assert "".join(k.symbol for k in registered_kinds()) == SYMBOLS == "scfhwre"
    assert {k.symbol: k.role for k in registered_kinds()} == {
        "s": "sequence", "c": "cross", "f": "channel", "h": "channel",
        "w": "sequence", "r": "sequence", "e": "channel"}
    # the classic alphabets in their old order; the hybrid kinds are for language models
    assert ALPHABETS == {"lm": "sfhwre", "encoder": "sfh", "decoder": "scfh"}
    assert symbols_for("decoder") == "scfh" and CLASSIC == "sfch"


@pytest.mark.parametrize(("d", "ff", "h"), DIMS)
def test_the_classic_kinds_cost_what_they_always_did(d: int, ff: int, h: int) -> None:
    """The formulas the release before the registry wrote out by hand."""
    weights = {"s": 4 * d * d, "f": 2 * d * ff, "c": 4 * d * d, "h": d * ff}
    exact = {"s": 4 * d * d + 6 * d, "f": 2 * d * ff + ff + 3 * d, "c": 4 * d * d + 6 * d,
             "h": d * ff + ff // 2 + 3 * d}
    assert unit_costs(d_model=d, d_ff=ff) == {k: weights[k] for k in "sfc"}
    assert unit_costs(d_model=d, d_ff=ff, exact=True) == {k: exact[k] for k in "sfc"}
    costs = sublayer_costs(d_model=d, d_ff=ff, exact=True, n_heads=h)
    assert {k: costs[k] for k in CLASSIC} == exact
    assert units("ssff", f_units=2 * d * ff / (4 * d * d)) == 2 + 2 * (2 * d * ff) / (4 * d * d)


@pytest.mark.parametrize(("d", "ff", "h"), DIMS)
def test_the_hybrid_kinds_accounting(d: int, ff: int, h: int) -> None:
    dims = Dims(d_model=d, d_ff=ff, n_heads=h, context=512,
                settings=KindSettings(window=64, experts=8, top_k=2))
    w, r, e, s, f = (kind_of(k) for k in "wresf")
    assert w.params(dims) == s.params(dims) and w.params(dims, exact=True) == s.params(
        dims, exact=True)  # the same four projections as an s
    assert w.state(dims) == 2 * 64 * d < s.state(dims) == 2 * 512 * d  # its cache: the window
    assert w.flops(dims) == 2 * 4 * d * d + 4 * 64 * d
    assert r.params(dims) == 4 * d * d + d * h and r.params(dims, exact=True) == 4 * d * d \
        + d * h + 6 * d + h
    assert r.state(dims) == d * (d // h)  # H heads of (d/H)², whatever the context
    # e: experts of width d_ff/top_k, so a token's active weights are an f's (+ the router)
    assert e.params(dims) == 8 * 2 * d * (ff // 2) + d * 8
    assert e.active_weights(dims) == f.params(dims) + d * 8
    assert e.flops(dims) == 2 * e.active_weights(dims) < 2 * e.params(dims)
    assert e.params(dims, exact=True) == e.params(dims) + 8 * (ff // 2 + d) + 2 * d
    wide = dataclasses.replace(dims, settings=KindSettings(experts=4, top_k=1, expert_ff=7))
    assert e.params(wide) == 4 * 2 * d * 7 + 4 * d
    # in s-units (weights over 4d²): w is an s, r a little more
    assert units("wr", dims=dims) == 1 + (4 * d * d + d * h) / (4 * d * d)
    assert order_params("swre", d_model=d, d_ff=ff, n_heads=h, settings=dims.settings) == sum(
        kind_of(k).params(dims) for k in "swre")


def test_a_hybrid_order_needs_the_models_dims_to_weigh() -> None:
    with pytest.raises(SpaceError, match=r"^dims: got None, expected the model's .* the "
                                         r"kinds r, e weigh by them"):
        units("sfre")
    with pytest.raises(SpaceError, match="the kinds w weigh"):
        halves("wf")
    dims = Dims(d_model=64, d_ff=256, n_heads=4)
    cut = halves("rrff", dims=dims)  # r weighs 1 + 4/256, f 2: the cut falls in the first f
    assert set(cut.bottom) == {"s", "f", "c", "r"} and (cut.bottom["r"], cut.top["r"]) == (2, 0)
    total = 2 * (1 + 4 / 256) + 4
    assert cut.bottom["f"] == pytest.approx((total / 2 - 2 * (1 + 4 / 256)) / 2)
    assert cut.top["f"] == pytest.approx(2 - cut.bottom["f"])


def test_orders_over_the_new_symbols_parse_count_and_fail_clearly() -> None:
    assert parse_order("(sw)^2 r e") == "swswre"
    assert parse_order("r^2 sandwich(2,1) e") == "rrssffe"  # families keep their own symbols
    assert counts("swswre") == {"s": 2, "f": 0, "c": 0, "w": 2, "r": 1, "e": 1}
    assert counts("sfsf") == {"s": 2, "f": 2, "c": 0}  # the classic keys only, as before
    with pytest.raises(OrderError) as err:
        parse_order("sfx")
    assert str(err.value) == ("invalid order 'sfx': position 2: unknown symbol 'x' "
                              "(expected one of s, f, w, r, e)")
    with pytest.raises(OrderError) as err:
        parse_order("swc", kind="decoder")
    assert str(err.value) == ("invalid order 'swc': position 1: 'w' is not allowed in an "
                              "order for kind 'decoder' (expected one of s, c, f)")
    with pytest.raises(OrderError, match="'r' is not allowed in an order for kind 'encoder'"):
        parse_order("srf", kind="encoder")


@pytest.mark.parametrize(("change", "message"), [
    ({"symbol": "s"}, "symbol: got 's', expected a symbol no kind has yet"),
    ({"symbol": "Q"}, "symbol: got 'Q', expected one lowercase letter"),
    ({"symbol": "qq"}, "symbol: got 'qq', expected one lowercase letter"),
    ({"role": "mixer"}, "role: got 'mixer', expected one of sequence, channel, cross"),
    ({"models": ("vision",)}, "models: got ('vision',), expected model kinds among lm"),
    ({"module": "torch.nn.Linear"}, "module: got 'torch.nn.Linear', expected"),
    ({"settings": ("heads",)}, "settings: got ('heads',), expected names of KindSettings"),
])
def test_a_bad_kind_is_refused_with_its_field(change: dict[str, object], message: str) -> None:
    good = dict(symbol="q", name="test", role="sequence", models=("lm",),
                module="somewhere:Module", weights=lambda d: 1, extra=lambda d: 0)
    with pytest.raises(SpaceError) as err:
        register_kind(SublayerKind(**{**good, **change}))  # type: ignore[arg-type]
    assert str(err.value).startswith(message), str(err.value)
    assert "q" not in SYMBOLS and "q" not in symbols_for("lm")


@pytest.mark.parametrize(("settings", "message"), [
    ({"window": 0}, "sublayers.window: got 0, expected a positive integer"),
    ({"experts": 2, "top_k": 3}, "sublayers.top_k: got 3, expected an integer in 1..2"),
    ({"balance": -1}, "sublayers.balance: got -1, expected a number >= 0"),
    ({"expert_ff": 1.5}, "sublayers.expert_ff: got 1.5, expected a positive integer"),
    ({"heads": 2}, "sublayers.heads: got 2, expected one of the sublayer settings: window"),
])
def test_bad_kind_settings_name_their_field(settings: dict[str, object], message: str) -> None:
    with pytest.raises(SpaceError) as err:
        KindSettings.from_value(settings)
    assert str(err.value).startswith(message), str(err.value)


def test_settings_record_only_what_differs_from_the_defaults() -> None:
    assert KindSettings().changed() == {}
    assert KindSettings.from_value({"window": 8, "top_k": 2}).changed() == {"window": 8}


def test_a_kind_registered_later_parses_and_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from sublayer_search.spaces import kinds

    late = SublayerKind(symbol="q", name="a later kind", role="sequence", models=("lm",),
                        module="somewhere:Module", weights=lambda d: 3 * d.d_model**2,
                        extra=lambda d: 0)
    monkeypatch.setitem(kinds._REGISTRY, "q", late)  # undone after the test
    assert parse_order("s q^2 f") == "sqqf" and counts("sqqf")["q"] == 2
    assert units("sq", dims=Dims(d_model=8, d_ff=32)) == 1 + 0.75
    with pytest.raises(OrderError, match="'q' is not allowed in an order for kind 'decoder'"):
        parse_order("sq", kind="decoder")
