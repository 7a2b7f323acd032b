"""The Slurm launch template (docker/slurm/) run on this machine with stand-ins for Slurm.

``scontrol show hostnames`` names the job's nodes and ``srun -w NODE CMD`` runs CMD here,
setting the variables Slurm sets in a step (``SLURM_GPUS_ON_NODE``, ``SLURM_STEP_GPUS``,
``CUDA_VISIBLE_DEVICES`` for a step's GPUs, ``SLURM_CPUS_PER_TASK``), so the template's own
logic starts a real two-node Ray cluster on 127.0.0.1 (head via ``srun``, worker via
``srun``, token auth on), waits for both nodes, and runs a real ``sublayer sweep
--address`` against it. Only the Slurm commands are stand-ins. The stand-ins and
:func:`job_env` are shared with test_slurm_gpus.py and test_slurm_requeue.py.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, VENV_BIN, free_port, scratch, subprocess_env, tail, write_experiment
from mlflow.tracking import MlflowClient

SLURM = REPO / "docker" / "slurm"
TOKEN = "f" * 64  # a test token: must never reach the job's output

STANDINS = {
    # scontrol show hostnames NODELIST -> the nodes of $STANDIN_NODES, one per line;
    # scontrol requeue JOBID -> recorded in $SCONTROL_LOG
    "scontrol": '#!/usr/bin/env bash\ncase "${1:-} ${2:-}" in\n'
                '  "show hostnames") printf "%s\\n" ${STANDIN_NODES:-node-a node-b} ;;\n'
                '  requeue\\ *) echo "requeue $2" >> "$SCONTROL_LOG" ;;\n'
                '  *) exit 1 ;;\nesac\n',
    # srun [OPTIONS] CMD...: run CMD here (Slurm would run it on the -w NODE), with the
    # variables Slurm sets in a step: a GPU request (--gres=gpu:[TYPE:]N, --gpus-per-node,
    # --gpus-per-task, or else the SLURM_GPUS_PER_* srun reads from its environment) gives
    # the step N GPUs; without one the step keeps the job's (Slurm's default). The whole
    # command line goes to $SRUN_LOG.
    "srun": r"""#!/usr/bin/env bash
echo "srun $*" >> "$SRUN_LOG"
gpus="" node=""
while [[ $# -gt 0 ]]; do case "$1" in
  -w) node=$2; shift 2 ;;
  --gres=gpu:*) gpus=${1##*:}; shift ;;
  --gpus-per-node=*) export SLURM_GPUS_PER_NODE=${1#*=}; gpus=${1##*[=:]}; shift ;;
  --gpus-per-task=*) export SLURM_GPUS_PER_TASK=${1#*=}; gpus=${1##*[=:]}; shift ;;
  --cpus-per-task=*) export SLURM_CPUS_PER_TASK=${1#*=}; shift ;;
  --*) shift ;;
  *) break ;;
