"""models.supernet.train: shared weights per scheme, single-path training, the ranking table."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig, load_corpus
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec
from sublayer_search.models.optim import seed_everything
from sublayer_search.models.supernet.rank import held_out
from sublayer_search.models.supernet.train import (
    SHARING,
    Supernet,
    SupernetConfig,
    SupernetWorkload,
    order_schedule,
    rank_orders,
    ranking_table,
    train_supernet,
)

# permutations of 2 s + 2 f, and orders of other depths (a budgeted space)
PERMS = ["ssff", "sfsf", "sffs", "fssf", "fsfs", "ffss"]
VARIABLE = ["sfs", "sfsff", "fsssf"]
D, D_FF, VOCAB, CONTEXT = 32, 128, 65, 32


@pytest.fixture(scope="module")
def corpus(shared_data):
    return load_corpus(DataConfig(name="tinyshakespeare"))


def model_cfg():
    return model_preset("debug", vocab_size=VOCAB)


def spec(**train) -> TrialSpec:
    base = dict(steps=20, batch_size=4, lr=3e-3, eval_every=10, eval_batches=2, seed=0)
    return TrialSpec(
        model=model_preset("debug"),
        data=DataConfig(name="tinyshakespeare"),
        train=TrainConfig(**{**base, **train}),
    )


@pytest.mark.parametrize("sharing", SHARING)
def test_every_order_runs_through_the_shared_weights(sharing):
    orders = PERMS + VARIABLE
    net = Supernet(model_cfg(), orders, sharing=sharing)
    assert net.orders == tuple(orders)
    x = torch.randint(0, VOCAB, (2, 16))
    pool = set(map(id, net.lm.layers))
    for order in orders:
        logits = net(x, order=order).logits
        assert logits is not None and logits.shape == (2, 16, VOCAB)
        loss = net(x, x, order=order).loss
        assert loss is not None and loss.shape == () and math.isfinite(float(loss.detach()))
        mods = net.sublayers(order)
        assert len(mods) == len(order) and len(set(map(id, mods))) == len(order)
        assert set(map(id, mods)) <= pool
        kinds = ["s" if hasattr(m.sublayer, "qkv") else "f" for m in mods]
        assert "".join(kinds) == order


def test_ordinal_sharing_gives_the_ith_of_a_kind_the_same_module():
    net = Supernet(model_cfg(), PERMS + VARIABLE, sharing="ordinal")
    a, b = net.sublayers("ssff"), net.sublayers("fsfs")
    # ssff: s0 s1 f0 f1; fsfs: f0 s0 f1 s1
    assert a[0] is b[1] and a[1] is b[3] and a[2] is b[0] and a[3] is b[2]
    c = net.sublayers("fsssf")  # f0 s0 s1 s2 f1
    assert c[1] is a[0] and c[2] is a[1] and c[4] is a[3]
    # every permutation of 2 s + 2 f runs the very same four modules
    assert len({id(m) for o in PERMS for m in net.sublayers(o)}) == 4


def test_slot_sharing_gives_a_kind_at_a_position_the_same_module():
    net = Supernet(model_cfg(), PERMS + VARIABLE, sharing="slot")
    a, b = net.sublayers("ssff"), net.sublayers("sffs")
    assert a[0] is b[0]  # s at position 0
    assert a[3] is not b[3]  # f vs s at position 3
    assert net.sublayers("sfs")[2] is net.sublayers("sfsf")[2]  # s at position 2
    assert net.sublayers("fssf")[1] is a[1] and net.sublayers("fssf")[3] is a[3]
    # a kind at another position is another module, even as the same ordinal
    assert net.sublayers("fsfs")[1] is not a[0]


def _by_hand(n_s: int, n_f: int) -> int:
    s = 4 * D * D + 4 * D + 2 * D  # qkv + out (+ biases) + its LayerNorm
    f = 2 * D * D_FF + D_FF + D + 2 * D
    shared = VOCAB * D + CONTEXT * D + 2 * D  # tied embedding, positions, final norm
    return shared + n_s * s + n_f * f


def test_parameter_count_per_scheme_matches_the_hand_count():
    orders = ["ssff", "sfsf", "fssf", "sfsff"]
    # ordinal: at most 2 s and 3 f in one order
    ordinal = Supernet(model_cfg(), orders, sharing="ordinal")
    assert sum(p.numel() for p in ordinal.parameters()) == _by_hand(2, 3)
    # slot: s at positions 0, 1, 2; f at positions 0, 1, 2, 3, 4
    slot = Supernet(model_cfg(), orders, sharing="slot")
    assert sum(p.numel() for p in slot.parameters()) == _by_hand(3, 5)
    assert ordinal.depth == slot.depth == 5


@pytest.mark.parametrize("sharing", SHARING)
def test_a_training_step_changes_only_the_sampled_orders_sublayers(corpus, sharing):
    orders = ["sssf", "sfff"]  # neither order uses the whole pool in either scheme
    cfg = SupernetConfig(steps=1, sharing=sharing, seed=3)
    family = SupernetWorkload(spec(), orders, cfg, corpus)
    seed_everything(cfg.seed)  # what train() does before building
    before = {k: v.clone() for k, v in family.build().state_dict().items()}
    result = train_supernet(spec(), orders, cfg, corpus=corpus)
    net = result.model
    sampled = family.order_at(0)
    touched = {id(p) for m in net.sublayers(sampled) for p in m.parameters()}
    shared = {id(p) for m in (net.lm.embed, net.lm.pos, net.lm.final_norm) for p in m.parameters()}
    changed = {
        id(p)
        for name, p in net.named_parameters()
        if not torch.equal(p.detach().cpu(), before[name])
    }
    assert changed == touched | shared
    assert len(touched) < sum(1 for layer in net.lm.layers for _ in layer.parameters())


def test_training_is_reproducible_and_the_ranking_deterministic(corpus):
    orders = PERMS[:4] + VARIABLE[:2]

    def ranking(seed):
        reports = []
        net = train_supernet(
            spec(),
            orders,
            SupernetConfig(steps=20, seed=seed),
            lambda m, checkpoint=None: reports.append(m),
            corpus=corpus,
        )
        assert [r["step"] for r in reports] == [10, 20]
        assert {"val_loss", "val_bpc", "train_loss", "best_val_bpc"} <= set(reports[-1])
        assert reports[-1]["val_loss"] < reports[0]["val_loss"] < math.log(VOCAB)
        return rank_orders(
            net.model,
            orders,
            corpus,
            metric="val_bpc",
            eval_batches=2,
            batch_size=4,
            context=CONTEXT,
        )

    a, b, c = ranking(0), ranking(0), ranking(1)
    assert a == b
    assert [s.mean for s in a] != [s.mean for s in c]


def test_order_schedule_is_seeded_and_draws_every_order():
    s = order_schedule(5, 400, seed=0)
    assert s == order_schedule(5, 400, seed=0) and s != order_schedule(5, 400, seed=1)
    counts = [s.count(i) for i in range(5)]
    assert min(counts) > 50  # uniform: 80 expected each


def test_rank_orders_gives_every_order_sorted_with_ranks(corpus):
    orders = PERMS + VARIABLE
    net = Supernet(model_cfg(), orders, sharing="slot")
    scores = rank_orders(
        net,
        [*orders, "(sf)^2"],
        corpus,
        metric="val_bpc",
        eval_batches=3,
        batch_size=4,
        context=CONTEXT,
    )
    assert sorted(s.order for s in scores) == sorted(orders)  # (sf)^2 is sfsf
    assert [s.rank for s in scores] == list(range(1, len(orders) + 1))
    means = [s.mean for s in scores]
    assert means == sorted(means) and all(s.n_batches == 3 and s.sem > 0 for s in scores)
    # the mean is the token-weighted loss over the same held-out batches, in bits
    batches = held_out(corpus, limit=3, batch_size=4, context=CONTEXT)
    best = scores[0].order
    net.eval()
    with torch.no_grad():
        losses = [float(net(x, y, order=best).loss) for x, y in batches]
    assert scores[0].mean == pytest.approx(sum(losses) / 3 / math.log(2), rel=1e-6)
    nats = rank_orders(
        net, orders, corpus, metric="val_loss", eval_batches=3, batch_size=4, context=CONTEXT
    )
    by_order = {s.order: s.mean for s in nats}
    assert by_order[best] == pytest.approx(scores[0].mean * math.log(2), rel=1e-9)
    rows = ranking_table(scores)
    assert [r["rank"] for r in rows] == list(range(1, len(orders) + 1))
    assert set(rows[0]) == {"order", "mean", "sem", "n_batches", "rank"}


def test_resume_matches_the_uninterrupted_run(corpus, tmp_path):
    orders = PERMS[:3]
    cfg = SupernetConfig(steps=20, sharing="ordinal")
    straight = train_supernet(spec(), orders, cfg, corpus=corpus)

    class Stop(Exception):
        pass

    def stop(metrics, checkpoint=None):
        if metrics["step"] >= 10:
            raise Stop

    with pytest.raises(Stop):
        train_supernet(spec(), orders, cfg, stop, checkpoint_dir=str(tmp_path), corpus=corpus)
    resumed = train_supernet(spec(), orders, cfg, resume_from=str(tmp_path), corpus=corpus)
    assert resumed.steps == 20 and resumed.metrics["val_loss"] == straight.metrics["val_loss"]


def test_config_errors_name_the_field(corpus):
    with pytest.raises(ConfigError) as err:
        SupernetConfig(steps=0, sharing="layer")
    assert {e.field for e in err.value.errors} == {"supernet.steps", "supernet.sharing"}
    assert "ordinal, slot" in str(err.value)
    with pytest.raises(ConfigError, match="supernet.budget"):
        SupernetConfig.from_dict({"steps": 10, "budget": 3})
    with pytest.raises(ConfigError, match="supernet.eval_batches"):
        SupernetConfig(eval_batches=-1)
    with pytest.raises(ConfigError, match="supernet.eval_every"):
        SupernetConfig(eval_every=0)
    cfg = SupernetConfig(steps=7, sharing="slot", eval_batches=3, seed=2)
    assert SupernetConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match=r"orders\[1\]"):
        Supernet(model_cfg(), ["sf", "sxf"])
    with pytest.raises(ConfigError, match="orders"):
        Supernet(model_cfg(), [])
    with pytest.raises(ConfigError, match="supernet.sharing"):
        Supernet(model_cfg(), ["sf"], sharing="depth")
    with pytest.raises(ConfigError, match="model.guidance"):
        Supernet(replace(model_cfg(), guidance={"mode": "soft", "blocks": ["ffn"]}), ["sfsf"])
    net = Supernet(model_cfg(), ["sf", "ssf"], sharing="slot")
    with pytest.raises(ValueError, match="does not hold"):
        net(torch.zeros(1, 4, dtype=torch.long), order="fs")
    with pytest.raises(ConfigError, match="metric"):
        rank_orders(net, ["sf"], corpus, metric="bleu", eval_batches=1, batch_size=1, context=4)


def test_the_supernet_evaluates_at_its_own_interval(corpus):
    steps = []
    cfg = SupernetConfig(steps=20, eval_batches=2, eval_every=20)
    train_supernet(spec(), PERMS, cfg, lambda m, c=None: steps.append(m["step"]), corpus=corpus)
    assert [s for s in steps if s > 0] == [20]  # not the trials' eval_every of 10
