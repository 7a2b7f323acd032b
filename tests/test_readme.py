"""Every command of the README's ```bash blocks runs as written, in a fresh clone.

The clone sits in a temporary folder beside a ``shared/data`` link to the corpora (the
layout the README assumes), with ``.venv`` linked to this checkout's virtualenv, so
``source .venv/bin/activate`` and ``export SUBLAYER_DATA_DIR=...`` work as written.
Each command runs with bash after the README's setup lines (``source``/``export``).
Commands that need a cluster, a server that runs until stopped or a long run are
listed in EXCLUDED with the reason; every other command (and ``--help`` of every
``sublayer`` subcommand the README uses) must exit 0. A new README command is run as
soon as it is written; an excluded command that left the README fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent
DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data")).resolve()

EXCLUDED = {
    "make install": "installs into .venv (network, minutes); CI runs it (.ci/run)",
    "make install TORCH_INDEX=https://download.pytorch.org/whl/cpu": "downloads torch",
    "make run": "a 3-5 minute sweep; tests/search/test_sweep_local.py runs sweeps",
    "make test": "the whole test suite, this test included",
    "make ui": "a server that runs until stopped; tests/search/test_ui*.py",
    "sublayer ui --tracking-uri sqlite:///mlflow.db": "a server that runs until stopped; "
                                                      "tests/search/test_ui*.py",
    "sublayer sweep configs/quickstart.yaml": "a 3-5 minute sweep; tests/search/test_sweep_*",
    "sublayer sweep configs/press2020_sandwich.yaml --address ray://head:10001 "
    "--tracking-uri http://mlflow:5000": "needs a Ray cluster and an MLflow server",
    "sublayer sweep configs/quickstart.yaml --resume": "needs an interrupted sweep; "
                                                       "tests/search/test_resume.py",
    "sublayer train --order 'sandwich(4,2)' --data tinyshakespeare --steps 200":
        "a training run of minutes; tests/models/test_train.py trains",
    "sublayer analyze --experiment quickstart --tracking-uri sqlite:///mlflow.db "
    "--out reports/quickstart": "needs the quickstart sweep of `make run`",
    "sublayer analyze --experiment NAME --out DIR": "NAME and DIR are placeholders",
    "sublayer replay quickstart --tracking-uri sqlite:///mlflow.db --scheduler asha "
    "--grace-period 1 --reduction-factor 3": "needs the quickstart sweep of `make run`",
    "sublayer replay quickstart --tracking-uri sqlite:///mlflow.db --grid --figure "
    "reports/replay.png": "needs the quickstart sweep of `make run`",
    "sublayer analyze --experiment A --experiment B --out DIR": "placeholders",
    "sublayer sweep configs/mini_press2020.yaml": "the 68-minute programme it describes",
    "sublayer analyze --experiment mini_press2020 --study replication --tracking-uri "
    "sqlite:///mlflow.db --out reports/mine": "needs the programme's sweep",
    "sublayer export mini_press2020 --tracking-uri sqlite:///mlflow.db --out my_study":
        "needs the programme's sweep; tests/search/test_export_cli.py exports a real sweep",
    "make notebooks": "executes every notebook (minutes); tests/analysis/test_notebooks.py",
    "make notebooks EXPERIMENT=quickstart TRACKING_URI=sqlite:///$PWD/mlflow.db":
        "needs the quickstart sweep of `make run`; executes every notebook",
}
SETUP = re.compile(r"^(source |export )")


def readme_commands(text: str) -> list[str]:
    """The command lines of the ```bash blocks, comments stripped (`#` after a space)."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_readme_commands_are_found() -> None:
    commands = readme_commands((REPO / "README.md").read_text())
    assert "sublayer sweep configs/quickstart.yaml --dry-run" in commands
    assert any(SETUP.match(c) for c in commands)
    stale = sorted(set(EXCLUDED) - set(commands))
    assert not stale, f"EXCLUDED names commands the README no longer has: {stale}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    work = root / "main"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(work)], check=True,
                   timeout=120)
    # the working tree's README and configs, committed or not, are what is checked
    for rel in ("README.md", "Makefile"):
        (work / rel).write_text((REPO / rel).read_text())
    (root / "shared").mkdir()
    (root / "shared" / "data").symlink_to(DATA)
    (work / ".venv").symlink_to(VENV)
    return work


def _run(command: str, setup: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUBLAYER_DATA_DIR", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(home), MLFLOW_DISABLE_TELEMETRY="true", RAY_USAGE_STATS_ENABLED="0",
               PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                    if Path(p).resolve() != (VENV / "bin").resolve()))
    script = "set -e\n" + "\n".join(setup) + "\n" + command + "\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_readme_commands_run_as_written(clone: Path, tmp_path: Path) -> None:
    commands = readme_commands((clone / "README.md").read_text())
    setup = [c for c in commands if SETUP.match(c)]
    to_run = [c for c in commands if not SETUP.match(c) and c not in EXCLUDED]
    subcommands = sorted({c.split()[1] for c in commands if c.startswith("sublayer ")
                          and len(c.split()) > 1 and not c.split()[1].startswith("-")})
    to_run += [f"sublayer {sub} --help" for sub in subcommands] + ["sublayer spaces sample --help"]
    assert "sublayer --help" in to_run and len(to_run) >= 8, to_run
    failed = []
    for command in to_run:
        done = _run(command, setup, clone, tmp_path)
        if done.returncode != 0:
            failed.append(f"$ {command}\n(exit {done.returncode})\n{done.stdout[-1500:]}"
                          f"{done.stderr[-1500:]}")
    assert not failed, "README commands that fail as written:\n\n" + "\n\n".join(failed)
    assert (clone / "reports" / "paper").is_dir()  # the paper analysis wrote its report
