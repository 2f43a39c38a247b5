#!/usr/bin/env bash
# Session 30, job C: ag_gemm's memop_parity flags (the new default) and the MoE fp8 reciprocal default on GPUs;
# on H100 also the AG sweep.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NG=$(nvidia-smi -L | wc -l); echo "GPU: $NG x $GPU"; T0=$(date +%s)
L=$OUT/logs; mkdir -p $L; touch $L/.stamp
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
pack() { mkdir -p $L/results; find bench/results -maxdepth 1 -type f -newer $L/.stamp -exec cp {} $L/results/ \; ; tar czf $OUT/logs.tgz -C $OUT logs; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
TR="python3 -m torch.distributed.run --standalone --nproc-per-node=2"
el "check_ag_gemm --cublas-only --flags memop_parity"
timeout 90 $TR test/gpu/check_ag_gemm.py --cublas-only --flags memop_parity > $L/check_ag_parity.log 2>&1; echo rc=$?
grep -E "passed|FAIL|Error|replayed" $L/check_ag_parity.log | grep -E "rank 0|passed|FAIL|Error" | tail -6 | cut -c1-250; pack
for f in memop_parity kernels memop_write; do
  el "timeline $f"
  timeout 60 $TR bench/timeline_gpu.py --calls 15 --flags $f --rows ag:1024,6144,4096 ag:1024,10240,5120 ag:1024,8192,6144 > $L/timeline_$f.txt 2>&1; echo rc=$?
  grep "median span" $L/timeline_$f.txt | grep ours | cut -c1-150
done; pack
el "moe dispatch bench"
timeout 100 $TR bench/moe.py --only-dispatch --heap 12G --tokens 4096 > $L/moe_dispatch.log 2>&1; echo rc=$?
grep -E "^RESULT (ours|bar ours)( fp8)? gather" $L/moe_dispatch.log | grep -E "T=4096: dispatch|bar" | cut -c1-160; pack
el "moe gpu test"
timeout 260 $TR test/python/test_ops_moe_gpu.py $L/moe_gpu > $L/moe_gpu.log 2>&1; echo rc=$?
grep -E "checks passed|FAIL|Error" $L/moe_gpu.log | head -6 | cut -c1-600; pack
if echo "$GPU" | grep -q H100 && [ "$(left 590)" -gt 100 ]; then
  el "AG sweep (left $(left 590))"
  timeout $(left 585) $TR bench/sweep.py --ops ag > $L/sweep_ag.log 2>&1; echo rc=$?
  grep -h "^Geo-mean\|bar:" $L/results/sweep*.md 2>/dev/null | cut -c1-300; pack
fi
el done
