"""GPU correctness of ``triton_dist.ops.ag_gemm`` against torch (all_gather + matmul in fp32), any world size.

    torchrun --nproc-per-node=2 test/gpu/check_ag_gemm.py [--quick] [--cublas-only] [--double-buffer] [--flags F]
        [--wait-beside]

Every case uses fresh random data (a different seed per rank and case), poisons the output buffers first (the
op allocates its output; the receive buffer is filled with NaN before the first call), and compares with a
torch reference: bf16 and fp16; shapes that are multiples of the tiles and shapes that are not (M_local, N, K);
both producers (copy engine, SM push), both GEMM paths (TMA, masked pointers) and the cuBLAS path
(``OverlapConfig(backend="cublas")``: copy-engine gather, one cuBLAS GEMM per shard, and with 2 or 3 chunks per
shard, one GEMM per chunk, the last chunk shorter); return_gathered; the
torch custom op under torch.compile; replays of a captured CUDA graph with new inputs each time (the epochs
advance on the device); the cuBLAS path's eager calls of two signatures interleaved with graph replays, the ranks
skewed (with ``--double-buffer``, on double receive buffers: ``ops.ag_gemm.op.CUBLAS_DOUBLE_BUFFER``; with
``--wait-beside``, every cuBLAS plan's double-buffered waits on a waiter stream beside the own GEMM:
``ops.ag_gemm.op.CUBLAS_WAIT_BESIDE``, checked to be set on the plans of the replayed calls); ``out=``
on each path (fused TMA and pointer kernels, cuBLAS, NCCL, the eager fast path): C in the NaN-poisoned ``out``, bit
for bit the call without it; and bad input (mismatched shapes/dtypes across ranks, non-contiguous, wrong device,
exhausted heap) raising named errors before anything is launched.
"""

from __future__ import annotations

import argparse
import functools

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops.ag_gemm import AgGemmError, ag_gemm, ag_gemm_impl
from triton_dist.ops.ag_gemm.op import FLAG_SCHEMES
from triton_dist.ops.common import eager_graphs, resources
from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig, matmul
from triton_dist.ops.tuning import OverlapConfig
from triton_dist.testing import Checks, eager_replay_calls, finish, main_guard, mixed_replay_calls, sync
from triton_dist.testing import rank_print as log
from triton_dist.testing import setup_distributed as setup

TOL = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (1e-2, 1e-2)}


