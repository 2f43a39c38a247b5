"""MoE dispatch / combine on 2 GPUs against the torch reference, as one ``scripts/gpu_check.sh`` step.

    python3 test/gpu/check_moe.py

Runs ``test/python/test_ops_moe_gpu.py`` under pytest (it launches its own 2-rank torchrun worker and fails on any
difference from the reference: normal and low-latency modes, double-buffered dispatches, CUDA-graph replays with
fresh routing, fp8 payloads) and exits with pytest's status (1 if it was skipped).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    test = REPO / "test" / "python" / "test_ops_moe_gpu.py"
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    print(result.stdout + result.stderr, flush=True)
    if result.returncode == 0 and " passed" not in result.stdout.splitlines()[-1]:
        print("FAIL moe: the GPU test did not run (skipped?)", flush=True)
        sys.exit(1)
    sys.exit(result.returncode)
