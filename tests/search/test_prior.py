"""Priors transferred from earlier studies (``search.prior``): the built-in studies read
without ``analysis``, rank-based transfer, study identity by content, the prior-informed
surrogate, the dry run's line and bad input (exit 2)."""

from __future__ import annotations

import importlib.util
import json
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from sublayer_search.search.cli.main import main
from sublayer_search.search.recorded.oracle import OrderTable, drive
from sublayer_search.search.searchers.prior import (
    OrderPrior,
    PriorError,
    PriorTable,
    builtin_tables,
    fit_prior,
    load_tables,
    resolve_prior,
    same_study,
)
from sublayer_search.search.searchers.queue import prior_for
from sublayer_search.search.searchers.surrogate import SurrogateSearcher
from sublayer_search.spaces.order import sandwich_order
from sublayer_search.spaces.registry import expand


def test_builtin_studies_have_their_tables():
    press = builtin_tables("press2020")
    assert [t.table for t in press] == ["press2020/table1", "press2020/table2"]
    assert [len(t.values()) for t in press] == [21, 21]  # 20 draws + the baseline (averaged)
    assert len(press[0].records) == 25  # five baseline seeds kept as records
    mini = builtin_tables("mini_press2020")
    assert [t.table for t in mini] == ["mini_press2020/budgeted", "mini_press2020/permutations"]
    assert all(t.mode == "min" for t in [*press, *mini])


def test_study_identity_is_by_name_or_shared_records():
    t1, t2 = builtin_tables("press2020")
    m_budget, m_perm = builtin_tables("mini_press2020")
    assert same_study(t1, t2) and same_study(m_budget, m_perm)
    assert not same_study(t1, m_perm)
    renamed = replace(m_perm, study="someone-else", table="x/perms")
    assert same_study(renamed, m_budget)  # a copy under another name is still that study
    assert not same_study(replace(t1, study="y"), renamed)


def test_fig4_pattern_learned_from_each_study():
    """Attention low and feedforward high beats the reverse, from either study alone."""
    low, high = sandwich_order(6, 3), sandwich_order(6, 3)[::-1]
    for name in ("press2020", "mini_press2020"):
        prior = fit_prior(builtin_tables(name))
        assert 0 < prior.weight <= 1
        low_score, high_score = prior.predict([low, high])
        assert low_score < high_score, name


def test_transfer_is_rank_based_so_scale_and_direction_do_not_matter():
    table = builtin_tables("mini_press2020")[1]
    base = fit_prior([table])
    scaled = replace(table, records=tuple((o, float(np.exp(10 * v))) for o, v in table.records))
    flipped = replace(table, records=tuple((o, -v) for o, v in table.records), mode="max")
    for other in (fit_prior([scaled]), fit_prior([flipped])):
        assert np.allclose(other.coef, base.coef) and other.weight == pytest.approx(base.weight)


def test_weight_is_held_out_agreement_across_studies():
    prior = resolve_prior(["press2020", "mini_press2020"])
    assert set(prior.held_out) == {"press2020/table1", "press2020/table2",
                                   "mini_press2020/budgeted", "mini_press2020/permutations"}
    assert prior.weight == pytest.approx(max(0.0, float(np.mean(list(prior.held_out.values())))))
    one = fit_prior(builtin_tables("press2020")[:1])
    assert one.held_out == {} and 0 < one.weight < 0.6  # one table: shrunk by its size


def test_a_useless_prior_has_no_weight_and_is_not_used():
    rng = np.random.default_rng(0)
    orders = [c.order for c in expand("permutations", {"n_s": 4, "n_f": 4, "count": 30,
                                                         "seed": 2})]
    noise = [PriorTable(study=f"n{i}", table=f"n{i}/t", records=tuple(
        (o, float(rng.normal())) for o in orders)) for i in range(3)]
    prior = fit_prior(noise)
    searcher = SurrogateSearcher(expand("permutations", {"n_s": 3, "n_f": 3, "count": 6,
                                                          "seed": 0}),
                                 num_samples=3, seeds=[0], prior=replace(prior, weight=0.0))
    assert searcher.prior is None


