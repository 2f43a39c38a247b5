#!/usr/bin/env bash
# The one GPU entry point: every GPU check and example under torchrun (on 2 and 4 GPUs), and on request the ops
# benchmarks and tuning sweeps, each step under a timeout and the whole run under a time budget, with a markdown
# results table on stdout. Exit code 0 iff every step that was due passed.
#
#   bash scripts/gpu_check.sh                 # the checks; sizes from the GPUs present (2, and 4 if there are 4+)
#   GPU_CHECK_SIZES="2" bash scripts/gpu_check.sh
#   GPU_CHECK_QUICK=1 bash scripts/gpu_check.sh   # fewer rounds and sizes (a smoke run)
#   GPU_CHECK_BENCH=1 bash scripts/gpu_check.sh   # also the ops benchmarks (bench_* steps, on the first size)
#   GPU_CHECK_TUNE=1 bash scripts/gpu_check.sh    # also the tuning sweeps (tune_* steps; bench_gemm_rs and
#                                                 # bench_all_reduce tune their tables first; bench_gemm_ar
#                                                 # writes each problem's fastest config into the package table)
#   GPU_CHECK_ONLY="primitives copy_engine" bash scripts/gpu_check.sh   # only the named steps, whatever the mode
#   GPU_CHECK_MEASURE=1 bash scripts/gpu_check.sh # the copy-engine step also times its flag writers
#   GPU_CHECK_SHAPES="8192,4096,12288" ...        # M,N,K;... for the ag_gemm and gemm_rs benchmarks and tuning
#   GPU_CHECK_BUDGET_S=540 ...                    # whole-run budget (default 3000 s): each step's timeout is cut to
#                                                 # the time left, a step with under 30 s left is skipped (and fails)
#   GPU_CHECK_DRY_RUN=1 ...                       # print the steps it would run; needs no GPU
#   GPU_CHECK_SHARED_GPU=1 GPU_CHECK_SIZES=2 ...  # more ranks than GPUs: every rank on the first GPU
#                                                 # through an MPS daemon started per step, gloo instead of NCCL,
#                                                 # each rank on its share of the SMs; checks correctness only, so
#                                                 # bench/tune steps run only when GPU_CHECK_ONLY names them
#
# Per-op runs: GPU_CHECK_ONLY="ag_gemm bench_matmul tune_ag_gemm bench_ag_gemm" (AllGather+GEMM),
# "gemm_rs tune_gemm_rs bench_gemm_rs" (GEMM+reduce-scatter), "decode_ops bench_all_reduce bench_gemm_ar
# bench_flash_decode bench_flash_decode_batch" (the decode ops), "ar_rmsnorm bench_ar_rmsnorm" (the fused all-reduce + residual + RMSNorm),
# "calibrate bench_gemm_rs bench_sweep" (the cost model's calibration, then issue 24's seed and layer tables).
# Steps run in the order of this file, not of GPU_CHECK_ONLY.
#
# Output: with $OUT set (the device machine returns at most 8 files from it), $OUT/gpu_check.md (the table) and
# $OUT/gpu_check.tgz (every log, the benchmarks' new files under bench/results, tuning tables), both rewritten after
# every step so a killed run still leaves them; without $OUT, everything stays in a temp directory.
#
# Needs the device libraries (python/triton_dist/_device/*.bc, from scripts/build.sh) but no compiled extension.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TRITON_DIST_TIMEOUT_S="${TRITON_DIST_TIMEOUT_S:-90}"
# The wait watchdog (default 600 s) below the host's device timeout, so a hung wait is stopped and named by the kernel
# that waited, not only reported as device work that did not finish (session 30: a 4-rank gemm_rs deadlock).
export TRITON_DIST_WAIT_TIMEOUT_S="${TRITON_DIST_WAIT_TIMEOUT_S:-60}"
PYTHON="${PYTHON:-python3}"
DRY="${GPU_CHECK_DRY_RUN:-0}"
QUICK="${GPU_CHECK_QUICK:-0}"
BUDGET="${GPU_CHECK_BUDGET_S:-3000}"
SHARED="${GPU_CHECK_SHARED_GPU:-0}"
[ "$SHARED" = 1 ] && export TRITON_DIST_SHARED_GPUS=1
# Ranks that share GPUs must all share one (the CUDA IPC heap reaches no other GPU: runtime/heap/mapping.py).
[ "$SHARED" = 1 ] && export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
WORKDIR="$(mktemp -d /tmp/gpu_check.XXXXXX)"
LOGDIR="$WORKDIR/gpu_check"
mkdir -p "$LOGDIR"
# Tuning tables (tuning.json) land here, so they are packed with the logs.
export TRITON_DIST_CACHE_DIR="${TRITON_DIST_CACHE_DIR:-$LOGDIR/cache}"
TABLE="$LOGDIR/results.md"
START=$(date +%s)
STAMP="$WORKDIR/started"
touch "$STAMP"

