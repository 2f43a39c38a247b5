"""The host side of ``all_reduce``: input checks, one plan per call signature, the custom op and the public function.

A call's first time with a signature (size, dtype, device, the 16-byte alignment of x and out, the config argument,
whether the wait watchdog is on) picks the config (``config.py``), checks with every rank that they call alike (a
collective, ``ops.common.dispatch.PlanCache``), allocates the workspace (``ops/common/slot_workspace.py``) and
launches through Triton, keeping the :class:`~triton_dist.ops.common.launch.LaunchPlan`. Later calls check their
inputs, look the plan up (one dict lookup) and relaunch it.
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from triton_dist import runtime as rt
from triton_dist.compiler.watchdog import watchdog_enabled
from triton_dist.ops.all_reduce.config import (
    LL_LANES,
    SLOTS,
    SUPPORTED_DTYPES,
    SUPPORTED_OPS,
    AllReduceConfig,
    AllReduceError,
    emulated_config,
    launch_shape,
    ll_elements_per_word,
    ll_region_bytes,
    select_config,
)
from triton_dist.ops.all_reduce.kernels import (
    _one_shot_kernel,
    _one_shot_ll_kernel,
    _one_shot_push_kernel,
    _two_shot_kernel,
)
from triton_dist.ops.all_reduce.nodes import across_nodes_world, check_size, first_nodes_launch
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import emulated, emulated_world, gpu_world, on_device, peer_world
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch
from triton_dist.ops.common.slot_workspace import slot_workspace

OP = "all_reduce"


class _Empty:
    """The plan of an empty message: nothing to launch."""

    def launch(self, device: torch.device, x: torch.Tensor, out: torch.Tensor) -> None:
        """Enqueue nothing."""


_plans: PlanCache[LaunchPlan | EmulatedLaunch | _Empty] = PlanCache(OP, AllReduceError)
"""The plan of each call signature (see the module docstring), per world."""


def check_inputs(x: torch.Tensor, op: str, out: torch.Tensor | None = None, device: torch.device | None = None) -> None:
    """Raise AllReduceError naming the first problem: not a tensor, not on ``device`` (when given: this rank's
    triton_dist device), an unknown ``op``, an unsupported dtype, a layout, an ``out`` unlike ``x``. Fake tensors
    pass (no device given while tracing)."""
    if not isinstance(x, torch.Tensor):
        raise AllReduceError(f"all_reduce: x must be a torch.Tensor, got {type(x).__name__}")
    if device is not None and x.device != device:
        raise AllReduceError(f"all_reduce: x is on {x.device}, but this rank's triton_dist device is {device}")
    if op not in SUPPORTED_OPS:
        raise AllReduceError(f"all_reduce: op must be one of {list(SUPPORTED_OPS)}, got {op!r}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise AllReduceError(f"all_reduce: x must be bfloat16, float16 or float32, got {x.dtype}")
    if not x.is_contiguous():
        raise AllReduceError(f"all_reduce: x must be contiguous, got shape {list(x.shape)} with strides {x.stride()}")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise AllReduceError(f"all_reduce: out must be a torch.Tensor, got {type(out).__name__}")
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device or not out.is_contiguous():
            raise AllReduceError(
                f"all_reduce: out must be a contiguous {x.dtype} tensor of shape {list(x.shape)} on {x.device}, "
                f"got {out.dtype} {list(out.shape)} on {out.device} (contiguous={out.is_contiguous()})"
            )


def _check(x: torch.Tensor, op: str, out: torch.Tensor | None = None) -> None:
    """``check_inputs`` on the eager path: the checks that need no world first; where one fails, all of them again
    in order, the device first (a CPU tensor of the wrong dtype is named for its device). A good tensor on another
    device has no plan, and its first call checks the device (``_first_call``)."""
    try:
        check_inputs(x, op, out)
    except AllReduceError:
        if isinstance(x, torch.Tensor) and rt.is_initialized():
            check_inputs(x, op, out, (emulated_world() or gpu_world(OP, AllReduceError)).device)
        raise


def _launch(x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig | None, stage: bool = True) -> None:
    """Enqueue the all-reduce of ``x`` into ``out`` (checked) on the current stream: the signature's plan, or the
    first call of the signature (``_first_call``). ``config`` None: the selected one. ``stage=False`` (benchmarks
    only) reads a heap ``x`` in place instead of staging it (one-shot)."""
    signature = (
        x.numel(),
        x.dtype,
        x.device,
        x.data_ptr() % 16 == 0,
        out.data_ptr() % 16 == 0,
        config,
        watchdog_enabled(),  # the LL kernel is compiled for it (bounded polls)
        stage,
    )
    plan = _plans.get(signature)
    if plan is not None:
        plan.launch(x.device, x, out)
    else:
        _first_call(x, out, config, stage, signature)


def _first_call(
    x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig | None, stage: bool, signature: tuple
) -> None:
    """What a repeated signature skips: the device, the config choice, the ranks' agreement (a collective: a rank
    that launched with another size would read past its peers' data or wait forever for their flags), then the
    first launch, which gives the plan."""
    refused = None
    try:
        world = peer_world(OP, AllReduceError)
    except AllReduceError as error:
        refused = error
    if refused is not None:  # maybe a world across nodes: the hierarchical kernel (nodes.py), or `refused` again
        _first_call_across_nodes(x, out, config, signature, across_nodes_world(refused))
        return
    if x.device != world.device:  # before anything asks the device for its properties
        raise AllReduceError(f"all_reduce: x is on {x.device}, but this rank's triton_dist device is {world.device}")
    if config is None and emulated(world):  # the CPU emulation: no GPU to pick a table for
        config = emulated_config(x.numel() * x.element_size(), world.world_size)
    if config is None:
        config = select_config(x.numel() * x.element_size(), x.device, world.world_size, x.element_size())
    if config.algo == "one_shot_ll" and emulated(world):
        raise AllReduceError(
            "all_reduce: one_shot_ll polls with inline PTX, which Triton's interpreter cannot run: under the CPU "
            "emulation use one_shot, one_shot_push or two_shot"
        )
    try:  # a config that cannot run here raises before the collective
        launch_shape(x.numel(), x.element_size(), world.world_size, config)
    except ValueError as error:
        raise AllReduceError(str(error)) from None
    described = {"numel": x.numel(), "dtype": str(x.dtype), "config": asdict(config), "stage": stage}
    _plans.build(signature, described, lambda: _plan(x, out, config, stage, world))


def _first_call_across_nodes(
    x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig | None, signature: tuple, world: rt.World
) -> None:
    """``_first_call`` on a world across nodes: no config (the one-node algorithms do not apply), the size limit,
    the ranks' agreement, then the first launch of the hierarchical kernel (``nodes.py``)."""
    if x.device != world.device:
        raise AllReduceError(f"all_reduce: x is on {x.device}, but this rank's triton_dist device is {world.device}")
    if config is not None:
        raise AllReduceError(
            f"all_reduce: config={config} names a one-node algorithm, but the world spans {world.num_nodes} "
            "nodes, where all_reduce runs its hierarchical kernel (no config): call it without one"
        )
    check_size(x.numel(), x.element_size(), world)
    described = {"numel": x.numel(), "dtype": str(x.dtype), "nodes": world.num_nodes}
    _plans.build(signature, described, lambda: _Empty() if x.numel() == 0 else first_nodes_launch(x, out, world))


