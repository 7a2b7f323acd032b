"""Stage 1 of a one-shot sweep, driven from the sweep's driver (``search.algorithm: oneshot``).

:func:`run_stage_one` trains the supernet as ONE tracked run, a child of the sweep's run
(tag ``sublayer.role=supernet``): a Ray task with the trials' resources trains and ranks
(:mod:`.oneshot_task`), the driver writes its learning curve as metrics and the full
ranking as ``ranking.csv`` and an MLflow table (``ranking.json``). It returns the stage-2
plan (:func:`.oneshot_plan.stage_two`), which the sweep runs like a grid; its trials are
tagged ``sublayer.oneshot_rank`` and ``sublayer.oneshot_estimate`` (their records').

Resume: a supernet run that FINISHED with its ranking is read back, never trained again;
one left RUNNING or KILLED by a kill trains again in the same run, from its checkpoint
when the task can read it (already logged evaluations are not logged twice).

The supernet run's writes ride out an MLflow outage like the trials' writes
(:mod:`.oneshot_writes`): buffered, kept on disk during it, and past
``tracking.outage_limit_s`` stage 1 stops with exit 75 for ``--resume``.
"""

from __future__ import annotations

import csv
import io
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from mlflow.entities import Param
from mlflow.tracking import MlflowClient

from sublayer_search.search.oneshot.stages import (
    PICK_PARAM,
    RANK_PARAM,
    StageOne,
    rank_metric,
    stage_one,
    stage_two,
)
from sublayer_search.search.oneshot.writes import JOURNAL, SupernetWrites
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.searchers.algorithms.oneshot import supernet_config, top_k
from sublayer_search.search.searchers.queue import prior_for
from sublayer_search.search.tracking.buffer import TrackingOutage
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.links import resume_command
from sublayer_search.search.tracking.runs import close_sweep, environment_tags
from sublayer_search.search.tracking.values import chunks
from sublayer_search.spaces.records import Role, Tag, TrialStatus

__all__ = ["OneShotError", "OneShotTracking", "RANKING_FILE", "SUPERNET_RUN", "run_stage_one"]

SUPERNET_RUN = "supernet"
"""Name of the supernet's MLflow run."""
RANKING_FILE = "ranking.csv"
CHECKPOINT_FOLDER = "supernet_checkpoint"
"""In the sweep's Ray run folder: the supernet's last checkpoint (for a resumed stage 1)."""
SUPERNET_RUN_TAG = "sublayer.supernet_run"
"""On the sweep's run: the id of its supernet run."""
_COLUMNS = ("rank", "order", "mean", "sem", "n_batches")


class OneShotError(RuntimeError):
    """The supernet did not give a ranking (its task failed or its loss diverged)."""


class OneShotTracking(MlflowTracking):
    """The tracking of a one-shot sweep's stage two. Its trials' records carry their rank
    and estimate (``TrialRecord.oneshot_rank``); the class stays so that a stage two saved
    by Tune resumes with the callback it pickled."""


def _say(text: str) -> None:
    print(f"stage 1: {text}", flush=True)


def _supernet_run(client: MlflowClient, exp_id: str, parent_id: str) -> Any:
    runs = client.search_runs(
        [exp_id],
        max_results=1,
        order_by=["attributes.start_time ASC"],
        filter_string=f"tags.mlflow.parentRunId = '{parent_id}' and "
        f"tags.`{Tag.ROLE}` = '{Role.SUPERNET}'",
    )
    return runs[0] if runs else None


def _read_ranking(client: MlflowClient, run_id: str) -> list[dict[str, Any]]:
    """The ranking a finished supernet run holds (empty if it holds none)."""
    if RANKING_FILE not in {a.path for a in client.list_artifacts(run_id)}:
        return []  # never written (an unreachable store raises instead: no retraining)
    with tempfile.TemporaryDirectory(prefix="sublayer-ranking-") as tmp:
        path = client.download_artifacts(run_id, RANKING_FILE, tmp)
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))


