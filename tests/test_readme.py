"""Every command of the ```bash blocks of README.md and docs/*.md runs as written, in a fresh clone.

The clone sits in a temporary folder, with ``.venv`` linked to this checkout's
virtualenv, so ``source .venv/bin/activate`` works as written; HOME is a fresh folder
(nothing cached, no corpus downloaded yet) holding ``corpora``, the folder of local
corpora that docs/data.md names in ``SUBLAYER_DATA_DIR``. Each command runs with bash
after the setup lines (``source``/``export``) of the README and of its own file.
Commands that need a cluster, a server that runs until stopped or a long run are
listed in EXCLUDED with the reason; every other command (and ``--help`` of every
``sublayer`` subcommand the files use, and of every benchmark script an excluded
command runs) must exit 0. A command whose ```bash block is followed at once by a
```text block must print those lines. A new command is run as soon as it is written;
an excluded command that left the files fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from clone_helpers import fresh_clone

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent
DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data")).resolve()

AFTER_MAKE_RUN = "needs the quickstart sweep of `make run`: tests/test_first_hour_walk.py"
"""The reason of the commands that tests/test_first_hour_walk.py runs after ``make run``."""

EXCLUDED = {
    "make install": "installs into .venv (network, minutes); CI runs it (.ci/run)",
    "make install TORCH_INDEX=https://download.pytorch.org/whl/cpu": "downloads torch",
    "make run": "a sweep of minutes; tests/test_first_hour_walk.py runs it as written",
    "make test": "the whole suite; tests/test_first_hour_walk.py runs its recipe",
    "make test-fast": "the suite without the slow tests; tests/test_first_hour_walk.py runs "
                      "its recipe",
    "make ui": "a server that runs until stopped; tests/test_first_hour_walk.py starts it",
    "sublayer ui --tracking-uri sqlite:///mlflow.db": "a server that runs until stopped; "
                                                      "tests/search/test_ui*.py",
    "sublayer sweep configs/quickstart.yaml": "the sweep `make run` runs; tests/test_first_hour_walk.py",
    "sublayer sweep configs/press2020_sandwich.yaml --address ray://head:10001 "
    "--tracking-uri http://mlflow:5000": "needs a Ray cluster and an MLflow server",
    "sublayer sweep configs/quickstart.yaml --resume": "needs an interrupted sweep; "
                                                       "tests/search/test_resume.py",
    "sublayer train --order 'sandwich(4,2)' --data tinyshakespeare --steps 200":
        "a training run of minutes; tests/models/test_train.py trains",
    "sublayer analyze --experiment quickstart --tracking-uri sqlite:///mlflow.db "
    "--out reports/quickstart": AFTER_MAKE_RUN,
    "sublayer analyze --experiment NAME --out DIR": "NAME and DIR are placeholders",
    "sublayer replay quickstart --tracking-uri sqlite:///mlflow.db --scheduler asha "
    "--grace-period 1 --reduction-factor 3": AFTER_MAKE_RUN,
    "sublayer replay quickstart --tracking-uri sqlite:///mlflow.db --grid --figure "
    "reports/replay.png": AFTER_MAKE_RUN,
    "sublayer analyze --experiment A --experiment B --out DIR": "placeholders",
    "sublayer export NAME --tracking-uri sqlite:///mlflow.db --out DIR": "placeholders",
    "python benchmarks/oneshot_ranking.py": "trains a supernet (minutes)",
    "python benchmarks/model_throughput.py --rounds 9 --steps 3 --guidance \"\"":
        "a benchmark of minutes; tests/models/test_benchmark_throughput.py runs it small",
    "python benchmarks/seq2seq_throughput.py --rounds 5 --steps 2 --iot 2 3":
        "a benchmark of minutes",
    "python benchmarks/profile_lm.py --model both": "a profile of minutes",
    "python benchmarks/cpu_gemm.py": "a benchmark of minutes",
    "python benchmarks/lm_mfu.py --cpu-mirror": "about a minute; "
                                                "tests/models/test_benchmark_lm_mfu.py runs it",
    "python benchmarks/searcher_oracle.py --seeds 100 --held-out heldout_budget32 "
    "--held-out heldout_wikichars": "a benchmark of about a minute; tests/search/test_prior.py "
                                    "runs it on one table",
    "python benchmarks/multi_objective.py --seed 0": "a real 8-trial sweep (about 2 min); "
                                                     "tests/search/test_multi_objective.py "
                                                     "runs a real NSGA-II sweep",
    "python benchmarks/scale.py --trials 100 1000 --stores sqlite postgresql":
        "four Ray sweeps of 100 and 1,000 trials and their analysis (about 15 min); "
        "tests/search/test_history_requests.py checks the bulk reads",
    "python benchmarks/scale.py --trials 5000 --stores sqlite --keep":
        "a Ray sweep of 5,000 trials and its analysis (about 22 min)",
    "python benchmarks/scale.py --reanalyse /tmp/scale-sqlite-XXXX":
        "needs the folder a --keep run left",
    "python benchmarks/gpu_sharing.py --device cpu": "about a minute of Ray trials; "
                                                     "tests/search/test_benchmark_gpu_sharing.py",
    "sublayer sweep configs/mini_press2020.yaml": "the 68-minute programme it describes",
    "sublayer sweep configs/hybrid_mini.yaml": "the 15-minute study it describes; "
                                               "tests/search/test_hybrid_sweep.py runs a "
                                               "small hybrid sweep",
    "sublayer sweep configs/mad_proxy.yaml": "hours of CPU; tests/search/test_mad_sweep.py "
                                             "runs a proxy sweep at debug size",
    "sublayer analyze --paper hybrid_mini --proxy mad_proxy --out reports/hybrid_trust":
        "needs the proxy sweep; tests/search/test_mad_sweep.py weighs a debug one",
    "sublayer sweep configs/mad_mini_press2020.yaml": "hours of CPU; tests/search/"
                                                      "test_mad_sweep.py runs a proxy sweep",
    "sublayer analyze --paper mini_press2020 --study sweep --proxy mad_mini_press2020 "
    "--out reports/press_trust": "needs the proxy sweep; tests/search/test_mad_sweep.py "
                                 "weighs a debug one against hybrid_mini",
    "sublayer sweep configs/mad_debug.yaml": "a sweep; tests/search/test_mad_sweep.py runs "
                                             "this file's sweep (its tracking in a tmp dir)",
    ".venv/bin/python benchmarks/proxy_cost.py --orders '(sf)^2' --steps 5":
        "a benchmark of a minute; tests/models/test_mad.py trains the proxy",
    "sublayer analyze --experiment mini_press2020 --study replication --tracking-uri "
    "sqlite:///mlflow.db --out reports/mine": "needs the programme's sweep",
    "sublayer export mini_press2020 --tracking-uri sqlite:///mlflow.db --out my_study":
        "needs the programme's sweep; tests/search/test_export_cli.py exports a real sweep",
    "make notebooks": "executes every notebook; tests/test_first_hour_walk.py runs it",
    "make notebooks EXPERIMENT=quickstart TRACKING_URI=sqlite:///$PWD/mlflow.db":
        AFTER_MAKE_RUN,
}
SETUP = re.compile(r"^(source |export )")
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))
BENCHMARK = re.compile(r"^(?:\S+=\S+ )*python (benchmarks/\S+\.py)\b")


def readme_commands(text: str) -> list[str]:
    """The command lines of the ```bash blocks, comments stripped (`#` after a space)."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def shown_outputs(text: str) -> list[tuple[str, list[str]]]:
    """(command, lines) for each one-command ```bash block followed at once by ```text."""
    pairs = []
    for block, shown in re.findall(r"^```bash\n((?:(?!```).)*)^```\n\s*^```text\n(.*?)^```",
                                   text, flags=re.S | re.M):
        (command,) = readme_commands(f"```bash\n{block}```\n")
        pairs.append((command, [line.rstrip() for line in shown.splitlines()]))
    return pairs