def test_exclude_drops_the_judged_study_by_content():
    judged = replace(builtin_tables("mini_press2020")[0], study="renamed")
    left = resolve_prior(["press2020", "mini_press2020"], exclude=[judged])
    assert left.sources == ("press2020/table1", "press2020/table2")
    with pytest.raises(PriorError, match="a study other than the one judged"):
        resolve_prior("mini_press2020", exclude=[judged])


def test_trials_csv_and_export_folder(tmp_path):
    csv_path = tmp_path / "t.csv"
    rows = ["order,final,space,status", "ssffsfsf,1.0,permutations,finished",
            "sfsfsfsf,1.5,baseline,finished", "ffssffss,2.0,permutations,finished",
            "sfssffsf,9.0,permutations,failed", "ffsfsfss,3.0,permutations,finished"]
    csv_path.write_text("\n".join(rows) + "\n")
    (table,) = load_tables(str(csv_path), mode="max")
    assert table.mode == "max" and table.values() == {
        "ssffsfsf": 1.0, "sfsfsfsf": 1.5, "ffssffss": 2.0, "ffsfsfss": 3.0}
    export = tmp_path / "exp"
    export.mkdir()
    (export / "mine_trials.csv").write_text(csv_path.read_text())
    (export / "mine_meta.json").write_text('{"name": "mine", "mode": "min"}')
    (table,) = load_tables(str(export))
    assert (table.study, table.mode) == ("mine", "min")


@pytest.mark.parametrize(("name", "expected"), [
    ("nosuchstudy", "expected one of press2020, mini_press2020, replay40, an export or a "
                    "trials CSV"),
    ("{tmp}/bad.csv", "a trials table with columns order and final"),
])
def test_bad_names_say_what_was_expected(tmp_path, name, expected):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(PriorError, match=expected) as err:
        load_tables(name.format(tmp=tmp_path))
    assert err.value.field == "search.prior"


def test_prior_only_for_order_aware_searchers():
    assert prior_for(None, algorithm="optuna") is None
    with pytest.raises(PriorError, match="no prior for search.algorithm optuna"):
        prior_for("press2020", algorithm="optuna")
    for algorithm in ("surrogate", "evolution", "oneshot"):
        assert isinstance(prior_for("press2020", algorithm=algorithm), OrderPrior)


def _first(table: OrderTable, seed: int, prior: OrderPrior | None) -> str:
    searcher = SurrogateSearcher(table.candidates(), num_samples=1, seeds=[0], metric="v",
                                 seed=seed, prior=prior)
    return drive(searcher, table, budget=1)[0]


def test_surrogate_first_draws_lean_on_the_prior_and_pickle_it():
    """Before any result a Thompson draw: mostly among the prior's best, never always
    the same (the prior's weight leaves room), and random without a prior."""
    table = OrderTable.from_rows(builtin_tables("mini_press2020")[1].records, metric="v")
    prior = resolve_prior("press2020")
    orders = sorted(table.values)
    by_prior = [orders[i] for i in np.argsort(prior.predict(orders), kind="stable")]
    ranks = [by_prior.index(_first(table, seed, prior)) for seed in range(40)]
    assert np.median(ranks) < (len(orders) - 1) / 3 and len(set(ranks)) > 3
    blind = [by_prior.index(_first(table, seed, None)) for seed in range(40)]
    assert np.median(blind) > np.median(ranks)  # no prior: a uniform random start
    searcher = SurrogateSearcher(table.candidates(), num_samples=5, seeds=[0], metric="v",
                                 prior=prior)
    assert pickle.loads(pickle.dumps(searcher.__dict__))["prior"] == prior  # --resume keeps it


def test_surrogate_with_prior_learns_from_results():
    """After the prior's first pick the GP corrects it: a synthetic table whose best orders
    the prior ranks last is still solved well within the budget."""
    pool = expand("permutations", {"n_s": 4, "n_f": 4, "count": 30, "seed": 1})
    prior = resolve_prior("press2020")
    scores = prior.predict([c.order for c in pool])
    table = OrderTable.from_rows([(c.order, -float(s)) for c, s in zip(pool, scores,
                                                                        strict=True)], metric="v")
    orders = drive(SurrogateSearcher(table.candidates(), num_samples=30, seeds=[0], metric="v",
                                     prior=prior), table, budget=30, until=table.top(1))
    assert orders[-1] in table.top(1) and len(orders) < 25