say() { echo "[gpu_check +$(($(date +%s) - START))s] $*"; }

# Copies the table and packs the logs into $OUT (no-op without $OUT); run after every step.
pack() {
  [ -n "${OUT:-}" ] || return 0
  mkdir -p "$OUT"
  cp "$TABLE" "$OUT/gpu_check.md"
  mkdir -p "$LOGDIR/bench_results"
  find bench/results -maxdepth 1 -type f -newer "$STAMP" -exec cp {} "$LOGDIR/bench_results/" \; 2>/dev/null
  for table in python/triton_dist/ops/tuned_configs.json python/triton_dist/ops/tuning/calibrations.json; do
    [ -f "$table" ] && [ "$table" -nt "$STAMP" ] && cp "$table" "$LOGDIR/bench_results/"
  done
  tar czf "$OUT/gpu_check.tgz.part" -C "$WORKDIR" gpu_check && mv "$OUT/gpu_check.tgz.part" "$OUT/gpu_check.tgz"
}

gpu_query() { [ "$DRY" = 1 ] || nvidia-smi --query-gpu="$1" --format=csv,noheader 2>/dev/null; }

{
  echo "# triton-dist GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- machine: $(hostname), $(gpu_query name | sort | uniq -c | sed 's/^ *//' | paste -sd ';' -)"
  echo "- driver: $(gpu_query driver_version | head -1)"
  if [ "$DRY" != 1 ]; then
    echo "- software: $("$PYTHON" -c 'import sys, torch, triton; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}")' 2>&1)"
  fi
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
  echo "- command: \`$0 $*\` (GPU_CHECK_SIZES=${GPU_CHECK_SIZES:-auto}, GPU_CHECK_QUICK=$QUICK, GPU_CHECK_BENCH=${GPU_CHECK_BENCH:-0}, GPU_CHECK_TUNE=${GPU_CHECK_TUNE:-0}, GPU_CHECK_ONLY=${GPU_CHECK_ONLY:-all}, GPU_CHECK_BUDGET_S=$BUDGET)"
  [ "$SHARED" = 1 ] && echo "- **shared GPUs** (GPU_CHECK_SHARED_GPU=1): ranks share GPUs through MPS and gloo; correctness only, timings mean nothing"
  echo "- env: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TRITON_DIST_TIMEOUT_S=$TRITON_DIST_TIMEOUT_S TRITON_DIST_WAIT_TIMEOUT_S=${TRITON_DIST_WAIT_TIMEOUT_S-(unset)}"
  echo
} >"$TABLE"

say "logs in $LOGDIR${OUT:+ (packed into $OUT/gpu_check.tgz)}"
if [ "$DRY" = 1 ]; then
  NGPU="${GPU_CHECK_SIZES:-2}"
  NGPU="${NGPU##* }"
else
  nvidia-smi 2>&1 | tee "$LOGDIR/nvidia-smi.txt"
  nvidia-smi topo -m 2>&1 | tee "$LOGDIR/topology.txt"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >"$LOGDIR/clocks.txt" 2>&1
  "$PYTHON" - <<'PY' 2>&1 | tee "$LOGDIR/versions.txt"
