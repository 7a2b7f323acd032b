"""Named spaces: expansion to candidates and argument checking."""

from __future__ import annotations

import pytest

from sublayer_search.spaces import SPACES, Candidate, SpaceError, check_kind, expand, validate


def test_sandwich_names_and_params() -> None:
    cands = expand("sandwich", {"n": 16, "ks": [0, 6]})
    assert [c.name for c in cands] == ["sandwich16_0", "sandwich16_6"]
    assert cands[1].params == {"n": 16, "k": 6}
    assert cands[1].family == "sandwich" and cands[0].order == "sf" * 16
    assert len(expand("sandwich", {"n": 4})) == 4


def test_numbered_spaces() -> None:
    perms = expand("permutations", {"n_s": 4, "n_f": 4, "count": 12, "seed": 1})
    assert [c.name for c in perms][:2] == ["perm00", "perm01"]
    assert perms[3].params == {"index": 3}
    budget = expand("budgeted", {"budget_units": 12, "count": 3})
    assert [c.name for c in budget] == ["budget00", "budget01", "budget02"]


def test_explicit_names() -> None:
    cands = expand("explicit", {"orders": ["sfsf", "s^20 f^20", "ssff"]})
    assert [c.name for c in cands] == ["sfsf", "explicit01", "ssff"]
    assert cands[1].order == "s" * 20 + "f" * 20


def test_iot_candidates() -> None:
    (cand,) = expand("iot_subsets", {"size": 4, "layers": 2}, kind="decoder")
    assert cand.name == "iot1246" and cand.params["subset"] == "1246"
    assert cand.params["orders"] == ["scfscf", "fscfsc", "csfcsf", "fcsfcs"]
    assert cand.order == "scfscf"
    (enc,) = expand("iot_subsets", {"size": 2, "layers": 1})
    assert enc.params["orders"] == ["sf", "fs"]
    with pytest.raises(SpaceError, match="stack: got 'decoder'"):
        validate("iot_subsets", {"stack": "decoder"})


def test_unknown_space_and_arguments() -> None:
    with pytest.raises(SpaceError) as info:
        expand("sandwiches", {})
    assert info.value.field == "name" and "sandwich" in info.value.expected
    with pytest.raises(SpaceError) as info:
        validate("sandwich", {"n": 4, "kz": [1]})
    assert info.value.field == "kz" and "ks" in info.value.expected
    with pytest.raises(SpaceError) as info:
        validate("permutations", {"n_s": 4, "count": 3})
    assert info.value.field == "n_f" and "required" in info.value.expected
    assert str(info.value.prefixed("space")).startswith("space.n_f: got None")


def test_kind_alphabet_is_checked() -> None:
    with pytest.raises(SpaceError) as info:
        validate("explicit", {"orders": ["sfc"]})
    assert info.value.field == "orders[0]"
    assert expand("explicit", {"orders": ["sfc"]}, kind="decoder")[0].order == "sfc"
    with pytest.raises(SpaceError, match="kind: got 'decoder'"):
        check_kind("permutations", "decoder")
    with pytest.raises(SpaceError, match="kind: got 'rnn'"):
        validate("sandwich", {"n": 2}, kind="rnn")


def test_validate_is_cheap_for_huge_spaces() -> None:
    validate("permutations", {"n_s": 512, "n_f": 512, "count": 100_000})
    with pytest.raises(SpaceError) as info:
        validate("sandwich", {"n": 16, "ks": [1, 99]})
    assert str(info.value) == "k[1]: got 99, expected an integer in 0..15"
    with pytest.raises(SpaceError) as info:
        validate("budgeted", {"budget_units": 3, "count": 4})
    assert info.value.field == "count"


def test_every_space_is_described() -> None:
    assert list(SPACES)[:8] == ["permutations", "budgeted", "sandwich", "explicit", "multiset",
                                "placements", "budgeted_kinds", "iot_subsets"]
    assert SPACES["budgeted"].required == ("budget_units", "count")
    assert SPACES["sandwich"]({"n": 2})[1].name == "sandwich2_1"


def test_candidate_validation() -> None:
    cand = Candidate(order="s^2 f", space="explicit", name="x", params={"index": 0})
    assert cand.order == "ssf" and cand.counts == {"s": 2, "f": 1, "c": 0}
    assert Candidate(order="sf", space="sandwich", name="b", baseline=True).family == "baseline"
    with pytest.raises(SpaceError, match="name"):
        Candidate(order="sf", space="explicit", name="")
