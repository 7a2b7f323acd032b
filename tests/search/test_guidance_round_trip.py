"""Issue 38, item 3: a guidance setting has one form after planning (the variant's
``GuidanceConfig``; label, identity and params derived from it) and one way back from
MLflow (``spaces.guidance_params.read_guidance``, behind ``GuidanceConfig.from_params``).

Planned, logged by the real tracking callback into a real SQLite store, read back: the
same variant (reuse, warm start) and the same frame columns (analysis)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sublayer_search.analysis.store.guidance_frame import guidance_fields
from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.search.core.variant import run_variant
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.runs import ensure_store, open_sweep_run
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.guidance_params import read_guidance

SETTINGS = [
    {"mode": "none"},
    {"mode": "soft", "blocks": ["key_query"]},
    {"mode": "soft", "blocks": ["value", "ffn"], "alpha": 0.1, "norm": "l2"},
    {"mode": "hard", "blocks": ["ffn", "key_query"], "pairing": ["query_key", "w1_w2"]},
]


def _experiment(tmp_path: Path, uri: str) -> dict[str, Any]:
    return {
        "name": "guided-round-trip", "space": {"type": "sandwich", "n": 3, "k": [1]},
        "seeds": [0], "baseline": {"seeds": 1},
        "model": {"preset": "debug", "guidance": SETTINGS},
        "data": {"name": "tinyshakespeare"}, "train": {"steps": 4, "eval_every": 2},
        "tracking": {"uri": uri}, "ray": {"storage_path": str(tmp_path / "ray")},
    }


def test_a_planned_guidance_comes_back_from_mlflow_equal(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    plan = plan_sweep(parse_experiment(_experiment(tmp_path, uri)))
    assert {t.variant.label for t in plan.trials} == {
        "none", "sg-kq", "sg-v+ffn.l2.alpha0.1", "hg-kq+ffn.qk.w1w2"}
    for trial in plan.trials:  # one form: the model trains the variant's own setting
        assert plan.model_for(trial).guidance == trial.variant.guidance
    client = ensure_store(uri)
    exp_id, parent = open_sweep_run(client, plan, "ray-run", resume=False)
    callback = MlflowTracking(tracking_uri=uri, experiment_id=exp_id, parent_run_id=parent,
                              plan=plan)
    for i, trial in enumerate(plan.trials):
        ray_trial = SimpleNamespace(trial_id=f"t{i}", config={"trial": trial},
                                    num_failures=0, last_result={})
        callback.on_trial_start(0, [ray_trial], ray_trial)
    callback.buffer.drain()
    runs = {r.info.run_name: r for r in client.search_runs([exp_id],
                                                           "tags.`sublayer.role` = 'trial'")}
    assert sorted(runs) == sorted(t.name for t in plan.trials)
    for trial in plan.trials:
        params, tags = runs[trial.name].data.params, runs[trial.name].data.tags
        assert GuidanceConfig.from_params(params) == trial.variant.guidance, trial.name
        assert run_variant(params) == trial.variant, trial.name
        columns = guidance_fields(params, tags, {})
        setting = trial.variant.guidance
        assert columns["guidance"] == trial.guidance == setting.label
        assert (columns["guidance_mode"], columns["guidance_blocks"]) == (
            setting.mode, "+".join(setting.blocks))


def test_a_run_without_guidance_params_is_unguided_and_bad_ones_name_the_param() -> None:
    assert read_guidance({"order": "sfsf"}) is None
    assert GuidanceConfig.from_params({"order": "sfsf"}) == GuidanceConfig()
    with pytest.raises(SpaceError, match=r"model\.guidance\.mode.*'loud'.*none, soft, hard"):
        read_guidance({"model.guidance.mode": "loud"})
    with pytest.raises(SpaceError, match=r"model\.guidance\.alpha.*'x'.*a number"):
        read_guidance({"model.guidance.mode": "soft", "model.guidance.blocks": "ffn",
                       "model.guidance.alpha": "x"})
    assert run_variant({"order": "sfsf", "model.guidance.mode": "hard"}) is None
