"""Two Slurm jobs on one node, a slow head, sites with ``--export=NONE``, and bash 4.2.

``docker/slurm/ray-node.sh`` gives every Ray of a job ports of its own (each single port
chosen free on the node, the worker processes' ports a block by job id), a worker waits
for its head until it answers (``SUBLAYER_HEAD_WAIT_S``), and every ``srun`` of the
scripts passes ``--export=ALL``. The slow test runs two jobs at once on the stand-ins of
test_slurm_template.py (every node is this machine): a 2-node job whose head starts only
once its worker waits for it, and a 1-node job on the same machine, each a real Ray
cluster and a real sweep, both up at the same time.

No bash 4.2 can be installed here (Debian ships 5.2 only), so the 4.2 pitfalls are
checked statically: an array expanded under ``set -u`` that may be empty (an error
before bash 4.4) must be written ``${a[@]+"${a[@]}"}``, and no feature newer than 4.2
is used.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, VENV_BIN, scratch, tail, write_experiment
from mlflow.tracking import MlflowClient
from test_slurm_template import SLURM, job_env, kill_leftovers, standins, start_job

NODE_SH = SLURM / "ray-node.sh"
SCRIPTS = [*sorted(SLURM.glob("*.sh")), *sorted(SLURM.glob("*.sbatch")),
           REPO / "benchmarks" / "gpu_check.sh"]
RECORD = '#!/usr/bin/env bash\necho "ray $*" >> "$RAY_LOG"\n'  # `ray start`, recorded only
SINGLE = ("node-manager-port", "object-manager-port", "metrics-export-port",
          "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port")
# the Ray client server runs (and its port is given) only where its dependency is installed
CLIENT = importlib.util.find_spec("grpc") is not None
HEAD_ONLY = ("port", "dashboard-port", *(("ray-client-server-port",) if CLIENT else ()))
RAY_DEFAULTS = {6379, 8265, 10001, 52365}  # GCS, dashboard, client server, agent (never picked)


def node_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(NODE_SH), *args], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], **env}, timeout=60)


# -- every srun passes --export=ALL ----------------------------------------------------------
def test_every_srun_of_the_scripts_passes_export_all():
    calls = [(path.name, line) for path in SCRIPTS for line in path.read_text().splitlines()
             if re.search(r"\bsrun\b", line.split("#", 1)[0])]
    assert calls, "the scripts run no srun"
    for name, line in calls:
        assert "--export=ALL" in line, (name, line)


# -- bash 4.2 ---------------------------------------------------------------------------------
NEWER = {  # what bash 4.2 lacks (the version that added it)
    r"\$\{\w+\[-\d+\]\}": "a negative array index (4.3)",
    r"\b(local|declare|typeset) -n\b": "a name reference (4.3)",
    r"\bwait -n\b": "wait -n (4.3)",
    r"\$\{[\w\[\]@*]+@[QEPAaKkUuL]\}": "a ${x@Q}-style transformation (4.4/5.1)",
    r"EPOCH(REALTIME|SECONDS)": "$EPOCHREALTIME/$EPOCHSECONDS (5.0)",
    r"\b(mapfile|readarray) -d\b": "mapfile -d (4.4)",
}


def bash42_problems(text: str) -> list[str]:
    """Where ``text`` (a bash script run under ``set -u``) breaks on bash 4.2."""
    code = "\n".join(line.split(" #", 1)[0] for line in text.splitlines()
                     if not line.lstrip().startswith("#"))
    found = [f"{what}: {m[0]}" for pattern, what in NEWER.items()
             for m in re.finditer(pattern, code)]
    unguarded = re.sub(r'\$\{(\w+)\[([@*])\]\+"?\$\{\1\[\2\]\}"?\}', "GUARDED", code)
    for m in re.finditer(r"\$\{(\w+)\[[@*]\]\}", unguarded):
        name = m[1]
        literal = re.search(rf"\b{name}=\([^)\s]", code) and not re.search(rf"\b{name}=\(\)", code)
        counted = re.search(rf"\$\{{#{name}\[@\]\}}\s*(>|-gt|==)\s*[1-9]?\d", code)
        if not (literal or counted):
            found.append(f"an array that may be empty, unguarded: {m[0]}")
    return found


def test_the_checker_finds_the_pitfalls():
    bad = 'set -u\nargs=()\nread -r -a more <<< "$X"\ncmd "${args[@]}" "${more[@]}"\n'
    assert len(bash42_problems(bad)) == 2, bash42_problems(bad)
    good = ('set -u\nargs=()\nlist=(a b)\ncmd ${args[@]+"${args[@]}"} "${list[@]}"\n'
            'read -r -a xs <<< "$X"\n(( ${#xs[@]} > 0 )) || exit 2\necho "${xs[@]}"\n')
    assert bash42_problems(good) == []
    assert bash42_problems('echo "${a[-1]}"; wait -n; local -n r=x\n') != []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_scripts_are_bash_42_safe(script):
    text = script.read_text()
    assert "set -euo pipefail" in text or "set -uo pipefail" in text, script.name
    assert bash42_problems(text) == [], script.name


# -- a worker waits for its head ----------------------------------------------------------
def test_a_worker_gives_up_on_a_silent_head_naming_the_setting():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = node_sh("wait-head", f"127.0.0.1:{port}", SUBLAYER_HEAD_WAIT_S="1")
    assert out.returncode == 2, out
    assert f"127.0.0.1:{port} did not answer in 1 s (SUBLAYER_HEAD_WAIT_S)" in out.stderr
    bad = node_sh("wait-head", f"127.0.0.1:{port}", SUBLAYER_HEAD_WAIT_S="soon")
    assert bad.returncode == 2 and "SUBLAYER_HEAD_WAIT_S=soon: expected" in bad.stderr


def test_a_worker_waits_for_a_head_that_comes_up_late():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["bash", str(NODE_SH), "wait-head", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"PATH": os.environ["PATH"], "SUBLAYER_HEAD_WAIT_S": "120"})
    try:
        assert proc.stdout is not None
        assert "waiting up to 120 s for the head" in proc.stdout.readline()
        assert proc.poll() is None  # still waiting: nothing listens yet
        with socket.socket() as head:  # the head comes up
            head.bind(("127.0.0.1", port))
            head.listen()
            assert proc.wait(timeout=60) == 0, proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()


# -- the ports of a job ---------------------------------------------------------------------
def _ports(line: str) -> dict[str, str]:
    return dict(re.findall(r"--((?:[a-z-]+-)?port)=(\d+)", line))


def _start(tmp_path: Path, job: str, role: str, **env: str) -> str:
    """``ray-node.sh start ROLE`` of job ``job`` with a recording ``ray``; its command line."""
    folder = tmp_path / f"{job}-{role}"
    folder.mkdir()
    bin_dir = standins(folder, {"ray": RECORD})
    args = (["head", "node-a", "127.0.0.1", "6390"] if role == "head"
            else ["worker", "node-b", env.pop("HEAD")])
    out = node_sh("start", *args, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_JOB_ID=job,
                  RAY_LOG=str(folder / "ray.log"), SUBLAYER_RAY_TEMP_DIR=str(folder / "rt"),
                  SUBLAYER_NUM_CPUS="1", **env)
    assert out.returncode == 0, out
    return (folder / "ray.log").read_text()


def test_each_job_gets_ports_of_its_own(tmp_path):
    with socket.socket() as head:  # the worker's head answers
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        jobs = {job: {"head": _start(tmp_path, job, "head"),
                      "worker": _start(tmp_path, job, "worker", HEAD=address)}
                for job in ("4101", "4102")}
    seen: list[int] = []
    ranges = set()
    for job, lines in jobs.items():
        for role, line in lines.items():
            ports = _ports(line)
            wanted = {*SINGLE, "min-worker-port", "max-worker-port",
                      *(HEAD_ONLY if role == "head" else ())}
            assert set(ports) == wanted, (job, role, line)
            seen += [int(ports[k]) for k in SINGLE + (HEAD_ONLY[1:] if role == "head" else ())]
            ranges.add((job, int(ports["min-worker-port"]), int(ports["max-worker-port"])))
    assert len(seen) == len(set(seen)) and not set(seen) & RAY_DEFAULTS, seen
    assert len(ranges) == 2, ranges  # a job's nodes share their block
    (_, low_a, high_a), (_, low_b, high_b) = sorted(ranges)
    assert high_a - low_a >= 999 and (high_a < low_b or high_b < low_a), ranges


def test_the_worker_port_block_can_be_set_and_a_bad_one_is_named(tmp_path):
    line = _start(tmp_path, "7", "head", SUBLAYER_RAY_WORKER_PORTS="30000-30999")
    assert "--min-worker-port=30000 --max-worker-port=30999" in line
    bin_dir = standins(tmp_path, {"ray": RECORD})
    out = node_sh("start", "head", "node-a", "127.0.0.1", "6390", SLURM_JOB_ID="7",
                  PATH=f"{bin_dir}:{os.environ['PATH']}", RAY_LOG=str(tmp_path / "ray.log"),
                  SUBLAYER_RAY_TEMP_DIR=str(tmp_path / "rt"), SUBLAYER_RAY_WORKER_PORTS="80-90")
    assert out.returncode == 2 and "SUBLAYER_RAY_WORKER_PORTS=80-90: expected MIN-MAX" in out.stderr
    assert not (tmp_path / "ray.log").exists()


# -- two jobs on one node, one of them with a slow head -------------------------------------
# job A's `ray`: the head starts only once A's worker waits for it; the worker's start
# records whether the head answered then
SLOW_HEAD = r"""#!/usr/bin/env bash
if [[ " $* " == *" --head "* ]]; then
  for _ in $(seq 1800); do grep -q "waiting up to" "$JOB_LOG" && break; sleep 0.1; done
  echo "head starts" >> "$RAY_LOG"
