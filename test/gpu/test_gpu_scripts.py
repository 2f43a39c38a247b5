"""pytest entry to the GPU checks and examples: each runs under torchrun on up to 4 local GPUs.

``scripts/gpu_check.sh`` is the full acceptance run (2 and 4 GPUs, logs, results table); this file lets
``pytest test/gpu`` run the same scripts once, and skips visibly on machines with fewer than 2 GPUs.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
RANKS = min(GPUS, 4)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 2, reason=f"needs at least 2 GPUs, found {GPUS}")]

SCRIPTS = [
    ("test/gpu/check_primitives.py", [], 300),
    ("test/gpu/check_litmus.py", ["--rounds", "100000"], 240),
    ("test/gpu/check_copy_engine.py", ["--rounds", "2000"], 300),
    ("examples/ping_pong.py", [], 180),
    ("examples/allgather_push.py", ["--sizes-mib", "1", "128"], 240),
    ("examples/allgather_pull.py", ["--sizes-mib", "1", "128"], 240),
]


@pytest.mark.parametrize(("script", "args", "timeout_s"), SCRIPTS, ids=[Path(s).stem for s, _, _ in SCRIPTS])
def test_script_passes_under_torchrun(script, args, timeout_s):
    env = dict(
        os.environ,
        PYTHONPATH=f"{REPO / 'python'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        PYTHONUNBUFFERED="1",
        NCCL_NVLS_ENABLE="0",
        TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
        NVSHMEM_DISABLE_NVLS="1",
    )
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", script]
    result = subprocess.run(command + args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert " 0 failures over all ranks" in output, output[-6000:]
