"""``triton_dist.ops.all_reduce_residual_rmsnorm``: the fused all-reduce + residual add + RMSNorm, its fp8 variant
(``all_reduce_residual_rmsnorm_fp8``) and ``gemm_ar``'s norm epilogue.

Under the CPU emulation (``TRITON_INTERPRET=1``, ``init(device="cpu")``, one process per rank on gloo, as
``test_emulation_ops.py``) at 2 and 3 ranks against a torch reference: the chosen config and each algorithm forced
(one-shot push, two-shot, whose chunks leave the last rank short of rows, and the LL one-shot "one_shot_ll"), bf16
and fp32, a hidden size that is not a power of two, 3-D input, a call without rows, every call twice (the second
relaunches the plan; the device-side epochs advance); the e4m3 output of every algorithm (per-token scales, every
element within one e4m3 step, a row of zeros); ``gemm_ar(a, b, residual=, norm_weight=)``; ranks that call with
different shapes, an LL call past its rows, and the CPU world without the interpreter, are refused. Without GPUs:
the kernel compiles for sm_90 and gfx942 with the flag protocol's release / acquire (and the e4m3 conversion on
sm_90), the LL kernels for sm_90 with all_reduce's LL words (fence, relaxed 8-byte stores and polled loads, no flag
round; the spin variants' wait on their siblings), their launch shapes, bad input raises ``ArRmsNormError`` /
``GemmArError`` naming the tensor, the algorithm is ``all_reduce``'s choice, and the custom ops trace with fake
tensors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from emulated_ranks import run_ranks

HEAP = "256M"
"""Each rank's CPU heap: the workspaces (256 / 128 slots of up to 16 KiB / 128 KiB of rows per rank) fit."""


def reference(
    xs: list[torch.Tensor], residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed, new_residual) by torch: the ranks' x summed in rank order in fp32, plus the residual, rounded to the
    dtype (new_residual), RMSNorm of that in fp32."""
    total = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:
        total += x.float()
    h = (total + residual.float()).to(xs[0].dtype)
    normed = h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return normed.to(xs[0].dtype), h


def reference_fp8(
    xs: list[torch.Tensor], residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the fp32 normed rows, their per-token scales [..., 1], new_residual) by torch, as the fp8 variant defines
    them: scale = max(max|row| / 448, 1 / (448 * 512))."""
    total = torch.zeros_like(xs[0], dtype=torch.float32)
    for x in xs:
        total += x.float()
    h = (total + residual.float()).to(xs[0].dtype)
    normed = h.float() * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    scale = (normed.abs().amax(-1, keepdim=True) / 448.0).clamp(min=1.0 / (448.0 * 512.0))
    return normed, scale, h


def close_fp8(
    quantized: torch.Tensor, scale: torch.Tensor, normed: torch.Tensor, want_scale: torch.Tensor, scale_rtol: float
) -> list[str]:
    """Problems of an e4m3 row set against torch's fp32 rows: the dtype and shapes, the scales (``scale_rtol``), and
    every element within one e4m3 step of ``normed / scale`` (a step: 2^(e - 3) in the binade [2^e, 2^(e + 1)),
    2^-9 below 2^-6: one step allows round to nearest and a tie flipped by the division's last bit)."""
    if quantized.dtype != torch.float8_e4m3fn or scale.dtype != torch.float32:
        return [f"dtypes {quantized.dtype}, {scale.dtype}: want float8_e4m3fn, float32"]
    if quantized.shape != normed.shape or scale.shape != want_scale.shape:
        return [
            f"shapes {list(quantized.shape)}, {list(scale.shape)}: want {list(normed.shape)}, {list(want_scale.shape)}"
        ]
    got = quantized.float()
    if torch.isnan(got).any() or torch.isnan(scale).any():
        return ["NaN elements"]
    if not torch.allclose(scale, want_scale, rtol=scale_rtol, atol=0):
        return [f"scales: max relative error {((scale - want_scale).abs() / want_scale).max().item():.3g}"]
    exact = normed / scale
    step = torch.exp2(torch.floor(torch.log2(exact.abs().clamp(min=2.0**-6))) - 3)
    bad = (got - exact).abs() > step
    if bad.any():
        return [f"{int(bad.sum())} elements off by more than one e4m3 step, e.g. {got[bad][0]} for {exact[bad][0]}"]
    return []


def _close(got: torch.Tensor, want: torch.Tensor) -> list[str]:
    if got.shape != want.shape or got.dtype != want.dtype:
        return [f"{got.dtype} {list(got.shape)} != {want.dtype} {list(want.shape)}"]
    if torch.isnan(got.float()).any():
        return [f"{int(torch.isnan(got.float()).sum())} NaN elements"]
    tol = 1e-4 if got.dtype == torch.float32 else 2e-2
    if not torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
        return [f"max abs error {(got.float() - want.float()).abs().max().item():.4g}"]
    return []


