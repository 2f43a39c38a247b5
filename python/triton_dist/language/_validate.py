"""Argument checks for the primitives: each raises a ``TypeError``/``ValueError`` whose message names the
primitive, the argument and the problem. Triton's code generator turns it into a ``CompilationError`` pointing at the
kernel line that called the primitive.

Every value a primitive hands to Triton's builder goes through one of these checks first: Triton's builder asserts
(and aborts the process) on forms it cannot take, such as a block pointer where a pointer is expected.

``builder`` is Triton's ``TritonSemantic`` (what Triton passes builtins as ``_semantic``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

import triton.language as tl
from triton.language import core as _core
from triton.language.core import _unwrap_if_constexpr, base_value, tensor_descriptor_base
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language.token import wait_token

FLAG_TYPES = {"int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64"}
"""Flag element type -> the ABI suffix of the wait/notify symbol that works on it."""

GLOBAL_ADDRESS_SPACE = 1
"""Triton's address space of global memory: the only memory a peer can reach (shared memory is per program)."""


def describe(value: Any) -> str:
    """How an error message names an argument: its type and, for constants, its value."""
    value = _unwrap_if_constexpr(value)
    if isinstance(value, tl.tensor):
        if value.dtype.is_ptr() and value.dtype.element_ty.is_block():
            return "a block pointer (tl.make_block_ptr)"
        if value.type.is_block():
            return f"a tensor of {value.dtype} with shape {[int(dim) for dim in value.type.shape]}"
        return f"a scalar {value.dtype}"
    if isinstance(value, wait_token):
        return "a wait token (from dl.wait)"
    if isinstance(value, tensor_descriptor_base):
        return "a tensor descriptor (tl.make_tensor_descriptor)"
    if isinstance(value, tl.tuple):
        return f"a tuple of {len(value)} values"
    if isinstance(value, base_value):
        return f"a {type(value).__name__}"
    if isinstance(value, tl.dtype):
        return f"the type {value}"
    return f"{value!r} ({type(value).__name__})"


def choice(value: Any, primitive: str, name: str, allowed: Sequence[str]) -> str:
    """A string argument given as a Python string or a ``tl.constexpr``, checked against ``allowed``."""
    value = _unwrap_if_constexpr(value)
    if not isinstance(value, str):
        raise TypeError(
            f"dl.{primitive}: {name} must be a string constant, one of {list(allowed)}, got {describe(value)}"
        )
    if value not in allowed:
        raise ValueError(f"dl.{primitive}: {name} must be one of {list(allowed)}, got {value!r}")
    return value


def rank_axis(axis: Any, primitive: str) -> str:
    """The axis of ``dl.rank`` / ``dl.num_ranks``, one of ``abi.RANK_AXES`` (``-1`` is accepted as ``"world"``)."""
    axis = _unwrap_if_constexpr(axis)
    is_int = isinstance(axis, int) and not isinstance(axis, bool)
    if is_int and axis == -1:
        return "world"
    if isinstance(axis, str) and axis in abi.RANK_AXES:
        return axis
    accepted = f"one of {list(abi.RANK_AXES)} ('world', the default, may also be written -1)"
    if isinstance(axis, str) or is_int:
        raise ValueError(f"dl.{primitive}: axis must be {accepted}, got axis={axis!r}")
    raise TypeError(f"dl.{primitive}: axis must be {accepted}, got {describe(axis)}")


def _is_pointer(value: Any) -> bool:
    return isinstance(value, tl.tensor) and value.dtype.is_ptr()


def pointer(value: Any, primitive: str, name: str, scalar_only: bool = False) -> tl.tensor:
    """A pointer (a scalar pointer or, unless ``scalar_only``, a tensor of pointers) to ordinary elements in global
    memory."""
    if _is_pointer(value) and value.dtype.element_ty.is_block():
        raise TypeError(
            f"dl.{primitive}: {name} is a block pointer (tl.make_block_ptr), which is not supported: pass the base "
            "pointer (and build the block pointer from the result)"
        )
    if not _is_pointer(value):
        what = "a scalar pointer" if scalar_only else "a pointer or a tensor of pointers"
        raise TypeError(f"dl.{primitive}: {name} must be {what}, got {describe(value)}")
    address_space = _unwrap_if_constexpr(value.dtype.address_space)
    if address_space != GLOBAL_ADDRESS_SPACE:
        raise TypeError(
            f"dl.{primitive}: {name} points to address space {address_space}, but only global memory "
            f"(address space {GLOBAL_ADDRESS_SPACE}) is symmetric: shared memory cannot be reached from another rank"
        )
    if scalar_only and value.type.is_block():
        raise TypeError(
            f"dl.{primitive}: {name} must be a scalar pointer (the base of the flags), got {describe(value)}"
        )
    return value


