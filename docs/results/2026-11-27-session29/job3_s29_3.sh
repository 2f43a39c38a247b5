#!/usr/bin/env bash
# Session 29, call 3: the low-latency rows at 128 tokens (per call in graphs of 10; the bench fixed in a4e21a3), the
# fp8 dispatch rows at 4096 tokens, and the decode anatomy at batch 64 with its HBM floor (issue 28's cause).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L; touch $L/.stamp
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { mkdir -p $L/results; find bench/results -maxdepth 1 -type f -newer $L/.stamp -exec cp {} $L/results/ \; ; tar czf $OUT/logs.tgz -C $OUT logs; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el "moe LL 128"
timeout 150 $TR bench/moe.py --tokens 128 --skip-nvshmem --skip-layer --skip-gather --skip-pipelined --skip-programs --skip-combine-options --out-dir $L/ll128 > $L/moe_ll128.log 2>&1
echo rc=$?; grep -E "^RESULT" $L/moe_ll128.log | grep -v verify | grep -i "low\|bar\|graph" | cut -c1-240; pack
el "moe dispatch 4096"
timeout 110 $TR bench/moe.py --only-dispatch --heap 12G --tokens 4096 --out-dir $L/disp > $L/moe_dispatch.log 2>&1
echo rc=$?; grep -E "^RESULT (ours|push|bar)" $L/moe_dispatch.log | grep -v "phases\|host" | grep -E "ours gather normal|fp8 gather normal|push all|bar ours (gather|fp8 gather) " | cut -c1-200; pack
el "decoder anatomy (left $(left 570))"
timeout $(left 570) $TR bench/decoder_anatomy.py --phases decode --batch 64 --context 4096 --out-dir $L/anatomy > $L/anatomy.log 2>&1
echo rc=$?; grep -E "RESULT" $L/anatomy.log | tail -12 | cut -c1-300; pack
el done
