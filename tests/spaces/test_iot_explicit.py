"""IOT subsets given explicitly (1-based and the authors' 0-based codes) and their display."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.search.cli.main import main
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.iot_subsets import explicit_subsets, subset_label
from sublayer_search.spaces.registry import expand, validate


def _iot(kind: str = "decoder", **args: Any) -> list[Any]:
    return expand("iot_subsets", args, kind=kind)


def test_one_subset_in_the_products_codes() -> None:
    (cand,) = _iot(codes=[6, 1, 4], layers=2)
    assert cand.name == "iot146" and cand.params["codes"] == [1, 4, 6]
    assert cand.params["codes0"] == [0, 3, 5]
    assert cand.params["orders"] == ["scfscf", "csfcsf", "fcsfcs"]
    assert cand.order == "scfscf"


def test_several_subsets_keep_their_order() -> None:
    cands = _iot(codes=[[1, 4, 6], [1, 2], [5]], layers=1)
    assert [c.name for c in cands] == ["iot146", "iot12", "iot5"]
    assert [c.params["codes"] for c in cands] == [[1, 4, 6], [1, 2], [5]]


def test_authors_zero_based_codes_are_the_same_subsets() -> None:
    ours = _iot(codes=[[1, 4, 6], [1, 2]])
    theirs = _iot(codes=[[0, 3, 5], [0, 1]], code_base=0)  # --decoder-orders 0 3 5
    assert [c.params for c in theirs] == [c.params for c in ours]
    assert explicit_subsets("decoder", [0, 3, 5], 0)[0].blocks == ("scf", "csf", "fcs")
    assert [s.id for s in explicit_subsets("encoder", [[0, 1], [1]], 0)] == ["12", "2"]


def test_default_is_still_the_papers_subset_of_four() -> None:
    (cand,) = _iot()
    assert cand.params["codes"] == [1, 2, 4, 6]
    assert [c.name for c in _iot(size=2, mode="exhaustive")][:2] == ["iot12", "iot13"]


@pytest.mark.parametrize(("args", "field", "words"), [
    ({"codes": [1, 4, 4]}, "codes", "distinct codes (4 given twice; code_base: 1)"),
    ({"codes": [[1, 2], [0, 0]], "code_base": 0}, "codes[1]", "distinct codes (0 given twice"),
    ({"codes": [1, 7]}, "codes[1]", "a 1-based code in 1..6 (code_base: 1, the product's"),
    ({"codes": [0, 3, 5]}, "codes[0]", "set code_base: 0 for their form"),
    ({"codes": [0, 6], "code_base": 0}, "codes[1]",
     "a 0-based code in 0..5 (code_base: 0, the authors' --decoder-orders)"),
    ({"codes": [[1, 2], []]}, "codes[1]", "a non-empty subset of 1-based codes in 1..6"),
    ({"codes": []}, "codes", "a non-empty list"),
    ({"codes": "146"}, "codes", "a non-empty list"),
    ({"codes": [[1, 2], 3]}, "codes[1]", "a list of codes"),
    ({"codes": [True, 2]}, "codes[0]", "a 1-based code"),
    ({"codes": [[1, 2], [2, 1]]}, "codes[1]", "a subset not given before (codes[0]"),
    ({"codes": [1, 2], "code_base": 2}, "code_base", "an integer in 0..1"),
    ({"code_base": 0}, "code_base", "no code_base without codes"),
    ({"codes": [1, 2], "size": 2}, "size", "no size with codes"),
    ({"codes": [1, 2], "mode": "paper"}, "mode", "no mode with codes"),
    ({"codes": [1, 2], "count": 1}, "count", "no count with codes"),
])
def test_bad_explicit_codes_name_the_field(args: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpaceError) as info:
        validate("iot_subsets", args, kind="decoder")
    assert info.value.field == field
    assert words in str(info.value)


def test_encoder_stack_range() -> None:
    with pytest.raises(SpaceError, match=r"codes\[0\].*1-based code in 1\.\.2.*'encoder'"):
        validate("iot_subsets", {"codes": [3]}, kind="encoder")
    with pytest.raises(SpaceError, match="0-based code in 0..1.*--encoder-orders"):
        validate("iot_subsets", {"codes": [2], "code_base": 0}, kind="encoder")


def test_subset_label() -> None:
    assert subset_label(("scf", "csf", "fcs")) == "scf|csf|fcs"
    assert subset_label(["scf", "fsc"], 6) == "(scf|fsc)^6"
    assert subset_label(["scf"], 2) == "(scf)^2"


def test_spaces_sample_shows_the_whole_subset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spaces", "sample", "--kind", "decoder", "iot_subsets",
                 "codes=[[1,4,5],[0,1]]", "code_base=0", "layers=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "n_s", "n_f", "n_c", "units", "order"]
    assert lines[1].split() == ["iot256", "1", "1", "1", "4", "fsc|sfc|fcs"]
    assert lines[2].split() == ["iot12", "1", "1", "1", "4", "scf|fsc"]
    assert main(["spaces", "sample", "--kind", "decoder", "iot_subsets", "size=3"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "(scf|csf|fcs)^6"
    assert main(["spaces", "sample", "--kind", "decoder", "iot_subsets", "codes=[1,9]"]) == 2
    assert "codes[1]: got 9, expected a 1-based code" in capsys.readouterr().err


def test_dry_run_table_shows_the_whole_subset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              shared_data: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(shared_data))
    raw = {
        "name": "iot_explicit", "task": "translation",
        "space": [{"type": "iot_subsets", "stack": "decoder", "codes": [[1, 4, 6], [1, 2]],
                   "layers": 2},
                  {"type": "iot_subsets", "codes": [0, 3], "code_base": 0, "layers": 2}],
        "model": {"preset": "debug", "d_model": 32, "n_heads": 2, "d_ff": 64,
                  "tau_schedule": "step", "clamp": "both"},
        "data": {"name": "multi30k", "vocab_size": 500},
        "train": {"steps": 10, "batch_size": 8, "eval_every": 5},
        "baseline": {"seeds": 1},
    }
    path = tmp_path / "iot.yaml"
    path.write_text(yaml.safe_dump(raw))
    code = main(["sweep", str(path), "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = {line.split()[0]: line.split()[-1] for line in captured.out.splitlines()[1:]
            if "@seed" in line}  # the table's rows (a `~` footer may follow them)
    assert rows == {"transformer2@seed0": "scfscf", "iot146@seed0": "(scf|csf|fcs)^2",
                    "iot12@seed0": "(scf|fsc)^2", "iot14@seed0": "(scf|csf)^2"}
