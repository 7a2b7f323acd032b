"""The Slurm launch template (docker/slurm/) run on this machine with stand-ins for Slurm.

``scontrol show hostnames`` names two nodes and ``srun -w NODE CMD`` runs CMD here, so the
template's own logic starts a real two-node Ray cluster on 127.0.0.1 (head via ``srun``,
worker via ``srun``, token auth on), waits for both nodes, and runs a real
``sublayer sweep --address`` against it. Only the Slurm commands are stand-ins.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, VENV_BIN, free_port, scratch, subprocess_env, tail, write_experiment
from mlflow.tracking import MlflowClient

SLURM = REPO / "docker" / "slurm"
TOKEN = "f" * 64  # a test token: must never reach the job's output

STANDINS = {
    # scontrol show hostnames NODELIST -> one host per line
    "scontrol": '#!/usr/bin/env bash\n[[ "$1 $2" == "show hostnames" ]] || exit 1\n'
                'printf "node-a\\nnode-b\\n"\n',
    # srun [--opt=...] [-w NODE] CMD...: run CMD here (Slurm would run it on NODE)
    "srun": '#!/usr/bin/env bash\nwhile [[ $# -gt 0 ]]; do case "$1" in\n'
            '  -w) shift 2 ;;\n  --*=*) shift ;;\n  *) break ;;\nesac; done\n'
            'echo "srun: $*" >> "$SRUN_LOG"\nexec "$@"\n',
    # every stand-in node is this machine, on the loopback address
    "hostname": '#!/usr/bin/env bash\nif [[ "${1:-}" == "--ip-address" ]]; then echo 127.0.0.1; '
                'else exec /bin/hostname "$@"; fi\n',
}


def _standins(folder: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, text in STANDINS.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return bin_dir


def _kill_leftovers(proc: subprocess.Popen[bytes], home: Path) -> None:
    """The template stops its own Ray processes; after a failure, kill what is left of
    this job only: its process group, and Ray processes started with this test's HOME
    (never `ray stop`, which would stop every Ray on the machine)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    mark = f"HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


@pytest.mark.parametrize("sbatch", ["sublayer-cpu.sbatch", "sublayer-gpu.sbatch"])
def test_sbatch_scripts_follow_the_documented_pattern(sbatch):
    """Both variants ask Slurm for one task per node and hand over to ray-cluster.sh."""
    text = (SLURM / sbatch).read_text()
    assert "#SBATCH --ntasks-per-node=1" in text
    assert "ray-cluster.sh" in text
    assert ("#SBATCH --gpus-per-task=" in text) == (sbatch == "sublayer-gpu.sbatch")
    script = (SLURM / "ray-cluster.sh").read_text()
    assert "RAY_AUTH_MODE=token" in script
    assert "sublayer sweep" in script and "--address" in script


@pytest.mark.slow
def test_template_runs_a_real_sweep_on_a_two_node_cluster(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_file = write_experiment(tmp_path, "slurm_template", orders=["sfsf", "ssff"],
                                tracking_uri=uri, resources={"cpu": 1})
    bin_dir = _standins(tmp_path)
    log = tmp_path / "job.log"
    with scratch("sublayer-home") as home:
        env = subprocess_env(home)
        env.pop("RAY_AUTH_MODE")  # the template turns token auth on itself
        env.update({
            "PATH": f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{env['PATH']}",
            "SLURM_JOB_NODELIST": "node-[a-b]",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_CPUS_PER_TASK": "2",
            "SLURM_SUBMIT_DIR": str(REPO),
            "SUBLAYER_CONFIG": str(exp_file),
            "RAY_PORT": str(free_port()),
            "RAY_AUTH_TOKEN": TOKEN,
            "SUBLAYER_RAY_WAIT_S": "180",
            "SRUN_LOG": str(tmp_path / "srun.log"),
        })
        with log.open("wb") as out:
            proc = subprocess.Popen(["bash", str(SLURM / "sublayer-cpu.sbatch")], env=env,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=420)
            finally:
                _kill_leftovers(proc, home)
    text = log.read_text()
    assert code == 0, f"job failed ({code}):\n{tail(log)}"
    assert "2 node(s) up at 127.0.0.1:" in text, tail(log)
    assert TOKEN not in text, "the Ray token was printed"
    srun = (tmp_path / "srun.log").read_text().splitlines()
    assert sum("ray start --head" in line for line in srun) == 1, srun
    assert sum("ray start --address=127.0.0.1:" in line for line in srun) == 1, srun

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("slurm_template")
    assert exp is not None, tail(log)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    trials = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
    assert sorted(r.info.run_name for r in trials) == ["sfsf@seed0", "ssff@seed0"]
    assert all(r.info.status == "FINISHED" for r in trials), [r.info.status for r in trials]


def test_the_docs_submit_the_shipped_scripts_with_shipped_configs():
    """docker/README.md's sbatch commands name scripts and configs that exist."""
    text = (REPO / "docker" / "README.md").read_text()
    blocks = " ".join(re.findall(r"```bash\n(.*?)```", text, re.S)).replace("\\\n", " ")
    submits = [shlex.split(line, comments=True) for line in blocks.splitlines()
               if "sbatch" in line]
    assert len(submits) == 2, submits
    for words in submits:
        env = dict(w.split("=", 1) for w in words[:words.index("sbatch")])
        assert (REPO / env["SUBLAYER_CONFIG"]).is_file(), env
        assert (REPO / words[words.index("sbatch") + 1]).is_file(), words
