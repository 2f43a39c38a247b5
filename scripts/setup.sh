#!/usr/bin/env bash
# Installs everything triton-dist needs on a fresh Debian 12 machine (as root): LLVM/MLIR 22 from Debian's
# packages, and the pinned Python packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=0
for tool in /usr/lib/llvm-22/bin/mlir-tblgen /usr/lib/llvm-22/bin/llc /usr/lib/llvm-22/bin/clang++ \
  /usr/lib/llvm-22/bin/ld.lld /usr/lib/llvm-22/bin/clang-format /usr/lib/llvm-22/lib/cmake/mlir/MLIRConfig.cmake \
  /usr/bin/ninja /usr/bin/cmake; do
  [ -e "$tool" ] || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22 clang-format-22 lld-22 cmake ninja-build >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -r requirements.txt
echo "setup: LLVM/MLIR $(/usr/lib/llvm-22/bin/llvm-config --version), $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)') (${SECONDS} s)"