else
  for a in "$@"; do [[ $a == --address=* ]] && address=${a#*=}; done
  python3 -c 'import socket, sys; h, p = sys.argv[1].rsplit(":", 1)
socket.create_connection((h, int(p)), timeout=5).close()' "$address" \
    && echo "worker starts: the head answers" >> "$RAY_LOG" \
    || echo "worker starts: the head is silent" >> "$RAY_LOG"
fi
exec "$REAL_RAY" "$@"
"""
# a head (or a sweep) that starts only once the other job's cluster is up: both clusters
# are then up at the same time
AFTER_OTHER = r"""#!/usr/bin/env bash
if [[ " $* " == *" --head "* || ( ${1:-} == sweep && " $* " != *" --dry-run "* ) ]]; then
  for _ in $(seq 1800); do grep -q "node(s) up at" "$OTHER_LOG" && break; sleep 0.1; done
fi
exec "$REAL" "$@"
"""


@pytest.mark.slow
def test_two_jobs_share_a_node_and_a_worker_waits_for_a_slow_head(tmp_path):
    jobs = {"a": ("node-a node-b", "node-[a-b]"), "b": ("node-a", "node-a")}
    logs = {name: tmp_path / name / "job.log" for name in jobs}
    procs, envs = {}, {}
    with scratch("sublayer-home") as home:
        for n, (name, (nodes, nodelist)) in enumerate(jobs.items()):
            folder = tmp_path / name
            folder.mkdir()
            other = logs["b" if name == "a" else "a"]
            extra = ({"ray": SLOW_HEAD, "sublayer": AFTER_OTHER} if name == "a"
                     else {"ray": AFTER_OTHER})
            exp = write_experiment(folder, f"ports_{name}", orders=["sfsf"],
                                   tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
            envs[name] = job_env(
                home, folder, standins(folder, extra), exp, f"{os.getpid()}{n + 3}",
                RAY_PORT="", STANDIN_NODES=nodes, SLURM_JOB_NODELIST=nodelist,
                SLURM_JOB_NUM_NODES=str(len(nodes.split())), SUBLAYER_HEAD_WAIT_S="300",
                SUBLAYER_RAY_TEMP_DIR=str(home / f"rt-{name}"), JOB_LOG=str(logs[name]),
                OTHER_LOG=str(other), RAY_LOG=str(folder / "ray.log"),
                REAL_RAY=str(VENV_BIN / "ray"), REAL=str(VENV_BIN / ("ray" if name == "b"
                                                                    else "sublayer")))
        try:
            for name in jobs:
                procs[name] = start_job("sublayer-cpu.sbatch", envs[name], logs[name],
                                        tmp_path / name)
            codes = {name: proc.wait(timeout=540) for name, proc in procs.items()}
        finally:
            for proc in procs.values():
                kill_leftovers(proc, home)
    for name in jobs:
        assert codes[name] == 0, f"job {name} failed ({codes[name]}):\n{tail(logs[name])}"
        client = MlflowClient(f"sqlite:///{tmp_path / name / 'mlflow.db'}")
        exp = client.get_experiment_by_name(f"ports_{name}")
        runs = client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'trial'")
        assert [r.info.status for r in runs] == ["FINISHED"], (name, tail(logs[name]))
        for line in (tmp_path / name / "srun.log").read_text().splitlines():
            assert "--export=ALL" in line, line
    ray_a = (tmp_path / "a" / "ray.log").read_text()
    assert "head starts" in ray_a and "worker starts: the head answers" in ray_a, ray_a
    # the two jobs' Ray ports (every node of both) are all distinct, none of Ray's defaults
    starts = [ln for name in jobs for ln in logs[name].read_text().splitlines()
              if ": head with " in ln or ": worker with " in ln]
    assert len(starts) == 3, starts
    ports = [int(p) for ln in starts for k, p in _ports(ln).items()
             if k in SINGLE + HEAD_ONLY[1:]]
    heads = [int(re.search(r"up at 127\.0\.0\.1:(\d+)", logs[n].read_text())[1]) for n in jobs]
    assert len(set(ports + heads)) == len(ports + heads) == 3 * 6 + 2 * len(HEAD_ONLY), starts
    assert not set(ports + heads) & RAY_DEFAULTS
