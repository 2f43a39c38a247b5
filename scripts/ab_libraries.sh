#!/usr/bin/env bash
# A/B of two device-library builds in one GPU job: runs one command under each library in turn (A B A B ...),
# so host-to-host and run-to-run drift lands on both sides. Each run's output is kept under $OUT (or a temp
# directory) and its lines matching AB_GREP are printed, labelled with the run and the library.
#
#   AB_A=python/triton_dist/_device AB_B=build-old-device-lib AB_ROUNDS=2 AB_GREP='Geo-mean' \
#     bash scripts/ab_libraries.sh torchrun --nproc-per-node=2 bench/gemm_rs.py --reps 30
#
# AB_A / AB_B: directories holding triton_dist.*.bc (TRITON_DIST_DEVICE_LIB_DIR; the compile cache key digests the
# bitcode, so the two never share a compiled kernel). AB_ROUNDS (default 2): runs per library. AB_GREP (default
# 'RESULT|Geo-mean'): the lines to print. AB_TIMEOUT_S (default 240): per run. To make B from another revision's
# lowering: build it (scripts/build.sh), copy python/triton_dist/_device/*.bc to a directory, rebuild this one,
# and carry both directories to the device machine.
#
# Exit code 0 iff every run exited 0.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

if [[ $# -eq 0 || -z "${AB_A:-}" || -z "${AB_B:-}" ]]; then
  echo "usage: AB_A=DIR AB_B=DIR [AB_ROUNDS=2] [AB_GREP=REGEX] bash scripts/ab_libraries.sh COMMAND..." >&2
  exit 2
fi
for dir in "$AB_A" "$AB_B"; do
  if ! ls "$dir"/triton_dist.*.bc >/dev/null 2>&1; then
    echo "ab_libraries: no triton_dist.*.bc in $dir" >&2
    exit 2
  fi
done
ROUNDS="${AB_ROUNDS:-2}"
PATTERN="${AB_GREP:-RESULT|Geo-mean}"
LOGS="${OUT:-$(mktemp -d)}/ab_libraries"
mkdir -p "$LOGS"

status=0
run=0
for ((round = 1; round <= ROUNDS; round++)); do
  for side in A B; do
    run=$((run + 1))
    dir="AB_$side"
    dir="$(cd "${!dir}" && pwd)"
    log="$LOGS/run${run}_$side.log"
    echo "== run $run: library $side ($dir): $*"
    TRITON_DIST_DEVICE_LIB_DIR="$dir" timeout "${AB_TIMEOUT_S:-240}" "$@" >"$log" 2>&1
    rc=$?
    [[ $rc -eq 0 ]] || { status=1; echo "run $run ($side) exited $rc; log: $log"; }
    grep -E "$PATTERN" "$log" | sed "s/^/[run $run $side] /"
  done
done
exit $status
