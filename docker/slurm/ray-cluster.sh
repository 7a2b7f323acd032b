#!/usr/bin/env bash
# A Ray cluster over the nodes of a Slurm allocation, then one `sublayer sweep` against it.
#
# Ray's documented Slurm pattern: the head on the first node (`srun -w HEAD ray start
# --head --block`), a worker on every other node (`srun -w NODE ray start --address`),
# then the driver (`sublayer sweep --address HEAD:PORT`) on the batch host. Called by the
# sbatch scripts beside it (sublayer-cpu.sbatch, sublayer-gpu.sbatch); it reads:
#
#   SUBLAYER_CONFIG      experiment YAML to sweep (required)
#   SUBLAYER_SWEEP_ARGS  extra `sublayer sweep` arguments (e.g. "--resume"; default none)
#   SUBLAYER_VENV        a virtualenv to activate on every node (default: none; the job's PATH)
#   RAY_PORT             the head's GCS port (default 6379)
#   RAY_AUTH_TOKEN       the cluster's token; a fresh one is made for this job when unset.
#                        Token auth stays on (RAY_AUTH_MODE=token): every node and the driver
#                        get the token through the job's environment (srun --export=ALL),
#                        never on a command line, never printed.
#   SUBLAYER_RAY_WAIT_S  how long to wait for every node to join (default 300)
#   SLURM_*              set by Slurm: the node list, CPUs and GPUs per task.
set -euo pipefail

: "${SUBLAYER_CONFIG:?set SUBLAYER_CONFIG to the experiment YAML to sweep}"
RAY_PORT="${RAY_PORT:-6379}"
WAIT_S="${SUBLAYER_RAY_WAIT_S:-300}"
CPUS="${SLURM_CPUS_PER_TASK:-1}"
GPUS="${SLURM_GPUS_PER_TASK:-0}"

if [[ -n "${SUBLAYER_VENV:-}" ]]; then
  # shellcheck disable=SC1091
  source "$SUBLAYER_VENV/bin/activate"
fi

export RAY_AUTH_MODE=token
if [[ -z "${RAY_AUTH_TOKEN:-}" ]]; then
  RAY_AUTH_TOKEN="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
fi
export RAY_AUTH_TOKEN
export RAY_USAGE_STATS_ENABLED="${RAY_USAGE_STATS_ENABLED:-0}"

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
if (( ${#nodes[@]} == 0 )); then
  echo "ray-cluster.sh: SLURM_JOB_NODELIST names no node" >&2
  exit 2
fi
head_node="${nodes[0]}"
node_ip() { srun --nodes=1 --ntasks=1 -w "$1" hostname --ip-address | awk '{print $1}'; }
head_ip="$(node_ip "$head_node")"
address="$head_ip:$RAY_PORT"

# The Ray processes run under srun in the background; stop them when the sweep ends.
cleanup() {
  local pids
  pids="$(jobs -p)"
  if [[ -n "$pids" ]]; then
    kill $pids 2>/dev/null || true
    wait $pids 2>/dev/null || true
  fi
}
trap cleanup EXIT

echo "ray-cluster.sh: head $head_node ($address), ${#nodes[@]} node(s), $CPUS CPU(s) and $GPUS GPU(s) each"
srun --nodes=1 --ntasks=1 -w "$head_node" \
  ray start --head --node-ip-address="$head_ip" --port="$RAY_PORT" \
  --num-cpus="$CPUS" --num-gpus="$GPUS" --include-dashboard=false --disable-usage-stats --block &

for node in "${nodes[@]:1}"; do
  srun --nodes=1 --ntasks=1 -w "$node" \
    ray start --address="$address" --node-ip-address="$(node_ip "$node")" \
    --num-cpus="$CPUS" --num-gpus="$GPUS" --disable-usage-stats --block &
done

# Wait until every node has joined (a condition, not a fixed sleep).
python3 - "$address" "${#nodes[@]}" "$WAIT_S" <<'PY'
import sys, time
address, want, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + wait_s
seen, error = 0, ""
while time.monotonic() < deadline:
    try:
        import ray
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        seen = sum(1 for n in ray.nodes() if n.get("Alive"))
        ray.shutdown()
        if seen >= want:
            print(f"ray-cluster.sh: {seen} node(s) up at {address}")
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

# shellcheck disable=SC2086
sublayer sweep "$SUBLAYER_CONFIG" --address "$address" ${SUBLAYER_SWEEP_ARGS:-}
