#!/usr/bin/env bash
# Session 28, call 1 (scratch): the MoE defaults' GPU checks (f702952's wave slots, the fp8 overlap and combine
# options), dispatch at 4096 tokens, the combine options (issue 27); flash_decode's batch configs (issue 28).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; T0=$(date +%s)
nvidia-smi topo -m | head -4
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el moe_gpu_tests; timeout 220 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -iE "fail|passed|differ|error" $L/moe_gpu.log | head -8 | cut -c1-300; pack
el moe_dispatch; timeout 120 $TR bench/moe.py --only-dispatch --heap 20G --tokens 4096 > $L/moe_dispatch.log 2>&1
echo rc=$?; grep -E "^RESULT|bar|≥" $L/moe_dispatch.log | head -16 | cut -c1-240; pack
el moe_combine; mkdir -p $L/moe_combine
timeout 200 $TR bench/moe.py --heap 20G --tokens 128,4096,16384 --skip-nvshmem --skip-layer --skip-gather --skip-pipelined \
  --skip-programs --out-dir $L/moe_combine > $L/moe_combine.log 2>&1
echo rc=$?; grep -E "combine|bar|≥" $L/moe_combine.log | head -30 | cut -c1-260; pack
left=$(( 570 - ($(date +%s) - T0) )); el "bench_flash_decode_batch (left $left s)"
OUT=$OUT/b GPU_CHECK_ONLY="bench_flash_decode_batch" GPU_CHECK_BENCH=1 GPU_CHECK_SIZES=2 GPU_CHECK_BUDGET_S=$left \
  bash scripts/gpu_check.sh | grep -E "^\| [12] \|" | cut -c1-400
tar xzf $OUT/b/gpu_check.tgz -C $L 2>/dev/null; find $L -name "*.md" -path "*flash_decode_batch*" | head -3 | xargs -r cat | head -60
pack; el done
