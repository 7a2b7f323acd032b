"""Issue 30, friction 6: a sweep says what it is doing at once, and MLflow and Jupyter
keep their noise to themselves."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from sublayer_search.search.cli import main as cli
from sublayer_search.search.run.progress import SweepProgress, starting_line

REPO = Path(__file__).resolve().parents[2]
NOTES = logging.getLogger("sublayer_search.notes")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def notes_reset():
    handlers, level = list(NOTES.handlers), NOTES.level
    yield
    NOTES.handlers[:], NOTES.level = handlers, level


def _parallel_files(folder: Path) -> dict[str, str]:
    files = {}
    for split, n in (("train", 40), ("valid", 4), ("test", 4)):
        for side, word in (("src", "hallo welt"), ("tgt", "hello world")):
            path = folder / f"{split}.{side}"
            path.write_text("".join(f"{word} {i}\n" for i in range(n)))
            files[f"{split}_{side}"] = str(path)
    return files


def test_a_first_bpe_build_is_announced_on_a_terminal(tmp_path, notes_reset, monkeypatch):
    from sublayer_search.models.data.parallel import ParallelDataConfig, load_parallel

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    cli._say_slow_steps()
    cfg = ParallelDataConfig(name="parallel-files", vocab_size=40, cache_dir=str(tmp_path / "c"),
                             **_parallel_files(tmp_path))
    load_parallel(cfg)
    assert terminal.getvalue().startswith("sublayer: building the parallel-files BPE "
                                          "vocabulary and token cache in "), terminal.getvalue()
    load_parallel(cfg)  # the second time: from the cache, silently
    assert terminal.getvalue().count("sublayer: building") == 1


def test_off_a_terminal_the_notes_stay_quiet(notes_reset, monkeypatch):
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    cli._say_slow_steps()
    NOTES.info("building something")
    assert quiet.getvalue() == ""


def test_the_first_progress_line_comes_at_once():
    out = io.StringIO()
    SweepProgress(total=4, metric="val_bpc", stream=out, tty=False).setup()
    assert out.getvalue().startswith("sweep 0/4 done: 0 finished, 0 running, 4 pending")
    line = starting_line(10, "val_bpc")
    assert line.startswith("sweep 0/10 done:") and line.endswith("starting Ray and MLflow")


def test_mlflows_table_creation_lines_are_not_shown(tmp_path):
    code = ("from sublayer_search.search.cli.main import main; "
            "main(['spaces', 'sample', 'sandwich', 'n=2', 'k=[1]']); "
            "from mlflow.tracking import MlflowClient; "
            f"MlflowClient('sqlite:///{tmp_path}/new.db').search_experiments()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new.db").is_file()
    assert "Creating initial MLflow database tables" not in done.stderr, done.stderr
    assert "alembic" not in done.stderr


def test_make_notebooks_runs_kernels_over_ipc():
    """ipykernel warns that TCP is unencrypted, once per notebook; IPC needs no warning."""
    assert "--KernelManager.transport=ipc" in (REPO / "Makefile").read_text()
