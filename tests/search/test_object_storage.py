"""Checkpoints, trial state and MLflow artifacts in an object store (issue 27, point 2).

A real S3-compatible server (``moto_server``, tests/search/s3_helpers.py) runs on this
machine. A sweep keeps its Ray runs (``ray.storage_path: s3://…``) and its MLflow
artifacts (``tracking.artifact_location: s3://…``) there; its driver is SIGKILLed
mid-sweep and ``--resume`` runs in fresh folders (another HOME, another working folder),
so it has nothing but the store and the MLflow database to go on. Planning checks the
settings first, and writes nothing to the bucket. (A multi-worker trial's checkpoints in
the bucket: tests/search/test_multiworker.py, whose 2-worker sweep checks them too.)
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import SUBLAYER, run_cli, start, tail, wait_while_running
from s3_helpers import S3Server, s3_server
from sweep_watch import trial_runs, wait_for_trials

from sublayer_search.search.core.problems import ExperimentError
from sublayer_search.search.plan.experiment import parse_experiment

BUCKET = "sweeps"
ORDERS = ["sfsf", "ssff", "fsfs"]
STEPS, EVERY = 400, 40  # the trial after the first is still running at the kill


def _doc(tmp_path: Path, storage: str, artifacts: str | None = None, **tracking: object) -> dict:
    return {
        "name": "objstore",
        "space": {"type": "explicit", "orders": ORDERS},
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": STEPS, "batch_size": 64, "eval_every": EVERY, "eval_batches": 2},
        "resources": {"cpu": 1},
        "max_concurrent": 1,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db",
                     **({"artifact_location": artifacts} if artifacts else {}), **tracking},
        "ray": {"storage_path": storage, "num_cpus": 1},
    }


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "objstore.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- settings (no server needed) ---------------------------------------------------------
@pytest.mark.parametrize(("storage", "artifacts", "field", "expected"), [
    ("gs://bucket/runs", None, "ray.storage_path", "scheme gs:// is not supported"),
    ("s3://", None, "ray.storage_path", "with a bucket name"),
    ("s3://Not_A_Bucket/x", None, "ray.storage_path", "valid bucket name"),
    ("runs", "mlartifacts", "tracking.artifact_location", "expected s3://BUCKET/PREFIX"),
    ("runs", "s3://", "tracking.artifact_location", "with a bucket name"),
])
def test_bad_locations_are_named_with_what_was_expected(tmp_path, storage, artifacts, field,
                                                        expected):
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(tmp_path, storage, artifacts))
    text = str(err.value)
    assert f"{field}: got" in text and expected in text, text


def test_credentials_in_a_location_are_refused_and_never_echoed(tmp_path):
    secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(tmp_path, f"s3://AKIDEXAMPLE:{secret}@sweeps/ray",
                              f"s3://AKIDEXAMPLE:{secret}@sweeps/mlflow"))
    text = str(err.value)
    assert "ray.storage_path: got 's3://***@sweeps/ray'" in text, text
    assert "tracking.artifact_location: got 's3://***@sweeps/mlflow'" in text, text
    assert secret not in text and "AKIDEXAMPLE" not in text


def test_an_object_store_location_is_kept_as_given(tmp_path):
    exp = parse_experiment(_doc(tmp_path, "s3://sweeps/team/ray/", "s3://sweeps/mlflow"))
    assert exp.storage_path() == "s3://sweeps/team/ray"
    assert exp.tracking.artifact_location == "s3://sweeps/mlflow"


# -- planning against a real server ------------------------------------------------------
@pytest.mark.slow
def test_planning_reads_the_store_and_refuses_what_cannot_work(tmp_path, monkeypatch):
    """Missing bucket, unreachable endpoint, missing credentials: exit 2 naming the field,
    no traceback, and the bucket is as empty afterwards as before (also after a
    ``--dry-run`` and a planning that passes)."""
    from helpers import free_port

    from sublayer_search.search.plan.preflight import artifact_problems, storage_problems

    with s3_server(tmp_path, buckets=(BUCKET,)) as server:
        env = {**os.environ, "HOME": str(tmp_path), **server.env}
        cases = [
            (_doc(tmp_path, "s3://no-such-bucket/ray"), {},
             "ray.storage_path: got 's3://no-such-bucket/ray', expected an existing bucket"),
            (_doc(tmp_path, f"s3://{BUCKET}/ray", "s3://no-such-bucket/mlflow"), {},
             "tracking.artifact_location: got 's3://no-such-bucket/mlflow', expected an "
             "existing bucket"),
            (_doc(tmp_path, f"s3://{BUCKET}/ray"),
             {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"},
             "expected a reachable object store (AWS_ENDPOINT_URL=http://127.0.0.1:"),
            (_doc(tmp_path, f"s3://{BUCKET}/ray"), {"AWS_SECRET_ACCESS_KEY": ""},
             "expected both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment "
             "(AWS_SECRET_ACCESS_KEY is not set)"),
        ]
        for i, (doc, overrides, expected) in enumerate(cases):
            path = _write(tmp_path, doc)
            log = tmp_path / f"plan{i}.log"
            out = run_cli(["sweep", str(path)], env={**env, **overrides}, log=log, timeout=120)
            assert out.returncode == 2, out.stdout
            assert expected in out.stdout, out.stdout
            assert "Traceback" not in out.stdout, out.stdout

        dry = run_cli(["sweep", str(_write(tmp_path, _doc(tmp_path, f"s3://{BUCKET}/ray",
                                                          f"s3://{BUCKET}/mlflow"))),
                       "--dry-run"], env=env, log=tmp_path / "dry.log", timeout=120)
        assert dry.returncode == 0, dry.stdout
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        assert storage_problems(f"s3://{BUCKET}/ray", "objstore") == []
        assert artifact_problems(f"s3://{BUCKET}/mlflow") == []
        assert server.objects(BUCKET) == {}  # nothing was written to check it
    assert not (tmp_path / "mlflow.db").exists()  # and MLflow was never touched


# -- a killed driver resumes from the store alone ---------------------------------------
def _children(client):
    return trial_runs(client, "objstore")


def _describe(runs) -> str:
    return "\n".join(f"{r.info.run_name} {r.info.status} {r.data.tags.get('sublayer.status')} "
                     f"{r.data.tags.get('sublayer.error', '')[-600:]}" for r in runs)


def _run_and_kill(tmp_path: Path, path: Path, env: dict[str, str], server: S3Server) -> object:
    """Start the sweep; SIGKILL its driver (then what it started) once one trial finished,
    the next one evaluated twice and Tune saved its state to the bucket after that. The
    MLflow client is returned."""
    work = tmp_path / "first"
    work.mkdir()
    log = tmp_path / "first.log"
    driver = start([SUBLAYER, "sweep", str(path)], env={**env, "HOME": str(work)}, log=log,
                   cwd=work)
    try:
        client = wait_for_trials(driver, tmp_path / "mlflow.db", "objstore", lambda c, runs: any(
            r.info.status == "FINISHED" for r in runs) and any(
                r.info.status == "RUNNING" and len(c.get_metric_history(r.info.run_id,
                                                                        "val_loss")) >= 2
                for r in runs), "a trial finished and the next one evaluated twice", log=log)
        seen = time.time()  # Tune snapshots the experiment after that checkpoint (every 1 s)
        wait_while_running("Tune saved the experiment to the bucket", lambda: server.saved_since(
            BUCKET, "experiment_state-", seen), driver, log, timeout=120)
    finally:
        os.kill(driver.pid, signal.SIGKILL)  # the driver dies first, as on a crash
        driver.wait()
        try:  # then what it had started (raylet, workers): nothing else is touched
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return client


@pytest.mark.slow
@pytest.mark.soak  # minutes; the planning test above and test_resume.py cover its parts in make test
def test_a_killed_sweep_resumes_from_object_storage_alone(tmp_path, monkeypatch):
    with s3_server(tmp_path, buckets=(BUCKET,)) as server:
        for key, value in server.env.items():  # this test reads the artifacts back
            monkeypatch.setenv(key, value)
        path = _write(tmp_path, _doc(tmp_path, f"s3://{BUCKET}/ray", f"s3://{BUCKET}/mlflow",
                                     log_checkpoints=True))
        env = {**os.environ, **server.env, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
        client = _run_and_kill(tmp_path, path, env, server)

        before = {r.info.run_name: r for r in _children(client)}
        done_before = {n: r.info.end_time for n, r in before.items()
                       if r.info.status == "FINISHED"}
        interrupted_names = [n for n, r in before.items() if r.info.status == "RUNNING"]
        assert done_before and len(interrupted_names) == 1, _describe(before.values())
        stored = server.objects(BUCKET)
        run = stored["ray/objstore.latest"].decode().strip()
        assert any(k.startswith(f"ray/{run}/experiment_state") for k in stored), sorted(stored)

        again = tmp_path / "again"  # another HOME and folder: nothing local carries over
        again.mkdir()
        log = tmp_path / "again.log"
        resumed = start([SUBLAYER, "sweep", str(path), "--resume"],
                        env={**env, "HOME": str(again)}, log=log, cwd=again)
        try:
            resumed.wait(timeout=400)
        except subprocess.TimeoutExpired:
            resumed.kill()
            pytest.fail(f"--resume ran past 400 s:\n{tail(log)}")
        assert resumed.returncode == 0, tail(log)

        after = _children(client)
        report = _describe(after) + "\n--- resumed driver ---\n" + tail(log)
        assert sorted(r.info.run_name for r in after) == sorted(f"{o}@seed0" for o in ORDERS)
        assert all(r.info.status == "FINISHED" for r in after), report
        assert {r.data.tags["sublayer.status"] for r in after} == {"finished"}, report
        by_name = {r.info.run_name: r for r in after}
        for name, end in done_before.items():  # finished trials were not trained again
            assert by_name[name].info.end_time == end
        interrupted = by_name[interrupted_names[0]]
        assert int(interrupted.data.tags["sublayer.resumed_from_step"]) >= EVERY, report
        steps = [m.step for m in client.get_metric_history(interrupted.info.run_id, "val_loss")]
        assert sorted(steps) == list(range(EVERY, STEPS + 1, EVERY))  # every evaluation, once
        parents = client.search_runs([after[0].info.experiment_id],
                                     filter_string="tags.`sublayer.role` = 'sweep'")
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"

        # the artifacts are in the bucket, each trial's checkpoint once
        stored = server.objects(BUCKET)
        for r in [*after, parents[0]]:
            assert r.info.artifact_uri.startswith(f"s3://{BUCKET}/mlflow/"), r.info.artifact_uri
        parent_files = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
        assert {"experiment.yaml", "trials.csv"} <= parent_files
        for r in after:
            files = {a.path for a in client.list_artifacts(r.info.run_id, "checkpoint")}
            assert "checkpoint/model.json" in files and len(files) >= 2, files
            keys = [k for k in stored if k.startswith(f"mlflow/{r.info.run_id}/artifacts/"
                                                      "checkpoint/")]
            assert len(keys) == len(set(keys)) == len(files)
        trials = {m.group(1) for k in stored
                  if (m := re.match(rf"ray/{run}/([^/]+)/checkpoint_\d+/", k))}
        assert len(trials) == len(ORDERS), sorted(stored)

    local = [p for p in tmp_path.rglob("*") if p.name.startswith("checkpoint_")
             or p.name in ("mlruns", "ray_results", "objstore.latest")]
    assert local == [], local  # nothing of the sweep was kept on this disk



# -- a lost node: its trial continues on another node from the store ---------------------
def _head_node_id(address: str, env: dict[str, str]) -> str:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print('HEAD', next(n['NodeID'] for n in ray.nodes() "
            "if 'node:__internal_head__' in n['Resources']))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    heads = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("HEAD ")]
    assert heads, out.stderr[-3000:]
    return heads[0]


def _kill_node(pid: int) -> None:
    """SIGKILL a node as if its machine were gone: ``ray start`` and everything below it."""
    import psutil

    root = psutil.Process(pid)
    every = [*root.children(recursive=True), root]
    for proc in every:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(every, timeout=30)


@pytest.mark.slow
@pytest.mark.soak  # a lost node (minutes), as test_node_loss.py
def test_a_trial_on_a_lost_node_continues_from_object_storage(tmp_path, monkeypatch):
    """Two ``ray start`` nodes; the worker node running a trial is SIGKILLed after the
    trial's first evaluation; with ``failure.retries`` Ray restarts it on the head node
    from its checkpoint, which only the bucket holds. One MLflow run per trial."""
    from helpers import ray_cluster, scratch, stop
    from mlflow.tracking import MlflowClient

    train = {"steps": 200, "batch_size": 8, "eval_every": 40, "eval_batches": 2}
    doc = {**_doc(tmp_path, f"s3://{BUCKET}/ray", f"s3://{BUCKET}/mlflow"), "train": train,
           "space": {"type": "explicit", "orders": ORDERS[:2]}, "resources": {"cpu": 2},
           "max_concurrent": 2, "failure": {"retries": 2},
           "ray": {"storage_path": f"s3://{BUCKET}/ray"}}
    path = _write(tmp_path, doc)
    log = tmp_path / "sweep.log"
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with s3_server(tmp_path, buckets=(BUCKET,)) as server, scratch("s3-home") as home:
        for key, value in server.env.items():  # every node's environment: the credentials
            monkeypatch.setenv(key, value)
        with ray_cluster(home, nodes=2, cpus=2, gpus=0) as cluster:
            env = {**cluster.env, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
            head = _head_node_id(cluster.address, env)
            driver = start([SUBLAYER, "sweep", str(path), "--address", cluster.address],
                           env=env, log=log, cwd=tmp_path)
            try:
                deadline, victim = time.monotonic() + 240, None
                while victim is None:
                    assert driver.poll() is None, f"the sweep ended early:\n{tail(log)}"
                    assert time.monotonic() < deadline, f"no evaluation:\n{tail(log)}"
                    time.sleep(0.5)
                    if (tmp_path / "mlflow.db").exists():
                        victim = next((r for r in _children(client)
                                       if r.data.tags.get("ray.node_id") not in (None, head)
                                       and client.get_metric_history(r.info.run_id, "val_loss")),
                                      None)
                _kill_node(cluster.procs[1].pid)
                driver.wait(timeout=600)
            finally:
                stop(driver)
            assert driver.returncode == 0, tail(log)
        stored = server.objects(BUCKET)

    runs = {r.info.run_name: r for r in _children(client)}
    assert sorted(runs) == sorted(f"{o}@seed0" for o in ORDERS[:2])  # one run per trial
    moved = runs[victim.info.run_name]
    report = _describe(runs.values()) + "\n" + tail(log)
    assert all(r.info.status == "FINISHED" for r in runs.values()), report
    assert moved.data.tags.get("sublayer.restarts") == "1", report
    assert moved.data.tags["ray.node_id"] == head, report
    assert int(moved.data.tags["sublayer.resumed_from_step"]) >= train["eval_every"], report
    steps = sorted(m.step for m in client.get_metric_history(moved.info.run_id, "val_loss"))
    assert steps == list(range(train["eval_every"], train["steps"] + 1, train["eval_every"]))
    assert any(k.startswith("ray/") and "/checkpoint_" in k for k in stored), sorted(stored)
    assert not (tmp_path / "ray_results").exists()
