#!/usr/bin/env bash
# A Ray cluster over the nodes of a Slurm allocation, then one `sublayer sweep` against it.
#
# Ray's documented Slurm pattern: the head on the first node (`srun -w HEAD ray start
# --head --block`), a worker on every other node (`srun -w NODE ray start --address`),
# then the driver (`sublayer sweep --address HEAD:PORT`) on the batch host. Called by the
# sbatch scripts beside it (sublayer-cpu.sbatch, sublayer-gpu.sbatch); ray-node.sh is
# what runs on each node. In order:
#
#  1. Checks, before anything starts (exit 2 with the reason): the GPUs Slurm granted
#     (a GPU job granted none stops here, naming the variables read and the #SBATCH
#     options to use), the node list, the head's address, the experiment itself
#     (`sublayer sweep --dry-run`).
#  2. One `srun` step per node runs `ray-node.sh start`: `ray start --block` with the
#     node's own GPU count (read from that step's Slurm variables), the step's CPUs, a
#     temp folder private to the job (0700) and ports of the job's own: the head's port
#     and every other port Ray opens (the dashboard's and agents' included) chosen free
#     on the node, the worker processes' ports a block by job id, so two jobs can share a
#     node without --exclusive. A worker waits for the head to answer before its
#     `ray start` (SUBLAYER_HEAD_WAIT_S). Every `srun` passes --export=ALL: the steps get
#     the job's environment (the token, SUBLAYER_*) also where the site's default is
#     --export=NONE. Each step asks for its share explicitly:
#     `--nodes=1 --ntasks=1 --cpus-per-task=CPUS --gres=gpu:GPUS` (no --gres when 0),
#     without --exact or --overlap: one step per node holds that node's share for the
#     whole job. The job-level GPU request variables (SLURM_GPUS, SLURM_GPUS_PER_NODE,
#     SLURM_GPUS_PER_TASK, SLURM_GPUS_PER_SOCKET, SLURM_TRES_PER_TASK) are removed from
#     srun's environment, so a step never inherits a second, conflicting GPU request
#     (e.g. --gpus=8 over two nodes would ask 8 on one node). The short steps (the head's
#     address; copying logs) use --overlap: they run beside the Ray steps, never wait.
#  3. The driver runs in the background (SIGINT restored: a background job of a script
#     ignores it) and the script `wait`s, so that signals reach the trap below.
#  4. On exit (any way out, SIGTERM from scancel or the hard limit included): the sweep,
#     if still running, gets SIGINT (Tune stops it cleanly); the Ray steps are stopped;
#     each node's Ray logs are copied into JOB_DIR/ray-logs/NODE/SESSION/logs/ (one
#     SESSION folder per run of the job); each node's Ray temp folder is removed.
#  Exit status: the sweep's (0, 1 failed trials, 2 bad input, 75 MLflow outage, 130
#  interrupted); 2 for a check that failed; 1 when the Ray cluster did not come up; 0
#  after a requeue.
#
# Time limits and preemption: the sbatch scripts ask `#SBATCH --signal=B:USR1@300`
# (USR1 to this batch shell only, 300 s before the limit) and `#SBATCH --requeue`. On
# USR1 the sweep gets SIGINT: Tune saves its state, stops the trials (each keeps its
# last checkpoint: at most train.eval_every steps are trained again) and the driver
# exits 130 with every open MLflow run KILLED; then the Ray cluster is stopped, its logs
# copied, and `scontrol requeue $SLURM_JOB_ID` puts the job back in the queue. When it
# starts again (SLURM_RESTART_COUNT >= 1, the same SLURM_JOB_ID) the sweep runs with
# `--resume`: finished trials are kept as they are, interrupted ones continue from their
# checkpoint. Whether the sweep had started is JOB_DIR/sweep-started (if not, the
# requeued job starts it afresh). A sweep that ends on its own after the signal (status 0
# or a failure) is not requeued. A job preempted with requeue (SIGTERM, then started
# again by Slurm) resumes the same way.
#
# Variables it reads:
#   SUBLAYER_CONFIG        experiment YAML to sweep (required)
#   SUBLAYER_SWEEP_ARGS    extra `sublayer sweep` arguments, e.g. "--tracking-uri URI";
#                          --resume is added by itself in a requeued job
#   SUBLAYER_VENV          a virtualenv to activate on every node (default: none; the job's PATH)
#   SUBLAYER_EXPECT_GPUS   1 (set by sublayer-gpu.sbatch): a node without GPUs is an error
#   SUBLAYER_NUM_GPUS      GPUs per node for Ray, overriding what Slurm granted (sublayer-cpu
#                          .sbatch sets 0); also what each step asks (--gres=gpu:N)
#   SUBLAYER_NUM_CPUS      CPUs per node for Ray and each step (default: SLURM_CPUS_PER_TASK
#                          times the tasks per node, else SLURM_CPUS_ON_NODE, else 1)
#   SUBLAYER_HEAD_IP       the head's address (default: the first IPv4 address of the head
#                          node in `hostname --ip-address`, then `hostname -I`, a
#                          non-loopback one first; IPv6 is skipped)
#   SUBLAYER_JOB_DIR       the job's folder: ray-logs/ and the marker sweep-started
#                          (default: $SLURM_SUBMIT_DIR/sublayer-$SLURM_JOB_ID, mode 0700;
#                          the job's own output is sbatch's --output, sublayer-JOBID.log)
#   SUBLAYER_RAY_TEMP_DIR  Ray's temp folder on every node (default:
#                          /tmp/sublayer-ray-$SLURM_JOB_ID, mode 0700, removed at the end;
#                          keep it short: Ray's socket paths must fit in 107 characters)
#   SUBLAYER_RAY_WAIT_S    how long to wait for every node to join (default 600)
#   SUBLAYER_HEAD_WAIT_S   how long each worker waits for the head to answer before its
#                          `ray start` (default: SUBLAYER_RAY_WAIT_S)
#   SUBLAYER_RAY_WORKER_PORTS  MIN-MAX for Ray's worker processes on each node (default: a
#                          block of 1000 ports by job id; ray-node.sh)
#   RAY_PORT               the head's GCS port (default: one free on the head node)
#   RAY_AUTH_TOKEN         the cluster's token; a fresh one is made for this job when unset.
#                          Token auth stays on (RAY_AUTH_MODE=token): every node and the driver
#                          get the token through the job's environment (srun --export=ALL),
#                          never on a command line, never printed.
#   SUBLAYER_SLURM_DIR     (read by the sbatch scripts) the folder of this script
#                          (default: $SLURM_SUBMIT_DIR/docker/slurm)
#   SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_SUBMIT_DIR, SLURM_RESTART_COUNT,
#   SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE, and the GPU variables ray-node.sh reads
#   (SLURM_GPUS_ON_NODE, SLURM_STEP_GPUS, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES,
#   SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK with SLURM_NTASKS_PER_NODE): set by Slurm.
set -euo pipefail

