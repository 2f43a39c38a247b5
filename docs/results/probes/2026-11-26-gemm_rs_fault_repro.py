"""gemm_rs forced to four fused variants (deferred flag or not, flattened or not) at five shapes, 20 calls each, every
result checked against fp32 torch (session 18, jobs 4-5; runnable at commit 75a6e93, whose kernel still had the
deferred variant, since removed):

    CUDA_LAUNCH_BLOCKING=1 torchrun --nproc-per-node=2 docs/results/probes/2026-11-26-gemm_rs_fault_repro.py defer

The argument picks the variant: defer, nodefer, noflat (deferred, not flattened) or f32 (deferred, fp32 partials).
"""

import sys

import torch

import triton_dist
import triton_dist.ops.gemm_rs  # noqa: F401 (the module, not the function triton_dist.ops exports)
from triton_dist.testing import setup_distributed

grs = sys.modules["triton_dist.ops.gemm_rs"]
SHAPES = [(1024, 4096, 4096), (2048, 4096, 4096), (1024, 8192, 8192), (4096, 4096, 4096), (8192, 4096, 4096)]


def main(variant: str) -> None:
    world = setup_distributed(heap_size="4G")
    r, w = world.rank, world.world_size
    config = {
        "defer": grs.GemmRSConfig(partial_dtype="input"),
        "nodefer": grs.GemmRSConfig(partial_dtype="input", defer_notify=False),
        "noflat": grs.GemmRSConfig(partial_dtype="input", flatten=False),
        "f32": grs.GemmRSConfig(),
    }[variant]
    for m, n, k in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(1)
        a_full = torch.randn(m, k, device="cuda", generator=gen, dtype=torch.bfloat16)
        b_full = torch.randn(k, n, device="cuda", generator=gen, dtype=torch.bfloat16)
        cols = slice(r * k // w, (r + 1) * k // w)
        a, b = a_full[:, cols].contiguous(), b_full[cols].contiguous()
        want = (a_full.float() @ b_full.float())[r * m // w : (r + 1) * m // w]
        for call in range(20):
            out = grs.gemm_rs_with(a, b, config)
            torch.cuda.synchronize()
            err = ((out.float() - want).norm() / want.norm()).item()
            if call in (0, 19):
                print(f"RESULT {variant} rank {r} {m},{n},{k} call {call} err {err:.2e}", flush=True)
        grs.clear_workspaces()
    triton_dist.finalize()


if __name__ == "__main__":
    main(sys.argv[1])
