#!/usr/bin/env bash
# The GPU acceptance run: every GPU check and example under torchrun on 2 and 4 GPUs, each under a timeout, with
# logs and a markdown results table written to $OUT (when set) and stdout. Exit code 0 iff every step passed.
#
#   bash scripts/gpu_check.sh                 # sizes from the GPUs present (2, and 4 if there are 4+)
#   GPU_CHECK_SIZES="2" bash scripts/gpu_check.sh
#   GPU_CHECK_QUICK=1 bash scripts/gpu_check.sh   # fewer rounds and sizes (a smoke run)
#   GPU_CHECK_TUNE=1 bash scripts/gpu_check.sh    # also sweep the all-gather launch parameters (~5 more minutes)
#   GPU_CHECK_ONLY="primitives copy_engine" bash scripts/gpu_check.sh   # only the named steps
#   GPU_CHECK_MEASURE=1 bash scripts/gpu_check.sh # the copy-engine step also times its flag writers
#
# Needs the device libraries (python/triton_dist/_device/*.bc, from scripts/build.sh) but no compiled extension.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-90}"
PYTHON="${PYTHON:-python3}"
LOGDIR="${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}/gpu_check"
mkdir -p "$LOGDIR"
TABLE="$LOGDIR/results.md"
START=$(date +%s)

say() { echo "[gpu_check +$(($(date +%s) - START))s] $*"; }

{
  echo "# triton-dist GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- machine: $(hostname), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd ';' -)"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "- software: $("$PYTHON" -c 'import sys, torch, triton; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}")' 2>&1)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
  echo "- command: \`$0 $*\` (GPU_CHECK_SIZES=${GPU_CHECK_SIZES:-auto}, GPU_CHECK_QUICK=${GPU_CHECK_QUICK:-0}, GPU_CHECK_ONLY=${GPU_CHECK_ONLY:-all})"
  echo "- env: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TRITON_DIST_TIMEOUT_S=$TRITON_DIST_TIMEOUT_S"
  echo
} >"$TABLE"

say "logs in $LOGDIR"
nvidia-smi 2>&1 | tee "$LOGDIR/nvidia-smi.txt"
nvidia-smi topo -m 2>&1 | tee "$LOGDIR/topology.txt"
"$PYTHON" - <<'PY' 2>&1 | tee "$LOGDIR/versions.txt"
import sys, torch, triton
print("python", sys.version)
print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)
print("triton", triton.__version__)
print("gpus", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
PY

NGPU=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ -n "${GPU_CHECK_SIZES:-}" ]; then
  SIZES="$GPU_CHECK_SIZES"
else
  SIZES=""
  for n in 2 4; do [ "$NGPU" -ge "$n" ] && SIZES="$SIZES $n"; done
fi
FAILED=0
if [ -z "${SIZES// /}" ]; then
  say "FAIL: found $NGPU GPUs; these checks need at least 2"
  echo "**FAIL: found $NGPU GPUs, need at least 2.**" >>"$TABLE"
  cat "$TABLE"
  exit 1
fi

missing=""
for lib in python/triton_dist/_device/triton_dist.nvptx64.bc; do
  [ -f "$lib" ] || missing="$missing $lib"
done
if [ -n "$missing" ]; then
  say "FAIL: device library missing:$missing (run scripts/build.sh on a machine with LLVM/MLIR and copy it here)"
  echo "**FAIL: device library missing:$missing**" >>"$TABLE"
  cat "$TABLE"
  exit 1
fi

if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then
  LITMUS_ARGS="--rounds 20000"; PING_ARGS="--rounds 2000 --launches 20"; AG_ARGS="--sizes-mib 1 128 --iters 20"
  COPY_ARGS="--rounds 500"
else
  LITMUS_ARGS="--rounds 100000"; PING_ARGS="--rounds 10000 --launches 20"; AG_ARGS="--sizes-mib 1 8 64 128 --iters 20"
  COPY_ARGS="--rounds 2000"
