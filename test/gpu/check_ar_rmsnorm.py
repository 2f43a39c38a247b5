"""The fused all-reduce + residual add + RMSNorm on GPUs: every algorithm against torch, CUDA graphs, the e4m3
variant, gemm_ar's norm epilogue, bad input.

    torchrun --nproc-per-node=N test/gpu/check_ar_rmsnorm.py [--only eager,fp8,graph,ll,ll_reader,ll_spin,...]

Each case draws fresh random inputs (every rank regenerates every rank's for the reference), poisons the outputs
(NaN) and compares with torch in fp32: ``h = residual + sum over ranks of x`` in rank order, ``new_residual`` = h
rounded to the dtype, ``normed = new_residual * rsqrt(mean(new_residual^2) + eps) * weight``. bf16 and fp32, M from
1 to 8192, hidden 4096, 8192 and two sizes that are not powers of two (5120, 1000), the chosen algorithm and each one
forced; outputs must be bit-identical on every rank. CUDA graphs: chained calls captured once and replayed with new
inputs (poisoned outputs each replay). ``ll``: the low-latency one-shot forced (M 1 to 64, fp8, graphed replays);
``ll_reader``: the same with its single-reader option (``ll_single_reader``), and tensors off alignment;
``ll_atomic``: the same with its slices reducing the norm by atomics (``ll_reduce="atomic"``); ``ll_spin``: the
same with every slice waiting for the row's others and norming itself (``ll_reduce="spin"``); ``ll_spin_words``:
the same with the partial sums of squares exchanged as epoch-tagged words (``ll_reduce="spin_words"``).
Exit code 0 iff every check passed on every rank.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops import all_reduce_residual_rmsnorm, all_reduce_residual_rmsnorm_fp8, gemm_ar
from triton_dist.ops.all_reduce.config import ll_supported
from triton_dist.ops.ar_rmsnorm import ArRmsNormConfig, ArRmsNormError
from triton_dist.ops.ar_rmsnorm.op import _check, _launch, _run, _run_fp8
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.gemm_ar import GemmArError
from triton_dist.testing import Checks, finish, main_guard, poison_, rank0_print, setup_distributed, sync

EPS = 1e-5
TOLERANCE = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (4e-3, 4e-3), torch.float32: (2e-5, 2e-5)}
"""(rtol, atol) against torch's fp32 reference: the output's rounding to the dtype (bf16, fp16), or the order of
fp32 sums and the GPU's rsqrt (fp32)."""
ROWS = (1, 2, 3, 8, 16, 31, 64, 128, 129, 256, 1024, 4096, 8192)
"""Every M of hidden 8192 (the benchmark's); the other hidden sizes take ``FEWER_ROWS`` (each new rows-per-round
value is another compile)."""
FEWER_ROWS = (1, 3, 64, 129, 1024, 8192)
HIDDENS = (8192, 4096, 5120, 1000)
DTYPES = (torch.bfloat16, torch.float32)


def rank_data(owner: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rank ``owner``'s tensor ``tag``; every rank can regenerate it for the reference."""
    generator = torch.Generator(device="cuda").manual_seed(1_000_003 * owner + 7919 * tag + 31 * sum(shape))
    return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)


