#!/usr/bin/env bash
# The decode ops' GPU run in one go: correctness checks, then the benchmarks, each under torchrun and a timeout,
# bench results (markdown, PNG, JSON), summary.txt and steps.log (every step's output, appended as it runs, so a
# killed run still leaves its logs) in $OUT (when set; else a temp dir): few files, as the device machine returns at
# most 8. DECODE_BUDGET_S (default 600) bounds the whole run: each step's timeout is cut to the time left and a step
# with under 30 s left is skipped. Exit code 0 iff every step passed.
#
#   bash scripts/gpu_decode_check.sh                          # every check and benchmark (~8 min)
#   DECODE_STEPS="check_all_reduce check_gemm_ar check_flash_decode" bash ...   # under a 6-minute device call:
#   DECODE_STEPS="bench_all_reduce bench_gemm_ar bench_flash_decode" bash ...   # split the run in two
#   DECODE_STEPS="check_all_reduce bench_all_reduce" bash scripts/gpu_decode_check.sh
#   DECODE_TUNE=1 ...                                         # bench_all_reduce tunes the config table first
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-60}"
export TRITON_DIST_CACHE_DIR="${TRITON_DIST_CACHE_DIR:-/tmp/triton_dist_cache}"
PYTHON="${PYTHON:-python3}"
RANKS="${DECODE_RANKS:-2}"
RESULTS="${OUT:-$(mktemp -d /tmp/gpu_decode.XXXXXX)}"
LOGDIR="$(mktemp -d /tmp/gpu_decode_logs.XXXXXX)"
mkdir -p "$RESULTS"
STEPLOG="$RESULTS/steps.log"
BUDGET="${DECODE_BUDGET_S:-600}"
STEPS="${DECODE_STEPS:-check_all_reduce check_gemm_ar check_flash_decode bench_all_reduce bench_gemm_ar bench_flash_decode}"
START=$(date +%s)
FAILED=0
say() { echo "[gpu_decode +$(($(date +%s) - START))s] $*" | tee -a "$RESULTS/summary.txt"; }
say "date $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$RESULTS/summary.txt"

# step <name> <timeout seconds> <script> [args...]
step() {
  local name="$1" limit="$2" script="$3"
  shift 3
  if [ ! -f "$script" ]; then say "$name: SKIP ($script not present)"; return; fi
  local left=$((BUDGET - ($(date +%s) - START) - 5))
  [ "$left" -lt "$limit" ] && limit="$left"
  if [ "$limit" -lt 30 ]; then say "$name: SKIP (only ${left}s of DECODE_BUDGET_S left)"; FAILED=1; return; fi
  say "== $name (timeout ${limit}s): $script $*"
  echo "===== $name: $script $*" >>"$STEPLOG"
  timeout -k 10 "$limit" "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node="$RANKS" \
    "$script" "$@" 2>&1 | tee "$LOGDIR/$name.log" >>"$STEPLOG"
  local status=${PIPESTATUS[0]}
  if [ "$status" = 0 ]; then say "$name: PASS"; else say "$name: FAIL (exit $status)"; FAILED=1; fi
  grep -hE 'RESULT|FAIL |TUNED|INFO|FATAL|failures over all ranks' "$LOGDIR/$name.log" | sort -u | head -80 \
    | tee -a "$RESULTS/summary.txt"
  [ "$status" = 0 ] || tail -n 30 "$LOGDIR/$name.log"
}

TUNE_ARG=""; [ "${DECODE_TUNE:-0}" = 1 ] && TUNE_ARG="--tune"
for s in $STEPS; do
  case "$s" in
    check_all_reduce) step "$s" 130 test/gpu/check_decode_ops.py --only all_reduce ;;
    check_gemm_ar) step "$s" 90 test/gpu/check_decode_ops.py --only gemm_ar ;;
    check_flash_decode) step "$s" 150 test/gpu/check_decode_ops.py --only flash_decode ;;
    bench_all_reduce) step "$s" 200 bench/all_reduce.py $TUNE_ARG --out-dir "$RESULTS" ;;
    bench_gemm_ar) step "$s" 200 bench/gemm_ar.py --out-dir "$RESULTS" ;;
    bench_flash_decode) step "$s" 150 bench/flash_decode.py --out-dir "$RESULTS" ;;
    *) say "unknown step $s"; FAILED=1 ;;
  esac
done
say "total $(($(date +%s) - START)) s, overall $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)"
exit "$FAILED"
