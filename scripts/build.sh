#!/usr/bin/env bash
# Configures and builds triton-dist (dialect, passes, triton-dist-opt, the Python module, the device libraries and
# the generated docs) into build/ with clang-22 + lld + ninja. The device libraries and the Python module are
# installed into python/triton_dist/ as part of the build. Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_PREFIX=/usr/lib/llvm-22
BUILD_DIR=${TRITON_DIST_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$LLVM_PREFIX/bin/clang" \
    -DCMAKE_CXX_COMPILER="$LLVM_PREFIX/bin/clang++" \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DPython3_EXECUTABLE="$(command -v python3)"
fi
cmake --build "$BUILD_DIR" -j "${TRITON_DIST_JOBS:-$(nproc)}"
echo "build: $(ls "$BUILD_DIR"/bin/triton-dist-opt) and $(ls python/triton_dist/_device/*.bc 2>/dev/null | tr '\n' ' ')"
