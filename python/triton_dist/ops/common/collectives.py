"""A process group's own one-tensor collectives, resolved once per plan: what the ops' NCCL fallbacks call.

``dist.all_gather_into_tensor`` and ``dist.reduce_scatter_tensor`` end in one method of the process group; on the
way they pay, per call, their deprecation and logging wrappers, the tensor and group checks and a new options
object. The unfused paths of ``ag_gemm`` and ``gemm_rs`` call the group's method directly with options built once
(issue 24: that Python was the fallbacks' whole extra host cost over the same calls written by hand). ``asyncOp``
is false, as the wrappers set it: NCCL then runs the collective on the current stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist
from torch.distributed.distributed_c10d import AllgatherOptions

from triton_dist.ops.common.errors import OpInputError

# The method each wrapper ends in: the older name first (torch 2.11), then the newer (torch 2.13 has both).
_ALL_GATHER_METHODS = ("_allgather_base", "all_gather_single")
_REDUCE_SCATTER_METHODS = ("_reduce_scatter_base", "reduce_scatter_single")


def _method(group: Any, names: tuple[str, ...], what: str) -> Callable[..., Any]:
    for name in names:
        method = getattr(group, name, None)
        if method is not None:
            return method
    raise OpInputError(f"the process group {group!r} has no {what} of one tensor (looked for {', '.join(names)})")


def all_gather_method(group: Any) -> tuple[Callable[..., Any], Any]:
    """``group``'s all-gather into one tensor and its options (synchronous): call ``method(out, inp, options)``
    and wait on the work it returns, if any. Raises ``OpInputError`` for a group without one."""
    options = AllgatherOptions()
    if hasattr(options, "asyncOp"):
        options.asyncOp = False
    return _method(group, _ALL_GATHER_METHODS, "all-gather"), options


def reduce_scatter_method(group: Any) -> tuple[Callable[..., Any], Any]:
    """``group``'s sum reduce-scatter of one tensor and its options (synchronous): call ``method(out, inp,
    options)`` and wait on the work it returns, if any. Raises ``OpInputError`` for a group without one."""
    options = dist.ReduceScatterOptions()
    options.reduceOp = dist.ReduceOp.SUM
    if hasattr(options, "asyncOp"):
        options.asyncOp = False
    return _method(group, _REDUCE_SCATTER_METHODS, "reduce-scatter"), options
