"""Repeated kills: SIGKILL the sweep's driver at random moments, resume each time.

One sweep (debug model, explicit orders, SQLite MLflow store) runs as a ``sublayer
sweep`` subprocess in its own process group. At a random moment (uniform in
``--min-s``..``--max-s`` after each start) the driver and then its whole group (Ray's
raylet and workers) get SIGKILL; ``sublayer sweep --resume`` starts it again. After
``--kills`` kills the last resume runs to the end. A kill before the sweep recorded
itself (``ray/soak.latest``; nothing is in MLflow or Ray then) is followed by a plain
start, as a user would do: ``--resume`` has nothing to continue. The same sweep also runs once
without kills, for the wall-time reference.

Printed (all counts must be 0):
- finished trials lost: trials of the plan without a FINISHED run;
- duplicate runs: trial runs beyond one per planned trial (and parent runs beyond one);
- runs left RUNNING: trial or parent runs whose MLflow status is still RUNNING;
- evaluations logged twice: (run, metric, step) pairs with more than one point;
and the overhead of the kills: wall time of all attempts against the unkilled run.

    .venv/bin/python benchmarks/resume_soak.py                # 10 kills, 8 trials
    .venv/bin/python benchmarks/resume_soak.py --kills 3 --trials 3 --steps 120
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ORDERS = ["sfsf", "ssff", "ffss", "fsfs", "sffs", "fssf", "sfsfsf", "sssfff"]
VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]


def experiment(folder: Path, *, trials: int, steps: int, every: int) -> Path:
    doc = {
        "name": "soak",
        "space": {"type": "explicit", "orders": ORDERS[:trials]},
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": steps, "batch_size": 16, "eval_every": every, "eval_batches": 2},
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{folder}/mlflow.db"},
        "ray": {"storage_path": str(folder / "ray"), "num_cpus": 2},
    }
    path = folder / "soak.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def environment(folder: Path) -> dict[str, str]:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "MLFLOW_DISABLE_TELEMETRY": "true",
            "RAY_USAGE_STATS_ENABLED": "0", "TUNE_GLOBAL_CHECKPOINT_S": "1",
            "OMP_NUM_THREADS": "1",
            "SUBLAYER_DATA_DIR": os.environ.get("SUBLAYER_DATA_DIR", str(REPO.parent / "shared"
                                                                         / "data"))}


def sweep(path: Path, env: dict[str, str], log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([str(VENV_BIN / "sublayer"), "sweep", str(path), *extra],
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=path.parent)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The driver first (as on a crash), then everything it started (its own group)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    time.sleep(0.5)


def unkilled(args: argparse.Namespace, root: Path) -> float:
    folder = root / "reference"
    folder.mkdir()
    path = experiment(folder, trials=args.trials, steps=args.steps, every=args.every)
    start = time.monotonic()
    proc = sweep(path, environment(folder), folder / "sweep.log")
    code = proc.wait()
    elapsed = time.monotonic() - start
    kill_group(proc)
    if code != 0:
        raise SystemExit(f"the reference sweep failed ({code}):\n"
                         + (folder / "sweep.log").read_text(errors="replace")[-3000:])
    return elapsed


def soak(args: argparse.Namespace, root: Path) -> tuple[float, int, list[str], Path]:
    """(wall time of all attempts, kills done, notes, folder)."""
    folder = root / "soak"
    folder.mkdir()
    path = experiment(folder, trials=args.trials, steps=args.steps, every=args.every)
    env = environment(folder)
    log = folder / "sweep.log"
    rng = random.Random(args.seed)
    kills, notes, total = 0, [], 0.0
    extra: tuple[str, ...] = ()
    while True:
        start = time.monotonic()
        proc = sweep(path, env, log, *extra)
        if kills < args.kills:
            delay = rng.uniform(args.min_s, args.max_s)
            try:
                code: int | None = proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                code = None
            kill_group(proc)
            total += time.monotonic() - start
            if code is None:
                kills += 1
                started = (folder / "ray" / "soak.latest").is_file()
                notes.append(f"kill {kills:2d} after {delay:5.1f} s"
                             + ("" if started else " (before the sweep was recorded: start anew)"))
                extra = ("--resume",) if started else ()
                continue
        else:
            code = proc.wait()
            kill_group(proc)
            total += time.monotonic() - start
        if code == 0:
            return total, kills, notes, folder
        raise SystemExit(f"a sweep attempt exited with {code} (kills so far {kills}):\n"
                         + log.read_text(errors="replace")[-3000:])


def audit(folder: Path, trials: int) -> dict[str, int]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{folder}/mlflow.db")
    exp = client.get_experiment_by_name("soak")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    children = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
    parents = [r for r in runs if r.data.tags.get("sublayer.role") == "sweep"]
    names = collections.Counter(r.info.run_name for r in children)
    finished = {r.info.run_name for r in children if r.info.status == "FINISHED"
                and r.data.tags.get("sublayer.status") == "finished"}
    planned = {f"{o}@seed0" for o in ORDERS[:trials]}
    twice: collections.Counter[str] = collections.Counter()
    for run in children:
        for key in run.data.metrics:
            steps = collections.Counter(m.step for m in client.get_metric_history(
                run.info.run_id, key))
            twice[key] += sum(n - 1 for n in steps.values() if n > 1)
    if +twice:
        print(f"points logged twice, by metric: {dict(+twice)}")
    return {
        "finished trials lost": len(planned - finished),
        "duplicate runs": sum(n - 1 for n in names.values()) + max(0, len(parents) - 1),
        "runs left RUNNING": sum(r.info.status == "RUNNING" for r in runs),
        "evaluations logged twice": sum(twice.values()),
        "trial runs": len(children),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--trials", type=int, default=8, choices=range(1, len(ORDERS) + 1))
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=80)
    parser.add_argument("--min-s", type=float, default=8.0, help="earliest kill after a start")
    parser.add_argument("--max-s", type=float, default=40.0, help="latest kill after a start")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with tempfile.TemporaryDirectory(prefix="soak-", dir="/tmp") as tmp:
        root = Path(tmp)
        reference = unkilled(args, root)
        total, kills, notes, folder = soak(args, root)
        counts = audit(folder, args.trials)
    print(f"resume soak: {args.trials} trials x {args.steps} steps (eval every {args.every}), "
          f"kills at uniform({args.min_s:g}, {args.max_s:g}) s, seed {args.seed}")
    for note in notes:
        print(f"  {note}")
    print(f"kills done: {kills} of {args.kills}")
    for key, value in counts.items():
        print(f"{key}: {value}")
    print(f"unkilled sweep: {reference:.1f} s; killed and resumed: {total:.1f} s; "
          f"overhead of the kills: {total - reference:+.1f} s "
          f"({(total - reference) / max(kills, 1):+.1f} s per kill)")
    bad = {k: v for k, v in counts.items() if k != "trial runs" and v}
    if bad:
        print(f"FAILED: {bad}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
