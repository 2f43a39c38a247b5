"""The host side of ``all_reduce_residual_rmsnorm``: checks, one plan per call signature, the custom op, the function.

As ``all_reduce``: a signature's first call picks the config, checks with every rank that they call alike (a
collective, ``ops.common.dispatch.PlanCache``), allocates the workspace and launches through Triton, keeping the
launch plan; later calls check, look the plan up and relaunch it (``eps`` is passed per call).
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from triton_dist import runtime as rt
from triton_dist.compiler.watchdog import watchdog_enabled
from triton_dist.ops.ar_rmsnorm.config import (
    EMULATED_LL_SLOTS,
    FP8_DTYPE,
    MAX_HIDDEN,
    SLOTS,
    SUPPORTED_DTYPES,
    ArRmsNormConfig,
    ArRmsNormError,
    block_h,
    choose_config,
    ll_group_words,
    ll_launch,
    ll_launch_warps,
    ll_max_round_rows,
    ll_region_bytes,
    ll_row_words,
    ll_spin_fp8_config,
    region_bytes,
    round_rows,
)
from triton_dist.ops.ar_rmsnorm.kernels import (
    _ar_rmsnorm_kernel,
    _ar_rmsnorm_ll_atomic_kernel,
    _ar_rmsnorm_ll_kernel,
    _ar_rmsnorm_ll_reader_kernel,
    _ar_rmsnorm_ll_spin_kernel,
)
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import emulated, emulated_world, gpu_world, on_device, peer_world
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch
from triton_dist.ops.common.ll_words import ll_elements_per_word
from triton_dist.ops.common.slot_workspace import slot_workspace
from triton_dist.runtime.emulation import visibility

OP = "all_reduce_residual_rmsnorm"


class _Empty:
    """The plan of a call without rows: nothing to launch."""

    def launch(self, device: torch.device, *tensors: object) -> None:
        """Enqueue nothing."""


_plans: PlanCache[LaunchPlan | EmulatedLaunch | _Empty] = PlanCache(OP, ArRmsNormError)


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


def check_inputs(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    device: torch.device | None = None,
) -> None:
    """Raise ArRmsNormError naming the first problem: a non-tensor, a tensor off ``device`` (when given), an
    unsupported dtype, ``residual`` unlike ``x``, ``weight`` not ``[hidden]`` of x's dtype, a layout, a hidden size
    past ``MAX_HIDDEN``, a negative ``eps``. Fake tensors pass (no device given while tracing)."""
    for name, value in (("x", x), ("residual", residual), ("weight", weight)):
        if not isinstance(value, torch.Tensor):
            raise ArRmsNormError(f"{OP}: {name} must be a torch.Tensor, got {type(value).__name__}")
        if device is not None and value.device != device:
            raise ArRmsNormError(f"{OP}: {name} is on {value.device}, but this rank's triton_dist device is {device}")
        if not value.is_contiguous():
            raise ArRmsNormError(f"{OP}: {name} must be contiguous, got strides {value.stride()}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise ArRmsNormError(f"{OP}: x must be bfloat16, float16 or float32, got {x.dtype}")
    if x.dim() < 1:
        raise ArRmsNormError(f"{OP}: x must have a hidden dimension (at least 1-D), got a scalar")
    if residual.shape != x.shape or residual.dtype != x.dtype or residual.device != x.device:
        raise ArRmsNormError(f"{OP}: residual must match x ({_describe(x)}), got {_describe(residual)}")
    hidden = x.shape[-1]
    if weight.shape != (hidden,) or weight.dtype != x.dtype or weight.device != x.device:
        raise ArRmsNormError(
            f"{OP}: weight must be a {str(x.dtype).removeprefix('torch.')} [{hidden}] tensor (x's hidden size), "
            f"got {_describe(weight)}"
        )
    if not 1 <= hidden <= MAX_HIDDEN:
        raise ArRmsNormError(f"{OP}: the hidden size (x's last dimension) must be in [1, {MAX_HIDDEN}], got {hidden}")
    if not isinstance(eps, (int, float)) or not eps >= 0:
        raise ArRmsNormError(f"{OP}: eps must be a float >= 0, got {eps!r}")


def _check(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    """``check_inputs`` on the eager path; where it fails, again with this rank's device (named first)."""
    try:
        check_inputs(x, residual, weight, eps)
    except ArRmsNormError:
        if isinstance(x, torch.Tensor) and rt.is_initialized():
            device = (emulated_world() or gpu_world(OP, ArRmsNormError)).device
            check_inputs(x, residual, weight, eps, device)
        raise


