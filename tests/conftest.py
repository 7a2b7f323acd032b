"""Shared test setup: quiet, single-threaded, offline-friendly defaults."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
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
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data"))
os.environ["SUBLAYER_DATA_DIR"] = str(SHARED_DATA)

try:  # torch is optional for the pure-Python spaces tests
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass


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
