"""The MAD proxy: each task's samples say what they should, seeded; the protocols hold
MAD's grids; a run learns what can be learned and a trial reports per setting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.mad.generate import IGNORE, split
from sublayer_search.models.mad.settings import (
    FULL_LRS,
    FULL_WEIGHT_DECAYS,
    TASKS,
    MadData,
    MadSpec,
    Setting,
    full_settings,
    reduced_settings,
    runs,
    score,
)
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.models.training_loop import train


def _split(setting: Setting, n: int = 50, seed: int = 0, part: str = "train"):
    return split(setting, n, seed, part)


@pytest.mark.parametrize("setting", reduced_settings(), ids=lambda s: s.task)
def test_samples_are_seeded_in_vocabulary_and_scored_somewhere(setting: Setting) -> None:
    x, y = _split(setting)
    again, _ = _split(setting)
    other, _ = _split(setting, seed=1)
    test, _ = _split(setting, part="test")
    assert (x == again).all() and not (x == other).all() and not (x == test).all()
    assert x.min() >= 0 and x.max() < setting.vocab_size
    assert x.shape == (50, setting.seq_len)
    scored = y[y != IGNORE]
    assert scored.size and scored.min() >= 0 and scored.max() < setting.vocab


def test_in_context_recall_scores_values_of_keys_seen_before() -> None:
    s = Setting(task="in_context_recall", seq_len=64, vocab=16)
    x, y = _split(s, 20)
    for row_x, row_y in zip(x, y, strict=True):
        seen: dict[int, int] = {}
        for t in range(0, len(row_x) - 1, 2):  # keys at even positions, values after them
            key, value = int(row_x[t]), int(row_x[t + 1])
            assert key < 8 <= value
            if key in seen:
                assert row_y[t] == value == seen[key]  # the mapping holds in the sequence
            else:
                assert row_y[t] == IGNORE
            seen[key] = value
        assert (row_y[1::2] == IGNORE).all()  # a key after a value is never a target


def test_noise_is_never_a_target_and_takes_its_share() -> None:
    s = Setting(task="noisy_recall", seq_len=128, vocab=16, noise_frac=0.4, noise_vocab=8)
    x, y = _split(s, 20)
    noise = x >= s.vocab
    assert abs(noise.mean() - 0.4) < 0.03
    assert not np.isin(y[y != IGNORE], np.arange(s.vocab, s.vocab + 8)).any()
    assert ((y != IGNORE) <= (x < s.vocab // 2)).all()  # only at a key is a value predicted


def test_selective_copying_targets_the_scattered_tokens_in_order() -> None:
    s = Setting(task="selective_copying", seq_len=64, vocab=16, copy_tokens=8)
    x, y = _split(s, 10)
    for row_x, row_y in zip(x, y, strict=True):
        sep = int(np.flatnonzero(row_x == s.vocab + 1)[0])
        scattered = row_x[:sep][row_x[:sep] != s.vocab]
        assert len(scattered) == 8
        assert (row_y[sep:] == scattered).all() and (row_y[:sep] == IGNORE).all()


def test_compression_gives_back_the_sequence_from_its_last_token() -> None:
    s = Setting(task="compression", seq_len=16, vocab=16)
    x, y = _split(s, 10)
    assert (x[:, -1] == s.vocab).all() and (y == x[:, :-1]).all()


def test_fuzzy_recall_maps_each_key_to_one_value_per_sequence() -> None:
    s = Setting(task="fuzzy_recall", seq_len=128, vocab=16, motif=3)
    x, y = _split(s, 10)
    assert ((y != IGNORE) <= (x < s.vocab)).all()
    scored_values = y[y != IGNORE]
    assert (scored_values >= 8).all() and (scored_values < 16).all()  # values only


def test_memorization_facts_are_shared_by_train_and_test() -> None:
    s = Setting(task="memorization", seq_len=32, vocab=64, train_samples=32)
    facts = {}
    for part in ("train", "test"):
        x, y = _split(s, 30, part=part)
        for key, value in zip(x[:, ::2].ravel(), y[:, ::2].ravel(), strict=True):
            assert facts.setdefault(int(key), int(value)) == int(value)
    assert len(facts) > 20


def test_the_full_protocol_is_mads_grid() -> None:
    settings = full_settings()
    counts = {t: sum(s.task == t for s in settings) for t in TASKS}
    assert counts == {"in_context_recall": 80, "fuzzy_recall": 80, "noisy_recall": 320,
                      "selective_copying": 240, "compression": 80, "memorization": 6}
    groups = list(runs(MadData(protocol="full"), TrainConfig()))
    assert sum(len(g) for g in groups) == 806 * 6
    first = groups[0]
    assert {(r.train.lr, r.train.weight_decay) for r in first} == \
        {(lr, wd) for lr in FULL_LRS for wd in FULL_WEIGHT_DECAYS}
    assert all(r.train.batch_size == 128 and r.train.steps == 200 * 100 for r in first)


def test_the_reduced_protocol_trains_as_the_train_section_says() -> None:
    train = TrainConfig(steps=7, batch_size=4, lr=0.01, weight_decay=0.1)
    groups = list(runs(MadData(tasks=("compression", "memorization"), train_samples=9), train))
    assert [len(g) for g in groups] == [1, 1]
    assert all(g[0].train == replace(train, eval_every=7) for g in groups)
    assert [g[0].setting.train_samples for g in groups] == [9, 9]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"protocol": "half"}, "protocol"),
    ({"tasks": ("recall",)}, "tasks"),
    ({"tasks": ("compression", "compression")}, "tasks"),
    ({"test_samples": 0}, "test_samples"),
    ({"protocol": "full", "train_samples": 10}, "train_samples"),
])
def test_bad_data_settings_are_named(kwargs, field) -> None:
    with pytest.raises(ConfigError) as err:
        MadData(**kwargs)
    assert err.value.field == field


def test_the_score_is_the_mean_over_tasks_of_the_mean_over_settings() -> None:
    a, b = Setting(task="compression", seq_len=32), Setting(task="compression", seq_len=64)
    c = Setting(task="memorization", vocab=256)
    out = score({a: 0.2, b: 0.4, c: 1.0})
    assert out["acc_compression"] == pytest.approx(0.3)
    assert out["mad_acc"] == pytest.approx(0.65)


def _spec(order: str, data: MadData, steps: int) -> MadSpec:
    model = ModelConfig(order=order, d_model=32, n_heads=2, d_ff=64, context=8, dropout=0.0)
    return MadSpec(model=model, data=data, train=TrainConfig(
        steps=steps, batch_size=16, lr=0.01, weight_decay=0.0, device="cpu", eval_batch_size=64))


def test_a_run_learns_facts_it_can_store_and_a_trial_reports_per_setting() -> None:
    from sublayer_search.models.mad import workload

    data = MadData(tasks=("compression", "memorization"), train_samples=128, test_samples=64)
    spec = _spec("sfsf", data, steps=150)
    reports: list[dict] = []
    result = workload.fit(spec, lambda m, c=None: reports.append(m))
    assert [r["step"] for r in reports] == [75, 150]
    assert [r["status"] for r in reports] == ["running", "finished"]
    assert set(reports[0]) >= {"acc_compression", "mad_acc", "runs", "proxy_seconds"}
    last = result.metrics
    assert last["mad_acc"] == pytest.approx((last["acc_compression"] + last["acc_memorization"]) / 2)
    # 8 facts of a 16-token memorization, each seen hundreds of times: learned (chance: 1/8)
    facts = Setting(task="memorization", seq_len=16, vocab=16, train_samples=64)
    assert train(spec.train, workload.MadWorkload(spec, facts)).metrics["val_acc"] > 0.9