import sys, torch, triton
print("python", sys.version)
print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)
print("triton", triton.__version__)
print("gpus", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
PY
  NGPU=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
fi
if [ -n "${GPU_CHECK_SIZES:-}" ]; then
  SIZES="$GPU_CHECK_SIZES"
elif [ "$SHARED" = 1 ] && [ "$NGPU" -ge 1 ]; then
  SIZES="2"
else
  SIZES=""
  for n in 2 4; do [ "$NGPU" -ge "$n" ] && SIZES="$SIZES $n"; done
fi
FAILED=0
if [ -z "${SIZES// /}" ]; then
  say "FAIL: found $NGPU GPUs; these checks need at least 2"
  echo "**FAIL: found $NGPU GPUs, need at least 2.**" >>"$TABLE"
  pack
  cat "$TABLE"
  exit 1
fi

missing=""
for lib in python/triton_dist/_device/triton_dist.nvptx64.bc; do
  [ -f "$lib" ] || missing="$missing $lib"
done
if [ -n "$missing" ] && [ "$DRY" != 1 ]; then
  say "FAIL: device library missing:$missing (run scripts/build.sh on a machine with LLVM/MLIR and copy it here)"
  echo "**FAIL: device library missing:$missing**" >>"$TABLE"
  pack
  cat "$TABLE"
  exit 1
fi

if [ "$QUICK" = 1 ]; then
  LITMUS_ARGS="--rounds 20000"; PING_ARGS="--rounds 2000 --launches 20"; AG_ARGS="--sizes-mib 1 128 --iters 20"
  COPY_ARGS="--rounds 500"; QUICK_ARG="--quick"
else
  LITMUS_ARGS="--rounds 100000"; PING_ARGS="--rounds 10000 --launches 20"; AG_ARGS="--sizes-mib 1 8 64 128 --iters 20"
  COPY_ARGS="--rounds 2000"; QUICK_ARG=""
fi
if [ "${GPU_CHECK_MEASURE:-0}" = 1 ]; then
  COPY_ARGS="$COPY_ARGS --measure --results-md $LOGDIR/copy_engine.md"
fi
SHAPE_ARGS=()
[ -n "${GPU_CHECK_SHAPES:-}" ] && SHAPE_ARGS=(--shapes "$GPU_CHECK_SHAPES")
TUNE_ARG=""
[ "${GPU_CHECK_TUNE:-0}" = 1 ] && TUNE_ARG="--tune"

echo "| ranks | step | result | seconds | details |" >>"$TABLE"
echo "|---|---|---|---|---|" >>"$TABLE"

declare -A STEP_RESULT=()

# due <group> <name>: whether a step runs. GPU_CHECK_ONLY names the steps exactly; otherwise the "check" group always
# runs, "bench" with GPU_CHECK_BENCH=1 and "tune" with GPU_CHECK_TUNE=1.
due() {
  local group="$1" name="$2"
  if [ -n "${GPU_CHECK_ONLY:-}" ]; then
    [[ " $GPU_CHECK_ONLY " == *" $name "* ]]
    return
  fi
  [ "$SHARED" = 1 ] && [ "$group" != check ] && return 1
  case "$group" in
    check) return 0 ;;
    bench) [ "${GPU_CHECK_BENCH:-0}" = 1 ] ;;
    tune) [ "${GPU_CHECK_TUNE:-0}" = 1 ] ;;
  esac
}

# shellcheck source=scripts/mps.sh
source scripts/mps.sh
[ "$SHARED" = 1 ] && trap mps_stop EXIT

