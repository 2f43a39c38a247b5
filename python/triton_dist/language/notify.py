"""``dl.notify``: set or add to a flag on a rank, ordered after this program's earlier memory accesses."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist.language import _abi, _validate
from triton_dist.language._primitive import primitive
from triton_dist.language.symmetric import translate

_ATOMIC_SCOPE = {"gpu": "gpu", "intra_node": "sys", "inter_node": "sys"}


@primitive
def notify(
    ptr: tl.tensor,
    rank: Any,
    signal: Any = 1,
    sig_op: str = "set",
    comm_scope: str = "inter_node",
    _semantic: TritonSemantic | None = None,
) -> None:
    """Write (``sig_op="set"``) or atomically add (``"add"``) ``signal`` to the flag ``ptr`` points at, on ``rank``.

    ``ptr`` is a pointer into the symmetric heap (as :func:`symm_at` takes it: this rank's address of the flag) to
    int32 or int64 flags; ``signal`` is cast to the flag type. ``comm_scope`` says who will read the flag: "gpu"
    (programs on the same GPU: device-scope release), "intra_node" / "inter_node" (other GPUs: system-scope
    release).

    Ordering: the program first synchronizes, then the write is a release at ``comm_scope``, so a reader that
    :func:`wait` s with "acquire" for the new value sees every memory access any thread of this program made
    before the ``notify`` (data stores through :func:`symm_at` included).

    A scalar ``ptr`` writes one flag (one thread writes, after the program's barrier). A tensor of pointers
    writes each distinct flag exactly once: a barrier, then Triton's own release atomics (``tl.atomic_xchg`` /
    ``tl.atomic_add``), which take care that replicated tensor elements are written once. ``signal`` may then
    be a tensor of ``ptr``'s shape.
    """
    sig_op = _validate.choice(sig_op, "notify", "sig_op", _validate.SIG_OPS)
    comm_scope = _validate.choice(comm_scope, "notify", "comm_scope", _validate.COMM_SCOPES)
    ptr = _validate.pointer(ptr, "notify", "ptr")
    if ptr.dtype.is_const():
        raise TypeError("dl.notify: ptr points to const data, but notify writes the flag")
    flag = _validate.flag_suffix(ptr, "notify", "ptr")
    flag_type = ptr.dtype.element_ty
    target = _validate.rank_operand(rank, "notify", _semantic)
    if not ptr.type.is_block():
        value = _validate.integer(signal, flag_type, "notify", "signal", _semantic)
        address = _semantic.cast(ptr, tl.int64)
        symbol = _abi.notify_symbol(sig_op, comm_scope, flag)
        _abi.call(symbol, [address, target, value], tl.int32, pure=False, semantic=_semantic)
        return None
    # A tensor of pointers. The library's scalar notify lets thread 0 of the program write; applied elementwise
    # it would run once per element *copy*, and Triton replicates tensor elements across threads whenever the
    # tensor has fewer elements than the program has threads, so an "add" would count twice. Triton's atomics
    # mask out the replicas. The barrier orders every thread's earlier accesses before the release atomics
    # (release is cumulative over what the barrier made visible to the writing threads).
    value = _validate.integer(signal, flag_type, "notify", "signal", _semantic, scalar_only=False)
    remote = translate(ptr, target, _semantic)
    tl.debug_barrier(_semantic=_semantic)
    atomic = tl.atomic_xchg if sig_op == "set" else tl.atomic_add
    atomic(remote, value, sem="release", scope=_ATOMIC_SCOPE[comm_scope], _semantic=_semantic)
    return None
