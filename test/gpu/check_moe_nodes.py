"""``triton_dist.ops.moe_dispatch`` / ``moe_combine`` (normal mode) across nodes on GPUs, against the torch reference:
a real 2-node layout on one host (two torchrun agents, one GPU each, on the NVSHMEM heap), so the kernels' puts to
the other node (``dl.put_signal`` / ``dl.signal_wait``) run, and the one-node path on 2 GPUs beside it.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        python3 test/gpu/check_moe_nodes.py [--timeout 300] [--only two_nodes ...] [--rdzv static|c10d]

Run it with plain ``python3`` (not under torchrun). The launcher is ``check_all_gather.py``'s (each agent in a
session of its own, every agent's process group killed when a stage outlives ``--timeout``, one agent failed and the
others did not end within its grace period, or the launcher is stopped). Exit status 0 iff every required stage
passed. The stages, as ``check_all_gather.py``'s: ``one_node`` (CUDA-IPC heap), ``one_node_nvshmem``, ``two_nodes``
(two agents ``--nnodes=2 --node-rank=<0|1> --nproc-per-node=1``, both GPUs visible), ``two_nodes_own_gpu``
(informational, ``CUDA_VISIBLE_DEVICES=i`` per agent) and, with 4 or more GPUs, ``two_nodes_2x2``.

Each worker builds every rank's inputs from one seed (random routing with slots of -1, uneven T with T = 0 on one
rank, a rank that receives nothing, k = 1 to 8, fp8 payloads, whole rows and chunks, ``layout="gather"``,
``MoeConfig(route_programs=256)``, combine's fp32 partials put across nodes: ``MoeConfig(combine_partials="fp32",
combine_spread=False)``; every other case runs the default's bf16 partials), poisons the op's buffers, and checks its
dispatch (rows, counts, offsets, per-row meta) and combine (``sum_k w_k y_k`` in fp32 with each rank's partial
rounded to bf16 first, or not with fp32 partials, rounded) against ``ops/moe/reference.py``; then two dispatches
before their combines (both buffer halves in flight), that the paths across nodes ran exactly when the world spans
nodes (the kernels' PTX holds NVSHMEM's device code), and that low-latency mode refuses a world across nodes. Rank 0
prints dispatch and combine times (informational).

``--emulate`` (with ``--worker``) runs the same checks on CPU ranks under ``TRITON_INTERPRET=1`` with small shapes:
how ``test/python/test_ops_moe_nodes.py`` runs them in CI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_all_gather as launcher  # noqa: E402  (the launcher: stages of torchrun agents, killed on timeout)

REPO = launcher.REPO


def worker(layouts: list[int], backend: str, emulate: bool = False) -> int:
    """One rank's checks on worlds of ``layouts[i]`` nodes on the ``backend`` heap, one after the other; returns the
    exit code (0 iff every check passed on every rank). On GPUs, one layout: the world torchrun made; ``emulate``:
    CPU ranks, each layout of ``n > 1`` nodes an emulated NVSHMEM heap (``runtime.emulation.one_sided``)."""
    return launcher.run_layouts("moe", cases, layouts, backend, emulate, cpu_heap="16M", gpu_heap="4G")


def routing(
    tag: int,
    size: int,
    tokens: list[int],
    k: int,
    hidden: int,
    *,
    empty: int | None = None,
    only: int | None = None,
    none_rate: float = 0.25,
) -> tuple[list[Any], list[Any], list[Any], int]:
    """Every rank's ``(x, topk_idx, topk_weights)`` (on the CPU, from seed ``tag``) and E = 4 W: rank ``r`` sends
    ``tokens[r % len(tokens)]`` tokens, each to ``k`` distinct experts, a ``none_rate`` share of the slots -1;
    ``empty``: a rank whose experts nobody picks (it receives nothing); ``only``: the one rank whose experts every
    token picks (every other rank receives nothing)."""
    import torch

    gen = torch.Generator().manual_seed(tag)
    experts = 4 * size
    xs, idxs, weights = [], [], []
    for rank in range(size):
        count = tokens[rank % len(tokens)]
        xs.append(torch.randn(count, hidden, generator=gen).to(torch.bfloat16))
        pool = [e for e in range(experts) if (empty is None or e // 4 != empty) and (only is None or e // 4 == only)]
        rows = [torch.tensor(pool)[torch.randperm(len(pool), generator=gen)[:k]] for _ in range(count)]
        idx = torch.stack(rows) if rows else torch.zeros(0, k, dtype=torch.int64)
        idx[torch.rand(count, k, generator=gen) < none_rate] = -1
        idxs.append(idx.to(torch.int32 if k > 1 else torch.int64))
        weights.append(torch.rand(count, k, generator=gen))
    return xs, idxs, weights, experts


def _experts(recv_x: Any, expert: Any) -> Any:
    """The experts: expert ``e`` multiplies its rows by ``(e + 1) / 4`` (rows of expert -1 give 0)."""
    return (recv_x.float() * ((expert.float() + 1) / 4).unsqueeze(-1)).to(recv_x.dtype)


def compare(
    rank: int, recv_x: Any, handle: Any, out: Any, inputs: tuple[Any, ...], *, fp8: bool = False, partials: bool = True
) -> list[str]:
    """What this rank's dispatch (``recv_x``, ``handle``) and combine (``out``, of ``_experts``' outputs) got that
    the reference did not: the rows, counts, offsets and per-row meta exactly; the combine equal to the reference's
    fp32 sums rounded to nearest even, or truncated (Triton 3.6's interpreter), on CPU ranks, and within ``rtol``
    8e-3 of them on GPUs (which may fuse a multiply-add, so the last bf16 bit may differ). ``partials`` (the
    default's ``MoeConfig(combine_partials="input")``; False: ``"fp32"``): each rank's partial rounded the same way
    before the sum."""
    import dataclasses

    import torch

    from triton_dist.ops.moe import reference_combine, reference_dispatch
    from triton_dist.ops.moe.reference import dequantize_fp8

    xs, idxs, weights, experts = inputs
    refs = reference_dispatch(xs, idxs, weights, experts, fp8=fp8)
    want, ref = refs[rank]
    problems = []
    for name in ("expert_counts", "expert_offsets", "src_offsets", "recv_src_rank", "recv_src_token", "recv_expert",
                 "recv_weights", "recv_topk_slot"):  # fmt: skip
        mine, theirs = getattr(handle, name).cpu(), getattr(ref, name)
        if mine.shape != theirs.shape or not torch.equal(mine, theirs):
            problems.append(f"{name}: {mine.tolist()} != {theirs.tolist()}")
    if int(handle.num_recv_tokens) != ref.num_recv_tokens:
        problems.append(f"num_recv_tokens {int(handle.num_recv_tokens)} != {ref.num_recv_tokens}")
    got = recv_x.cpu()
    if fp8:
        same = got.shape == want.shape and torch.equal(got.view(torch.uint8), want.view(torch.uint8))
        same = same and handle.recv_scales is not None and torch.equal(handle.recv_scales.cpu(), ref.recv_scales)
    else:
        same = got.shape == want.shape and torch.equal(got, want)
    if not same:
        problems.append(f"recv_x differs (shapes {list(got.shape)} / {list(want.shape)})")
    if fp8:
        ys = [_experts(dequantize_fp8(rx, h.recv_scales, torch.bfloat16), h.recv_expert) for rx, h in refs]
    else:
        ys = [_experts(rx, h.recv_expert) for rx, h in refs]

    def nearest(values: torch.Tensor) -> torch.Tensor:
        return values.to(torch.bfloat16).float()

    def chopped(values: torch.Tensor) -> torch.Tensor:
        return (values.view(torch.int32) & ~0xFFFF).view(torch.float32)

    fp32 = [dataclasses.replace(h, dtype=torch.float32) for _, h in refs]
    exact = reference_combine(ys, fp32, nearest if partials else None)[rank]
    truncated = chopped(reference_combine(ys, fp32, chopped if partials else None)[rank]).to(torch.bfloat16)
    result = out.cpu()
    if out.device.type != "cpu" and partials and result.shape == exact.shape:
        # A fused multiply-add may flip a partial's bf16 rounding: one ulp, at most 2^-7 of it, on each rank's.
        magnitude = reference_combine(ys, fp32, torch.abs)[rank]
        close = bool(((result.float() - exact).abs() <= 2**-7 * magnitude + 8e-3 * exact.abs() + 1e-5).all())
    elif out.device.type != "cpu":
        close = result.shape == exact.shape and torch.allclose(result.float(), exact, rtol=8e-3, atol=1e-5)
    else:
        close = result.shape == exact.shape and (
            torch.equal(result, exact.to(torch.bfloat16)) or torch.equal(result, truncated)
        )
    if not close:
        worst = (result.float() - exact).abs().max().item() if result.shape == exact.shape else None
        problems.append(f"combine differs: shapes {list(result.shape)} / {list(exact.shape)}, max {worst}")
    return problems


def cases(world: Any, emulate: bool) -> list[tuple[str, Callable[..., None]]]:
    """The checks of one rank of ``world`` (``Checks.run_each`` cases)."""
    import torch
    import torch.distributed as dist

    import triton_dist.ops as ops
    from triton_dist import runtime as rt
    from triton_dist.ops.moe import MoeConfig, MoeError
    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe.reference import dequantize_fp8
    from triton_dist.testing import Checks, rank0_print, sync, time_ms

    rank, size = world.rank, world.world_size
    device = world.device
    hidden = 32 if emulate else 512

    def poison() -> None:
        """0xFF (NaN, -1) into every MoE buffer here, between barriers so no peer is writing them."""
        rt.barrier()
        for plan in moe_op._plans._plans.values():
            buffers = plan.buffers
            if buffers is None:
                continue
            for tensor in (buffers.tokens, buffers.meta, buffers.combine):
                tensor.view(torch.uint8).fill_(0xFF)
            if buffers.across is not None:
                for tensor in (buffers.across.send, buffers.across.send_meta, buffers.across.combine_send):
                    tensor.view(torch.uint8).fill_(0xFF)
        rt.barrier()

    def run(checks: Checks, name: str, inputs: tuple[Any, ...], **options: Any) -> None:
        xs, idxs, weights, experts = inputs
        fp8 = bool(options.get("fp8"))
        partials = (options.get("config") or MoeConfig()).combine_partials == "input"
        poison()
        x, idx, w = (t[rank].to(device) for t in (xs, idxs, weights))
        recv_x, handle = ops.moe_dispatch(x, idx, w, experts, **options)
        if options.get("layout") == "gather":  # each token once: its expanded rows (and scales) are compared
            rows = handle.gather_rows.long()
            recv_x = recv_x[rows]
            if fp8:
                handle.recv_scales = handle.recv_scales[rows]
        mine = dequantize_fp8(recv_x, handle.recv_scales, torch.bfloat16) if fp8 else recv_x
        out = ops.moe_combine(_experts(mine, handle.recv_expert), handle)
        sync(f"moe {name}")
        problems = compare(rank, recv_x, handle, out, inputs, fp8=fp8, partials=partials)
        checks.check(f"{name}: dispatch and combine = the reference", not problems, "; ".join(problems)[:2000])

    tokens = [5, 0, 3, 7] if emulate else [300, 0, 517, 64]
    # Under the emulation (slow) each layout runs what its path adds: one node (the one-node kernels, covered at 2
    # and 3 ranks by test_ops_moe_emulation.py) the first case only; across nodes the routing cases, two dispatches
    # in flight and the refusal of low-latency mode, with fp8 payloads and layout="gather" at 2 x 2 and chunked rows
    # at 4 x 1.
    spans, local = world.num_nodes > 1, world.local_world_size
    light = emulate and not spans

    def each_case(checks: Checks) -> None:
        run(checks, "random routing, uneven T, T = 0 on rank 1", routing(1, size, tokens, 2, hidden))
        if light:
            return
        if not emulate:
            last = size - 1
            run(checks, f"rank {last} receives nothing, k = 3", routing(2, size, tokens[::-1], 3, hidden, empty=last))
        # Every token to rank 0: more than 64 rows there (the buffers, staging and signals grow), the others get none.
        crowd = [20, 17, 16, 15] if emulate else [2000, 1333]
        run(checks, "every token to rank 0, the others receive nothing: the buffers grow",
            routing(3, size, crowd, 2, hidden, only=0, none_rate=0.0))  # fmt: skip
        if not emulate:
            run(checks, "more tokens, k = 4", routing(4, size, [2000, 1333], 4, hidden, none_rate=0.0))
            run(checks, "k = 8, H 7168", routing(5, size, [129, 64], 8, 7168))
            run(checks, "k = 1", routing(6, size, tokens, 1, hidden))

    def variants(checks: Checks) -> None:
        if not emulate or local > 1:
            inputs = routing(7, size, tokens, 2, 160 if emulate else hidden)
            run(checks, "fp8 payloads (kept, with scales)", inputs, fp8=True)
            # (emulated: with 256 route count programs, 16 there, so the option runs across nodes too)
            gather = {"config": MoeConfig(route_programs=256)} if emulate else {}
            run(checks, "layout='gather'" + (", MoeConfig(route_programs=256)" if emulate else ""),
                routing(14, size, tokens, 3, hidden), layout="gather", **gather)  # fmt: skip
            # combine's fp32 partials put across nodes (the option; twice the bytes of the default's bf16 ones), its
            # programs not spread: the defaults before 2026-11-27
            options = MoeConfig(combine_partials="fp32", combine_spread=False)
            run(checks, "MoeConfig(combine_partials='fp32', combine_spread=False), k = 8",
                routing(16, size, tokens, 8, hidden), config=options)  # fmt: skip
        if not emulate:  # the route count option: 8 tokens a program where the default's take 32
            many = routing(15, size, [2000, 1333], 4, hidden, none_rate=0.0)
            run(checks, "MoeConfig(route_programs=256): more tokens, k = 4", many, config=MoeConfig(route_programs=256))
        if not emulate or local == 1:
            run(checks, "MoeConfig(whole_row=False): chunked rows", routing(8, size, tokens, 2, hidden),
                config=MoeConfig(whole_row=False))  # fmt: skip

    def in_flight(checks: Checks) -> None:
        """Two dispatches, then their combines: both halves of every buffer hold a call's data."""
        first, second = routing(9, size, tokens, 2, hidden), routing(10, size, tokens[::-1], 2, hidden)
        poison()
        calls = []
        for inputs in (first, second):
            xs, idxs, weights, experts = inputs
            x, idx, w = (t[rank].to(device) for t in (xs, idxs, weights))
            calls.append((inputs, *ops.moe_dispatch(x, idx, w, experts)))
        outs = [ops.moe_combine(_experts(recv_x, handle.recv_expert), handle) for _, recv_x, handle in calls]
        sync("moe: two dispatches in flight")
        for number, ((inputs, recv_x, handle), out) in enumerate(zip(calls, outs, strict=True)):
            problems = compare(rank, recv_x, handle, out, inputs)
            checks.check(f"dispatch {number} of 2 in flight = the reference", not problems, "; ".join(problems)[:2000])

    def low_latency(checks: Checks) -> None:
        xs, idxs, weights, experts = routing(11, size, [4], 2, hidden)
        x, idx, w = (t[rank].to(device) for t in (xs, idxs, weights))
        try:
            ops.moe_dispatch(x, idx, w, experts, "low_latency", 4)
            refused = ""
        except MoeError as error:
            refused = str(error)
        if world.num_nodes > 1:
            ok = refused.startswith("moe_dispatch: low_latency mode runs within one node only")
            checks.check("low_latency mode refuses a world across nodes", ok, refused)
        else:
            checks.check("low_latency mode runs on one node", not refused, refused)

    def ptx(checks: Checks) -> None:
        plans = list(moe_op._plans._plans.values())
        # Launch keys are (kernel name, gather layout, the leading tensors' dtypes).
        launches = [launch for plan in plans for key, launch in plan.launches.items() if key[0] == "push"]
        holds = ["nvshmemi_device_state_d" in launch.kernel.asm["ptx"] for launch in launches]
        want = world.num_nodes > 1
        checks.check(
            f"every push kernel's PTX {'holds' if want else 'lacks'} NVSHMEM's device code ({len(holds)} plans)",
            bool(holds) and all(h == want for h in holds),
            f"{holds}",
        )

    def timings(checks: Checks) -> None:
        try:
            for count in (128, 4096):
                xs, idxs, weights, experts = routing(12, size, [count], 8, 7168, none_rate=0.0)
                experts = 64 * size
                gen = torch.Generator().manual_seed(13 + rank)
                idx = torch.stack([torch.randperm(experts, generator=gen)[:8] for _ in range(count)]).to(torch.int32)
                x, w = xs[rank].to(device), weights[rank].to(device)
                idx = idx.to(device)
                recv_x, handle = ops.moe_dispatch(x, idx, w, experts)
                together = rt.barrier if world.num_nodes > 1 else None
                dispatch = time_ms(
                    lambda x=x, idx=idx, w=w, e=experts: ops.moe_dispatch(x, idx, w, e), start_together=together
                )
                combine = time_ms(lambda y=recv_x, h=handle: ops.moe_combine(y, h), start_together=together)
                rank0_print(
                    f"TIME {count} tokens x {size} ranks, H 7168, top-8 of {experts}: dispatch {dispatch * 1e3:.1f} "
                    f"us, combine {combine * 1e3:.1f} us (informational; {world.num_nodes} node(s))"
                )
        except (TimeoutError, dist.DistBackendError):
            raise
        except Exception as error:  # noqa: BLE001 (informational: a failure to time is printed, not counted)
            rank0_print(f"TIME not measured: {type(error).__name__}: {error}")

    found: list[tuple[str, Callable[..., None]]] = [("routing cases", each_case)]
    if not light:
        found += [("fp8 and chunked rows", variants), ("two dispatches in flight", in_flight)]
        found.append(("low-latency mode by topology", low_latency))
    if not emulate:
        found += [("PTX", ptx), ("timings", timings)]
    return found


def main() -> int:
    return launcher.drive("moe", __doc__ or "", Path(__file__), worker)


if __name__ == "__main__":
    sys.exit(main())
