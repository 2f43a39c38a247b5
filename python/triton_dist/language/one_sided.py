"""``dl.put_signal``, ``dl.get`` and ``dl.signal_wait``: one-sided data movement to and from ranks that load/store
cannot reach (other nodes), through NVSHMEM's device API. NVIDIA only.

Each primitive calls a function of the triton_dist NVSHMEM library (``abi.put_signal_symbol`` and friends; the
``distributed.put_signal`` / ``get`` / ``signal_wait`` ops, lowered to ``nvshmemx_putmem_signal_block``,
``nvshmemx_getmem_block`` and ``nvshmem_signal_wait_until``). The compiler links that library and NVSHMEM's device
bitcode (the ``nvidia-nvshmem`` wheel) into the kernels that call one (``compiler/stages_hook.py``). At run time the
heap must be NVSHMEM's (``triton_dist.init(backend="nvshmem")``, issue 29 item 2) and the loaded module must have been
initialized by NVSHMEM's host library; docs/multi-node.md.
"""

from __future__ import annotations

from typing import Any, cast

import triton.language as tl
from triton.language.core import _unwrap_if_constexpr
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _validate
from triton_dist.language._primitive import primitive
from triton_dist.language.token import wait_token

_SIGNAL_TYPES = ("int64", "uint64")


def _signal_pointer(value: Any, primitive_name: str, name: str) -> tl.tensor:
    """A scalar pointer to one 64-bit signal word in global memory (NVSHMEM signals are ``uint64_t``)."""
    ptr = _validate.pointer(value, primitive_name, name, scalar_only=True)
    element = ptr.dtype.element_ty
    if getattr(element, "name", "") not in _SIGNAL_TYPES:
        raise TypeError(
            f"dl.{primitive_name}: {name} must point to a 64-bit signal (int64 or uint64: NVSHMEM signals are "
            f"uint64_t), got a pointer to {element}"
        )
    return ptr


def _byte_count(value: Any, primitive_name: str, builder: TritonSemantic) -> tl.tensor:
    """``nbytes``: a non-negative integer constant or a scalar integer tensor, as the ABI's i64 (size_t)."""
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw < 0:
        raise ValueError(f"dl.{primitive_name}: nbytes must be >= 0, got {raw}")
    return _validate.integer(value, tl.int64, primitive_name, "nbytes", builder, "the ABI's int64 byte count")


def _signal_value(value: Any, primitive_name: str, name: str, builder: TritonSemantic) -> tl.tensor:
    """A 64-bit signal value: a constant in [-2**63, 2**64) or a scalar integer tensor, passed as i64 bits."""
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not -(1 << 63) <= raw < (1 << 64):
            raise ValueError(f"dl.{primitive_name}: {name}={raw} does not fit in a 64-bit signal")
        bits = raw - (1 << 64) if raw >= (1 << 63) else raw
        return builder.scalar_constant(bits, tl.int64)
    return _validate.integer(value, tl.int64, primitive_name, name, builder, "a 64-bit signal")


def _require_nvidia(primitive_name: str, builder: TritonSemantic) -> None:
    """The NVSHMEM primitives exist on NVIDIA only: a kernel compiled for AMD is refused at the call, not at link."""
    options = getattr(builder.builder, "options", None)
    if options is not None and type(options).__name__.startswith("HIP"):
        raise NotImplementedError(
            f"dl.{primitive_name}: the one-sided primitives lower to NVSHMEM device calls and exist on NVIDIA GPUs "
            "only; this kernel is compiled for AMD (a rocSHMEM lowering is not implemented: docs/design.md)"
        )


def _data_pointer(value: Any, primitive_name: str, name: str) -> tl.tensor:
    return _validate.pointer(value, primitive_name, name, scalar_only=True)


