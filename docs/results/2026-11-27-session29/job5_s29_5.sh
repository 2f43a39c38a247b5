#!/usr/bin/env bash
# Session 29, call 5: helper BB's probe of the fp8 dispatch's two timing modes and PUSH_RESIDENT_FIRST (4825740),
# then the decode anatomy at batch 64 once more (c520259: a split profile now shows each run's kernels and span).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L; touch $L/.stamp
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el probe
timeout 200 $TR docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py > $L/probe.log 2>&1; echo rc=$?
grep -vE "^\[rank|Traceback|^\s+File|^\s{4}" $L/probe.log | grep -E "fp8|bf16|bits|RESULT|median|Error" | cut -c1-250 | head -40; pack
el anatomy
timeout 100 $TR bench/decoder_anatomy.py --phases decode --batch 64 --context 4096 --models Llama-3-8B --out-dir $L/anatomy > $L/anatomy.log 2>&1
echo rc=$?; grep -E "RESULT anatomy|WARN" $L/anatomy.log | cut -c1-400; pack
el done
