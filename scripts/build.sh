#!/usr/bin/env bash
# Configures and builds triton-dist (dialect, passes, triton-dist-opt, the Python module, the device libraries and
# the generated docs) into build/ with clang-22 + lld + ninja. The device libraries and the Python module are
# installed into python/triton_dist/ as part of the build. Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_PREFIX=/usr/lib/llvm-22
BUILD_DIR=${TRITON_DIST_BUILD_DIR:-build}

# A build directory remembers its source directory (CMakeCache.txt's CMAKE_HOME_DIRECTORY), and `cmake --build` in it
# rebuilds that tree, not this one: a checkout copied with its build/ would rebuild (and install into) the original.
# Such a directory inside this checkout is a stale copy: it is removed and configured afresh. One elsewhere (named by
# TRITON_DIST_BUILD_DIR) may be another checkout's build: that is an error, not something to delete.
if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  source_dir=$(pwd -P)
  configured_for=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
  configured_real=""
  if [ -n "$configured_for" ] && [ -d "$configured_for" ]; then configured_real=$(cd "$configured_for" && pwd -P); fi
  if [ "$configured_real" != "$source_dir" ]; then
    build_real=$(cd "$BUILD_DIR" && pwd -P)
    case "$build_real/" in
      "$source_dir"/) ;; # the checkout itself: never removed; the error below
      "$source_dir"/*)
        echo "build: $BUILD_DIR was configured for ${configured_for:-an unknown source directory}, not $source_dir" \
          "(a copied checkout?): removing it and configuring afresh" >&2
        rm -rf "$BUILD_DIR"
        ;;
    esac
    if [ -d "$BUILD_DIR" ]; then
      echo "build: $BUILD_DIR ($build_real) was configured for ${configured_for:-an unknown source directory}," \
        "not $source_dir: building there would rebuild that tree. Set TRITON_DIST_BUILD_DIR to a new directory" \
        "(or remove that one)" >&2
      exit 1
    fi
  fi
fi

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
# NVSHMEM's device functions behind dl.put_signal / dl.get / dl.signal_wait, cut out of the nvidia-nvshmem wheel into
# textual IR that triton 3.6's LLVM reads (TRITON_DIST_NVSHMEM_VERSION picks the version; docs/multi-node.md). Not
# fatal: only kernels calling those primitives need it, and without it they fall back to the wheel's bitcode.
python3 scripts/nvshmem_device.py --cache "$BUILD_DIR/nvshmem" ||
  echo "build: NVSHMEM's device code was not converted (above): kernels calling dl.put_signal use the wheel's" >&2
echo "build: $(ls "$BUILD_DIR"/bin/triton-dist-opt) and $(ls python/triton_dist/_device/*.bc python/triton_dist/_device/*.ll 2>/dev/null | tr '\n' ' ')" \
  "(${SECONDS} s)"
