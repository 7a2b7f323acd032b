"""Wall time of ``sublayer sweep FILE --dry-run`` on the paper-scale experiment files.

Planning a sweep (validate the file, enumerate the space, count parameters and FLOPs,
print the trial table) should feel instant. Each file is planned ``--repeat`` times in a
fresh ``sublayer`` process (interpreter start and imports included, as a user sees it);
the median and range are reported against the target, with the heavy libraries that the
process imported (there should be none: torch, ray, mlflow, matplotlib, scipy, pandas).

    .venv/bin/python benchmarks/plan_time.py
    .venv/bin/python benchmarks/plan_time.py --repeat 9 configs/press2020_sandwich.yaml

Target: < 1.5 s per dry run (issue 16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER_SCALE = ("press2020_sandwich.yaml", "press2020_permutations.yaml",
               "press2020_budgeted.yaml", "press2020_translation.yaml", "iot_iwslt14.yaml")
HEAVY = ("torch", "ray", "mlflow", "matplotlib", "scipy", "pandas", "optuna")
TARGET_S = 1.5
_PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['sublayer', 'sweep', sys.argv[1], '--dry-run']\n"
    "try:\n"
    "    runpy.run_module('sublayer_search.search.cli.main', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = sorted(m for m in {heavy!r} if m in sys.modules)\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: bytecode cached after once
    env.setdefault("HOME", tempfile.mkdtemp(prefix="plan-time-home-"))
    env.setdefault("SUBLAYER_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    return env


def time_file(path: Path, repeat: int) -> tuple[list[float], str]:
    """Wall times of ``repeat`` fresh dry runs of ``path`` (plus the heavy modules seen)."""
    cli = Path(sys.executable).with_name("sublayer")
    times, heavy = [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run([str(cli), "sweep", str(path), "--dry-run"], env=_env(),
                              capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{path}: exit {proc.returncode}\n{proc.stderr}")
    probe = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), str(path)],
                           env=_env(), capture_output=True, text=True)
    for line in probe.stderr.splitlines():
        if line.startswith("HEAVY="):
            heavy = line.removeprefix("HEAVY=")
    return times, heavy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path,
                        default=[ROOT / "configs" / name for name in PAPER_SCALE])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'file':32s} {'median s':>9s} {'min':>6s} {'max':>6s}  target < {TARGET_S} s"
          "  heavy imports")
    missed = 0
    for path in args.files:
        times, heavy = time_file(path, args.repeat)
        med = statistics.median(times)
        missed += med >= TARGET_S
        print(f"{path.name:32s} {med:9.2f} {min(times):6.2f} {max(times):6.2f}  "
              f"{'met' if med < TARGET_S else 'MISSED':>10s}  {heavy or '-'}")
    print(f"{len(args.files) - missed}/{len(args.files)} files under {TARGET_S} s "
          f"(median of {args.repeat} fresh processes each; python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
