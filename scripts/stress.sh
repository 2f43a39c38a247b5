#!/usr/bin/env bash
# Stress run (issue 12): 10,000 back-to-back iterations and 10,000 CUDA-graph replays of the ping-pong, the
# all-gather examples and every op in triton_dist.ops, results checked against torch on fresh inputs every
# --check-every iterations, under a timeout (a deadlock fails the run instead of hanging it).
#
#   bash scripts/stress.sh                                  # 2 ranks, --iters 10000 --check-every 500
#   STRESS_RANKS=4 STRESS_TIMEOUT_S=900 bash scripts/stress.sh --only ping_pong all_reduce
#   STRESS_SHARED_GPU=1 bash scripts/stress.sh              # more ranks than GPUs, through MPS (scripts/mps.sh):
#                                                           # correctness only, the timings mean nothing
#
# Logs and the results table (stress.md) go to $OUT/stress (when set) or a temporary folder. Exit code 0 iff every
# item passed on every rank.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-60}"
RANKS="${STRESS_RANKS:-2}"
LIMIT="${STRESS_TIMEOUT_S:-600}"
LOGDIR="${OUT:-$(mktemp -d /tmp/stress.XXXXXX)}/stress"
mkdir -p "$LOGDIR"
echo "[stress] $RANKS ranks, timeout ${LIMIT}s, log $LOGDIR/stress.log, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--iters 10000 --check-every 500)
if [ "${STRESS_SHARED_GPU:-0}" = 1 ]; then
  # shellcheck source=scripts/mps.sh
  source scripts/mps.sh
  export TRITON_DIST_SHARED_GPUS=1
  # Ranks that share GPUs must all share one (the CUDA IPC heap reaches no other GPU: runtime/heap/mapping.py).
  export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
  GPUS=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(mps_share "$RANKS" "$GPUS")
  mps_start "$(mktemp -d /tmp/stress_mps.XXXXXX)" "$LOGDIR/mps.log"
  trap mps_stop EXIT
  echo "[stress] shared GPUs: $RANKS ranks on $GPUS GPU(s) through MPS, ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE}% of the SMs each"
fi
timeout -k 20 "$LIMIT" python3 -m torch.distributed.run --standalone --nproc-per-node="$RANKS" \
  test/gpu/stress.py "${ARGS[@]}" --results-md "$LOGDIR/stress.md" >"$LOGDIR/stress.log" 2>&1
status=$?
grep -hE 'RESULT|PASS|FAIL|INFO|FATAL|failures over all ranks' "$LOGDIR/stress.log"
case "$status" in
  0) echo "[stress] PASS" ;;
  124 | 137) echo "[stress] TIMEOUT after ${LIMIT}s (a hang: see $LOGDIR/stress.log)"; tail -n 30 "$LOGDIR/stress.log" ;;
  *) echo "[stress] FAIL (exit $status)"; tail -n 40 "$LOGDIR/stress.log" ;;
esac
[ -f "$LOGDIR/stress.md" ] && cat "$LOGDIR/stress.md"
exit "$status"
