"""The value ``dl.wait`` returns: a token that ``dl.consume_token`` ties later memory accesses to.

It is its own Triton value type (not a ``tl.tensor``), so it keeps its type through ``if``/``for`` regions, calls
of ``@triton.jit`` helpers and returns, and ``dl.consume_token`` can tell a token from any other value. In the IR it
is the i32 the ABI's wait function returns.
"""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.core import base_type, base_value


class wait_token_type(base_type):  # lower case like Triton's own type classes
    """The Triton type of a ``wait_token``."""

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
        return "wait_token"
