#!/usr/bin/env bash
# Session 30 job A: the AG cuBLAS path's chain at M = 1024 (default flags, memop_write), MoE dispatch/combine rows.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv | tee $OUT/gpus.txt
git log -1 --format=%h | tee -a $OUT/gpus.txt
ROWS="ag:1024,6144,4096 ag:1024,10240,5120 ag:1024,8192,6144 ag:2048,28672,4096"
timeout 150 torchrun --nproc-per-node=2 bench/timeline_gpu.py --calls 15 --rows $ROWS > $OUT/timeline_default.txt 2>&1; echo "timeline default rc=$?"
AG_FLAGS=memop_write timeout 150 torchrun --nproc-per-node=2 .job/flags_wrapper.py bench/timeline_gpu.py --calls 15 --rows $ROWS > $OUT/timeline_memop_write.txt 2>&1; echo "timeline memop_write rc=$?"
timeout 150 torchrun --nproc-per-node=2 bench/moe.py --only-dispatch --heap 12G --tokens 4096 > $OUT/moe_dispatch.log 2>&1; echo "moe dispatch rc=$?"
timeout 150 torchrun --nproc-per-node=2 bench/moe.py --only-combine --heap 12G > $OUT/moe_combine.log 2>&1; echo "moe combine rc=$?"
grep -h "median span\|^ gpu\|^ *gpu" $OUT/timeline_default.txt | head -60
echo ======; grep -h "median span" $OUT/timeline_memop_write.txt
tail -30 $OUT/moe_dispatch.log; tail -25 $OUT/moe_combine.log
