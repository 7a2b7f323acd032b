"""ModelConfig validation, presets and dict round trips."""

from __future__ import annotations

import pickle

import pytest

from sublayer_search.models.config import PRESETS, ConfigError, ModelConfig, model_preset
from sublayer_search.spaces.errors import OrderError


def test_presets_are_canonical_and_match_the_paper() -> None:
    assert PRESETS["debug"].order == "sfsf"
    assert (PRESETS["debug"].d_model, PRESETS["debug"].n_heads) == (32, 2)
    assert (PRESETS["debug"].d_ff, PRESETS["debug"].context) == (128, 32)
    assert PRESETS["tiny"].order == "sf" * 4
    assert (PRESETS["tiny"].d_model, PRESETS["tiny"].n_heads, PRESETS["tiny"].d_ff) == (64, 4, 256)
    paper = PRESETS["press2020"]
    assert paper.order == "sf" * 16
    assert (paper.d_model, paper.n_heads, paper.d_ff, paper.context) == (1024, 16, 4096, 512)
    assert paper.vocab_size == 267735 and paper.cutoffs == (20000, 60000)
    assert paper.adaptive_input and paper.adaptive_softmax and paper.adaptive_factor == 4.0
    assert (paper.dropout, paper.attn_dropout, paper.act_dropout) == (0.3, 0.1, 0.1)
    assert paper.positions == "sinusoidal" and paper.scale_embedding


def test_model_preset_overrides_and_canonicalises_the_order() -> None:
    cfg = model_preset("tiny", order="s^2 f^2", vocab_size=65, dropout=0)
    assert cfg.order == "ssff" and cfg.vocab_size == 65 and cfg.dropout == 0.0
    assert cfg.d_model == 64
    same = ModelConfig(
        order="ss|ff", vocab_size=65, d_model=64, n_heads=4, d_ff=256, context=64, dropout=0.0
    )
    assert same == cfg


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="model.preset: got 'huge', expected one of debug"):
        model_preset("huge")


def test_from_dict_round_trip_and_list_cutoffs() -> None:
    cfg = model_preset("press2020")
    data = cfg.to_dict()
    assert data["cutoffs"] == [20000, 60000]
    assert ModelConfig.from_dict(data) == cfg


def test_from_dict_unknown_key_lists_accepted_keys() -> None:
    data = {**PRESETS["debug"].to_dict(), "d_modle": 64}
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict(data)
    assert info.value.field == "model.d_modle"
    assert "d_model" in info.value.expected and "adaptive_factor" in info.value.expected


def test_from_dict_missing_required_key() -> None:
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_dict({"order": "sf", "d_model": 8, "n_heads": 2, "d_ff": 16})
    assert info.value.field == "model.context"


def test_message_shape() -> None:
    with pytest.raises(ConfigError) as info:
        model_preset("debug", d_model=30, n_heads=4)
    assert str(info.value) == "model.d_model: got 30, expected a multiple of n_heads (4)"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"d_model": 0}, "model.d_model"),
        ({"n_heads": -1}, "model.n_heads"),
        ({"d_ff": 2.5}, "model.d_ff"),
        ({"context": True}, "model.context"),
        ({"vocab_size": 1}, "model.vocab_size"),
        ({"dropout": 1.0}, "model.dropout"),
        ({"attn_dropout": -0.1}, "model.attn_dropout"),
        ({"act_dropout": "0.1"}, "model.act_dropout"),
        ({"activation": "tanh"}, "model.activation"),
        ({"norm": "sandwich"}, "model.norm"),
        ({"positions": "rotary"}, "model.positions"),
        ({"tie_embeddings": "yes"}, "model.tie_embeddings"),
        ({"cutoffs": (10, 10)}, "model.cutoffs[1]"),
        ({"cutoffs": (0,)}, "model.cutoffs[0]"),
        ({"cutoffs": "10,20"}, "model.cutoffs"),
        ({"vocab_size": 30, "cutoffs": (10, 30)}, "model.cutoffs[1]"),
        ({"adaptive_input": True}, "model.cutoffs"),
        ({"adaptive_softmax": True}, "model.cutoffs"),
        (
            {"adaptive_softmax": True, "cutoffs": (5,), "adaptive_factor": 0.5},
            "model.adaptive_factor",
        ),
        (
            {"adaptive_input": True, "cutoffs": (5, 9, 13), "adaptive_factor": 8},
            "model.adaptive_factor",
        ),
        ({"order": 12}, "model.order"),
    ],
)
def test_invalid_settings_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        model_preset("debug", **overrides)
    assert info.value.field == field
    assert str(info.value).startswith(field + ": got ")


@pytest.mark.parametrize("order", ["sfc", "sfx", ""])
def test_invalid_orders_raise_order_error(order: str) -> None:
    with pytest.raises(OrderError):
        model_preset("debug", order=order)


def test_with_vocab_validates_again() -> None:
    cfg = model_preset("debug", adaptive_softmax=True, cutoffs=(20, 40))
    assert cfg.vocab_size is None
    assert cfg.with_vocab(65).vocab_size == 65
    with pytest.raises(ConfigError, match="below vocab_size"):
        cfg.with_vocab(40)
    with pytest.raises(ConfigError, match="model.vocab_size"):
        cfg.require_vocab()


def test_config_error_pickles() -> None:
    err = ConfigError("model.norm", "mid", "one of pre, post")
    back = pickle.loads(pickle.dumps(err))
    assert (back.field, back.value, back.expected, str(back)) == (
        err.field,
        err.value,
        err.expected,
        str(err),
    )
