#!/usr/bin/env bash
# The GPU check: what a GPU machine does with this project, in at most 8 minutes, judged
# against floors (benchmarks/gpu_check_floors.py): exit 1 when a figure falls under one.
# Run it in a checkout where `make install` was run (it uses the checkout's .venv/bin/python,
# or $PYTHON); nothing is downloaded while it runs. See --help.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: bash benchmarks/gpu_check.sh [--cpu-smoke] [--out FILE] [--peak-tflops N]
                                    [--only PART[,PART...]] [--floor NAME=VALUE] [--keep]

Measures, on the CUDA GPUs of this machine, in at most 8 minutes (each part under its own
time cap):
  lm       the paper-size LM (press2020: 16 s + 16 f, d 1024, context 3072) in bf16 with
           torch.compile: tokens/s and MFU (benchmarks/lm_mfu.py)          cap 170 s
  sweep    a real `sublayer sweep` of 4 trials sharing one GPU at 0.25 each: all
           finished, on CUDA (each trial's sublayer.device), all at once, tokens/s per
           trial (benchmarks/gpu_check_sweep.py)                           cap 140 s
  seq2seq  translation model vs Hugging Face M2M100 of the same shape, target tokens/s
           (benchmarks/seq2seq_throughput.py; M2M100 is skipped, and said so, when
           transformers is not installed)                                 cap  50 s
  fsdp     a 1-GPU trial of the training loop with train.parallel: fsdp (NCCL, FSDP2,
           bf16, gathered checkpoints) against the same trial unsharded   cap  60 s
  ddp      DDP scaling over every GPU here: N workers against one, the same global
           batch (benchmarks/data_parallel.py); one GPU: said so           cap  40 s
Then judges the figures against floors (benchmarks/gpu_check_floors.py): MFU >= 0.20
and >= 30,000 tokens/s (lm), >= 50,000 target tokens/s (seq2seq), FSDP >= 0.5 x
unsharded, DDP efficiency >= 0.7 on N >= 2 GPUs, and every sweep trial on CUDA with all
4 at once. A part under a floor fails the check.
Prints a table and writes every figure to FILE (default: reports/gpu_check.json).

options:
  --cpu-smoke       every part tiny on the CPU (a minute or two): the code path, not speed
  --out FILE        where to write the figures (JSON)
  --peak-tflops N   the GPU's dense bf16 peak for MFU (default: known from its name)
  --only PARTS      run only these parts (comma-separated: lm,sweep,seq2seq,fsdp,ddp)
  --floor N=V       set one floor for this run, e.g. --floor lm.mfu=0.3 (repeatable)
  --keep            keep the scratch folder (logs, the sweep's MLflow store)
  -h, --help        this text
environment: PYTHON (default: the checkout's .venv/bin/python), SUBLAYER_DATA_DIR (offline
corpora: the sweep and fsdp parts train on tinyshakespeare).
exit status: 0 every part ok, 1 a part failed, ran past its cap or fell under a floor,
2 bad usage or setup.
EOF
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 2
mode=gpu out=reports/gpu_check.json peak="" only="lm,sweep,seq2seq,fsdp,ddp" keep=0
floors=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --cpu-smoke) mode=smoke ;;
    --out) [ $# -ge 2 ] || { echo "gpu_check: --out needs a FILE" >&2; exit 2; }; out=$2; shift ;;
    --peak-tflops) [ $# -ge 2 ] || { echo "gpu_check: --peak-tflops needs a number" >&2; exit 2; }
                   peak=$2; shift ;;
    --only) [ $# -ge 2 ] || { echo "gpu_check: --only needs PARTS" >&2; exit 2; }; only=$2; shift ;;
    --floor) [ $# -ge 2 ] || { echo "gpu_check: --floor needs NAME=VALUE" >&2; exit 2; }
             floors+=(--floor "$2"); shift ;;
    --keep) keep=1 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
parts=()
for part in ${only//,/ }; do
  case "$part" in
    lm|sweep|seq2seq|fsdp|ddp) parts+=("$part") ;;
    *) echo "gpu_check: --only: got '$part', expected lm, sweep, seq2seq, fsdp or ddp" >&2; exit 2 ;;
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
if [ ${#floors[@]} -gt 0 ]; then
  "$PY" "$root/benchmarks/gpu_check_floors.py" "${floors[@]}" || exit 2
fi
if [ "$mode" = gpu ]; then
  device=$("$PY" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "")')
  if [ -z "$device" ]; then
    echo "gpu_check: torch sees no CUDA GPU; without one, try: bash benchmarks/gpu_check.sh --cpu-smoke" >&2
    exit 2
  fi
  declare -A cap=([lm]=170 [sweep]=140 [seq2seq]=50 [fsdp]=60 [ddp]=40)
  gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
  device="$device x $gpus"
  [ "$gpus" -ge 2 ] || echo "gpu_check: this machine has one GPU: no DDP scaling to measure"
else
  device="cpu (smoke)"
  declare -A cap=([lm]=150 [sweep]=240 [seq2seq]=150 [fsdp]=150 [ddp]=150)
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
    --device "$device" ${floors[@]+"${floors[@]}"} --ran ${ran[@]+"${ran[@]}"}
status=$?
if [ "$keep" = 1 ] || [ "$failed" = 1 ] || [ "$status" -ne 0 ]; then
  echo "logs kept in $work"
else
  rm -rf "$work"
fi
exit "$status"
