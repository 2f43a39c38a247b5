"""bench/host_path_cpu.py's overlap rows run: every GPU path of ag_gemm and gemm_rs the script builds by hand (the
cuBLAS path with the begin barrier and on double buffers with each flag scheme, and with the waits beside the own
GEMM) is called through the public op and timed. The script builds the plans with the op modules' own helpers, so a
change of their signatures must show here, not on the next GPU-less profiling run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "ag_gemm fused, 4 chunks",
    "ag_gemm fused TMA, 4 chunks",
    "ag_gemm cuBLAS path, begin barrier (captured calls)",
    "ag_gemm cuBLAS path, begin barrier, out=",
    "ag_gemm cuBLAS path, double buffers, kernels flags",
    "ag_gemm cuBLAS path, double buffers, memops flags",
    "ag_gemm cuBLAS path, double buffers, memop_write flags",
    "ag_gemm cuBLAS path, double buffers, memop_parity flags",
    "ag_gemm cuBLAS path, double buffers, memop_parity flags, waits beside",
    "gemm_rs cuBLAS path, direct",
    "gemm_rs cuBLAS path, ce",
    "gemm_rs cuBLAS path, ce, out=",
)


def test_the_overlap_rows_run_and_report_a_time() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    command = [sys.executable, str(ROOT / "bench" / "host_path_cpu.py"), "--only", "overlap", "--calls", "3"]
    done = subprocess.run(command + ["--repeats", "1"], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    for row in ROWS:
        found = re.search(rf"^  {re.escape(row)}\s+(\d+\.\d+)$", done.stdout, re.MULTILINE)
        assert found is not None, f"no row {row!r} in:\n{done.stdout}"
        assert float(found.group(1)) > 0
