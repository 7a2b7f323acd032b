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
#   ray-node.sh start head NODE IP PORT   (checks the GPUs as require-gpus does)
#   ray-node.sh start worker NODE HEAD_IP:PORT
#                                      `ray start --block` with this node's CPUs and GPUs
#                                      and a private temp folder (exec: srun's signals
#                                      reach Ray)
#   ray-node.sh logs DEST NODE         copy Ray's logs of this node to DEST/NODE/SESSION/
#   ray-node.sh clean                  remove this node's Ray temp folder
#
# Variables (exported by ray-cluster.sh, or set by Slurm in the step):
#   SUBLAYER_RAY_TEMP_DIR  Ray's temp folder on this node (required by start/logs/clean);
#                          created 0700, refused when it is a link or someone else's
#   SUBLAYER_NUM_GPUS      GPUs to give Ray, overriding what Slurm granted (e.g. 0)
#   SUBLAYER_NUM_CPUS      CPUs to give Ray (default: SLURM_CPUS_PER_TASK, else nproc)
#   SUBLAYER_EXPECT_GPUS   1: a node with no GPU is an error (exit 2), not a CPU node
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
  for item in "${items[@]}"; do
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
  for item in "${items[@]}"; do
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

start() {
  local role=$1 node=$2 gpus source cpus dir
  gpu_count
  require_gpus "$gpus" "$source" "$node"
  cpus="${SUBLAYER_NUM_CPUS:-${SLURM_CPUS_PER_TASK:-$(nproc)}}"
  [[ $cpus =~ ^[0-9]+$ ]] || fail "CPUs for Ray: '$cpus' (SUBLAYER_NUM_CPUS / SLURM_CPUS_PER_TASK) is not a count"
  dir="$(temp_dir)"
  make_temp "$dir"
  echo "$me: $node: $role with $cpus CPU(s) and $gpus GPU(s) ($source), temp folder $dir"
  local -a common=(--num-cpus="$cpus" --num-gpus="$gpus" --temp-dir="$dir" --disable-usage-stats --block)
  if [[ $role == head ]]; then
    exec ray start --head --node-ip-address="$3" --port="$4" --include-dashboard=false "${common[@]}"
  fi
  # a worker lets Ray choose its address: the interface that routes to the head
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
  start)
    [[ ${2:-} == head && $# -eq 5 ]] || [[ ${2:-} == worker && $# -eq 4 ]] \
      || fail "usage: $me start head NODE IP PORT | start worker NODE HEAD_IP:PORT"
    start "${@:2}" ;;
  logs)
    [[ $# -eq 3 ]] || fail "usage: $me logs DEST NODE"
    collect_logs "$2" "$3" ;;
  clean) clean ;;
  *) fail "usage: $me gpus [--explain] | require-gpus [NODE] | cpus | ip | start ... | logs DEST NODE | clean" ;;
esac
