#!/usr/bin/env bash
# Session 30 job D: the 4-rank gemm_rs deadlock fix (6112903) at 2 and 4 ranks; the MoE GPU test at 4 ranks (--quick,
# progress lines, the cheaper reference of 0c29b3e).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpus.txt
GPU_CHECK_SIZES="2 4" GPU_CHECK_QUICK=1 GPU_CHECK_BUDGET_S=450 GPU_CHECK_ONLY="gemm_rs moe_ranks" bash scripts/gpu_check.sh