# run_step <group> <ranks> <name> <timeout seconds> <script> [args...]; ranks 1 runs the script without torchrun.
run_step() {
  local group="$1" ranks="$2" name="$3" limit="$4" script="$5"
  shift 5
  due "$group" "$name" || return 0
  local launcher=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node="$ranks")
  [ "$ranks" = 1 ] && launcher=("$PYTHON")
  local left=$((BUDGET - ($(date +%s) - START) - 10))
  [ "$left" -lt "$limit" ] && limit="$left"
  if [ "$limit" -lt 30 ]; then
    say "$name on $ranks GPUs: SKIP (only ${left}s of GPU_CHECK_BUDGET_S=$BUDGET left)"
    echo "| $ranks | $name | SKIP | 0 | out of GPU_CHECK_BUDGET_S=$BUDGET |" >>"$TABLE"
    FAILED=1
    pack
    return 0
  fi
  if [ "$DRY" = 1 ]; then
    say "DRY $name on $ranks GPUs (timeout ${limit}s): ${TRITON_DIST_BACKEND:+TRITON_DIST_BACKEND=$TRITON_DIST_BACKEND }${launcher[*]} $script $*"
    echo "| $ranks | $name | DRY | 0 | \`$script $*\` |" >>"$TABLE"
    STEP_RESULT[$name]=PASS
    return 0
  fi
  local log="$LOGDIR/${ranks}gpu_${name}.log" began status result details
  say "== $name on $ranks GPUs (timeout ${limit}s): $script $*"
  began=$(date +%s)
  if [ "$SHARED" = 1 ] && [ "$ranks" -gt "$NGPU" ]; then
    # A fresh MPS daemon per step: a watchdog trap in one step cannot leave a broken server to the next.
    local percent
    percent=$(mps_share "$ranks" "$NGPU")
    mps_start "$WORKDIR" "$LOGDIR/mps_$name.log"
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="$percent" timeout -k 20 "$limit" "${launcher[@]}" "$script" "$@" >"$log" 2>&1
    status=$?
    mps_stop
    echo "(shared GPUs: $ranks ranks on $NGPU GPU(s) through MPS, ${percent}% of the SMs each)" >>"$log"
  else
    timeout -k 20 "$limit" "${launcher[@]}" "$script" "$@" >"$log" 2>&1
    status=$?
  fi
  local took=$(($(date +%s) - began))
  case "$status" in
    0) result="PASS" ;;
    124 | 137) result="TIMEOUT"; FAILED=1 ;;
    *) result="FAIL (exit $status)"; FAILED=1 ;;
  esac
  STEP_RESULT[$name]="$result"
  # Key numbers (RESULT lines), failed checks and the pass/fail tally go into the table.
  details=$(grep -hoE 'RESULT .*|FAIL .*|INFO .*|TUNED .*|BEST .*|Geo-mean.*|[0-9]+ passed, [0-9]+ failed here; [0-9]+ failures over all ranks' "$log" \
    | sed -E 's/^RESULT //' | sort -u | head -20 | paste -sd ';' - | sed 's/|/\//g')
  if [ "$result" != "PASS" ]; then
    local cause
    cause=$(grep -hE 'FATAL|Error|error:' "$log" | grep -vE '^ *File |elastic' | head -n 1 | cut -c1-300 | sed 's/|/\//g')
    details="${details:+$details; }${cause:-no error line}"
  fi
  echo "| $ranks | $name | $result | $took | ${details:-see log} |" >>"$TABLE"
  say "$name on $ranks GPUs: $result in ${took}s (log: $log)"
  if [ "$result" != "PASS" ]; then
    tail -n 40 "$log"
  else
    grep -hE 'RESULT|FAIL|INFO|TUNED|BEST|Geo-mean' "$log" | head -20
  fi
  pack
}

for n in $SIZES; do
  run_step check "$n" primitives 240 test/gpu/check_primitives.py
  run_step check "$n" litmus 180 test/gpu/check_litmus.py $LITMUS_ARGS
  run_step check "$n" copy_engine 240 test/gpu/check_copy_engine.py $COPY_ARGS
  run_step check "$n" ping_pong 120 examples/ping_pong.py $PING_ARGS
  run_step check "$n" allgather_push 180 examples/allgather_push.py $AG_ARGS
  run_step check "$n" allgather_pull 180 examples/allgather_pull.py $AG_ARGS
  run_step check "$n" ag_gemm 300 test/gpu/check_ag_gemm.py
  run_step check "$n" memory_model 180 test/gpu/check_memory_model.py
  run_step check "$n" decode_ops 360 test/gpu/check_decode_ops.py
  run_step check "$n" ar_rmsnorm 420 test/gpu/check_ar_rmsnorm.py
  run_step check "$n" gemm_rs 300 test/gpu/check_gemm_rs.py $QUICK_ARG
  run_step check "$n" layers 300 test/gpu/check_layers.py
  # MoE at more than 2 ranks (the "moe" step below runs 2, every check): the GPU test's worker at every rank of the
  # world, --quick (the defaults' code paths at this size, not every option again: its QUICK_SKIPS; about half the
  # checks and kernels), printing a line per group of checks so a timeout says where it stopped. The wait watchdog
  # (TRITON_DIST_WAIT_TIMEOUT_S, 60 s above) stops a kernel waiting for a flag no peer sets with a WaitTimeoutError
  # naming the wait, where normal mode's host would poll the route kernel's summary unbounded.
  if [ "$n" -gt 2 ]; then
    run_step check "$n" moe_ranks 300 test/python/test_ops_moe_gpu.py "$LOGDIR/moe_ranks_$n" --quick
  fi
