"""The cost of a device-side check's call in a wgmma kernel, on one GPU: the fused kernels' GEMMs with call-free
checks (the default) against the same kernels with the checks' ``__assertfail`` calls kept (ptxas then serializes
every wgmma: docs/results/2026-11-23-wgmma-serialization.md), beside cuBLAS and ``ops.matmul``, in one run.

    torchrun --nproc-per-node=1 bench/wgmma_serialization.py [--reps 30] [--out bench/results/wgmma_serialization.md]

World size 1, so no communication: ``ag_gemm``'s TMA kernel computes the whole [M, K] @ [K, N] as its own shard
(the per-rank GEMMs of the seed shapes at W = 2), ``gemm_ar`` runs with the exchange off (its GEMM alone, M = 64
and 128). Each kernel is compiled twice from the same source: under ``Checks.DEFAULT`` (what users get) and with the
``llir`` stage's call removal switched off (what the kernels were before it). Median of ``--reps`` timed calls after
warm-up (``triton_dist.testing.bench``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import triton
from triton import knobs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine  # noqa: E402

import triton_dist.compiler.stages_hook as stages_hook  # noqa: E402
from triton_dist.ops.matmul import HOPPER_CANDIDATES, matmul  # noqa: E402
from triton_dist.testing import bench, main_guard, rank0_print, setup_distributed, teardown  # noqa: E402

ag = importlib.import_module("triton_dist.ops.ag_gemm")
gar_config = importlib.import_module("triton_dist.ops.gemm_ar.config")
gar = importlib.import_module("triton_dist.ops.gemm_ar.op")  # the kernel a plan compiles, the plans

SHAPES = [(8192, 2048, 12288), (8192, 2048, 14336), (8192, 1792, 14336), (8192, 2304, 36864), (8192, 4096, 28672)]
"""[M, K] @ [K, N]: the per-rank GEMMs of issue 10's seed shapes at W = 2 (N = N_global / 2)."""
GEMM_AR_SHAPES = [(64, 8192, 14336), (128, 8192, 14336), (128, 5120, 12800)]
"""[M, K_local] @ [K_local, N]: Llama-3-70B / Qwen3-32B down_proj at W = 2, the M where gemm_ar uses wgmma."""


@contextlib.contextmanager
def calls_kept() -> Iterator[None]:
    """Compile with the checks' calls left in (the kernels as they were before call_free_checks.py).

    Triton's cache key does not see this switch, so these kernels are compiled anew into a cache directory of their
    own: they neither come from nor land in the cache of the call-free kernels.
    """
    original = stages_hook.make_checks_call_free
    cache_dir, always = knobs.cache.dir, knobs.compilation.always_compile
    stages_hook.make_checks_call_free = lambda llir: llir
    knobs.cache.dir = tempfile.mkdtemp(prefix="triton_calls_kept_")
    knobs.compilation.always_compile = True
    try:
        yield
    finally:
        stages_hook.make_checks_call_free = original
        knobs.cache.dir, knobs.compilation.always_compile = cache_dir, always


def fresh(kernel: triton.runtime.JITFunction) -> triton.runtime.JITFunction:
    """A new JITFunction of the same source (its own cache key memo and in-memory kernel cache)."""
    return triton.jit(kernel.fn)


def ag_gemm_ms(a: torch.Tensor, b: torch.Tensor, reps: int) -> float:
    config = ag.OverlapConfig(matmul=HOPPER_CANDIDATES[0], chunk_tiles=4, producer="ce")
    c, _ = ag.ag_gemm_impl(a, b, config=config)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.05)
    return bench(lambda: ag.ag_gemm_impl(a, b, config=config), rep=reps)


def gemm_ar_ms(a: torch.Tensor, b: torch.Tensor, reps: int) -> float:
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    config = dataclasses.replace(gar_config.default_config(m, n, k), exchange=False)
    out = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
    gar._launch(a, b, out, config)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), atol=0.5, rtol=0.05)
    return bench(lambda: gar._launch(a, b, out, config), rep=reps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "wgmma_serialization.md"))
    args = parser.parse_args()
    started = time.time()
    setup_distributed(heap_size="4G")
    rows = []
    torch.manual_seed(0)
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = (torch.randn(k, n, device="cuda") / k**0.5).to(torch.bfloat16)
        cublas = bench(lambda a=a, b=b: torch.matmul(a, b), rep=args.reps)
        ours_mm = bench(lambda a=a, b=b: matmul(a, b), rep=args.reps)
        ag._ag_gemm_tma_kernel = fresh(ag._ag_gemm_tma_kernel)
        call_free = ag_gemm_ms(a, b, args.reps)
        with calls_kept():
            ag._ag_gemm_tma_kernel = fresh(ag._ag_gemm_tma_kernel)
            serialized = ag_gemm_ms(a, b, args.reps)
        ag._ag_gemm_tma_kernel = fresh(ag._ag_gemm_tma_kernel)
        rows.append(("ag_gemm kernel (W=1)", f"{m},{n},{k}", cublas, ours_mm, call_free, serialized))
        rank0_print(
            f"RESULT ag_gemm {m},{n},{k}: cuBLAS {cublas:.3f} ms, ops.matmul {ours_mm:.3f}, fused kernel "
            f"call-free {call_free:.3f}, calls kept {serialized:.3f} ({serialized / call_free:.2f}x)"
        )
        del a, b
    for m, k, n in GEMM_AR_SHAPES:
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = (torch.randn(k, n, device="cuda") / k**0.5).to(torch.bfloat16)
        cublas = bench(lambda a=a, b=b: torch.matmul(a, b), rep=args.reps)
        gar._gemm_ar_kernel = fresh(gar._gemm_ar_kernel)
        gar._plans.clear()
        call_free = gemm_ar_ms(a, b, args.reps)
        with calls_kept():
            gar._gemm_ar_kernel = fresh(gar._gemm_ar_kernel)
            gar._plans.clear()
            serialized = gemm_ar_ms(a, b, args.reps)
        gar._gemm_ar_kernel = fresh(gar._gemm_ar_kernel)
        gar._plans.clear()
        rows.append(("gemm_ar GEMM (exchange off)", f"{m},{n},{k}", cublas, float("nan"), call_free, serialized))
        rank0_print(
            f"RESULT gemm_ar {m},{n},{k}: cuBLAS {cublas:.3f} ms, call-free {call_free:.3f}, calls kept "
            f"{serialized:.3f} ({serialized / call_free:.2f}x)"
        )
    lines = [
        f"# wgmma serialization A/B, one {torch.cuda.get_device_name()}",
        "",
        *describe_machine(started),
        "- command: `torchrun --nproc-per-node=1 bench/wgmma_serialization.py`; median of "
        f"{args.reps} timed calls after warm-up; ms",
        "",
        "| kernel | M,N,K | cuBLAS | ops.matmul | call-free checks | checks' calls kept | kept / call-free "
        "| call-free / cuBLAS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, shape, cublas, ours_mm, call_free, serialized in rows:
        lines.append(
            f"| {name} | {shape} | {cublas:.3f} | {ours_mm:.3f} | {call_free:.3f} | {serialized:.3f} | "
            f"{serialized / call_free:.2f} | {call_free / cublas:.2f} |"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    rank0_print("\n".join(lines))
    teardown()
    return 0


if __name__ == "__main__":
    main_guard(main)
