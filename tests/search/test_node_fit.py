"""How trials fill a cluster's nodes: the dry run's ``nodes:`` lines and idle warnings
(issue 45, item 2), from Slurm's variables and from a fake-GPU Ray cluster of the shipped
sbatch shape; the shipped sbatch files and paper configs fill their nodes."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import REPO, SUBLAYER, free_port, ray_cluster, scratch

from sublayer_search.search.cli.node_fit import fit_report, node_fit, slurm_nodes
from sublayer_search.search.plan.experiment import load_experiment

SBATCH = {"gpu": REPO / "docker/slurm/sublayer-gpu.sbatch",
          "cpu": REPO / "docker/slurm/sublayer-cpu.sbatch"}
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def sbatch_shape(path: Path) -> tuple[int, dict[str, float]]:
    """(nodes, one node's resources) of an sbatch file's ``#SBATCH`` lines."""
    lines = dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", path.read_text(), re.M))
    gres = re.fullmatch(r"gpu:(?:\w+:)?(\d+)", lines.get("gres", "")) if "gres" in lines else None
    gpus = int(gres.group(1)) if gres else int(lines.get("gpus-per-node", "0").split(":")[-1])
    cpus = int(lines["cpus-per-task"]) * int(lines.get("ntasks-per-node", "1"))
    return int(lines["nodes"]), {"CPU": float(cpus), "GPU": float(gpus)}


@pytest.mark.parametrize(("cpus", "gpus", "cpu", "gpu", "fits", "idle_gpu", "idle_cpu"), [
    (16, 4, 8, 1, 2, 0.5, 0.0),   # the example: half the GPUs idle
    (16, 4, 4, 1, 4, 0.0, 0.0),   # the shipped paper configs
    (16, 4, 2, 1, 4, 0.0, 0.5),   # GPU-bound: half the CPUs idle
    (16, 4, 1, 0.25, 16, 0.0, 0.0),
    (16, 0, 3, 0, 5, 0.0, 1 / 16),
    (16, 4, 1, 0, 16, 1.0, 0.0),  # CPU trials on a GPU node
    (8, 1, 16, 1, 0, 1.0, 1.0),   # does not fit
])
def test_node_fit(cpus, gpus, cpu, gpu, fits, idle_gpu, idle_cpu) -> None:
    fit = node_fit(cpus, gpus, cpu, gpu)
    assert fit.workers == fits
    assert fit.idle_gpu_share == pytest.approx(idle_gpu)
    assert fit.idle_cpu_share == pytest.approx(idle_cpu)


@pytest.mark.parametrize(("env", "nodes"), [
    ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "16", "SLURM_JOB_NUM_NODES": "2",
      "SLURM_GPUS_ON_NODE": "4"}, [{"CPU": 16.0, "GPU": 4.0}] * 2),
    ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "8", "SLURM_NTASKS_PER_NODE": "2",
      "SLURM_GPUS_PER_NODE": "a100:2,v100:1"}, [{"CPU": 16.0, "GPU": 3.0}]),
    ({"SLURM_JOB_ID": "1", "SLURM_CPUS_ON_NODE": "32", "SLURM_NNODES": "3",
      "SLURM_JOB_GPUS": "0,2-3"}, [{"CPU": 32.0, "GPU": 3.0}] * 3),
    ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "4", "SLURM_TASKS_PER_NODE": "2(x3)",
      "SLURM_GPUS_PER_TASK": "h100:2"}, [{"CPU": 8.0, "GPU": 4.0}]),
    ({"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "16"}, [{"CPU": 16.0, "GPU": 0.0}]),
    ({"SLURM_CPUS_PER_TASK": "16"}, None),  # no job
])
def test_slurm_variables_give_the_node_shape(env, nodes) -> None:
    assert slurm_nodes(env) == nodes


@pytest.mark.parametrize("config", [c for c in CONFIGS
                                    if yaml.safe_load(c.read_text()).get("resources", {}).get("gpu")],
                         ids=lambda c: c.stem)
def test_the_paper_configs_fill_the_gpu_sbatch_nodes(config: Path) -> None:
    count, node = sbatch_shape(SBATCH["gpu"])
    assert node == {"CPU": 16.0, "GPU": 4.0}  # what the docs and this test assume
    lines, warnings = fit_report(load_experiment(config), [node] * count, "sbatch")
    assert not [w for w in warnings if "idle" in w or "fit no node" in w], (lines, warnings)
    assert "idle: 0% of its GPUs" in lines[0], lines


