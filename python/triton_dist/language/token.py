"""The value ``dl.wait`` returns: a token that ``dl.consume_token`` ties later memory accesses to.

It is its own Triton value type (not a ``tl.tensor``), so it keeps its type through ``if``/``for`` regions, calls
of ``@triton.jit`` helpers and returns, and ``dl.consume_token`` can tell a token from any other value. In the IR it
is the i32 the ABI's wait function returns.
"""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.core import base_type, base_value

_NOT_A_TENSOR = (
    "a wait token (from dl.wait) is not a tensor: it supports no arithmetic, comparison, tl.where or other tensor "
    "operation; pass it to dl.consume_token to order loads or values after the wait"
)


class NotATensorError(AttributeError):
    """What Triton's tensor operations meet when they look for a tensor attribute on a token's type (an
    ``AttributeError``, so ``hasattr`` / ``getattr`` with a default keep working)."""


class wait_token_type(base_type):  # lower case like Triton's own type classes
    """The Triton type of a ``wait_token``."""

    def __getattr__(self, name: str) -> Any:
        # Only attributes the type lacks: Triton's tensor operations (tl.where, tensor == token) read
        # `.scalar` / `.shape` of their operands' types.
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotATensorError(f"{_NOT_A_TENSOR} (Triton looked for the tensor attribute {name!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, wait_token_type)

    def __hash__(self) -> int:
        return hash("triton_dist.wait_token")

    def __repr__(self) -> str:
        return "wait_token"

    def mangle(self) -> str:
        return "DWT"

    def _flatten_ir_types(self, builder: Any, out: list[Any]) -> None:
        out.append(builder.get_int32_ty())

    def _unflatten_ir(self, handles: list[Any], cursor: int) -> tuple[wait_token, int]:
        return wait_token(handles[cursor]), cursor + 1


class wait_token(base_value):
    """What ``dl.wait`` returns; pass it to ``dl.consume_token``. It supports no arithmetic or comparison."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.type = wait_token_type()

    def _flatten_ir(self, handles: list[Any]) -> None:
        handles.append(self.handle)

    def as_i32(self) -> tl.tensor:
        """The token as the ABI's i32 (for the consume call)."""
        return tl.tensor(self.handle, tl.int32)

    def __repr__(self) -> str:
        # Triton's messages print operands they cannot take ("cannot convert <repr> ... to tensor"): say what to do.
        return "wait_token (from dl.wait: not a tensor; pass it to dl.consume_token)"


def _refuse(operator: str) -> Any:
    def method(self: wait_token, *args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        raise TypeError(f"{_NOT_A_TENSOR} (got `{operator}`)")

    method.__name__ = f"refuse_{operator}"
    return method


_OPERATORS = {
    "__eq__": "==", "__ne__": "!=", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=",
    "__add__": "+", "__radd__": "+", "__sub__": "-", "__rsub__": "-", "__mul__": "*", "__rmul__": "*",
    "__truediv__": "/", "__rtruediv__": "/", "__floordiv__": "//", "__rfloordiv__": "//", "__mod__": "%",
    "__rmod__": "%", "__and__": "&", "__rand__": "&", "__or__": "|", "__ror__": "|", "__xor__": "^",
    "__rxor__": "^", "__lshift__": "<<", "__rlshift__": "<<", "__rshift__": ">>", "__rrshift__": ">>",
    "__neg__": "unary -", "__invert__": "~",
}  # fmt: skip
"""The operators a kernel could apply to a token: each is a TypeError naming the token and the operator (the code
generator calls them with ``_semantic``; Python's own ``==`` would compare the objects and give a constant)."""

for _name, _operator in _OPERATORS.items():
    setattr(wait_token, _name, _refuse(_operator))
wait_token.__hash__ = object.__hash__  # type: ignore[method-assign]  # defining __eq__ removed it
