"""The GPUs a Slurm job gives Ray, the head's address and Ray's private temp folder.

``docker/slurm/ray-node.sh gpus`` is run under the variables Slurm sets for each way of
asking for GPUs (``--gres=gpu:N``, ``--gpus-per-node``, ``--gpus-per-task``, a step's
``SLURM_STEP_GPUS`` / ``CUDA_VISIBLE_DEVICES``); the batch script is run with the
stand-ins of test_slurm_template.py (``srun`` sets a step's variables as Slurm does) and
a ``ray`` stand-in that records what each node's ``ray start`` was told. One slow test
starts a real two-node Ray cluster of fake GPUs through the GPU sbatch and sweeps on it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import TINY_TRAIN, scratch, tail, write_experiment
from mlflow.tracking import MlflowClient
from test_slurm_template import SLURM, job_env, run_job, standins

NODE_SH = SLURM / "ray-node.sh"
CPU_TRAIN = {**TINY_TRAIN, "device": "cpu"}
"""The fake GPUs are held for scheduling; torch here has no CUDA, so the trials say cpu."""

# records each `ray start`: its arguments, the node, its temp folder's mode, and whether
# the job's GPU request variables reached the step; ends once both nodes have recorded
RAY = r"""#!/usr/bin/env bash
temp=""
for a in "$@"; do [[ $a == --temp-dir=* ]] && temp=${a#*=}; done
echo "ray $* | node=$SLURMD_NODENAME mode=$(stat -c %a "$temp") per_node=${SLURM_GPUS_PER_NODE:-unset}" >> "$RAY_LOG"
for _ in $(seq 300); do
  (( $(grep -c "^ray start" "$RAY_LOG") >= 2 )) && exit 1
  sleep 0.1
done
"""


def node_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ray-node.sh ARGS`` with nothing of this machine's environment but PATH and ``env``."""
    return subprocess.run(["bash", str(NODE_SH), *args], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], **env}, timeout=30)


