"""The decode-time ops on GPUs: fresh random data, poisoned outputs, torch references; eager, CUDA graph and
torch.compile; bad input raising before launch.

    torchrun --nproc-per-node=N test/gpu/check_decode_ops.py [--only all_reduce,gemm_ar]

Exit code 0 iff every check passed on every rank. Each check logs PASS/FAIL per rank; a failing check does not stop
the others (a hang does: every kernel wait is bounded by the runtime's timeout through ``sync``).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops import all_reduce
from triton_dist.ops.all_reduce import AllReduceConfig, AllReduceError
from triton_dist.ops.all_reduce.config import fits, ll_supported
from triton_dist.ops.all_reduce.op import _run
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.flash_decode import FlashDecodeConfig, flash_decode
from triton_dist.ops.flash_decode.op import _run as _run_flash_decode
from triton_dist.ops.gemm_ar import GemmARConfig, gemm_ar
from triton_dist.ops.gemm_ar.config import default_config
from triton_dist.ops.gemm_ar.op import _run as _run_gemm_ar
from triton_dist.ops.matmul import num_sms
from triton_dist.testing import Checks, finish, main_guard, poison_, rank0_print, setup_distributed, sync

TOLERANCE = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3), torch.float32: (1e-5, 1e-5)}
"""(rtol, atol) of a W-term fp32 sum rounded once to the dtype, against torch's fp32 sum of the same inputs."""


def rank_data(owner: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rank ``owner``'s input for check ``tag``; every rank can regenerate it for the reference."""
    generator = torch.Generator(device="cuda").manual_seed(1_000_003 * owner + 7919 * tag + sum(shape))
    return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)


def reference_sum(tag: int, shape: tuple[int, ...], dtype: torch.dtype, world_size: int) -> torch.Tensor:
    total = torch.zeros(shape, dtype=torch.float32, device="cuda")
    for owner in range(world_size):
        total += rank_data(owner, tag, shape, dtype).float()
    return total.to(dtype)


def poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return poison_(torch.empty(shape, dtype=dtype, device="cuda"))


def same_on_all_ranks(tensor: torch.Tensor) -> bool:
    digest = hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    everyone: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, digest)
    return len(set(everyone)) == 1


def close(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str]:
    rtol, atol = TOLERANCE[ref.dtype]
    if torch.isnan(out).any():
        return False, f"{int(torch.isnan(out).sum())} NaN (poison) elements left"
    diff = (out.float() - ref.float()).abs()
    bound = atol + rtol * ref.float().abs()
    bad = int((diff > bound).sum())
    return bad == 0, f"max |diff| {float(diff.max()) if diff.numel() else 0:.3g}, {bad} elements out of tolerance"


# ---------------------------------------------------------------------------------------------------------------
# all_reduce


AR_CASES = [  # (numel, dtype, forced config or None)
    (1, torch.bfloat16, None),
    (7, torch.float32, None),
    (4096, torch.bfloat16, None),
    (4096, torch.bfloat16, AllReduceConfig("one_shot", 1, 4)),
    (4096, torch.bfloat16, AllReduceConfig("two_shot", 1, 4)),
    (65_539, torch.float16, AllReduceConfig("one_shot", 8, 4)),
    (65_539, torch.float16, AllReduceConfig("two_shot", 8, 8)),
    (1 << 19, torch.bfloat16, None),
    (1 << 20, torch.float32, AllReduceConfig("one_shot", 2, 8)),  # many flag rounds per program (parity)
    (3_000_017, torch.bfloat16, AllReduceConfig("two_shot", 4, 8)),  # rounds, ragged last chunk
    # One-shot push (remote stores into peers' inboxes): one element, ragged, rounds per program (parity), fp32.
    (1, torch.bfloat16, AllReduceConfig("one_shot_push", 1, 4)),
    (65_539, torch.float16, AllReduceConfig("one_shot_push", 8, 4)),
    (1 << 19, torch.bfloat16, AllReduceConfig("one_shot_push", 128, 8)),
    (1 << 20, torch.float32, AllReduceConfig("one_shot_push", 2, 8)),
    (1 << 23, torch.bfloat16, None),
    (1 << 24, torch.float32, None),
    # LL one-shot (epoch-tagged words, no flags): one element, odd sizes (a half-used last word), every dtype, one
    # word per thread (32 per program at 1 warp), 16 per thread, the largest message it takes.
    (1, torch.bfloat16, AllReduceConfig("one_shot_ll", 1, 1)),
    (7, torch.float32, AllReduceConfig("one_shot_ll", 4, 1)),
    (4096, torch.bfloat16, AllReduceConfig("one_shot_ll", 128, 1)),
    (4097, torch.float16, AllReduceConfig("one_shot_ll", 8, 4)),
    (65_539, torch.bfloat16, AllReduceConfig("one_shot_ll", 128, 4)),
    (33_333, torch.float32, AllReduceConfig("one_shot_ll", 64, 2)),
    (1 << 18, torch.bfloat16, AllReduceConfig("one_shot_ll", 128, 8)),  # ll_max_numel(2): 512 KiB, 2 per word
    (1 << 17, torch.float32, AllReduceConfig("one_shot_ll", 128, 2)),
]


