"""Probe (session 16, job 2): does the pipelined cuBLAS path of gemm_ar overlap at all, and does an SM carveout for
cuBLAS help? It needs the code of commit 9b8133d (``push_into_rows``, ``column_chunks``, ``_side_stream``; reverted
in c0d41eb), so it is kept here, not under bench/:

    git checkout 9b8133d && cp docs/results/probes/2026-11-26-gemm_ar_pipeline.py bench/gemm_ar_pipeline_probe.py
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \
        torchrun --nproc-per-node=2 bench/gemm_ar_pipeline_probe.py

Ran on 2 x NVIDIA H100 80GB HBM3, 2026-11-26 ~00:30 UTC (docs/results/2026-11-26-2xH100-session16.md, section 1).
"Llama down" here is N = 8192, K = 14336 (K/W = 7168), not Llama-3-70B's down_proj (K = 28672).

Graphed µs (median of replays, max over ranks) per variant and shape: the GEMM alone (cuBLAS, cuBLASLt, cuBLASLt
with SMs carved out), the GEMM in column blocks alone, and the pipeline (block c's push all-reduce on the
high-priority side stream under block c + 1's GEMM) with and without a carveout and with the push on as many
programs as SMs carved out.
"""

# ruff: noqa: B023 (each closure is timed inside the iteration that defines it)
from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops import gemm_ar as _unused  # noqa: F401
from triton_dist.ops.all_reduce import AllReduceConfig, _check_device_and_agreement, graphed_us, push_into_rows
from triton_dist.ops.gemm_ar import _side_stream, column_chunks
from triton_dist.testing import rank0_print, setup_distributed

SHAPES = [
    ("Llama down", 128, 8192, 14336),
    ("Qwen o", 128, 5120, 4096),
    ("Qwen o", 32, 5120, 4096),
    ("Llama o", 128, 8192, 4096),
]


@contextlib.contextmanager
def blas(backend: str, carveout: int):
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(backend)
    torch._C._set_sm_carveout_experimental(carveout or None)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(None)
        torch.backends.cuda.preferred_blas_library(prev)


def main() -> None:
    setup_distributed(heap_size="2G")
    for name, m, n, k in SHAPES:
        kl = k // dist.get_world_size()
        a = torch.randn(m, kl, device="cuda").bfloat16()
        b = (torch.randn(kl, n, device="cuda") / kl**0.5).bfloat16()
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        res = {}
        for backend in ("cublas", "cublaslt"):
            for carve in (0,) if backend == "cublas" else (0, 16, 32):
                with blas(backend, carve):
                    res[f"mm {backend} -{carve}"] = graphed_us(lambda: torch.mm(a, b, out=out))
        side = _side_stream(a.device)
        for chunks in (2, 4):
            blocks = column_chunks(n, chunks)
            scratch = torch.empty(m * n, device="cuda", dtype=torch.bfloat16)
            parts = [scratch[m * s : m * (s + w)].view(m, w) for s, w in blocks]
            ready = [torch.cuda.Event() for _ in blocks]
            done = torch.cuda.Event()
            for backend, carve, programs in (
                ("cublas", 0, 0),
                ("cublaslt", 0, 0),
                ("cublaslt", 16, 16),
                ("cublaslt", 32, 32),
                ("cublaslt", 16, 0),
            ):
                configs = []
                for _, w in blocks:
                    nbytes = m * w * 2
                    p = programs or max(1, min(128, nbytes // (8 << 10)))
                    config = AllReduceConfig("one_shot_push", p, 8 if nbytes > (128 << 10) else 4)
                    x = parts[0] if w == blocks[0][1] else parts[-1]
                    _check_device_and_agreement(x, config)
                    configs.append(config)

                def gemms_only():
                    for (s, w), part in zip(blocks, parts, strict=True):
                        torch.mm(a, b[:, s : s + w], out=part)

                def pipeline():
                    main_stream = torch.cuda.current_stream()
                    for (s, w), part, config, ev in zip(blocks, parts, configs, ready, strict=True):
                        torch.mm(a, b[:, s : s + w], out=part)
                        ev.record(main_stream)
                        side.wait_event(ev)
                        with torch.cuda.stream(side):
                            push_into_rows(part, out[:, s : s + w], config)
                    done.record(side)
                    main_stream.wait_event(done)

                def serial():
                    for (s, w), part, config in zip(blocks, parts, configs, strict=True):
                        torch.mm(a, b[:, s : s + w], out=part)
                        push_into_rows(part, out[:, s : s + w], config)

                with blas(backend, carve):
                    tag = f"c{chunks} {backend} -{carve} p{programs or 'auto'}"
                    if programs == 0 or carve == 16:
                        res[f"gemms {tag}"] = graphed_us(gemms_only)
                    res[f"serial {tag}"] = graphed_us(serial)
                    res[f"pipe {tag}"] = graphed_us(pipeline)
        rt.barrier()
        for key, us in res.items():
            rank0_print(f"RESULT {name} M={m}: {key}: {us:.1f}")


if __name__ == "__main__":
    main()