@pytest.mark.parametrize(("env", "count", "source"), [
    # --gres=gpu:2, the batch step and a step
    ({"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1"}, 2, "SLURM_GPUS_ON_NODE=2"),
    ({"SLURM_STEP_GPUS": "0,1,2,3", "SLURM_JOB_GPUS": "0-7",
      "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 4, "SLURM_STEP_GPUS=0,1,2,3"),
    ({"SLURM_JOB_GPUS": "0,2-3"}, 3, "SLURM_JOB_GPUS=0,2-3"),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2, "CUDA_VISIBLE_DEVICES=0,1"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-8a1c,GPU-77fe"}, 2, "CUDA_VISIBLE_DEVICES=GPU-8a1c"),
    ({"CUDA_VISIBLE_DEVICES": ""}, 0, "CUDA_VISIBLE_DEVICES="),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, 0, "CUDA_VISIBLE_DEVICES=NoDevFiles"),
    # --gpus-per-node=[type:]N
    ({"SLURM_GPUS_PER_NODE": "4"}, 4, "SLURM_GPUS_PER_NODE=4"),
    ({"SLURM_GPUS_PER_NODE": "a100:4"}, 4, "SLURM_GPUS_PER_NODE=a100:4"),
    ({"SLURM_GPUS_PER_NODE": "a100:2,v100:1"}, 3, "SLURM_GPUS_PER_NODE=a100:2,v100:1"),
    ({"SLURM_GPUS_ON_NODE": "2", "SLURM_GPUS_PER_NODE": "8"}, 2, "SLURM_GPUS_ON_NODE=2"),
    # --gpus-per-task=N, times the tasks on the node
    ({"SLURM_GPUS_PER_TASK": "2"}, 2, "SLURM_GPUS_PER_TASK=2 x 1 task(s)"),
    ({"SLURM_GPUS_PER_TASK": "1", "SLURM_NTASKS_PER_NODE": "8"}, 8, "x 8 task(s)"),
    ({"SLURM_GPUS_PER_TASK": "h100:2", "SLURM_TASKS_PER_NODE": "2(x3)"}, 4, "x 2 task(s)"),
    # nothing granted; the override
    ({}, 0, "no GPU variable set"),
    ({"SUBLAYER_NUM_GPUS": "0", "SLURM_GPUS_ON_NODE": "4"}, 0, "SUBLAYER_NUM_GPUS=0"),
])
def test_the_gpu_count_is_what_slurm_granted(env, count, source):
    out = node_sh("gpus", "--explain", **env)
    assert out.returncode == 0, out.stderr
    got, said = out.stdout.strip().split(" ", 1)
    assert int(got) == count and source in said, out.stdout


@pytest.mark.parametrize(("env", "named"), [
    ({"SLURM_GPUS_ON_NODE": "two"}, "SLURM_GPUS_ON_NODE=two"),
    ({"SLURM_GPUS_PER_NODE": "a100:x"}, "SLURM_GPUS_PER_NODE=a100:x"),
    ({"SLURM_JOB_GPUS": "3-1"}, "SLURM_JOB_GPUS=3-1"),
    ({"SUBLAYER_NUM_GPUS": "-1"}, "SUBLAYER_NUM_GPUS=-1"),
])
def test_a_malformed_gpu_variable_is_named(env, named):
    out = node_sh("gpus", **env)
    assert out.returncode == 2 and named in out.stderr and "expected" in out.stderr, out
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(("ips", "all_ips", "chosen"), [
    ("fe80::1 10.0.0.5 192.168.1.2", "", "10.0.0.5"),
    ("127.0.1.1", "10.0.0.7 172.17.0.1 fd00::2", "10.0.0.7"),  # Debian's /etc/hosts line
    ("::1 127.0.0.1", "", "127.0.0.1"),  # a single machine: loopback only
])
def test_the_head_address_is_the_first_ipv4_a_non_loopback_one_first(tmp_path, ips, all_ips,
                                                                     chosen):
    bin_dir = standins(tmp_path)
    out = node_sh("ip", PATH=f"{bin_dir}:{os.environ['PATH']}", STANDIN_IPS=ips,
                  STANDIN_IPS_ALL=all_ips)
    assert out.returncode == 0 and out.stdout.strip() == chosen, out


def test_a_node_without_ipv4_names_the_override(tmp_path):
    bin_dir = standins(tmp_path)
    out = node_sh("ip", PATH=f"{bin_dir}:{os.environ['PATH']}", STANDIN_IPS="fe80::1")
    assert out.returncode == 2 and "SUBLAYER_HEAD_IP" in out.stderr, out


def test_a_temp_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "ray-temp"
    link.symlink_to(tmp_path / "elsewhere")
    bin_dir = standins(tmp_path, {"ray": RAY})
    out = node_sh("start", "head", "node-a", "10.0.0.5", "6379", SUBLAYER_RAY_TEMP_DIR=str(link),
                  PATH=f"{bin_dir}:{os.environ['PATH']}", RAY_LOG=str(tmp_path / "ray.log"))
    assert out.returncode == 2 and "link or belongs to someone else" in out.stderr, out
    assert not (tmp_path / "ray.log").exists()  # Ray was not started


def _job(tmp_path: Path, home: Path, sbatch: str, **slurm: str) -> tuple[int, str, Path]:
    """Run ``sbatch`` with the ray stand-in; (status, the job's output, its folder)."""
    exp = write_experiment(tmp_path, "slurm_gpus", orders=["sfsf"],
                           tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                           resources={"cpu": 1, "gpu": 1}, train=CPU_TRAIN)
    bin_dir = standins(tmp_path, {"ray": RAY})
    job_id = f"{os.getpid()}2"
    env = job_env(home, tmp_path, bin_dir, exp, job_id, RAY_LOG=str(tmp_path / "ray.log"),
                  SUBLAYER_RAY_TEMP_DIR=str(home / "rt"),
                  SUBLAYER_HEAD_WAIT_S="0",  # no head listens: the stand-in records only
                  **slurm)
    log = tmp_path / "job.log"
    code = run_job(sbatch, env, log, tmp_path, home, timeout=120)
    return code, log.read_text(), tmp_path / f"sublayer-{job_id}"


def _lines(path: Path, needle: str) -> list[str]:
    return [line for line in path.read_text().splitlines() if needle in line] \
        if path.exists() else []


# what sbatch sets in the batch script's environment for each way of asking for 2 GPUs
# per node (2 CPUs per task), and the CPUs a node then has
GRANTS = {
    "gres": ({"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1"}, 2),
    "gpus-per-node": ({"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1",
                       "SLURM_GPUS_PER_NODE": "2"}, 2),
    "gpus-per-task": ({"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1",
                       "SLURM_GPUS_PER_TASK": "2"}, 2),
    "gpus-per-task, 2 tasks per node": ({"SLURM_GPUS_PER_TASK": "1",
                                         "SLURM_NTASKS_PER_NODE": "2"}, 4),
    "typed gpus-per-node, no indices": ({"SLURM_GPUS_PER_NODE": "a100:2"}, 2),
}


@pytest.mark.parametrize("grant", list(GRANTS))
def test_each_node_gives_ray_the_gpus_of_its_step(tmp_path, grant):
    """Whichever option the job used: each Ray step asks for the node's CPUs and GPUs
    (--cpus-per-task, --gres=gpu:N, without the job's own GPU request variables), and
    each node's `ray start` is told the GPUs its step holds, with a 0700 temp folder;
    the head's address is the first IPv4 of `hostname --ip-address`."""
    slurm, cpus = GRANTS[grant]
    with scratch("sublayer-home") as home:
        code, out, job_dir = _job(tmp_path, home, "sublayer-gpu.sbatch",
                                  STANDIN_IPS="fe80::1 10.0.0.5 192.168.1.2", **slurm)
        assert not (home / "rt").exists(), "Ray's temp folder was left behind"
    assert code != 0 and "a node's Ray step ended before the cluster was up" in out, out
    srun = tmp_path / "srun.log"
    probes = _lines(srun, "ray-node.sh ip")
    assert len(probes) == 1 and "--overlap" in probes[0], srun.read_text()
    starts = _lines(srun, "ray-node.sh start")
    share = f"--nodes=1 --ntasks=1 --cpus-per-task={cpus} --gres=gpu:2 -w node-"
    assert len(starts) == 2 and all(share in s for s in starts), starts
    rays = _lines(tmp_path / "ray.log", "ray start")
    assert sorted(re.search(r"node=(\S+)", r)[1] for r in rays) == ["node-a", "node-b"], rays
    for line in rays:
        assert "--num-gpus=2" in line and f"--num-cpus={cpus}" in line, line
        assert "mode=700" in line and "per_node=unset" in line, line
    head = next(r for r in rays if "--head" in r)
    assert "--node-ip-address=10.0.0.5" in head, head
    assert f"node-b: worker with {cpus} CPU(s) and 2 GPU(s) (SLURM_GPUS_ON_NODE=2)" in out, out
    copies = _lines(srun, "ray-node.sh logs")  # on every node, beside the Ray steps
    assert len(copies) == 2 and all("--overlap" in c for c in copies), copies
    assert f"{job_dir}/ray-logs node-a" in copies[0] + copies[1], copies


def test_the_head_address_override_skips_the_probe(tmp_path):
    with scratch("sublayer-home") as home:
        _, out, _ = _job(tmp_path, home, "sublayer-gpu.sbatch", SUBLAYER_HEAD_IP="10.1.2.3",
                         **GRANTS["gres"][0])
    assert not _lines(tmp_path / "srun.log", "ray-node.sh ip")
    heads = _lines(tmp_path / "ray.log", "--head")
    assert len(heads) == 1 and "--node-ip-address=10.1.2.3 --port=" in heads[0], out
    assert _lines(tmp_path / "ray.log", "--address=10.1.2.3:"), out


def test_a_gpu_job_granted_no_gpu_stops_before_anything_starts(tmp_path):
    with scratch("sublayer-home") as home:
        code, out, job_dir = _job(tmp_path, home, "sublayer-gpu.sbatch")
    assert code == 2, out
    for named in ("SUBLAYER_EXPECT_GPUS=1", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS",
                  "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK",
                  "--gres=gpu:N", "--gpus-per-node=N", "--gpus-per-task=N"):
        assert named in out, (named, out)
    assert not (tmp_path / "srun.log").exists(), "a step ran"
    assert not (tmp_path / "ray.log").exists() and not job_dir.exists()


def test_a_bad_experiment_stops_before_ray_starts(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad\nspace: {type: explicit, orders: [sfsf]}\n")
    with scratch("sublayer-home") as home:
        code, out, _ = _job(tmp_path, home, "sublayer-cpu.sbatch", SUBLAYER_HEAD_IP="10.1.2.3",
                            SUBLAYER_CONFIG=str(tmp_path / "bad.yaml"))
    assert code == 2 and "data: a value for this required key" in out, out
    assert "was refused (above); nothing was started" in out and "Traceback" not in out
    assert not (tmp_path / "srun.log").exists() and not (tmp_path / "ray.log").exists()


@pytest.mark.slow
def test_a_gpu_job_gives_ray_the_gpus_slurm_granted(tmp_path):
    """--gpus-per-node=2 on two nodes: a real Ray cluster of 4 (fake) GPUs, and a sweep
    whose trials each ask for one GPU runs to the end on it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp = write_experiment(tmp_path, "slurm_gpus", orders=["sfsf", "ssff"], tracking_uri=uri,
                           resources={"cpu": 1, "gpu": 1}, train=CPU_TRAIN)
    bin_dir = standins(tmp_path)
    log = tmp_path / "job.log"
    with scratch("sublayer-home") as home:
        env = job_env(home, tmp_path, bin_dir, exp, f"{os.getpid()}3",
                      SUBLAYER_RAY_TEMP_DIR=str(home / "rt"), SUBLAYER_HEAD_IP="127.0.0.1",
                      **GRANTS["gpus-per-node"][0])
        code = run_job("sublayer-gpu.sbatch", env, log, tmp_path, home)
        assert not (home / "rt").exists(), "Ray's temp folder was left behind"
    text = log.read_text()
    assert code == 0, f"job failed ({code}):\n{tail(log)}"
    assert re.search(r"2 node\(s\) up at 127\.0\.0\.1:\d+: 4 CPU\(s\), 4 GPU\(s\)", text), tail(log)
    for node, role in (("node-a", "head"), ("node-b", "worker")):
        assert f"{node}: {role} with 2 CPU(s) and 2 GPU(s) (SLURM_GPUS_ON_NODE=2)" in text
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("slurm_gpus").experiment_id],
                              filter_string="tags.`sublayer.role` = 'trial'")
    assert sorted(r.info.run_name for r in runs) == ["sfsf@seed0", "ssff@seed0"]
    assert all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
