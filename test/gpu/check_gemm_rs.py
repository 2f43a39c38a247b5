"""GPU checks of ``triton_dist.ops.gemm_rs``: every kernel variant against an fp32 torch reference, CUDA graphs,
torch.compile, ``out=`` (each variant's result in a NaN-poisoned ``out``, bit for bit the call without it), and the
bad-input errors.

    torchrun --nproc-per-node=N test/gpu/check_gemm_rs.py [--quick]     (N >= 2; exit code 0 iff all passed)

Every call gets fresh random inputs. Before each call the op's symmetric scratch (where peers push partial tiles)
is filled with NaN on every rank and the caching allocator's free memory with NaN, so a partial that was never
pushed, read before it arrived, or an output element never written shows up as NaN. Each variant runs three times
in a row, so both halves of the double-buffered scratch and flags are used and reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import importlib
import os
import shutil
import tempfile

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.common import eager_graphs
from triton_dist.ops.matmul import MatmulConfig
from triton_dist.testing import Checks, eager_replay_calls, finish, main_guard, mixed_replay_calls, sync
from triton_dist.testing import rank0_print as log0
from triton_dist.testing import rank_print as log
from triton_dist.testing import setup_distributed as setup

grs = importlib.import_module("triton_dist.ops.gemm_rs")  # the module (ops.gemm_rs is the function)

TOLERANCE = {torch.bfloat16: (3e-2, 3e-2, 8e-3), torch.float16: (4e-3, 4e-3, 1.5e-3)}
"""(atol, rtol, normwise relative error) per output dtype, for outputs of unit scale."""

# (M, N, K global): multiples of the tiles, and shapes that are not (the shard's rows, N, K/W all ragged). K = 536
# puts A's rows (K/W bf16) off 16-byte multiples at 2, 4 and 8 ranks: TMA configurations must take the pointer kernel
# there (K = 528 only does so from 4 ranks, where it first failed).
# (4096, 4096, 4096) gives every persistent program several pushed tiles before its own ones (512 work items at two
# ranks): the shapes above have at most about one item per program, and the
# quick run passed while the default kernel faulted there on H200. At 4 ranks it has 128 tiles per shard for 132
# programs, where every rank hung while an own tile was awaited ahead of the previous item's flag (docs/design.md).
SHAPES = [(1024, 768, 1024), (8 * 130, 8 * 75, 8 * 66), (8 * 65, 8 * 75, 536), (4096, 2048, 4096), (4096, 4096, 4096)]
QUICK_SHAPES = [(1024, 768, 1024), (8 * 130, 8 * 75, 8 * 66), (8 * 65, 8 * 75, 536), (4096, 4096, 4096)]

VARIANTS = [
    grs.GemmRSConfig(),
    grs.CUBLAS_CE,
    dataclasses.replace(grs.CUBLAS_CE, producer="direct"),
    grs.GemmRSConfig(partial_dtype="input"),
    grs.GemmRSConfig(flatten=False),
    grs.GemmRSConfig(fused=False),
    grs.GemmRSConfig(fused=False, partial_dtype="input"),
    grs.GemmRSConfig(MatmulConfig(128, 128, 64, 8, 4, 8, False, 1)),
    grs.GemmRSConfig(MatmulConfig(128, 128, 128, 8, 3, 8, False, 1), partial_dtype="input"),
    grs.GemmRSConfig(MatmulConfig(128, 128, 32, 8, 2, 8, False, 1, use_tma=False)),  # the no-TMA (AMD) kernel
    grs.FALLBACK,
    grs.CUBLAS_DIRECT,  # the cost model's cuBLAS path (merged_sync)
    grs.CUBLAS_PULL,  # one GEMM of all rows, the peers' shard rows pulled (an option, issue 24)
]
# The default, the cuBLAS producers ("ce", "direct" without and with merged_sync, the cost model's, and "pull"), bf16
# partials, unflattened, unfused, the no-TMA kernel and the fallback.
QUICK_VARIANTS = [VARIANTS[i] for i in (0, 1, 2, 11, 12, 3, 4, 5, 9, 10)]


def tiles_as_programs_shape(world_size: int, sms: int, config: grs.GemmRSConfig) -> tuple[int, int, int]:
    """(M, N, K) whose shards have exactly ``sms`` output tiles of ``config``'s tile: the fused kernel then runs
    ``sms`` programs for ``sms`` tiles per shard, inside ``tiles <= programs <= (W - 1) * tiles`` at every world
    size, where the kernel that awaited an own tile before the previous item's flag deadlocked (at 2 ranks only
    here; at 4 ranks also at 4096^3: docs/design.md). The SMs split into the two factors nearest their root."""
    rows = min((d for d in range(1, sms + 1) if sms % d == 0), key=lambda d: abs(d * d - sms))
    block_m, block_n = config.matmul.block_m, config.matmul.block_n
    return world_size * block_m * rows, block_n * (sms // rows), 512 * world_size


def inputs(m: int, n: int, k: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's A_r [M, K/W], B_r [K/W, N], scaled so the reduced output is of unit scale."""
    world = rt.current_world()
    generator = torch.Generator(device="cuda").manual_seed(seed * 1000 + world.rank)
    k_local = k // world.world_size
    a = torch.randn(m, k_local, generator=generator, device="cuda").to(dtype)
    b = (torch.randn(k_local, n, generator=generator, device="cuda") / k**0.5).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """This rank's shard of sum_r A_r @ B_r, computed in fp32 and reduced in fp32 by NCCL."""
    world = rt.current_world()
    partial = a.float() @ b.float()
    out = partial.new_empty((a.shape[0] // world.world_size, b.shape[1]))
    dist.reduce_scatter_tensor(out, partial)
    return out


def poison_everything() -> None:
    """NaN into every workspace's buffers (all ranks, then a barrier) and into the allocator's free memory."""
    for workspace in grs.workspaces():
        for name in ("scratch", "recv", "send", "own", "partial"):
            if hasattr(workspace, name):
                getattr(workspace, name).fill_(float("nan"))
    free = torch.cuda.mem_get_info()[0]
    blob = torch.empty(max(free // 8, 1 << 20) // 4, dtype=torch.float32, device="cuda").fill_(float("nan"))
    del blob
    rt.barrier()


def compare(checks: Checks, name: str, out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> bool:
    atol, rtol, norm_tol = TOLERANCE[dtype]
    if out.shape != ref.shape or out.dtype != dtype:
        return checks.check(name, False, f"got {out.dtype} {list(out.shape)}, want {dtype} {list(ref.shape)}")
    outf = out.float()
    finite = bool(torch.isfinite(outf).all())
    err = (outf - ref).abs()
    bad = int((err > atol + rtol * ref.abs()).sum()) if finite else out.numel()
    rel = float((outf - ref).norm() / ref.norm()) if finite else float("inf")
    ok = finite and bad == 0 and rel <= norm_tol
    return checks.check(name, ok, f"max abs err {float(err.max()):.2e}, normwise {rel:.2e}, {bad} out of tolerance")


def check_variants(
    checks: Checks, shapes: list[tuple[int, int, int]], dtypes: list[torch.dtype], variants: list[grs.GemmRSConfig]
) -> None:
    seed = 0
    for m, n, k in shapes:
        for dtype in dtypes:
            for config in variants if dtype == dtypes[0] else variants[:2]:
                name = f"{config.short()} {m}x{n}x{k} {str(dtype)[6:]}"

                def body(
                    config: grs.GemmRSConfig = config,
                    name: str = name,
                    shape: tuple[int, int, int] = (m, n, k),
                    dtype: torch.dtype = dtype,
                ) -> None:
                    nonlocal seed
                    for call in range(3):
                        seed += 1
                        a, b = inputs(*shape, dtype, seed)
                        ref = reference(a, b)
                        if call == 0:
                            grs.gemm_rs_with(a, b, config)  # allocate the workspace, then poison it
                            sync(name)
                        poison_everything()
                        out = grs.gemm_rs_with(a, b, config)
                        sync(name)
                        if not compare(checks, f"{name} call {call}", out, ref, dtype):
                            return

                checks.run(name, body)
            grs.clear_workspaces()


def check_out(checks: Checks, variants: list[grs.GemmRSConfig | None]) -> None:
    """``out=``: per variant (None: the public op's eager fast path, its plan built first) the shard written into a
    NaN-poisoned ``out``, which the call returns, bit for bit the same call's result without it."""
    m, n, k = 1024, 768, 1024
    for config in variants:
        name = f"out= equals the call without it, {'eager fast path' if config is None else config.short()}"

        def body(config: grs.GemmRSConfig | None = config, name: str = name) -> None:
            a, b = inputs(m, n, k, torch.bfloat16, 700)
            if config is None:
                grs.gemm_rs(a, b)  # the plan, so that both calls below take the eager fast path
                want = grs.gemm_rs(a, b)
            else:
                want = grs.gemm_rs_with(a, b, config)
            out = torch.full_like(want, float("nan"))
            got = grs.gemm_rs(a, b, out=out) if config is None else grs.gemm_rs_with(a, b, config, out=out)
            sync(name)
            difference = (out.float() - want.float()).abs().max().item()
            checks.check(name, got is out and torch.equal(out, want), f"out returned: {got is out}, diff {difference}")

        checks.run(name, body)
    grs.clear_workspaces()


def check_default_op(checks: Checks) -> None:
    """The custom op with its own configuration choice, eager, under torch.compile, and in a CUDA graph."""
    m, n, k = 4096, 2048, 4096
    world = rt.current_world()
    # The path the op takes here depends on this GPU's calibration; a tuned entry (the user's cache, a fresh
    # directory per rank) makes it the fused kernel, so the custom op's fused path is what runs eagerly, compiled
    # and graphed below.
    cache = tempfile.mkdtemp(prefix=f"check_gemm_rs_{world.rank}_")
    os.environ["TRITON_DIST_CACHE_DIR"] = cache
    fused = grs.GemmRSConfig(partial_dtype="input")
    for dtype in (torch.bfloat16, torch.float16):
        a, b = inputs(m, n, k, dtype, 900)
        key = grs.tuning_key(m, n, k // world.world_size, dtype, world.world_size, a.device)
        tuning.store(tuning.cache_path(), key, fused, {"note": "check_gemm_rs forces the fused path"})
        chosen = grs.choose_config(m, n, k // world.world_size, dtype, world.world_size, a.device)
        checks.check(f"op takes the tuned fused path at {m}x{n}x{k}", chosen == fused, chosen.short())
        compare(checks, f"op eager {str(dtype)[6:]}", grs.gemm_rs(a, b), reference(a, b), dtype)

        def compiled_body(dtype: torch.dtype = dtype) -> None:
            fn = torch.compile(lambda x, y: grs.gemm_rs(x * 2, y) + 1.0, fullgraph=True)
            for call in range(2):
                a, b = inputs(m, n, k, dtype, 910 + call)
                ref = reference(a * 2, b) + 1.0
                poison_everything()
                out = fn(a, b)
                sync("compiled")
                compare(checks, f"op torch.compile {str(dtype)[6:]} call {call}", out, ref, dtype)

        checks.run(f"op torch.compile {dtype}", compiled_body)

        def graph_body(dtype: torch.dtype = dtype, op=grs.gemm_rs, label: str = "op") -> None:  # noqa: ANN001
            static_a, static_b = inputs(m, n, k, dtype, 920)
            op(static_a, static_b)  # warm-up (allocates the workspace) before capture
            sync("graph warm-up")
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                with torch.cuda.graph(graph, stream=stream):
                    static_out = op(static_a, static_b)
            torch.cuda.current_stream().wait_stream(stream)
            rt.barrier()
            for replay in range(4):
                a, b = inputs(m, n, k, dtype, 930 + replay)
                static_a.copy_(a)
                static_b.copy_(b)
                ref = reference(a, b)
                poison_everything()
                static_out.fill_(float("nan"))
                graph.replay()
                sync("graph replay")
                compare(checks, f"{label} CUDA graph {str(dtype)[6:]} replay {replay}", static_out, ref, dtype)
            # An eager call between replays keeps the device-side epochs in step.
            a, b = inputs(m, n, k, dtype, 940)
            compare(checks, f"{label} eager after graph {str(dtype)[6:]}", op(a, b), reference(a, b), dtype)
            static_a.copy_(a)
            static_b.copy_(b)
            graph.replay()
            sync("graph replay")
            compare(checks, f"{label} CUDA graph after eager {str(dtype)[6:]}", static_out, reference(a, b), dtype)

        checks.run(f"op CUDA graph {dtype}", graph_body)
        if dtype == torch.bfloat16:
            for label, config in (
                ("triton", grs.GemmRSConfig()), ("cublas-ce", grs.CUBLAS_CE), ("cublas-pull", grs.CUBLAS_PULL)
            ):  # fmt: skip
                op = functools.partial(grs.gemm_rs_with, config=config)
                checks.run(f"{label} CUDA graph", functools.partial(graph_body, dtype, op, label))
    grs.clear_workspaces()
    del os.environ["TRITON_DIST_CACHE_DIR"]
    shutil.rmtree(cache, ignore_errors=True)


def expect_error(checks: Checks, name: str, fn, kind: type[BaseException], words: list[str]) -> None:  # noqa: ANN001
    checks.expect_error(name, kind, fn, *words)


def check_bad_input(checks: Checks) -> None:
    world = rt.current_world()
    me = world.rank
    a, b = inputs(512, 256, 512, torch.bfloat16, 5)
    expect_error(
        checks, "bad: non-contiguous a", lambda: grs.gemm_rs(a.t().contiguous().t(), b), grs.GemmRsError, ["contiguous"]
    )
    expect_error(checks, "bad: a on the CPU", lambda: grs.gemm_rs(a.cpu(), b), grs.GemmRsError, ["cpu"])
    expect_error(checks, "bad: dtype mix", lambda: grs.gemm_rs(a, b.half()), grs.GemmRsError, ["same dtype"])
    expect_error(checks, "bad: float32", lambda: grs.gemm_rs(a.float(), b.float()), grs.GemmRsError, ["bfloat16"])
    expect_error(
        checks, "bad: K mismatch", lambda: grs.gemm_rs(a, b[:-8].contiguous()), grs.GemmRsError, ["b.shape[0]"]
    )
    expect_error(
        checks, "bad: M not a multiple of W", lambda: grs.gemm_rs(a[:-1].contiguous(), b), grs.GemmRsError, ["multiple"]
    )
    # Shapes that differ between ranks: every rank raises (no hang, no launch).
    n_here = 256 + 8 * me
    a2, _ = inputs(512, n_here, 512, torch.bfloat16, 6)
    b2 = torch.randn(a2.shape[1], n_here, device="cuda", dtype=torch.bfloat16)
    expect_error(
        checks,
        "bad: N differs between ranks",
        lambda: grs.gemm_rs(a2, b2),
        grs.GemmRsError,
        ["ranks called with different"],
    )
    dtype_here = torch.bfloat16 if me == 0 else torch.float16
    a3, b3 = inputs(640, 384, 640, dtype_here, 7)
    expect_error(checks, "bad: dtype differs between ranks", lambda: grs.gemm_rs(a3, b3), grs.GemmRsError, ["dtype"])
    # A problem whose scratch does not fit in the heap: a clear error on every rank, before any launch.
    shard_rows = world.heap.heap_size // (2 * 4096 * 4) + 128  # fp32 double-buffered scratch > the whole heap
    a4 = torch.randn(shard_rows * world.world_size, 64, device="cuda", dtype=torch.bfloat16)
    b4 = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    expect_error(
        checks,
        "bad: heap exhausted",
        lambda: grs.gemm_rs_with(a4, b4, grs.GemmRSConfig()),
        RuntimeError,
        ["exhausted", "heap"],
    )
    # The op still works afterwards.
    compare(checks, "good call after bad ones", grs.gemm_rs(a, b), reference(a, b), torch.bfloat16)
    sync("after bad input")


EAGER_GRAPH_PATHS = [
    ("triton", grs.GemmRSConfig()),
    ("cublas direct", grs.CUBLAS_DIRECT),
    ("cublas ce", grs.CUBLAS_CE),
    ("cublas pull", grs.CUBLAS_PULL),
    ("matmul+nccl", grs.FALLBACK),
]


def check_eager_graphs(checks: Checks, paths: list[tuple[str, grs.GemmRSConfig]] = EAGER_GRAPH_PATHS) -> None:
    """Eager calls replayed from the op's own CUDA graphs (``ops.common.eager_graphs``) on every path, as
    ``testing.eager_replay_calls`` makes them: two address sets, fresh values before every call, ranks out of step,
    no host synchronization until all twelve results are compared with torch."""
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    world = rt.current_world()
    m, n, k = 1024, 1024, 2048
    dtype = torch.bfloat16
    for label, config in paths:
        name = f"eager calls replayed from graphs, {label}"

        def body(config: grs.GemmRSConfig = config, name: str = name) -> None:
            sets = [inputs(m, n, k, dtype, 960 + i) for i in range(2)]
            outs = [torch.empty((m // world.world_size, n), dtype=dtype, device="cuda") for _ in range(2)]
            plan = rs_op.plan_for(sets[0][0], sets[0][1], config)
            results = eager_replay_calls(
                sets,
                outs,
                lambda i: inputs(m, n, k, dtype, 970 + i),
                lambda a, b, out: rs_op._eager_call(plan, a, b, out),
                torch.Tensor.clone,
                from_idle=config.fallback,  # where the fallback would replay (REPLAY_COLLECTIVES): from an idle GPU
            )
            sync(name)
            for call, (out, a, b) in enumerate(results):
                compare(checks, f"{name}: call {call}", out, reference(a, b), dtype)
            graphs = plan.graphs
            if config.fallback and not eager_graphs.REPLAY_COLLECTIVES:  # NCCL's collective: every call eager
                checks.check(f"{name}: no replay of the collective", graphs.captures == graphs.replays == 0)
            else:
                checks.check(
                    f"{name}: replays served the repeated calls",
                    graphs.replays >= 6,
                    f"{graphs.captures} captures, {graphs.replays} replays over {len(results)} calls",
                )
            # The same eager call inside a user's CUDA graph: captured as eager launches (no replay of the op's own
            # graph, no stream query that would invalidate the capture), then replayed with fresh inputs.
            a, b = sets[0]
            graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
                rs_op._eager_call(plan, a, b, outs[0])
            torch.cuda.current_stream().wait_stream(stream)
            rt.barrier()
            for replay in range(2):
                fresh_a, fresh_b = inputs(m, n, k, dtype, 990 + replay)
                a.copy_(fresh_a)
                b.copy_(fresh_b)
                outs[0].fill_(float("nan"))
                graph.replay()
                sync(name)
                compare(checks, f"{name}: in a user's CUDA graph, replay {replay}", outs[0], reference(a, b), dtype)

        checks.run(name, body)


def check_graph_blas_workspaces(checks: Checks) -> None:
    """Graphs captured one after another (all captures run on one capture stream) keep their own cuBLAS workspace:
    once the first plan's graph is dropped and the allocator's cache emptied, the second plan's graph still computes
    right and writes nothing into memory handed out since (``eager_graphs._forget_blas_workspaces``). A long K and a
    small output make cuBLAS split K, through its workspace."""
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    world = rt.current_world()
    m, n, k = 256 * world.world_size, 256, 16384 * world.world_size
    dtype = torch.bfloat16
    name = "graphs keep their own cuBLAS workspaces"

    def body() -> None:
        sets = [inputs(m, n, k, dtype, 1000 + i) for i in range(2)]
        outs = [torch.empty((m // world.world_size, n), dtype=dtype, device="cuda") for _ in range(2)]
        plans = [rs_op.plan_for(*sets[0], grs.CUBLAS_CE), rs_op.plan_for(*sets[1], grs.CUBLAS_DIRECT)]
        for plan, (a, b), out in zip(plans, sets, outs, strict=True):
            for _ in range(3):  # the second call is captured: the first plan's graph, then the second plan's
                rs_op._eager_call(plan, a, b, out)
        sync(name)
        plans[0].graphs.clear()  # the first graph goes (as the least recently used one or clear_workspaces would)
        gc.collect()
        torch.cuda.empty_cache()
        fillers = [torch.full((16 << 20,), float("nan"), dtype=torch.float16, device="cuda") for _ in range(24)]
        (a, b), out = sets[1], outs[1]
        for call in range(3):
            fresh_a, fresh_b = inputs(m, n, k, dtype, 1010 + call)
            a.copy_(fresh_a)
            b.copy_(fresh_b)
            out.fill_(float("nan"))
            rs_op._eager_call(plans[1], a, b, out)
            sync(name)
            compare(checks, f"{name}: the second graph's call {call}", out, reference(a, b), dtype)
        written = sum(int((~filler.isnan()).sum()) for filler in fillers)
        checks.check(
            f"{name}: nothing written into memory allocated after the first graph went",
            written == 0 and plans[1].graphs.replays >= 3,
            f"{written} elements written; {plans[1].graphs.replays} replays",
        )

    checks.run(name, body)


def check_fallback_mixed_replays(checks: Checks) -> None:
    """With ``eager_graphs.REPLAY_COLLECTIVES`` on (``--replay-collectives``): the matmul + NCCL fallback from a
    common idle start with one rank's GPU kept busy (it launches eagerly) and its peer's idle (it captures, then
    replays), the ranks swapping each call, so one rank launches a graph of the reduce-scatter while its peer
    launches the collective eagerly, which NCCL does not allow; results compared with torch (a hang ends in sync's
    timeout)."""
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    world = rt.current_world()
    m, n, k = 1024, 1024, 2048
    dtype = torch.bfloat16
    name = "fallback, a replay on one rank and an eager call on its peer"

    def body() -> None:
        a, b = inputs(m, n, k, dtype, 1100)
        out = torch.empty((m // world.world_size, n), dtype=dtype, device="cuda")
        plan = rs_op.plan_for(a, b, grs.FALLBACK)
        results = mixed_replay_calls(
            a,
            b,
            out,
            lambda i: inputs(m, n, k, dtype, 1110 + i),
            functools.partial(rs_op._eager_call, plan),
            torch.Tensor.clone,
        )
        sync(name)
        for call, (got, fresh_a, fresh_b) in enumerate(results):
            compare(checks, f"{name}: call {call}", got, reference(fresh_a, fresh_b), dtype)
        log(f"{name}: {plan.graphs.captures} captures, {plan.graphs.replays} replays on rank {world.rank}")

    checks.run(name, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer shapes and variants")
    parser.add_argument(
        "--eager-graphs-only", action="store_true", help="only the eager calls replayed from graphs, every path"
    )
    parser.add_argument(
        "--pull-only",
        action="store_true",
        help="only the cuBLAS pull producer (CUBLAS_PULL): the quick shapes, a [4096, 4096] shard, eager graphs, out=",
    )
    parser.add_argument(
        "--tiles-as-programs-only",
        action="store_true",
        help="only the fused kernel at the shape whose shards have as many tiles as the GPU has SMs",
    )
    parser.add_argument(
        "--replay-collectives",
        action="store_true",
        help="eager_graphs.REPLAY_COLLECTIVES on: the fallback replays too (one rank's replay, a peer's eager call)",
    )
    args = parser.parse_args()
    eager_graphs.REPLAY_COLLECTIVES = args.replay_collectives
    world = setup(heap_size="2G")
    if world.world_size < 2:
        raise SystemExit("check_gemm_rs needs at least 2 ranks")
    checks = Checks()
    if args.pull_only:
        pull = [grs.CUBLAS_PULL]
        check_variants(checks, [*QUICK_SHAPES, (8192, 4096, 2048)], [torch.bfloat16, torch.float16], pull)
        check_eager_graphs(checks, [("cublas pull", grs.CUBLAS_PULL)])
        check_out(checks, [grs.CUBLAS_PULL])
        log(f"RESULT gemm_rs pull checks: {checks.passed} passed, {len(checks.failed)} failed on rank {world.rank}")
        return finish(checks)
    fused = [grs.GemmRSConfig(), grs.GemmRSConfig(partial_dtype="input")]
    tiles_as_programs = tiles_as_programs_shape(
        world.world_size, torch.cuda.get_device_properties(0).multi_processor_count, fused[0]
    )
    if args.tiles_as_programs_only:
        check_variants(checks, [tiles_as_programs], [torch.bfloat16], fused)
        log(f"RESULT gemm_rs checks: {checks.passed} passed, {len(checks.failed)} failed on rank {world.rank}")
        return finish(checks)
    check_eager_graphs(checks)
    check_graph_blas_workspaces(checks)
    if eager_graphs.REPLAY_COLLECTIVES:
        check_fallback_mixed_replays(checks)
    if args.eager_graphs_only:
        log(f"RESULT gemm_rs checks: {checks.passed} passed, {len(checks.failed)} failed on rank {world.rank}")
        return finish(checks)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    variants = QUICK_VARIANTS if args.quick else VARIANTS
    log0(f"gemm_rs: {len(variants)} variants x {len(shapes)} shapes in bf16 (fp16: the first two), 3 calls each")
    check_variants(checks, shapes, [torch.bfloat16, torch.float16], variants)
    # The cuBLAS path at a [4096, 4096] shard: where waiting inside its wide reduction kernel once deadlocked.
    cublas = [grs.CUBLAS_CE, dataclasses.replace(grs.CUBLAS_CE, producer="direct"), grs.CUBLAS_PULL]
    check_variants(checks, [(8192, 4096, 2048)], [torch.bfloat16], cublas)
    check_variants(checks, [tiles_as_programs], [torch.bfloat16], fused)
    check_out(checks, [*QUICK_VARIANTS, None])
    check_default_op(checks)
    check_bad_input(checks)
    log(f"RESULT gemm_rs checks: {checks.passed} passed, {len(checks.failed)} failed on rank {world.rank}")
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
