"""The device-library functions of docs/abi.md, and how a primitive emits a call to one.

A call is Triton's ``tt.extern_elementwise`` op under the library name ``triton_dist``; the stages hook of
:mod:`triton_dist.compiler` links the bitcode that defines the symbol. Scalars get one call executed by every
thread of the program (which is what the ABI's wait/notify expect); tensors get one call per element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import triton.language as tl
from triton.language.core import extern_elementwise

from triton_dist.compiler.device_library import LIB_NAME

RANK = "__triton_dist_rank"
NUM_RANKS = "__triton_dist_num_ranks"
SYMM_AT = "__triton_dist_symm_at"
CONSUME_TOKEN = "__triton_dist_consume_token"


def wait_symbol(scope: str, semantic: str, flag: str) -> str:
    """``__triton_dist_wait_{cta,gpu,sys}_{acquire,relaxed}_{i32,i64}``: (i64 addr, i32 n, iN value) -> i32 token."""
    return f"__triton_dist_wait_{scope}_{semantic}_{flag}"


def notify_symbol(sig_op: str, comm_scope: str, flag: str) -> str:
    """``__triton_dist_notify_{set,add}_{gpu,intra_node,inter_node}_{i32,i64}``: (i64 addr, i32 rank, iN signal)."""
    return f"__triton_dist_notify_{sig_op}_{comm_scope}_{flag}"


def call(symbol: str, args: Sequence[tl.tensor], ret: tl.dtype, pure: bool, semantic: Any) -> tl.tensor:
    """Emit a call of ``symbol`` on ``args`` (tensors of the exact ABI types; scalars broadcast to tensors).

    ``pure`` calls may be CSE'd, hoisted out of loops and removed when unused; the others are kept in program
    order with the memory operations around them.
    """
    types = tuple(arg.dtype for arg in args)
    return extern_elementwise(LIB_NAME, "", list(args), {types: (symbol, ret)}, is_pure=pure, _semantic=semantic)
