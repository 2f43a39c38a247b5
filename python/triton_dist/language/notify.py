"""``dl.notify``: set or add to a flag on one rank or on a list of ranks, ordered after this program's earlier
memory accesses."""

from __future__ import annotations

from typing import Any, cast

import triton.language as tl
from triton.language.core import _unwrap_if_constexpr
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _guards, _validate
from triton_dist.language._primitive import primitive
from triton_dist.language.symmetric import translate

_ATOMIC_SCOPE = {"gpu": "gpu", "intra_node": "sys", "inter_node": "sys"}


def _is_tensor_of_ranks(rank: Any) -> bool:
    rank = _unwrap_if_constexpr(rank)
    return isinstance(rank, tl.tensor) and rank.type.is_block()


@primitive
def notify(
    ptr: tl.tensor,
    rank: Any,
    signal: Any = 1,
    sig_op: str = "set",
    comm_scope: str = "inter_node",
    mask: Any = None,
    _semantic: TritonSemantic | None = None,
    _generator: Any = None,
) -> None:
    """Write (``sig_op="set"``) or atomically add (``"add"``) ``signal`` to the flag ``ptr`` points at, on ``rank``.

    ``ptr`` is a pointer into the symmetric heap (as :func:`symm_at` takes it: this rank's address of the flag) to
    int32 or int64 flags; ``signal`` is cast to the flag type (a constant must fit in it). ``comm_scope`` says who
    will read the flag: "gpu" (programs on the same GPU: device-scope release), "intra_node" / "inter_node" (other
    GPUs: system-scope release).

    Ordering: the program first synchronizes, then the write is a release at ``comm_scope``, so a reader that
    :func:`wait` s with "acquire" for the new value sees every memory access any thread of this program made
    before the ``notify`` (data stores through :func:`symm_at` included).

    Forms:

    - scalar ``ptr``, scalar ``rank``: one flag on one rank (one thread writes, after the program's barrier).
    - tensor of pointers ``ptr``, scalar ``rank``: each distinct flag of ``ptr`` on ``rank``, written exactly once.
    - ``rank`` a 1-D tensor of ranks (e.g. ``tl.arange(0, WORLD)``): the flag ``ptr`` on each listed rank (or,
      with ``ptr`` a tensor of the same shape, ``ptr[i]`` on ``rank[i]``). One program barrier, then one release
      write per listed rank, all in parallel: signalling every peer is one ``notify``, not a loop with a barrier per
      peer. A rank listed twice is written twice (which counts twice for "add").

    In the tensor forms the writes are Triton's own release atomics (``tl.atomic_xchg`` / ``tl.atomic_add``), which
    take care that replicated tensor elements are written once; ``signal`` may then be a tensor of the same shape,
    and ``mask`` (a boolean tensor of that shape) skips the elements where it is False, e.g. the ranks beyond
    ``num_ranks()`` of a ``tl.arange(0, BLOCK)`` rounded up to a power of two (dimensions of size 1 broadcast). A
    scalar notify takes no mask. A ``signal`` tensor may not be wider than the flags (an int64 signal for int32 flags
    is refused: convert it explicitly). ``notify`` cannot be called in a ``tl.reduce`` / ``tl.associative_scan``
    combiner or a ``tl.map_elementwise`` function, which run per element.

    Checks (docs/language.md, "Guards"): the kernel stops with a message if the context is not initialized or a
    scalar ``ptr`` is not in the symmetric heap (tensors of pointers too, with ``TRITON_DIST_DEBUG=1``).

    Cost of the scalar form: the barrier and one release write; the flag's address on ``rank`` is computed like
    :func:`symm_at` (pure, hoisted out of loops when ``ptr`` and ``rank`` do not change in the loop).
    """
    builder = cast(TritonSemantic, _semantic)  # primitive() refuses a call without it
    _validate.outside_element_regions("notify")
    sig_op = _validate.choice(sig_op, "notify", "sig_op", abi.SIG_OPS)
    comm_scope = _validate.choice(comm_scope, "notify", "comm_scope", abi.COMM_SCOPES)
    ptr = _validate.pointer(ptr, "notify", "ptr")
    if ptr.dtype.is_const():
        raise TypeError("dl.notify: ptr points to const data, but notify writes the flag")
    flag = _validate.flag_suffix(ptr, "notify", "ptr")
    flag_type = ptr.dtype.element_ty
    if _is_tensor_of_ranks(rank):
        targets = _validate.rank_list_operand(rank, "notify", builder)
        if ptr.type.is_block() and list(ptr.shape) != list(targets.shape):
            raise TypeError(
                f"dl.notify: with a tensor of ranks, ptr must be a scalar pointer or a tensor of the ranks' shape "
                f"{[int(dim) for dim in targets.shape]}, got {_validate.describe(ptr)}"
            )
    else:
        targets = _validate.rank_operand(rank, "notify", builder)
    is_tensor_form = ptr.type.is_block() or targets.type.is_block()
    if is_tensor_form:
        mask = _validate.element_mask(mask, "notify", builder)
    else:
        _validate.no_mask(mask, "notify")
        mask = None
    value = _validate.flag_value(signal, flag_type, "notify", "signal", builder, scalar_only=not is_tensor_form)
    if is_tensor_form:
        form = "ptr" if ptr.type.is_block() else "rank"
        shape = [int(dim) for dim in (ptr if ptr.type.is_block() else targets).type.shape]
        _validate.broadcastable(value, shape, "notify", "signal", form)
        if mask is not None:
            _validate.broadcastable(mask, shape, "notify", "mask", form)
    _guards.require_context("notify", builder, _generator)
    _guards.require_in_heap(ptr, "notify", "ptr", builder, _generator, mask)
    if not is_tensor_form:
        # The flag's address on `rank` comes from the pure symm_at, not from the library's notify: Triton hoists a
        # pure call with loop-invariant arguments out of loops, while the notify (a write) stays in the loop and
        # LLVM cannot hoist the heap-base load inside it (a load at a variable index, on the leader's branch after
        # the barrier). In a round-trip loop that load ran every iteration between the wait's acquire (which
        # invalidates L1) and the release store. The library's notify then translates the address to this rank,
        # the identity (symm_at(a, rank()) == a): its own context loads repeat loads that dominate it, and LLVM
        # folds them away (docs/results/2026-11-23-round-trip-sass.md).
        address = builder.cast(ptr, tl.int64)
        remote = _abi.call(abi.SYMM_AT, [address, targets], tl.int64, pure=True, builder=builder)
        me = _abi.call(abi.RANK, [], tl.int32, pure=True, builder=builder)
        symbol = abi.notify_symbol(sig_op, comm_scope, flag)
        _abi.call(symbol, [remote, me, value], tl.int32, pure=False, builder=builder)
        return None
    # A tensor of flags (or of ranks). The library's scalar notify lets one warp (set) or thread (add) write; applied
    # elementwise it would run once per element *copy*, and Triton replicates tensor elements across threads
    # whenever the tensor has fewer elements than the program has threads, so an "add" would count twice. Triton's
    # atomics mask out the replicas. The barrier orders every thread's earlier accesses before the release atomics
    # (release is cumulative over what the barrier made visible to the writing threads).
    remote = translate(ptr, targets, builder)
    tl.debug_barrier(_semantic=builder)
    atomic = tl.atomic_xchg if sig_op == "set" else tl.atomic_add
    atomic(remote, value, mask=mask, sem="release", scope=_ATOMIC_SCOPE[comm_scope], _semantic=builder)
    return None