me="ray-cluster.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_sh="$here/ray-node.sh"
say() { echo "$me: $*"; }
die() { echo "$me: $*" >&2; exit 2; }

: "${SUBLAYER_CONFIG:?set SUBLAYER_CONFIG to the experiment YAML to sweep}"
[[ -n ${SLURM_JOB_ID:-} ]] || die "SLURM_JOB_ID is not set: submit this through sbatch (docker/slurm/*.sbatch)"
WAIT_S="${SUBLAYER_RAY_WAIT_S:-600}"
[[ $WAIT_S =~ ^[0-9]+$ ]] || die "SUBLAYER_RAY_WAIT_S=$WAIT_S: expected a whole number of seconds"
export SUBLAYER_HEAD_WAIT_S="${SUBLAYER_HEAD_WAIT_S:-$WAIT_S}"
JOB_DIR="${SUBLAYER_JOB_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/sublayer-$SLURM_JOB_ID}"
export SUBLAYER_RAY_TEMP_DIR="${SUBLAYER_RAY_TEMP_DIR:-/tmp/sublayer-ray-$SLURM_JOB_ID}"
read -r -a sweep_args <<< "${SUBLAYER_SWEEP_ARGS:-}"

# USR1 (the time limit is near) may come at any time: before the sweep runs, it only
# marks the job for a requeue; while it runs, the sweep gets SIGINT
ray_pids=() sweep_pid="" sweep_ran="" stop_requested="" trapped="" finished=""

# shellcheck disable=SC2329  # invoked by the trap below
on_usr1() {
  trapped=1
  [[ -n $stop_requested ]] && return
  stop_requested=1
  say "USR1: the job's time limit is near; stopping the sweep (Tune saves it), then requeueing job $SLURM_JOB_ID"
  if [[ -n $sweep_pid ]]; then kill -INT "$sweep_pid" 2>/dev/null || true; fi
}

