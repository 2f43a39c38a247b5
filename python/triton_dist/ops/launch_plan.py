"""Launching a compiled Triton kernel again without Triton's generic launch path, for latency-bound decode ops.

``kernel[grid](...)`` binds and specializes every argument and looks the kernel up on every call: tens of µs of
host time, more than a decode-size all-reduce takes on the GPU. A :class:`LaunchPlan` keeps the compiled kernel
from the first call and, per call, passes the arguments straight to its launcher. The caller keys plans by
everything Triton specializes on (integer values, the 16-byte alignment of pointers), so a plan is only reused for
arguments that would have compiled to the same kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from triton import knobs

from triton_dist import runtime as rt


@dataclass
class LaunchPlan:
    """A compiled kernel, its grid, and every argument after the first ``leading`` ones (which change per call)."""

    world: rt.World
    kernel: Any
    grid: tuple[int, int, int]
    args: tuple[Any, ...]
    """The kernel's remaining arguments in its parameter order, constexprs included (the launcher skips them)."""

    def launch(self, device: torch.device, *leading: Any) -> None:
        kernel = self.kernel
        stream = torch.cuda.current_stream(device).cuda_stream
        args = (*leading, *self.args)
        enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
        if _has_hooks(enter) or _has_hooks(leave):
            metadata = kernel.launch_metadata(self.grid, stream, *args)
        else:  # nobody listens: skip building the launch metadata and the launcher's two empty hook calls
            metadata = enter = leave = None
        kernel.run(*self.grid, stream, kernel.function, kernel.packed_metadata, metadata, enter, leave, *args)


def _has_hooks(hook: Any) -> bool:
    """Whether a launch hook (Triton 3.6: a ``HookChain``, empty unless someone registered a hook) would run."""
    return hook is not None and bool(getattr(hook, "calls", True))


def first_launch(
    kernel: Any, grid: tuple[int, int, int], named: Mapping[str, Any], leading: int, **options: Any
) -> LaunchPlan:
    """Launch ``kernel[grid]`` the ordinary way (compiling it if needed) and return the plan for the next calls.

    ``named`` holds every parameter of the kernel by name (extra names are ignored); the first ``leading``
    parameters are the ones each call passes to :meth:`LaunchPlan.launch`.
    """
    ordered = {name: named[name] for name in kernel.arg_names}
    compiled = kernel[grid](**ordered, **options)
    return LaunchPlan(rt.current_world(), compiled, grid, tuple(ordered.values())[leading:])
