"""A new user's first hour, run as written: every ``make`` target the README, CONTRIBUTING or
docs/ name, and the documented commands that need the quickstart sweep of ``make run``.

The walk happens in a fresh clone laid out as a user's (``main/`` beside ``shared/data``,
so the Makefile finds the local corpora as it does here), with ``.venv`` linked to this
checkout's virtualenv (``make install`` finds it up to date: CI's ``.ci/run`` runs the
real install) and a fresh HOME. ``make test`` and ``make test-fast`` are run as written
with ``PYTEST_ADDOPTS`` naming one small test file: the targets' own recipes (system tools,
then pytest), not the whole suite inside itself. Each step's wall time is printed
(``pytest -s`` shows them).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from clone_helpers import user_clone
from test_readme import AFTER_MAKE_RUN, DOCS, EXCLUDED, all_commands

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent
DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
TARGET = re.compile(r"`make ([a-z][a-z-]*)\b")


def documented_targets() -> set[str]:
    """The make targets the README, CONTRIBUTING and docs/ name (in commands or prose)."""
    found: set[str] = set()
    for name in (*DOCS, "CONTRIBUTING.md"):
        text = (REPO / name).read_text()
        found.update(TARGET.findall(text))
        found.update(c.split()[1] for c in all_commands(REPO).get(name, [])
                     if c.startswith("make ") and len(c.split()) > 1)
    return found


WALKED = {"install", "run", "notebooks", "ui", "lint", "test", "test-fast", "test-soak"}
"""The targets this module runs; a documented target missing here fails the first test."""


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    return user_clone(REPO, tmp_path_factory.mktemp("walk"), VENV, DATA)


def _make(work: Path, env: dict[str, str], *args: str, timeout: float = 900,
          **extra: str) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    done = subprocess.run(["make", *args], cwd=work, env={**env, **extra}, capture_output=True,
                          text=True, timeout=timeout)
    print(f"\nwalk: make {' '.join(args)}: exit {done.returncode} in "
          f"{time.monotonic() - start:.0f} s")
    assert done.returncode == 0, f"make {' '.join(args)}\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    return done


def test_every_documented_target_is_walked() -> None:
    named = documented_targets()
    assert {"install", "run", "test", "notebooks"} <= named, named
    assert named <= WALKED, f"documented but not run by this module: {sorted(named - WALKED)}"


def test_make_install_finds_the_virtualenv_up_to_date(walk) -> None:
    work, env = walk
    done = _make(work, env, "install")
    assert "[3/4]" not in done.stdout, done.stdout  # nothing reinstalled


@pytest.fixture(scope="module")
def quickstart(walk) -> subprocess.CompletedProcess[str]:
    """``make run``: the quickstart sweep, trained for real, tracked in ./mlflow.db."""
    work, env = walk
    return _make(work, env, "run", timeout=1800)


def test_make_run_trains_the_quickstart(walk, quickstart) -> None:
    work, _ = walk
    out = quickstart.stdout + quickstart.stderr
    assert "sweep 10/10 done: 10 finished" in out, out[-3000:]
    assert (work / "mlflow.db").is_file()
    elapsed = re.findall(r"elapsed (\d+):(\d\d)", out)
    assert elapsed  # the progress line's wall time


def test_the_commands_after_make_run_run_as_written(walk, quickstart) -> None:
    """The documented commands that need the quickstart sweep (test_readme.py leaves them
    to this module), each as written, after the README's setup lines."""
    work, env = walk
    by_file = all_commands(work)
    setup = [c for c in by_file["README.md"] if c.startswith(("source ", "export "))]
    commands = [c for c, why in EXCLUDED.items() if why == AFTER_MAKE_RUN]
    assert len(commands) >= 4, commands
    everywhere = {c for found in by_file.values() for c in found}
    assert set(commands) <= everywhere
    failed = []
    for command in commands:
        start = time.monotonic()
        done = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(setup) + "\n" + command],
                              cwd=work, env=env, capture_output=True, text=True, timeout=900)
        print(f"\nwalk: {command}: exit {done.returncode} in {time.monotonic() - start:.0f} s")
        if done.returncode != 0:
            failed.append(f"$ {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    assert not failed, "\n\n".join(failed)
    assert (work / "reports" / "quickstart" / "report.html").is_file()
    assert (work / "reports" / "replay.png").is_file()
    executed = work / "reports" / "notebooks" / "01_distribution_study.ipynb"
    assert "sweep: quickstart" in executed.read_text()


def test_make_notebooks_runs_as_written(walk, quickstart) -> None:
    work, env = walk
    done = _make(work, env, "notebooks")
    assert "executed notebooks: reports/notebooks/ (experiment: quickstart)" in done.stdout
    names = sorted(p.name for p in (work / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in (work / "reports" / "notebooks").glob("*.ipynb")) == names
    assert not [p for p in (work / "notebooks").iterdir() if "ipc" in p.name]  # no sockets left


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_make_ui_serves_the_runs(walk, quickstart) -> None:
    """``make ui`` on port 5000 as written (another port only when 5000 is taken here)."""
    work, env = walk
    args = ["make", "ui"]
    if not _free(5000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.append(f"PORT={s.getsockname()[1]}")
    proc = subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            url = re.search(r"MLflow UI on (http://127\.0\.0\.1:\d+)", line)  # ours, not uvicorn's
            if url:
                with urllib.request.urlopen(url.group(1), timeout=30) as page:
                    assert page.status == 200
                break
        else:
            pytest.fail("make ui ended without a URL:\n" + "".join(seen))
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not any("Registry store URI not provided" in line for line in seen), seen


def test_make_lint_is_clean(walk) -> None:
    """ruff and mypy over every package, as CONTRIBUTING asks before a change is sent."""
    work, env = walk
    done = _make(work, env, "lint", timeout=1200)
    assert "Success: no issues found" in done.stdout, done.stdout[-3000:]
    checked = int(done.stdout.split("Success: no issues found in ")[1].split()[0])
    assert checked >= len(list((work / "models").rglob("*.py")))  # it saw the packages


@pytest.mark.parametrize("target", ["test-fast", "test"])
def test_make_test_targets_run_their_recipes(walk, target: str) -> None:
    work, env = walk
    done = _make(work, env, target, PYTEST_ADDOPTS="tests/spaces/test_cost.py -p no:cacheprovider")
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-2000:]
    assert "test-deps:" in done.stdout  # the system tools were checked first
    assert ('-m "not slow"' in done.stdout) == (target == "test-fast")
    assert ('-m "not soak"' in done.stdout) == (target == "test")
    assert "-n 2 --dist loadfile" in done.stdout  # two pytest-xdist workers (JOBS)


SOAK = (
    "test_a_killed_sweep_resumes_from_object_storage_alone",
    "test_a_killed_worker_restarts_from_the_checkpoint",
    "test_a_trial_on_a_lost_node_continues_from_object_storage",
    "test_an_outage_in_stage_one_stops_it_and_resume_loses_no_evaluation",
    "test_ctrl_c_on_make_run_prints_one_resume_command_that_works",
    "test_resume_after_sigkill_finishes_the_sweep_without_duplicates",
    "test_resume_when_the_snapshot_names_a_checkpoint_ray_had_deleted",
    "test_run_interrupt_run_resume_run_gives_the_verdicts_of_one_clean_sweep",
    "test_mlflow_outage_is_buffered_and_resume_completes_training_and_logging",
    "test_a_driver_killed_mid_outage_keeps_its_backlog_on_disk_and_resume_writes_it",
    "test_trial_on_a_lost_worker_node_continues_on_the_other_node",
    "test_the_sweep_starts_trials_in_the_priors_order_and_resume_keeps_it",
)
"""The tests marked ``soak``: MLflow outages, lost nodes and workers, killed drivers and
sweeps resumed, minutes each."""


def test_make_test_soak_runs_what_make_test_leaves_out(walk) -> None:
    """`make test-soak` selects exactly the soak tests `make test` deselects (listed here,
    not run: each takes minutes, and the full suite ran them where this was written)."""
    work, env = walk
    done = _make(work, env, "test-soak", PYTEST_ADDOPTS="--collect-only -p no:cacheprovider")
    listed = sorted(line for line in done.stdout.splitlines() if "::test_" in line)
    assert '-m soak' in done.stdout and listed, done.stdout[-2000:]
    assert sorted(line.split("::")[1] for line in listed) == sorted(SOAK), listed
    assert {line.split("::")[0] for line in listed} == {f"tests/search/{f}.py" for f in (
        "test_make_run_resume", "test_multiworker", "test_node_loss", "test_object_storage",
        "test_outage", "test_outage_oneshot", "test_prior_queue_sweep", "test_replays_walk",
        "test_resume")}, listed