def check_all_reduce_eager(checks: Checks, world: rt.World) -> None:
    for tag, (numel, dtype, config) in enumerate(AR_CASES):
        if config is not None and config.algo == "one_shot_ll" and not ll_supported():
            continue  # NVIDIA only (the bad-input check covers its error elsewhere)
        for on_heap in (False, True):
            shape = (numel,)
            mine = rank_data(world.rank, tag, shape, dtype)
            x = rt.empty(numel, dtype=dtype).copy_(mine) if on_heap else mine.clone()
            out = poisoned(shape, dtype)
            _run(x, out, "sum", config)
            sync("all_reduce")
            ok, detail = close(out, reference_sum(tag, shape, dtype, world.world_size))
            what = f"all_reduce {numel} x {dtype} {config or 'auto'} x {'on' if on_heap else 'off'} heap"
            checks.check(what, ok, detail)
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))
            checks.check(f"{what}: input untouched", torch.equal(x, mine))


def check_all_reduce_api(checks: Checks, world: rt.World) -> None:
    shape = (8, 1024)
    for tag, dtype in enumerate((torch.bfloat16, torch.float16, torch.float32), start=100):
        x = rank_data(world.rank, tag, shape, dtype)
        ref = reference_sum(tag, shape, dtype, world.world_size)
        ok, detail = close(all_reduce(x), ref)
        checks.check(f"all_reduce(x) {list(shape)} {dtype}", ok, detail)
        out = poisoned(shape, dtype)
        returned = all_reduce(x, out=out)
        ok, detail = close(out, ref)
        checks.check(f"all_reduce(x, out=out) {dtype}", ok and returned is out, detail)
        inplace = x.clone()
        all_reduce(inplace, out=inplace)
        ok, detail = close(inplace, ref)
        checks.check(f"all_reduce(x, out=x) in place {dtype}", ok, detail)
    # In place with every flag-based algorithm forced (each reads x after its first pass over it).
    for config in (
        AllReduceConfig("one_shot", 8, 4),
        AllReduceConfig("one_shot_push", 8, 4),
        AllReduceConfig("two_shot", 8, 4),
    ):
        inplace = rank_data(world.rank, 150, (65_539,), torch.bfloat16)
        _run(inplace, inplace, "sum", config)
        sync(f"all_reduce in place {config}")
        ok, detail = close(inplace, reference_sum(150, (65_539,), torch.bfloat16, world.world_size))
        checks.check(f"all_reduce(x, out=x) in place, {config}", ok, detail)
    # Many back-to-back calls of different sizes and algorithms: the epochs and double buffers must keep up.
    last: dict[int, torch.Tensor] = {}
    configs = [
        None,
        AllReduceConfig("one_shot", 4, 4),
        AllReduceConfig("two_shot", 4, 4),
        AllReduceConfig("one_shot_push", 4, 4),
    ]
    for i in range(60):
        numel = (1000, 33_000, 250_000)[i % 3]
        x = rank_data(world.rank, 200 + i % 3, (numel,), torch.bfloat16)
        out = poisoned((numel,), torch.bfloat16)
        _run(x, out, "sum", configs[(i // 3) % len(configs)])
        last[numel] = out
    sync("60 all_reduce calls")
    for j, (numel, out) in enumerate(sorted(last.items())):
        ok, detail = close(out, reference_sum(200 + j, (numel,), torch.bfloat16, world.world_size))
        checks.check(f"60 back-to-back calls: last {numel}-element result", ok, detail)
    if not ll_supported():
        return
    # LL one-shot, many calls without a sync: sizes whose grids share slot 0 but not the others (a slot's epoch
    # moves only when a call uses it), so words of old epochs of other sizes lie in the buffers; every result kept.
    ll_sizes = (1000, 33_000, 4097, 262_144)
    ll_configs = [AllReduceConfig("one_shot_ll", 128, 4), AllReduceConfig("one_shot_ll", 128, 1)]
    kept = []
    for i in range(101):
        numel = ll_sizes[i % len(ll_sizes)]
        config = ll_configs[(i // len(ll_sizes)) % 2]
        if not fits(config, numel, 2):  # 262144 bf16 elements need >= 2 warps per program
            config = ll_configs[0]
        x = rank_data(world.rank, 250 + i, (numel,), torch.bfloat16)
        out = poisoned((numel,), torch.bfloat16)
        _run(x, out, "sum", config)
        kept.append((i, numel, out))
    sync("101 LL all_reduce calls")
    bad = []
    for i, numel, out in kept:
        ok, detail = close(out, reference_sum(250 + i, (numel,), torch.bfloat16, world.world_size))
        if not ok:
            bad.append(f"call {i} ({numel}): {detail}")
    checks.check("101 back-to-back LL one-shot calls, 4 sizes x 2 configs: every result", not bad, "; ".join(bad[:3]))


# (config, numel of call A, numel of call B): one program (so one slot), bf16, A's and B's elements per flag round
# apart in the direction in which blocks of the call's round used to overlap (ops/all_reduce/kernels.py: the layout
# is fixed): one-shot 16384 then 2048 (its capacity, then a block), push 8192 then 1024, two-shot chunks of 2048 then
# 32768 (its capacity at 2 ranks).
ALTERNATING_ROUNDS = [
    (AllReduceConfig("one_shot", 1, 4), 16_384, 2048),
    (AllReduceConfig("one_shot_push", 1, 4), 8192, 1024),
    (AllReduceConfig("two_shot", 1, 4), 4096, 65_536),
]
ALTERNATING_CALLS = 200


def check_all_reduce_alternating_rounds(checks: Checks, world: rt.World) -> None:
    """``ALTERNATING_CALLS`` calls on one slot without a sync, alternating two sizes of different elements per
    round, every result kept and checked; odd ranks run matmuls on a side stream meanwhile, so their reads lag and
    a peer may start the next call while they read. With blocks of the call's round a peer a call ahead overwrote
    rows still being read (deterministically shown by test/python/test_emulation_all_reduce.py; here a stress:
    it may pass by luck against that bug, but must never fail with the fixed layout)."""
    load = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    for index, (config, first, second) in enumerate(ALTERNATING_ROUNDS):
        tags = [1000 + 1000 * index + i for i in range(ALTERNATING_CALLS)]
        sizes = [(first, second)[i % 2] for i in range(ALTERNATING_CALLS)]
        for numel in (first, second):  # the plans (a signature's first call is collective)
            warm = rank_data(world.rank, 999, (numel,), torch.bfloat16)
            _run(warm, poisoned((numel,), torch.bfloat16), "sum", config)
        xs = [rank_data(world.rank, tag, (numel,), torch.bfloat16) for tag, numel in zip(tags, sizes, strict=True)]
        outs = [poisoned((numel,), torch.bfloat16) for numel in sizes]
        sync(f"all_reduce alternating rounds {config.algo}: setup")
        if world.rank % 2:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(30):
                    load = (load @ load).clamp_(-1.0, 1.0)
        for x, out in zip(xs, outs, strict=True):
            _run(x, out, "sum", config)
        torch.cuda.current_stream().wait_stream(side)
        sync(f"all_reduce alternating rounds {config.algo}")
        bad = []
        for i, (tag, numel, out) in enumerate(zip(tags, sizes, outs, strict=True)):
            ok, detail = close(out, reference_sum(tag, (numel,), torch.bfloat16, world.world_size))
            if not ok:
                bad.append(f"call {i} ({numel}): {detail}")
        what = f"{ALTERNATING_CALLS} calls of {config} alternating {first} / {second} elements on one slot"
        checks.check(f"{what}: every result", not bad, "; ".join(bad[:3]))


def check_all_reduce_graph(checks: Checks, world: rt.World) -> None:
    check_all_reduce_graph_with(checks, world, None)
    if ll_supported():
        check_all_reduce_graph_with(checks, world, AllReduceConfig("one_shot_ll", 128, 4))


def check_all_reduce_graph_with(checks: Checks, world: rt.World, config: AllReduceConfig | None) -> None:
    """Two chained all-reduces per size captured in one graph, replayed with new inputs; ``config`` forces one
    (the sizes then stay within the LL one-shot's 262144 bf16 elements), None lets ``all_reduce`` choose."""
    sizes = [(4096,), (4, 8192), (1 << 20,)] if config is None else [(4096,), (4, 8192), (3, 33_333)]
    dtype = torch.bfloat16
    static_in = [torch.empty(s, dtype=dtype, device="cuda") for s in sizes]
    static_out = [torch.empty(s, dtype=dtype, device="cuda") for s in sizes]

    def call(x: torch.Tensor, out: torch.Tensor) -> None:
        if config is None:
            all_reduce(x, out=out)
        else:
            _run(x, out, "sum", config)

    for x, out in zip(static_in, static_out, strict=True):  # warm-up: workspace, compile, rank agreement
        x.normal_()
        call(x, out)
    sync("graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for x, out in zip(static_in, static_out, strict=True):
            call(x, out)
            call(out, out)  # twice: sum over ranks of (W * sum)
    for replay in range(5):
        tag = 300 + replay
        for x, out, shape in zip(static_in, static_out, sizes, strict=True):
            x.copy_(rank_data(world.rank, tag, shape, dtype))
            poison_(out)
        graph.replay()
        sync("graph replay")
        for out, shape in zip(static_out, sizes, strict=True):
            ref = sum(rank_data(o, tag, shape, dtype).float() for o in range(world.world_size))
            ref = (ref.to(dtype).float() * world.world_size).to(dtype)
            ok, detail = close(out, ref)
            what = f"CUDA graph replay {replay}: two chained all_reduces of {list(shape)} {config or 'auto'}"
            checks.check(what, ok, detail)
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))


def check_all_reduce_compile(checks: Checks, world: rt.World) -> None:
    def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return all_reduce(x @ w).relu() + 1.0

    compiled = torch.compile(layer, fullgraph=True)
    dtype = torch.bfloat16
    x = rank_data(world.rank, 400, (16, 256), dtype)
    w = rank_data(0, 401, (256, 512), dtype)  # the same weight everywhere
    partial = x @ w
    gathered = [torch.empty_like(partial) for _ in range(world.world_size)]
    dist.all_gather(gathered, partial)
    ref = (sum(p.float() for p in gathered).to(dtype).relu() + 1.0).to(dtype)
    ok, detail = close(compiled(x, w), ref)
    checks.check("torch.compile(fullgraph=True) of matmul -> all_reduce -> relu", ok, detail)
    cudagraphed = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # warm-up runs, then recorded, then replayed
        result = cudagraphed(x, w).clone()
    ok, detail = close(result, ref)
    checks.check("torch.compile(mode='reduce-overhead') replays", ok, detail)


def expect_error(checks: Checks, name: str, error: type[BaseException], call: Callable[[], object], text: str) -> None:
    checks.expect_error(f"bad input: {name}", error, call, text)


def expect_disagreement(checks: Checks, world: rt.World, name: str, call: Callable[[], object]) -> None:
    """Ranks that call differently must all raise (the first call of a shape is a collective check); with one rank
    there is nobody to disagree with, so the check is skipped, visibly."""
    if world.world_size < 2:
        rank0_print(f"SKIP bad input: {name}: needs 2 or more ranks")
        return
    expect_error(checks, name, OpInputError, call, "ranks called with different inputs")


def check_all_reduce_bad_input(checks: Checks, world: rt.World) -> None:
    x = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "int32 tensor", TypeError, lambda: all_reduce(x.int()), "bfloat16, float16 or float32")
    expect_error(checks, "op='max'", ValueError, lambda: all_reduce(x, "max"), "op must be one of")
    expect_error(
        checks, "out of another shape", ValueError, lambda: all_reduce(x, out=torch.empty_like(x)[:10]), "out must be"
    )
    expect_error(checks, "non-contiguous x", ValueError, lambda: all_reduce(x.view(32, 32).t()), "contiguous")
    expect_error(checks, "CPU tensor", AllReduceError, lambda: all_reduce(x.cpu()), "triton_dist device is cuda")
    expect_error(checks, "CPU int32 tensor", AllReduceError, lambda: all_reduce(x.int().cpu()), "is on cpu")
    # Ranks calling with different sizes: every rank raises (a collective check on a size's first call).
    mismatched = torch.randn(5000 + world.rank, device="cuda", dtype=torch.bfloat16)
    expect_disagreement(checks, world, "sizes differ across ranks", lambda: all_reduce(mismatched))
    # An LL one-shot config too small for the message (on AMD: any LL config): every rank raises before the
    # agreement (a local check).
    big = torch.randn(9000, device="cuda", dtype=torch.bfloat16)
    expect_error(
        checks,
        "one_shot_ll beyond its programs' one round" if ll_supported() else "one_shot_ll on AMD",
        ValueError,
        lambda: _run(big, torch.empty_like(big), "sum", AllReduceConfig("one_shot_ll", 4, 4)),
        "at most 8192 elements" if ll_supported() else "needs an NVIDIA GPU",
    )


# ---------------------------------------------------------------------------------------------------------------
# gemm_ar


GEMM_AR_CASES = [  # (M, N, K per rank, dtype, forced config or None)
    (1, 512, 256, torch.bfloat16, None),
    (8, 1000, 320, torch.bfloat16, None),  # ragged N
    (5, 64, 48, torch.float16, None),  # K smaller than a block
    (33, 640, 1024, torch.bfloat16, None),
    (128, 2048, 4096, torch.bfloat16, None),
    (256, 1024, 512, torch.float16, None),
    (256, 4096, 256, torch.bfloat16, GemmARConfig(16, 16, 64)),  # 4096 tiles on 256 programs: 16 rounds each
    (64, 768, 512, torch.bfloat16, GemmARConfig(64, 64, 128, 4, 3, exchange=False)),  # GEMM only (own rank)
    # The fused kernel where the default takes cuBLAS (M > CUBLAS_ABOVE_M), and the cuBLAS path forced at small M.
    (128, 2048, 4096, torch.bfloat16, GemmARConfig(128, 64, 64, 8, 5)),
    (8, 1000, 320, torch.bfloat16, GemmARConfig(16, 64, 128, gemm="cublas")),
    (64, 768, 512, torch.float16, GemmARConfig(64, 64, 128, exchange=False, gemm="cublas")),
    # Split K (opt-in): the Qwen3-32B o_proj shape it is meant for (80 tiles x 4 splits on <= SM-count programs),
    # ragged K (5 blocks -> 3 splits) and N, and the GEMM alone (this rank's splits only).
    (32, 5120, 4096, torch.bfloat16, GemmARConfig(32, 64, 128, 4, 4, split_k=4)),
    (32, 5120, 4096, torch.bfloat16, GemmARConfig(32, 64, 128, 4, 5, split_k=3)),  # not a power of two
    (5, 1000, 300, torch.float16, GemmARConfig(16, 64, 64, 4, 4, split_k=4)),
    (64, 768, 512, torch.bfloat16, GemmARConfig(64, 64, 128, 4, 3, exchange=False, split_k=2)),
]


def gemm_ar_operands(owner: int, tag: int, m: int, n: int, k: int, dtype: torch.dtype):
    a = rank_data(owner, tag, (m, k), dtype)
    b = (rank_data(owner, tag + 50_000, (k, n), torch.float32) / k**0.5).to(dtype)
    return a, b


def gemm_ar_reference(
    tag: int, m: int, n: int, k: int, dtype: torch.dtype, owners: list[int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the fp32 sum of the owners' a @ b rounded to dtype, the sum of the partials' magnitudes, the fp32
    accumulation-order error scale: sqrt(K) x 2^-24 x the sum of every product's magnitude, |a| @ |b|)."""
    total = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    magnitude = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    terms = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    for owner in owners:
        a, b = gemm_ar_operands(owner, tag, m, n, k, dtype)
        partial = a.float() @ b.float()
        total += partial
        magnitude += partial.abs()
        terms += a.float().abs() @ b.float().abs()
    return total.to(dtype), magnitude, terms * (k**0.5 * 2.0**-24)


def close_gemm(out: torch.Tensor, expected: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> tuple[bool, str]:
    """Each partial is rounded to the dtype before the fp32 sum, and the sum once more: allow half an ulp of each
    partial and of the result (x 1.5), plus 8x the typical fp32 accumulation-order error of the K products (which
    dominates where the products nearly cancel: on one H200, 14 of [128, 2048] outputs of K = 4096 near 1e-4 differ
    from torch's fp32 matmul by ~3e-6, identically for every tile configuration, with or without wgmma)."""
    ref, magnitude, order_error = expected
    if torch.isnan(out).any():
        return False, f"{int(torch.isnan(out).sum())} NaN (poison) elements left"
    diff = (out.float() - ref.float()).abs()
    half_ulp = 2.0**-8 if ref.dtype == torch.bfloat16 else 2.0**-11
    bound = 1.5 * half_ulp * (magnitude + ref.float().abs()) + 8 * order_error + 1e-6
    bad = int((diff > bound).sum())
    return bad == 0, f"max |diff| {float(diff.max()):.3g}, {bad} elements out of tolerance"


def check_gemm_ar_eager(checks: Checks, world: rt.World) -> None:
    for tag, (m, n, k, dtype, config) in enumerate(GEMM_AR_CASES, start=500):
        a, b = gemm_ar_operands(world.rank, tag, m, n, k, dtype)
        out = poisoned((m, n), dtype)
        _run_gemm_ar(a, b, out, config)
        sync("gemm_ar")
        owners = list(range(world.world_size)) if config is None or config.exchange else [world.rank]
        ok, detail = close_gemm(out, gemm_ar_reference(tag, m, n, k, dtype, owners))
        what = f"gemm_ar M={m} N={n} K/W={k} {dtype} {config or 'default'}"
        checks.check(what, ok, detail)
        if config is None or config.exchange:
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))
    a, b = gemm_ar_operands(world.rank, 600, 16, 384, 256, torch.bfloat16)
    ref = gemm_ar_reference(600, 16, 384, 256, torch.bfloat16, list(range(world.world_size)))
    ok, detail = close_gemm(gemm_ar(a, b), ref)
    checks.check("gemm_ar(a, b) through torch.ops", ok, detail)


def check_gemm_ar_graph_and_compile(checks: Checks, world: rt.World) -> None:
    # M = 8: the fused kernel; M = 128: the default's cuBLAS path (torch.matmul, then the all-reduce in place).
    for case, (m, n, k) in enumerate(((8, 1024, 512), (128, 1024, 512))):
        _check_gemm_ar_graph_and_compile(checks, world, m, n, k, 700 + 200 * case)


def _check_gemm_ar_graph_and_compile(checks: Checks, world: rt.World, m: int, n: int, k: int, tag0: int) -> None:
    dtype = torch.bfloat16
    path = default_config(m, n, k, sms=num_sms(torch.cuda.current_device())).gemm
    a_in = torch.empty((m, k), dtype=dtype, device="cuda")
    b_in = torch.empty((k, n), dtype=dtype, device="cuda")
    a_in.normal_()
    b_in.normal_()
    gemm_ar(a_in, b_in)  # warm-up: workspace, compile, rank agreement
    sync("gemm_ar graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        first = gemm_ar(a_in, b_in)
        second = gemm_ar(a_in, b_in)
    everyone = list(range(world.world_size))
    for replay in range(4):
        tag = tag0 + replay
        a, b = gemm_ar_operands(world.rank, tag, m, n, k, dtype)
        a_in.copy_(a)
        b_in.copy_(b)
        poison_(first)
        poison_(second)
        graph.replay()
        sync("gemm_ar graph replay")
        ref = gemm_ar_reference(tag, m, n, k, dtype, everyone)
        ok1, detail1 = close_gemm(first, ref)
        ok2, _ = close_gemm(second, ref)
        checks.check(
            f"gemm_ar M={m} ({path}) CUDA graph replay {replay} (two calls)",
            ok1 and ok2 and torch.equal(first, second),
            detail1,
        )

    compiled = torch.compile(lambda a, b: gemm_ar(a, b).float().square(), fullgraph=True)
    a, b = gemm_ar_operands(world.rank, tag0 + 100, m, n, k, dtype)
    want = gemm_ar_reference(tag0 + 100, m, n, k, dtype, everyone)[0].float().square()
    got = compiled(a, b)
    ok = bool(torch.allclose(got, want, rtol=5e-2, atol=5e-2))
    detail = f"max diff {float((got - want).abs().max()):.3g}"
    checks.check(f"gemm_ar M={m} ({path}) under torch.compile(fullgraph=True)", ok, detail)


def check_gemm_ar_bad_input(checks: Checks, world: rt.World) -> None:
    a = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "gemm_ar K mismatch", ValueError, lambda: gemm_ar(a, b[:32]), "must equal")
    expect_error(checks, "gemm_ar fp32", TypeError, lambda: gemm_ar(a.float(), b.float()), "bfloat16 or float16")
    expect_error(checks, "gemm_ar mixed dtypes", TypeError, lambda: gemm_ar(a, b.half()), "same dtype")
    expect_error(checks, "gemm_ar column-major b", ValueError, lambda: gemm_ar(a, b.t().contiguous().t()), "row-major")
    expect_error(checks, "gemm_ar 3-D a", ValueError, lambda: gemm_ar(a[None], b), "2-D")
    odd = torch.randn(4 + world.rank, 64, device="cuda", dtype=torch.bfloat16)
    expect_disagreement(checks, world, "gemm_ar M differs across ranks", lambda: gemm_ar(odd, b))


# ---------------------------------------------------------------------------------------------------------------
# flash_decode


FLASH_CASES = [  # (batch, q_heads, kv_heads, local_len, dtype, config or None, lengths pattern, scale, layout)
    (1, 64, 8, 4096, torch.bfloat16, None, "full", None, "bhsd"),
    (4, 32, 8, 1000, torch.bfloat16, None, "varied", None, "bhsd"),  # one sequence has no tokens on rank 1
    (8, 8, 8, 2048, torch.bfloat16, FlashDecodeConfig(splits=7), "varied", None, "bhsd"),  # one query head per KV head
    (3, 16, 1, 777, torch.float16, FlashDecodeConfig(splits=1), "varied", None, "bhsd"),  # 16 query heads per KV head
    (2, 64, 8, 65_536, torch.bfloat16, None, "varied", None, "bhsd"),
    (5, 24, 8, 3000, torch.bfloat16, None, "outside", 0.05, "bhsd"),  # group 3; lengths < 0 and > local_len clamped
    (2, 32, 8, 4096, torch.bfloat16, FlashDecodeConfig(block_n=32, num_stages=2), "varied", None, "bshd"),
    (64, 32, 8, 4096, torch.bfloat16, None, "varied", None, "bhsd"),  # batch 64
    (1, 64, 8, 524_288, torch.bfloat16, None, "varied", None, "bhsd"),  # 512k tokens per rank
    # Every combiner count (128 / N columns each); one combiner of a 16-head group takes 14 records in 4 steps.
    (3, 16, 1, 5000, torch.float16, FlashDecodeConfig(splits=7, combiners=1), "varied", None, "bhsd"),
    (2, 64, 8, 16_384, torch.bfloat16, FlashDecodeConfig(combiners=2), "varied", None, "bhsd"),
    (1, 64, 8, 16_384, torch.bfloat16, FlashDecodeConfig(combiners=8), "varied", None, "bhsd"),
]
"""Layouts: "bhsd" a contiguous [B, H, S, D] cache; "bshd" a [B, S, H, D] cache viewed as [B, H, S, D]."""


def flash_inputs(
    tag: int,
    batch: int,
    q_heads: int,
    kv_heads: int,
    local_len: int,
    dtype: torch.dtype,
    rank: int,
    layout: str = "bhsd",
):
    q = rank_data(0, tag, (batch, q_heads, 128), dtype)  # the same query on every rank
    shape = (batch, kv_heads, local_len, 128) if layout == "bhsd" else (batch, local_len, kv_heads, 128)
    k = rank_data(rank, tag + 1, shape, dtype)
    v = rank_data(rank, tag + 2, shape, dtype)
    if layout == "bshd":
        k, v = k.transpose(1, 2), v.transpose(1, 2)
    return q, k, v


def flash_lengths(pattern: str, batch: int, local_len: int, rank: int, shift: int = 0) -> torch.Tensor:
    """Valid tokens per sequence on ``rank``: "full"; "varied" (differs per sequence, rank and ``shift``; sequence 1
    has none on rank 1); "outside" (varied, then some below 0 and above local_len: the kernel clamps them)."""
    if pattern == "full":
        values = [local_len] * batch
    else:
        values = [(local_len * (b + 1) // batch + 37 * rank * (b + 1) + shift) % (local_len + 1) for b in range(batch)]
        if batch > 1 and rank == 1:
            values[1] = 0
        if pattern == "outside":
            values[0] = -5 - rank
            values[-1] = local_len + 100 * (rank + 1)
    return torch.tensor(values, dtype=torch.int32, device="cuda")


def close_flash(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str]:
    """Attention outputs are weighted means of V, often much smaller than 1: tolerances scale with the output
    (2% of each element plus 1% of the largest; bf16 P @ V and output rounding stay well inside: the CPU
    emulation of the kernel's code measured at most 0.75% of the largest)."""
    if torch.isnan(out).any():
        return False, f"{int(torch.isnan(out).sum())} NaN (poison) elements left"
    diff = (out.float() - ref.float()).abs()
    bound = 2e-2 * ref.float().abs() + 1e-2 * float(ref.float().abs().max()) + 1e-6
    bad = int((diff > bound).sum())
    return (
        bad == 0,
        f"max |diff| {float(diff.max()):.3g} (max |ref| {float(ref.abs().max()):.3g}), {bad} out of tolerance",
    )


def flash_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """SDPA (fp32) over the whole cache: every rank's valid tokens of each sequence (lengths clamped to
    [0, local_len], as the kernel does), gathered; one KV head at a time, so 512k tokens per rank fit."""
    world_size = dist.get_world_size()
    gathered = {}
    for name, t in (("k", k), ("v", v), ("lengths", lengths)):
        gathered[name] = [torch.empty_like(t, memory_format=torch.contiguous_format) for _ in range(world_size)]
        dist.all_gather(gathered[name], t.contiguous())
    local_len = k.shape[2]
    spans = [[max(0, min(int(n), local_len)) for n in gathered["lengths"][r].tolist()] for r in range(world_size)]
    batch, q_heads, dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    out = torch.zeros(batch, q_heads, dim, device="cuda")
    for b in range(batch):
        if sum(spans[r][b] for r in range(world_size)) == 0:
            continue  # no tokens anywhere: zeros
        for h in range(kv_heads):
            keys = torch.cat([gathered["k"][r][b, h, : spans[r][b]] for r in range(world_size)]).float()
            values = torch.cat([gathered["v"][r][b, h, : spans[r][b]] for r in range(world_size)]).float()
            queries = q[b, h * group : (h + 1) * group].float()
            attn = torch.nn.functional.scaled_dot_product_attention(
                queries[None, None], keys[None, None], values[None, None], scale=scale
            )
            out[b, h * group : (h + 1) * group] = attn[0, 0]
    return out.to(q.dtype)


def check_flash_decode_eager(checks: Checks, world: rt.World) -> None:
    for tag, case in enumerate(FLASH_CASES, start=900):
        batch, q_heads, kv_heads, local_len, dtype, config, pattern, scale, layout = case
        q, k, v = flash_inputs(tag * 10, batch, q_heads, kv_heads, local_len, dtype, world.rank, layout)
        lengths = flash_lengths(pattern, batch, local_len, world.rank)
        out = poisoned((batch, q_heads, 128), dtype)
        _run_flash_decode(q, k, v, lengths, out, scale, config)
        sync("flash_decode")
        ok, detail = close_flash(out, flash_reference(q, k, v, lengths, scale))
        what = f"flash_decode B={batch} Hq={q_heads} Hkv={kv_heads} local={local_len} {dtype} {config} {pattern}"
        what += f" scale={scale} {layout}"
        checks.check(what, ok, detail)
        checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))
        del q, k, v
        torch.cuda.empty_cache()
    q, k, v = flash_inputs(990, 2, 8, 2, 64, torch.bfloat16, world.rank)
    nothing = torch.zeros(2, dtype=torch.int32, device="cuda")
    out = flash_decode(q, k, v, nothing)
    checks.check("flash_decode with no tokens anywhere gives zeros", bool((out == 0).all()))
    again = flash_decode(q, k, v, flash_lengths("varied", 2, 64, world.rank))  # the same shape, the other parity
    sync("flash_decode again")
    ok, detail = close_flash(again, flash_reference(q, k, v, flash_lengths("varied", 2, 64, world.rank)))
    checks.check("flash_decode: the next call of a shape (other epoch parity)", ok, detail)


def check_flash_decode_graph_and_compile(checks: Checks, world: rt.World) -> None:
    batch, q_heads, kv_heads, local_len, dtype = 4, 32, 8, 2048, torch.bfloat16
    q_in, k_in, v_in = (torch.zeros_like(t) for t in flash_inputs(1000, batch, q_heads, kv_heads, local_len, dtype, 0))
    len_in = flash_lengths("varied", batch, local_len, world.rank)
    flash_decode(q_in, k_in, v_in, len_in)  # warm-up: workspace, compile, rank agreement
    sync("flash_decode graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        first = flash_decode(q_in, k_in, v_in, len_in)
        second = flash_decode(q_in, k_in, v_in, len_in)
    for replay in range(3):
        q, k, v = flash_inputs(1010 + 10 * replay, batch, q_heads, kv_heads, local_len, dtype, world.rank)
        for dst, src in ((q_in, q), (k_in, k), (v_in, v)):
            dst.copy_(src)
        len_in.copy_(flash_lengths("varied", batch, local_len, world.rank, shift=301 * replay))  # read at replay
        poison_(first)
        poison_(second)
        graph.replay()
        sync("flash_decode graph replay")
        ok, detail = close_flash(first, flash_reference(q, k, v, len_in))
        same = torch.equal(first, second)
        checks.check(f"flash_decode CUDA graph replay {replay} (two calls)", ok and same, detail)
        checks.check(f"flash_decode CUDA graph replay {replay}: bit-identical on every rank", same_on_all_ranks(first))
    compiled = torch.compile(lambda q, k, v, n: flash_decode(q, k, v, n, scale=0.07) * 2, fullgraph=True)
    q, k, v = flash_inputs(1100, batch, q_heads, kv_heads, local_len, dtype, world.rank)
    want = (flash_reference(q, k, v, len_in, 0.07).float() * 2).to(dtype)
    ok, detail = close_flash(compiled(q, k, v, len_in), want)
    checks.check("flash_decode under torch.compile(fullgraph=True)", ok, detail)


def check_flash_decode_bad_input(checks: Checks, world: rt.World) -> None:
    q, k, v = flash_inputs(1200, 2, 8, 2, 64, torch.bfloat16, world.rank)
    n = torch.full((2,), 64, dtype=torch.int32, device="cuda")
    expect_error(
        checks,
        "head dim 64",
        ValueError,
        lambda: flash_decode(q[..., :64], k[..., :64], v[..., :64], n),
        "head_dim 128",
    )
    expect_error(
        checks, "q heads not a multiple", ValueError, lambda: flash_decode(q[:, :7], k, v, n), "multiple of kv_heads"
    )
    expect_error(checks, "int64 lengths", ValueError, lambda: flash_decode(q, k, v, n.long()), "int32")
    strided = torch.full((2, 2), 64, dtype=torch.int32, device="cuda")[:, 0]
    expect_error(checks, "strided lengths", ValueError, lambda: flash_decode(q, k, v, strided), "contiguous")
    expect_error(checks, "k and v differ", ValueError, lambda: flash_decode(q, k, v[:, :, :32], n), "same shape")
    expect_error(checks, "fp32", TypeError, lambda: flash_decode(q.float(), k.float(), v.float(), n), "bfloat16")
    expect_error(checks, "batch mismatch", ValueError, lambda: flash_decode(q[:1], k, v, n[:1]), "batch")
    expect_error(checks, "NaN scale", ValueError, lambda: flash_decode(q, k, v, n, scale=float("nan")), "finite")
    expect_error(
        checks, "CPU tensors", ValueError, lambda: flash_decode(q.cpu(), k.cpu(), v.cpu(), n.cpu()), "device is cuda"
    )
    # Differences between ranks: every rank raises (the first call of a shape is a collective check). Each uses a
    # shape no earlier call used, on every rank: a rank repeating an agreed shape would skip the check and launch.
    odd_k = torch.zeros(2, 2, 96 + world.rank, 128, dtype=torch.bfloat16, device="cuda")
    expect_disagreement(checks, world, "cache shapes differ across ranks", lambda: flash_decode(q, odd_k, odd_k, n))
    k80 = torch.zeros(2, 2, 80, 128, dtype=torch.bfloat16, device="cuda")
    expect_disagreement(
        checks, world, "scales differ across ranks", lambda: flash_decode(q, k80, k80, n, scale=0.1 * (world.rank + 1))
    )
    huge_q = torch.zeros(64, 512, 128, dtype=torch.bfloat16, device="cuda")
    huge_k = torch.zeros(64, 32, 256, 128, dtype=torch.bfloat16, device="cuda")
    lengths64 = torch.zeros(64, dtype=torch.int32, device="cuda")
    expect_error(
        checks,
        "more records than the workspace holds",
        ValueError,
        lambda: _run_flash_decode(
            huge_q, huge_k, huge_k, lengths64, torch.empty_like(huge_q), None, FlashDecodeConfig(splits=4)
        ),
        "workspace",
    )


# ---------------------------------------------------------------------------------------------------------------


GROUPS: dict[str, list[tuple[str, Callable[[Checks, rt.World], None]]]] = {
    "all_reduce": [
        ("all_reduce eager", check_all_reduce_eager),
        ("all_reduce API", check_all_reduce_api),
        ("all_reduce alternating rounds on one slot", check_all_reduce_alternating_rounds),
        ("all_reduce CUDA graph", check_all_reduce_graph),
        ("all_reduce torch.compile", check_all_reduce_compile),
        ("all_reduce bad input", check_all_reduce_bad_input),
    ],
    "gemm_ar": [
        ("gemm_ar eager", check_gemm_ar_eager),
        ("gemm_ar CUDA graph + torch.compile", check_gemm_ar_graph_and_compile),
        ("gemm_ar bad input", check_gemm_ar_bad_input),
    ],
    "flash_decode": [
        ("flash_decode eager", check_flash_decode_eager),
        ("flash_decode CUDA graph + torch.compile", check_flash_decode_graph_and_compile),
        ("flash_decode bad input", check_flash_decode_bad_input),
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: " + ", ".join(GROUPS))
    args = parser.parse_args()
    world = setup_distributed(heap_size="1G")
    checks = Checks()
    for group in args.only.split(","):
        checks.run_each(GROUPS[group], world)
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
