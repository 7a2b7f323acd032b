#!/usr/bin/env bash
# One node's part of the Ray cluster of a Slurm job: ray-cluster.sh runs this inside an
# `srun` step on each node (so it reads that node's own Slurm variables), and runs
# `gpus` on the batch host to check the job before anything starts.
#
#   ray-node.sh gpus [--explain]       the GPUs this node gives Ray (see gpu_count below);
#                                      --explain adds the variable the count came from
#   ray-node.sh require-gpus [NODE]    "COUNT (SOURCE)", or exit 2 naming what was read and
#                                      the #SBATCH options to use when SUBLAYER_EXPECT_GPUS=1
#                                      and the count is 0
#   ray-node.sh cpus                   the CPUs of the job on this node (see job_cpus below)
#   ray-node.sh ip                     this node's address for the Ray head: the first IPv4
#                                      of `hostname --ip-address`, then `hostname -I`,
#                                      a non-loopback one first (IPv6 is skipped)
#   ray-node.sh free-ports [N]         N (default 1) TCP ports free on this node now
#   ray-node.sh wait-head HEAD_IP:PORT wait until the head answers (SUBLAYER_HEAD_WAIT_S)
#   ray-node.sh start head NODE IP PORT   (checks the GPUs as require-gpus does)
#   ray-node.sh start worker NODE HEAD_IP:PORT
#                                      `ray start --block` with this node's CPUs and GPUs,
#                                      a private temp folder and ports of this job's own
#                                      (see ray_ports below); a worker first waits for the
#                                      head (wait-head). exec: srun's signals reach Ray
#   ray-node.sh logs DEST NODE         copy Ray's logs of this node to DEST/NODE/SESSION/
#   ray-node.sh clean                  remove this node's Ray temp folder
#
# Variables (exported by ray-cluster.sh, or set by Slurm in the step):
#   SUBLAYER_RAY_TEMP_DIR  Ray's temp folder on this node (required by start/logs/clean);
#                          created 0700, refused when it is a link or someone else's
#   SUBLAYER_NUM_GPUS      GPUs to give Ray, overriding what Slurm granted (e.g. 0)
#   SUBLAYER_NUM_CPUS      CPUs to give Ray (default: SLURM_CPUS_PER_TASK, else nproc)
#   SUBLAYER_EXPECT_GPUS   1: a node with no GPU is an error (exit 2), not a CPU node
#   SUBLAYER_HEAD_WAIT_S   how long a worker waits for the head to answer before its own
#                          `ray start` (default 600; a slow shared file system delays the
#                          head's start); past it the step ends with exit 2; 0: no wait
#   SUBLAYER_RAY_WORKER_PORTS  MIN-MAX: the ports of Ray's worker processes on each node
#                          (default: one of 8 blocks of 1000 in 10002-18001, by job id)
#   SLURM_JOB_ID           picks the default worker-port block
#   SLURM_GPUS_ON_NODE, SLURM_STEP_GPUS, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES,
#   SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK, SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE
#                          what Slurm granted, read in that order (gpu_count)
set -euo pipefail

me="ray-node.sh"
fail() { echo "$me: $*" >&2; exit 2; }