@pytest.mark.parametrize("config", [c for c in CONFIGS
                                    if not yaml.safe_load(c.read_text()).get("resources", {}).get("gpu")],
                         ids=lambda c: c.stem)
def test_the_cpu_configs_fill_the_cpu_sbatch_nodes(config: Path) -> None:
    """Every node holds 16 one-CPU trials; their ``max_concurrent: 2`` (set for a laptop)
    is named in a warning on such a cluster."""
    count, node = sbatch_shape(SBATCH["cpu"])
    lines, warnings = fit_report(load_experiment(config), [node] * count, "sbatch")
    assert not [w for w in warnings if "idle" in w], (lines, warnings)
    assert all("max_concurrent" in w for w in warnings), warnings


def _dry_run(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SUBLAYER), "sweep", str(config), "--dry-run", *args],
                          capture_output=True, text=True, timeout=180, env=env, cwd=config.parent)


def _half_idle_copy(folder: Path) -> Path:
    """press2020_sandwich with the cpu: 8 the issue found (two trials fill half a node)."""
    doc = yaml.safe_load((REPO / "configs/press2020_sandwich.yaml").read_text())
    doc["resources"] = {"cpu": 8, "gpu": 1}
    path = folder / "sandwich8.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_slurm_precheck_warns_of_idle_gpus(tmp_path: Path) -> None:
    """The pre-check's dry run (its --address not up yet) reads Slurm's variables."""
    env = {**os.environ, "SLURM_JOB_ID": "9", "SLURM_CPUS_PER_TASK": "16",
           "SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_ON_NODE": "4"}
    env.pop("RAY_ADDRESS", None)
    address = ("--address", f"127.0.0.1:{free_port()}")
    shipped = _dry_run(REPO / "configs/press2020_sandwich.yaml", *address, env=env)
    assert shipped.returncode == 0, shipped.stderr
    assert ("nodes: 2 x (16 CPUs, 4 GPUs) (Slurm job 9's variables): 4 trial(s) of 4 CPU(s) "
            "and 1 GPU(s) fit a node") in shipped.stdout, shipped.stdout
    assert "sit idle" not in shipped.stderr
    half = _dry_run(_half_idle_copy(tmp_path), *address, env=env)
    assert half.returncode == 0, half.stderr
    assert "idle: 50% of its GPUs, 0% of its CPUs" in half.stdout
    assert ("sublayer: warning: 2 of the 4 GPUs of a node (16 CPUs, 4 GPUs) sit idle (50%): "
            "the CPUs run out first; resources.cpu: 4 would fill them") in half.stderr


@pytest.mark.slow
def test_a_fake_gpu_cluster_of_the_sbatch_shape(tmp_path: Path) -> None:
    """Two ``ray start --num-cpus=16 --num-gpus=4`` nodes, as the GPU sbatch gives Ray."""
    count, node = sbatch_shape(SBATCH["gpu"])
    with scratch("sublayer-home") as home, ray_cluster(
            home, nodes=count, cpus=int(node["CPU"]), gpus=int(node["GPU"])) as cluster:
        env = {k: v for k, v in cluster.env.items() if not k.startswith("SLURM_")}
        shipped = _dry_run(REPO / "configs/press2020_sandwich.yaml", "--address",
                           cluster.address, env=env)
        half = _dry_run(_half_idle_copy(tmp_path), "--address", cluster.address, env=env)
    assert shipped.returncode == 0, shipped.stderr
    where = f"nodes: 2 x (16 CPUs, 4 GPUs) (the Ray cluster at {cluster.address})"
    assert f"{where}: 4 trial(s) of 4 CPU(s) and 1 GPU(s) fit a node" in shipped.stdout
    assert "idle: 0% of its GPUs, 0% of its CPUs" in shipped.stdout
    assert "nodes: 8 trial(s) at once on 2 node(s)" in shipped.stdout
    assert "sit idle" not in shipped.stderr, shipped.stderr
    assert half.returncode == 0, half.stderr
    assert f"{where}: 2 trial(s) of 8 CPU(s)" in half.stdout
    assert "2 of the 4 GPUs of a node (16 CPUs, 4 GPUs) sit idle (50%)" in half.stderr
