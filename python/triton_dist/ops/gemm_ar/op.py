"""The host side of ``gemm_ar``: input checks, one plan per call signature, the custom op and the public function.

A call's first time with a signature (shapes, row strides, dtype, device, the 16-byte alignment of a, b and out,
the config argument) picks the config (``chosen_config``), checks with every rank that they call alike (a
collective, ``ops.common.dispatch.PlanCache``), allocates the workspace and launches, keeping the plan: the fused
kernel's :class:`~triton_dist.ops.common.launch.LaunchPlan`, or the cuBLAS path's :class:`CublasPlan`. Later calls
check their inputs, look the plan up (one dict lookup) and relaunch it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import overload

import torch
import triton

from triton_dist import runtime as rt
from triton_dist.ops.all_reduce import all_reduce_in_place
from triton_dist.ops.ar_rmsnorm import MAX_HIDDEN, all_reduce_residual_rmsnorm
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import emulated_world, gpu_world, on_device, peer_world
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.common.gpu import sm_count
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch
from triton_dist.ops.common.slot_workspace import SlotWorkspace, slot_workspace
from triton_dist.ops.gemm_ar.config import (
    SLOTS,
    SUPPORTED_DTYPES,
    GemmARConfig,
    GemmArError,
    default_config,
    lookup_tuned,
    split_k_geometry,
    split_k_grid,
    split_k_workspace_sizes,
    tuning_key,
    workspace_region_bytes,
)
from triton_dist.ops.gemm_ar.kernels import _gemm_ar_kernel, _gemm_ar_split_k_kernel

OP = "gemm_ar"
EMULATED_CONFIG = GemmARConfig(16, 16, 16, num_warps=1, num_stages=1)
"""The configuration under the CPU emulation (``ops.common.errors.emulated``): the fused kernel with 16x16x16
tiles, which Triton's interpreter runs quickly."""


@dataclass
class CublasPlan:
    """The cuBLAS path's plan: ``torch.matmul`` into the output, then triton_dist's all-reduce of it in place (its
    own config choice and workspace). Launches like a ``LaunchPlan``."""

    exchange: bool

    def launch(self, device: torch.device, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        """Enqueue the product and its all-reduce on ``device``'s current stream."""
        if device.type == "cuda" and device.index != torch.cuda.current_device():
            with torch.cuda.device(device):
                self.launch(device, a, b, out)
            return
        product = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=device)
        torch.matmul(a, b, out=product)
        if self.exchange:
            all_reduce_in_place(product)
        if product is not out:
            out.copy_(product)


