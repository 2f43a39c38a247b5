#!/usr/bin/env bash
# Session 29, call 1: on 2 x H100 issue 24's H100 rows (calibrate, sweep, seed tables, tuned gemm_rs); on 2 x H200
# the MoE GPU test at the fp8 default of 652f910, then the fp8 dispatch rows and the low-latency rows at 128 tokens.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
nvidia-smi topo -m | head -4
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
if echo "$GPU" | grep -q H100; then
  el "H100: issue 24"
  GPU_CHECK_SIZES=2 GPU_CHECK_BENCH=1 GPU_CHECK_TUNE=1 GPU_CHECK_BUDGET_S=560 \
    GPU_CHECK_ONLY="calibrate bench_sweep bench_ag_gemm bench_gemm_rs" bash scripts/gpu_check.sh > $L/gpu_check.log 2>&1
  echo rc=$?; tail -3 $L/gpu_check.log; grep -E "^\| 2 " $OUT/gpu_check.md | cut -c1-400
else
  el moe_gpu_tests; timeout 280 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
  grep -E "checks passed|FAIL|Error" $L/moe_gpu.log | head -6 | cut -c1-600; pack
  left=$(( 580 - ($(date +%s) - T0) )); el "moe_dispatch (left $left s)"
  timeout $(( left / 2 )) $TR bench/moe.py --only-dispatch --heap 12G --tokens 4096 > $L/moe_dispatch.log 2>&1
  echo rc=$?; grep -E "^RESULT (ours|push|bar|against)" $L/moe_dispatch.log | grep -v phases | cut -c1-200; pack
  left=$(( 585 - ($(date +%s) - T0) )); el "moe LL 128 (left $left s)"
  timeout $left $TR bench/moe.py --tokens 128 --skip-nvshmem --skip-layer --skip-gather --skip-pipelined --skip-programs > $L/moe_ll128.log 2>&1
  echo rc=$?; grep -E "^RESULT" $L/moe_ll128.log | grep -v verify | cut -c1-220; pack
fi
el done
