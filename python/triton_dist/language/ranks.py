"""``dl.rank`` and ``dl.num_ranks``: who this process is, and how many there are."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _guards, _validate
from triton_dist.language._primitive import primitive


@primitive
def rank(axis: str | int = "world", _semantic: TritonSemantic | None = None, _generator: Any = None) -> tl.tensor:
    """This process's rank along ``axis``, an int32 scalar in ``[0, num_ranks(axis))``.

    ``axis`` is a string constant: ``"world"`` (the default; ``-1`` means the same) is the rank in the whole world,
    ``"local"`` the rank among the ranks of this node (torchrun's ``LOCAL_RANK``), ``"node"`` the index of this
    node (``rank() // num_ranks("local")``: every node holds the same number of consecutive ranks, as torchrun
    launches them). Any other value is a ``CompilationError`` at the call naming the accepted ones.

    Read from the module's context, which the runtime fills when the kernel's module loads (so call
    ``triton_dist.init()`` before launching; the kernel stops with a message if it runs without a context). Cost:
    one load from a global (``"node"``: two loads and a division), shared by every call in the kernel (the call is
    pure: Triton may hoist it out of loops and merge repeated calls).
    """
    builder = _semantic
    which = _validate.rank_axis(axis, "rank")
    _guards.require_context("rank", builder, _generator)
    return _abi.call(abi.RANK_SYMBOLS[which][0], [], tl.int32, pure=True, builder=builder)


@primitive
def num_ranks(axis: str | int = "world", _semantic: TritonSemantic | None = None, _generator: Any = None) -> tl.tensor:
    """The number of ranks along ``axis``, an int32 scalar: ``"world"`` (the default; ``-1`` means the same) the
    world size (``torch.distributed`` world size), ``"local"`` the number of ranks on this node, ``"node"`` the
    number of nodes. Other values are a ``CompilationError`` at the call.

    Same cost and context as :func:`rank`. When a loop over peers must unroll (a ``tl.static_range``), pass the
    number as a ``tl.constexpr`` kernel argument instead.
    """
    builder = _semantic
    which = _validate.rank_axis(axis, "num_ranks")
    _guards.require_context("num_ranks", builder, _generator)
    return _abi.call(abi.RANK_SYMBOLS[which][1], [], tl.int32, pure=True, builder=builder)
