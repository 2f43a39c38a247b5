#!/usr/bin/env bash
# The ops GPU run (issue 10, AG+GEMM half): correctness, the GEMM against cuBLAS, joint tuning, the AG+GEMM
# benchmark; each step under a timeout, logs and results packed into $OUT/ops_results.tgz (when $OUT is set).
#
#   bash scripts/gpu_ops_check.sh                       # every step
#   OPS_STEPS="check matmul tune bench" bash scripts/gpu_ops_check.sh
#   OPS_TUNE_ARGS="--quick" OPS_SHAPES="8192,4096,12288" bash scripts/gpu_ops_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-90}"
export TRITON_DIST_CACHE_DIR="${TRITON_DIST_CACHE_DIR:-$PWD/.ops_cache}"
PYTHON="${PYTHON:-python3}"
STEPS="${OPS_STEPS:-check matmul tune bench}"
LOGDIR="${OUT:-/tmp}/ops_logs"
mkdir -p "$LOGDIR" bench/results
START=$(date +%s)
FAILED=0
SHAPE_ARGS=()
[ -n "${OPS_SHAPES:-}" ] && SHAPE_ARGS=(--shapes "$OPS_SHAPES")
TORCHRUN=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node="${OPS_RANKS:-2}")

step() {  # step <name> <timeout s> <command...>; OPS_LIMIT_<name>=<s> overrides the timeout
  local name="$1" limit_var="OPS_LIMIT_$1"
  local limit="${!limit_var:-$2}"
  shift 2
  [[ " $STEPS " == *" $name "* ]] || return 0
  echo "[ops +$(($(date +%s) - START))s] == $name: $*"
  timeout -k 15 "$limit" "$@" >"$LOGDIR/$name.log" 2>&1
  local status=$?
  [ "$status" = 0 ] || FAILED=1
  echo "[ops +$(($(date +%s) - START))s] $name: exit $status"
  grep -hE 'FAIL|passed, |BEST|Geo-mean|WRONG|Error' "$LOGDIR/$name.log" | head -40
  [ "$status" = 0 ] || tail -n 30 "$LOGDIR/$name.log"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >"$LOGDIR/gpus.txt" 2>&1
step check 300 "${TORCHRUN[@]}" test/gpu/check_ag_gemm.py ${OPS_CHECK_ARGS:-}
step matmul 200 "$PYTHON" bench/matmul.py ${OPS_MATMUL_ARGS:-}
step tune 360 "${TORCHRUN[@]}" bench/tune_overlap.py --write-package-table "${SHAPE_ARGS[@]}" ${OPS_TUNE_ARGS:-}
step bench 240 "${TORCHRUN[@]}" bench/ag_gemm.py "${SHAPE_ARGS[@]}" ${OPS_BENCH_ARGS:-}
echo "[ops +$(($(date +%s) - START))s] done, failed=$FAILED"
if [ -n "${OUT:-}" ]; then
  cp python/triton_dist/ops/tuned_configs.json "$LOGDIR/" 2>/dev/null
  tar czf "$OUT/ops_results.tgz" -C "$OUT" ops_logs -C "$PWD" bench/results 2>/dev/null
  rm -rf "$LOGDIR"
fi
exit "$FAILED"