def inputs(
    rank: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(this rank's x, the residual, the weight); residual and weight are the same on every rank."""
    weight = (rank_data(0, tag + 2, (shape[-1],), torch.float32).abs() + 0.5).to(dtype)
    return rank_data(rank, tag, shape, dtype), rank_data(0, tag + 1, shape, dtype), weight


def norm_of(h: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's fp32 RMSNorm of ``h`` rounded to ``dtype`` (what the op norms: the new residual it returns)."""
    rounded = h.to(dtype).float()
    return rounded * torch.rsqrt(rounded.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()


def reference(
    tag: int, shape: tuple[int, ...], dtype: torch.dtype, world_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed fp32, new_residual fp32): the ranks' x summed in rank order in fp32, the residual added, RMSNorm."""
    total = torch.zeros(shape, dtype=torch.float32, device="cuda")
    for owner in range(world_size):
        total += inputs(owner, tag, shape, dtype)[0].float()
    _, residual, weight = inputs(0, tag, shape, dtype)
    h = total + residual.float()
    return norm_of(h, weight, dtype), h


def close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``out`` (of ``dtype``) matches the fp32 ``ref`` (poison left over fails)."""
    if out.dtype != dtype or out.shape != ref.shape:
        return False, f"got {out.dtype} {list(out.shape)}, want {dtype} {list(ref.shape)}"
    rtol, atol = TOLERANCE[dtype]
    got = out.float()
    if torch.isnan(got).any():
        return False, f"{int(torch.isnan(got).sum())} NaN (poison) elements left"
    diff = (got - ref).abs()
    bad = int((diff > atol + rtol * ref.abs()).sum())
    return bad == 0, f"max |diff| {float(diff.max()) if diff.numel() else 0:.3g}, {bad} elements out of tolerance"


def close_fp8(quantized: torch.Tensor, scale: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str]:
    """The e4m3 rows against torch's fp32 normed rows: scales ``max|row| / 448`` (rtol 1e-5, at least 1/(448*512)),
    every element within one e4m3 step of ``ref / scale`` (2^(e - 3) in the binade [2^e, 2^(e + 1)), 2^-9 below
    2^-6)."""
    if quantized.dtype != torch.float8_e4m3fn or scale.dtype != torch.float32:
        return False, f"dtypes {quantized.dtype}, {scale.dtype}"
    want_scale = (ref.abs().amax(-1, keepdim=True) / 448.0).clamp(min=1.0 / (448.0 * 512.0))
    if scale.shape != want_scale.shape or quantized.shape != ref.shape:
        return False, f"shapes {list(quantized.shape)}, {list(scale.shape)}"
    got = quantized.float()
    if torch.isnan(got).any() or torch.isnan(scale).any():
        return False, "NaN (poison) left"
    scale_error = float(((scale - want_scale).abs() / want_scale).max()) if scale.numel() else 0.0
    if scale_error > 1e-5:
        return False, f"scales: max relative error {scale_error:.3g}"
    exact = ref / scale
    step = torch.exp2(torch.floor(torch.log2(exact.abs().clamp(min=2.0**-6))) - 3)
    bad = int(((got - exact).abs() > step).sum())
    return bad == 0, f"scales within {scale_error:.2g}; {bad} elements off by more than one e4m3 step"


def fingerprint(tensor: torch.Tensor) -> torch.Tensor:
    """An int64 digest of the tensor's bytes (position-weighted, wrapping: the same in any summation order),
    computed on the GPU."""
    raw = tensor.detach().contiguous().view(-1).view(torch.uint8)
    data = (raw.view(torch.int32) if raw.numel() % 4 == 0 else raw).to(torch.int64)
    weights = torch.arange(data.numel(), device=data.device, dtype=torch.int64) % 65_521 + 1
    return (data * weights).sum().reshape(1)


def same_on_all_ranks(*tensors: torch.Tensor) -> bool:
    """Whether every rank holds the same bytes (by ``fingerprint``) in each of ``tensors``."""
    mine = torch.cat([fingerprint(t) for t in tensors])
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return all(torch.equal(everyone[0], other) for other in everyone[1:])


def poisoned_outputs(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return poison_(torch.empty(shape, dtype=dtype, device="cuda")), poison_(
        torch.empty(shape, dtype=dtype, device="cuda")
    )


# ---------------------------------------------------------------------------------------------------------------


def eager_case(
    checks: Checks, world: rt.World, tag: int, m: int, hidden: int, dtype: torch.dtype, config: ArRmsNormConfig | None
) -> None:
    """One eager call into poisoned outputs against torch: the values, bit-identical on every rank, the inputs
    untouched."""
    shape = (m, hidden)
    x, residual, weight = inputs(world.rank, tag, shape, dtype)
    x_before, residual_before = x.clone(), residual.clone()
    normed, new_residual = poisoned_outputs(shape, dtype)
    _check(x, residual, weight, EPS)
    _launch(x, residual, weight, EPS, normed, new_residual, None, config)
    sync("all_reduce_residual_rmsnorm")
    want_normed, want_residual = reference(tag, shape, dtype, world.world_size)
    what = f"M={m} hidden={hidden} {str(dtype).removeprefix('torch.')} {config or 'chosen'}"
    ok_n, detail_n = close(normed, want_normed, dtype)
    ok_r, detail_r = close(new_residual, want_residual, dtype)
    checks.check(f"{what}: normed, new_residual", ok_n and ok_r, f"normed {detail_n}; new_residual {detail_r}")
    identical = same_on_all_ranks(normed, new_residual)
    untouched = torch.equal(x, x_before) and torch.equal(residual, residual_before)
    checks.check(f"{what}: bit-identical on every rank, inputs untouched", identical and untouched)


def check_eager(checks: Checks, world: rt.World) -> None:
    """Every (M, hidden, dtype) with the chosen algorithm; each algorithm forced at a few sizes (the one-shot at
    8192 rows takes 32 rows per program, the two-shot at one row leaves all but one rank without rows)."""
    cases: list[tuple[int, int, torch.dtype, ArRmsNormConfig | None]] = [
        (m, hidden, dtype, None)
        for dtype in DTYPES
        for hidden in HIDDENS
        for m in (ROWS if hidden == 8192 else FEWER_ROWS)
    ]
    for m in (1, 3, 128, 8192):
        for algo in ("one_shot", "two_shot"):
            cases.append((m, 8192, torch.bfloat16, ArRmsNormConfig(algo, 256 if algo == "one_shot" else 128, 8)))
    cases.append((129, 5120, torch.float32, ArRmsNormConfig("two_shot", 7, 4)))  # rounds per program, ragged chunk
    for tag, (m, hidden, dtype, config) in enumerate(cases, start=10):
        eager_case(checks, world, tag * 10, m, hidden, dtype, config)
    # The public function (fresh outputs) on a 3-D input and a one-row input.
    for tag, shape in enumerate(((2, 3, 8192), (1, 4096)), start=4000):
        tag *= 10
        x, residual, weight = inputs(world.rank, tag, shape, torch.bfloat16)
        normed, new_residual = all_reduce_residual_rmsnorm(x, residual, weight, EPS)
        sync("all_reduce_residual_rmsnorm")
        want_normed, want_residual = reference(tag, shape, torch.bfloat16, world.world_size)
        ok_n, detail_n = close(normed, want_normed, torch.bfloat16)
        ok_r, detail_r = close(new_residual, want_residual, torch.bfloat16)
        checks.check(f"all_reduce_residual_rmsnorm(x) {list(shape)}", ok_n and ok_r, f"{detail_n}; {detail_r}")


def check_fp8(checks: Checks, world: rt.World) -> None:
    """The e4m3 output: chosen and forced algorithms, bf16 and fp32 inputs, a 3-D input, a row of zeros."""
    cases: list[tuple[tuple[int, ...], torch.dtype, ArRmsNormConfig | None]] = [
        ((m, hidden), dtype, None) for dtype in DTYPES for hidden in (8192, 5120) for m in (1, 7, 128, 1024, 8192)
    ]
    cases += [((4, 2, 4096), torch.bfloat16, None)]
    cases += [
        ((m, 8192), torch.bfloat16, ArRmsNormConfig(a, 64, 8)) for m in (3, 200) for a in ("one_shot", "two_shot")
    ]
    for tag, (shape, dtype, config) in enumerate(cases, start=5000):
        fp8_case(checks, world, tag * 10, shape, dtype, config)


def fp8_case(
    checks: Checks,
    world: rt.World,
    tag: int,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    config: ArRmsNormConfig | None,
) -> None:
    """One e4m3 call (the public function for the chosen config at every other tag, else into poisoned outputs)
    against torch, the second token all zeros; bit-identical on every rank."""
    x, residual, weight = inputs(world.rank, tag, shape, dtype)
    if shape[0] > 1:  # the second token all zeros: the smallest scale, zeros out
        x[1] = 0
        residual[1] = 0
    if config is None and tag % 20 == 0:  # the public function (fresh outputs)
        quantized, scale, new_residual = all_reduce_residual_rmsnorm_fp8(x, residual, weight, EPS)
    else:
        quantized = torch.empty(shape, dtype=torch.float8_e4m3fn, device="cuda")
        quantized.view(torch.uint8).fill_(0x7F)  # e4m3 NaN
        scale = poison_(torch.empty((*shape[:-1], 1), dtype=torch.float32, device="cuda"))
        new_residual = poison_(torch.empty(shape, dtype=dtype, device="cuda"))
        _check(x, residual, weight, EPS)
        _launch(x, residual, weight, EPS, quantized, new_residual, scale, config)
    sync("all_reduce_residual_rmsnorm_fp8")
    total = torch.zeros(shape, dtype=torch.float32, device="cuda")
    for owner in range(world.world_size):
        mine = inputs(owner, tag, shape, dtype)[0]
        if shape[0] > 1:
            mine[1] = 0
        total += mine.float()
    h = total + residual.float()
    ref = norm_of(h, weight, dtype)
    what = f"fp8 {list(shape)} {str(dtype).removeprefix('torch.')} {config or 'chosen'}"
    ok_q, detail_q = close_fp8(quantized, scale, ref)
    ok_r, detail_r = close(new_residual, h, dtype)
    checks.check(f"{what}: e4m3 rows, scales, new_residual", ok_q and ok_r, f"{detail_q}; new_residual {detail_r}")
    checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(quantized, scale, new_residual))


def _chain(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, config: ArRmsNormConfig | None = None
) -> tuple[torch.Tensor, ...]:
    """Three chained calls: the fused op, again on its outputs, and the fp8 variant on the first's outputs (the
    public functions; with ``config``, that config forced)."""
    if config is None:
        normed, new_residual = all_reduce_residual_rmsnorm(x, residual, weight, EPS)
        normed2, new_residual2 = all_reduce_residual_rmsnorm(normed, new_residual, weight, EPS)
        quantized, scale, new_residual3 = all_reduce_residual_rmsnorm_fp8(normed, new_residual, weight, EPS)
    else:
        normed, new_residual = _run(x, residual, weight, EPS, config)
        normed2, new_residual2 = _run(normed, new_residual, weight, EPS, config)
        quantized, scale, new_residual3 = _run_fp8(normed, new_residual, weight, EPS, config)
    return normed, new_residual, normed2, new_residual2, quantized, scale, new_residual3


GRAPH_SHAPES = ((1, 8192, torch.bfloat16), (8, 5120, torch.float32), (128, 8192, torch.bfloat16))
GRAPH_SHAPES += ((4096, 4096, torch.bfloat16),)


def check_graph(
    checks: Checks,
    world: rt.World,
    shapes: tuple[tuple[int, int, torch.dtype], ...] = GRAPH_SHAPES,
    config: ArRmsNormConfig | None = None,
) -> None:
    """Per shape, three chained calls captured in one CUDA graph (the second norms the first's normed output with
    the first's new residual, the third is the fp8 variant of the second), replayed with fresh inputs and poisoned
    outputs; every replay checked against torch. ``config``: forced (None: the chosen one)."""
    for case, (m, hidden, dtype) in enumerate(shapes):
        shape = (m, hidden)
        x_in, residual_in, weight_in = (torch.zeros_like(t) for t in inputs(0, 0, shape, dtype))
        weight_in.fill_(1.0)

        _chain(x_in, residual_in, weight_in, config)  # warm-up: the workspaces, compilation, the ranks' agreement
        sync("graph warm-up")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = _chain(x_in, residual_in, weight_in, config)
        for replay in range(4):
            tag = (9000 if config is None else 9500) + 100 * case + 10 * replay
            x, residual, weight = inputs(world.rank, tag, shape, dtype)
            x_in.copy_(x)
            residual_in.copy_(residual)
            weight_in.copy_(weight)
            for out in outputs:
                if out.dtype != torch.float8_e4m3fn:
                    poison_(out)
                else:
                    out.view(torch.uint8).fill_(0x7F)  # e4m3 NaN
            graph.replay()
            sync("graph replay")
            normed, new_residual, normed2, new_residual2, quantized, scale, new_residual3 = outputs
            want_normed, want_residual = reference(tag, shape, dtype, world.world_size)
            # The second call's reference: from the first call's outputs as they are (summed over the ranks).
            h2 = normed.float() * world.world_size + new_residual.float()
            want_normed2 = norm_of(h2, weight, dtype)
            results = [
                close(normed, want_normed, dtype),
                close(new_residual, want_residual, dtype),
                close(normed2, want_normed2, dtype),
                close(new_residual2, h2, dtype),
                close_fp8(quantized, scale, want_normed2),
                close(new_residual3, h2, dtype),
            ]
            described = f"{str(dtype).removeprefix('torch.')} {config or 'chosen'}"
            what = f"CUDA graph M={m} hidden={hidden} {described} replay {replay}"
            checks.check(f"{what}: three chained calls", all(ok for ok, _ in results), "; ".join(d for _, d in results))
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(*outputs))


def gemm_operands(
    owner: int, tag: int, m: int, n: int, k: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    a = rank_data(owner, tag, (m, k), dtype)
    b = (rank_data(owner, tag + 50_000, (k, n), torch.float32) / k**0.5).to(dtype)
    return a, b


def check_gemm_ar(checks: Checks, world: rt.World) -> None:
    """gemm_ar(a, b, residual=, norm_weight=) eagerly (the fused-kernel and the cuBLAS GEMMs) and in a CUDA graph;
    the reference sums each rank's product rounded to the dtype (what the op exchanges)."""
    cases = [(1, 8192, 4096), (8, 5120, 2560), (32, 4096, 7168), (128, 8192, 1024), (256, 1000, 512)]
    dtype = torch.bfloat16
    for tag, (m, n, k) in enumerate(cases, start=700):
        tag *= 10
        a, b = gemm_operands(world.rank, tag, m, n, k, dtype)
        _, residual, weight = inputs(0, tag + 5, (m, n), dtype)
        normed, new_residual = gemm_ar(a, b, residual=residual, norm_weight=weight, eps=EPS)
        sync("gemm_ar norm")
        total = torch.zeros((m, n), dtype=torch.float32, device="cuda")
        for owner in range(world.world_size):
            oa, ob = gemm_operands(owner, tag, m, n, k, dtype)
            total += (oa.float() @ ob.float()).to(dtype).float()
        h = total + residual.float()
        ref = norm_of(h, weight, dtype)
        # The GEMM's fp32 accumulation order differs from torch's: a product may round to the next bf16, inside
        # the bf16 tolerance of the normed and the residual outputs.
        ok_n, detail_n = close(normed, ref, dtype)
        ok_r, detail_r = close(new_residual, h, dtype)
        what = f"gemm_ar norm M={m} N={n} K/W={k}"
        checks.check(f"{what}: eager", ok_n and ok_r, f"normed {detail_n}; new_residual {detail_r}")
        checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(normed, new_residual))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = gemm_ar(a, b, residual=residual, norm_weight=weight, eps=EPS)
        for out in outputs:
            poison_(out)
        graph.replay()
        sync("gemm_ar norm graph replay")
        same = torch.equal(outputs[0], normed) and torch.equal(outputs[1], new_residual)
        checks.check(f"{what}: CUDA graph replay equals the eager call", same)


def check_compile(checks: Checks, world: rt.World) -> None:
    """Both custom ops inside torch.compile(fullgraph=True), between traced torch ops."""

    def layer(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
        normed, new_residual = all_reduce_residual_rmsnorm(x * 2.0, residual, weight, EPS)
        quantized, scale, _ = all_reduce_residual_rmsnorm_fp8(x * 2.0, residual, weight, EPS)
        return normed, new_residual, quantized, scale

    shape, dtype, tag = (16, 4096), torch.bfloat16, 8000
    x, residual, weight = inputs(world.rank, tag, shape, dtype)
    normed, new_residual, quantized, scale = torch.compile(layer, fullgraph=True)(x, residual, weight)
    total = torch.zeros(shape, dtype=torch.float32, device="cuda")
    for owner in range(world.world_size):
        total += (inputs(owner, tag, shape, dtype)[0] * 2.0).float()
    h = total + residual.float()
    ref = norm_of(h, weight, dtype)
    results = [close(normed, ref, dtype), close(new_residual, h, dtype), close_fp8(quantized, scale, ref)]
    ok = all(ok for ok, _ in results)
    checks.check("torch.compile(fullgraph=True): both custom ops", ok, "; ".join(d for _, d in results))


def check_bad_input(checks: Checks, world: rt.World) -> None:
    x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)

    def expect(name: str, error: type[BaseException], call: Callable[[], object], text: str) -> None:
        checks.expect_error(f"bad input: {name}", error, call, text)

    expect("weight of another size", ArRmsNormError, lambda: all_reduce_residual_rmsnorm(x, x, w[:100]), "weight")
    expect("fp32 residual", ArRmsNormError, lambda: all_reduce_residual_rmsnorm(x, x.float(), w), "residual")
    expect("CPU tensors", ArRmsNormError, lambda: all_reduce_residual_rmsnorm(x.cpu(), x.cpu(), w.cpu()), "cuda")
    big = torch.zeros(2, 40000, device="cuda", dtype=torch.bfloat16)
    expect("hidden past 32768", ArRmsNormError, lambda: all_reduce_residual_rmsnorm(big, big, big[0]), "hidden size")
    a = torch.randn(4, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    expect("gemm_ar norm_weight missing", GemmArError, lambda: gemm_ar(a, b, residual=x), "norm_weight")
    expect("gemm_ar residual shape", GemmArError, lambda: gemm_ar(a, b, residual=x[:2], norm_weight=w), "residual")
    if world.world_size < 2:
        rank0_print("SKIP bad input: ranks disagree: needs 2 or more ranks")
        return
    odd = torch.randn(5 + world.rank, 2048, device="cuda", dtype=torch.bfloat16)
    weight = torch.ones(2048, device="cuda", dtype=torch.bfloat16)
    expect(
        "shapes differ across ranks",
        OpInputError,
        lambda: all_reduce_residual_rmsnorm(odd, odd, weight),
        "ranks called with different inputs",
    )


LL_ROWS = (1, 2, 3, 8, 16, 31, 64)
"""The forced LL one-shot's M values (its use: decode)."""


def check_ll(checks: Checks, world: rt.World) -> None:
    """The LL one-shot ("one_shot_ll", forced: never chosen by default yet) against torch: M 1 to 64 at every hidden
    size and dtype (rows split over up to 16 programs at M <= 16, one program per row from M = 32), fewer programs
    than rows (several rows in a program's one round), splits forced past the default (16 slices at M = 16: 256
    programs) and none (``ll_slices=1``), 16 warps (8 slices), the e4m3 output (a row of zeros; one program of a
    split row writes its scale), and three chained calls in a CUDA graph replayed with fresh inputs (the epochs
    advance in the graph; the shapes use 16, 2 and 1 slices). NVIDIA only: on ROCm the config is refused, which
    is checked instead."""
    ll = ArRmsNormConfig("one_shot_ll", 256, 4)
    if not ll_supported():
        x = torch.randn(2, 1024, device="cuda", dtype=torch.bfloat16)
        checks.expect_error("LL on ROCm: refused", ArRmsNormError, lambda: _run(x, x, x[0], EPS, ll), "NVIDIA")
        return
    tag = 20_000
    for dtype in DTYPES:
        for hidden in HIDDENS:
            for m in LL_ROWS:
                tag += 10
                eager_case(checks, world, tag, m, hidden, dtype, ll)
    for m, hidden, config in (
        (64, 1000, ArRmsNormConfig("one_shot_ll", 8, 4)),
        (31, 4096, ArRmsNormConfig("one_shot_ll", 16, 8)),
        (16, 8192, ArRmsNormConfig("one_shot_ll", 256, 4, ll_slices=16)),
        (3, 8192, ArRmsNormConfig("one_shot_ll", 256, 4, ll_slices=1)),
        (1, 8192, ArRmsNormConfig("one_shot_ll", 256, 16)),
        (2, 5120, ArRmsNormConfig("one_shot_ll", 256, 8, ll_slices=4)),
    ):
        tag += 10
        eager_case(checks, world, tag, m, hidden, torch.bfloat16, config)
    for m in (1, 7, 64):
        tag += 10
        fp8_case(checks, world, tag, (m, 8192), torch.bfloat16, ll)
    fp8_case(checks, world, tag + 10, (5, 5120), torch.float32, ll)
    big = torch.zeros(257, 8192, device="cuda", dtype=torch.bfloat16)
    checks.expect_error(
        "LL past its rows (257 of hidden 8192)", ArRmsNormError, lambda: _run(big, big, big[0], EPS, ll), "at most 256"
    )
    shapes = ((1, 8192, torch.bfloat16), (16, 5120, torch.float32), (64, 8192, torch.bfloat16))
    check_graph(checks, world, shapes, ll)


def misaligned_case(checks: Checks, world: rt.World, tag: int, m: int, hidden: int, config: ArRmsNormConfig) -> None:
    """bf16 inputs and outputs 2 bytes past a 16-byte boundary (views into a buffer one element longer): the
    single reader's packed 4-byte pairs must not be used (they would be misaligned); right against torch."""
    shape = (m, hidden)
    dtype = torch.bfloat16

    def shifted(t: torch.Tensor) -> torch.Tensor:
        buffer = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
        view = buffer[1:].view(t.shape)
        view.copy_(t)
        return view

    x, residual, weight = (shifted(t) for t in inputs(world.rank, tag, shape, dtype))
    normed, new_residual = (shifted(poison_(torch.empty(shape, dtype=dtype, device="cuda"))) for _ in range(2))
    _check(x, residual, weight, EPS)
    _launch(x, residual, weight, EPS, normed, new_residual, None, config)
    sync("all_reduce_residual_rmsnorm misaligned")
    want_normed, want_residual = reference(tag, shape, dtype, world.world_size)
    ok_n, detail_n = close(normed, want_normed, dtype)
    ok_r, detail_r = close(new_residual, want_residual, dtype)
    what = f"misaligned (2 bytes) M={m} hidden={hidden} bf16 {config}"
    checks.check(f"{what}: normed, new_residual", ok_n and ok_r, f"normed {detail_n}; new_residual {detail_r}")


def check_ll_reader(checks: Checks, world: rt.World) -> None:
    """The LL one-shot with one reader per row (``ll_single_reader``, forced: an option) against torch: M 1 to 64
    at every hidden size and dtype (pushes split over up to 16 programs, the launch within 128; bf16 of an even
    hidden with aligned tensors takes the packed pairs), fewer programs than rows (several rows per reader), 16
    warps (8 slices), tensors 2 bytes off alignment (no packed pairs), the e4m3 output (a row of zeros), and three
    chained calls in a CUDA graph replayed with fresh inputs. NVIDIA only (ROCm: ``check_ll`` checks the refusal)."""
    if ll_supported():
        more = (16, 8192, ArRmsNormConfig("one_shot_ll", 256, 16, ll_single_reader=True))
        _ll_option_cases(checks, world, 40_000, {"ll_single_reader": True}, more)


def check_ll_atomic(checks: Checks, world: rt.World) -> None:
    """The LL one-shot with ``ll_reduce="atomic"`` (forced: an option) against torch, outputs bit-identical on every
    rank: M 1 to 64 at every hidden size and dtype (rows split over up to 16 programs, the launch within 128),
    fewer programs than rows (several rows a group, one arrival per program), 16 warps (8 slices), 16 slices at
    M = 16 (256 programs), unsplit (``ll_slices=1``: the program is its own last arriver), tensors 2 bytes off
    alignment (no packed pairs), the e4m3 output (a row of zeros; the last arriver writes the scale), and three
    chained calls in a CUDA graph replayed with fresh inputs (the arrival counters and partials reused without a
    host reset). NVIDIA only (ROCm: ``check_ll`` checks the refusal)."""
    if ll_supported():
        more = (3, 8192, ArRmsNormConfig("one_shot_ll", 256, 4, ll_slices=1, ll_reduce="atomic"))
        _ll_option_cases(checks, world, 60_000, {"ll_reduce": "atomic"}, more)


def check_ll_spin(checks: Checks, world: rt.World) -> None:
    """The LL one-shot with ``ll_reduce="spin"`` (forced: an option) against torch, outputs bit-identical on every
    rank: M 1 to 64 at every hidden size and dtype (rows split over up to 16 programs of 4 warps, the launch within
    128, every program of a row waiting for the others), fewer programs than rows (several rows a group: the slices
    reloaded after the wait), 16 warps, 16 slices asked for at M = 16 (8 given: the launch within 128), one warp a
    program at M = 1 (16 slices of 256 words: 8 words a thread), tensors 2 bytes off alignment (no packed pairs),
    the e4m3 output (run by "atomic"'s kernel), and three chained calls in a CUDA graph replayed with fresh inputs
    (the arrival counters and partials reused without a host reset). NVIDIA only (ROCm: ``check_ll`` checks the
    refusal)."""
    if ll_supported():
        more = (1, 8192, ArRmsNormConfig("one_shot_ll", 256, 1, ll_reduce="spin"))
        _ll_option_cases(checks, world, 80_000, {"ll_reduce": "spin"}, more)


def check_ll_spin_words(checks: Checks, world: rt.World) -> None:
    """``check_ll_spin``'s cases with ``ll_reduce="spin_words"`` (forced: an option): the row's programs exchange
    their partial sums of squares as epoch-tagged words, no counter; the words reused across calls and graph
    replays without a host reset. NVIDIA only (ROCm: ``check_ll`` checks the refusal)."""
    if ll_supported():
        more = (1, 8192, ArRmsNormConfig("one_shot_ll", 256, 1, ll_reduce="spin_words"))
        _ll_option_cases(checks, world, 90_000, {"ll_reduce": "spin_words"}, more)


def _ll_option_cases(
    checks: Checks, world: rt.World, tag: int, option: dict[str, Any], more: tuple[int, int, ArRmsNormConfig]
) -> None:
    """An LL one-shot option (``option``: its ``ArRmsNormConfig`` fields; forced, never the default) against torch:
    M 1 to 64 at every hidden size and dtype, fewer programs than rows, 16 warps (8 slices), 16 slices at M = 16,
    ``more`` (M, hidden and the configuration of one more case), tensors 2 bytes off alignment, the e4m3 output,
    and three chained calls in a CUDA graph replayed with fresh inputs."""
    default = ArRmsNormConfig("one_shot_ll", 256, 4, **option)
    for dtype in DTYPES:
        for hidden in HIDDENS:
            for m in LL_ROWS:
                tag += 10
                eager_case(checks, world, tag, m, hidden, dtype, default)
    for m, hidden, config in (
        (64, 1000, ArRmsNormConfig("one_shot_ll", 8, 4, **option)),
        (31, 4096, ArRmsNormConfig("one_shot_ll", 16, 8, **option)),
        (1, 8192, ArRmsNormConfig("one_shot_ll", 256, 16, **option)),
        (16, 8192, ArRmsNormConfig("one_shot_ll", 256, 4, ll_slices=16, **option)),
        more,
    ):
        tag += 10
        eager_case(checks, world, tag, m, hidden, torch.bfloat16, config)
    for m, hidden in ((1, 8192), (5, 1000)):
        tag += 10
        misaligned_case(checks, world, tag, m, hidden, default)
    for m in (1, 7, 64):
        tag += 10
        fp8_case(checks, world, tag, (m, 8192), torch.bfloat16, default)
    fp8_case(checks, world, tag + 10, (5, 5120), torch.float32, default)
    shapes = ((1, 8192, torch.bfloat16), (16, 5120, torch.float32), (64, 8192, torch.bfloat16))
    check_graph(checks, world, shapes, default)


GROUPS: dict[str, Callable[[Checks, rt.World], None]] = {
    "eager": check_eager,
    "fp8": check_fp8,
    "graph": check_graph,
    "ll": check_ll,
    "ll_reader": check_ll_reader,
    "ll_atomic": check_ll_atomic,
    "ll_spin": check_ll_spin,
    "ll_spin_words": check_ll_spin_words,
    "gemm_ar": check_gemm_ar,
    "compile": check_compile,
    "bad_input": check_bad_input,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: " + ", ".join(GROUPS))
    args = parser.parse_args()
    world = setup_distributed(heap_size="2G")
    checks = Checks()
    checks.run_each([(f"ar_rmsnorm {name}", GROUPS[name]) for name in args.only.split(",")], world)
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
