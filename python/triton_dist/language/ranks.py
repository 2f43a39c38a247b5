"""``dl.rank`` and ``dl.num_ranks``: who this process is, and how many there are."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _guards, _validate
from triton_dist.language._primitive import primitive


@primitive
def rank(axis: int = -1, _semantic: TritonSemantic | None = None, _generator: Any = None) -> tl.tensor:
    """This process's rank in the world, an int32 scalar in ``[0, num_ranks())``.

    Read from the module's context, which the runtime fills when the kernel's module loads (so call
    ``triton_dist.init()`` before launching; the kernel stops with a message if it runs without a context). Cost:
    one load from a global, shared by every call in the kernel (the call is pure: Triton may hoist it out of loops
    and merge repeated calls).

    ``axis`` must be -1 (all ranks of the world); sub-groups are not supported yet.
    """
    builder = _semantic
    _validate.world_axis(axis, "rank")
    _guards.require_context("rank", builder, _generator)
    return _abi.call(abi.RANK, [], tl.int32, pure=True, builder=builder)


@primitive
def num_ranks(axis: int = -1, _semantic: TritonSemantic | None = None, _generator: Any = None) -> tl.tensor:
    """The number of ranks in the world (``torch.distributed`` world size), an int32 scalar.

    Same cost and context as :func:`rank`; ``axis`` must be -1. When a loop over peers must unroll (a
    ``tl.static_range``), pass the world size as a ``tl.constexpr`` kernel argument instead.
    """
    builder = _semantic
    _validate.world_axis(axis, "num_ranks")
    _guards.require_context("num_ranks", builder, _generator)
    return _abi.call(abi.NUM_RANKS, [], tl.int32, pure=True, builder=builder)