def _cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.ar_rmsnorm import ArRmsNormConfig, ArRmsNormError
    from triton_dist.ops.ar_rmsnorm.op import _run, _run_fp8

    LL = ArRmsNormConfig("one_shot_ll", 2, 1)  # noqa: N806 (a constant of the cases)
    LL_SPLIT = ArRmsNormConfig("one_shot_ll", 8, 1)  # noqa: N806 (the emulation's most LL programs)
    LL_READER = ArRmsNormConfig("one_shot_ll", 8, 1, ll_single_reader=True)  # noqa: N806 (one reader per row)
    LL_ATOMIC = ArRmsNormConfig("one_shot_ll", 8, 1, ll_reduce="atomic")  # noqa: N806 (slices, the last norms)
    LL_SPIN = ArRmsNormConfig("one_shot_ll", 8, 1, ll_reduce="spin")  # noqa: N806 (slices wait, each norms its own)
    LL_SPIN_WORDS = ArRmsNormConfig("one_shot_ll", 8, 1, ll_reduce="spin_words")  # noqa: N806 (partials as LL words)

    def run(shape: tuple[int, ...], dtype: torch.dtype, config: ArRmsNormConfig | None) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan
            xs = [torch.randn(shape, generator=gen).to(dtype) for _ in range(size)]
            residual = torch.randn(shape, generator=gen).to(dtype)
            weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype)
            if config is None:
                normed, new_residual = triton_dist.ops.all_reduce_residual_rmsnorm(xs[rank], residual, weight, 1e-5)
            else:
                normed, new_residual = _run(xs[rank], residual, weight, 1e-5, config)
            want_normed, want_residual = reference(xs, residual, weight, 1e-5)
            problems += [f"normed: {p}" for p in _close(normed, want_normed)]
            problems += [f"new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    def run_fp8(shape: tuple[int, ...], dtype: torch.dtype, config: ArRmsNormConfig | None) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan
            xs = [torch.randn(shape, generator=gen).to(dtype) for _ in range(size)]
            residual = torch.randn(shape, generator=gen).to(dtype)
            weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype)
            if len(shape) == 2 and shape[0] > 1:  # a row of zeros: the smallest scale, zeros out
                residual[1] = 0
                for x in xs:
                    x[1] = 0
            if config is None:
                call = triton_dist.ops.ar_rmsnorm.all_reduce_residual_rmsnorm_fp8
                quantized, scale, new_residual = call(xs[rank], residual, weight, 1e-5)
            else:
                quantized, scale, new_residual = _run_fp8(xs[rank], residual, weight, 1e-5, config)
            normed, want_scale, want_residual = reference_fp8(xs, residual, weight, 1e-5)
            # Triton's interpreter rounds fp32 to bf16 toward zero (GPUs: to nearest, as torch), so a bf16 new
            # residual, which the norm starts from, may be one ulp off torch's here: its scales within two ulps.
            scale_rtol = 1e-5 if dtype == torch.float32 else 2.0**-7
            problems += [f"normed_fp8: {p}" for p in close_fp8(quantized, scale, normed, want_scale, scale_rtol)]
            problems += [f"new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    def run_poisoned(shape: tuple[int, ...], dtype: torch.dtype, config: ArRmsNormConfig, fp8: bool) -> list[str]:
        """``config`` into outputs poisoned first (NaN; e4m3's NaN byte 0x7F), so an element no program writes (a
        slice of a row split over programs) fails; the e4m3 output with a row of zeros."""
        from triton_dist.ops.ar_rmsnorm.op import _check, _launch, scale_shape

        problems = []
        for _ in range(2):  # the second call relaunches the plan
            xs = [torch.randn(shape, generator=gen).to(dtype) for _ in range(size)]
            residual = torch.randn(shape, generator=gen).to(dtype)
            weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype)
            new_residual = torch.full(shape, float("nan"), dtype=dtype)
            _check(xs[rank], residual, weight, 1e-5)
            if fp8:
                if shape[0] > 1:  # a row of zeros: the smallest scale, zeros out
                    residual[1] = 0
                    for x in xs:
                        x[1] = 0
                quantized = torch.empty(shape, dtype=torch.float8_e4m3fn)
                quantized.view(torch.uint8).fill_(0x7F)
                scale = torch.full(scale_shape(xs[rank]), float("nan"))
                _launch(xs[rank], residual, weight, 1e-5, quantized, new_residual, scale, config)
                normed, want_scale, want_residual = reference_fp8(xs, residual, weight, 1e-5)
                scale_rtol = 1e-5 if dtype == torch.float32 else 2.0**-7  # as run_fp8
                problems += [f"normed_fp8: {p}" for p in close_fp8(quantized, scale, normed, want_scale, scale_rtol)]
            else:
                normed = torch.full(shape, float("nan"), dtype=dtype)
                _launch(xs[rank], residual, weight, 1e-5, normed, new_residual, None, config)
                want_normed, want_residual = reference(xs, residual, weight, 1e-5)
                problems += [f"normed: {p}" for p in _close(normed, want_normed)]
            problems += [f"new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    def same_bits_on_every_rank(shape: tuple[int, ...], config: ArRmsNormConfig) -> list[str]:
        """bf16 ``config`` with the same residual and weight on every rank: every rank's outputs, as bytes, are
        rank 0's (gathered over the world's gloo group), and close to torch's."""
        import torch.distributed as dist

        xs = [torch.randn(shape, generator=gen).to(torch.bfloat16) for _ in range(size)]
        residual = torch.randn(shape, generator=gen).to(torch.bfloat16)
        weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(torch.bfloat16)
        normed, new_residual = _run(xs[rank], residual, weight, 1e-5, config)
        want_normed, want_residual = reference(xs, residual, weight, 1e-5)
        problems = [f"normed: {p}" for p in _close(normed, want_normed)]
        problems += [f"new_residual: {p}" for p in _close(new_residual, want_residual)]
        mine = (normed.view(torch.int16).tolist(), new_residual.view(torch.int16).tolist())
        everyone: list[Any] = [None] * size
        dist.all_gather_object(everyone, mine)
        problems += [f"rank {r}'s outputs differ from rank 0's" for r in range(size) if everyone[r] != everyone[0]]
        return problems

    def same_bits_as_atomic(shape: tuple[int, ...], dtype: torch.dtype, spin: ArRmsNormConfig) -> list[str]:
        """``spin`` (``ll_reduce`` "spin" or "spin_words") and "atomic" on the same inputs (outputs poisoned first):
        the same bytes (the same partial sums of squares, summed in slice order, the same norm arithmetic), both
        close to torch's, and the same bytes as the default config's: its new residual (the same fp32 sum in rank
        order, rounded alike) and, for these inputs, its normed rows (the flag kernel sums the row's squares in
        another order, which can move rstd by an fp32 ulp; the bf16 rounding of the normed rows absorbs it here:
        should another draw flip an element, that is the reason, not a wrong slice)."""
        from triton_dist.ops.ar_rmsnorm.op import _check, _launch

        xs = [torch.randn(shape, generator=gen).to(dtype) for _ in range(size)]
        residual = torch.randn(shape, generator=gen).to(dtype)
        weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype)
        _check(xs[rank], residual, weight, 1e-5)
        outputs = {}
        for name, config in (("spin", spin), ("atomic", LL_ATOMIC), ("default", None)):
            normed, new_residual = (torch.full(shape, float("nan"), dtype=dtype) for _ in range(2))
            _launch(xs[rank], residual, weight, 1e-5, normed, new_residual, None, config)
            outputs[name] = (normed, new_residual)
        want_normed, want_residual = reference(xs, residual, weight, 1e-5)
        problems = []
        for name, (normed, new_residual) in outputs.items():
            problems += [f"{name} normed: {p}" for p in _close(normed, want_normed)]
            problems += [f"{name} new_residual: {p}" for p in _close(new_residual, want_residual)]
        bits = {
            name: [t.view(torch.int16 if dtype != torch.float32 else torch.int32) for t in pair]
            for name, pair in outputs.items()
        }
        if not all(torch.equal(a, b) for a, b in zip(bits["spin"], bits["atomic"], strict=True)):
            problems.append("spin's outputs differ from atomic's in their bits")
        for index, what in enumerate(("normed", "new residual")):
            if not torch.equal(bits["spin"][index], bits["default"][index]):
                problems.append(f"spin's {what} differs from the default config's in its bits")
        return problems

    def missing_arrival() -> list[str]:
        """``ll_reduce="spin"``, M = 1 in 4 slices, with the group's arrival counter one past a multiple of 4 on
        every rank (as if an arrival of an earlier call went missing): the arrivals never show a program its
        target, and with a 0.5 s wait watchdog the call raises ``WaitTimeoutError`` naming the spin kernel instead
        of hanging. With the counter put back on a multiple of 4, the next call is right."""
        from triton_dist.compiler.watchdog import wait_timeout_ns
        from triton_dist.ops.ar_rmsnorm import config as cfg
        from triton_dist.ops.ar_rmsnorm.op import OP
        from triton_dist.ops.common.slot_workspace import slot_workspace

        shape = (1, 200)
        xs = [torch.randn(shape, generator=gen).to(torch.bfloat16) for _ in range(size)]
        residual = torch.randn(shape, generator=gen).to(torch.bfloat16)
        weight = (torch.rand(shape[-1], generator=gen) + 0.5).to(torch.bfloat16)
        _run(xs[rank], residual, weight, 1e-5, LL_SPIN)  # the plan and its workspace
        slices = cfg.ll_launch(1, 200, 2, LL_SPIN, emulated=True).slices
        flags = 1 + cfg.ll_max_round_rows(200, 2)
        region = cfg.ll_region_bytes(200, 2, size, slices)
        ws = slot_workspace(f"{OP}.one_shot_ll_spin.{slices}", cfg.EMULATED_LL_SLOTS, flags, region)
        counter = int(ws.flags[0, 0])
        problems = [] if slices == 4 and counter % 4 == 0 and counter > 0 else [f"counter {counter}, {slices} slices"]
        before = wait_timeout_ns() / 1e9
        ws.flags[0, 0] += 1
        triton_dist.init(heap_size=HEAP, device="cpu", wait_timeout_s=0.5)
        try:
            _run(xs[rank], residual, weight, 1e-5, LL_SPIN)
            problems.append("no error")
        except Exception as error:  # noqa: BLE001 (checked: the watchdog's error, maybe inside the interpreter's)
            # The interpreter wraps an error raised inside a @triton.jit helper once more than the emulation's
            # launcher unwraps: the watchdog's error may arrive as an InterpreterError that quotes it.
            text = f"{type(error).__name__}: {error}"
            if not all(
                word in text for word in ("WaitTimeoutError", "_ar_rmsnorm_ll_spin_kernel", "never satisfied flag ==")
            ):
                problems.append(f"not the watchdog's error naming the spin kernel's wait: {text}")
        finally:
            triton_dist.init(heap_size=HEAP, device="cpu", wait_timeout_s=before)
        ws.flags[0, 0] = 0
        normed, new_residual = _run(xs[rank], residual, weight, 1e-5, LL_SPIN)
        want_normed, want_residual = reference(xs, residual, weight, 1e-5)
        problems += [f"after: normed: {p}" for p in _close(normed, want_normed)]
        problems += [f"after: new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    def gemm_ar_norm(m: int, n: int, k: int, dtype: torch.dtype) -> list[str]:
        """gemm_ar's norm epilogue: each rank's a @ b (rounded to the dtype, as the op's product) summed."""
        problems = []
        for _ in range(2):  # the second call relaunches both plans
            operands = [
                (torch.randn(m, k, generator=gen).to(dtype), (torch.randn(k, n, generator=gen) / k**0.5).to(dtype))
                for _ in range(size)
            ]
            residual = torch.randn(m, n, generator=gen).to(dtype)
            weight = (torch.rand(n, generator=gen) + 0.5).to(dtype)
            a, b = operands[rank]
            normed, new_residual = triton_dist.ops.gemm_ar(a, b, residual=residual, norm_weight=weight, eps=1e-5)
            products = [(x.float() @ w.float()).to(dtype) for x, w in operands]
            want_normed, want_residual = reference(products, residual, weight, 1e-5)
            problems += [f"normed: {p}" for p in _close(normed, want_normed)]
            problems += [f"new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    def disagreeing_ranks() -> list[str]:
        rows = 2 if rank == 0 else 3  # rank 0 calls with another shape: every rank refuses, naming the difference
        x = torch.ones(rows, 32)
        try:
            _run(x, x, torch.ones(32), 1e-5)
        except ArRmsNormError as error:
            return [] if "[2, 32]" in str(error) and "[3, 32]" in str(error) else [f"unclear error: {error}"]
        return ["no error"]

    def too_many_ll_rows() -> list[str]:
        """More rows than the LL one-shot's programs hold in one round each: refused before any launch."""
        x = torch.ones(3, 4096)  # 4096 fp32 words a row: one row per program, two programs under the emulation
        try:
            _run(x, x, torch.ones(4096), 1e-5, ArRmsNormConfig("one_shot_ll", 2, 1))
        except ArRmsNormError as error:
            return [] if "at most 2 rows of hidden 4096" in str(error) else [f"unclear error: {error}"]
        return ["no error"]

    def refused_without_the_interpreter() -> list[str]:
        os.environ["TRITON_INTERPRET"] = "0"
        try:
            x = torch.ones(7, 16)
            triton_dist.ops.all_reduce_residual_rmsnorm(x, x, torch.ones(16))
        except ArRmsNormError as error:
            return [] if "cpu" in str(error) else [f"the error names no CPU: {error}"]
        finally:
            os.environ["TRITON_INTERPRET"] = "1"
        return ["no error"]

    def peer_ahead_by_a_call(algo: str, first: int, second: int) -> list[str]:
        """Call A (``first`` rows of hidden 32 fp32, one program: one slot) read late on rank 1 (1 s after each
        of its flag waits) while rank 0, done with A, runs call B (``second`` rows: another number of rows per
        round) on the same slot: A's and B's results must both be right. With strides that followed the rows
        per round, B's pushes landed in the half of rank 1's region that A's reads were still using."""
        import time

        from triton_dist.ops.ar_rmsnorm import config as cfg
        from triton_dist.ops.ar_rmsnorm.op import OP
        from triton_dist.ops.common.slot_workspace import slot_workspace
        from triton_dist.runtime.emulation import device_library

        config = ArRmsNormConfig(algo, 1, 1)

        def draw(rows: int) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
            xs = [torch.randn(rows, 32, generator=gen) for _ in range(size)]
            return xs, torch.randn(rows, 32, generator=gen), torch.rand(32, generator=gen) + 0.5

        calls = [draw(first), draw(second)]
        for xs, residual, weight in calls:  # the plans (a first call is collective)
            _run(xs[rank], residual, weight, 1e-5, config)
        region = cfg.region_bytes(algo, 32, 4, size)
        epochs = slot_workspace(f"{OP}.{algo}", cfg.SLOTS[algo], 2 * size, region).epochs
        if algo == "one_shot" and int(epochs[0]) % 2 == 0:  # A at an even epoch (the next): the first half
            xs, residual, weight = calls[1]
            _run(xs[rank], residual, weight, 1e-5, config)
        wait = device_library._wait

        def late_wait(*args: Any) -> None:
            wait(*args)
            time.sleep(1.0)

        problems = []
        for call, (xs, residual, weight) in enumerate(calls):
            if rank == 1 and call == 0:
                device_library._wait = late_wait
            try:
                normed, new_residual = _run(xs[rank], residual, weight, 1e-5, config)
            finally:
                device_library._wait = wait
            want_normed, want_residual = reference(xs, residual, weight, 1e-5)
            problems += [f"call {'AB'[call]} normed: {p}" for p in _close(normed, want_normed)]
            problems += [f"call {'AB'[call]} new_residual: {p}" for p in _close(new_residual, want_residual)]
        return problems

    # The LL one-shot's rows split over programs, at 2 ranks only (8 programs' threads per rank: the emulation's
    # slowest cases). hidden 200 bf16 is 128 words, up to 4 slices of 32 at one warp: M = 1 in 4 slices, M = 3 in
    # 2 slices each, M = 16 unsplit at 2 rows a group; hidden 131 leaves the last two of four slices without a
    # word; fp32; e4m3 (one program of a row writes its scale). Outputs poisoned first.
    split: dict[str, Callable[[], list[str]]] = {
        "one_shot_ll/split/bf16_m1": lambda: run_poisoned((1, 200), torch.bfloat16, LL_SPLIT, False),
        "one_shot_ll/split/bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_SPLIT, False),
        "one_shot_ll/split/bf16_m16": lambda: run_poisoned((16, 200), torch.bfloat16, LL_SPLIT, False),
        "one_shot_ll/split/bf16_short_last_slices": lambda: run_poisoned((1, 131), torch.bfloat16, LL_SPLIT, False),
        "one_shot_ll/split/fp32_m3": lambda: run_poisoned((3, 100), torch.float32, LL_SPLIT, False),
        "one_shot_ll/split/fp8_bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_SPLIT, True),
        # The single reader (the row's first program reads and norms, the others only push): M = 1 in 4 slices
        # (packed pairs: bf16, even hidden), M = 3 of an odd hidden in 2 slices each (element by element), fp32,
        # e4m3 with a row of zeros, M = 16 at 2 rows a reader. Outputs poisoned first.
        "one_shot_ll/reader/bf16_m1": lambda: run_poisoned((1, 200), torch.bfloat16, LL_READER, False),
        "one_shot_ll/reader/bf16_odd_m3": lambda: run_poisoned((3, 131), torch.bfloat16, LL_READER, False),
        "one_shot_ll/reader/fp32_m3": lambda: run_poisoned((3, 100), torch.float32, LL_READER, False),
        "one_shot_ll/reader/fp8_bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_READER, True),
        "one_shot_ll/reader/bf16_m16": lambda: run_poisoned((16, 64), torch.bfloat16, LL_READER, False),
        # Slices that poll only their own words and count their arrival with an atomic, the last norming the row
        # from the slices' partial sums of squares: M = 1 in 4 slices (packed pairs), M = 3 of an odd hidden in 2
        # slices each (element by element, a half-used last word), fp32, e4m3 with a row of zeros; every rank's
        # outputs bit-identical. Outputs poisoned first; every call twice (the arrival counters go round).
        "one_shot_ll/atomic/bf16_m1": lambda: run_poisoned((1, 200), torch.bfloat16, LL_ATOMIC, False),
        "one_shot_ll/atomic/bf16_odd_m3": lambda: run_poisoned((3, 131), torch.bfloat16, LL_ATOMIC, False),
        "one_shot_ll/atomic/fp32_m1": lambda: run_poisoned((1, 100), torch.float32, LL_ATOMIC, False),
        "one_shot_ll/atomic/fp8_bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_ATOMIC, True),
        "one_shot_ll/atomic/bits_across_ranks": lambda: same_bits_on_every_rank((3, 200), LL_ATOMIC),
        # Slices that poll only their own words, count their arrival, wait for the row's others and norm their own
        # slice: M = 1 in 4 slices (packed pairs), M = 3 of an odd hidden in 2 slices each (element by element),
        # fp32 in 4 slices, M = 16 at 2 rows a group (one slice: the slices reloaded after the wait), e4m3 (run by
        # "atomic"'s kernel); bit-identical across ranks and to "atomic"'s. Outputs poisoned first.
        "one_shot_ll/spin/bf16_m1": lambda: run_poisoned((1, 200), torch.bfloat16, LL_SPIN, False),
        "one_shot_ll/spin/bf16_odd_m3": lambda: run_poisoned((3, 131), torch.bfloat16, LL_SPIN, False),
        "one_shot_ll/spin/fp32_m1": lambda: run_poisoned((1, 100), torch.float32, LL_SPIN, False),
        "one_shot_ll/spin/bf16_m16": lambda: run_poisoned((16, 64), torch.bfloat16, LL_SPIN, False),
        "one_shot_ll/spin/fp8_bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_SPIN, True),
        "one_shot_ll/spin/bits_across_ranks": lambda: same_bits_on_every_rank((3, 200), LL_SPIN),
        "one_shot_ll/spin/bits_as_atomic": lambda: same_bits_as_atomic((2, 200), torch.bfloat16, LL_SPIN),
        "one_shot_ll/spin/missing_arrival": missing_arrival,
        # The same with the partials exchanged as LL words (no counter): 4 slices, fp32, 2 rows a group, e4m3 (run
        # by "atomic"'s kernel), bit-identical to "atomic"'s.
        "one_shot_ll/spin_words/bf16_m1": lambda: run_poisoned((1, 200), torch.bfloat16, LL_SPIN_WORDS, False),
        "one_shot_ll/spin_words/fp32_m1": lambda: run_poisoned((1, 100), torch.float32, LL_SPIN_WORDS, False),
        "one_shot_ll/spin_words/bf16_m16": lambda: run_poisoned((16, 64), torch.bfloat16, LL_SPIN_WORDS, False),
        "one_shot_ll/spin_words/fp8_bf16_m3": lambda: run_poisoned((3, 200), torch.bfloat16, LL_SPIN_WORDS, True),
        "one_shot_ll/spin_words/bits_as_atomic": lambda: same_bits_as_atomic((3, 200), torch.bfloat16, LL_SPIN_WORDS),
        # A peer a call ahead (rank 1 late): one-shot 64 rows a round then 2; two-shot 1 row a round then 64.
        "peer_ahead/one_shot": lambda: peer_ahead_by_a_call("one_shot", 64, 2),
        "peer_ahead/two_shot": lambda: peer_ahead_by_a_call("two_shot", 2, 128),
    }
    return {
        **(split if size == 2 else {}),
        "disagreeing_ranks": disagreeing_ranks,
        "refused_without_the_interpreter": refused_without_the_interpreter,
        "selected/bf16": lambda: run((4, 96), torch.bfloat16, None),
        "selected/fp32_3d": lambda: run((2, 3, 40), torch.float32, None),
        "one_shot/fp32": lambda: run((5, 100), torch.float32, ArRmsNormConfig("one_shot", 2, 1)),
        "two_shot/fp32": lambda: run((5, 100), torch.float32, ArRmsNormConfig("two_shot", 2, 1)),
        "two_shot/bf16_one_row": lambda: run((1, 48), torch.bfloat16, ArRmsNormConfig("two_shot", 2, 1)),
        # 16 KiB rows: one row per flag round, rounds per program (the one-shot's epoch parity alternates).
        "one_shot/fp32_row_rounds": lambda: run((5, 2100), torch.float32, ArRmsNormConfig("one_shot", 2, 1)),
        "two_shot/bf16_row_rounds": lambda: run((9, 4100), torch.bfloat16, ArRmsNormConfig("two_shot", 1, 1)),
        "no_rows": lambda: run((0, 32), torch.float32, None),
        "fp8/selected_bf16_3d": lambda: run_fp8((2, 2, 40), torch.bfloat16, None),
        "fp8/one_shot_fp32": lambda: run_fp8((5, 100), torch.float32, ArRmsNormConfig("one_shot", 2, 1)),
        "fp8/two_shot_bf16": lambda: run_fp8((5, 100), torch.bfloat16, ArRmsNormConfig("two_shot", 2, 1)),
        "fp8/no_rows": lambda: run_fp8((0, 32), torch.bfloat16, None),
        # The LL one-shot (forced; never chosen): 1 to 3 rows, a round of several rows per program, an odd hidden
        # size (a half-used last word), every call twice and the shapes sharing its slots (the epochs advance).
        "one_shot_ll/bf16": lambda: run((3, 100), torch.bfloat16, LL),
        "one_shot_ll/fp32_one_row": lambda: run((1, 100), torch.float32, LL),
        "one_shot_ll/bf16_odd_hidden": lambda: run((2, 37), torch.bfloat16, ArRmsNormConfig("one_shot_ll", 1, 1)),
        "one_shot_ll/fp32_3d": lambda: run((2, 2, 24), torch.float32, LL),
        "fp8/one_shot_ll_bf16": lambda: run_fp8((3, 100), torch.bfloat16, LL),
        "one_shot_ll/too_many_rows": too_many_ll_rows,
        "gemm_ar_norm/bf16": lambda: gemm_ar_norm(3, 40, 24, torch.bfloat16),
        "gemm_ar_norm/fp16_one_row": lambda: gemm_ar_norm(1, 48, 40, torch.float16),
    }


def _worker() -> dict[str, list[str]]:
    """This rank's problems per case (empty: right), on the world ``run_ranks`` set up."""
    import triton_dist
    import triton_dist.ops  # noqa: F401 (triton_dist.ops.all_reduce_residual_rmsnorm)

    world = triton_dist.current_world()
    gen = torch.Generator().manual_seed(4321)  # every rank draws every rank's inputs alike
    record: dict[str, list[str]] = {}
    for name, case in _cases(world.rank, world.world_size, gen).items():
        try:
            record[name] = case()
        except Exception as error:  # noqa: BLE001 (recorded for the test)
            record[name] = [f"{type(error).__name__}: {error}"]
    return record


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}ranks")
def records(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return run_ranks(_worker, request.param, heap_size=HEAP).results


def test_the_fused_op_matches_torch(records: list[dict[str, list[str]]]) -> None:
    for rank, record in enumerate(records):
        assert {
            "one_shot/fp32",
            "two_shot/fp32",
            "fp8/one_shot_fp32",
            "fp8/two_shot_bf16",
            "one_shot_ll/bf16",
            "one_shot_ll/fp32_one_row",
            "one_shot_ll/bf16_odd_hidden",
            "fp8/one_shot_ll_bf16",
            "gemm_ar_norm/bf16",
            "selected/bf16",
            "no_rows",
            "disagreeing_ranks",
            "refused_without_the_interpreter",
        } <= set(record)
        if len(records) == 2:
            split = {"bf16_m1", "bf16_m3", "bf16_m16", "bf16_short_last_slices", "fp32_m3", "fp8_bf16_m3"}
            assert {f"one_shot_ll/split/{name}" for name in split} <= set(record)
            reader = {"bf16_m1", "bf16_odd_m3", "fp32_m3", "fp8_bf16_m3", "bf16_m16"}
            assert {f"one_shot_ll/reader/{name}" for name in reader} <= set(record)
            atomic = {"bf16_m1", "bf16_odd_m3", "fp32_m1", "fp8_bf16_m3", "bits_across_ranks"}
            assert {f"one_shot_ll/atomic/{name}" for name in atomic} <= set(record)
            spin = {
                "bf16_m1",
                "bf16_odd_m3",
                "fp32_m1",
                "bf16_m16",
                "fp8_bf16_m3",
                "bits_across_ranks",
                "bits_as_atomic",
                "missing_arrival",
            }
            assert {f"one_shot_ll/spin/{name}" for name in spin} <= set(record)
            words = {"bf16_m1", "fp32_m1", "bf16_m16", "fp8_bf16_m3", "bits_as_atomic"}
            assert {f"one_shot_ll/spin_words/{name}" for name in words} <= set(record)
            assert {"peer_ahead/one_shot", "peer_ahead/two_shot"} <= set(record)
        failed = {name: problems for name, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


# ---------------------------------------------------------------------------------------------------------------
# Without GPUs or ranks: compilation, configs, bad input, tracing.


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize(
    ("algo", "dtype", "world", "fp8"),
    [("one_shot", "bf16", 2, False), ("two_shot", "fp16", 0, False), ("two_shot", "bf16", 2, True)],
)
def test_the_kernel_compiles_with_the_flag_protocol(target: str, algo: str, dtype: str, world: int, fp8: bool) -> None:
    """sm_90: the notify's system-scope release and the wait's acquire in the PTX; gfx942: the notify's
    system-scope writeback (release) and the wait's invalidate (acquire). ``world`` 0: the notify loop of a
    non-power-of-two world. ``fp8``: the e4m3 output (NVIDIA only), its conversion in the PTX."""
    from dl_compile import assembly, compile_kernel, need_real_library

    from triton_dist.ops.ar_rmsnorm import config as cfg
    from triton_dist.ops.ar_rmsnorm import kernels

    if fp8 and target == "gfx942":
        pytest.skip("the e4m3 output is NVIDIA only (the op refuses it on ROCm)")
    need_real_library(target)
    pointer = f"*{dtype}"
    signature = {name: pointer for name in ("x_ptr", "residual_ptr", "weight_ptr", "normed_ptr", "new_residual_ptr")}
    signature |= {"normed_ptr": "*fp8e4nv" if fp8 else pointer, "scale_ptr": "*fp32" if fp8 else pointer}
    signature |= {"eps": "fp32", "data_ptr": pointer, "flags_ptr": "*i32", "epochs_ptr": "*i32"}
    signature |= {"rows": "i32", "hidden": "i32", "chunk": "i32", "flags_stride": "i32"}
    hidden = 4096
    constexprs = {
        "REGION": cfg.region_bytes(algo, hidden, 2, 2) // 2,
        "BLOCK_H": cfg.block_h(hidden),
        "ROUND_ROWS": cfg.max_round_rows(algo, hidden, 2, 2),  # 2 (one-shot), 8 (two-shot): rows per flag round
        "RANK_STRIDE": cfg.region_bytes(algo, hidden, 2, 2) // 2 // 4,
        "TWO_SHOT": algo == "two_shot",
        "FP8": fp8,
        "WORLD": world,
    }
    aligned = ("x_ptr", "residual_ptr", "weight_ptr", "normed_ptr", "new_residual_ptr", "data_ptr", "hidden")
    compiled = compile_kernel(kernels._ar_rmsnorm_kernel, signature, target, constexprs, aligned, num_warps=4)
    asm = assembly(compiled, target)
    if fp8:
        assert re.search(r"cvt\.rn\.satfinite\.e4m3x2\.f32", asm), "the e4m3 conversion expected"
    if target == "sm_90":
        release = re.findall(r"st\.release\.sys|atom\.global\.sys\.release\.exch|fence\.(?:acq_rel|sc)\.sys", asm)
        assert release, "a system-scope release (dl.notify) expected"
        assert "ld.acquire.sys" in asm, "a system-scope acquire load (dl.wait) expected"
        assert "rsqrt" in asm, "the norm's reciprocal square root expected"
    else:
        assert re.search(r"buffer_wbl2 .*sc1", asm), "a system-scope release (the notify's L2 writeback) expected"
        assert re.search(r"buffer_inv .*sc1", asm), "a system-scope acquire (the wait's cache invalidate) expected"


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "slices", "fp8", "watched"),
    [("bf16", 8192, 1, 1, False, False), ("bf16", 8192, 1, 16, False, False), ("fp32", 100, 4, 1, False, False),
     ("bf16", 4096, 1, 4, True, False), ("bf16", 2048, 2, 2, False, True)],
)  # fmt: skip
def test_the_ll_kernel_compiles_with_the_ll_words(
    dtype: str, hidden: int, rows: int, slices: int, fp8: bool, watched: bool
) -> None:
    """sm_90 only (all_reduce's LL words are inline PTX: no gfx942 build). One ``fence.acq_rel.sys`` before the
    first word access, the words as relaxed system-scope 8-byte stores (one per word of a thread's slice and row of
    the round: never a weak one) and loads of the whole row inside the poll's loop, no flag round (no acquire
    load) unless the watchdog's late receive waits, no local memory in a loop, the norm and (``fp8``) the e4m3
    conversion."""
    from asm_loops import loop_components, ptx_blocks

    from triton_dist.ops.ar_rmsnorm import kernels

    kernel = kernels._ar_rmsnorm_ll_kernel
    asm, words, num_warps = _ll_kernel_ptx(kernel, dtype, hidden, rows, slices, fp8, watched)
    lines = asm.splitlines()
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    assert stores and loads, "the words must travel as relaxed system-scope 8-byte accesses"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word access"
    per_thread = max(1, words // (32 * num_warps))
    assert per_thread % slices == 0, "a slice narrower than the program's threads"
    pushed = per_thread // slices
    # One store per word of a thread's slice and row of the round (the peers are a loop; the rows' may be unrolled).
    assert len(stores) in (pushed, pushed * rows), "an 8-byte store merged away or duplicated"
    assert not re.search(r"st\.global(\.v\d)?\.b64", asm), "a weak 8-byte store (not single-copy atomic)"
    if not watched:
        assert "ld.acquire" not in asm, "no flag round: the words carry the epoch"
        assert len(loads) in (per_thread, per_thread * rows), "one relaxed load per word: the poll, not cloned"
    loops = loop_components(ptx_blocks(asm))
    polls = [loop for loop in loops if any("ld.relaxed.sys.global.b64" in line for b in loop for line in b.lines)]
    assert polls, "the relaxed loads must be inside the poll loop (not hoisted out of it)"
    inside = [line.strip() for loop in loops for block_ in loop for line in block_.lines]
    assert not [line for line in inside if ".local" in line], "local memory inside a loop"
    assert "rsqrt" in asm, "the norm's reciprocal square root expected"
    if fp8:
        assert re.search(r"cvt\.rn\.satfinite\.e4m3x2\.f32", asm), "the e4m3 conversion expected"


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "slices", "wide", "fp8", "watched"),
    [("bf16", 8192, 1, 16, True, False, False), ("bf16", 8192, 1, 16, False, False, False),
     ("fp32", 100, 2, 1, False, False, False), ("bf16", 4096, 1, 4, True, True, False),
     ("bf16", 2048, 2, 2, True, False, True)],
)  # fmt: skip
def test_the_ll_reader_kernel_compiles_to_one_poll_per_word(
    dtype: str, hidden: int, rows: int, slices: int, wide: bool, fp8: bool, watched: bool
) -> None:
    """sm_90: the single-reader LL kernel (``ll_single_reader``). One ``fence.acq_rel.sys`` before the first word
    access; relaxed system-scope 8-byte stores, one per word of a thread's slice (and row); one relaxed load per
    word of the whole row (the reader's poll, inside its loop, not cloned); no weak 8-byte store, no flag round,
    no local memory in a loop; ``WIDE``: x, the residual and the weight as 4-byte payloads and the outputs as
    packed pairs, vectorized to 16 bytes (no 16-bit access left; the e4m3 output is stored byte by byte), else
    16-bit accesses.
    ``watched`` (the wait watchdog): bounded polls, then the late receive's waits."""
    from asm_loops import loop_components, ptx_blocks

    from triton_dist.ops.ar_rmsnorm import kernels

    kernel = kernels._ar_rmsnorm_ll_reader_kernel
    asm, words, num_warps = _ll_kernel_ptx(kernel, dtype, hidden, rows, slices, fp8, watched, wide)
    lines = asm.splitlines()
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    assert stores and loads, "the words must travel as relaxed system-scope 8-byte accesses"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word access"
    per_thread = max(1, words // (32 * num_warps))
    pushed = per_thread // slices
    assert len(stores) in (pushed, pushed * rows), "an 8-byte store merged away or duplicated"
    assert not re.search(r"st\.global(\.v\d)?\.b64", asm), "a weak 8-byte store (not single-copy atomic)"
    if not watched:
        assert "ld.acquire" not in asm, "no flag round: the words carry the epoch"
        assert len(loads) in (per_thread, per_thread * rows), "one relaxed load per word of the row: one poll"
    loops = loop_components(ptx_blocks(asm))
    assert [loop for loop in loops if any("ld.relaxed.sys.global.b64" in line for b in loop for line in b.lines)]
    inside = [line.strip() for loop in loops for block_ in loop for line in block_.lines]
    assert not [line for line in inside if ".local" in line], "local memory inside a loop"
    assert "rsqrt" in asm, "the norm's reciprocal square root expected"
    sixteen = re.findall(r"(?:ld|st)\.global\.b16", asm)
    if wide:
        assert not sixteen, "WIDE: 4-byte payload loads and packed stores, no 16-bit access"
        vectors = ("ld.global.v4.b32" in asm, "st.global.v4.b32" in asm)
        assert vectors == (True, True), "WIDE: 16-byte loads and stores (masked by whole words)"
    elif dtype != "fp32":
        assert sixteen, "16-bit accesses expected without WIDE"
    if fp8:
        assert re.search(r"cvt\.rn\.satfinite\.e4m3x2\.f32", asm), "the e4m3 conversion expected"


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "slices", "wide", "fp8", "watched"),
    [("bf16", 8192, 1, 16, True, False, False), ("fp32", 100, 2, 1, False, False, False),
     ("bf16", 4096, 1, 4, True, True, False)],
)  # fmt: skip
def test_the_ll_atomic_kernel_polls_only_its_slice(
    dtype: str, hidden: int, rows: int, slices: int, wide: bool, fp8: bool, watched: bool
) -> None:
    """sm_90: the LL kernel of ``ll_reduce="atomic"``. One ``fence.acq_rel.sys`` before the first word access;
    relaxed system-scope 8-byte stores and loads, one per word of a thread's *slice* (and row): the poll covers the
    slice only, never the whole row; one ``atom.acq_rel.gpu`` add (the arrival), after a ``bar.sync`` (every
    thread's stores of the new residual and the partial precede it), the last arriver's reloads of the other
    slices through L2 (``ld.global.cg``) after it; no flag round, no weak 8-byte store, no local memory in a loop."""
    from asm_loops import loop_components, ptx_blocks

    from triton_dist.ops.ar_rmsnorm import kernels

    kernel, extra = kernels._ar_rmsnorm_ll_atomic_kernel, {"flags_ptr": "*i32", "flags_stride": "i32"}
    asm, words, num_warps = _ll_kernel_ptx(kernel, dtype, hidden, rows, slices, fp8, watched, wide, extra)
    lines = asm.splitlines()
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    atomics = [i for i, line in enumerate(lines) if re.search(r"\batom\.", line)]
    assert stores and loads, "the words must travel as relaxed system-scope 8-byte accesses"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word access"
    per_slice = max(1, words // (32 * num_warps)) // slices  # a thread's words of its slice
    assert per_slice >= 1, "a slice narrower than the program's threads"
    assert len(stores) in (per_slice, per_slice * rows), "an 8-byte store merged away or duplicated"
    assert len(loads) in (per_slice, per_slice * rows), "the poll must cover this program's slice only"
    assert not re.search(r"st\.global(\.v\d)?\.b64", asm), "a weak 8-byte store (not single-copy atomic)"
    assert "ld.acquire" not in asm, "no flag round: the words carry the epoch"
    assert len(atomics) == 1 and "atom.global.gpu.acq_rel.add" in lines[atomics[0]], "one acq_rel arrival atomic"
    barriers = [i for i, line in enumerate(lines) if "bar.sync" in line]
    assert [i for i in barriers if max(stores + loads) < i < atomics[0]], "a bar.sync between the slice and the atomic"
    reloads = [i for i, line in enumerate(lines) if "ld.global.cg" in line]
    assert reloads and min(reloads) > atomics[0], "the last arriver reloads the slices through L2 after the atomic"
    loops = loop_components(ptx_blocks(asm))
    assert [loop for loop in loops if any("ld.relaxed.sys.global.b64" in line for b in loop for line in b.lines)]
    inside = [line.strip() for loop in loops for block_ in loop for line in block_.lines]
    assert not [line for line in inside if ".local" in line], "local memory inside a loop"
    assert "rsqrt" in asm, "the norm's reciprocal square root expected"
    if fp8:
        assert re.search(r"cvt\.rn\.satfinite\.e4m3x2\.f32", asm), "the e4m3 conversion expected"


def _ll_spin_ptx(
    dtype: str, hidden: int, rows: int, slices: int, warps: int, wide: bool, watched: bool, reduce: str
) -> tuple[list[str], list[int], list[int]]:
    """The spin kernel (``ll_reduce`` ``reduce``) compiled for sm_90 at its launch's warps (``ll_launch_warps``),
    with the checks both spin variants share: one ``fence.acq_rel.sys`` before the first word access; relaxed
    system-scope 8-byte stores and loads of the LL words, one per word of a thread's slice (and row; watched: the
    bounded poll's and the late receive's); no weak 8-byte store; the words' loads inside the poll's asm loop; no
    local memory in a loop. Returns the PTX's lines and the lines of the words' stores and loads."""
    from asm_loops import loop_components, ptx_blocks

    from triton_dist.ops.ar_rmsnorm import config as cfg
    from triton_dist.ops.ar_rmsnorm import kernels

    itemsize = 4 if dtype == "fp32" else 2
    config = cfg.ArRmsNormConfig("one_shot_ll", 256, warps, ll_reduce=reduce)
    num_warps = cfg.ll_launch_warps(hidden, itemsize, config, slices)
    kernel, extra = kernels._ar_rmsnorm_ll_spin_kernel, {"flags_ptr": "*i32", "flags_stride": "i32"}
    constants = {"WORDS": reduce == "spin_words"}
    asm, words, num_warps = _ll_kernel_ptx(
        kernel, dtype, hidden, rows, slices, False, watched, wide, extra, num_warps, constants
    )
    lines = asm.splitlines()
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    assert stores and loads, "the words must travel as relaxed system-scope 8-byte accesses"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word access"
    per_slice = max(1, words // slices // (32 * num_warps))  # a thread's words of its slice
    assert words // slices >= 32 * num_warps, "a slice narrower than the program's threads"
    assert len(stores) in (per_slice, per_slice * rows), "an 8-byte store merged away or duplicated"
    if watched:  # the bounded poll, and the late receive's polls (each of the slice's words)
        assert len(loads) % per_slice == 0 and len(loads) > per_slice, "the polls must cover this program's slice"
    else:
        assert len(loads) in (per_slice, per_slice * rows), "the poll must cover this program's slice only"
    assert not re.search(r"st\.global(\.v\d)?\.b64", asm), "a weak 8-byte store (not single-copy atomic)"
    # The polls are loops inside their inline asm (labels asm_loops does not parse): load, test, branch back.
    assert re.search(r"LL_POLL:[^@]*@%llp ld\.relaxed\.sys\.global\.b64", asm), "the words' loads inside the poll"
    loops = loop_components(ptx_blocks(asm))
    in_loops = [line for loop in loops for block_ in loop for line in block_.lines]
    assert not [line for line in in_loops if ".local" in line], "local memory inside a loop"
    return lines, stores, loads


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "slices", "warps", "wide", "watched"),
    [("bf16", 8192, 1, 16, 4, True, False), ("bf16", 8192, 1, 4, 4, True, False),
     ("fp32", 100, 2, 1, 4, False, False), ("bf16", 5120, 1, 4, 4, False, True)],
)  # fmt: skip
def test_the_ll_spin_kernel_norms_its_slice_after_the_others_arrive(
    dtype: str, hidden: int, rows: int, slices: int, warps: int, wide: bool, watched: bool
) -> None:
    """sm_90: the LL kernel of ``ll_reduce="spin"`` (``_ll_spin_ptx``'s checks): one ``atom.acq_rel.gpu`` add (the
    arrival) after a ``bar.sync``; then the wait: ``ld.acquire.gpu`` of the counter inside a loop, a ``bar.sync``,
    the ``SLICES`` partials per row loaded through L2 after it; the norm's ``rsqrt`` after the wait, and at one row
    a group no reload of the new residual (the slice stays in registers: ``SLICES`` L2 loads, the partials, and
    nothing else); no flag round. ``watched``: a bounded poll, whose barrier votes, then the counter's ``dl.wait``."""
    from triton_dist.ops.common.ll_words import LL_WATCHED_POLL_PASSES

    lines, stores, loads = _ll_spin_ptx(dtype, hidden, rows, slices, warps, wide, watched, "spin")
    asm = "\n".join(lines)
    atomics = [i for i, line in enumerate(lines) if re.search(r"\batom\.", line) and "acq_rel.add" in line]
    spins = [i for i, line in enumerate(lines) if "ld.acquire.gpu.global.b32" in line]
    assert len(atomics) == 1 and "atom.global.gpu.acq_rel.add" in lines[atomics[0]], "one acq_rel arrival atomic"
    barriers = [i for i, line in enumerate(lines) if "bar.sync" in line]
    assert [i for i in barriers if max(stores + loads) < i < atomics[0]], "a bar.sync between the slice and the atomic"
    assert spins and min(spins) > atomics[0], "the wait's acquire loads of the counter follow the arrival"
    after = [i for i in barriers if i > min(spins)]
    assert after, "a bar.sync after the wait"
    reloads = [i for i, line in enumerate(lines) if "ld.global.cg" in line]
    assert reloads and min(reloads) > min(after), "the partials are loaded after the wait"
    if rows == 1:
        assert len(reloads) == slices, "one row a group: the partials only, the slice kept in registers"
    rsqrts = [i for i, line in enumerate(lines) if "rsqrt" in line]
    assert rsqrts and min(rsqrts) > min(spins), "the norm follows the wait"
    spin_loop = re.search(r"LL_SPIN:\s*ld\.acquire\.gpu\.global\.b32[^;]*;[^@]*@%ls[pq] bra LL_SPIN;", asm)
    assert spin_loop, "the counter's acquire load inside the wait's loop"
    if watched:  # the poll bounded, and the counter's dl.wait (inlined: its own acquire loads) behind it
        assert f"setp.lt.u32 %lsq, %lsn, {LL_WATCHED_POLL_PASSES};" in asm, "the wait's poll bounded"
        assert "bar.red.or.pred" in asm, "the threads vote, in the barrier after the poll, on whether any gave up"
        assert len(spins) >= 2, "the counter's dl.wait behind the bounded poll"
    else:
        assert len(spins) == 1 and "%lsn" not in asm, "one unbounded poll of the counter"