trap on_usr1 USR1

if [[ -n "${SUBLAYER_VENV:-}" ]]; then
  # shellcheck disable=SC1091
  source "$SUBLAYER_VENV/bin/activate"
fi

# -- 1. checks ------------------------------------------------------------------------
# the GPUs of this (the first) node; every node checks its own again in its step
gpu_line="$(bash "$node_sh" require-gpus "$(hostname -s 2>/dev/null || echo 'the batch node')")"
GPUS="${gpu_line%% *}"
cpu_line="$(bash "$node_sh" cpus)"
CPUS="${cpu_line%% *}"

mapfile -t nodes < <(scontrol show hostnames "${SLURM_JOB_NODELIST:-}")
(( ${#nodes[@]} > 0 )) || die "SLURM_JOB_NODELIST names no node"
head_node="${nodes[0]}"

# srun with the job's environment (--export=ALL) but without its GPU request variables
# (header, 2.), and each Ray step's share
step() {
  env -u SLURM_GPUS -u SLURM_GPUS_PER_NODE -u SLURM_GPUS_PER_TASK \
      -u SLURM_GPUS_PER_SOCKET -u SLURM_TRES_PER_TASK srun --export=ALL "$@"
}
share=(--nodes=1 --ntasks=1 --cpus-per-task="$CPUS")
(( GPUS > 0 )) && share+=(--gres=gpu:"$GPUS")
short_step() { step --overlap --nodes=1 --ntasks=1 -w "$@"; }

if [[ -n ${SUBLAYER_HEAD_IP:-} ]]; then
  head_ip="$SUBLAYER_HEAD_IP"
else
  head_ip="$(short_step "$head_node" bash "$node_sh" ip)"
fi
if [[ -z ${RAY_PORT:-} ]]; then  # a port of this job's own: another job may share the node
  RAY_PORT="$(short_step "$head_node" bash "$node_sh" free-ports 1)"
fi
[[ $RAY_PORT =~ ^[0-9]+$ ]] || die "RAY_PORT=$RAY_PORT: expected a port number"
address="$head_ip:$RAY_PORT"

sublayer sweep "$SUBLAYER_CONFIG" --dry-run --address "$address" ${sweep_args[@]+"${sweep_args[@]}"} >/dev/null \
  || { status=$?; echo "$me: $SUBLAYER_CONFIG was refused (above); nothing was started" >&2; exit "$status"; }

export RAY_AUTH_MODE=token
if [[ -z "${RAY_AUTH_TOKEN:-}" ]]; then
  RAY_AUTH_TOKEN="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
fi
export RAY_AUTH_TOKEN
export RAY_USAGE_STATS_ENABLED="${RAY_USAGE_STATS_ENABLED:-0}"
# shellcheck disable=SC2174  # the job's folder is this user's only; its parent is theirs
mkdir -p -m 0700 -- "$JOB_DIR"
marker="$JOB_DIR/sweep-started"

# wait for these processes to end, even when a trapped signal interrupts `wait`
wait_all() {
  local pid
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do wait "$pid" 2>/dev/null; done
  done
}

# Stop the sweep (SIGINT: Tune stops it cleanly) and the Ray steps, copy each node's Ray
# logs into the job's folder, remove each node's Ray temp folder. Once; a TERM meanwhile
# (Slurm's, at the hard limit) does not cut it short: KILL comes KillWait seconds later.
finish() {
  [[ -n $finished ]] && return
  finished=1
  trap 'say "TERM: finishing the cleanup first"' TERM
  set +e
  if [[ -n $sweep_pid ]] && kill -0 "$sweep_pid" 2>/dev/null; then
    kill -INT "$sweep_pid" 2>/dev/null
    wait_all "$sweep_pid"
  fi
  if (( ${#ray_pids[@]} > 0 )); then
    kill "${ray_pids[@]}" 2>/dev/null
    wait_all "${ray_pids[@]}"
    local node pids=()
    for node in "${nodes[@]}"; do
      short_step "$node" bash "$node_sh" logs "$JOB_DIR/ray-logs" "$node" & pids+=($!)
    done
    wait_all ${pids[@]+"${pids[@]}"}
    pids=()
    for node in "${nodes[@]}"; do  # after every copy: two "nodes" may share a temp folder
      short_step "$node" bash "$node_sh" clean & pids+=($!)
    done
    wait_all ${pids[@]+"${pids[@]}"}
  fi
  set -e
}
requeue() {
  finish
  if scontrol requeue "$SLURM_JOB_ID"; then
    say "job $SLURM_JOB_ID requeued: when it starts again it continues the sweep"
    exit 0
  fi
  echo "$me: \`scontrol requeue $SLURM_JOB_ID\` failed (was the job submitted with --requeue?);" \
       "submit it again with SUBLAYER_SWEEP_ARGS=--resume to continue the sweep" >&2
  exit 130
}
trap finish EXIT
trap 'exit 143' TERM

# -- 2. the Ray cluster ---------------------------------------------------------------
[[ -z $stop_requested ]] || requeue  # the time was up before anything started
say "job $SLURM_JOB_ID: head $head_node ($address), ${#nodes[@]} node(s), $CPUS CPU(s) ${cpu_line#* } and $GPUS GPU(s) ${gpu_line#* } each; Ray's logs go to $JOB_DIR/ray-logs/"
step "${share[@]}" -w "$head_node" \
  bash "$node_sh" start head "$head_node" "$head_ip" "$RAY_PORT" &
ray_pids+=($!)
for (( i = 1; i < ${#nodes[@]}; i++ )); do
  step "${share[@]}" -w "${nodes[i]}" bash "$node_sh" start worker "${nodes[i]}" "$address" &
  ray_pids+=($!)
done

# Wait until every node has joined (a condition, not a fixed sleep); stop at once when a
# node's step ends (its error is above)
python3 - "$address" "${#nodes[@]}" "$WAIT_S" "${ray_pids[@]}" <<'PY'
import socket, sys, time
address, want, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
pids = [int(p) for p in sys.argv[4:]]
host, port = address.rsplit(":", 1)

def listening():  # ray.init on a head not yet up blocks for minutes: knock first
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return True
    except OSError:
        return False

def ended(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True

deadline = time.monotonic() + wait_s
seen, error = 0, ""
while time.monotonic() < deadline:
    if any(ended(p) for p in pids):
        sys.exit("ray-cluster.sh: a node's Ray step ended before the cluster was up (see above)")
    if not listening():
        error = f"nothing listens on {address} yet"
        time.sleep(1)
        continue
    try:
        import ray
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        seen = sum(1 for n in ray.nodes() if n.get("Alive"))
        have = ray.cluster_resources()
        ray.shutdown()
        if seen >= want:
            print(f"ray-cluster.sh: {seen} node(s) up at {address}: "
                  f"{have.get('CPU', 0):g} CPU(s), {have.get('GPU', 0):g} GPU(s)", flush=True)
            sys.exit(0)
    except Exception as exc:  # the head is still starting
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        try:
            ray.shutdown()
        except Exception:
            pass
    time.sleep(2)
sys.exit(f"ray-cluster.sh: only {seen} of {want} node(s) joined {address} in {wait_s:.0f} s {error}")
PY

# -- 3. the sweep ---------------------------------------------------------------------
rc=0
if [[ -z $stop_requested ]]; then
  if (( ${SLURM_RESTART_COUNT:-0} > 0 )); then
    if [[ ! -e $marker ]]; then
      say "restart ${SLURM_RESTART_COUNT} of job $SLURM_JOB_ID: its sweep had not started; starting it"
    elif [[ " ${sweep_args[*]+${sweep_args[*]}} " != *" --resume "* ]]; then
      say "restart ${SLURM_RESTART_COUNT} of job $SLURM_JOB_ID: resuming its sweep (--resume)"
      sweep_args+=(--resume)
    fi
  fi
  touch "$marker"
  sweep_ran=1
  (trap - INT; exec sublayer sweep "$SUBLAYER_CONFIG" --address "$address" ${sweep_args[@]+"${sweep_args[@]}"}) &
  sweep_pid=$!
  while :; do  # a trapped signal interrupts `wait` (status 138 for USR1): wait again
    trapped="" rc=0
    wait "$sweep_pid" || rc=$?
    (( rc == 138 )) && [[ -n $trapped ]] || break
  done
  sweep_pid=""
fi

# -- 4. requeue after the warning signal ----------------------------------------------
# (the sweep stopped by it: status 130; or the signal came before the sweep started)
if [[ -n $stop_requested ]] && { [[ -z $sweep_ran ]] || (( rc == 130 )); }; then
  requeue
fi
exit "$rc"
