#!/usr/bin/env bash
# Stress run (issue 12): 10,000 back-to-back iterations and 10,000 CUDA-graph replays of the ping-pong, the
# all-gather examples and every op in triton_dist.ops, results checked against torch on fresh inputs every
# --check-every iterations, under a timeout (a deadlock fails the run instead of hanging it).
#
#   bash scripts/stress.sh                                  # 2 ranks, --iters 10000 --check-every 500
#   STRESS_RANKS=4 STRESS_TIMEOUT_S=900 bash scripts/stress.sh --only ping_pong all_reduce
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
