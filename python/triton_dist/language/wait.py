"""``dl.wait`` (spin until flags pass a test) and ``dl.consume_token`` (tie a value to that wait)."""

from __future__ import annotations

from typing import Any, cast

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _guards, _validate
from triton_dist.language._primitive import primitive
from triton_dist.language.symmetric import OFFSET_DIVISIBILITY
from triton_dist.language.token import wait_token

_ORDERED = ("ge", "gt", "le", "lt")


@primitive
def wait(
    barrierPtrs: tl.tensor,  # noqa: N803 (the API's spelling)
    numBarriers: Any,  # noqa: N803
    scope: str,
    semantic: str,
    waitValue: Any = 1,  # noqa: N803
    cmp: str = "eq",
    _semantic: TritonSemantic | None = None,
    _generator: Any = None,
) -> wait_token:
    """Spin until each of the ``numBarriers`` consecutive flags at ``barrierPtrs`` satisfies ``flag <cmp> waitValue``.

    ``barrierPtrs`` is a scalar pointer to int32 or int64 flags in this rank's symmetric heap (written by peers with
    :func:`notify`); ``waitValue`` is cast to the flag type (a constant must fit in it, a tensor must not be wider:
    an int64 value for int32 flags is refused rather than truncated); ``numBarriers`` is a scalar integer of at most
    32 bits (the ABI's count). ``scope`` ("cta", "gpu", "sys") is how far the writers may be: "sys" for other GPUs
    or the host, "gpu" for other programs on this GPU, "cta" for this program. ``semantic`` is the memory ordering:
    "acquire" makes every memory access after the wait, by every thread of the program, see what the writers did
    before their release (``notify``); "relaxed" only waits.

    ``cmp`` is the test, a signed comparison as NVSHMEM's ``signal_wait_until``: "eq" (the default), "ne", "ge",
    "gt", "le", "lt". "ge" suits counters and epochs: flags that peers ``notify(..., sig_op="add")`` to, or that
    only grow, are awaited with ``waitValue`` = the count expected by now, and an overshoot (a peer already one
    round ahead) still satisfies the test where "eq" would spin forever. Ordered comparisons need signed flags
    (int32 / int64).

    Every thread of the program calls it: the lanes of the first warp / wavefront poll (lane l checks flags l,
    l+W, ...; W = warp / wave size) with backoff, the others go straight to the program barrier (``bar.sync`` /
    ``s_barrier``) that ends the wait. It never returns while a flag fails the test, so use values that only grow
    (epochs) rather than resetting flags between uses.

    Checks (docs/language.md, "Guards"): the kernel stops with a message if the context is not initialized or
    ``barrierPtrs`` is not in the symmetric heap.

    It cannot be called in a ``tl.reduce`` / ``tl.associative_scan`` combiner or a ``tl.map_elementwise`` function,
    which run per element.

    Returns a token for :func:`consume_token`.
    """
    builder = cast(TritonSemantic, _semantic)  # primitive() refuses a call without it
    _validate.outside_element_regions("wait")
    scope = _validate.choice(scope, "wait", "scope", abi.SCOPES)
    semantic = _validate.choice(semantic, "wait", "semantic", abi.SEMANTICS)
    cmp = _validate.choice(cmp, "wait", "cmp", abi.COMPARISONS)
    ptr = _validate.pointer(barrierPtrs, "wait", "barrierPtrs", scalar_only=True)
    flag = _validate.flag_suffix(ptr, "wait", "barrierPtrs")
    flag_type = ptr.dtype.element_ty
    if cmp in _ORDERED and flag_type.is_int_unsigned():
        raise TypeError(
            f"dl.wait: cmp={cmp!r} compares signed, but barrierPtrs points to {flag_type} flags: use int32 / int64 "
            "flags (or cmp 'eq' / 'ne')"
        )
    count = _validate.count_operand(numBarriers, "wait", "numBarriers", builder)
    value = _validate.flag_value(waitValue, flag_type, "wait", "waitValue", builder)
    _guards.require_context("wait", builder, _generator)
    _guards.require_in_heap(ptr, "wait", "barrierPtrs", builder, _generator)
    address = builder.cast(ptr, tl.int64)
    symbol = abi.wait_symbol(scope, semantic, cmp, flag)
    token = _abi.call(symbol, [address, count, value], tl.int32, pure=False, builder=builder)
    return wait_token(token.handle)


@primitive
def consume_token(value: Any, token: wait_token, _semantic: TritonSemantic | None = None) -> tl.tensor:
    """``value``, made data-dependent on ``token`` (from :func:`wait`): accesses through it stay after the wait.

    ``value`` is a pointer or a tensor of pointers (typical: ``ptr = dl.consume_token(ptr, token)`` before loading
    what the peer wrote), or an integer scalar/tensor (an offset, an index). The result has ``value``'s type and
    shape and equals it; pointers keep their alignment, so loads through them still vectorize. Without it, the
    compiler may move a load whose address does not depend on the wait above the wait.

    Cost: nothing at run time beyond the dependency (an add of an opaque zero for pointers). It reads no context,
    so it carries no device-side check (the :func:`wait` that made the token has them).
    """
    builder = cast(TritonSemantic, _semantic)  # primitive() refuses a call without it
    if not isinstance(token, wait_token):
        raise TypeError(
            f"dl.consume_token: token must be the value returned by dl.wait, got {_validate.describe(token)}"
        )
    value = _validate.consumable(value, "consume_token", builder)
    if value.dtype.is_ptr():
        zero = builder.scalar_constant(0, tl.int64)
        offset = _abi.call(abi.CONSUME_TOKEN, [zero, token.as_i32()], tl.int64, pure=True, builder=builder)
        offset = builder.multiple_of(offset, [OFFSET_DIVISIBILITY])
        return builder.add(value, offset, sanitize_overflow=False)
    wide = builder.cast(value, tl.int64)
    tied = _abi.call(abi.CONSUME_TOKEN, [wide, token.as_i32()], tl.int64, pure=True, builder=builder)
    return builder.cast(tied, value.dtype)