def flag_suffix(ptr: tl.tensor, primitive: str, name: str) -> str:
    """The ABI suffix ("i32"/"i64") for flags of ``ptr``'s element type, which must be a 32- or 64-bit integer."""
    element = ptr.dtype.element_ty
    suffix = FLAG_TYPES.get(getattr(element, "name", ""))
    if suffix is None:
        raise TypeError(f"dl.{primitive}: {name} must point to int32 or int64 flags, got a pointer to {element}")
    return suffix


def _spelling(dtype: tl.dtype) -> str:
    """How a kernel writes ``dtype`` (``tl.int32``)."""
    return f"tl.{dtype.name}"


def _constant_in_range(value: int, dtype: tl.dtype, primitive: str, name: str, what: str) -> int:
    """``value`` if ``dtype`` (an integer type) holds it; never wraps."""
    bits = dtype.primitive_bitwidth
    low, high = (0, 1 << bits) if dtype.is_int_unsigned() else (-(1 << (bits - 1)), 1 << (bits - 1))
    if not low <= value < high:
        raise ValueError(f"dl.{primitive}: {name}={value} does not fit in {what} ({dtype}: {low} to {high - 1})")
    return value


def integer(
    value: Any,
    dtype: tl.dtype,
    primitive: str,
    name: str,
    builder: TritonSemantic,
    what: str,
    scalar_only: bool = True,
    narrowing: bool = True,
) -> tl.tensor:
    """An integer argument (a Python int / constexpr, or an integer tensor), converted to ``dtype``.

    ``what`` names the type a constant must fit in, for the message ("the int32 flags", "the ABI's int32 rank").
    Without ``narrowing``, a tensor wider than ``dtype`` is refused: its runtime value cannot be range-checked, and
    the conversion would silently drop the high bits.
    """
    value = _unwrap_if_constexpr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return builder.scalar_constant(_constant_in_range(value, dtype, primitive, name, what), dtype)
    if not isinstance(value, tl.tensor) or not value.dtype.is_int() or value.dtype.is_bool():
        raise TypeError(f"dl.{primitive}: {name} must be an integer, got {describe(value)}")
    if scalar_only and value.type.is_block():
        raise TypeError(f"dl.{primitive}: {name} must be a scalar integer, got {describe(value)}")
    if not narrowing and value.dtype.primitive_bitwidth > dtype.primitive_bitwidth:
        raise TypeError(
            f"dl.{primitive}: {name} is {describe(value)}, wider than {what}"
            f"{'' if str(dtype) in what else f' ({dtype})'}: it would be truncated; "
            f"convert it explicitly (.to({_spelling(dtype)})) where its values fit"
        )
    return builder.cast(value, dtype)


def _non_negative(value: Any, primitive: str, name: str) -> None:
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw < 0:
        raise ValueError(f"dl.{primitive}: {name} must be >= 0, got {raw}")


def rank_operand(value: Any, primitive: str, builder: TritonSemantic) -> tl.tensor:
    """A rank: a non-negative integer constant below ``abi.MAX_RANKS`` or a scalar integer tensor, as the ABI's
    i32."""
    _non_negative(value, primitive, "rank")
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool) and (1 << 31) > raw >= abi.MAX_RANKS:
        raise ValueError(f"dl.{primitive}: rank={raw} is beyond the largest world ({abi.MAX_RANKS} ranks)")
    return integer(value, tl.int32, primitive, "rank", builder, "the ABI's rank type")


def rank_list_operand(value: Any, primitive: str, builder: TritonSemantic) -> tl.tensor:
    """A 1-D integer tensor of ranks, as the ABI's i32."""
    if not isinstance(value, tl.tensor) or not value.dtype.is_int() or value.dtype.is_bool():
        raise TypeError(f"dl.{primitive}: rank must be an integer or a 1-D tensor of integers, got {describe(value)}")
    if len(value.type.shape) != 1:
        raise TypeError(f"dl.{primitive}: a tensor of ranks must be 1-D, got {describe(value)}")
    return builder.cast(value, tl.int32)


