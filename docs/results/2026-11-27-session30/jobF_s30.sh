#!/usr/bin/env bash
# Session 30 job F: the fused gemm_rs kernel's time with the deadlock fix (6112903) and before it (A/B, one machine).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
ln -sfn $PWD/python/triton_dist/_device .job/old/python/triton_dist/_device
echo "== fixed"; timeout 60 $TR .job/rs_fused_time.py 2>&1 | grep RESULT
echo "== before"; PYTHONPATH=$PWD/.job/old/python timeout 60 $TR .job/rs_fused_time.py 2>&1 | grep RESULT
echo "== fixed again"; timeout 60 $TR .job/rs_fused_time.py 2>&1 | grep RESULT