def _experiment(tmp_path: Path, **search: object) -> Path:
    raw = {"name": "prior_demo", "space": {"type": "permutations", "n_s": 3, "n_f": 3,
                                            "count": 6, "seed": 0},
           "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"},
           "search": {"algorithm": "surrogate", "num_samples": 4, **search},
           "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_dry_run_names_the_prior(tmp_path, capsys):
    assert main(["sweep", str(_experiment(tmp_path, prior=["press2020"])), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "search.prior: prior from press2020/table1, press2020/table2 (42 orders), weight" \
        in out


@pytest.mark.parametrize(("search", "expected"), [
    ({"prior": "nosuchstudy"}, "search.prior: got 'nosuchstudy', expected press2020"),
    ({"algorithm": "optuna", "prior": "press2020"},
     "search.prior: got 'press2020', expected no prior for search.algorithm optuna"),
])
def test_bad_prior_is_exit_2(tmp_path, capsys, search, expected):
    assert main(["sweep", str(_experiment(tmp_path, **search)), "--dry-run"]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists()  # nothing was written


def _bench():
    spec = importlib.util.spec_from_file_location(
        "searcher_oracle", Path(__file__).resolve().parents[2] / "benchmarks" / "searcher_oracle.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_benchmark_leaves_the_judged_study_out_by_content(tmp_path, capsys):
    """A copy of the shipped study under another name is still judged without its own data."""
    copy = tmp_path / "renamed_trials.csv"
    shipped = builtin_tables("mini_press2020")
    src = Path(__file__).resolve().parents[2] / "analysis" / "data" / "mini_press2020_trials.csv"
    copy.write_text(src.read_text())
    bench = _bench()
    argv = ["--table", str(copy), "--only-given", "--seeds", "3", "--searchers", "random,prior",
            "--json"]
    assert bench.main(argv) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["table"].rsplit("/", 1)[1] for r in results] == ["budgeted", "permutations",
                                                              "sandwich"]
    for res in results:
        assert {t.table for t in shipped} <= set(res["left_out"])
        assert "mini_press2020" not in res["prior"] and "press2020/table1" in res["prior"]
        for name in ("random", "prior"):
            top5 = res["searchers"][name]["top5"]
            assert 1 <= top5["q1"] <= top5["median"] <= top5["q3"] <= res["budget"] + 1
        assert res["searchers"]["random"]["top5"]["ratio"] == 1.0


def test_a_sweep_plan_hands_its_prior_to_the_surrogate(tmp_path):
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.searchers.registry import make_searcher

    plan = plan_sweep(load_experiment(_experiment(tmp_path, prior="mini_press2020")))
    inner = make_searcher(plan).inner
    assert isinstance(inner, SurrogateSearcher) and inner.prior is not None
    assert inner.prior.sources == ("mini_press2020/budgeted", "mini_press2020/permutations")
    plain = make_searcher(plan_sweep(load_experiment(_experiment(tmp_path)))).inner
    assert plain.prior is None and not plain.prior_c.any()


GUIDED_SPACE = {"space": {"type": "sandwich", "n": 3, "k": [0, 1, 2]},
                "model": {"preset": "debug", "guidance": [
                    {"mode": "none"}, {"mode": "hard", "blocks": ["ffn", "key_query"]}]},
                "data": {"name": "tinyshakespeare"}}
IOT_SPACE = {"task": "translation",
             "space": {"type": "iot_subsets", "stack": "decoder", "size": 2,
                       "mode": "exhaustive", "layers": 2},
             "model": {"preset": "debug", "d_model": 32, "n_heads": 2, "d_ff": 64},
             "data": {"name": "multi30k", "vocab_size": 500, "max_train_tokens": 30}}


@pytest.mark.parametrize("space", [GUIDED_SPACE, IOT_SPACE], ids=["guided", "iot"])
def test_prior_shapes_guided_and_iot_pools(tmp_path, space):
    from sublayer_search.search.core.variant import variant_of
    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.searchers.registry import make_searcher

    doc = {"name": "prior_pools", "seeds": [0], "baseline": {"enabled": False},
           "train": {"steps": 4, "eval_every": 2},
           "search": {"algorithm": "surrogate", "num_samples": 6, "prior": "press2020"},
           "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"}, **space}
    plan = plan_sweep(parse_experiment(doc))
    inner = make_searcher(plan).inner
    assert isinstance(inner, SurrogateSearcher) and inner.prior is not None
    assert np.ptp(inner.prior_c) > 0  # the prior tells the pool's models apart
    by_order: dict[str, set[float]] = {}
    for cand, value in zip(inner.candidates, inner.prior_c, strict=True):
        if variant_of(cand).subset is None:
            by_order.setdefault(cand.order, set()).add(round(float(value), 12))
    assert all(len(v) == 1 for v in by_order.values())  # guidance stays the GP's business
    for i in range(6):
        assert isinstance(inner.suggest(f"t{i}"), dict)
        inner.on_trial_complete(f"t{i}", result={plan.metric: 5.0 - 0.1 * i})
    assert len(inner.taken) == 6  # six models, none twice
    assert len(inner.seen_prior) == len(inner.seen) == 6


@pytest.mark.slow  # an MLflow SQLite store: ~20 s on a busy 2-core machine
def test_an_experiment_of_the_store_is_a_prior(tmp_path):
    """Finished trial runs of an MLflow experiment, as ``sublayer sweep`` tags them."""
    from mlflow.tracking import MlflowClient

    from sublayer_search.spaces.records import Tag, TrialStatus, final

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("earlier")
    table = builtin_tables("mini_press2020")[1]
    for i, (order, value) in enumerate(table.records[:12]):
        run = client.create_run(exp_id)
        client.log_param(run.info.run_id, "order", order)
        client.set_tag(run.info.run_id, Tag.METRIC, "val_bpc")
        client.set_tag(run.info.run_id, Tag.SPACE, "permutations")
        client.set_tag(run.info.run_id, Tag.STATUS, TrialStatus.FINISHED)
        client.log_metric(run.info.run_id, final("val_bpc"), value if i else 99.0)
        client.set_terminated(run.info.run_id, "FINISHED" if i else "FAILED")
    (got,) = load_tables("earlier", tracking_uri=uri)
    assert got.study == "store:earlier" and got.mode == "min"
    assert sorted(got.records) == sorted(table.records[1:12])  # the failed run left out
    assert same_study(got, table)  # judged against the shipped study, it is that study
    with pytest.raises(PriorError, match="MLflow experiment of the store"):
        load_tables("missing", tracking_uri=uri)


def test_evolution_draws_its_first_population_best_prior_first():
    from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher

    pool = expand("permutations", {"n_s": 4, "n_f": 4, "count": 20, "seed": 5})
    prior = resolve_prior("press2020")
    scores = dict(zip([c.order for c in pool], prior.predict([c.order for c in pool]),
                      strict=True))
    for seed in range(3):
        evo = EvolutionSearcher(pool, num_samples=4, population=4, seed=seed, metric="v",
                                prior=prior)
        first = [c.order for c in evo._initial]
        assert [scores[o] for o in first] == sorted(scores[o] for o in first)
    plain = EvolutionSearcher(pool, num_samples=4, population=4, seed=0, metric="v")
    firsts = [c.order for c in plain._initial]
    assert [scores[o] for o in firsts] != sorted(scores[o] for o in firsts)  # random without


def test_benchmark_queue_follows_the_priors_fixed_queue():
    """The oracle's ``queue-prior`` is the grid's queue: best-predicted first, the same path
    for every seed, whatever the results say."""
    bench = _bench()
    table = OrderTable.from_rows(builtin_tables("mini_press2020")[1].records, metric="v")
    prior = resolve_prior("press2020")
    orders = list(table.values)
    expected = [orders[i] for i in np.argsort(prior.predict(orders), kind="stable")]
    paths = [drive(bench.SEARCHERS["queue-prior"](table, seed, prior), table, budget=5)
             for seed in (0, 1)]
    assert paths[0] == paths[1] == expected[:5]