def _plan(
    x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig, stage: bool, world: rt.World
) -> LaunchPlan | EmulatedLaunch | _Empty:
    """The first launch of a signature (through Triton, compiling if needed) and the plan it gives."""
    if x.numel() == 0:
        return _Empty()
    with on_device(x.device):
        return _first_launch(x, out, config, stage, world.world_size)


def _first_launch(
    x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig, stage: bool, world_size: int
) -> LaunchPlan | EmulatedLaunch:
    shape = launch_shape(x.numel(), x.element_size(), world_size, config)
    if config.algo == "one_shot_ll":
        ws = slot_workspace("all_reduce.one_shot_ll", SLOTS["one_shot_ll"], 1, ll_region_bytes(world_size))
        named = {
            "x_ptr": x,
            "out_ptr": out,
            "data_ptr": ws.data_as(torch.int64),
            "epochs_ptr": ws.epochs,
            "n": x.numel(),
            "REGION": shape.region_elems,
            "LANES": LL_LANES,
            "BLOCK": shape.block,
            "PER_WORD": ll_elements_per_word(x.element_size()),
            "WATCHED": watchdog_enabled(),
        }
        return first_launch(_one_shot_ll_kernel, (shape.programs, 1, 1), named, 2, num_warps=config.num_warps)
    region_bytes = shape.region_elems * x.element_size()  # launch_shape sized it for the algorithm
    ws = slot_workspace(f"all_reduce.{config.algo}", SLOTS[config.algo], 2 * world_size, region_bytes)
    kernel = {"one_shot": _one_shot_kernel, "one_shot_push": _one_shot_push_kernel, "two_shot": _two_shot_kernel}[
        config.algo
    ]
    named = {
        "x_ptr": x,
        "out_ptr": out,
        "data_ptr": ws.data_as(x.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "n": x.numel(),
        "chunk": shape.chunk,
        "flags_stride": ws.flags.shape[1],
        "REGION": shape.region_elems,
        "ROUND": shape.round,
        "STRIDE": shape.stride,  # the slot's layout: fixed by the workspace, never by the call (kernels.py)
        "BLOCK": shape.block,
        "STAGE": stage,
        "WORLD": notify_world(world_size),
    }
    return first_launch(kernel, (shape.programs, 1, 1), named, 2, num_warps=config.num_warps)


def _run(x: torch.Tensor, out: torch.Tensor, op: str = "sum", config: AllReduceConfig | None = None) -> None:
    """The all-reduce of ``x`` into ``out`` with ``config`` (None: the selected one), inputs checked: what the
    custom ops run, and how benchmarks, tuners and GPU checks force a config."""
    _check(x, op, out)
    _launch(x, out, config)


@torch.library.custom_op("triton_dist::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    _check(x, op)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _launch(x, out, None)  # out is fresh: like x by construction
    return out


@_all_reduce_op.register_fake
def _all_reduce_fake(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    check_inputs(x, op)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("triton_dist::all_reduce_out", mutates_args=("out",))
def _all_reduce_out_op(x: torch.Tensor, out: torch.Tensor, op: str = "sum") -> None:
    _run(x, out, op)


@_all_reduce_out_op.register_fake
def _all_reduce_out_fake(x: torch.Tensor, out: torch.Tensor, op: str = "sum") -> None:
    check_inputs(x, op, out)


def all_reduce(x: torch.Tensor, op: str = "sum", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """The sum of ``x`` over every rank of the triton_dist world, on every rank (``torch.ops.triton_dist``).

    ``x``: a contiguous bf16 / fp16 / fp32 tensor on this rank's GPU, anywhere in memory (on the symmetric heap
    or not: the kernel stages what it needs). Every rank must call it with the same shape and dtype, in the
    same order (checked collectively the first time a size is seen). Sums in fp32; the result, in ``x``'s dtype,
    is bit-identical on all ranks. ``out`` (same shape and dtype, contiguous; may be ``x``) receives it.

    Needs ``triton_dist.init()`` on GPUs, or ``init(device="cpu")`` under ``TRITON_INTERPRET=1`` (the CPU
    emulation: the same kernels in Triton's interpreter, for tests without GPUs; not the "one_shot_ll" config).
    On a world across nodes (``init(backend="nvshmem")``, torchrun's layout of L ranks per node) it runs the
    hierarchical kernel (``nodes_kernel.py``: reduce-scatter in the node, the partial sums across nodes with NVSHMEM
    puts, all-gather in the node), which takes no config; any other heap or node layout there is an AllReduceError.
    Bad input raises :class:`AllReduceError` before any launch. Enqueued on the current stream without host
    synchronization; CUDA-graph capture works once the size has been called eagerly (the first call allocates the
    workspace and checks the ranks agree). Under ``torch.compile`` this is the custom op; eager calls run its
    implementation directly (the same function), skipping the dispatcher's few tens of µs, which would dominate a
    decode-size all-reduce.
    """
    if not plain_eager(x, out):
        if out is None:
            return torch.ops.triton_dist.all_reduce(x, op)
        torch.ops.triton_dist.all_reduce_out(x, out, op)
        return out
    if out is None:
        _check(x, op)
        out = torch.empty_like(x)  # x is contiguous (checked): so is out (same strides), without a layout argument
        _launch(x, out, None)  # out is fresh: like x by construction
        return out
    _run(x, out, op)
    return out


def all_reduce_in_place(x: torch.Tensor) -> torch.Tensor:
    """``all_reduce(x, out=x)``: the sum over every rank replaces ``x`` (for ops that all-reduce a result of their
    own, such as ``gemm_ar``'s cuBLAS path). Returns ``x``."""
    _run(x, x)
    return x
