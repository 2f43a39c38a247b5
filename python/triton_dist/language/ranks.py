"""``dl.rank`` and ``dl.num_ranks``: who this process is, and how many there are."""

from __future__ import annotations

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist.language import _abi, _validate
from triton_dist.language._primitive import primitive


@primitive
def rank(axis: int = -1, _semantic: TritonSemantic | None = None) -> tl.tensor:
    """This process's rank in the world, an int32 scalar in ``[0, num_ranks())``.

    Read from the module's context, which the runtime fills when the kernel's module loads (so call
    ``triton_dist.init()`` before launching). Cost: one load from a global, shared by every call in the kernel
    (the call is pure: Triton may hoist it out of loops and merge repeated calls).

    ``axis`` must be -1 (all ranks of the world); sub-groups are not supported yet.
    """
    _validate.world_axis(axis, "rank")
    return _abi.call(_abi.RANK, [], tl.int32, pure=True, semantic=_semantic)


@primitive
def num_ranks(axis: int = -1, _semantic: TritonSemantic | None = None) -> tl.tensor:
    """The number of ranks in the world (``torch.distributed`` world size), an int32 scalar.

    Same cost and context as :func:`rank`; ``axis`` must be -1.
    """
    _validate.world_axis(axis, "num_ranks")
    return _abi.call(_abi.NUM_RANKS, [], tl.int32, pure=True, semantic=_semantic)