@dataclass
class ZeroPlan:
    """The plan of a call with K = 0: the sum of empty products is zero."""

    def launch(self, device: torch.device, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        """Zero ``out`` on the current stream."""
        out.zero_()


@dataclass
class EmptyPlan:
    """The plan of a call with an empty output: nothing to launch."""

    def launch(self, device: torch.device, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        """Enqueue nothing."""


Plan = LaunchPlan | EmulatedLaunch | CublasPlan | ZeroPlan | EmptyPlan
_plans: PlanCache[Plan] = PlanCache(OP, GemmArError)
"""The plan of each call signature (see the module docstring), per world."""


def check_inputs(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, device: torch.device | None = None
) -> None:
    """Raise GemmArError naming the first problem: not tensors, not on ``device`` (when given: this rank's
    triton_dist device) or not on one device, not 2-D, an unsupported or mixed dtype, not row-major, shapes that do
    not chain, an ``out`` that cannot take the result. Fake tensors pass (no device given while tracing)."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise GemmArError(f"gemm_ar: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("a", a), ("b", b)):
        if device is not None and t.device != device:
            raise GemmArError(f"gemm_ar: {name} is on {t.device}, but this rank's triton_dist device is {device}")
    if a.device != b.device:
        raise GemmArError(f"gemm_ar: a is on {a.device} but b is on {b.device}")
    for name, t in (("a", a), ("b", b)):
        if t.dim() != 2:
            raise GemmArError(f"gemm_ar: {name} must be 2-D, got shape {list(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise GemmArError(f"gemm_ar: {name} must be bfloat16 or float16, got {t.dtype}")
        if t.stride(1) != 1:
            raise GemmArError(f"gemm_ar: {name} must be row-major (stride 1 along dim 1), got strides {t.stride()}")
    if a.dtype != b.dtype:
        raise GemmArError(f"gemm_ar: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise GemmArError(
            f"gemm_ar: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] (this rank's K slice) must equal "
            "b.shape[0]"
        )
    if out is not None:
        shape = (a.shape[0], b.shape[1])
        if (
            not isinstance(out, torch.Tensor)
            or tuple(out.shape) != shape
            or out.dtype != a.dtype
            or out.device != a.device
            or out.stride(1) != 1
        ):
            got = (
                f"{out.dtype} {list(out.shape)} with strides {out.stride()} on {out.device}"
                if isinstance(out, torch.Tensor)
                else type(out).__name__
            )
            raise GemmArError(
                f"gemm_ar: out must be a row-major {a.dtype} tensor of shape {list(shape)} on {a.device}, got {got}"
            )


def _check(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> None:
    """``check_inputs`` on the eager path: the checks that need no world first; where one fails, all of them again
    in order, the devices first. Good tensors on another device have no plan, and the first call checks the
    device (``_first_call``)."""
    try:
        check_inputs(a, b, out)
    except GemmArError:
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and rt.is_initialized():
            check_inputs(a, b, out, (emulated_world() or gpu_world(OP, GemmArError)).device)
        raise


def chosen_config(a: torch.Tensor, b: torch.Tensor) -> GemmARConfig:
    """What a call without a config runs: the tuned config for its shape on this GPU and world size
    (``lookup_tuned``), else ``default_config``."""
    world = rt.current_world()
    m, k_local = a.shape
    n = b.shape[1]
    if a.device.type == "cpu" and emulated_world() is not None:
        return EMULATED_CONFIG
    tuned = lookup_tuned(tuning_key(m, n, k_local, a.dtype, world.world_size, a.device))
    if tuned is not None:
        return tuned
    backend = "hip" if torch.version.hip else "cuda"
    sms = sm_count(a.device) if a.device.type == "cuda" else None
    return default_config(m, n, k_local, backend, sms)


def _launch(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig | None, local: bool = False
) -> None:
    """Enqueue ``sum over ranks of a @ b`` into ``out`` (checked) on the current stream: the signature's plan, or
    the first call of the signature. ``config`` None: ``chosen_config``. ``local``: this rank's ``a @ b`` only, with
    the chosen config's GEMM (its exchange off): what the norm epilogue feeds to ``all_reduce_residual_rmsnorm``."""
    aligned = (a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
    signature = (a.shape, b.shape, a.stride(0), b.stride(0), out.stride(0), a.dtype, a.device, aligned, config, local)
    plan = _plans.get(signature)
    if plan is not None:
        plan.launch(a.device, a, b, out)
    else:
        _first_call(a, b, out, config, signature, local)


def _first_call(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: GemmARConfig | None,
    signature: tuple,
    local: bool = False,
) -> None:
    """What a repeated signature skips: the device, the config, the ranks' agreement (a collective), the first
    launch, which gives the plan."""
    world = peer_world(OP, GemmArError)
    if a.device != world.device:
        raise GemmArError(f"gemm_ar: a is on {a.device}, but this rank's triton_dist device is {world.device}")
    if config is None:
        config = chosen_config(a, b)
    if local:
        config = replace(config, exchange=False)
    m, k = a.shape
    n = b.shape[1]
    if config.gemm == "triton" and config.split_k > 1:
        split_k_geometry(m, n, k, config)  # refuse before the collective and before allocating anything
    described = {"M": m, "N": n, "K/W": k, "dtype": str(a.dtype), "config": asdict(config)}
    plan = _plans.build(signature, described, lambda: _plan(a, b, out, config, world))
    if not isinstance(plan, LaunchPlan | EmulatedLaunch):  # launched as it was made; the others launch now
        plan.launch(a.device, a, b, out)


def _plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig, world: rt.World) -> Plan:
    """The plan of a signature; a fused kernel's is made by its first launch (through Triton)."""
    if out.numel() == 0:
        return EmptyPlan()
    if a.shape[1] == 0:
        return ZeroPlan()
    if config.gemm == "cublas":
        return CublasPlan(config.exchange)
    with on_device(a.device):
        if config.split_k > 1:
            return _first_split_k_launch(a, b, out, config, world.world_size)
        return _first_launch(a, b, out, config, world.world_size)


def _first_launch(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig, world_size: int
) -> LaunchPlan | EmulatedLaunch:
    m, k = a.shape
    n = b.shape[1]
    region_bytes = workspace_region_bytes(world_size)
    ws = slot_workspace("gemm_ar", SLOTS, 2 * world_size, region_bytes)
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    named = {
        "a_ptr": a,
        "b_ptr": b,
        "out_ptr": out,
        "data_ptr": ws.data_as(a.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "M": m,
        "N": n,
        "K": k,
        "stride_am": a.stride(0),
        "stride_bk": b.stride(0),
        "stride_om": out.stride(0),
        "flags_stride": ws.flags.shape[1],
        "REGION": region_bytes // a.element_size(),
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": config.exchange,
        "WORLD": notify_world(world_size),
    }
    grid = (min(tiles, SLOTS), 1, 1)
    return first_launch(_gemm_ar_kernel, grid, named, 3, num_warps=config.num_warps, num_stages=config.num_stages)


def split_k_launch_args(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: GemmARConfig,
    world_size: int,
    sms: int,
    ws: SlotWorkspace,
) -> tuple[tuple[int, int, int], dict]:
    """(grid, named arguments) of a split-K launch; ``ws`` has ``data`` (viewed as fp32), ``flags`` [2, ...] and
    ``epochs`` (two int32: the kernel's int64 call state, ``ops/common/call_epoch.py``). Raises GemmArError (from
    ``split_k_geometry``) first."""
    m, k = a.shape
    n = b.shape[1]
    tiles, splits, chunk = split_k_geometry(m, n, k, config)
    _, region_bytes = split_k_workspace_sizes(world_size)
    named = {
        "a_ptr": a,
        "b_ptr": b,
        "out_ptr": out,
        "data_ptr": ws.data_as(torch.float32),
        "flags_ptr": ws.flags,
        "state_ptr": ws.epochs.view(torch.int64),  # the two int32 epochs: one call state (ops/common/call_epoch.py)
        "M": m,
        "N": n,
        "K": k,
        "stride_am": a.stride(0),
        "stride_bk": b.stride(0),
        "stride_om": out.stride(0),
        "chunk": chunk,
        "splits": splits,
        "flags_stride": ws.flags.shape[1],
        "REGION": region_bytes // 4,
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": config.exchange,
        "WORLD": notify_world(world_size),
    }
    return (split_k_grid(tiles * splits, sms), 1, 1), named


def _first_split_k_launch(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig, world_size: int
) -> LaunchPlan | EmulatedLaunch:
    flags_per_parity, region_bytes = split_k_workspace_sizes(world_size)
    # Two "slots" = the two parities; the epochs tensor's two int32 are the kernel's call state (call_epoch.py).
    ws = slot_workspace("gemm_ar_split_k", 2, flags_per_parity, region_bytes)
    grid, named = split_k_launch_args(a, b, out, config, world_size, sm_count(a.device), ws)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    return first_launch(_gemm_ar_split_k_kernel, grid, named, 3, **options)


def _run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig | None = None) -> None:
    """``sum over ranks of a @ b`` into ``out`` with ``config`` (None: ``chosen_config``), inputs checked: how
    benchmarks and GPU checks force a config."""
    _check(a, b, out)
    _launch(a, b, out, config)


def _new_output(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def check_norm_inputs(a: torch.Tensor, b: torch.Tensor, residual: object, norm_weight: object, eps: object) -> None:
    """Raise GemmArError naming the first problem of the norm epilogue's arguments (``a`` and ``b`` checked):
    ``residual`` not a contiguous [M, N] tensor of a's dtype on a's device, ``norm_weight`` not [N] of that dtype
    there, an N past the norm's ``MAX_HIDDEN`` (a program holds a row), a negative ``eps``."""
    m, n = a.shape[0], b.shape[1]
    for name, value, shape in (("residual", residual, (m, n)), ("norm_weight", norm_weight, (n,))):
        if not isinstance(value, torch.Tensor):
            raise GemmArError(f"gemm_ar: {name} must be a torch.Tensor, got {type(value).__name__}")
        if tuple(value.shape) != shape or value.dtype != a.dtype or value.device != a.device:
            raise GemmArError(
                f"gemm_ar: {name} must be a {str(a.dtype).removeprefix('torch.')} {list(shape)} tensor on {a.device} "
                f"(a @ b is [{m}, {n}]), got {str(value.dtype).removeprefix('torch.')} {list(value.shape)} on "
                f"{value.device}"
            )
        if not value.is_contiguous():
            raise GemmArError(f"gemm_ar: {name} must be contiguous, got strides {value.stride()}")
    if n > MAX_HIDDEN:
        raise GemmArError(f"gemm_ar: the norm epilogue takes N <= {MAX_HIDDEN} (whole rows), got N = {n}")
    if not isinstance(eps, (int, float)) or not eps >= 0:
        raise GemmArError(f"gemm_ar: eps must be a float >= 0, got {eps!r}")


def _run_norm(
    a: torch.Tensor,
    b: torch.Tensor,
    residual: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float = 1e-6,
    config: GemmARConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The norm epilogue, inputs checked: this rank's ``a @ b`` with ``config``'s GEMM (None: ``chosen_config``'s),
    its exchange off, then ``all_reduce_residual_rmsnorm`` of the product. How the custom op and tests run it."""
    _check(a, b)
    check_norm_inputs(a, b, residual, norm_weight, eps)
    product = _new_output(a, b)
    _launch(a, b, product, config, local=True)
    return all_reduce_residual_rmsnorm(product, residual, norm_weight, eps)


@torch.library.custom_op("triton_dist::gemm_ar", mutates_args=())
def _gemm_ar_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check(a, b)
    out = _new_output(a, b)
    _launch(a, b, out, None)  # out is new, row-major [M, N] by construction
    return out


@_gemm_ar_op.register_fake
def _gemm_ar_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_inputs(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op("triton_dist::gemm_ar_rmsnorm", mutates_args=())
def _gemm_ar_rmsnorm_op(
    a: torch.Tensor, b: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    return _run_norm(a, b, residual, norm_weight, eps)


@_gemm_ar_rmsnorm_op.register_fake
def _gemm_ar_rmsnorm_fake(
    a: torch.Tensor, b: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    check_inputs(a, b)
    check_norm_inputs(a, b, residual, norm_weight, eps)
    return a.new_empty((a.shape[0], b.shape[1])), a.new_empty((a.shape[0], b.shape[1]))


@overload
def gemm_ar(
    a: torch.Tensor, b: torch.Tensor, *, residual: None = None, norm_weight: None = None, eps: float = 1e-6
) -> torch.Tensor: ...


@overload
def gemm_ar(
    a: torch.Tensor, b: torch.Tensor, *, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]: ...


def gemm_ar(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    residual: torch.Tensor | None = None,
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``sum over ranks of a @ b`` on every rank (``torch.ops.triton_dist``): GEMM and all-reduce in one kernel, or,
    where that measured slower on NVIDIA (more than 64 rows; 17-32 rows with a short split K: ``default_config``),
    cuBLAS followed by triton_dist's all-reduce. A shape tuned on this GPU and world size (``bench/gemm_ar.py
    --store``, or the package's table) runs the fastest config measured for it (``chosen_config``).

    ``a``: [M, K_local] row-major, ``b``: [K_local, N] row-major, both bf16 or fp16 on this rank's GPU (anywhere in
    memory). Every rank passes its own K slice with the same M, K_local and N (checked collectively on the first
    call of each shape). Accumulates in fp32; partial tiles are rounded to the dtype before the cross-rank sum (as
    an all-reduce of ``a @ b``'s output would be), the sum itself is fp32. Returns [M, N], bit-identical on every
    rank. Bad input raises :class:`GemmArError` before any launch. Needs ``triton_dist.init()`` on GPUs, or
    ``init(device="cpu")`` under ``TRITON_INTERPRET=1`` (the CPU emulation, for tests without GPUs: the fused
    kernel with ``EMULATED_CONFIG`` in Triton's interpreter); CUDA-graph capture works once the shape has been called
    eagerly. Eager calls run the custom op's implementation directly
    (as ``all_reduce`` does); traced calls use the op.

    The norm epilogue of a row-parallel layer: with ``residual`` ([M, N], a's dtype) and ``norm_weight`` ([N]),
    returns ``(normed, new_residual)`` with ``new_residual = residual + sum over ranks of a @ b`` and ``normed =
    RMSNorm(new_residual) * norm_weight`` (``eps``), as ``all_reduce_residual_rmsnorm`` defines them
    (``torch.ops.triton_dist.gemm_ar_rmsnorm``). Two launches: this rank's ``a @ b`` with the GEMM the plain call
    would use (the chosen config, its exchange off; the product rounded to the dtype, as the plain call's partial
    tiles), then the fused all-reduce + residual + RMSNorm kernel of the product, which replaces the plain call's
    exchange. Give both or neither; N at most ``ar_rmsnorm.MAX_HIDDEN``.
    """
    if residual is None and norm_weight is None:
        if not plain_eager(a, b):
            return torch.ops.triton_dist.gemm_ar(a, b)
        _check(a, b)
        out = _new_output(a, b)
        _launch(a, b, out, None)  # out is new, row-major [M, N] by construction
        return out
    if residual is None or norm_weight is None:
        given, missing = ("residual", "norm_weight") if norm_weight is None else ("norm_weight", "residual")
        raise GemmArError(
            f"gemm_ar: the norm epilogue needs both residual and norm_weight; {given} given, {missing} not"
        )
    if not plain_eager(a, b, residual, norm_weight):
        return torch.ops.triton_dist.gemm_ar_rmsnorm(a, b, residual, norm_weight, eps)
    return _run_norm(a, b, residual, norm_weight, eps)