def all_commands(root: Path) -> dict[str, list[str]]:
    """The commands of every documentation file, by file."""
    return {name: readme_commands((root / name).read_text()) for name in DOCS}


def test_readme_commands_are_found() -> None:
    by_file = all_commands(REPO)
    assert len(by_file) >= 8, sorted(by_file)  # README.md and the docs/ files
    assert all(by_file.values()), [name for name, found in by_file.items() if not found]
    commands = by_file["README.md"]
    assert "sublayer sweep configs/quickstart.yaml --dry-run" in commands
    assert any(SETUP.match(c) for c in commands)
    everywhere = {c for found in by_file.values() for c in found}
    stale = sorted(set(EXCLUDED) - everywhere)
    assert not stale, f"EXCLUDED names commands the documentation no longer has: {stale}"
    readme = (REPO / "README.md").read_text()
    assert [c for c, _ in shown_outputs(readme)] == [
        "sublayer sweep configs/quickstart.yaml --dry-run"]  # the worked example


def test_readme_is_short() -> None:
    """What it is, install/run/test, one worked example, the vocabulary, links."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)


def test_docs_speak_of_the_users_machine() -> None:
    """No particular machine's paths: the user has neither the shared corpora nor a
    local wheel folder."""
    for name in DOCS:
        text = (REPO / name).read_text()
        for words in ("/opt/wheels", "shared corpora", "this machine"):
            assert words not in text.lower(), (name, words)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_clone(REPO, tmp_path_factory.mktemp("readme") / "main", VENV)


def _run(command: str, setup: tuple[str, ...], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUBLAYER_DATA_DIR", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(home), MLFLOW_DISABLE_TELEMETRY="true", RAY_USAGE_STATS_ENABLED="0",
               PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                    if Path(p).resolve() != (VENV / "bin").resolve()))
    script = "set -e\n" + "\n".join(setup) + "\n" + command + "\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _contains(lines: list[str], shown: list[str]) -> bool:
    return any(lines[i:i + len(shown)] == shown for i in range(len(lines) - len(shown) + 1))


def test_readme_commands_run_as_written(clone: Path, tmp_path: Path) -> None:
    by_file = all_commands(clone)
    (tmp_path / "corpora").symlink_to(DATA)  # the local corpora of docs/data.md
    readme_setup = tuple(c for c in by_file["README.md"] if SETUP.match(c))
    shown = {c: lines for name in DOCS for c, lines in shown_outputs((clone / name).read_text())}
    to_run: list[tuple[str, tuple[str, ...]]] = []
    for commands in by_file.values():
        setup = (*readme_setup, *(c for c in commands if SETUP.match(c) and c not in readme_setup))
        to_run += [(c, setup) for c in commands if not SETUP.match(c) and c not in EXCLUDED]
    commands = [c for found in by_file.values() for c in found]
    subcommands = sorted({c.split()[1] for c in commands if c.startswith("sublayer ")
                          and len(c.split()) > 1 and not c.split()[1].startswith("-")})
    scripts = sorted({m.group(1) for c in EXCLUDED if c in commands
                      for m in [BENCHMARK.match(c)] if m})
    to_run += [(f"sublayer {sub} --help", readme_setup) for sub in subcommands]
    to_run += [("sublayer spaces sample --help", readme_setup)]
    to_run += [(f"python {script} --help", readme_setup) for script in scripts]
    assert ("sublayer --help", readme_setup) in to_run and len(to_run) >= 8, to_run
    assert len(scripts) >= 5, scripts  # the excluded benchmarks still take their flags
    failed = []
    unique = list(dict.fromkeys(to_run))
    helps = [(c, s) for c, s in unique if c.endswith(" --help")]
    in_order = [(c, s) for c, s in unique if not c.endswith(" --help")]
    with ThreadPoolExecutor(max_workers=1) as pool:  # read-only: beside the documented order
        asked = [(c, pool.submit(_run, c, s, clone, tmp_path)) for c, s in helps]
        ran = [(c, _run(c, s, clone, tmp_path)) for c, s in in_order]
        ran += [(c, future.result()) for c, future in asked]
    for command, done in ran:
        if done.returncode != 0:
            failed.append(f"$ {command}\n(exit {done.returncode})\n{done.stdout[-1500:]}"
                          f"{done.stderr[-1500:]}")
        elif command in shown and not _contains([x.rstrip() for x in done.stdout.splitlines()],
                                                shown[command]):
            failed.append(f"$ {command}\nprints, unlike the output shown:\n{done.stdout[-3000:]}")
    assert not failed, "documented commands that fail as written:\n\n" + "\n\n".join(failed)
    assert (clone / "reports" / "paper").is_dir()  # the paper analysis wrote its report


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_documents_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists and, with a
    ``#anchor``, a heading of that file."""
    broken = []
    for name in DOCS:
        source = REPO / name
        for target in re.findall(r"\]\(([^)\s]+)\)", source.read_text()):
            if re.match(r"^[a-z]+:", target):  # http(s):, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (source.parent / path).resolve() if path else source
            if not file.exists():
                broken.append(f"{name}: {target} (no such file)")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+\s+(.*)$", file.read_text(), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{name}: {target} (no such heading)")
    assert not broken, broken


