#!/usr/bin/env bash
# Session 30 job E (2 GPUs; 4-GPU machines were not lent): the fused gemm_rs deadlock fix (6112903) where it shows at
# 2 ranks: the shape whose shards have as many tiles as SMs, with the fixed kernel, then the quick check, then the
# kernel before the fix (ef82cce's ops/gemm_rs/kernels.py in a copy of the tree) at that shape, expected to hang and
# be stopped by the wait watchdog.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S=90 TRITON_DIST_WAIT_TIMEOUT_S=60
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el "fixed kernel, tiles == programs"
timeout 90 $TR test/gpu/check_gemm_rs.py --tiles-as-programs-only > $L/rs_tiles_fixed.log 2>&1; echo rc=$?
grep -E "RESULT|FAIL|FATAL|Error" $L/rs_tiles_fixed.log | head -4 | cut -c1-250; pack
el "fixed kernel, quick check"
timeout 150 $TR test/gpu/check_gemm_rs.py --quick > $L/rs_quick_fixed.log 2>&1; echo rc=$?
grep -E "RESULT|FAIL|FATAL" $L/rs_quick_fixed.log | head -6 | cut -c1-250; grep -c PASS $L/rs_quick_fixed.log; pack
el "kernel before the fix, tiles == programs (expect the watchdog at 30 s)"
ln -sfn $PWD/python/triton_dist/_device .job/old/python/triton_dist/_device
TRITON_DIST_WAIT_TIMEOUT_S=30 PYTHONPATH=$PWD/.job/old/python timeout 75 $TR test/gpu/check_gemm_rs.py --tiles-as-programs-only > $L/rs_tiles_before.log 2>&1; echo rc=$?
grep -E "RESULT|FAIL|FATAL|WaitTimeout|Error" $L/rs_tiles_before.log | head -6 | cut -c1-300; pack
el done
