#!/usr/bin/env bash
# The GPU check: what one 80 GB GPU does with this project, in at most 8 minutes.
# Run it in a checkout where `make install` was run (it uses the checkout's .venv/bin/python,
# or $PYTHON); nothing is downloaded while it runs. See --help.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: bash benchmarks/gpu_check.sh [--cpu-smoke] [--out FILE] [--peak-tflops N]
                                    [--only PART[,PART...]] [--keep]

Measures, on one CUDA GPU, in at most 8 minutes (each part under its own time cap):
  lm       the paper-size LM (press2020: 16 s + 16 f, d 1024, context 3072) in bf16 with
           torch.compile: tokens/s and MFU (benchmarks/lm_mfu.py)          cap 170 s
  sweep    a real `sublayer sweep` of 4 trials sharing one GPU at 0.25 each: all
           finished, tokens/s per trial (benchmarks/gpu_check_sweep.py)    cap 150 s
  seq2seq  translation model vs Hugging Face M2M100 of the same shape, target tokens/s
           (benchmarks/seq2seq_throughput.py; M2M100 is skipped, and said so, when
           transformers is not installed)                                 cap  60 s
  fsdp     a 1-GPU trial of the training loop with train.parallel: fsdp (NCCL, FSDP2,
           bf16, gathered checkpoints) against the same trial unsharded   cap  80 s
Prints a table and writes every figure to FILE (default: reports/gpu_check.json).

options:
  --cpu-smoke       every part tiny on the CPU (a minute or two): the code path, not speed
  --out FILE        where to write the figures (JSON)
  --peak-tflops N   the GPU's dense bf16 peak for MFU (default: known from its name)
  --only PARTS      run only these parts (comma-separated: lm,sweep,seq2seq,fsdp)
  --keep            keep the scratch folder (logs, the sweep's MLflow store)
  -h, --help        this text
environment: PYTHON (default: the checkout's .venv/bin/python), SUBLAYER_DATA_DIR (offline
corpora: the sweep and fsdp parts train on tinyshakespeare).
exit status: 0 every part ok, 1 a part failed or ran past its cap, 2 bad usage or setup.
EOF
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 2
mode=gpu out=reports/gpu_check.json peak="" only="lm,sweep,seq2seq,fsdp" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --cpu-smoke) mode=smoke ;;
    --out) [ $# -ge 2 ] || { echo "gpu_check: --out needs a FILE" >&2; exit 2; }; out=$2; shift ;;
    --peak-tflops) [ $# -ge 2 ] || { echo "gpu_check: --peak-tflops needs a number" >&2; exit 2; }
                   peak=$2; shift ;;
    --only) [ $# -ge 2 ] || { echo "gpu_check: --only needs PARTS" >&2; exit 2; }; only=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
parts=()
for part in ${only//,/ }; do
  case "$part" in
    lm|sweep|seq2seq|fsdp) parts+=("$part") ;;
    *) echo "gpu_check: --only: got '$part', expected lm, sweep, seq2seq or fsdp" >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || { echo "gpu_check: --only names no part" >&2; exit 2; }
if [ -n "$peak" ] && { ! [[ "$peak" =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ "$peak" =~ ^[0.]+$ ]]; }; then
  echo "gpu_check: --peak-tflops: got '$peak', expected a positive number" >&2; exit 2
fi

PY=${PYTHON:-$root/.venv/bin/python}
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "gpu_check: no $PY: run \`make install\` first (or set PYTHON=/path/to/python)" >&2
  exit 2
fi
needs="torch sublayer_search"
[[ " ${parts[*]} " == *" sweep "* ]] && needs="$needs ray mlflow"
# shellcheck disable=SC2086  # $needs: one word per module
missing=$("$PY" -c 'import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))' $needs) \
  || { echo "gpu_check: $PY does not run" >&2; exit 2; }
if [ -n "$missing" ]; then
  echo "gpu_check: $PY lacks: $missing (run \`make install\`)" >&2; exit 2
fi
if [ "$mode" = gpu ]; then
  device=$("$PY" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "")')
  if [ -z "$device" ]; then
    echo "gpu_check: torch sees no CUDA GPU; without one, try: bash benchmarks/gpu_check.sh --cpu-smoke" >&2
    exit 2
  fi
  declare -A cap=([lm]=170 [sweep]=150 [seq2seq]=60 [fsdp]=80)
else
  device="cpu (smoke)"
  declare -A cap=([lm]=150 [sweep]=240 [seq2seq]=150 [fsdp]=150)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
echo "gpu_check ($mode) on $device; parts: ${parts[*]}; scratch: $work"
export PYTHONUNBUFFERED=1 MLFLOW_DISABLE_TELEMETRY=true RAY_USAGE_STATS_ENABLED=0
ran=() failed=0
for part in "${parts[@]}"; do
  if [ "$part" = sweep ]; then
    cmd=("$PY" "$root/benchmarks/gpu_check_sweep.py")
  else
    cmd=("$PY" "$root/benchmarks/gpu_check_parts.py" "$part")
    [ "$part" = lm ] && [ -n "$peak" ] && cmd+=(--peak-tflops "$peak")
  fi
  echo "== $part (cap ${cap[$part]} s) ..."
  t0=$(date +%s%N)
  timeout --kill-after=10 "${cap[$part]}" "${cmd[@]}" --mode "$mode" \
      --json "$work/$part.json" --work "$work/$part" >"$work/$part.log" 2>&1
  code=$?
  t1=$(date +%s%N)
  seconds=$(( (t1 - t0) / 1000000 ))
  ran+=("$part:$code:$((seconds / 1000)).$(printf '%03d' $((seconds % 1000)))")
  if [ "$code" -ne 0 ]; then
    failed=1
    echo "-- $part exited $code; the end of its log ($work/$part.log):"
    tail -n 25 "$work/$part.log"
  fi
done
"$PY" "$root/benchmarks/gpu_check_report.py" --work "$work" --out "$out" --mode "$mode" \
    --device "$device" --ran "${ran[@]}"
status=$?
if [ "$keep" = 1 ] || [ "$failed" = 1 ] || [ "$status" -ne 0 ]; then
  echo "logs kept in $work"
else
  rm -rf "$work"
fi
exit "$status"
