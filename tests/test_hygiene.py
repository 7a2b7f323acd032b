"""The suite's own hygiene: nothing in the working tree, nothing left in the temp folder.

tests/conftest.py runs each test in a fresh folder, gives the session a private TMPDIR
(removed at the end) and fails the run when the working tree's output folders gained
files; these tests check that machinery, and that the product cleans the private Ray
folders a killed sweep leaves behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sublayer_search.search.run import local_ray

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def conftest(request: pytest.FixtureRequest):
    """tests/conftest.py as pytest loaded it (a plain ``import conftest`` finds whichever
    folder's conftest was imported last: tests/search/ and tests/analysis/ have one too)."""
    path = REPO / "tests" / "conftest.py"
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == str(path):
            return plugin
    raise AssertionError(f"{path} is not loaded as a plugin")


def test_each_test_runs_outside_the_working_tree() -> None:
    cwd = Path.cwd().resolve()
    assert REPO not in (cwd, *cwd.parents)
    assert list(cwd.iterdir()) == []


def test_temp_files_go_to_the_sessions_private_folder(conftest) -> None:
    assert os.environ["TMPDIR"] == str(conftest.SESSION_TMP)
    assert Path(tempfile.gettempdir()) == conftest.SESSION_TMP


def test_the_output_check_sees_a_new_run(tmp_path: Path, conftest) -> None:
    before = conftest.tree_outputs(tmp_path)
    (tmp_path / "mlruns" / "1" / "abc").mkdir(parents=True)
    (tmp_path / "mlruns" / "1" / "abc" / "trials.csv").write_text("x")
    (tmp_path / "notes.txt").write_text("not an output")
    assert conftest.tree_outputs(tmp_path) - before == {
        "mlruns/", "mlruns/1", "mlruns/1/abc", "mlruns/1/abc/trials.csv"}


def test_a_dry_run_writes_nothing_in_its_folder(tmp_path: Path) -> None:
    """``sublayer sweep --dry-run`` run in an empty folder leaves it empty."""
    sublayer = Path(sys.executable).parent / "sublayer"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([str(sublayer), "sweep", str(REPO / "configs" / "quickstart.yaml"),
                           "--dry-run"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_sweeps_ray_folder_is_removed_by_the_next_start(tmp_path: Path) -> None:
    dead = tmp_path / "sublayer-ray-dead1234"
    (dead / "ray").mkdir(parents=True)
    (dead / local_ray.OWNER_FILE).write_text(str(_dead_pid()))
    old_style = tmp_path / "sublayer-ray-old12345"  # no pid file: Ray's session name has it
    (old_style / "ray" / f"session_2026-01-01_00-00-00_000001_{_dead_pid()}").mkdir(parents=True)
    alive = tmp_path / "sublayer-ray-live1234"
    alive.mkdir()
    (alive / local_ray.OWNER_FILE).write_text(str(os.getppid()))
    fresh = tmp_path / "sublayer-ray-fresh123"  # names no driver yet: perhaps being made
    fresh.mkdir()
    unowned = tmp_path / "sublayer-ray-unowned1"
    unowned.mkdir()
    past = time.time() - local_ray.UNOWNED_GRACE_S - 60
    os.utime(unowned, (past, past))
    other = tmp_path / "something-else"
    other.mkdir()
    removed = local_ray.remove_stale(tmp_path)
    assert sorted(removed) == sorted([dead, old_style, unowned])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "something-else", "sublayer-ray-fresh123", "sublayer-ray-live1234"]


@pytest.mark.slow
def test_a_local_ray_cleans_a_dead_drivers_folder_and_its_own(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="r-", dir="/tmp"))  # short: Ray's socket paths
    try:
        monkeypatch.setenv("RAY_TMPDIR", str(base))
        dead = base / "sublayer-ray-dead1234"
        dead.mkdir()
        (dead / local_ray.OWNER_FILE).write_text(str(_dead_pid()))
        folder = local_ray.start_local_ray(num_cpus=1, num_gpus=0)
        try:
            assert folder.parent == base and not dead.exists()
            assert (folder / local_ray.OWNER_FILE).read_text() == str(os.getpid())
        finally:
            local_ray.shutdown_ray()
        assert list(base.iterdir()) == []
    finally:
        import shutil
        shutil.rmtree(base, ignore_errors=True)


_INNER_CONFTEST = '''
import os
from pathlib import Path

import pytest
from hygiene import TreeWatch, fail_if_left, note_worker

WATCH = TreeWatch(Path(os.environ["HYGIENE_ROOT"])).install()


def pytest_sessionfinish(session, exitstatus):
    fail_if_left(session, WATCH)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    note_worker(node)
'''


def _inner_session(tmp_path: Path, test_source: str,
                   workers: int = 0) -> tuple[subprocess.Popen[str], Path]:
    """A pytest session (a subprocess) over one test file, watching ``tmp_path/tree`` with the
    suite's own :class:`hygiene.TreeWatch`, as tests/conftest.py watches the checkout; with
    ``workers``, under pytest-xdist as ``make test`` runs it."""
    tree, suite = tmp_path / "tree", tmp_path / "suite"
    (tree / "reports").mkdir(parents=True)
    suite.mkdir()
    (suite / "conftest.py").write_text(_INNER_CONFTEST)
    (suite / "test_inner.py").write_text(test_source)
    env = {**os.environ, "HYGIENE_ROOT": str(tree),
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    xdist = ["-n", str(workers)] if workers else []
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *xdist, "--rootdir", str(suite), str(suite)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, tree


def _wait_for(path: Path, proc: subprocess.Popen[str], limit: float = 120) -> None:
    """Until ``path`` exists (the inner session got there), or the session ended."""
    deadline = time.monotonic() + limit
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_another_process_writes_meanwhile_does_not_fail_the_suite(tmp_path,
                                                                         workers: int) -> None:
    """A user runs ``sublayer replay … --figure reports/replay.png`` while ``make test`` runs:
    the suite names the file as another process's and still passes."""
    proc, tree = _inner_session(tmp_path, f'''
import time
from pathlib import Path

def test_waits_for_the_user():
    Path({str(tmp_path / "ready")!r}).write_text("")
    while not Path({str(tmp_path / "go")!r}).exists():
        time.sleep(0.05)
''', workers)
    _wait_for(tmp_path / "ready", proc)
    (tree / "reports" / "replay.png").write_bytes(b"\x89PNG")  # this process: "the user"
    (tmp_path / "go").write_text("")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "1 passed" in out and "HYGIENE" not in out
    assert "written by another process" in out and "reports/replay.png" in out


CHILD = "open('reports/left.csv', 'w').write('x')"


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("how", ["in-process", "subprocess in the tree"])
def test_a_file_a_test_writes_fails_the_suite(tmp_path, how: str, workers: int) -> None:
    tree = tmp_path / "tree"
    write = (f'Path({str(tree / "reports" / "left.csv")!r}).write_text("x")'
             if how == "in-process" else
             f"subprocess.run([sys.executable, '-c', {CHILD!r}], cwd={str(tree)!r}, check=True)")
    proc, _ = _inner_session(tmp_path, f'''
import subprocess
import sys
from pathlib import Path

def test_writes_into_the_tree():
    {write}
''', workers)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "1 passed" in out
    assert "HYGIENE: the tests left 1 path(s)" in out and "reports/left.csv" in out
