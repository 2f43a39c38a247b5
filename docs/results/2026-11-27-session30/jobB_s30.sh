#!/usr/bin/env bash
# Session 30 job B: world size 4 (never run there: gemm_rs, layers, the MoE GPU test).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpus.txt
nvidia-smi topo -m | head -8 >> $OUT/gpus.txt
GPU_CHECK_SIZES=4 GPU_CHECK_QUICK=1 GPU_CHECK_BUDGET_S=500 GPU_CHECK_ONLY="gemm_rs layers moe_ranks" bash scripts/gpu_check.sh
