"""Overhead of ``sublayer sweep`` over a plain training loop, and MLflow logging cost per report.

The same N short trials (debug model, explicit orders, no baseline) run three ways:

(a) a plain Python loop calling ``models.lm_workload.fit`` on ``trial.spec`` (its planned spec);
(b) ``sublayer sweep`` (in-process ``search.cli.main.main``) with ``max_concurrent: 1``,
    tracked by our ``MlflowTracking`` callback on a local ``mlflow server``;
(c) a Ray Tune ``Tuner`` on the same trainable (``search.run.trainable.train_trial``), one
    trial at a time, tracked by Ray's ``MLflowLoggerCallback`` on the same server.

Reported: per-trial overhead ``(b - a) / N`` (includes starting Ray, the MLflow parent
run and artifacts), the ratio ``b / a``, and the time spent inside each callback's
``on_trial_result`` per report (timed by subclassing), ours vs Ray's.
Targets: overhead <= 2 s per trial, our logging >= 10x cheaper per report.

    .venv/bin/python benchmarks/sweep_overhead.py --trials 16
    .venv/bin/python benchmarks/sweep_overhead.py --trials 6 --steps 20 --json

A sweep has a fixed cost (starting Ray and the first worker process, the MLflow
store and parent run, shutting down: about 15 s here) and a small cost per trial, so
``(b - a) / N`` falls with N; run two values of N to separate them.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ORDERS = (["sfsf", "ssff", "ffss", "fsfs", "sffs", "fssf"]  # every order of 2 s + 2 f,
          + sorted({"".join(p) for p in itertools.permutations("sssfff")}))  # then 3 s + 3 f
"""All distinct orders of two s and two f (the debug model's budget)."""

OVERHEAD_TARGET_S = 2.0
LOGGING_TARGET_RATIO = 10.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=16, help=f"trials (1..{len(ORDERS)})")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = p.parse_args(argv)
    if not 1 <= args.trials <= len(ORDERS):
        p.error(f"--trials must be in 1..{len(ORDERS)}")
    return args


def _environment(scratch: Path) -> None:
    os.environ.setdefault("SUBLAYER_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.update({
        "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": str(scratch / "ray"),
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    })
    os.environ.pop("RAY_ADDRESS", None)
    (scratch / "ray").mkdir(parents=True, exist_ok=True)


def _write_experiment(folder: Path, name: str, orders: list[str], args: argparse.Namespace,
                      tracking_uri: str) -> Path:
    import yaml

    doc = {
        "name": name, "description": "sweep overhead benchmark",
        "space": {"type": "explicit", "orders": orders}, "seeds": [0],
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": {"steps": args.steps, "batch_size": 8, "eval_every": args.eval_every,
                  "eval_batches": 2},
        "resources": {"cpu": 1}, "max_concurrent": 1,
        "tracking": {"uri": tracking_uri}, "ray": {"storage_path": str(folder / name)},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- a local MLflow server ------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_mlflow_server(folder: Path, timeout: float = 90.0) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(folder / "mlflow-server.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
         f"sqlite:///{folder / 'server.db'}", "--artifacts-destination", str(folder / "art"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}, cwd=folder,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: see {folder / 'mlflow-server.log'}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"mlflow server not ready in {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- (a) plain loop ---------------------------------------------------------------------------
def run_loop(path: Path) -> float:
    import torch

    from sublayer_search.models.lm_workload import fit
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep

    torch.set_num_threads(1)
    start = time.perf_counter()
    plan = plan_sweep(load_experiment(path), str(path))
    for trial in plan.trials:
        fit(trial.planned_spec(), lambda metrics, checkpoint=None: None)
    return time.perf_counter() - start


# -- (b) sublayer sweep with our callback, timed ------------------------------------------------
OURS: list[float] = []
RAYS: list[float] = []
RAY_START: list[float] = []


def _timed_ours() -> type:
    from sublayer_search.search.tracking.callback import MlflowTracking

    class TimedMlflowTracking(MlflowTracking):
        def on_trial_result(self, *args: Any, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            super().on_trial_result(*args, **kwargs)
            OURS.append(time.perf_counter() - t0)

    return TimedMlflowTracking


def run_sweep_cli(path: Path, tracking_uri: str) -> float:
    from sublayer_search.search.cli.main import main
    from sublayer_search.search.run import sweep as sweep_module

    sweep_module.MlflowTracking = _timed_ours()  # type: ignore[misc]
    connect = sweep_module.connect

    def timed_connect(*args: Any, **kwargs: Any) -> bool:
        t0 = time.perf_counter()
        try:
            return connect(*args, **kwargs)
        finally:
            RAY_START.append(time.perf_counter() - t0)

    sweep_module.connect = timed_connect  # type: ignore[assignment]
    start = time.perf_counter()
    code = main(["sweep", str(path), "--tracking-uri", tracking_uri])
    elapsed = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"sublayer sweep exited with {code}")
    return elapsed


# -- (c) Tuner with Ray's MLflowLoggerCallback, timed --------------------------------------------
def run_ray_callback(path: Path, tracking_uri: str) -> float:
    import ray
    from ray import tune
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.tune.search import ConcurrencyLimiter

    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.run.trainable import train_trial
    from sublayer_search.search.searchers.grid_searcher import GridSearcher

    class TimedMLflowLoggerCallback(MLflowLoggerCallback):
        def on_trial_result(self, *args: Any, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            super().on_trial_result(*args, **kwargs)
            RAYS.append(time.perf_counter() - t0)

    start = time.perf_counter()
    exp = load_experiment(path)
    plan = plan_sweep(exp, str(path))
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        trainable = tune.with_resources(tune.with_parameters(train_trial, plan=plan), {"cpu": 1})
        searcher = ConcurrencyLimiter(GridSearcher(plan.trials, metric=plan.metric, mode="min"),
                                      max_concurrent=1)
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=len(plan.trials),
                                        reuse_actors=True, metric=plan.metric, mode="min"),
            run_config=tune.RunConfig(
                name=exp.name, storage_path=exp.storage_path(), verbose=0,
                callbacks=[TimedMLflowLoggerCallback(tracking_uri=tracking_uri,
                                                     experiment_name=exp.name,
                                                     save_artifact=False)],
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1)),
        )
        results = tuner.fit()
        if results.errors:
            raise RuntimeError(f"{len(results.errors)} trial(s) failed: {results.errors[0]}")
    finally:
        ray.shutdown()
    return time.perf_counter() - start