def _ranking_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _open_run(
    client: MlflowClient, exp_id: str, parent_id: str, plan: SweepPlan, one: StageOne
) -> str:
    spec = plan.task.spec(plan.model, plan.data, plan.experiment.train, plan.extra)
    settings = {
        k: v
        for k, v in plan.task.flat(spec).items()
        if k not in ("model.order", "train.steps", "train.seed")
    }
    params = {
        **{f"supernet.{k}": v for k, v in supernet_config(plan.experiment).to_dict().items()},
        "orders": len(one.orders),
        "metric": plan.metric,
        "rank_metric": rank_metric(plan.metric),
        "trial_units": f"{one.trial_units:.4g}",
        "top_k": top_k(plan.experiment),
        **settings,
    }
    tags = {
        Tag.PARENT: parent_id,
        Tag.ROLE: Role.SUPERNET.value,
        Tag.STATUS: TrialStatus.RUNNING.value,
        **environment_tags(),
    }
    run_id: str = client.create_run(exp_id, run_name=SUPERNET_RUN, tags=tags).info.run_id
    for chunk in chunks([Param(k, str(v)[:6000]) for k, v in params.items() if v is not None]):
        client.log_batch(run_id, params=chunk)
    client.log_text(run_id, "\n".join(one.orders) + "\n", "orders.txt")
    client.set_tag(parent_id, SUPERNET_RUN_TAG, run_id)
    return run_id


class _DeferredInterrupt:
    """Ctrl-C during stage 1 stops it at the next safe point, never inside an MLflow write
    (a SQLite transaction cut there kept the store locked for closing the runs)."""

    def __enter__(self) -> _DeferredInterrupt:
        self.fired = False
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._mark)
        return self

    def _mark(self, signum: int, frame: Any) -> None:
        self.fired = True

    def check(self) -> None:
        if self.fired:
            raise KeyboardInterrupt

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if kind is None:
            self.check()


def _train(
    plan: SweepPlan, one: StageOne, writes: SupernetWrites, checkpoint_dir: Path,
    stop: _DeferredInterrupt,
) -> dict[str, Any]:
    """Run the supernet task with the trials' resources; stream its evaluations."""
    from ray.util.queue import Empty, Queue

    from sublayer_search.search.oneshot.task import train_and_rank

    res = plan.experiment.resources
    queue = Queue(actor_options={"num_cpus": 0})
    task = ray.remote(train_and_rank).options(
        num_cpus=res.cpu,
        num_gpus=res.gpu,
        max_retries=plan.experiment.failure.retries,
        retry_exceptions=False,
    )
    ref = task.remote(plan, list(one.orders), queue, str(checkpoint_dir))

    metric = plan.metric

    def drain() -> None:
        while True:
            try:
                row = queue.get_nowait()
            except Empty:
                writes.check()  # an outage past its limit stops stage 1 here
                return
            if writes.curve(row):
                value = row.get(metric)
                shown = f" {metric} {value:.4g}" if isinstance(value, float) else ""
                _say(f"supernet step {row.get('step', 0)}/{one.steps}{shown}")

    try:
        done: list[Any] = []
        while not done:
            done, _ = ray.wait([ref], timeout=1.0)
            drain()
            stop.check()
        result: dict[str, Any] = ray.get(ref)
        drain()
        writes.flush()  # the whole curve is in before the ranking
        return result
    except BaseException:
        ray.cancel(ref, force=True)
        raise
    finally:
        queue.shutdown()


def _finish(writes: SupernetWrites, result: dict[str, Any]) -> list[dict[str, Any]]:
    ranking = list(result["ranking"])
    placement = result.get("placement", {})
    tags = {f"ray.{k}": str(placement[k]) for k in ("node_id", "gpu_ids") if k in placement}
    tags[Tag.RESUMED_FROM_STEP] = str(placement.get("resumed_from_step", 0))
    tags[Tag.STEPS] = str(result["steps"])
    if result["status"] != "finished" or not ranking:
        tags.update({Tag.STATUS: TrialStatus.DIVERGED.value, Tag.ERROR: "loss became NaN or inf"})
        writes.tags(tags)
        writes.end("FAILED")
        writes.flush()
        raise OneShotError(
            f"the supernet diverged at step {result['steps']} (MLflow run "
            f"{writes.run_id}): no ranking; lower train.lr or change search.supernet"
        )
    writes.text(_ranking_csv(ranking), RANKING_FILE)
    writes.table({c: [row[c] for row in ranking] for c in _COLUMNS}, "ranking.json")
    tags[Tag.STATUS] = TrialStatus.FINISHED.value
    writes.tags(tags, {"ranked_orders": float(len(ranking))}, int(result["steps"]))
    writes.end("FINISHED")
    writes.flush()
    return ranking


