#!/usr/bin/env bash
# Session 29, call 6: helper BC's probe of EXPAND_RESIDENT_FIRST (877180b), then the MoE GPU test with it on.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el probe
timeout 75 $TR docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py > $L/probe.log 2>&1; echo rc=$?
grep -E "^same bits|^R[0-4] " $L/probe.log | grep -E "same bits|device" | cut -c1-200 | head -40; pack
el "moe gpu test, expand first"
timeout $(( 255 - ($(date +%s) - T0) )) $TR .job/moe_gpu_expand_first.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed|FAIL|Error" $L/moe_gpu.log | head -6 | cut -c1-600; pack
el done
