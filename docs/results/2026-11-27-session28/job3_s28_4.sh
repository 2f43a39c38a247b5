#!/usr/bin/env bash
# Session 28, call 3 (scratch): MoE after edde54f (fp8 push casts on GPUs), 4c0e3d5 (combine's bf16 partials and
# spread by default), helper AR's fp8 push options and helper AS's reduce beside the combine push: the GPU test, then
# the dispatch rows at 4096 tokens and the combine rows with phases.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el moe_gpu_tests; timeout 300 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed" $L/moe_gpu.log | head -4 | cut -c1-900; pack
left=$(( 580 - ($(date +%s) - T0) )); el "moe_dispatch (left $left s)"
timeout $(( left * 6 / 10 )) $TR bench/moe.py --only-dispatch --heap 12G --tokens 4096 > $L/moe_dispatch.log 2>&1
echo rc=$?; grep -E "^RESULT (ours|push|bar|against)" $L/moe_dispatch.log | grep -v phases | cut -c1-200; pack
left=$(( 585 - ($(date +%s) - T0) )); el "moe_combine (left $left s)"
timeout $left $TR bench/moe.py --only-combine --heap 12G > $L/moe_combine.log 2>&1
echo rc=$?; grep -E "^RESULT" $L/moe_combine.log | grep -v verify | cut -c1-220; pack
el done