done
first=$(echo $SIZES | awk '{print $1}')
last=$(echo $SIZES | awk '{print $NF}')
run_step check "$first" guards 300 test/gpu/check_guards.py
run_step check "$first" guard_cost 300 bench/guard_cost.py --results "$LOGDIR/guard_cost"
run_step check "$first" watchdog 300 test/gpu/check_watchdog.py
run_step check "$first" watchdog_cost 300 bench/watchdog_cost.py --results "$LOGDIR/watchdog_cost"
# The round trip's release write and poll crossed, ours against Triton's atomics (issue 12, item 6).
run_step check "$first" round_trip_variants 240 bench/round_trip_variants.py --results "$LOGDIR/round_trip_variants"
# The NVSHMEM heap (issue 29): the primitives and two examples again, init()'s default backend set to nvshmem (torch
# symmetric memory's NVSHMEM backend; one rank per GPU, so not with shared GPUs).
if [ "$SHARED" != 1 ]; then
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" primitives_nvshmem 240 test/gpu/check_primitives.py
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" ping_pong_nvshmem 120 examples/ping_pong.py $PING_ARGS
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" allgather_push_nvshmem 180 examples/allgather_push.py $AG_ARGS
  # NVSHMEM's device calls in kernels (dl.put_signal / dl.get / dl.signal_wait), linking the converted device code.
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" nvshmem_put 240 test/gpu/check_nvshmem_put.py
  # Every other check on the NVSHMEM heap too (issue 29: the litmus tests, the memory model and every op, with the
  # heap's peer mappings from NVSHMEM instead of CUDA IPC).
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" litmus_nvshmem 180 test/gpu/check_litmus.py $LITMUS_ARGS
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" memory_model_nvshmem 180 test/gpu/check_memory_model.py
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" ag_gemm_nvshmem 300 test/gpu/check_ag_gemm.py
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" gemm_rs_nvshmem 300 test/gpu/check_gemm_rs.py --quick
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" decode_ops_nvshmem 360 test/gpu/check_decode_ops.py
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" ar_rmsnorm_nvshmem 420 test/gpu/check_ar_rmsnorm.py
  TRITON_DIST_BACKEND=nvshmem run_step check "$first" layers_nvshmem 300 test/gpu/check_layers.py
  # ops.all_gather: one node on both heaps, then two torchrun agents on this host as two nodes (NVSHMEM puts
  # between them); the script launches its own agents and kills their process groups on a timeout.
  run_step check 1 all_gather 420 test/gpu/check_all_gather.py
  # ops.all_reduce across nodes (its hierarchical kernel), the same stages: check_all_gather.py's launcher.
  run_step check 1 all_reduce_nodes 420 test/gpu/check_all_reduce_nodes.py
  # moe_dispatch / moe_combine across nodes (normal mode: NVSHMEM puts to the other node), the same stages.
  run_step check 1 moe_nodes 420 test/gpu/check_moe_nodes.py
fi
# MoE dispatch / combine (normal, low-latency, CUDA-graph replays, fp8) against the torch reference: the pytest entry
# launches its 2-rank worker itself and fails on any difference (issue 27).
run_step check 1 moe 300 test/gpu/check_moe.py
# The flag round trip inside one GPU (two programs through L2): the instructions' own cost beside ping_pong's.
run_step check 1 round_trip_one_gpu 120 bench/round_trip_one_gpu.py
run_step tune "$last" allgather_tune 420 bench/allgather_tune.py --size-mib 128

# The ops benchmarks (results under bench/results, packed) and their tuning, on the first size. The matmul step writes
# the GEMM tiles tune_ag_gemm starts from; tune_ag_gemm writes the package table bench_ag_gemm uses.
run_step bench 1 bench_matmul 200 bench/matmul.py --world-size "$first"
# This GPU's calibration for the cost model (ops/tuning/calibrations.json, packed), before anything that selects.
run_step tune "$first" calibrate 180 bench/calibrate.py --write-package-table
run_step tune "$first" tune_ag_gemm 360 bench/tune_overlap.py --write-package-table "${SHAPE_ARGS[@]}" $QUICK_ARG
run_step bench "$first" bench_ag_gemm 240 bench/ag_gemm.py "${SHAPE_ARGS[@]}"
# The A/B of docs/results/2026-11-23-wgmma-serialization.md: one shape again with TRITON_DIST_DEBUG=1, whose kernels
# keep the checks' __assertfail calls (ptxas serializes their wgmma); compare its "fused kernel, no comm" column.
TRITON_DIST_DEBUG=1 run_step bench "$first" bench_ag_gemm_serialized 200 bench/ag_gemm.py --shapes "8192,4608,36864" \
  --tag serialized_wgmma
