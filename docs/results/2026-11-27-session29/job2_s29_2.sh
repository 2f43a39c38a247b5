#!/usr/bin/env bash
# Session 29, call 2: the MoE GPU test at the fp8 default of 652f910; the decode options of helpers AT/AX (B64,
# 4096); helper AW's combine waves (only-combine rows, 128-4096 tokens); the low-latency rows at 128 tokens (per call
# in graphs of 10); check_layers. Whatever card is lent (2 GPUs).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L; touch $L/.stamp
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { mkdir -p $L/results; find bench/results -maxdepth 1 -type f -newer $L/.stamp -exec cp {} $L/results/ \; ; tar czf $OUT/logs.tgz -C $OUT logs; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el decoder_variants
timeout 120 $TR bench/decoder.py --models Llama-3-8B,Qwen3-32B --prefill "" --batches 64 --contexts 4096 \
  --decode-variants head-same-pos,head-same-pos-cublas-o,head-same-pos-rope-tiles,head-same-pos-cublas-o-tiles,head-same-pos-k-major,head-same-pos-cublas-o-tiles-k-major,rope-tiles,fused-gather \
  > $L/decoder.log 2>&1; echo rc=$?
grep -E "^RESULT|speedup|ms/layer|ours" $L/decoder.log | grep -v "^\s*$" | tail -30 | cut -c1-260; pack
el moe_gpu_tests; timeout 260 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed|FAIL|Error" $L/moe_gpu.log | head -6 | cut -c1-600; pack
el "moe combine (left $(left 585))"
timeout $(( $(left 585) / 2 )) $TR bench/moe.py --only-combine --heap 12G > $L/moe_combine.log 2>&1
echo rc=$?; grep -E "^RESULT" $L/moe_combine.log | grep -v verify | cut -c1-220; pack
el "moe LL 128 (left $(left 585))"
timeout $(( $(left 585) - 45 )) $TR bench/moe.py --tokens 128 --skip-nvshmem --skip-layer --skip-gather --skip-pipelined --skip-programs > $L/moe_ll128.log 2>&1
echo rc=$?; grep -E "^RESULT" $L/moe_ll128.log | grep -v verify | cut -c1-220; pack
el "check_layers (left $(left 590))"
timeout $(( $(left 590) )) $TR test/gpu/check_layers.py > $L/check_layers.log 2>&1; echo rc=$?; tail -3 $L/check_layers.log | cut -c1-300; pack
el done
