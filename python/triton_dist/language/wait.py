"""``dl.wait`` (spin until flags reach a value) and ``dl.consume_token`` (tie a value to that wait)."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.core import _unwrap_if_constexpr
from triton.language.semantic import TritonSemantic

from triton_dist.language import _abi, _validate
from triton_dist.language._primitive import primitive
from triton_dist.language.symmetric import OFFSET_DIVISIBILITY
from triton_dist.language.token import wait_token


@primitive
def wait(
    barrierPtrs: tl.tensor,  # noqa: N803 (the API's spelling)
    numBarriers: Any,  # noqa: N803
    scope: str,
    semantic: str,
    waitValue: Any = 1,  # noqa: N803
    _semantic: TritonSemantic | None = None,
) -> wait_token:
    """Spin until each of the ``numBarriers`` consecutive flags at ``barrierPtrs`` equals ``waitValue``.

    ``barrierPtrs`` is a scalar pointer to int32 or int64 flags in this rank's memory (usually on the symmetric
    heap, written by peers with :func:`notify`); ``waitValue`` is cast to the flag type; ``numBarriers`` is a
    scalar integer. ``scope`` ("cta", "gpu", "sys") is how far the writers may be: "sys" for other GPUs or the
    host, "gpu" for other programs on this GPU, "cta" for this program. ``semantic`` "acquire" makes every memory
    access after the wait, by every thread of the program, see what the writers did before their release
    (``notify``); "relaxed" only waits.

    Every thread of the program calls it: the lanes of the first warp / wavefront poll (lane l checks flags l,
    l+W, ...; W = warp / wave size) with backoff, the others go straight to the program barrier (``bar.sync`` /
    ``s_barrier``) that ends the wait. The test is equality: it never returns while a flag holds another value,
    so use values that only grow (epochs) or reset flags between uses.

    Returns a token for :func:`consume_token`.
    """
    scope = _validate.choice(scope, "wait", "scope", _validate.SCOPES)
    semantic = _validate.choice(semantic, "wait", "semantic", _validate.SEMANTICS)
    ptr = _validate.pointer(barrierPtrs, "wait", "barrierPtrs", scalar_only=True)
    flag = _validate.flag_suffix(ptr, "wait", "barrierPtrs")
    count = _validate.count_operand(numBarriers, "wait", "numBarriers", _semantic)
    value = _validate.integer(waitValue, ptr.dtype.element_ty, "wait", "waitValue", _semantic)
    address = _semantic.cast(ptr, tl.int64)
    symbol = _abi.wait_symbol(scope, semantic, flag)
    token = _abi.call(symbol, [address, count, value], tl.int32, pure=False, semantic=_semantic)
    return wait_token(token.handle)


@primitive
def consume_token(value: Any, token: wait_token, _semantic: TritonSemantic | None = None) -> tl.tensor:
    """``value``, made data-dependent on ``token`` (from :func:`wait`): accesses through it stay after the wait.

    ``value`` is a pointer or a tensor of pointers (typical: ``ptr = dl.consume_token(ptr, token)`` before loading
    what the peer wrote), or an integer scalar/tensor (an offset, an index). The result has ``value``'s type and
    shape and equals it; pointers keep their alignment, so loads through them still vectorize. Without it, the
    compiler may move a load whose address does not depend on the wait above the wait.

    Cost: nothing at run time beyond the dependency (an add of an opaque zero for pointers).
    """
    if not isinstance(token, wait_token):
        raise TypeError(
            f"dl.consume_token: token must be the value returned by dl.wait, got {_validate.describe(token)}"
        )
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = _semantic.to_tensor(raw)
    usable = isinstance(value, tl.tensor) and (
        value.dtype.is_ptr() or (value.dtype.is_int() and not value.dtype.is_bool())
    )
    if not usable:
        raise TypeError(
            "dl.consume_token: value must be a pointer or an integer (scalar or tensor), "
            f"got {_validate.describe(value)}"
        )
    if value.dtype.is_ptr():
        zero = _semantic.scalar_constant(0, tl.int64)
        offset = _abi.call(_abi.CONSUME_TOKEN, [zero, token.as_i32()], tl.int64, pure=True, semantic=_semantic)
        offset = _semantic.multiple_of(offset, [OFFSET_DIVISIBILITY])
        return _semantic.add(value, offset, sanitize_overflow=False)
    wide = _semantic.cast(value, tl.int64)
    tied = _abi.call(_abi.CONSUME_TOKEN, [wide, token.as_i32()], tl.int64, pure=True, semantic=_semantic)
    return _semantic.cast(tied, value.dtype)