fi
if [ "${GPU_CHECK_MEASURE:-0}" = 1 ]; then
  COPY_ARGS="$COPY_ARGS --measure --results-md $LOGDIR/copy_engine.md"
fi

echo "| ranks | step | result | seconds | details |" >>"$TABLE"
echo "|---|---|---|---|---|" >>"$TABLE"

# run_step <ranks> <name> <timeout seconds> <script> [args...]
run_step() {
  local ranks="$1" name="$2" limit="$3" script="$4"
  shift 4
  if [ -n "${GPU_CHECK_ONLY:-}" ] && [[ " $GPU_CHECK_ONLY " != *" $name "* ]]; then
    return 0
  fi
  local log="$LOGDIR/${ranks}gpu_${name}.log" began status result details
  say "== $name on $ranks GPUs (timeout ${limit}s): $script $*"
  began=$(date +%s)
  timeout -k 20 "$limit" "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node="$ranks" \
    "$script" "$@" >"$log" 2>&1
  status=$?
  local took=$(($(date +%s) - began))
  case "$status" in
    0) result="PASS" ;;
    124 | 137) result="TIMEOUT"; FAILED=1 ;;
    *) result="FAIL (exit $status)"; FAILED=1 ;;
  esac
  # Key numbers (RESULT lines), failed checks and the pass/fail tally go into the table.
  details=$(grep -hoE 'RESULT .*|FAIL .*|INFO .*|[0-9]+ passed, [0-9]+ failed here; [0-9]+ failures over all ranks' "$log" \
    | sed -E 's/^RESULT //' | sort -u | head -20 | paste -sd ';' - | sed 's/|/\//g')
  if [ "$result" != "PASS" ]; then
    local cause
    cause=$(grep -hE 'FATAL|Error|error:' "$log" | grep -vE '^ *File |elastic' | head -n 1 | cut -c1-300 | sed 's/|/\//g')
    details="${details:+$details; }${cause:-no error line}"
  fi
  echo "| $ranks | $name | $result | $took | ${details:-see log} |" >>"$TABLE"
  say "$name on $ranks GPUs: $result in ${took}s (log: $log)"
  if [ "$result" != "PASS" ]; then
    tail -n 40 "$log"
  else
    grep -hE 'RESULT|FAIL|INFO' "$log" | head -20
  fi
}

for n in $SIZES; do
  run_step "$n" primitives 240 test/gpu/check_primitives.py
  run_step "$n" litmus 180 test/gpu/check_litmus.py $LITMUS_ARGS
  run_step "$n" copy_engine 240 test/gpu/check_copy_engine.py $COPY_ARGS
  run_step "$n" ping_pong 120 examples/ping_pong.py $PING_ARGS
  run_step "$n" allgather_push 180 examples/allgather_push.py $AG_ARGS
  run_step "$n" allgather_pull 180 examples/allgather_pull.py $AG_ARGS
  run_step "$n" ag_gemm 300 test/gpu/check_ag_gemm.py
  run_step "$n" memory_model 180 test/gpu/check_memory_model.py
  run_step "$n" decode_ops 240 test/gpu/check_decode_ops.py
  run_step "$n" gemm_rs 300 test/gpu/check_gemm_rs.py $([ "${GPU_CHECK_QUICK:-0}" = 1 ] && echo --quick)
done
first=$(echo $SIZES | awk '{print $1}')
run_step "$first" guards 300 test/gpu/check_guards.py
run_step "$first" guard_cost 300 bench/guard_cost.py --results "$LOGDIR/guard_cost"
if [ "${GPU_CHECK_TUNE:-0}" = 1 ]; then
  last=$(echo $SIZES | awk '{print $NF}')
  run_step "$last" allgather_tune 420 bench/allgather_tune.py --size-mib 128
fi

{
  echo
  echo "Total: $(($(date +%s) - START)) s. Overall: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)."
} >>"$TABLE"
echo
cat "$TABLE"
exit "$FAILED"
