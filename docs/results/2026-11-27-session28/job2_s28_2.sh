#!/usr/bin/env bash
# Session 28, call 2 (scratch): issue 24 on whichever card is lent. H100: the quick ag_gemm / gemm_rs checks, the
# calibration with the pull producer's rate (its first on H100), tuning, the layer sweep and the seed benches. H200:
# the layer sweep (helper AN's cold path on the last from-idle row). Then issue 29's 1 MiB push all-gather, twice.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
if [[ "$GPU" == *H100* ]]; then
  el quick_checks; OUT=$OUT/a GPU_CHECK_ONLY="ag_gemm gemm_rs" GPU_CHECK_QUICK=1 GPU_CHECK_SIZES=2 GPU_CHECK_BUDGET_S=150 \
    bash scripts/gpu_check.sh | grep -E "^\| [12] \|" | cut -c1-300
  STEPS="calibrate bench_sweep bench_ag_gemm bench_gemm_rs"; TUNE=1; HB=330
else
  STEPS="bench_sweep"; TUNE=0; HB=150
fi
left=$(( 590 - HB - ($(date +%s) - T0) )); el "$STEPS (left $left s)"
OUT=$OUT/b GPU_CHECK_ONLY="$STEPS" GPU_CHECK_BENCH=1 GPU_CHECK_TUNE=$TUNE GPU_CHECK_SIZES=2 GPU_CHECK_BUDGET_S=$left \
  bash scripts/gpu_check.sh | grep -E "^\| [12] \|" | cut -c1-400
grep -hE "^SUMMARY|idle|Geo-mean" $OUT/b/gpu_check/2gpu_bench_sweep.log 2>/dev/null | head -12 | cut -c1-330
cp python/triton_dist/ops/tuning/calibrations.json python/triton_dist/ops/tuning/tuned_configs.json $OUT/ 2>/dev/null
pack
for i in 1 2; do
  left=$(( 585 - ($(date +%s) - T0) )); [ $left -lt 60 ] && break; el "heap_backends $i (left $left s)"
  timeout $(( left / (3 - i) )) python3 bench/heap_backends.py --nproc 2 --trials 5 --variants cuda_ipc nvshmem \
    --only allgather_push --out $L/heap_backends_$i.md > $L/heap_backends_$i.log 2>&1; echo rc=$?
  grep -E "allgather|over" $L/heap_backends_$i.md | head -8 | cut -c1-200; pack
done
el done
