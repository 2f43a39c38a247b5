#!/usr/bin/env bash
# Runs the whole test suite: style (ruff), the lit/FileCheck suite of the C++ dialect, passes and device libraries,
# and the Python tests (CPU compile tests for sm_90 and gfx942; GPU tests skip visibly on machines without GPUs).
# Expects scripts/setup.sh and scripts/build.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff"
python3 -m ruff check python test examples bench scripts

echo "== lit (test/)"
/usr/lib/llvm-22/bin/lit -sv build/test

echo "== pytest (test/python)"
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs test/python