# A failed gemm_rs check in this run leaves the cuBLAS path (the newer one) out of the sweep, so a hang there cannot
# take the whole tuning run with it.
GEMM_RS_CANDIDATES=all
case "${STEP_RESULT[gemm_rs]:-PASS}" in PASS) ;; *) GEMM_RS_CANDIDATES=triton ;; esac
run_step tune "$first" tune_gemm_rs 400 bench/gemm_rs.py --tune --write-package-table --reps 20 --candidates "$GEMM_RS_CANDIDATES" "${SHAPE_ARGS[@]}"
run_step bench "$first" bench_gemm_rs 300 bench/gemm_rs.py --reps 30 "${SHAPE_ARGS[@]}"
# Both overlap ops on real model layers, with each row's overlap bound and issue 24's bar lines.
run_step bench "$first" bench_sweep 420 bench/sweep.py $QUICK_ARG
# Where the host's µs per eager call of ag_gemm / gemm_rs go on GPUs (cProfile), beside the unfused path: the rows
# below issue 24's from-idle floor.
run_step bench "$first" bench_host_path 200 bench/host_path_gpu.py
run_step bench "$first" bench_all_reduce 420 bench/all_reduce.py $TUNE_ARG
run_step bench "$first" bench_gemm_ar 200 bench/gemm_ar.py ${TUNE_ARG:+--write-package-table}
run_step bench "$first" bench_ar_rmsnorm 240 bench/ar_rmsnorm.py
run_step bench "$first" bench_flash_decode 240 bench/flash_decode.py
# flash_decode alone at the decoder's batch-64 shapes over a grid of configs, beside SDPA on the same bytes (issue 28:
# which config reads the KV cache nearest the HBM rate; docs/design.md "flash_decode at batch 64").
run_step bench "$first" bench_flash_decode_batch 300 bench/flash_decode_batch.py --out-dir "$LOGDIR/flash_decode_batch"
# Ours (default and gather layouts), the NCCL and NVSHMEM dispatchers, fp8, and the EP layer against NCCL + the same
# grouped GEMM: about 1-2 minutes before the gather rows and the layer were added (2026-11-27); not yet timed with them.
run_step bench "$first" bench_moe 420 bench/moe.py --heap 12G
# Ours' normal dispatch only (default, gather, fp8, pipelined), with its phases: a minute or two.
run_step bench "$first" bench_moe_dispatch 240 bench/moe.py --only-dispatch --heap 12G
run_step bench "$first" bench_decoder 300 bench/decoder.py
# Prefill only: ours' prefill options beside torch, and the fused prefill kernels alone against torch's ops.
run_step bench "$first" bench_prefill 300 bench/decoder.py --batches "" --prefill 4096,8192 \
  --prefill-variants unfused,no-gqa,no-rope --kernels
# Where the decoder layers' time goes, ours against torch, on the rows that miss issue 28's bar (profiled).
run_step bench "$first" bench_decoder_anatomy 300 bench/decoder_anatomy.py
# One GPU: flash_decode's fixed cost and streaming rate (bench/results/flash_decode_anatomy.md), gemm_ar's GEMM tiles
# at the per-rank sizes of the first size (bench/results/gemm_ar_tiles.md).
run_step bench 1 bench_flash_decode_anatomy 200 bench/flash_decode_anatomy.py
run_step bench 1 bench_gemm_ar_tiles 300 bench/gemm_ar_tiles.py --k-ranks "$first"
# The NVSHMEM heap's cost against the CUDA-IPC heap (ping-pong, push all-gather, all_reduce; one torchrun per heap,
# alternating; issue 29's bar: <= 3%).
run_step bench 1 bench_heap_backends 600 bench/heap_backends.py --nproc "$first" --out "$LOGDIR/heap_backends.md"
# Why the 64 KiB all_reduce costs more on the NVSHMEM heap: the probe (docs/results/2026-11-27-session24-heap64.md),
# heap variants rotated over trials; runs only when GPU_CHECK_ONLY names it.
if [[ " ${GPU_CHECK_ONLY:-} " == *" probe_heap64 "* ]]; then
  run_step bench 1 probe_heap64 600 bench/heap_backends.py --nproc "$first" --only all_reduce --ar-sizes 64 1024 \
    --probe --trials 4 --replays 40 --variants cuda_ipc nvshmem nvshmem:HEAP_BACKENDS_BASE_ALIGN=2097152 \
    nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1 --out "$LOGDIR/heap64_probe.md"
fi

{
  echo
  echo "Total: $(($(date +%s) - START)) s. Overall: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)."
} >>"$TABLE"
pack
echo
cat "$TABLE"
# With $OUT the packed copy is the record; a dry run leaves nothing behind.
{ [ -n "${OUT:-}" ] || [ "$DRY" = 1 ]; } && rm -rf "$WORKDIR"
exit "$FAILED"