esac; done
if [[ -z $gpus ]]; then
  if [[ -n ${SLURM_GPUS_PER_NODE:-} ]]; then gpus=${SLURM_GPUS_PER_NODE##*:}
  elif [[ -n ${SLURM_GPUS_PER_TASK:-} ]]; then gpus=${SLURM_GPUS_PER_TASK##*:}; fi
fi
if [[ -n $gpus ]]; then
  ids=$(seq -s, 0 $((gpus - 1)))
  export SLURM_GPUS_ON_NODE=$gpus SLURM_STEP_GPUS=$ids CUDA_VISIBLE_DEVICES=$ids
fi
export SLURMD_NODENAME=${node:-$(/bin/hostname)}
exec "$@"
""",
    # every stand-in node is this machine: $STANDIN_IPS (default: the loopback address)
    "hostname": '#!/usr/bin/env bash\ncase "${1:-}" in\n'
                '  --ip-address) echo "${STANDIN_IPS:-127.0.0.1}" ;;\n'
                '  -I) echo "${STANDIN_IPS_ALL:-}" ;;\n'
                '  *) exec /bin/hostname "$@" ;;\nesac\n',
}


def standins(folder: Path, extra: dict[str, str] | None = None) -> Path:
    """A bin folder of the stand-ins (and ``extra`` ones) in ``folder``."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, text in {**STANDINS, **(extra or {})}.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return bin_dir


def job_env(home: Path, folder: Path, bin_dir: Path, config: Path, job_id: str,
            **slurm: str) -> dict[str, str]:
    """The environment sbatch gives the batch script: a 2-node job of 2 CPUs per task
    submitted from ``folder``; ``slurm`` adds (or, empty, removes) variables."""
    env = subprocess_env(home)
    env.pop("RAY_AUTH_MODE")  # the template turns token auth on itself
    for name in [k for k in env if k.startswith("SLURM_") or k == "CUDA_VISIBLE_DEVICES"]:
        env.pop(name)
    env.update({
        "PATH": f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{env['PATH']}",
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_CPUS_PER_TASK": "2",
        "SLURM_SUBMIT_DIR": str(folder),
        "SUBLAYER_SLURM_DIR": str(SLURM),
        "SUBLAYER_CONFIG": str(config),
        "RAY_PORT": str(free_port()),
        "RAY_AUTH_TOKEN": TOKEN,
        "SUBLAYER_RAY_WAIT_S": "180",
        "SRUN_LOG": str(folder / "srun.log"),
        "SCONTROL_LOG": str(folder / "scontrol.log"),
    })
    for name, value in slurm.items():
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    return env


def kill_leftovers(proc: subprocess.Popen[bytes], home: Path) -> None:
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


def start_job(sbatch: str, env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """``sbatch`` run as Slurm runs a batch script: its own session, output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(["bash", str(SLURM / sbatch)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True)


def run_job(sbatch: str, env: dict[str, str], log: Path, cwd: Path, home: Path,
            timeout: float = 420) -> int:
    """Run ``sbatch`` to its end; its exit status."""
    proc = start_job(sbatch, env, log, cwd)
    try:
        return proc.wait(timeout=timeout)
    finally:
        kill_leftovers(proc, home)


@pytest.mark.parametrize("sbatch", ["sublayer-cpu.sbatch", "sublayer-gpu.sbatch"])
def test_sbatch_scripts_follow_the_documented_pattern(sbatch):
    """Both variants ask Slurm for one task per node, a warning signal before the time
    limit, a requeue and an appended log, and hand over to ray-cluster.sh; the GPU one
    asks for GPUs and says it expects them."""
    text = (SLURM / sbatch).read_text()
    directives = re.findall(r"^#SBATCH (\S+)", text, re.M)
    for wanted in ("--ntasks-per-node=1", "--signal=B:USR1@300", "--requeue",
                   "--open-mode=append"):
        assert wanted in directives, (sbatch, directives)
    gpu = sbatch == "sublayer-gpu.sbatch"
    assert any(d.startswith(("--gres=gpu:", "--gpus-per-node=", "--gpus-per-task="))
               for d in directives) == gpu, directives
    assert ("SUBLAYER_EXPECT_GPUS=1" in text) == gpu
    assert ("SUBLAYER_NUM_GPUS" in text) == (not gpu)
    assert "ray-cluster.sh" in text
    script = (SLURM / "ray-cluster.sh").read_text()
    assert "RAY_AUTH_MODE=token" in script
    assert "sublayer sweep" in script and "--address" in script


@pytest.mark.slow
def test_template_runs_a_real_sweep_on_a_two_node_cluster(tmp_path: Path) -> None:
    """The CPU job: both Ray steps carry their CPU share and no GPU; Ray's temp folder
    (private to the job) is gone at the end, and each node's Ray logs are in the job's
    folder."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_file = write_experiment(tmp_path, "slurm_template", orders=["sfsf", "ssff"],
                                tracking_uri=uri, resources={"cpu": 1})
    bin_dir = standins(tmp_path)
    log = tmp_path / "job.log"
    job_id = f"{os.getpid()}1"
    temp = Path(f"/tmp/sublayer-ray-{job_id}")  # the default: one per job
    with scratch("sublayer-home") as home:
        env = job_env(home, tmp_path, bin_dir, exp_file, job_id)
        try:
            code = run_job("sublayer-cpu.sbatch", env, log, tmp_path, home)
        finally:
            subprocess.run(["rm", "-rf", str(temp)], check=False)
    text = log.read_text()
    assert code == 0, f"job failed ({code}):\n{tail(log)}"
    assert "2 node(s) up at 127.0.0.1:" in text and ": 4 CPU(s), 0 GPU(s)" in text, tail(log)
    assert TOKEN not in text, "the Ray token was printed"
    srun = (tmp_path / "srun.log").read_text().splitlines()
    starts = [line for line in srun if "ray-node.sh start" in line]
    assert sum(" start head node-a 127.0.0.1 " in line for line in starts) == 1, srun
    assert sum(" start worker node-b 127.0.0.1:" in line for line in starts) == 1, srun
    assert all("--ntasks=1 --cpus-per-task=2 -w" in line and "gpu" not in line
               for line in starts), starts
    assert not temp.exists(), "Ray's temp folder was left behind"
    job_dir = tmp_path / f"sublayer-{job_id}"
    assert stat.S_IMODE(job_dir.stat().st_mode) == 0o700
    for node in ("node-a", "node-b"):
        assert list((job_dir / "ray-logs" / node).glob("session_*/logs/raylet.out")), \
            (node, tail(log))

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
