"""``triton_dist.ops.all_reduce`` across nodes on GPUs, against torch: a real 2-node layout on one host (two torchrun
agents, one GPU each, on the NVSHMEM heap), so the hierarchical kernel's ``dl.put_signal`` / ``dl.signal_wait``
path runs, and the one-node path on 2 GPUs beside it (the kernels it keeps).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        python3 test/gpu/check_all_reduce_nodes.py [--timeout 300] [--only two_nodes ...] [--rdzv static|c10d]

Run it with plain ``python3`` (not under torchrun). The launcher is ``check_all_gather.py``'s (each agent in a
session of its own, every agent's process group killed when a stage outlives ``--timeout``, one agent failed and the
others did not end within its grace period, or the launcher is stopped). Exit status 0 iff every required stage
passed. The stages, as ``check_all_gather.py``'s: ``one_node`` (CUDA-IPC heap), ``one_node_nvshmem``, ``two_nodes``
(two agents ``--nnodes=2 --node-rank=<0|1> --nproc-per-node=1``, both GPUs visible), ``two_nodes_own_gpu``
(informational, ``CUDA_VISIBLE_DEVICES=i`` per agent) and, with 4 or more GPUs, ``two_nodes_2x2``.

Each worker checks, on random data with poisoned buffers and outputs, several dtypes and shapes against the float64
sum of every rank's tensor (regenerated on each rank from its seed) and against NCCL's all_reduce, that every rank
got the same bits, ``out=x`` in place, calls of several sizes in a row without host synchronization, the custom op,
CUDA-graph replays, that the hierarchical path ran exactly when the world spans nodes (its workspace, NVSHMEM's
device code in its PTX); rank 0 prints the op's and NCCL's times (informational).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_all_gather as launcher  # noqa: E402  (the launcher: stages of torchrun agents, killed on timeout)

REPO = launcher.REPO


# --- the worker (one rank, under torchrun) ----------------------------------------------------------------------


def worker(layouts: list[int], backend: str, emulate: bool = False) -> int:
    """One rank's checks on worlds of ``layouts[i]`` nodes on the ``backend`` heap, one after the other; returns the
    exit code (0 iff every check passed on every rank). On GPUs, one layout: the world torchrun made.

    ``emulate``: on CPU ranks under ``TRITON_INTERPRET=1`` (gloo; the CPU heap, laid out as ``n`` nodes on an
    emulated NVSHMEM heap by ``runtime.emulation.one_sided.emulate_nodes`` where ``n > 1``), with small shapes and
    without the custom-op, CUDA-graph, PTX and timing checks: how ``test/python/test_ops_all_reduce_nodes.py`` runs
    these checks in CI.
    """
    # 64M on CPU ranks: the one-node push of the largest emulated case is 32 MiB at 4 ranks.
    return launcher.run_layouts("all_reduce", cases, layouts, backend, emulate, cpu_heap="64M", gpu_heap="2G")


def cases(world: Any, emulate: bool) -> list[tuple[str, Callable[..., None]]]:
    """The checks of one rank of ``world`` (``Checks.run_each`` cases)."""
    import torch
    import torch.distributed as dist

    import triton_dist.ops as ops
    from triton_dist import runtime as rt
    from triton_dist.ops.all_reduce import op as reduce_op
    from triton_dist.ops.all_reduce.nodes import WORKSPACE
    from triton_dist.ops.common import resources
    from triton_dist.testing import Checks, rank0_print, sync, time_ms

    rank, size = world.rank, world.world_size
    device = world.device
    tolerance = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}

    def make(owner: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        generator = torch.Generator(device=device).manual_seed(1_000_003 * owner + 7919 * tag + sum(shape))
        return torch.randn(shape, generator=generator, device=device).to(dtype)

    def expected(tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The float64 sum of every rank's tensor (each regenerated here from its seed)."""
        return sum((make(peer, tag, shape, dtype).double() for peer in range(size)), torch.zeros(shape, device=device))

    def close(got: torch.Tensor, want: torch.Tensor) -> bool:
        bound = tolerance[got.dtype]
        return got.shape == want.shape and bool(torch.allclose(got.double(), want.double(), rtol=bound, atol=bound))

    def same_everywhere(got: torch.Tensor) -> bool:
        """Whether every rank holds the same bits (gathered as bytes)."""
        flat = got.contiguous().view(torch.uint8).reshape(-1)
        parts = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(parts, flat)
        return all(torch.equal(part, parts[0]) for part in parts)

    def nccl(x: torch.Tensor) -> torch.Tensor:
        reference = x.clone()
        dist.all_reduce(reference)
        return reference

    def poison(shape: tuple[int, ...], dtype: torch.dtype) -> None:
        """NaN into every all_reduce buffer here and into a freed block of the output's size (which the op's
        torch.empty is likely to get back), between barriers so no peer is writing them."""
        rt.barrier()
        for ws in resources.workspaces(WORKSPACE):
            ws.data.fill_(0xFF)  # NaN in every float width
            ws.partials.fill_(0xFF)
        block = torch.empty(shape, dtype=dtype, device=device)
        block.fill_(float("nan"))
        del block
        rt.barrier()

    shapes: list[tuple[tuple[int, ...], torch.dtype]] = [
        ((1,), torch.float32),
        ((1000,), torch.bfloat16),
        ((257, 129), torch.float16),
        ((65_537,), torch.float32),
        ((1 << 20,), torch.bfloat16),
        ((4096, 1024), torch.bfloat16),
        ((3, 1 << 20), torch.float32),
    ]
    if emulate:  # the interpreter: one and several programs, a last part shorter than the others, 16 and 32 bits
        shapes = [((1,), torch.float32), ((5, 37), torch.bfloat16), ((131,), torch.float16)]

    def each_case(checks: Checks) -> None:
        tag = 0
        for shape, dtype in shapes:
            for call in range(2 if emulate else 3):
                tag += 1
                x = make(rank, tag, shape, dtype)
                poison(shape, dtype)
                got = ops.all_reduce(x)
                reference = got if emulate else nccl(x)  # (gloo's all_reduce lacks bf16)
                sync("all_reduce")
                ok = close(got, expected(tag, shape, dtype)) and close(got, reference)
                checks.check(f"{list(shape)} {dtype} call {call}: = the float64 sum and NCCL's all_reduce", ok)
                checks.check(f"{list(shape)} {dtype} call {call}: the same bits on every rank", same_everywhere(got))

    def in_place(checks: Checks) -> None:
        shape, dtype = ((7, 9), torch.bfloat16) if emulate else ((3000, 17), torch.bfloat16)
        x = make(rank, 300, shape, dtype)
        poison(shape, dtype)
        same = ops.all_reduce(x, out=x)
        sync("all_reduce in place")
        ok = same is x and close(x, expected(300, shape, dtype))
        checks.check(f"out=x in place {list(shape)} {dtype}", ok)
        out = torch.full(shape, float("nan"), dtype=dtype, device=device)
        y = make(rank, 301, shape, dtype)
        ops.all_reduce(y, out=out)
        sync("all_reduce out=")
        checks.check("out= a NaN-filled tensor", close(out, expected(301, shape, dtype)))

    def in_a_row(checks: Checks) -> None:
        """Calls of alternating sizes back to back, no host synchronization: peers run calls ahead of each other."""
        sizes = [((4096,), torch.float32), ((300_001,), torch.float32), ((17, 33), torch.bfloat16)]
        if emulate:
            sizes = [((40,), torch.float32), ((130,), torch.float32), ((3, 5), torch.bfloat16)]
        calls = 4 if emulate else 12
        results = []
        for call in range(calls):
            shape, dtype = sizes[call % len(sizes)]
            results.append((call, shape, dtype, ops.all_reduce(make(rank, 500 + call, shape, dtype))))
        sync("all_reduce in a row")
        for call, shape, dtype, got in results:
            checks.check(
                f"call {call} of {calls} in a row ({list(shape)} {dtype})",
                close(got, expected(500 + call, shape, dtype)),
            )

    def path(checks: Checks) -> None:
        spans = world.num_nodes > 1
        made = resources.workspaces(WORKSPACE)
        checks.check(
            f"the hierarchical path {'ran' if spans else 'did not run'} ({len(made)} workspaces)", bool(made) == spans
        )

    def custom_op(checks: Checks) -> None:
        x = make(rank, 900, (333, 7), torch.float32)
        got = torch.ops.triton_dist.all_reduce(x)
        sync("torch.ops.triton_dist.all_reduce")
        checks.check("torch.ops.triton_dist.all_reduce", close(got, expected(900, (333, 7), torch.float32)))

    def graphs(checks: Checks) -> None:
        shape = (2048, 64)
        static = make(rank, 1000, shape, torch.bfloat16)
        ops.all_reduce(static)  # eager first, both sizes: the plans and buffers (allocating them is a collective)
        ops.all_reduce(static[:1024])
        sync("graph warm-up")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            first = ops.all_reduce(static)
            second = ops.all_reduce(first[:1024].contiguous())
        for replay in range(3):
            static.copy_(make(rank, 1001 + replay, shape, torch.bfloat16))
            rt.barrier()
            graph.replay()
            sync("graph replay")
            want = expected(1001 + replay, shape, torch.bfloat16)
            ok = close(first, want) and close(second, first[:1024].double() * size)
            checks.check(f"CUDA-graph replay {replay} (two calls per replay)", ok)

    def ptx(checks: Checks) -> None:
        plans = [plan for plan in reduce_op._plans._plans.values() if hasattr(plan, "kernel")]
        nodes = [plan for plan in plans if "nodes" in plan.kernel.name]
        holds = ["nvshmemi_device_state_d" in plan.kernel.asm["ptx"] for plan in nodes]
        want = world.num_nodes > 1
        checks.check(
            f"the hierarchical kernel's plans ({len(nodes)} of {len(plans)}) hold NVSHMEM's device code",
            bool(nodes) == want and all(holds),
            f"{holds}",
        )

    def timings(checks: Checks) -> None:
        try:
            for elements in (4 * 1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024):
                x = make(rank, 2000, (elements,), torch.bfloat16)
                together = rt.barrier if world.num_nodes > 1 else None
                ours = time_ms(lambda x=x: ops.all_reduce(x), start_together=together)
                theirs = time_ms(lambda x=x: nccl(x), start_together=together)
                rank0_print(
                    f"TIME {elements * 2 >> 10} KiB bf16 x {size} ranks: all_reduce {ours * 1e3:.1f} us, NCCL "
                    f"all_reduce {theirs * 1e3:.1f} us (informational"
                    f"{'; host barrier between runs' if together else ''})"
                )
        except (TimeoutError, dist.DistBackendError):
            raise
        except Exception as error:  # noqa: BLE001 (informational: a failure to time is printed, not counted)
            rank0_print(f"TIME not measured: {type(error).__name__}: {error}")

    found: list[tuple[str, Callable[..., None]]] = [
        ("dtypes and shapes", each_case),
        ("in place", in_place),
        ("calls in a row", in_a_row),
        ("path by topology", path),
    ]
    if not emulate:
        found += [("custom op", custom_op), ("CUDA graphs", graphs), ("PTX", ptx), ("timings", timings)]
    return found


# --- the launcher (plain python3): check_all_gather.py's, with this file as the worker -----------------------------


def main() -> int:
    return launcher.drive("all_reduce", __doc__ or "", Path(__file__), worker)


if __name__ == "__main__":
    sys.exit(main())
