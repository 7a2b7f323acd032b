"""Shared test setup: quiet, single-threaded, offline-friendly defaults, and a clean house.

Hygiene: the suite writes nothing into the working tree and leaves nothing in the temp
folder. Every test runs in a fresh current folder of its own (MLflow's default artifact
root ``./mlruns`` and the like land there); everything that asks ``tempfile`` (Ray's
session folders, torch's compile cache, MLflow, the product) gets this session's private
``TMPDIR``, removed when the run ends; pytest keeps the ``tmp_path`` folders of failed
tests only (pyproject). At the end the run fails if it left files in the working tree's
output folders (:data:`OUTPUTS`); files another process wrote there meanwhile (a user's
own command) are named, not counted (tests/hygiene.py tells them apart).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# pytest's own tmp_path root stays where it was (short: Ray's socket paths are limited)
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
# "/tmp/slt-XXXXXXXX": short enough for the folders Ray puts its sockets in
SESSION_TMP = Path(tempfile.mkdtemp(prefix="slt-", dir="/tmp" if os.path.isdir("/tmp") else None))
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = None  # re-read TMPDIR
if "RAY_AUTH_MODE" not in os.environ:
    # Ray token auth, as a local sweep uses it; the token is a private file of this test
    # session, never the developer's ~/.ray/auth_token. (helpers.subprocess_env says why
    # its `ray start` subprocesses keep `disabled`.)
    os.environ["RAY_AUTH_MODE"] = "token"
    if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
        _token_dir = Path(tempfile.mkdtemp(prefix="sublayer-test-token-"))  # 0700
        (_token_dir / "auth_token").write_text(secrets.token_hex(32))
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(_token_dir / "auth_token")
        atexit.register(shutil.rmtree, _token_dir, True)
atexit.register(shutil.rmtree, SESSION_TMP, True)  # also after a crash of the session
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
from hygiene import OUTPUTS, TreeWatch, fail_if_left, note_worker, tree_outputs  # noqa: E402,F401

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data"))
os.environ["SUBLAYER_DATA_DIR"] = str(SHARED_DATA)

try:  # torch is optional for the pure-Python spaces tests
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass


WATCH = TreeWatch(REPO).install()
"""The session's own writes into the working tree's output folders (tests/hygiene.py)."""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # the private folders of local Rays whose driver a test killed (SIGKILL tests): the
    # product removes them on its next start; the suite does it now, the same way
    from sublayer_search.search.run.local_ray import remove_stale

    for base in {os.environ.get("RAY_TMPDIR") or "/tmp", "/tmp"}:
        remove_stale(base)
    fail_if_left(session, WATCH)  # only what the tests wrote: a user's own command may write


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    note_worker(node)  # a pytest-xdist worker's verdict (make test runs two)


LONGEST = (
    "test_first_hour_walk.py", "search/test_whole_trials.py", "search/test_postgres_store.py",
    "search/test_sweep_local.py", "search/test_multiworker.py", "test_recipes.py",
    "test_readme.py", "search/test_trustworthy_sweeps.py", "test_gpu_check.py",
    "search/test_cluster.py", "search/test_mlflow_server.py", "search/test_fetch.py",
)
"""The files of ``make test`` that take longest (summed over their tests, measured on a
2-core machine), longest first: a worker takes them first (longest-first scheduling)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``), the longest files go first, then the other files
    with end-to-end (``slow``) tests: a long file started last would keep one worker busy
    alone at the end (each file stays on one worker: ``--dist loadfile``)."""
    if not hasattr(config, "workerinput"):
        return
    here = Path(__file__).parent
    missing = [name for name in LONGEST if not (here / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONGEST names missing files: {missing}")
    rank = {here / name: i for i, name in enumerate(LONGEST)}
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def key(item: pytest.Item) -> tuple[int, int]:  # stable: a file's tests stay together
        return (rank.get(item.path, len(rank)), item.path not in slow)

    items.sort(key=key)


def _in_fresh_folder(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        folder = factory.mktemp(name)
        mp.chdir(folder)
        yield folder


# Each test, and each module's and the session's fixtures (a module-scoped fixture that
# runs a sweep runs before any test's own folder exists), start in a fresh empty folder.
@pytest.fixture(autouse=True, scope="session")
def _session_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _in_fresh_folder(tmp_path_factory, "session-cwd")


@pytest.fixture(autouse=True, scope="module")
def _module_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _in_fresh_folder(tmp_path_factory, "module-cwd")


@pytest.fixture(autouse=True)
def _own_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _in_fresh_folder(tmp_path_factory, "cwd")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real corpora (``SUBLAYER_DATA_DIR``, ``../shared/data`` by default)."""
    assert SHARED_DATA.is_dir(), f"corpora folder {SHARED_DATA} is missing"
    return SHARED_DATA


@pytest.fixture(scope="session")
def papers_dir() -> Path:
    path = REPO.parent / "shared" / "papers"
    assert path.is_dir(), f"{path} is missing"
    return path