def test_the_readmes_timings_say_when_and_how_they_were_measured() -> None:
    """Figures measured, not remembered: the install/run/test section states its times in
    one table whose rows each say how they were measured, under a dated sentence."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Install, run, test", 1)[1].split("**Which torch.**", 1)[0]
    commands = section.split("```bash", 1)[1].split("```", 1)[0]
    assert not re.search(r"\d+\s*(min|s)\b|~\d", commands), commands  # no remembered times
    assert re.search(r"measured on 20\d\d-\d\d-\d\d", section), section
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 6, rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and re.fullmatch(r"\d+:\d\d(\.\d)?", cells[1]), row
        assert cells[2] and cells[3], row  # how, and the machine's other load


def test_make_run_states_one_measured_duration_everywhere() -> None:
    """The Makefile, the README and the quickstart config give `make run` one duration: the
    README's measured row (no remembered "~3-5 min" beside it)."""
    readme = (REPO / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `make run` |")]
    assert len(rows) == 1, rows
    figure = rows[0].split("|")[2].strip()
    makefile = (REPO / "Makefile").read_text()
    run_comment = makefile.split("\nrun:", 1)[0].rsplit("\n\n", 1)[1]
    config_head = (REPO / "configs" / "quickstart.yaml").read_text().split("\nname:", 1)[0]
    for where, text in (("Makefile", run_comment), ("configs/quickstart.yaml", config_head)):
        found = re.findall(r"\b\d+:\d\d\b|~?\d+\s*-\s*\d+\s*min|~\d+\s*min", text)
        assert found == [figure], f"{where}: {found}, the README measured {figure}"
