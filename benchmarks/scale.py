"""Thousands of trials: the driver, the store and the analysis at scale.

Each size runs a real ``sublayer sweep`` (plan, Ray Tune, the trainable, our MLflow
callback) of N trials (three of them the baseline's seeds) that train almost nothing: a task registered here through the task
seam (``scale_toy``: a 4 x 1 linear model, ``--evals`` steps with an evaluation at each),
on ``--concurrent`` fake CPUs so that many run at once. The sweep runs in a child process
of its own, so its peak memory is its own. Stores: SQLite (a file in the scratch folder)
and PostgreSQL (``initdb`` + ``postgres`` started here, as the tests start it; MLflow
talks to the database directly, as ``sublayer sweep`` does). Then, on the result:
``sublayer analyze --history``, ``sublayer export`` and ``sublayer replay`` (time and peak
memory of each), and an ``mlflow server`` on the store answering the request the printed
runs link opens (the first page of 100 trials, best first) and the whole paged list.

    .venv/bin/python benchmarks/scale.py --trials 100 1000 --stores sqlite postgresql

Results are appended to ``reports/scale/results.jsonl`` (``--out``); the table and the plot
(``scale.png``: cost against trial count) are made from every result there, so sizes can
be run one at a time (``--table-only`` redraws them). ``SCALE_PROFILE=FILE`` writes a
cProfile of the sweep's driver (its main thread: Tune's loop and our callbacks) to FILE.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from scale_report import plot, table
from scale_store import amplify, metric_points, rest_times, store_size_mb

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.config import ModelConfig, model_preset
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.models.training_loop import Scores, StepContext, Workload, train
from sublayer_search.search.tasks import Task, validate_section
from sublayer_search.spaces.cost import units

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "search"))  # the tests' PostgreSQL and server helpers
BIN = Path(sys.executable).parent
METRIC = "val_toy"
WRITES = ("log_batch", "create_run", "set_terminated", "set_tag", "log_param", "log_metric",
          "log_artifact", "log_artifacts", "log_text", "log_dict", "update_run",
          "set_experiment_tag", "delete_tag")
"""MlflowClient methods that write: each call is one request (one transaction)."""
TARGETS = {"driver_s_per_trial": 0.3, "analyze_s": 60, "export_s": 60, "replay_s": 30,
           "analyze_mb": 2048, "export_mb": 2048}


# -- the toy task: trains a 4 x 1 linear model through the product's one training loop ---------
# (top level: Tune pickles the plan into its experiment state, Ray sends it to the workers)

@dataclass(frozen=True, kw_only=True)
class ToyData:
    width: int = 4

@dataclass(frozen=True, kw_only=True)
class ToySpec:
    model: ModelConfig
    data: ToyData
    train: TrainConfig

class ToyWorkload(Workload):
    metric = METRIC

    def __init__(self, spec: ToySpec) -> None:
        self.width = spec.data.width

    def build(self) -> torch.nn.Module:
        return torch.nn.Linear(self.width, 1)

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        x = torch.randn(ctx.batch_size, self.width, generator=ctx.generator)
        return ((model(x.to(ctx.device)) - 1.0) ** 2).mean(), ctx.batch_size

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, ctx: StepContext, *, step: int,
                 final: bool) -> Scores:
        x = torch.ones(8, self.width)
        loss = float(((model(x.to(ctx.device)) - 1.0) ** 2).mean())
        return {"val_loss": loss, METRIC: loss}

class ToyTask(Task[ModelConfig, ToyData, None, ToySpec]):
    name = "scale_toy"

    def template(self, raw: dict[str, Any], problems: list[Any]) -> ModelConfig | None:
        return model_preset("debug", order="sf", vocab_size=8, **raw)

    def data(self, raw: dict[str, Any], problems: list[Any]) -> ToyData | None:
        return validate_section(ToyData, raw, "data", problems)

    def metric(self, data: ToyData) -> str:
        return METRIC

    def baseline(self, pool: Any, template: Any, problems: list[Any]) -> None:
        return None

    def resolve(self, template: ModelConfig, data: ToyData, base: Any,
                problems: list[Any], notes: list[str] | None = None) -> ModelConfig:
        return template

    def model_for(self, template: ModelConfig, variant: Any) -> ModelConfig:
        return replace(template, order=variant.order)

    def spec(self, model: ModelConfig, data: ToyData, train: TrainConfig,
             extra: None) -> ToySpec:
        return ToySpec(model=model, data=data, train=train)

    def row(self, model: ModelConfig, variant: Any) -> dict[str, Any]:
        return {"units": units(variant.order), "params": param_count(model),
                "flops_per_token": flops_per_token(model)}

    def fit(self, spec: ToySpec, report: Any, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> Any:
        return train(spec.train, ToyWorkload(spec), report, checkpoint_dir=checkpoint_dir,
                     resume_from=resume_from)


BASELINE, BASELINE_SEEDS = "sf" * 8, 3


def orders(n: int) -> list[str]:
    """``n`` distinct orders of 8 s and 8 f (12,869 besides the baseline), in a fixed order."""
    every = ("".join("s" if i in pos else "f" for i in range(16))
             for pos in itertools.combinations(range(16), 8))
    out = list(itertools.islice((o for o in every if o != BASELINE), n))
    if len(out) < n:
        raise SystemExit(f"--trials: at most {12869 + BASELINE_SEEDS}, got {n + BASELINE_SEEDS}")
    return out


def experiment(folder: Path, name: str, n: int, args: argparse.Namespace, uri: str) -> Path:
    import yaml

    doc = {"name": name, "task": "scale_toy", "description": "scale benchmark",
           "space": {"type": "explicit", "orders": orders(n - BASELINE_SEEDS)}, "seeds": [0],
           "baseline": {"order": BASELINE, "seeds": BASELINE_SEEDS}, "data": {"width": 4},
           "train": {"steps": args.evals, "batch_size": 4, "eval_every": 1, "lr": 0.01},
           "resources": {"cpu": 1}, "max_concurrent": args.concurrent,
           "tracking": {"uri": uri},
           "ray": {"storage_path": str(folder / "ray_results"), "num_cpus": args.concurrent}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- the child: one sweep, measured from inside the driver ------------------------------------
def run_child(path: Path, result: Path) -> int:
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.cli.main import main
    from sublayer_search.search.tasks import register

    register(ToyTask)  # defined in __main__: Ray pickles it to the workers by value
    calls: dict[str, int] = dict.fromkeys(WRITES, 0)
    for name in WRITES:
        real = getattr(MlflowClient, name)

        def counted(self: Any, *a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls[_name] += 1
            return _real(self, *a, **k)

        setattr(MlflowClient, name, counted)
    profile = os.environ.get("SCALE_PROFILE")  # a file: cProfile the driver's main thread
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0, t0 = os.times(), time.perf_counter()
    code = main(["sweep", str(path), "--yes"])
    wall, cpu1 = time.perf_counter() - t0, os.times()
    if profile:
        profiler.disable()
        profiler.dump_stats(profile)
    result.write_text(json.dumps({
        "code": code, "wall_s": wall,
        "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "writes": calls}))
    return 0


# -- the parent: the sweep, the analysis commands (the store's side: scale_store.py) ---------
# Linux keeps a process's peak memory across exec, and a child forked from this process (the
# size of torch) starts at this one's size: a small Python in between measures the command
_LAUNCH = ("import json, os, subprocess, sys, time; t = time.perf_counter(); "
           "p = subprocess.Popen(sys.argv[2:]); _, st, ru = os.wait4(p.pid, 0); "
           "open(sys.argv[1], 'w').write(json.dumps({'s': time.perf_counter() - t, "
           "'mb': ru.ru_maxrss / 1024, 'code': os.waitstatus_to_exitcode(st)}))")


def timed(cmd: list[str], log: Path, env: dict[str, str]) -> dict[str, Any]:
    """Wall time, peak memory (MB: the command and what it waited for) and exit status."""
    out = log.with_suffix(".time.json")
    with log.open("ab") as fh:
        subprocess.run([sys.executable, "-S", "-c", _LAUNCH, str(out), *cmd], stdout=fh,
                       stderr=subprocess.STDOUT, env=env, cwd=log.parent, check=True)
    return dict(json.loads(out.read_text()))


def measure(store: str, n: int, args: argparse.Namespace, folder: Path,
            uri: str) -> dict[str, Any]:
    from mlflow.tracking import MlflowClient

    env = _env(folder)
    (folder / "ray").mkdir(parents=True, exist_ok=True)
    name = f"scale_{store}_{n}"
    path = experiment(folder, name, n, args, uri)
    child = folder / f"{name}.json"
    sweep = timed([sys.executable, __file__, "--child", str(path), str(child)],
                  folder / f"{name}.sweep.log", env)
    if sweep["code"] != 0:
        raise SystemExit(f"the sweep failed ({sweep['code']}): see {folder / name}.sweep.log")
    inside = json.loads(child.read_text())
    if inside["code"] != 0:
        raise SystemExit(f"sublayer sweep exited {inside['code']}: see {folder / name}.sweep.log")
    exp_id = MlflowClient(uri).get_experiment_by_name(name).experiment_id  # type: ignore[union-attr]
    out: dict[str, Any] = {"store": store, "trials": n, "evals": args.evals,
                           "concurrent": args.concurrent, **inside,
                           "process_peak_mb": sweep["mb"],  # with Ray's reaped helpers
                           "points": metric_points(uri, exp_id)}
    out["driver_s_per_trial"] = inside["wall_s"] / n
    out["cpu_s_per_trial"] = inside["cpu_s"] / n
    out["writes_per_s"] = sum(inside["writes"].values()) / inside["wall_s"]
    out["store_mb"] = store_size_mb(store, uri, folder / "mlflow.db")
    if args.amplify and args.amplify > n:  # the analysis of a bigger store of the same runs
        out["amplified_to"] = n + amplify(uri, exp_id, args.amplify)
        out["amplified_store_mb"] = store_size_mb(store, uri, folder / "mlflow.db")
    out.update(analyse(name, uri, folder, env))
    return out


def analyse(name: str, uri: str, folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """Time and peak memory of ``analyze --history``, ``export`` and ``replay`` on the store,
    then the REST requests of the runs link."""
    from mlflow.tracking import MlflowClient

    out: dict[str, Any] = {}
    sub = str(BIN / "sublayer")
    for what, cmd in (
            ("analyze", [sub, "analyze", "--experiment", name, "--tracking-uri", uri,
                         "--out", str(folder / "report"), "--history"]),
            ("export", [sub, "export", name, "--tracking-uri", uri, "--out",
                        str(folder / "export")]),
            ("replay", [sub, "replay", name, "--tracking-uri", uri])):
        got = timed(cmd, folder / f"{name}.{what}.log", env)
        if got["code"] != 0:
            raise SystemExit(f"sublayer {what} exited {got['code']}: see {folder}/{name}.{what}.log")
        out[f"{what}_s"], out[f"{what}_mb"], out[f"{what}_code"] = got["s"], got["mb"], got["code"]
    exp_id = MlflowClient(uri).get_experiment_by_name(name).experiment_id  # type: ignore[union-attr]
    out.update(rest_times(uri, folder, exp_id))
    return out


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": str(folder / "ray"), "OMP_NUM_THREADS": "1", "HOME": str(folder),
           "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    return env


def reanalyse(folder: Path, results: Path) -> dict[str, Any]:
    """The analysis figures again on a folder ``--keep`` left (SQLite): after a change to the
    analysis, without running the sweep again. The row keeps the sweep's own figures from
    ``results`` (the latest row of that size) and says it was re-analysed, and when."""
    child = sorted(folder.glob("scale_sqlite_*.json"))
    if not child:
        raise SystemExit(f"--reanalyse: no scale_sqlite_N.json in {folder} (a --keep folder)")
    name = child[-1].stem
    n = int(name.rsplit("_", 1)[1])
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] \
        if results.exists() else []
    before = [r for r in rows if r["store"] == "sqlite" and r["trials"] == n
              and "amplified_to" not in r]
    if not before:
        raise SystemExit(f"--reanalyse: {results} has no SQLite row of {n} trials")
    for stale in folder.glob(f"{name}.*.log"):
        if not stale.name.endswith(".sweep.log"):
            stale.unlink()
    shutil.rmtree(folder / "report", ignore_errors=True)
    shutil.rmtree(folder / "export", ignore_errors=True)
    row = {**before[-1], **analyse(name, f"sqlite:///{folder / 'mlflow.db'}", folder,
                                   _env(folder))}
    row["reanalysed"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--stores", nargs="+", choices=("sqlite", "postgresql"),
                   default=["sqlite", "postgresql"])
    p.add_argument("--evals", type=int, default=10, help="evaluations (= steps) per trial")
    p.add_argument("--concurrent", type=int, default=8, help="trials at once (fake CPUs)")
    p.add_argument("--out", type=Path, default=REPO / "reports" / "scale")
    p.add_argument("--amplify", type=int, default=0, metavar="N",
                   help="after each sweep, copy its trial runs in the store up to N trial runs "
                        "and time the analysis commands on that (the sweep's own figures stay)")
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the scratch folders")
    p.add_argument("--reanalyse", type=Path, metavar="FOLDER",
                   help="time the analysis commands again on a SQLite folder --keep left")
    p.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return run_child(*args.child)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    if args.reanalyse:
        row = reanalyse(args.reanalyse, results)
        with results.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"re-analysed: {json.dumps(row)}", file=sys.stderr, flush=True)
        args.table_only = True
    for store, n in ([] if args.table_only else itertools.product(args.stores, args.trials)):
        folder = Path(tempfile.mkdtemp(prefix=f"scale-{store}-", dir="/tmp"))
        try:
            if store == "sqlite":
                row = measure(store, n, args, folder, f"sqlite:///{folder / 'mlflow.db'}")
            else:
                from postgres_helpers import postgres_server

                with postgres_server() as pg:
                    row = measure(store, n, args, folder, pg.uri)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        row["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with results.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"{store} {n}: {json.dumps(row)}", file=sys.stderr, flush=True)
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] \
        if results.exists() else []
    print(table(rows))
    print(f"targets at 5,000 trials: {TARGETS}")
    if rows:
        plot(rows, args.out / "scale.png")
        print(f"plot: {args.out / 'scale.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
