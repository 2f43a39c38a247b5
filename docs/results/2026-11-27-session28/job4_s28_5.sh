#!/usr/bin/env bash
# Session 28, call 4 (scratch), on a 4-GPU machine (nvidia-h200-x4, lent for the first time): on GPUs 0-1, issue
# 29's bar run (both heaps, one run) and the batch-64 decode options (helper AT) beside the default; then the first
# checks at world size 4 with what time is left, the MoE GPU test first (at every GPU of the machine).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); N=$(nvidia-smi -L | wc -l); echo "GPU: $N x $GPU"; T0=$(date +%s)
nvidia-smi topo -m | head -6
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
el heap_backends; CUDA_VISIBLE_DEVICES=0,1 timeout 200 python3 bench/heap_backends.py --nproc 2 --trials 3 \
  --out $L/heap_backends.md > $L/heap_backends.log 2>&1; echo rc=$?; grep -E "^\||over it" $L/heap_backends.md | cut -c1-160; pack
el decoder_b64; CUDA_VISIBLE_DEVICES=0,1 timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node=2 \
  bench/decoder.py --models Llama-3-8B,Qwen3-32B --prefill "" --batches 64 --contexts 4096 --decode-variants all \
  --out-dir $L/dec64 > $L/decoder_b64.log 2>&1; echo rc=$?; grep -E "^RESULT|INFO" $L/decoder_b64.log | cut -c1-220 | head -40; pack
el "moe_gpu_tests at $N ranks (fp8 overlap + 4-warp push now the default, uncommitted)"
timeout 250 python3 -m torch.distributed.run --standalone --nproc-per-node=$N test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed" $L/moe_gpu.log | head -4 | cut -c1-900; pack
if [ "$N" -ge 4 ]; then
  left=$(( 570 - ($(date +%s) - T0) )); el "checks at $N ranks (left $left s)"
  OUT=$OUT/b GPU_CHECK_ONLY="primitives ag_gemm gemm_rs decode_ops ar_rmsnorm layers" GPU_CHECK_QUICK=1 GPU_CHECK_SIZES=$N \
    GPU_CHECK_BUDGET_S=$left bash scripts/gpu_check.sh | grep -E "^\| [0-9] \|" | cut -c1-300
fi
pack; el done
