"""Argument checks for the primitives: each raises a ``TypeError``/``ValueError`` whose message names the
primitive, the argument and the problem. Triton's code generator turns it into a ``CompilationError`` pointing at the
kernel line that called the primitive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import triton.language as tl
from triton.language.core import _unwrap_if_constexpr, base_value

SCOPES = ("cta", "gpu", "sys")
SEMANTICS = ("acquire", "relaxed")
SIG_OPS = ("set", "add")
COMM_SCOPES = ("gpu", "intra_node", "inter_node")
FLAG_TYPES = {"int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64"}
"""Flag element type -> the ABI suffix of the wait/notify symbol that works on it."""


def describe(value: Any) -> str:
    """How an error message names an argument: its type and, for constants, its value."""
    value = _unwrap_if_constexpr(value)
    if isinstance(value, tl.tensor):
        if value.type.is_block():
            return f"a tensor of {value.dtype} with shape {[int(dim) for dim in value.type.shape]}"
        return f"a scalar {value.dtype}"
    if isinstance(value, base_value):
        return f"a {value.type!r}"
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


def world_axis(axis: Any, primitive: str) -> None:
    """Only ``axis=-1`` (every rank of the world) exists for now."""
    axis = _unwrap_if_constexpr(axis)
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"dl.{primitive}: axis must be the integer constant -1, got {describe(axis)}")
    if axis != -1:
        raise ValueError(f"dl.{primitive}: only axis=-1 (all ranks of the world) is supported for now, got axis={axis}")


def pointer(value: Any, primitive: str, name: str, scalar_only: bool = False) -> tl.tensor:
    """A pointer (a scalar pointer or, unless ``scalar_only``, a tensor of pointers) to ordinary elements."""
    if not isinstance(value, tl.tensor) or not value.dtype.is_ptr():
        what = "a scalar pointer" if scalar_only else "a pointer or a tensor of pointers"
        raise TypeError(f"dl.{primitive}: {name} must be {what}, got {describe(value)}")
    if value.dtype.element_ty.is_block():
        raise TypeError(f"dl.{primitive}: {name} is a block pointer (tl.make_block_ptr), which is not supported")
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


def _fit(value: int, dtype: tl.dtype, primitive: str, name: str) -> int:
    bits = dtype.primitive_bitwidth
    if not -(1 << (bits - 1)) <= value < (1 << bits):
        raise ValueError(f"dl.{primitive}: {name}={value} does not fit in the {dtype} flags")
    if dtype.is_int_signed() and value >= 1 << (bits - 1):
        value -= 1 << bits
    if dtype.is_int_unsigned() and value < 0:
        value += 1 << bits
    return value


def integer(
    value: Any, dtype: tl.dtype, primitive: str, name: str, semantic: Any, scalar_only: bool = True
) -> tl.tensor:
    """An integer argument (a Python int / constexpr, or an integer tensor), converted to ``dtype``."""
    value = _unwrap_if_constexpr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return semantic.scalar_constant(_fit(value, dtype, primitive, name), dtype)
    if not isinstance(value, tl.tensor) or not value.dtype.is_int() or value.dtype.is_bool():
        raise TypeError(f"dl.{primitive}: {name} must be an integer, got {describe(value)}")
    if scalar_only and value.type.is_block():
        raise TypeError(f"dl.{primitive}: {name} must be a scalar integer, got {describe(value)}")
    return semantic.cast(value, dtype)


def rank_operand(value: Any, primitive: str, semantic: Any) -> tl.tensor:
    """A rank: a non-negative integer constant or a scalar integer tensor, as the ABI's i32."""
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw < 0:
        raise ValueError(f"dl.{primitive}: rank must be >= 0, got {raw}")
    return integer(value, tl.int32, primitive, "rank", semantic)


def count_operand(value: Any, primitive: str, name: str, semantic: Any) -> tl.tensor:
    """A number of flags: a non-negative integer constant or a scalar integer tensor, as the ABI's i32."""
    raw = _unwrap_if_constexpr(value)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw < 0:
        raise ValueError(f"dl.{primitive}: {name} must be >= 0, got {raw}")
    return integer(value, tl.int32, primitive, name, semantic)