def count_operand(value: Any, primitive: str, name: str, builder: TritonSemantic) -> tl.tensor:
    """A number of flags: a non-negative integer constant or a scalar integer tensor, as the ABI's i32."""
    _non_negative(value, primitive, name)
    return integer(value, tl.int32, primitive, name, builder, f"the ABI's {name} type", narrowing=False)


def flag_value(
    value: Any, flag_type: tl.dtype, primitive: str, name: str, builder: TritonSemantic, scalar_only: bool = True
) -> tl.tensor:
    """A value written to or compared with flags of ``flag_type``; a tensor wider than the flags is refused (it would
    be truncated)."""
    return integer(value, flag_type, primitive, name, builder, f"the {flag_type} flags", scalar_only, narrowing=False)


def consumable(value: Any, primitive: str, builder: TritonSemantic) -> tl.tensor:
    """A value ``consume_token`` can tie to a token: a pointer (tensor) to global memory, or an integer."""
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not -(1 << 63) <= raw < 1 << 64:
            raise ValueError(f"dl.{primitive}: value={raw} does not fit in 64 bits")
        return builder.to_tensor(raw)
    if _is_pointer(value):
        return pointer(value, primitive, "value")
    if isinstance(value, tl.tensor) and value.dtype.is_int() and not value.dtype.is_bool():
        return value
    raise TypeError(f"dl.{primitive}: value must be a pointer or an integer (scalar or tensor), got {describe(value)}")


def element_mask(value: Any, primitive: str, builder: TritonSemantic) -> tl.tensor | None:
    """An optional mask of a tensor form: None, a boolean constant or a boolean tensor (broadcast by the user)."""
    raw = _unwrap_if_constexpr(value)
    if raw is None:
        return None
    if isinstance(raw, bool):
        return builder.to_tensor(raw)
    if not isinstance(raw, tl.tensor) or not raw.dtype.is_int1():
        raise TypeError(f"dl.{primitive}: mask must be a boolean tensor, got {describe(raw)}")
    return raw


def no_mask(value: Any, primitive: str) -> None:
    """The scalar forms take no mask (wrap the call in an ``if``)."""
    if _unwrap_if_constexpr(value) is not None:
        raise TypeError(
            f"dl.{primitive}: mask applies to the tensor forms only; for a scalar ptr and rank, put the call under an "
            "`if` instead"
        )
    return None


_ELEMENT_REGIONS = {
    "reduce.<locals>.make_combine_region": "tl.reduce",
    "associative_scan.<locals>.make_combine_region": "tl.associative_scan",
    "map_elementwise": "tl.map_elementwise",
}
"""Triton's functions (in triton/language/core.py) that generate a user function as a per-element region, by
qualified name -> the builtin that calls it."""


def element_region() -> str | None:
    """The builtin whose per-element function is being generated now (a ``tl.reduce`` / ``tl.associative_scan``
    combiner, a ``tl.map_elementwise`` function), found on the Python stack: Triton generates such a function, and
    any helper it calls, from inside ``make_combine_region`` / ``map_elementwise``. None outside one."""
    frame: FrameType | None = sys._getframe(1)
    core_file = _core.__file__
    while frame is not None:
        code = frame.f_code
        if code.co_filename == core_file:
            where = _ELEMENT_REGIONS.get(getattr(code, "co_qualname", code.co_name))
            if where is not None:
                return where
        frame = frame.f_back
    return None


def outside_element_regions(primitive: str) -> None:
    """``dl.wait`` / ``dl.notify`` synchronize the whole program (a barrier, then one thread's flag access); a
    combiner or mapped function runs per element (pair) on each thread, so they cannot be called there."""
    builtin = element_region()
    if builtin is not None:
        role = "function" if builtin == "tl.map_elementwise" else "combine function"
        raise TypeError(
            f"dl.{primitive} cannot be called in the {role} of {builtin}: that function runs per element on each "
            f"thread, while dl.{primitive} synchronizes the whole program; call it before or after {builtin}"
        )


def broadcastable(value: tl.tensor, shape: Sequence[int], primitive: str, name: str, of: str) -> None:
    """A tensor argument of a tensor form: a scalar, or a tensor of ``shape`` (dimensions of size 1 broadcast)."""
    if not value.type.is_block():
        return
    mine = [int(dim) for dim in value.type.shape]
    if len(mine) != len(shape) or any(dim not in (1, want) for dim, want in zip(mine, shape, strict=True)):
        raise TypeError(
            f"dl.{primitive}: {name} must be a scalar or a tensor of {of}'s shape {list(shape)}, got {describe(value)}"
        )
