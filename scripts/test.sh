#!/usr/bin/env bash
# Runs the whole test suite: style (ruff, clang-format), types (mypy), the lit/FileCheck suite of the C++ dialect,
# passes and device libraries, and the Python tests (CPU compile tests for sm_90 and gfx942; GPU tests skip visibly on
# machines without GPUs), then lists the 20 slowest tests.
# Expects scripts/setup.sh and scripts/build.sh to have run; TRITON_DIST_BUILD_DIR picks the build directory
# (default: build), for lit and for the tests that compare against the build (the generated docs).
# pytest runs on every core (pytest-xdist); TRITON_DIST_TEST_JOBS=1 runs it in one process. Each step prints when
# it started (seconds into the script), to keep an eye on CI time (at most 10 minutes for a fresh clone's .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TRITON_DIST_BUILD_DIR:-build}
export TRITON_DIST_BUILD_DIR="$BUILD_DIR"

echo "== ruff (at ${SECONDS} s)"
python3 -m ruff check python test examples bench scripts tools

echo "== clang-format (.clang-format: LLVM style) (at ${SECONDS} s)"
CLANG_FORMAT=/usr/lib/llvm-22/bin/clang-format
if [ ! -x "$CLANG_FORMAT" ]; then
  echo "test: $CLANG_FORMAT not found: run scripts/setup.sh (it installs clang-format-22)" >&2
  exit 1
fi
git ls-files -z '*.cpp' '*.h' | xargs -0 "$CLANG_FORMAT" --dry-run --Werror

echo "== mypy (python/triton_dist; pyproject.toml [tool.mypy]) (at ${SECONDS} s)"
python3 -m mypy

echo "== lit (test/) (at ${SECONDS} s)"
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test"

echo "== pytest (test/python, and test/gpu/test_gpu_scripts.py: its CPU tests of the GPU scripts; its GPU tests skip) (at ${SECONDS} s)"
JOBS=${TRITON_DIST_TEST_JOBS:-auto}
if [ "$JOBS" = 1 ]; then parallel=(); else parallel=(-n "$JOBS" --dist worksteal); fi
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs -p no:benchmark --durations=20 \
  "${parallel[@]}" test/python test/gpu/test_gpu_scripts.py
