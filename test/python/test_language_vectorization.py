"""``dl.symm_at`` and ``dl.consume_token`` keep the alignment Triton knows about a pointer, so loads and stores
through their results stay 16-byte vectors; and loads through a consumed pointer stay after the wait.

The kernels compile without the device-side checks (``Checks.NONE``): on gfx942 a ``tt.assert`` brings the printf
hostcall code with its own 16-byte loads, which would blur the count of data loads. test_language_guards.py shows
that the checks leave the data path's vectors as they are.
"""

from __future__ import annotations

import re

import pytest
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, index_of, need_library, need_real_library

import triton_dist.language as dl
from triton_dist.compiler import Checks

NUM_WARPS = 4
THREADS = {"sm_90": NUM_WARPS * 32, "gfx942": NUM_WARPS * 64}
ELEMENT_BYTES = {"bf16": 2, "fp32": 4, "i8": 1, "i64": 8}
VECTOR_LOAD = {"sm_90": r"\bld\.global(\.\w+)*\.(v4\.b32|v2\.b64)\b", "gfx942": r"\b(global|buffer)_load_dwordx4\b"}
VECTOR_STORE = {"sm_90": r"\bst\.global(\.\w+)*\.(v4\.b32|v2\.b64)\b", "gfx942": r"\b(global|buffer)_store_dwordx4\b"}
STORE = {"sm_90": r"\bst\.global\b", "gfx942": r"\b(global|buffer)_store_"}


def block(dtype: str, target_name: str) -> int:
    """A tile size that gives every thread exactly 16 bytes."""
    return 16 // ELEMENT_BYTES[dtype] * THREADS[target_name]


@triton.jit
def copy_tile(src_ptr, out_ptr, peer, SCALAR_FORM: tl.constexpr, BLOCK: tl.constexpr):
    """The baseline: the same tile copy without symm_at."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets))


@triton.jit
def pull_tile(src_ptr, out_ptr, peer, SCALAR_FORM: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if SCALAR_FORM:
        values = tl.load(dl.symm_at(src_ptr, peer) + offsets)
    else:
        values = tl.load(dl.symm_at(src_ptr + offsets, peer))
    tl.store(out_ptr + offsets, values)


@triton.jit
def push_tile(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(src_ptr + offsets)
    for peer in range(0, dl.num_ranks()):
        tl.store(dl.symm_at(dst_ptr + dl.rank() * BLOCK + offsets, peer), values)


@triton.jit
def wait_then_load(flag_ptr, data_ptr, out_ptr, BLOCK: tl.constexpr):
    token = dl.wait(flag_ptr, 1, "sys", "acquire")
    data_ptr = dl.consume_token(data_ptr, token)
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(data_ptr + offsets))


def _lines(kernel, signature, target_name, constexprs, aligned):
    compiled = compile_kernel(kernel, signature, target_name, constexprs, aligned, NUM_WARPS, Checks.NONE)
    return assembly(compiled, target_name).splitlines()


def _matching(lines, pattern):
    return [line for line in lines if re.search(pattern, line)]


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
@pytest.mark.parametrize("scalar_form", [False, True], ids=["symm_at(ptr+offs)", "symm_at(ptr)+offs"])
@pytest.mark.parametrize("dtype", sorted(ELEMENT_BYTES))
def test_loads_through_symm_at_are_16_byte_vectors(dtype, scalar_form, target_name):
    need_library(target_name)
    signature = {"src_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "peer": "i32"}
    constexprs = {"SCALAR_FORM": scalar_form, "BLOCK": block(dtype, target_name)}
    aligned = ("src_ptr", "out_ptr")
    lines = _lines(pull_tile, signature, target_name, constexprs, aligned)
    baseline = _lines(copy_tile, signature, target_name, constexprs, aligned)
    vectors = _matching(lines, VECTOR_LOAD[target_name])
    assert len(vectors) == len(_matching(baseline, VECTOR_LOAD[target_name])) >= 1, "\n".join(lines)


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_stores_through_symm_at_are_16_byte_vectors(dtype, target_name):
    need_library(target_name)
    signature = {"src_ptr": f"*{dtype}", "dst_ptr": f"*{dtype}"}
    constexprs = {"BLOCK": block(dtype, target_name)}
    lines = _lines(push_tile, signature, target_name, constexprs, ("src_ptr", "dst_ptr"))
    stores = _matching(lines, STORE[target_name])
    assert stores and all(_matching([line], VECTOR_STORE[target_name]) for line in stores), "\n".join(lines)


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
def test_loads_through_a_consumed_pointer_are_16_byte_vectors(target_name):
    need_library(target_name)
    signature = {"flag_ptr": "*i32", "data_ptr": "*bf16", "out_ptr": "*bf16"}
    constexprs = {"BLOCK": block("bf16", target_name)}
    lines = _lines(wait_then_load, signature, target_name, constexprs, ("data_ptr", "out_ptr"))
    assert _matching(lines, VECTOR_LOAD[target_name]), "\n".join(lines)
    assert _matching(lines, VECTOR_STORE[target_name]), "\n".join(lines)


# Per target: the instruction that makes the poll an acquire, and the barrier that ends the wait.
WAIT_ACQUIRE = {"sm_90": r"\bld\.acquire\.sys\b", "gfx942": r"\bbuffer_inv\b"}
WAIT_BARRIER = {"sm_90": r"\bbar(rier)?\.sync\b", "gfx942": r"\bs_barrier\b"}


@pytest.mark.parametrize("target_name", sorted(WAIT_ACQUIRE))
def test_loads_through_a_consumed_pointer_stay_after_the_wait(target_name):
    """In assembly order: the first acquire of the poll, the barrier that ends the wait, then the data load. (The
    polling loop's later iterations may be laid out after the kernel's return; what matters is that the load is not
    above them.)"""
    need_real_library(target_name)
    signature = {"flag_ptr": "*i32", "data_ptr": "*bf16", "out_ptr": "*bf16"}
    constexprs = {"BLOCK": block("bf16", target_name)}
    lines = _lines(wait_then_load, signature, target_name, constexprs, ("data_ptr", "out_ptr"))
    acquire = index_of(lines, WAIT_ACQUIRE[target_name])
    load = index_of(lines, VECTOR_LOAD[target_name])
    barrier = index_of(lines[:load], WAIT_BARRIER[target_name], last=True) if load >= 0 else -1
    assert 0 <= acquire < barrier < load, "\n".join(lines)
