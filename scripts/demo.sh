#!/usr/bin/env bash
# The README's main job: show a small distributed kernel at every stage of the lowering.
#
#   (a) examples/ir/ring_step.mlir, written in the `distributed` dialect
#   (b) after the pipeline --triton-dist-lower-to-nvvm (our lowering and the upstream passes to the LLVM dialect)
#   (c) PTX for sm_90 (mlir-translate + llc)
#   (d) after the pipeline --triton-dist-lower-to-rocdl
#   (e) AMDGCN for gfx942 (mlir-translate + llc)
#   (f) a plain @triton.jit kernel using triton_dist.language, compiled by the stock Triton wheel for sm_90 and
#       gfx942: the PTX / AMDGCN lines that implement the primitives (scripts/demo_triton.py)
#
# Expects scripts/build.sh to have run; TRITON_DIST_BUILD_DIR picks the build directory (default: build).
# Any broken stage stops the demo with a non-zero exit code.
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_BIN=/usr/lib/llvm-22/bin
BUILD_DIR=${TRITON_DIST_BUILD_DIR:-build}
OPT="$BUILD_DIR/bin/triton-dist-opt"
INPUT=examples/ir/ring_step.mlir

for tool in "$OPT" "$LLVM_BIN/mlir-translate" "$LLVM_BIN/llc"; do
  if [ ! -x "$tool" ]; then
    echo "demo: $tool not found: run scripts/setup.sh and scripts/build.sh first" >&2
    exit 1
  fi
done

# The named pipeline registered in C++ (triton_dist.mlir.lowering_pipeline() names it too): structured control flow
# goes to cf first (wait lowers to a polling loop, which needs a multi-block region), then our lowering, then the
# upstream conversions to LLVM.
pipeline() {
  echo "builtin.module(triton-dist-lower-to-$1)"
}

heading() {
  echo
  echo "=================================================================================================="
  echo "== $*"
  echo "=================================================================================================="
}

WORK=$(mktemp -d /tmp/triton-dist-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

heading "(a) the distributed dialect: $INPUT"
"$OPT" "$INPUT" | tee "$WORK/input.mlir"

heading "(b) NVIDIA: $OPT --pass-pipeline='$(pipeline nvvm)'"
"$OPT" "$INPUT" --pass-pipeline="$(pipeline nvvm)" | tee "$WORK/nvvm.mlir"

heading "(c) NVIDIA: PTX for sm_90 (mlir-translate --mlir-to-llvmir | llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90)"
"$LLVM_BIN/mlir-translate" --mlir-to-llvmir "$WORK/nvvm.mlir" -o "$WORK/nvvm.ll"
"$LLVM_BIN/llc" -O3 -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -mattr=+ptx80 "$WORK/nvvm.ll" -o "$WORK/ring_step.ptx"
cat "$WORK/ring_step.ptx"

heading "(d) AMD: $OPT --pass-pipeline='$(pipeline rocdl)'"
"$OPT" "$INPUT" --pass-pipeline="$(pipeline rocdl)" | tee "$WORK/rocdl.mlir"

heading "(e) AMD: AMDGCN for gfx942 (mlir-translate --mlir-to-llvmir | llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942)"
"$LLVM_BIN/mlir-translate" --mlir-to-llvmir "$WORK/rocdl.mlir" -o "$WORK/rocdl.ll"
"$LLVM_BIN/llc" -O3 -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 "$WORK/rocdl.ll" -o "$WORK/ring_step.s"
# The code, without the debug/metadata sections llc appends.
sed -n '/^\s*\.section\s*\.AMDGPU\.csdata/q;p' "$WORK/ring_step.s"

heading "(f) a plain @triton.jit kernel with triton_dist.language, compiled by triton $(python3 -c 'import triton; print(triton.__version__)')"
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/demo_triton.py

echo
echo "demo: every stage done"
