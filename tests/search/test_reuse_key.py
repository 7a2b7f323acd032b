"""Reuse matches a finished trial by its whole content key: order, seed, config hash and
what else tells models apart (an IOT subset whose first block is the plain model's)."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Subset, Variant, run_variant
from sublayer_search.search.tasks import LMTask, TranslationTask
from sublayer_search.search.tracking.runs import ensure_store, finished_trials


def _finished(client: MlflowClient, exp_id: str, **params: str) -> str:
    run = client.create_run(exp_id, tags={"sublayer.status": "finished"})
    for key, value in params.items():
        client.log_param(run.info.run_id, key, value)
    client.set_terminated(run.info.run_id, status="FINISHED")
    return run.info.run_id


def test_iot_subsets_and_the_plain_model_are_different_trials(tmp_path):
    client = ensure_store(f"sqlite:///{tmp_path}/mlflow.db")
    exp_id = client.create_experiment("keys")
    common = {"order": "scfscf", "seed": "0", "config_hash": "abc"}
    plain = _finished(client, exp_id, **common, side="decoder")
    iot146 = _finished(client, exp_id, **common, subset="146", stack="decoder")
    iot12 = _finished(client, exp_id, **common, subset="12", stack="decoder")
    task = TranslationTask()

    def identity(params: dict[str, str]) -> str:
        variant = run_variant(params)
        assert variant is not None
        return task.identity(variant)

    found = finished_trials(client, exp_id, "abc", identity)
    assert found == {("scfscf", 0, "decoder"): plain, ("scfscf", 0, "decoder:146"): iot146,
                     ("scfscf", 0, "decoder:12"): iot12}
    # a trial of the subset {1, 4, 6} finds its own run, never the plain model's
    trial = Trial(name="iot146@seed0", candidate="iot146", seed=0, space="iot_subsets",
                  variant=Variant(order="scfscf", subset=Subset(
                      stack="decoder", name="146", codes=(1, 4, 6), layers=2,
                      orders=("scfscf", "csfcsf", "fcsfcs"))))
    assert found[(trial.order, trial.seed, task.identity(trial.variant))] == iot146
    assert finished_trials(client, exp_id, "other-hash", identity) == {}


def test_language_model_trials_keep_their_simple_key(tmp_path):
    client = ensure_store(f"sqlite:///{tmp_path}/mlflow.db")
    exp_id = client.create_experiment("lm")
    run = _finished(client, exp_id, order="ssff", seed="1", config_hash="h")
    task = LMTask()
    found = finished_trials(client, exp_id, "h",
                            lambda params: task.identity(Variant(order=params["order"])))
    assert found == {("ssff", 1, "decoder"): run}
