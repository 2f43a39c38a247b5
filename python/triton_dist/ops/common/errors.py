"""The one exception family for bad input to an op, and the checks every op makes first."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from triton_dist import runtime as rt


class OpInputError(ValueError):
    """Bad input to a triton_dist op (shapes, dtypes, devices, layout, ranks that disagree).

    Raised on the host before anything is launched. Each op raises its own subclass (``AgGemmError``, ...), so a
    caller can catch one op's errors or all of them.
    """


def gpu_world(op: str, error: type[OpInputError] = OpInputError) -> rt.World:
    """The current world, if it can run GPU ops; else an error that says what to do.

    Raises RuntimeError before ``triton_dist.init()``, and ``error`` for a world on the CPU
    (``init(device="cpu")`` gives a host heap for CPU emulation and tests; the ops need GPUs).
    """
    if not rt.is_initialized():
        raise RuntimeError(f"{op}: call triton_dist.init() first (the op needs the symmetric heap)")
    world = rt.current_world()
    if world.device.type != "cuda":
        raise error(
            f"{op}: triton_dist was initialized with device={str(world.device)!r}; the ops run on GPUs "
            "(call triton_dist.init() on a machine with GPUs, one per rank; the ops that support the CPU emulation run "
            "on this world under TRITON_INTERPRET=1)"
        )
    return world


def emulated(world: rt.World) -> bool:
    """Whether the ops run their kernels in Triton's interpreter over a CPU heap: a world made with
    ``init(device="cpu")`` while ``TRITON_INTERPRET=1`` (the multi-rank CPU emulation of
    ``triton_dist.runtime.emulation``, docs/getting-started.md, "Develop and test without GPUs"). Such a world
    launches every kernel through ``kernel[grid](...)``, one after the other on the host: no streams, events,
    CUDA graphs or driver calls."""
    return world.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def emulated_world() -> rt.World | None:
    """The current world if it is :func:`emulated`, else None: an op that supports the CPU emulation takes its
    world as ``emulated_world() or gpu_world(op, error)``."""
    if rt.is_initialized():
        world = rt.current_world()
        if emulated(world):
            return world
    return None


def on_device(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.cuda.device(device)`` for a GPU; nothing for the CPU emulation's host device."""
    if device.type == "cpu":
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def check_tensor(
    op: str, name: str, value: Any, device: torch.device, dtypes: tuple[torch.dtype, ...], error: type[OpInputError]
) -> None:
    """Raise ``error`` unless ``value`` is a tensor on ``device`` with one of ``dtypes`` (device checked first)."""
    if not isinstance(value, torch.Tensor):
        raise error(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if value.device != device:
        raise error(f"{op}: {name} is on {value.device}, but this rank's triton_dist device is {device}")
    if value.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise error(f"{op}: {name} has dtype {str(value.dtype).removeprefix('torch.')}; supported: {allowed}")