def _launch(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    normed: torch.Tensor,
    new_residual: torch.Tensor,
    scale: torch.Tensor | None,
    config: ArRmsNormConfig | None,
) -> None:
    """Enqueue the fused op (inputs checked, outputs fresh: ``new_residual`` like x, ``normed`` like x or of
    ``FP8_DTYPE`` with ``scale`` fp32 [rows]) on the current stream."""
    scale_arg = new_residual if scale is None else scale  # never read without FP8
    aligned = tuple(t.data_ptr() % 16 == 0 for t in (x, residual, weight, normed, new_residual, scale_arg))
    # The watchdog: the LL kernel is compiled for it (bounded polls).
    signature = (tuple(x.shape), x.dtype, normed.dtype, x.device, aligned, config, watchdog_enabled())
    plan = _plans.get(signature)
    if plan is None:  # the first call launches
        _first_call(x, residual, weight, eps, normed, new_residual, scale_arg, config, signature)
    else:
        plan.launch(x.device, x, residual, weight, normed, new_residual, scale_arg, float(eps))


def _first_call(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    normed: torch.Tensor,
    new_residual: torch.Tensor,
    scale: torch.Tensor,
    config: ArRmsNormConfig | None,
    signature: tuple,
) -> LaunchPlan | EmulatedLaunch | _Empty:
    world = peer_world(OP, ArRmsNormError)
    check_inputs(x, residual, weight, eps, world.device)
    hidden = x.shape[-1]
    rows = x.numel() // hidden
    if config is None:
        nbytes = x.numel() * x.element_size()
        config = choose_config(
            nbytes, max(rows, 1), x.device, world.world_size, x.element_size(), emulated(world),
            fp8=normed.dtype == FP8_DTYPE,
        )  # fmt: skip
    if config.algo == "one_shot_ll":  # a config that cannot run raises before the collective
        ll_launch(rows, hidden, x.element_size(), config, emulated(world))
        if emulated(world) and visibility.mode() == "happens-before":
            raise ArRmsNormError(
                f"{OP}: one_shot_ll reads words that no release / acquire orders, which the emulation's "
                f"happens-before mode (${visibility.VISIBILITY_ENV}) keeps stale forever: use one_shot or two_shot"
            )
    described = {"shape": list(x.shape), "dtype": str(x.dtype), "out": str(normed.dtype), "config": asdict(config)}

    def make() -> LaunchPlan | EmulatedLaunch | _Empty:
        if rows == 0:
            return _Empty()
        with on_device(x.device):
            if config.algo == "one_shot_ll":
                return _first_launch_ll(x, residual, weight, eps, normed, new_residual, scale, config, world)
            return _first_launch(x, residual, weight, eps, normed, new_residual, scale, config, world.world_size)

    return _plans.build(signature, described, make)