@pytest.mark.parametrize(
    ("dtype", "hidden", "rows", "slices", "warps", "wide", "watched"),
    [("bf16", 8192, 1, 16, 4, True, False), ("fp32", 100, 2, 1, 4, False, False),
     ("bf16", 5120, 1, 4, 4, False, True)],
)  # fmt: skip
def test_the_ll_spin_words_kernel_polls_the_partial_words(
    dtype: str, hidden: int, rows: int, slices: int, warps: int, wide: bool, watched: bool
) -> None:
    """sm_90: the LL kernel of ``ll_reduce="spin_words"`` (``_ll_spin_ptx``'s checks): no atomic, no acquire (no
    counter: unwatched, no ``ld.acquire`` at all) and at one row a group no L2 reload; each row's partial stored
    once as a relaxed gpu-scope 8-byte word (after the slice's words are polled), and the row's ``SLICES`` partial
    words polled with relaxed gpu-scope 8-byte loads inside the asm loop, summed in slice order (``add.rn.f32``),
    before the norm's ``rsqrt``. ``watched``: the words' poll bounded, its barrier votes, then ``dl.wait`` on each
    word's high half."""
    from triton_dist.ops.common.ll_words import LL_WATCHED_POLL_PASSES

    lines, stores, loads = _ll_spin_ptx(dtype, hidden, rows, slices, warps, wide, watched, "spin_words")
    asm = "\n".join(lines)
    assert not [line for line in lines if re.search(r"\batom\.", line)], "no atomic: the partials carry the epoch"
    if rows == 1:
        assert "ld.global.cg" not in asm, "no reload: the partials are the words polled, the slice in registers"
    partials = [i for i, line in enumerate(lines) if "st.relaxed.gpu.global.b64" in line]
    polls = [i for i, line in enumerate(lines) if "ld.relaxed.gpu.global.b64" in line]
    assert len(partials) in (1, rows) and min(partials) > min(loads), "a partial word after the slice's poll"
    assert len(polls) % slices == 0 and len(polls) >= slices, "the row's SLICES partial words polled"
    assert min(polls) > min(partials), "the partials polled after this program's own is stored"
    assert re.search(r"LL_WORDS:\s*setp[^@]*@%lwp ld\.relaxed\.gpu\.global\.b64", asm), "the poll inside its loop"
    assert asm.count("add.rn.f32 %lwt, %lwt, %lwlo;") == slices * (len(polls) // slices), "summed in slice order"
    rsqrts = [i for i, line in enumerate(lines) if "rsqrt" in line]
    assert rsqrts and min(rsqrts) > min(polls), "the norm follows the partials' poll"
    if watched:
        assert f"setp.lt.u32 %lwq, %lwn, {LL_WATCHED_POLL_PASSES};" in asm, "the partials' poll bounded"
        assert "bar.red.or.pred" in asm, "the threads vote on whether any gave up"
    else:
        assert "ld.acquire" not in asm and "%lwn" not in asm, "one unbounded relaxed poll, no flag round"


def test_the_ll_launch_holds_one_round_per_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ll_launch``: groups x rows per group (a power of two) cover the rows in one round each, each group's rows
    split over a power of two of programs while the launch stays within ``LL_SPLIT_PROGRAMS`` programs (or as
    ``ll_slices`` asks), never narrower than a program's threads; more rows than the rounds hold, a row past
    ``LL_MAX_ROW_WORDS`` words, or a build without NVIDIA support (but for the emulation) raise naming the limit;
    the warps keep 1 to ``LL_PER_THREAD`` words per thread."""
    from triton_dist.ops.ar_rmsnorm import config as cfg

    def launch(rows: int, hidden: int, itemsize: int, programs: int, emulated: bool = False, **kw: Any) -> tuple:
        got = cfg.ll_launch(rows, hidden, itemsize, cfg.ArRmsNormConfig("one_shot_ll", programs, **kw), emulated)
        return got.groups, got.slices, got.rows

    monkeypatch.setattr(cfg, "ll_supported", lambda: True)
    # hidden 8192 bf16: 4096 words a row, 8 warps, so at most 16 slices of 256 words (one per thread).
    assert [launch(m, 8192, 2, 256) for m in (1, 2, 4, 16, 32, 256)] == [
        (1, 16, 1), (2, 16, 1), (4, 8, 1), (16, 2, 1), (32, 1, 1), (256, 1, 1)
    ]  # fmt: skip
    assert launch(1, 8192, 2, 256, num_warps=16) == (1, 8, 1)  # 512 threads: slices of 512 words
    assert launch(16, 8192, 2, 256, ll_slices=16) == (16, 16, 1)  # asked for: past LL_SPLIT_PROGRAMS
    # One reader per row: its pushers read only their slice, so the split goes on up to LL_READER_PROGRAMS.
    assert [launch(m, 8192, 2, 256, ll_single_reader=True) for m in (1, 2, 8, 16, 32, 128, 256)] == [
        (1, 16, 1), (2, 16, 1), (8, 16, 1), (16, 8, 1), (32, 4, 1), (128, 1, 1), (256, 1, 1)
    ]  # fmt: skip
    with pytest.raises(cfg.ArRmsNormError, match="ll_single_reader is an option of one_shot_ll only, got two_shot"):
        cfg.ArRmsNormConfig("two_shot", 4, ll_single_reader=True)
    # ll_reduce="atomic": every program polls only its slice, so it splits as the single reader does.
    assert [launch(m, 8192, 2, 256, ll_reduce="atomic") for m in (1, 16, 32, 128)] == [
        (1, 16, 1), (16, 8, 1), (32, 4, 1), (128, 1, 1)
    ]  # fmt: skip
    # ll_reduce="spin": slices of one word per thread at the config's warps (the program holds only its slice), at
    # most LL_SPIN_MAX_SLICES, the launch within LL_READER_PROGRAMS even where ll_slices asks for more.
    spin = cfg.ArRmsNormConfig("one_shot_ll", 256, 4, ll_reduce="spin")
    assert [launch(m, 8192, 2, 256, ll_reduce="spin") for m in (1, 16, 32, 64, 128, 256)] == [
        (1, 16, 1), (16, 8, 1), (32, 4, 1), (64, 2, 1), (128, 1, 1), (256, 1, 1)
    ]  # fmt: skip
    assert [cfg.ll_launch_warps(8192, 2, spin, s) for s in (16, 4, 1)] == [4, 4, 8]  # 256, 1024, 4096 words a slice
    assert cfg.ll_launch_warps(8192, 2, cfg.ArRmsNormConfig("one_shot_ll", 256, 16, ll_reduce="spin"), 16) == 8
    assert cfg.ll_launch_warps(8192, 2, cfg.ArRmsNormConfig("one_shot_ll", 256, 4), 16) == 8  # whole rows
    assert launch(1, 8192, 2, 256, ll_reduce="spin", num_warps=1) == (1, 16, 1)  # LL_SPIN_MAX_SLICES
    assert launch(1, 100, 2, 256, ll_reduce="spin", num_warps=1) == (1, 2, 1)  # 64 words: 2 slices of 32
    assert launch(16, 8192, 2, 256, ll_reduce="spin", ll_slices=16) == (16, 8, 1)  # within LL_READER_PROGRAMS
    words = cfg.ArRmsNormConfig("one_shot_ll", 256, 4, ll_reduce="spin_words")  # the same launch, warps, fp8 config
    assert [launch(m, 8192, 2, 256, ll_reduce="spin_words") for m in (1, 32, 256)] == [
        (1, 16, 1),
        (32, 4, 1),
        (256, 1, 1),
    ]
    assert cfg.ll_launch_warps(8192, 2, words, 16) == 4 and cfg.ll_spin_fp8_config(words).ll_reduce == "atomic"
    assert cfg.ll_spin_fp8_config(spin) == cfg.ArRmsNormConfig("one_shot_ll", 256, 4, ll_reduce="atomic")
    assert cfg.ll_spin_fp8_config(cfg.ArRmsNormConfig("one_shot", 4)) == cfg.ArRmsNormConfig("one_shot", 4)
    with pytest.raises(cfg.ArRmsNormError, match="ll_reduce='spin' is an option of one_shot_ll without"):
        cfg.ArRmsNormConfig("one_shot_ll", 4, ll_single_reader=True, ll_reduce="spin")
    with pytest.raises(
        cfg.ArRmsNormError, match="ll_reduce must be one of \\['row', 'atomic', 'spin', 'spin_words'\\], got 'tree'"
    ):
        cfg.ArRmsNormConfig("one_shot_ll", 4, ll_reduce="tree")
    with pytest.raises(cfg.ArRmsNormError, match="ll_reduce='atomic' is an option of one_shot_ll without"):
        cfg.ArRmsNormConfig("one_shot", 4, ll_reduce="atomic")
    with pytest.raises(cfg.ArRmsNormError, match="got one_shot_ll with ll_single_reader=True"):
        cfg.ArRmsNormConfig("one_shot_ll", 4, ll_single_reader=True, ll_reduce="atomic")
    assert launch(1, 8192, 2, 256, ll_slices=1) == (1, 1, 1) and launch(1, 8192, 2, 4) == (1, 4, 1)
    assert launch(512, 4096, 2, 256) == (256, 1, 2)  # 2048 words: 2 rows a round
    assert launch(5, 100, 4, 2, emulated=True) == (2, 1, 4)
    assert launch(5, 100, 4, 256, emulated=True) == (5, 1, 1)  # the emulation's 8 slots
    assert launch(1, 100, 4, 256, emulated=True, num_warps=1) == (1, 4, 1)  # 128 words, one warp: 4 slices of 32
    assert launch(1, 40, 2, 256, emulated=True, num_warps=1) == (1, 1, 1)  # 32 words: one slice
    with pytest.raises(cfg.ArRmsNormError, match=r"at most 256 rows of hidden 8192 \(1 per program"):
        launch(257, 8192, 2, 256)
    with pytest.raises(cfg.ArRmsNormError, match="rows of at most 16384 elements of 2 bytes, got hidden 16385"):
        launch(1, 16385, 2, 256)
    with pytest.raises(cfg.ArRmsNormError, match="ll_slices must be 0 or a power of two, and only with one_shot_ll"):
        cfg.ArRmsNormConfig("one_shot_ll", 4, ll_slices=3)
    with pytest.raises(cfg.ArRmsNormError, match="only with one_shot_ll; got 2 with one_shot"):
        cfg.ArRmsNormConfig("one_shot", 4, ll_slices=2)
    assert launch(1, 8192, 4, 1) == (1, 1, 1)
    assert [cfg.ll_num_warps(8192, 2, w) for w in (1, 4, 16)] == [8, 8, 16]  # 4096 words: >= 8 warps
    assert [cfg.ll_num_warps(40, 2, w) for w in (1, 4)] == [1, 1]  # 32 words: one warp
    assert cfg.ll_num_warps(4096, 4, 4) == 8 and cfg.ll_num_warps(1024, 2, 4) == 4
    # A group's region spans its slices' slots: the same bytes per group whatever the slices.
    assert cfg.ll_region_bytes(8192, 2, 2, 16) * 16 == cfg.ll_region_bytes(8192, 2, 2) == 2 * 2 * 4096 * 8
    monkeypatch.setattr(cfg, "ll_supported", lambda: False)
    with pytest.raises(cfg.ArRmsNormError, match="one_shot_ll needs an NVIDIA GPU"):
        launch(1, 64, 2, 1)
    assert launch(1, 64, 2, 1, emulated=True) == (1, 1, 1)


def test_the_algorithm_follows_the_all_reduce_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """``all_reduce``'s choice (its stored table for this GPU, read through ``all_reduce.select_config``) decides
    one-shot (any one-shot variant) versus two-shot by size; a malformed table is an ArRmsNormError naming it."""
    from triton_dist.ops import tuning
    from triton_dist.ops.all_reduce import config as ar_cfg
    from triton_dist.ops.ar_rmsnorm import config as cfg

    rows = [
        [4096, {"algo": "one_shot_ll", "programs": 4, "num_warps": 1}],
        [1 << 20, {"algo": "two_shot", "programs": 8}],
    ]
    tables: dict[str, Any] = {"all_reduce|table|2|Fake GPU": {"config": {"rows": rows}}}
    monkeypatch.setattr(tuning, "lookup_entry", tables.get)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(ar_cfg, "_tables", {})
    monkeypatch.setattr(ar_cfg, "_selected", {})
    cuda = torch.device("cuda", 0)
    assert cfg.choose_config(3072, 3, cuda, 2, 2, emulated=False) == cfg.ArRmsNormConfig("one_shot", 3, 4)
    # At most SPIN_WORDS_ROWS rows: the LL one-shot whose slices wait for each other (measured faster there), but
    # not for the e4m3 output (its spin falls back to the slower last-arriver kernel).
    spin = cfg.ArRmsNormConfig("one_shot_ll", cfg.SLOTS["one_shot_ll"], cfg.SPIN_WORDS_WARPS, ll_reduce="spin_words")
    assert cfg.choose_config(4096, 1, cuda, 2, 2, emulated=False) == spin  # hidden 2048
    assert cfg.choose_config(4096, 1, cuda, 2, 2, emulated=False, fp8=True).algo == "one_shot"
    assert cfg.choose_config(4096, 2, cuda, 2, 2, emulated=False).algo == "one_shot"  # hidden 1024: short rows
    too_long = (cfg.LL_MAX_ROW_WORDS + 1) * 2 * 2  # one bf16 row longer than the LL words hold
    assert cfg.choose_config(too_long, 1, cuda, 4, 2, emulated=False).algo == "one_shot"  # (W = 4: the heuristic)
    assert cfg.choose_config(8192, 4, cuda, 2, 2, emulated=False) == cfg.ArRmsNormConfig("two_shot", 2, 4)
    assert cfg.choose_config(64 << 20, 4096, cuda, 2, 2, emulated=False).algo == "two_shot"  # past the last row
    assert cfg.choose_config(8192 * 2 * 8, 8, cuda, 2, 2, emulated=False).num_warps == 8  # hidden 8192
    # Another world size has no table: all_reduce's heuristic (one-shot up to 512 KiB / W).
    rows_at_most = cfg.SPIN_WORDS_ROWS * 2048 * 2  # the most rows that take the spin, of hidden 2048
    assert cfg.choose_config(rows_at_most, cfg.SPIN_WORDS_ROWS, cuda, 4, 2, emulated=False).ll_reduce == "spin_words"
    one_more = (cfg.SPIN_WORDS_ROWS + 1) * 2048 * 2
    assert cfg.choose_config(one_more, cfg.SPIN_WORDS_ROWS + 1, cuda, 4, 2, emulated=False).algo == "one_shot"
    assert cfg.choose_config(8192, 4, cuda, 4, 2, emulated=False).algo == "one_shot"
    assert cfg.choose_config(256 << 10, 64, cuda, 4, 2, emulated=False).algo == "two_shot"
    tables["all_reduce|table|8|Fake GPU"] = {"config": {"rows": [[4096, {"algo": "two_shot"}]]}}
    with pytest.raises(cfg.ArRmsNormError, match="all_reduce_residual_rmsnorm: all_reduce: a stored config table"):
        cfg.choose_config(4096, 2, cuda, 8, 2, emulated=False)


def test_the_emulation_takes_the_heuristic_with_few_programs() -> None:
    from triton_dist.ops.ar_rmsnorm import config as cfg

    small = cfg.choose_config(8 * 4096 * 2, 8, torch.device("cpu"), 2, 2, emulated=True)
    large = cfg.choose_config(8192 * 8192 * 2, 8192, torch.device("cpu"), 2, 2, emulated=True)
    assert small.algo == "one_shot" and large.algo == "two_shot"
    assert small.programs <= 2 and large.programs <= 2 and small.num_warps == 1  # the emulation's small config
    one_row = cfg.choose_config(2 * 1024 * 4, 2, torch.device("cpu"), 2, 4, emulated=True)
    assert one_row.programs == 2
    with pytest.raises(cfg.ArRmsNormError, match="algo must be one of"):
        cfg.ArRmsNormConfig("one_shot_pull", 1)
    with pytest.raises(cfg.ArRmsNormError, match=r"two_shot programs must be in \[1, 128\]"):
        cfg.ArRmsNormConfig("two_shot", 129)


def _bad_inputs() -> list[tuple[Callable[[], tuple[Any, Any, Any, float]], str]]:
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    return [
        (lambda: ("no", x, w, 1e-6), "x must be a torch.Tensor"),
        (lambda: (x.int(), x.int(), w.int(), 1e-6), "x must be bfloat16, float16 or float32"),
        (lambda: (x, x.float(), w, 1e-6), r"residual must match x \(bfloat16 \[4, 64\]\), got float32"),
        (lambda: (x, x[:2], w, 1e-6), r"residual must match x"),
        (lambda: (x, x, torch.ones(32, dtype=torch.bfloat16), 1e-6), r"weight must be a bfloat16 \[64\] tensor"),
        (lambda: (x, x, w.float(), 1e-6), r"weight must be a bfloat16 \[64\]"),
        (lambda: (x.t(), x.t(), w, 1e-6), "x must be contiguous"),
        (lambda: (x, x, w, -1.0), "eps must be a float >= 0"),
        (lambda: (torch.zeros(2, 40000), torch.zeros(2, 40000), torch.ones(40000), 1e-6), "hidden size"),
    ]


def _bad_gemm_ar_norm_inputs() -> list[tuple[dict[str, Any], str]]:
    r = torch.zeros(4, 32, dtype=torch.bfloat16)
    w = torch.ones(32, dtype=torch.bfloat16)
    return [
        ({"residual": r}, "needs both residual and norm_weight; residual given, norm_weight not"),
        ({"norm_weight": w}, "needs both residual and norm_weight; norm_weight given, residual not"),
        ({"residual": r[:3], "norm_weight": w}, r"residual must be a bfloat16 \[4, 32\] tensor on cpu \(a @ b is"),
        ({"residual": r.half(), "norm_weight": w}, r"residual must be a bfloat16 \[4, 32\].*got float16"),
        ({"residual": r, "norm_weight": w[:16]}, r"norm_weight must be a bfloat16 \[32\] tensor"),
        ({"residual": "no", "norm_weight": w}, "residual must be a torch.Tensor"),
        ({"residual": r.t().contiguous().t(), "norm_weight": w}, "residual must be contiguous"),
        ({"residual": r, "norm_weight": w, "eps": -1.0}, "eps must be a float >= 0"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_gemm_ar_norm_inputs())))
def test_gemm_ar_norm_bad_input_raises_naming_the_tensor(case: int) -> None:
    import triton_dist.ops
    from triton_dist.ops.gemm_ar import GemmArError

    kwargs, text = _bad_gemm_ar_norm_inputs()[case]
    a = torch.zeros(4, 16, dtype=torch.bfloat16)
    b = torch.zeros(16, 32, dtype=torch.bfloat16)
    with pytest.raises(GemmArError, match=text):
        triton_dist.ops.gemm_ar(a, b, **kwargs)


def test_gemm_ar_norm_traces_to_its_custom_op() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import triton_dist.ops

    def layer(a: torch.Tensor, b: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        normed, new_residual = triton_dist.ops.gemm_ar(a, b, residual=residual, norm_weight=weight, eps=1e-5)
        return normed + new_residual

    args = (torch.randn(4, 16).half(), torch.randn(16, 32).half(), torch.randn(4, 32).half(), torch.ones(32).half())
    graph = make_fx(layer, tracing_mode="fake")(*args)
    calls = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert torch.ops.triton_dist.gemm_ar_rmsnorm.default in calls
    with pytest.raises(ValueError, match=r"norm_weight must be a float16 \[32\]"):
        make_fx(layer, tracing_mode="fake")(*args[:3], torch.ones(31).half())


@pytest.mark.parametrize("case", range(len(_bad_inputs())))
def test_bad_input_raises_naming_the_tensor(case: int) -> None:
    import triton_dist.ops
    from triton_dist.ops.ar_rmsnorm import ArRmsNormError

    make, text = _bad_inputs()[case]
    with pytest.raises(ArRmsNormError, match=text):
        triton_dist.ops.all_reduce_residual_rmsnorm(*make())


def test_not_initialized_is_an_error_that_says_so() -> None:
    import triton_dist.ops

    x = torch.zeros(2, 16)
    with pytest.raises(RuntimeError, match="triton_dist.init"):
        triton_dist.ops.all_reduce_residual_rmsnorm(x, x, torch.ones(16))


def test_the_custom_op_traces_with_fake_tensors() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    import triton_dist.ops

    def layer(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        normed, new_residual = triton_dist.ops.all_reduce_residual_rmsnorm(x * 2, residual, weight, 1e-5)
        return normed + new_residual

    args = (torch.randn(4, 64), torch.randn(4, 64), torch.ones(64))
    graph = make_fx(layer, tracing_mode="fake")(*args)
    calls = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert torch.ops.triton_dist.all_reduce_residual_rmsnorm.default in calls
    with pytest.raises(ValueError, match="weight must be a float32 \\[64\\]"):
        make_fx(layer, tracing_mode="fake")(args[0], args[1], torch.ones(63))


def test_the_fp8_custom_op_traces_with_fake_tensors() -> None:
    """The e4m3 variant under tracing: its own custom op, fake outputs of e4m3, fp32 [..., 1] and x's dtype."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from triton_dist.ops.ar_rmsnorm import all_reduce_residual_rmsnorm_fp8

    def layer(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        quantized, scale, new_residual = all_reduce_residual_rmsnorm_fp8(x, residual, weight, 1e-5)
        assert quantized.dtype == torch.float8_e4m3fn and scale.shape == (*x.shape[:-1], 1)
        return quantized.float() * scale + new_residual

    args = (torch.randn(2, 4, 64), torch.randn(2, 4, 64), torch.ones(64))
    graph = make_fx(layer, tracing_mode="fake")(*args)
    calls = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert torch.ops.triton_dist.all_reduce_residual_rmsnorm_fp8.default in calls


def _ll_kernel_ptx(
    kernel: Any,
    dtype: str,
    hidden: int,
    rows: int,
    slices: int,
    fp8: bool,
    watched: bool,
    wide: bool | None = None,
    extra: dict[str, str] | None = None,
    num_warps: int = 0,
    constants: dict[str, Any] | None = None,
) -> tuple[str, int, int]:
    """An LL AR + RMSNorm kernel compiled for sm_90 as the op launches it: its PTX, a row's words and the program's
    warps. ``wide``: the kernel's ``WIDE`` (None: a kernel without it); those kernels also take ``hidden`` as a
    multiple of 16, as the op's wide payloads need. ``extra``: parameters beyond the split kernel's. ``num_warps``:
    0 for ``ll_num_warps`` at 4 (a program holds whole rows). ``constants``: constexprs beyond the split kernel's."""
    from dl_compile import assembly, compile_kernel, need_real_library

    from triton_dist.ops.all_reduce.config import ll_elements_per_word
    from triton_dist.ops.ar_rmsnorm import config as cfg

    need_real_library("sm_90")
    itemsize = 4 if dtype == "fp32" else 2
    pointer = f"*{dtype}"
    signature = {name: pointer for name in ("x_ptr", "residual_ptr", "weight_ptr", "normed_ptr", "new_residual_ptr")}
    signature |= {"normed_ptr": "*fp8e4nv" if fp8 else pointer, "scale_ptr": "*fp32" if fp8 else pointer}
    signature |= {"eps": "fp32", "data_ptr": "*i64", "epochs_ptr": "*i32", "rows": "i32", "hidden": "i32"}
    signature |= extra or {}
    words = cfg.ll_row_words(hidden, itemsize)
    constexprs = {
        "REGION": cfg.ll_group_words(hidden, itemsize, 2),
        "RANK_WORDS": cfg.ll_group_words(hidden, itemsize, 2) // 4,
        "BLOCK_W": words,
        "ROUND_ROWS": rows,
        "SLICES": slices,
        "PER_WORD": ll_elements_per_word(itemsize),
        "FP8": fp8,
        **({} if wide is None else {"WIDE": wide}),
        "WATCHED": watched,
        "EMULATED": False,
        **(constants or {}),
    }
    num_warps = num_warps or cfg.ll_num_warps(hidden, itemsize, 4)
    aligned = ("x_ptr", "residual_ptr", "weight_ptr", "normed_ptr", "new_residual_ptr", "data_ptr")
    aligned += () if wide is None else ("hidden",)
    compiled = compile_kernel(kernel, signature, "sm_90", constexprs, aligned, num_warps)
    return assembly(compiled, "sm_90"), words, num_warps
