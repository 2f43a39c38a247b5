"""How a primitive emits a call to a device-library function of docs/abi.md (names: :mod:`triton_dist.abi`).

A call is Triton's ``tt.extern_elementwise`` op under the library name ``triton_dist``; the stages hook of
:mod:`triton_dist.compiler` links the bitcode that defines the symbol. Scalars get one call executed by every
thread of the program (which is what the ABI's wait/notify expect); tensors get one call per element.

``builder`` is Triton's ``TritonSemantic`` (what Triton passes builtins as ``_semantic``): the object that builds
Triton IR for the language's operations.
"""

from __future__ import annotations

from collections.abc import Sequence

import triton.language as tl
from triton.language.core import extern_elementwise
from triton.language.semantic import TritonSemantic

from triton_dist.abi import LIB_NAME


def call(symbol: str, args: Sequence[tl.tensor], ret: tl.dtype, pure: bool, builder: TritonSemantic) -> tl.tensor:
    """Emit a call of ``symbol`` on ``args`` (tensors of the exact ABI types; scalars broadcast to tensors).

    ``pure`` calls may be CSE'd, hoisted out of loops and removed when unused; the others are kept in program
    order with the memory operations around them.
    """
    types = tuple(arg.dtype for arg in args)
    return extern_elementwise(LIB_NAME, "", list(args), {types: (symbol, ret)}, is_pure=pure, _semantic=builder)