def _first_launch(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    normed: torch.Tensor,
    new_residual: torch.Tensor,
    scale: torch.Tensor,
    config: ArRmsNormConfig,
    world_size: int,
) -> LaunchPlan | EmulatedLaunch:
    hidden = x.shape[-1]
    rows = x.numel() // hidden
    chunk = -(-rows // world_size)
    per_round = rows if config.algo == "one_shot" else chunk
    together = round_rows(config.algo, rows, hidden, x.element_size(), world_size, config.programs)
    programs = max(1, min(config.programs, -(-per_round // together)))
    region = region_bytes(config.algo, hidden, x.element_size(), world_size)
    ws = slot_workspace(f"{OP}.{config.algo}", SLOTS[config.algo], 2 * world_size, region)
    named = {
        "x_ptr": x,
        "residual_ptr": residual,
        "weight_ptr": weight,
        "normed_ptr": normed,
        "new_residual_ptr": new_residual,
        "scale_ptr": scale,
        "eps": float(eps),
        "data_ptr": ws.data_as(x.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "rows": rows,
        "hidden": hidden,
        "chunk": chunk,
        "flags_stride": ws.flags.shape[1],
        "REGION": region // x.element_size(),
        "BLOCK_H": block_h(hidden),
        "ROUND_ROWS": together,
        # A sender's block of rows: fixed by the workspace, never by the call (kernels.py: the layout is fixed).
        "RANK_STRIDE": region // x.element_size() // (2 * world_size),
        "TWO_SHOT": config.algo == "two_shot",
        "FP8": normed.dtype == FP8_DTYPE,
        "WORLD": notify_world(world_size),
    }
    return first_launch(_ar_rmsnorm_kernel, (programs, 1, 1), named, 7, num_warps=config.num_warps)


def _first_launch_ll(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    normed: torch.Tensor,
    new_residual: torch.Tensor,
    scale: torch.Tensor,
    config: ArRmsNormConfig,
    world: rt.World,
) -> LaunchPlan | EmulatedLaunch:
    """The LL one-shot's first launch (``kernels._ar_rmsnorm_ll_kernel``; ``config.ll_single_reader``:
    ``kernels._ar_rmsnorm_ll_reader_kernel``; ``config.ll_reduce`` "atomic": ``kernels._ar_rmsnorm_ll_atomic_kernel``,
    "spin" / "spin_words": ``kernels._ar_rmsnorm_ll_spin_kernel``, but for the e4m3 output, which "atomic" writes
    (``ll_spin_fp8_config``); each in a workspace of its own): the slot workspace of its slices per row (8-byte
    words; fewer slots under the emulation; "atomic" and "spin": a slot's flags hold its group's arrival counter and
    its per-row partial sums of squares; "spin_words": its per-row partials as 8-byte LL words), one round per
    program, ``ll_launch``'s grid of ``ll_launch_warps``."""
    hidden = x.shape[-1]
    rows = x.numel() // hidden
    itemsize = x.element_size()
    on_cpu = emulated(world)
    if normed.dtype == FP8_DTYPE:
        config = ll_spin_fp8_config(config)
    launch = ll_launch(rows, hidden, itemsize, config, on_cpu)
    # One workspace per slices-per-row: a slot's epoch counts the calls of its program, and all programs of a group
    # must count alike, so its slots are always used together (a group spans `slices` slots of its workspace).
    region = ll_region_bytes(hidden, itemsize, world.world_size, launch.slices)
    slots = EMULATED_LL_SLOTS if on_cpu else SLOTS["one_shot_ll"]
    counted = config.ll_reduce != "row"  # the slices' partial sums of squares exchanged through the flags
    variant = "one_shot_ll" + ("_reader" if config.ll_single_reader else "" if not counted else f"_{config.ll_reduce}")
    # "atomic", "spin": flag 0 of a group's first slot counts its programs' arrivals, flags 1.. of each slot its
    # partials (each its own workspace: a call adds SLICES to a counter, which names its target or last arriver).
    # "spin_words": flags 2 + 2 r of a slot its partial word of row r (an even count: 8-byte aligned words).
    words = config.ll_reduce == "spin_words"
    most_rows = ll_max_round_rows(hidden, itemsize)
    flags = (2 + 2 * most_rows if words else 1 + most_rows) if counted else 1
    ws = slot_workspace(f"{OP}.{variant}.{launch.slices}", slots, flags, region)
    named = {
        "x_ptr": x,
        "residual_ptr": residual,
        "weight_ptr": weight,
        "normed_ptr": normed,
        "new_residual_ptr": new_residual,
        "scale_ptr": scale,
        "eps": float(eps),
        "data_ptr": ws.data_as(torch.int64),
        "epochs_ptr": ws.epochs,
        "rows": rows,
        "hidden": hidden,
        "REGION": ll_group_words(hidden, itemsize, world.world_size),
        "RANK_WORDS": ll_group_words(hidden, itemsize, world.world_size) // (2 * world.world_size),
        "BLOCK_W": ll_row_words(hidden, itemsize),
        "ROUND_ROWS": launch.rows,
        "SLICES": launch.slices,
        "PER_WORD": ll_elements_per_word(itemsize),
        "FP8": normed.dtype == FP8_DTYPE,
        "WATCHED": watchdog_enabled(),
        "EMULATED": on_cpu,
    }
    num_warps = ll_launch_warps(hidden, itemsize, config, launch.slices)
    if not config.ll_single_reader and not counted:
        return first_launch(_ar_rmsnorm_ll_kernel, (launch.programs, 1, 1), named, 7, num_warps=num_warps)
    # Packed pairs: 16-bit elements, an even hidden size, and every tensor 16-byte aligned (the plan's signature
    # holds that alignment, so a later call on this plan has it too).
    tensors = (x, residual, weight, new_residual) + (() if normed.dtype == FP8_DTYPE else (normed,))
    named["WIDE"] = itemsize == 2 and hidden % 2 == 0 and all(t.data_ptr() % 16 == 0 for t in tensors)
    if counted:
        named = {**named, "flags_ptr": ws.flags, "flags_stride": ws.flags.shape[1]}
        if config.ll_reduce == "atomic":
            kernel = _ar_rmsnorm_ll_atomic_kernel
        else:
            kernel, named["WORDS"] = _ar_rmsnorm_ll_spin_kernel, words
    else:
        kernel = _ar_rmsnorm_ll_reader_kernel
    return first_launch(kernel, (launch.programs, 1, 1), named, 7, num_warps=num_warps)


def _run(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    config: ArRmsNormConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused op with ``config`` (None: the chosen one), inputs checked: what the custom op runs, and how
    tests and benchmarks force an algorithm, e.g. the LL one-shot: ``_run(x, residual, weight, eps,
    ArRmsNormConfig("one_shot_ll", 256, 8))``."""
    _check(x, residual, weight, eps)
    normed = torch.empty_like(x)
    new_residual = torch.empty_like(x)
    _launch(x, residual, weight, eps, normed, new_residual, None, config)
    return normed, new_residual


def _check_fp8() -> None:
    """Raise ArRmsNormError where this build cannot write e4m3 (ROCm: its fp8 is another format)."""
    if torch.version.hip is not None:
        raise ArRmsNormError(f"{OP}_fp8: the e4m3 output (torch.float8_e4m3fn) needs an NVIDIA GPU; this is ROCm")


def scale_shape(x: torch.Tensor) -> tuple[int, ...]:
    """The per-token scale's shape: x's with a last dimension of 1 (``normed_fp8.float() * scale`` broadcasts)."""
    return (*x.shape[:-1], 1)


def _run_fp8(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    config: ArRmsNormConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_run`` with the e4m3 output: (normed_fp8, scale, new_residual)."""
    _check(x, residual, weight, eps)
    _check_fp8()
    normed = torch.empty(x.shape, dtype=FP8_DTYPE, device=x.device)
    scale = torch.empty(scale_shape(x), dtype=torch.float32, device=x.device)
    new_residual = torch.empty_like(x)
    _launch(x, residual, weight, eps, normed, new_residual, scale, config)
    return normed, scale, new_residual


@torch.library.custom_op("triton_dist::all_reduce_residual_rmsnorm", mutates_args=())
def _ar_rmsnorm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    return _run(x, residual, weight, eps)


@_ar_rmsnorm_op.register_fake
def _ar_rmsnorm_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    check_inputs(x, residual, weight, eps)
    return torch.empty_like(x), torch.empty_like(x)


@torch.library.custom_op("triton_dist::all_reduce_residual_rmsnorm_fp8", mutates_args=())
def _ar_rmsnorm_fp8_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _run_fp8(x, residual, weight, eps)


@_ar_rmsnorm_fp8_op.register_fake
def _ar_rmsnorm_fp8_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    check_inputs(x, residual, weight, eps)
    normed = x.new_empty(x.shape, dtype=FP8_DTYPE)
    return normed, x.new_empty(scale_shape(x), dtype=torch.float32), torch.empty_like(x)


def all_reduce_residual_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(normed, new_residual)``: ``new_residual = residual + sum over ranks of x`` and
    ``normed = RMSNorm(new_residual) * weight``, in one kernel (``torch.ops.triton_dist``).

    ``x``: this rank's partial sums, a contiguous bf16 / fp16 / fp32 tensor ``[..., hidden]`` (hidden <= 32768) on
    this rank's device; ``residual``: like ``x``; ``weight``: ``[hidden]`` of x's dtype. Every rank calls with the
    same shapes in the same order (checked collectively the first time a shape is seen); ``residual`` and ``weight``
    are expected to be the same on every rank (tensor parallelism), which makes the outputs bit-identical on all
    ranks. Computed in fp32: ``h = residual + sum_r x_r`` (the ranks' x summed in rank order), ``new_residual`` is
    ``h`` rounded to x's dtype and ``normed = new_residual * rsqrt(mean(new_residual^2) + eps) * weight`` (the norm
    of the residual returned, as torch's add then RMSNorm computes it), returned in x's dtype. The one-shot or
    two-shot algorithm follows ``all_reduce``'s choice for the message size.
    :func:`all_reduce_residual_rmsnorm_fp8` returns ``normed`` in e4m3 with a per-token scale instead.

    Needs ``triton_dist.init()`` on GPUs, or ``init(device="cpu")`` under ``TRITON_INTERPRET=1``. Bad input raises
    :class:`ArRmsNormError` before any launch. No host synchronization: CUDA-graph capture works once the shape has
    been called eagerly (the first call allocates the workspace and checks the ranks agree). Under
    ``torch.compile`` this is the custom op; eager calls skip the dispatcher.
    """
    if not plain_eager(x, residual, weight):
        return torch.ops.triton_dist.all_reduce_residual_rmsnorm(x, residual, weight, eps)
    return _run(x, residual, weight, eps)


def all_reduce_residual_rmsnorm_fp8(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(normed_fp8, scale, new_residual)``: :func:`all_reduce_residual_rmsnorm` with the normed rows quantized to
    fp8 (e4m3, ``torch.float8_e4m3fn``) with one fp32 scale per token (row), in the same one kernel
    (``torch.ops.triton_dist.all_reduce_residual_rmsnorm_fp8``).

    Per row, from the fp32 normed row ``y`` (of the rounded ``new_residual``; ``y`` itself is never rounded to x's
    dtype): ``scale = max(max|y| / 448,
    1 / (448 * 512))`` and ``normed_fp8 = clamp(y / scale, -448, 448)`` rounded to nearest, so
    ``normed_fp8.float() * scale`` approximates ``y`` (the row's largest magnitude maps to 448). ``scale`` has x's
    shape with a last dimension of 1 (``[tokens, 1]`` for 2-D x: the per-token scale an fp8 GEMM takes);
    ``new_residual`` is as in :func:`all_reduce_residual_rmsnorm`, in x's dtype. The arguments, the collective
    agreement, CUDA-graph capture and the bit-identical results across ranks are as there. Raises
    :class:`ArRmsNormError` for bad input, and on ROCm (another fp8 format).
    """
    if not plain_eager(x, residual, weight):
        return torch.ops.triton_dist.all_reduce_residual_rmsnorm_fp8(x, residual, weight, eps)
    return _run_fp8(x, residual, weight, eps)
