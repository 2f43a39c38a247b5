"""Session 30: the fused gemm_rs kernel's device time (default config, bf16), for an A/B of the 4-rank deadlock fix
(run once with the tree's kernel, once with PYTHONPATH on the copy holding the kernel before it)."""
import importlib

import torch

from triton_dist import runtime as rt
from triton_dist.testing import rank0_print, setup_distributed
from triton_dist.testing.timing import time_ms

grs = importlib.import_module("triton_dist.ops.gemm_rs")
world = setup_distributed(heap_size="3G")
w = world.world_size
for m, n, k in ((8192, 4096, 12288), (4096, 4096, 4096), (4096, 14336, 4096)):
    g = torch.Generator(device="cuda").manual_seed(world.rank)
    a = torch.randn(m, k // w, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k // w, n, device="cuda", dtype=torch.bfloat16, generator=g)
    config = grs.GemmRSConfig()
    for label in ("pass 1", "pass 2"):
        ms = time_ms(lambda: grs.gemm_rs_with(a, b, config), warmup=5, reps=30)
        rank0_print(f"RESULT fused {config.short()} {m},{n},{k} {label}: {ms:.4f} ms")
    grs.clear_workspaces()
import triton_dist  # noqa: E402

triton_dist.finalize()