def reference(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    world = rt.current_world()
    gathered = torch.empty((world.world_size * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
    dist.all_gather_into_tensor(gathered, a)
    return (gathered.float() @ b.float()), gathered


def close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[bool, str]:
    rtol, atol = TOL[dtype]
    if out.shape != ref.shape:
        return False, f"shape {list(out.shape)} != {list(ref.shape)}"
    if not torch.isfinite(out.float()).all():
        return False, "non-finite values (a poisoned or unwritten region)"
    err = (out.float() - ref).abs()
    scale = ref.abs().max().item() + 1e-6
    bad = err > atol * scale + rtol * ref.abs()
    return (not bad.any().item()), f"max abs err {err.max().item():.3g} (scale {scale:.3g}), {int(bad.sum())} bad"


def make_inputs(m_local: int, n: int, k: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed * 1000 + rt.current_world().rank)
    a = torch.randn(m_local, k, dtype=dtype, device="cuda", generator=gen) / k**0.25
    gen_b = torch.Generator(device="cuda").manual_seed(seed)  # B is the same on every rank (as in the op's use)
    b = torch.randn(k, n, dtype=dtype, device="cuda", generator=gen_b) / k**0.25
    return a, b


def poison_receive_buffers() -> None:
    for ws in resources.workspaces("ag_gemm"):
        ws.recv.fill_(float("nan"))
    torch.cuda.synchronize()


def case(
    checks: Checks,
    name: str,
    m_local: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    config: OverlapConfig | None,
    seed: int,
    return_gathered: bool = False,
) -> None:
    def body() -> None:
        a, b = make_inputs(m_local, n, k, dtype, seed)
        ag_gemm_impl(a, b, config=config)  # allocate the workspace, then poison it and run for real
        sync()
        poison_receive_buffers()
        rt.barrier()
        a, b = make_inputs(m_local, n, k, dtype, seed + 1)
        c, gathered = ag_gemm_impl(a, b, return_gathered=return_gathered, config=config)
        sync(name)
        ref, ref_gathered = reference(a, b)
        ok, detail = close(c, ref, dtype)
        if return_gathered:
            same = gathered is not None and torch.equal(gathered, ref_gathered)
            ok, detail = ok and same, detail + f", gathered {'equal' if same else 'DIFFERS'}"
        checks.check(name, ok, detail)

    checks.run(name, body)


def check_out(checks: Checks, label: str, config: OverlapConfig | None) -> None:
    """``out=``: C written into a NaN-poisoned ``out``, which the call returns, bit for bit the same call's C
    without it (``config`` None: through the public op's eager fast path, its plan built first)."""
    name = f"out= equals the call without it, {label}"

    def body() -> None:
        a, b = make_inputs(1024, 1536, 2048, torch.bfloat16, 400)
        if config is None:
            ag_gemm(a, b)  # the plan, so that both calls below take the eager fast path
            want = ag_gemm(a, b)
        else:
            want = ag_gemm_impl(a, b, config=config)[0]
        out = torch.full_like(want, float("nan"))
        got = ag_gemm(a, b, out=out) if config is None else ag_gemm_impl(a, b, config=config, out=out)[0]
        sync(name)
        difference = (out.float() - want.float()).abs().max().item()
        checks.check(name, got is out and torch.equal(out, want), f"out returned: {got is out}, max diff {difference}")

    checks.run(name, body)


def check_custom_op(checks: Checks, dtype: torch.dtype) -> None:
    def body() -> None:
        a, b = make_inputs(1024, 1536, 2048, dtype, 77)
        c = torch.ops.triton_dist.ag_gemm(a, b, False)[0]
        ok, detail = close(c, reference(a, b)[0], dtype)
        checks.check(f"custom op eager {dtype}", ok, detail)

        compiled = torch.compile(lambda x, y: ag_gemm(x, y) * 2.0, fullgraph=True)
        a, b = make_inputs(1024, 1536, 2048, dtype, 78)
        c = compiled(a, b)
        ok, detail = close(c, 2.0 * reference(a, b)[0], dtype)
        checks.check(f"torch.compile(fullgraph) {dtype}", ok, detail)

    checks.run(f"custom op {dtype}", body)


def capture(a: torch.Tensor, b: torch.Tensor, config: OverlapConfig) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """One ``ag_gemm_impl`` call on ``a`` and ``b`` captured in a CUDA graph (its plan built before), and its output."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        c, _ = ag_gemm_impl(a, b, config=config)
    torch.cuda.current_stream().wait_stream(stream)
    sync()
    return graph, c


def check_cuda_graph(checks: Checks, producer: str) -> None:
    """``producer``: "ce" or "sm" (the fused path's), or "cublas" / "cublas/<c>" (the cuBLAS path, c chunks per
    shard)."""
    name = f"CUDA graph, 5 replays with new inputs ({producer})"

    def body() -> None:
        dtype = torch.bfloat16
        if producer.startswith("cublas"):
            chunks = int(producer.partition("/")[2] or 1)
            config = OverlapConfig(backend="cublas", cublas_chunks=chunks)
        else:
            config = OverlapConfig(producer=producer, chunk_tiles=2, push_ctas=8)
        a, b = make_inputs(2048, 2048, 1024, dtype, 90)
        for _ in range(2):
            ag_gemm_impl(a, b, config=config)  # warm-up: compile, allocate
        sync()
        static_a, static_b = a.clone(), b.clone()
        graph, static_c = capture(static_a, static_b, config)
        results = []
        for replay in range(5):
            a, b = make_inputs(2048, 2048, 1024, dtype, 91 + replay)
            static_a.copy_(a)
            static_b.copy_(b)
            static_c.fill_(float("nan"))
            rt.barrier()
            graph.replay()
            sync(name)
            results.append(close(static_c, reference(a, b)[0], dtype))
        ok = all(r[0] for r in results)
        checks.check(name, ok, "; ".join(r[1] for r in results))

    checks.run(name, body)


def expect_error(checks: Checks, name: str, error: type[BaseException], words: str, fn) -> None:  # noqa: ANN001
    checks.expect_error(name, error, fn, words)


def check_bad_inputs(checks: Checks) -> None:
    world = rt.current_world()
    a, b = make_inputs(256, 256, 256, torch.bfloat16, 5)
    expect_error(checks, "non-contiguous a", AgGemmError, "contiguous", lambda: ag_gemm(a.t().contiguous().t(), b))
    expect_error(checks, "dtype mismatch a/b", AgGemmError, "same dtype", lambda: ag_gemm(a, b.half()))
    expect_error(checks, "fp32 input", AgGemmError, "bfloat16 or float16", lambda: ag_gemm(a.float(), b.float()))
    expect_error(checks, "a on the CPU", AgGemmError, "cpu", lambda: ag_gemm(a.cpu(), b.cpu()))
    expect_error(checks, "inner dims", AgGemmError, "a.shape[1] must equal", lambda: ag_gemm(a, b[:128]))
    if torch.cuda.device_count() > 1:
        other = torch.device("cuda", (world.device.index + 1) % torch.cuda.device_count())
        expect_error(
            checks, "wrong GPU", AgGemmError, "triton_dist device is", lambda: ag_gemm(a.to(other), b.to(other))
        )
    # Shapes that differ between ranks: every rank must raise (no hang, no wrong answer). One rank cannot differ.
    if world.world_size >= 2:
        rows = 256 + 128 * world.rank
        a2, b2 = make_inputs(rows, 256, 256, torch.bfloat16, 6)
        expect_error(
            checks,
            "shapes differ across ranks",
            AgGemmError,
            "ranks called with different inputs",
            lambda: ag_gemm(a2, b2),
        )
        dt = torch.bfloat16 if world.rank == 0 else torch.float16
        a3, b3 = make_inputs(256, 256, 256, dt, 7)
        expect_error(
            checks,
            "dtypes differ across ranks",
            AgGemmError,
            "ranks called with different inputs",
            lambda: ag_gemm(a3, b3),
        )
    else:
        log("SKIP shapes / dtypes differ across ranks: needs 2 or more ranks")
    heap = world.heap.heap_size
    big_rows = heap // (world.world_size * 8192 * 2) + 128
    a4 = torch.empty(big_rows, 8192, dtype=torch.bfloat16, device="cuda")
    b4 = torch.empty(8192, 256, dtype=torch.bfloat16, device="cuda")
    cfg = OverlapConfig()
    expect_error(
        checks, "exhausted heap", rt.HeapExhaustedError, "receive buffer", lambda: ag_gemm_impl(a4, b4, config=cfg)
    )


def check_matmul(checks: Checks) -> None:
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in ((1000, 1000, 1000), (4096, 2048, 4096), (777, 520, 1032)):
            for config in (
                HOPPER_CANDIDATES[0],
                HOPPER_CANDIDATES[2],
                MatmulConfig(use_tma=False, block_n=128, block_k=32, num_stages=2),
            ):
                name = f"matmul {m}x{n}x{k} {dtype} {config.short()}"

                def body(m=m, n=n, k=k, dtype=dtype, config=config, name=name) -> None:
                    a = torch.randn(m, k, dtype=dtype, device="cuda")
                    b = torch.randn(k, n, dtype=dtype, device="cuda")
                    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
                    matmul(a, b, out=out, config=config)
                    ok, detail = close(out, a.float() @ b.float(), dtype)
                    checks.check(name, ok, detail)

                checks.run(name, body)


def check_cublas_interleaved(checks: Checks) -> None:
    """The cuBLAS path's eager calls of two signatures on one problem (they share the double receive buffers, when
    on) interleaved with replays of a captured call, no host synchronization between them, one rank or the other
    held back by a GPU sleep before each eager call: the receive buffers' reuse across calls of every kind."""
    name = "cuBLAS path: eager calls of two N and graph replays interleaved, ranks skewed"

    def body() -> None:
        dtype, m_local, k = torch.bfloat16, 1024, 1024
        cublas = OverlapConfig(backend="cublas")
        for n in (1024, 1536, 2048):
            a, b = make_inputs(m_local, n, k, dtype, 500 + n)
            ag_gemm_impl(a, b, config=cublas)  # plans built eagerly
        sync()
        static_a, static_b = make_inputs(m_local, 2048, k, dtype, 501)
        graph, static_c = capture(static_a, static_b, cublas)
        rank = rt.current_world().rank
        outs = []
        for i in range(16):
            if i % 5 == 4:
                a, b = make_inputs(m_local, 2048, k, dtype, 510 + i)
                static_a.copy_(a)
                static_b.copy_(b)
                graph.replay()
                outs.append((static_c.clone(), a, b))
                continue
            a, b = make_inputs(m_local, 1536 if i % 2 else 1024, k, dtype, 510 + i)
            if rank == (i // 2) % rt.current_world().world_size:
                torch.cuda._sleep(100_000)  # this rank's call starts ~50 µs late on its GPU
            outs.append((ag_gemm_impl(a, b, config=cublas)[0], a, b))
        sync(name)
        results = [close(c, reference(a, b)[0], dtype) for c, a, b in outs]
        failed = [f"call {i}: {r[1]}" for i, r in enumerate(results) if not r[0]]
        checks.check(f"{name} (16 calls)", not failed, "; ".join(failed[:3]) or results[0][1])

    checks.run(name, body)


def check_eager_graphs(checks: Checks, paths: list[tuple[str, OverlapConfig]]) -> None:
    """Eager calls replayed from the op's own CUDA graphs (``ops.common.eager_graphs``) on each of ``paths``, as
    ``testing.eager_replay_calls`` makes them (the cuBLAS path's double buffers alternate besides): two address
    sets, fresh values before every call, ranks out of step, no host synchronization until all twelve results (and,
    where the plan keeps it, the gathered A, cloned after each call) are compared with torch."""
    from triton_dist.ops.ag_gemm import op as ag_op

    world = rt.current_world()
    m_local, n, k = 512, 1024, 2048
    dtype = torch.bfloat16
    for label, config in paths:
        name = f"eager calls replayed from graphs, {label}"

        def body(config: OverlapConfig = config, name: str = name) -> None:
            sets = [make_inputs(m_local, n, k, dtype, 760 + i) for i in range(2)]
            outs = [torch.empty((world.world_size * m_local, n), dtype=dtype, device="cuda") for _ in range(2)]
            plan = ag_op.plan_for(sets[0][0], sets[0][1], config)
            keeps = callable(getattr(plan, "gathered", None))
            called: list[torch.Tensor] = []

            def call(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
                ag_op._eager_call(plan, a, b, out)
                called.append(a)

            def snapshot(out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
                return out.clone(), plan.gathered(called[-1], world.rank).clone() if keeps else None

            results = eager_replay_calls(
                sets,
                outs,
                lambda i: make_inputs(m_local, n, k, dtype, 770 + i),
                call,
                snapshot,
                from_idle=config.backend == "nccl",  # where the fallback would replay (REPLAY_COLLECTIVES): from idle
            )
            sync(name)
            failed = []
            for i, ((out, gathered), a, b) in enumerate(results):
                ref, ref_gathered = reference(a, b)
                ok, detail = close(out, ref, dtype)
                if gathered is not None and not torch.equal(gathered, ref_gathered):
                    ok, detail = False, detail + ", gathered A DIFFERS"
                if not ok:
                    failed.append(f"call {i}: {detail}")
            graphs = plan.graphs
            eager = config.backend == "nccl" and not eager_graphs.REPLAY_COLLECTIVES  # NCCL's collective: eager
            double = getattr(plan, "double", None)
            if double is not None and double.flags_by not in ag_op.REPLAYABLE_FLAG_SCHEMES:
                eager = True  # flags carrying the host's call count: every call eager (CublasPlan.graph_phase)
            flags = "" if double is None else f", {double.flags_by} flags"
            beside = getattr(plan, "wait_beside", None)
            if double is not None and beside:
                flags += ", waits beside"
            as_asked = beside is None or double is None or beside == ag_op.CUBLAS_WAIT_BESIDE
            checks.check(
                f"{name} ({len(results)} calls{flags})",
                not failed and as_asked and (graphs.captures == graphs.replays == 0 if eager else graphs.replays >= 6),
                "; ".join(failed[:3]) or f"{graphs.captures} captures, {graphs.replays} replays, wait_beside {beside}",
            )

        checks.run(name, body)


def check_fallback_mixed_replays(checks: Checks) -> None:
    """With ``eager_graphs.REPLAY_COLLECTIVES`` on (``--replay-collectives``): the NCCL fallback from a common idle
    start with one rank's GPU kept busy (it launches eagerly) and its peer's idle (it captures, then replays), the
    ranks swapping each call, so one rank launches a graph of the all-gather (whose captured ring registers its
    output for direct peer writes) while its peer launches the collective eagerly, which NCCL does not allow;
    results compared with torch (a hang ends in sync's timeout)."""
    from triton_dist.ops.ag_gemm import op as ag_op

    world = rt.current_world()
    m_local, n, k = 512, 1024, 2048
    dtype = torch.bfloat16
    name = "nccl fallback, a replay on one rank and an eager call on its peer"

    def body() -> None:
        a, b = make_inputs(m_local, n, k, dtype, 780)
        out = torch.empty((world.world_size * m_local, n), dtype=dtype, device="cuda")
        plan = ag_op.plan_for(a, b, OverlapConfig(backend="nccl"))
        results = mixed_replay_calls(
            a,
            b,
            out,
            lambda i: make_inputs(m_local, n, k, dtype, 790 + i),
            functools.partial(ag_op._eager_call, plan),
            torch.Tensor.clone,
        )
        sync(name)
        failed = []
        for call, (got, fresh_a, fresh_b) in enumerate(results):
            ok, detail = close(got, reference(fresh_a, fresh_b)[0], dtype)
            if not ok:
                failed.append(f"call {call}: {detail}")
        graphs = plan.graphs
        checks.check(
            f"{name} ({graphs.captures} captures, {graphs.replays} replays here)", not failed, "; ".join(failed[:3])
        )

    checks.run(name, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--eager-graphs-only", action="store_true", help="only the eager calls replayed from graphs, every path"
    )
    parser.add_argument(
        "--cublas-only", action="store_true", help="only the cuBLAS path's cases (a short run after changing it)"
    )
    parser.add_argument(
        "--double-buffer",
        action="store_true",
        help="the cuBLAS path's eager calls on double receive buffers (ops.ag_gemm.op.CUBLAS_DOUBLE_BUFFER)",
    )
    parser.add_argument(
        "--flags",
        default="auto",
        choices=["auto", *FLAG_SCHEMES],
        help="how double-buffered calls flag (ops.ag_gemm.op.DOUBLE_BUFFER_FLAGS)",
    )
    parser.add_argument(
        "--wait-beside",
        action="store_true",
        help="the cuBLAS path's double-buffered waits beside the own GEMM (ops.ag_gemm.op.CUBLAS_WAIT_BESIDE)",
    )
    parser.add_argument(
        "--replay-collectives",
        action="store_true",
        help="eager_graphs.REPLAY_COLLECTIVES on: the fallback replays too (one rank's replay, a peer's eager call)",
    )
    args = parser.parse_args()
    from triton_dist.ops.ag_gemm import op as ag_gemm_op

    eager_graphs.REPLAY_COLLECTIVES = args.replay_collectives

    ag_gemm_op.DOUBLE_BUFFER_FLAGS = args.flags
    ag_gemm_op.CUBLAS_WAIT_BESIDE = args.wait_beside  # before any plan is built
    if args.double_buffer:
        ag_gemm_op.CUBLAS_DOUBLE_BUFFER = True
    setup(heap_size="2G")
    checks = Checks()
    seed = 10
    ce = OverlapConfig(producer="ce", chunk_tiles=2)
    sm = OverlapConfig(producer="sm", chunk_tiles=2, push_ctas=8)
    pointer = OverlapConfig(matmul=MatmulConfig(use_tma=False, block_n=128, block_k=32, num_stages=2), chunk_tiles=3)
    small_tiles = OverlapConfig(matmul=HOPPER_CANDIDATES[2], chunk_tiles=1, producer="sm", push_ctas=4)
    cublas = OverlapConfig(backend="cublas")
    cublas2 = OverlapConfig(backend="cublas", cublas_chunks=2)
    cublas3 = OverlapConfig(backend="cublas", cublas_chunks=3)
    nccl = OverlapConfig(backend="nccl")
    graph_paths = [("cuBLAS", cublas), ("cuBLAS, 3 chunks per shard", cublas3)]
    if not args.cublas_only:
        graph_paths += [("fused TMA, ce", ce), ("fused sm push", sm), ("fused pointer", pointer), ("nccl", nccl)]
    check_eager_graphs(checks, graph_paths)
    if eager_graphs.REPLAY_COLLECTIVES:
        check_fallback_mixed_replays(checks)
    if args.eager_graphs_only:
        log("done")
        return finish(checks)
    if not args.cublas_only:
        check_matmul(checks)
    cases = [
        ("tiles divide, ce", 1024, 2048, 2048, ce),
        ("tiles divide, sm push", 1024, 2048, 2048, sm),
        ("N, K not tile multiples, ce", 1024, 1000, 1544, ce),
        ("M_local not a tile multiple (pointer path), sm", 1000, 1032, 1000, sm),
        ("pointer GEMM, ce", 640, 768, 520, pointer),
        ("128x128 tiles, chunk of 1 tile, sm4", 512, 640, 1024, small_tiles),
        ("seed shape per rank slice, ce", 4096, 2048, 12288, ce),
        ("nccl fallback", 1000, 1000, 1000, OverlapConfig(backend="nccl")),
        ("tuned / cost-model choice", 4096, 2048, 4096, None),
        # Rows of A (K) and of B and C (N) off 16-byte multiples: no TMA descriptor takes them, the pointer kernel runs.
        ("K, N rows off 16 bytes (pointer path), sm", 1000, 1001, 1003, sm),
        ("cuBLAS path", 1024, 2048, 2048, cublas),
        ("cuBLAS path, M_local, N, K not multiples of anything", 1000, 1001, 1003, cublas),
        ("cuBLAS path, one row per rank", 1, 512, 256, cublas),
        ("cuBLAS path, 2 chunks per shard", 1024, 2048, 2048, cublas2),
        ("cuBLAS path, 3 chunks per shard (336 + 336 + 328 rows), nothing a multiple", 1000, 1001, 1003, cublas3),
        ("cuBLAS path, 3 chunks asked, 5 rows per rank (one chunk)", 5, 512, 256, cublas3),
    ]
    if args.quick:
        cases = cases[:4] + cases[-4:]
    if args.cublas_only:
        cases = [entry for entry in cases if entry[-1] is not None and entry[-1].backend == "cublas"]
    for dtype in (torch.bfloat16, torch.float16):
        for label, m_local, n, k, config in cases:
            seed += 2
            case(checks, f"{label} [{m_local}x{n}x{k} {dtype}]", m_local, n, k, dtype, config, seed)
    case(checks, "return_gathered, cuBLAS path", 1000, 1024, 1536, torch.bfloat16, cublas, 204, return_gathered=True)
    if not args.cublas_only:
        case(checks, "return_gathered, ce", 1024, 1024, 1536, torch.bfloat16, ce, 200, return_gathered=True)
        case(checks, "return_gathered, nccl", 1000, 1024, 1536, torch.bfloat16, nccl, 202, return_gathered=True)

    outs = [("fused TMA, ce", ce), ("fused pointer", pointer), ("cuBLAS path", cublas), ("nccl", nccl)]
    outs.append(("cuBLAS path, 2 chunks per shard", cublas2))
    for label, config in [*outs, ("eager fast path, tuned choice", None)]:
        if not args.cublas_only or config in (cublas, cublas2):
            check_out(checks, label, config)

    # Many calls back to back without host synchronization (epochs, barrier, buffer reuse).
    def back_to_back() -> None:
        inputs = [make_inputs(2048, 2048, 2048, torch.bfloat16, 300 + i) for i in range(8)]
        paths = (ce, sm, cublas, cublas3)
        outs = [ag_gemm_impl(a, b, config=paths[i % 4])[0] for i, (a, b) in enumerate(inputs)]
        sync("back-to-back calls")
        results = [close(c, reference(a, b)[0], torch.bfloat16) for c, (a, b) in zip(outs, inputs, strict=True)]
        checks.check(
            "8 calls back to back, paths alternating (ce, sm, cuBLAS, cuBLAS in 3 chunks per shard)",
            all(r[0] for r in results),
            "; ".join(r[1] for r in results[:3]),
        )

    checks.run("back to back", back_to_back)
    check_cuda_graph(checks, "cublas")
    check_cuda_graph(checks, "cublas/3")
    check_cublas_interleaved(checks)
    if not args.cublas_only:
        for dtype in (torch.bfloat16, torch.float16):
            check_custom_op(checks, dtype)
        check_cuda_graph(checks, "ce")
        check_cuda_graph(checks, "sm")
        check_bad_inputs(checks)
    log("done")
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
