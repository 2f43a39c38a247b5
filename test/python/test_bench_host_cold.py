"""bench/host_cold.py runs: every row (the pieces of the overlap ops' eager fast path, each op's call before and now,
the fallbacks to their first launch) reports a time in each mode. The script rebuilds the previous entries from the
ops' pieces and stubs their ``_eager_call``, so a change of those shows here, not on the next profiling run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "PlanCache.eager_plan(a, b, out)",
    "gemm_rs(a, b): before",
    "gemm_rs(a, b, out=): now",
    "ag_gemm(a, b, out=): now",
    "gemm_rs fallback, to its torch.mm: now",
    "ag_gemm fallback, to its all-gather: before",
)


def test_every_row_reports_a_time_in_each_mode() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    command = [sys.executable, str(ROOT / "bench" / "host_cold.py"), "--samples", "4"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    for row in ROWS:
        cell = r"(\d+\.\d) / \d+\.\d"
        found = re.search(rf"^\| {re.escape(row)} \| {cell} \| {cell} \| {cell} \|$", done.stdout, re.MULTILINE)
        assert found is not None, f"no row {row!r} in:\n{done.stdout}"
        assert all(float(time) > 0 for time in found.groups())
