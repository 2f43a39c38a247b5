#!/usr/bin/env bash
# GEMM + reduce-scatter on the GPU machine in one call: correctness of every kernel variant, then the joint tuning
# sweep and the benchmark, each under a timeout, logs and results under $OUT (or a temp dir).
#
#   bash scripts/gpu_gemm_rs_check.sh                        # check, then tune + bench on the seed shapes
#   GRS_STAGES="check" bash scripts/gpu_gemm_rs_check.sh     # any of: check quick bench tune
#   GRS_SHAPES="8192,4096,12288" bash scripts/gpu_gemm_rs_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-60}"
OUTDIR="${OUT:-$(mktemp -d /tmp/gpu_gemm_rs.XXXXXX)}"
mkdir -p "$OUTDIR/results"
export TRITON_DIST_CACHE_DIR="$OUTDIR/results"   # the tuning table the sweep writes (tuning.json)
STAGES="${GRS_STAGES:-check tune}"
NPROC="${GRS_NPROC:-2}"
RUN=(python3 -m torch.distributed.run --standalone --nproc-per-node="$NPROC")
STATUS=0
SHAPE_ARGS=()
[ -n "${GRS_SHAPES:-}" ] && SHAPE_ARGS=(--shapes "$GRS_SHAPES")

step() {  # step <name> <timeout s> <command...>
  local name="$1" limit="$2"
  shift 2
  local began=$(date +%s)
  echo "== $name (timeout ${limit}s): $*"
  timeout -k 15 "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
  local code=$?
  echo "== $name: exit $code in $(($(date +%s) - began))s"
  grep -hE 'RESULT|FAIL|FATAL|Error|passed, [0-9]+ failed|Geo-mean|  [0-9]+,[0-9]+,[0-9]+ \|' "$OUTDIR/$name.log" | grep -v '^ *File' | sort -u | head -60
  [ "$code" = 0 ] || { STATUS=1; tail -n 30 "$OUTDIR/$name.log"; }
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv 2>&1
for stage in $STAGES; do
  case "$stage" in
    check) step check "${GRS_CHECK_TIMEOUT:-300}" "${RUN[@]}" test/gpu/check_gemm_rs.py ;;
    quick) step check "${GRS_CHECK_TIMEOUT:-180}" "${RUN[@]}" test/gpu/check_gemm_rs.py --quick ;;
    tune)
      # A failed check leaves the cuBLAS path (the newer one) out of the sweep, so a hang there cannot take the
      # whole tuning run with it.
      CANDIDATES=all
      [ "$STATUS" = 0 ] || CANDIDATES=triton
      step bench "${GRS_BENCH_TIMEOUT:-400}" "${RUN[@]}" bench/gemm_rs.py --tune --reps 20 --candidates "$CANDIDATES" \
        --out-dir "$OUTDIR/results" "${SHAPE_ARGS[@]}" ;;
    bench) step bench "${GRS_BENCH_TIMEOUT:-300}" "${RUN[@]}" bench/gemm_rs.py --reps 30 --out-dir "$OUTDIR/results" "${SHAPE_ARGS[@]}" ;;
    *) echo "unknown stage $stage"; STATUS=1 ;;
  esac
done
[ -f "$OUTDIR/results/gemm_rs.md" ] && cat "$OUTDIR/results/gemm_rs.md"
exit "$STATUS"