@primitive
def put_signal(
    dest: tl.tensor,
    src: tl.tensor,
    nbytes: Any,
    signal_ptr: tl.tensor,
    signal: Any,
    rank: Any,
    sig_op: str = "set",
    _semantic: TritonSemantic | None = None,
) -> None:
    """Copy ``nbytes`` bytes from ``src`` (this rank) to ``dest`` on ``rank``, then update the 64-bit signal
    ``signal_ptr`` on ``rank`` with ``signal`` (``sig_op="set"``: store, ``"add"``: atomic add).

    ``dest`` and ``signal_ptr`` are this rank's addresses of symmetric objects (NVSHMEM translates them to
    ``rank``'s); ``src`` may be any global memory of this rank. All are scalar pointers (the base of the bytes);
    ``signal_ptr`` points to int64 / uint64. A rank that :func:`signal_wait` s for the signal sees the bytes.

    Every thread of the program calls it (NVSHMEM's ``nvshmemx_putmem_signal_block`` after a program barrier, so
    every thread's earlier writes of ``src`` are copied). It returns once ``src`` may be reused, not when the data
    has arrived. Cannot be called in a ``tl.reduce`` / ``tl.associative_scan`` combiner.
    """
    builder = cast(TritonSemantic, _semantic)
    _validate.outside_element_regions("put_signal")
    _require_nvidia("put_signal", builder)
    sig_op = _validate.choice(sig_op, "put_signal", "sig_op", abi.SIG_OPS)
    dest = _data_pointer(dest, "put_signal", "dest")
    if dest.dtype.is_const():
        raise TypeError("dl.put_signal: dest points to const data, but put_signal writes it")
    src = _data_pointer(src, "put_signal", "src")
    signal_ptr = _signal_pointer(signal_ptr, "put_signal", "signal_ptr")
    count = _byte_count(nbytes, "put_signal", builder)
    value = _signal_value(signal, "put_signal", "signal", builder)
    peer = _validate.rank_operand(rank, "put_signal", builder)
    args = [builder.cast(dest, tl.int64), builder.cast(src, tl.int64), count, builder.cast(signal_ptr, tl.int64)]
    _abi.call(abi.put_signal_symbol(sig_op), [*args, value, peer], tl.int32, pure=False, builder=builder)
    return None


@primitive
def get(
    dest: tl.tensor,
    src: tl.tensor,
    nbytes: Any,
    rank: Any,
    _semantic: TritonSemantic | None = None,
) -> None:
    """Copy ``nbytes`` bytes from ``src`` on ``rank`` (this rank's address of a symmetric object) to ``dest`` (this
    rank's global memory). Blocking: when it returns, every thread of the program may read ``dest``.

    Every thread of the program calls it (a barrier, NVSHMEM's ``nvshmemx_getmem_block``, a barrier). Cannot be
    called in a ``tl.reduce`` / ``tl.associative_scan`` combiner.
    """
    builder = cast(TritonSemantic, _semantic)
    _validate.outside_element_regions("get")
    _require_nvidia("get", builder)
    dest = _data_pointer(dest, "get", "dest")
    if dest.dtype.is_const():
        raise TypeError("dl.get: dest points to const data, but get writes it")
    src = _data_pointer(src, "get", "src")
    count = _byte_count(nbytes, "get", builder)
    peer = _validate.rank_operand(rank, "get", builder)
    args = [builder.cast(dest, tl.int64), builder.cast(src, tl.int64), count, peer]
    _abi.call(abi.NVSHMEM_GET, args, tl.int32, pure=False, builder=builder)
    return None


@primitive
def signal_wait(
    signal_ptr: tl.tensor,
    value: Any,
    cmp: str = "eq",
    _semantic: TritonSemantic | None = None,
) -> wait_token:
    """Spin until this rank's 64-bit signal ``signal_ptr`` satisfies ``signal <cmp> value``, compared **unsigned**
    (NVSHMEM's ``signal_wait_until`` on ``uint64_t``; :func:`wait` compares signed). ``cmp``: "eq", "ne", "ge",
    "gt", "le", "lt"; "ge" suits a signal peers ``put_signal(..., sig_op="add")`` to.

    Every thread of the program waits, then the program synchronizes; the bytes the signalling ``put_signal``
    delivered are then visible. Returns a token for :func:`consume_token`, like :func:`wait`. A constant test no
    signal can pass ("gt" 2**64 - 1, "lt" 0) is refused.
    """
    builder = cast(TritonSemantic, _semantic)
    _validate.outside_element_regions("signal_wait")
    _require_nvidia("signal_wait", builder)
    cmp = _validate.choice(cmp, "signal_wait", "cmp", abi.COMPARISONS)
    signal_ptr = _signal_pointer(signal_ptr, "signal_wait", "signal_ptr")
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool):
        unsigned = raw % (1 << 64) if -(1 << 63) <= raw < (1 << 64) else None
        if (cmp == "gt" and unsigned == (1 << 64) - 1) or (cmp == "lt" and unsigned == 0):
            raise ValueError(
                f"dl.signal_wait: no unsigned 64-bit signal is {'greater' if cmp == 'gt' else 'less'} than {unsigned}: "
                f"the wait (cmp {cmp!r}) could never return"
            )
    expected = _signal_value(value, "signal_wait", "value", builder)
    address = builder.cast(signal_ptr, tl.int64)
    token = _abi.call(abi.signal_wait_symbol(cmp), [address, expected], tl.int32, pure=False, builder=builder)
    return wait_token(token.handle)