def _ranking(
    plan: SweepPlan,
    client: MlflowClient,
    exp_id: str,
    parent_id: str,
    run_dir: Path,
    stop: _DeferredInterrupt,
) -> list[dict[str, Any]]:
    run = _supernet_run(client, exp_id, parent_id)
    if run is not None and run.info.status == "FINISHED":
        rows = _read_ranking(client, run.info.run_id)
        if rows:
            _say(
                f"the ranking of {len(rows)} orders is read back from supernet run "
                f"{run.info.run_id} (not trained again)"
            )
            return rows
    one = stage_one(plan, supernet_config(plan.experiment))
    if run is None:
        run_id = _open_run(client, exp_id, parent_id, plan, one)
    else:  # interrupted before: the same run trains again
        run_id = run.info.run_id
        client.update_run(run_id, status="RUNNING")
        client.set_tag(run_id, Tag.STATUS, TrialStatus.RUNNING.value)
    _say(
        f"training one supernet over {len(one.orders)} orders for {one.steps} steps "
        f"({one.trial_units:.3g} stand-alone trials; MLflow run {run_id})"
    )
    track = plan.experiment.tracking
    writes = SupernetWrites(client, run_id, limit_s=track.outage_limit_s,
                            max_ops=track.max_buffered, journal=run_dir / JOURNAL)
    try:
        result = _train(plan, one, writes, run_dir / CHECKPOINT_FOLDER, stop)
    except ray.exceptions.RayError as exc:
        why = str(exc).strip().splitlines()[-1]
        _say(f"the supernet's task failed: {why}")  # said before MLflow may turn out down
        # after the curve, through the same buffer: an outage now stops with exit 75
        writes.tags({Tag.STATUS: TrialStatus.FAILED.value, Tag.ERROR: str(exc)[-5000:]})
        writes.end("FAILED")
        writes.flush()
        raise OneShotError(f"the supernet's task failed (MLflow run {run_id}): {why}") from exc
    return _finish(writes, result)


def run_stage_one(
    plan: SweepPlan, client: MlflowClient, exp_id: str, parent_id: str, run_dir: Path
) -> SweepPlan:
    """Stage 1 (or its ranking read back on ``--resume``); the stage-2 plan. On any way
    out without a ranking the sweep's run is closed (KILLED on Ctrl-C, else FAILED)."""
    try:
        with _DeferredInterrupt() as stop:
            ranking = _ranking(plan, client, exp_id, parent_id, run_dir, stop)
    except TrackingOutage:
        raise  # MLflow is down: --resume closes what is open and continues stage 1
    except BaseException as exc:
        killed = isinstance(exc, KeyboardInterrupt)
        close_sweep(client, exp_id, parent_id, "KILLED" if killed else "FAILED")
        if killed:
            print(
                "sublayer: stage 1 interrupted; its unfinished runs are killed (MLflow status "
                f"KILLED); continue it with: {resume_command(plan.source)}",
                file=sys.stderr,
            )
        raise
    exp = plan.experiment
    prior = prior_for(exp.search.prior, algorithm=exp.search.algorithm,
                      tracking_uri=client.tracking_uri)  # checked before the sweep began
    stage2 = stage_two(plan, ranking, prior)
    top = sorted(
        (t for t in stage2.trials if RANK_PARAM in t.params),
        key=lambda t: (PICK_PARAM in t.params, int(t.params[RANK_PARAM]), t.seed),
    )
    _say(
        f"stage 2 trains the top {top_k(exp)} and the orders tied with the k-th"
        + (" and those the prior ranks best" if prior is not None else "") + ": "
        + ", ".join(
            f"{t.order} (rank {t.params[RANK_PARAM]}"
            + (", by the prior)" if PICK_PARAM in t.params else ")")
            for t in top if t.seed == top[0].seed
        )
        + f" and {len(plan.trials)} baseline trial(s)"
    )
    return stage2