def _per_report(times: list[float]) -> dict[str, float]:
    if not times:
        return {"reports": 0, "mean_s": float("nan"), "median_s": float("nan"),
                "total_s": 0.0}
    return {"reports": len(times), "mean_s": statistics.fmean(times),
            "median_s": statistics.median(times), "total_s": sum(times)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="sweepbench", dir="/tmp"))
    _environment(scratch)
    orders = ORDERS[:args.trials]
    server = None
    try:
        server, url = start_mlflow_server(scratch)
        # keep stdout for the table / JSON: MLflow and Ray print progress lines there
        with contextlib.redirect_stdout(sys.stderr):
            a = run_loop(_write_experiment(scratch, "bench_loop", orders, args, url))
            b = run_sweep_cli(_write_experiment(scratch, "bench_ours", orders, args, url), url)
            c = run_ray_callback(_write_experiment(scratch, "bench_raycb", orders, args, url),
                                 url)
    finally:
        if server is not None:
            stop(server)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    n = args.trials
    ours, rays = _per_report(OURS), _per_report(RAYS)
    out = {
        "trials": n, "steps": args.steps, "reports_per_trial": args.steps // args.eval_every,
        "loop_s": a, "sweep_s": b, "ray_callback_sweep_s": c,
        "ray_start_s": sum(RAY_START),
        "overhead_per_trial_s": (b - a) / n, "ratio_sweep_over_loop": b / a,
        "overhead_per_trial_without_ray_start_s": (b - sum(RAY_START) - a) / n,
        "ours_per_report": ours, "ray_per_report": rays,
        "logging_speedup": rays["mean_s"] / ours["mean_s"] if ours["mean_s"] else float("nan"),
        "targets": {"overhead_per_trial_s": OVERHEAD_TARGET_S,
                    "logging_speedup": LOGGING_TARGET_RATIO},
    }
    out["meets_overhead_target"] = out["overhead_per_trial_s"] <= OVERHEAD_TARGET_S
    out["meets_logging_target"] = out["logging_speedup"] >= LOGGING_TARGET_RATIO
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        ("(a) plain loop, total", f"{a:.2f} s"),
        ("(b) sublayer sweep, total", f"{b:.2f} s"),
        ("(c) Tuner + Ray MLflowLoggerCallback, total", f"{c:.2f} s"),
        ("per-trial overhead (b-a)/N", f"{out['overhead_per_trial_s']:.2f} s "
         f"(target <= {OVERHEAD_TARGET_S:g} s)"),
        ("  of which starting Ray (once)", f"{out['ray_start_s']:.2f} s; without it "
         f"{out['overhead_per_trial_without_ray_start_s']:.2f} s per trial"),
        ("ratio b/a", f"{out['ratio_sweep_over_loop']:.2f}"),
        ("ours: on_trial_result per report", f"{ours['mean_s'] * 1e3:.1f} ms mean, "
         f"{ours['median_s'] * 1e3:.1f} ms median ({ours['reports']} reports)"),
        ("Ray's: on_trial_result per report", f"{rays['mean_s'] * 1e3:.1f} ms mean, "
         f"{rays['median_s'] * 1e3:.1f} ms median ({rays['reports']} reports)"),
        ("logging speedup (Ray's / ours)", f"{out['logging_speedup']:.1f}x "
         f"(target >= {LOGGING_TARGET_RATIO:g}x)"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{n} trials x {args.steps} steps (debug model), one at a time; MLflow at a local server")
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
