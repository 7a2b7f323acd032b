"""Settings added later leave the config hash of older experiments as it was (reuse and
warm start still find their runs); a setting whose meaning changed changes it."""

from __future__ import annotations

from pathlib import Path

import yaml

from sublayer_search.search.core.config_hash import config_hash
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep

REPO = Path(__file__).resolve().parents[2]


def _plan(name: str, **sections: dict[str, object]):
    raw = yaml.safe_load((REPO / "configs" / name).read_text())
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return plan_sweep(parse_experiment(raw), check_resources=False)


def test_an_unset_max_tokens_leaves_a_translation_hash_as_it_was() -> None:
    plan = _plan("iot_multi30k.yaml")
    settings = plan.settings()
    assert settings["translation.max_tokens"] is None
    before = {k: v for k, v in settings.items()
              if k not in ("translation.max_tokens", "translation.batch_multiple",
                           "translation.bleu_tokenize", "translation.test_bleu")}
    assert plan.config_hash == config_hash(before)
    assert _plan("iot_multi30k.yaml", translation={"max_tokens": 4000}).config_hash != \
        plan.config_hash


def test_the_authors_routing_is_hashed_with_its_new_meaning() -> None:
    ours = _plan("iot_multi30k.yaml").settings()
    raw = yaml.safe_load((REPO / "configs" / "iot_multi30k.yaml").read_text())
    raw["model"] = {k: v for k, v in raw["model"].items() if not k.startswith("tau_")}
    raw["model"]["routing"] = "authors"  # its own step schedule
    authors = plan_sweep(parse_experiment(raw), check_resources=False).settings()
    assert "model.routing_detail" not in ours
    assert authors["model.routing_detail"] == "criterion"


def test_the_batch_multiple_is_hashed_only_with_token_batches() -> None:
    """``translation.batch_multiple`` (issue 46) cuts token batches only: without
    ``max_tokens`` it leaves the hash as it was; with it, 8 (fairseq's default) and 1 (the
    batches before the setting existed) are different trainings."""
    plain = _plan("iot_multi30k.yaml")
    assert plain.settings()["translation.batch_multiple"] == 8
    assert _plan("iot_multi30k.yaml", translation={"batch_multiple": 1}).config_hash == \
        plain.config_hash
    eight = _plan("iot_multi30k.yaml", translation={"max_tokens": 4000})
    one = _plan("iot_multi30k.yaml", translation={"max_tokens": 4000, "batch_multiple": 1})
    assert eight.config_hash != one.config_hash


def test_scoring_as_the_paper_did_is_hashed_only_when_asked_for() -> None:
    """``translation.bleu_tokenize`` and ``test_bleu`` (issue 46) at their defaults leave
    the hash as it was; set, they change it (a reused run must have been scored so)."""
    plain = _plan("iot_multi30k.yaml")
    for change in ({"bleu_tokenize": "none"}, {"test_bleu": True}):
        assert _plan("iot_multi30k.yaml", translation=change).config_hash != plain.config_hash