# "0,1,2-3" (indices and ranges) or "GPU-uuid,..." -> how many devices, in $counted
count_list() {
  local name=$1 value=$2 item
  local -a items
  counted=0
  IFS=, read -r -a items <<< "$value"
  for item in ${items[@]+"${items[@]}"}; do
    item="${item// /}"
    [[ -z $item ]] && continue
    if [[ $item =~ ^([0-9]+)-([0-9]+)$ ]]; then
      (( 10#${BASH_REMATCH[2]} >= 10#${BASH_REMATCH[1]} )) || fail "$name=$value: expected GPU indices like 0,1 or 0-3 (a range goes up)"
      counted=$(( counted + 10#${BASH_REMATCH[2]} - 10#${BASH_REMATCH[1]} + 1 ))
    else
      counted=$(( counted + 1 ))
    fi
  done
}

# "4", "a100:4" or "a100:2,v100:1" (Slurm's [type:]count, comma-separated) -> the sum, in $counted
count_typed() {
  local name=$1 value=$2 item
  local -a items
  counted=0
  IFS=, read -r -a items <<< "$value"
  for item in ${items[@]+"${items[@]}"}; do
    item="${item##*:}"
    [[ $item =~ ^[0-9]+$ ]] || fail "$name=$value: expected a count N or TYPE:N (comma-separated)"
    counted=$(( counted + 10#$item ))
  done
}

# Tasks of this job on this node: --ntasks-per-node, else SLURM_TASKS_PER_NODE ("2(x3),1")
tasks_per_node() {
  local value="${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-1}}"
  tasks="${value%%[(,]*}"
  [[ $tasks =~ ^[0-9]+$ ]] \
    || fail "SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE=$value: expected a count of tasks"
}

# The GPUs Slurm granted on this node, from the strongest evidence to the weakest:
#   SLURM_GPUS_ON_NODE                 set for --gres=gpu:N, --gpus-per-node, --gpus-per-task
#   SLURM_STEP_GPUS, SLURM_JOB_GPUS    the granted GPU indices (a step's, then the job's)
#   CUDA_VISIBLE_DEVICES               what the step may see ("", -1 or NoDevFiles: none)
#   SLURM_GPUS_PER_NODE                --gpus-per-node=[type:]N
#   SLURM_GPUS_PER_TASK                --gpus-per-task=[type:]N, times the tasks per node
# and 0 when none is set. SUBLAYER_NUM_GPUS overrides them all. Sets $gpus and $source
# (the variable the count came from).
gpu_count() {
  local var value counted tasks
  for var in SUBLAYER_NUM_GPUS SLURM_GPUS_ON_NODE; do
    value="${!var:-}"
    if [[ -n $value ]]; then
      [[ $value =~ ^[0-9]+$ ]] || fail "$var=$value: expected a whole number of GPUs (e.g. 0 or 4)"
      gpus=$(( 10#$value )) source="$var=$value"
      return
    fi
  done
  for var in SLURM_STEP_GPUS SLURM_JOB_GPUS; do
    value="${!var:-}"
    if [[ -n $value ]]; then
      count_list "$var" "$value"
      gpus=$counted source="$var=$value"
      return
    fi
  done
  if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
    value="$CUDA_VISIBLE_DEVICES" source="CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
    if [[ -z ${value// /} || $value == NoDevFiles || $value == -1* ]]; then
      gpus=0
    else
      count_list CUDA_VISIBLE_DEVICES "$value"
      gpus=$counted
    fi
    return
  fi
  if [[ -n ${SLURM_GPUS_PER_NODE:-} ]]; then
    count_typed SLURM_GPUS_PER_NODE "$SLURM_GPUS_PER_NODE"
    gpus=$counted source="SLURM_GPUS_PER_NODE=$SLURM_GPUS_PER_NODE"
    return
  fi
  if [[ -n ${SLURM_GPUS_PER_TASK:-} ]]; then
    count_typed SLURM_GPUS_PER_TASK "$SLURM_GPUS_PER_TASK"
    tasks_per_node
    gpus=$(( counted * tasks )) source="SLURM_GPUS_PER_TASK=$SLURM_GPUS_PER_TASK x $tasks task(s)"
    return
  fi
  gpus=0 source="no GPU variable set"
}

# The CPUs of this job on the batch node (what each node's Ray step asks for): the
# override, else --cpus-per-task times the tasks per node, else SLURM_CPUS_ON_NODE, else 1.
# Sets $cpus and $source. (Inside a Ray step, which has one task, `start` reads the step's
# own SLURM_CPUS_PER_TASK instead.)
job_cpus() {
  local var value tasks
  for var in SUBLAYER_NUM_CPUS SLURM_CPUS_PER_TASK SLURM_CPUS_ON_NODE; do
    value="${!var:-}"
    [[ -n $value ]] || continue
    [[ $value =~ ^[1-9][0-9]*$ ]] || fail "$var=$value: expected a count of CPUs (at least 1)"
    cpus=$value source="$var=$value"
    if [[ $var == SLURM_CPUS_PER_TASK ]]; then
      tasks_per_node
      cpus=$(( value * tasks )) source="$source x $tasks task(s)"
    fi
    return
  done
  cpus=1 source="no CPU variable set"
}

# exit 2 when this job wants GPUs and the node has none (named: what was read, what to ask)
require_gpus() {
  local count=$1 source=$2 where=$3
  [[ ${SUBLAYER_EXPECT_GPUS:-0} == 1 && $count == 0 ]] || return 0
  fail "$where: this is a GPU job (SUBLAYER_EXPECT_GPUS=1) but Slurm granted no GPU ($source).
  Read, in order: SUBLAYER_NUM_GPUS, SLURM_GPUS_ON_NODE, SLURM_STEP_GPUS, SLURM_JOB_GPUS,
  CUDA_VISIBLE_DEVICES, SLURM_GPUS_PER_NODE, SLURM_GPUS_PER_TASK (x SLURM_NTASKS_PER_NODE).
  Ask Slurm for GPUs with one of: #SBATCH --gres=gpu:N, #SBATCH --gpus-per-node=N,
  #SBATCH --gpus-per-task=N (your site may need a GPU partition, -p/--partition);
  or submit docker/slurm/sublayer-cpu.sbatch for a sweep on CPUs."
}

node_ip() {
  local words word loopback=""
  words="$(hostname --ip-address 2>/dev/null || true) $(hostname -I 2>/dev/null || true)"
  for word in $words; do
    [[ $word =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || continue  # IPv4 only
    if [[ $word == 127.* ]]; then
      loopback="${loopback:-$word}"
    else
      echo "$word"
      return
    fi
  done
  [[ -n $loopback ]] && { echo "$loopback"; return; }
  fail "$(hostname 2>/dev/null || echo this node): no IPv4 address in \`hostname --ip-address\` or \`hostname -I\` (${words// / }); set SUBLAYER_HEAD_IP to the head node's address"
}

temp_dir() {
  local dir="${SUBLAYER_RAY_TEMP_DIR:-}"
  [[ -n $dir ]] || fail "SUBLAYER_RAY_TEMP_DIR is not set (ray-cluster.sh sets it)"
  echo "$dir"
}

# Ray's temp folder: this user's only (0700); a link or someone else's folder is refused
make_temp() {
  local dir=$1
  # shellcheck disable=SC2174  # only the folder itself is Ray's (its parent: /tmp or TMPDIR)
  mkdir -p -m 0700 -- "$dir"
  if [[ -L $dir || ! -O $dir ]]; then
    fail "$dir: Ray's temp folder is a link or belongs to someone else; set SUBLAYER_RAY_TEMP_DIR"
  fi
  chmod 0700 -- "$dir"
}

# N TCP ports that nothing on this node listens on now (all held at once, so distinct),
# none of Ray's defaults (which a Ray started without this script takes)
free_ports() {
  local count=${1:-1}
  [[ $count =~ ^[1-9][0-9]*$ ]] || fail "free-ports: expected a count, got '$count'"
  python3 -c 'import socket, sys
defaults = {6379, 8265, 10001, 52365}  # GCS, dashboard, client server, agent
held, ports = [], []
while len(ports) < int(sys.argv[1]):
    s = socket.socket()
    s.bind(("", 0))
    held.append(s)
    if s.getsockname()[1] not in defaults:
        ports.append(s.getsockname()[1])
print(" ".join(map(str, ports)))
for s in held:
    s.close()' "$count"
}

# Wait until the head at HOST:PORT accepts a connection: SUBLAYER_HEAD_WAIT_S (default
# 600) seconds at most, then exit 2 naming the variable; 0: no wait (`ray start` alone)
wait_head() {
  local address=$1 wait_s="${SUBLAYER_HEAD_WAIT_S:-600}"
  [[ $wait_s =~ ^[0-9]+$ ]] || fail "SUBLAYER_HEAD_WAIT_S=$wait_s: expected a whole number of seconds"
  [[ $address =~ ^(.+):([0-9]+)$ ]] || fail "wait-head: expected HEAD_IP:PORT, got '$address'"
  (( 10#$wait_s > 0 )) || return 0
  echo "$me: waiting up to $wait_s s for the head at $address"
  python3 -c 'import socket, sys, time
host, port, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + wait_s
while True:
    try:
        socket.create_connection((host, port), timeout=2).close()
        sys.exit(0)
    except OSError:
        if time.monotonic() >= deadline:
            sys.exit(1)
        time.sleep(1)' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "$wait_s" \
    || fail "the head at $address did not answer in $wait_s s (SUBLAYER_HEAD_WAIT_S); see the head's step above"
}

# The ports of this node's Ray, its own for this job, so that two jobs share a node:
# every single port chosen free on this node now (node manager, object manager, metrics,
# the dashboard agent's two, the runtime-env agent's; on the head also the dashboard,
# which Ray starts even with --include-dashboard=false, and the Ray client server where
# Ray has it), and
# a block of worker ports by job id. Sets the array $ports (`ray start` options).
ray_ports() {
  local role=$1 range="${SUBLAYER_RAY_WORKER_PORTS:-}" low high slot job="${SLURM_JOB_ID:-0}"
  local -a free
  if [[ -z $range ]]; then
    [[ $job =~ ^[0-9]+$ ]] || job=0
    slot=$(( 10#$job % 8 ))
    range="$(( 10002 + slot * 1000 ))-$(( 11001 + slot * 1000 ))"
  fi
  [[ $range =~ ^([0-9]+)-([0-9]+)$ ]] && (( BASH_REMATCH[1] >= 1024 && BASH_REMATCH[2] > BASH_REMATCH[1] + 100 && BASH_REMATCH[2] < 65536 )) \
    || fail "SUBLAYER_RAY_WORKER_PORTS=$range: expected MIN-MAX (1024 <= MIN, MAX < 65536, at least 100 ports)"
  low=${BASH_REMATCH[1]} high=${BASH_REMATCH[2]}
  read -r -a free <<< "$(free_ports 8)"
  (( ${#free[@]} == 8 )) || fail "could not find 8 free ports on this node"
  ports=(--node-manager-port="${free[0]}" --object-manager-port="${free[1]}"
         --metrics-export-port="${free[2]}" --dashboard-agent-listen-port="${free[3]}"
         --dashboard-agent-grpc-port="${free[4]}" --runtime-env-agent-port="${free[5]}"
         --min-worker-port="$low" --max-worker-port="$high")
  if [[ $role == head ]]; then
    ports+=(--dashboard-port="${free[6]}")
    # Ray starts its client server (on 10001) when its dependency (grpc) is there, and
    # refuses the option when it is not
    if python3 -c 'import grpc' 2>/dev/null; then
      ports+=(--ray-client-server-port="${free[7]}")
    fi
  fi
}

start() {
  local role=$1 node=$2 gpus source cpus dir
  local -a ports
  gpu_count
  require_gpus "$gpus" "$source" "$node"
  cpus="${SUBLAYER_NUM_CPUS:-${SLURM_CPUS_PER_TASK:-$(nproc)}}"
  [[ $cpus =~ ^[0-9]+$ ]] || fail "CPUs for Ray: '$cpus' (SUBLAYER_NUM_CPUS / SLURM_CPUS_PER_TASK) is not a count"
  dir="$(temp_dir)"
  make_temp "$dir"
  ray_ports "$role"
  echo "$me: $node: $role with $cpus CPU(s) and $gpus GPU(s) ($source), temp folder $dir, ports ${ports[*]}"
  local -a common=(--num-cpus="$cpus" --num-gpus="$gpus" --temp-dir="$dir" --disable-usage-stats
                   "${ports[@]}" --block)
  if [[ $role == head ]]; then
    exec ray start --head --node-ip-address="$3" --port="$4" --include-dashboard=false "${common[@]}"
  fi
  # a worker lets Ray choose its address: the interface that routes to the head
  wait_head "$3"
  exec ray start --address="$3" "${common[@]}"
}

collect_logs() {
  local dest=$1 node=$2 dir session copied=0
  dir="$(temp_dir)"
  for session in "$dir"/session_[0-9]*; do
    [[ -d $session/logs && ! -L $session ]] || continue
    # shellcheck disable=SC2174  # each level made 0700 in turn: logs are this user's only
    mkdir -p -m 0700 -- "$dest" "$dest/$node" "$dest/$node/${session##*/}"
    cp -R -- "$session/logs" "$dest/$node/${session##*/}/"
    copied=$(( copied + 1 ))
  done
  echo "$me: $node: Ray's logs of $copied session(s) copied to $dest/$node/"
}

clean() {
  local dir
  dir="$(temp_dir)"
  [[ -d $dir && ! -L $dir && -O $dir ]] || return 0
  rm -rf -- "$dir"
}

case "${1:-}" in
  gpus)
    gpu_count
    if [[ ${2:-} == --explain ]]; then echo "$gpus ($source)"; else echo "$gpus"; fi ;;
  require-gpus)
    gpu_count
    require_gpus "$gpus" "$source" "${2:-this node}"
    echo "$gpus ($source)" ;;
  cpus)
    job_cpus
    echo "$cpus ($source)" ;;
  ip) node_ip ;;
  free-ports) free_ports "${2:-1}" ;;
  wait-head)
    [[ $# -eq 2 ]] || fail "usage: $me wait-head HEAD_IP:PORT"
    wait_head "$2" ;;
  start)
    [[ ${2:-} == head && $# -eq 5 ]] || [[ ${2:-} == worker && $# -eq 4 ]] \
      || fail "usage: $me start head NODE IP PORT | start worker NODE HEAD_IP:PORT"
    start "${@:2}" ;;
  logs)
    [[ $# -eq 3 ]] || fail "usage: $me logs DEST NODE"
    collect_logs "$2" "$3" ;;
  clean) clean ;;
  *) fail "usage: $me gpus [--explain] | require-gpus [NODE] | cpus | ip | free-ports [N] | wait-head HEAD_IP:PORT | start ... | logs DEST NODE | clean" ;;
esac
