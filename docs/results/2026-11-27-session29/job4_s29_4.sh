#!/usr/bin/env bash
# Session 29, call 4: the AG cuBLAS path's chunks (ac91f1a-1f76d9d) on GPUs (check_ag_gemm), the MoE GPU test with the
# auto combine on (60aa5e6), the combine rows with the auto row, then the AG sweep (with its cublas/2 column) and seeds.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L; touch $L/.stamp
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { mkdir -p $L/results; find bench/results -maxdepth 1 -type f -newer $L/.stamp -exec cp {} $L/results/ \; ; tar czf $OUT/logs.tgz -C $OUT logs; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el "ag_gemm check"
GPU_CHECK_SIZES=2 GPU_CHECK_BUDGET_S=120 GPU_CHECK_ONLY="ag_gemm" bash scripts/gpu_check.sh > $L/gpu_check_ag.log 2>&1
echo rc=$?; grep -E "^\| 2 " $OUT/gpu_check.md | cut -c1-300; cp $OUT/gpu_check.md $L/gpu_check_ag.md; pack
el moe_gpu_tests; timeout 260 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed|FAIL|Error" $L/moe_gpu.log | head -6 | cut -c1-600; pack
el "moe combine (left $(left 585))"
timeout 60 $TR bench/moe.py --only-combine --heap 12G > $L/moe_combine.log 2>&1
echo rc=$?; grep -E "^RESULT" $L/moe_combine.log | grep -E "auto|bar|T=4096: combine" | cut -c1-220; pack
el "sweep (left $(left 580))"
GPU_CHECK_SIZES=2 GPU_CHECK_BENCH=1 GPU_CHECK_BUDGET_S=$(left 575) GPU_CHECK_ONLY="bench_sweep bench_ag_gemm" bash scripts/gpu_check.sh > $L/gpu_check_bench.log 2>&1
echo rc=$?; grep -E "^\| 2 " $OUT/gpu_check.md | cut -c1-300; grep -h "^Geo-mean\|bar:" $L/results/sweep*.md 2>/dev/null | cut -c1-300; pack
el done
