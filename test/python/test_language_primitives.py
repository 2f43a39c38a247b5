"""Every triton_dist primitive compiles for sm_90 and gfx942 on the CPU, and the final assembly shows what the
primitive promises: the context global where rank/world/heap bases are read, acquire polling for ``dl.wait`` by
scope, release writes for ``dl.notify`` by comm scope, tensor-of-pointer notifies written once per flag.

Tests named ``*_instructions`` assert the real device library's instruction spellings and skip on any other library.
"""

from __future__ import annotations

import re

import pytest
import triton
import triton.language as tl
from dl_compile import (
    TARGETS,
    assembly,
    compile_kernel,
    context_is_defined_and_used,
    index_of,
    need_library,
    need_real_library,
)

import triton_dist.language as dl
from triton_dist import abi

TARGET_NAMES = sorted(TARGETS)
FLAG_TYPES = {"i32": "*i32", "i64": "*i64"}


@triton.jit
def rank_kernel(out_ptr):
    tl.store(out_ptr + 0, dl.rank())
    tl.store(out_ptr + 1, dl.num_ranks())
    tl.store(out_ptr + 2, dl.rank(axis=-1) + dl.num_ranks(-1))


@triton.jit
def rank_axis_kernel(out_ptr, AXIS: tl.constexpr):
    tl.store(out_ptr + 0, dl.rank(axis=AXIS))
    tl.store(out_ptr + 1, dl.num_ranks(AXIS))


@triton.jit
def symm_at_kernel(heap_ptr, out_ptr, peer):
    tl.store(out_ptr, dl.symm_at(heap_ptr, peer).to(tl.int64) - heap_ptr.to(tl.int64))


@triton.jit(do_not_specialize=["value"])
def wait_kernel(flags_ptr, n, value, SCOPE: tl.constexpr, SEMANTIC: tl.constexpr):
    dl.wait(flags_ptr, n, SCOPE, SEMANTIC, waitValue=value)


@triton.jit(do_not_specialize=["signal"])
def notify_kernel(flag_ptr, peer, signal, OP: tl.constexpr, COMM: tl.constexpr):
    dl.notify(flag_ptr, peer, signal=signal, sig_op=OP, comm_scope=COMM)


@triton.jit(do_not_specialize=["signal"])
def notify_tensor_kernel(flags_ptr, peer, signal, N: tl.constexpr, OP: tl.constexpr, COMM: tl.constexpr):
    dl.notify(flags_ptr + tl.arange(0, N), peer, signal=signal, sig_op=OP, comm_scope=COMM)


@triton.jit
def consume_kernel(flag_ptr, data_ptr, out_ptr, index):
    token = dl.wait(flag_ptr, 1, "gpu", "acquire")
    data_ptr = dl.consume_token(data_ptr, token)
    index = dl.consume_token(index, token)
    tl.store(out_ptr, tl.load(data_ptr + index))


@triton.jit
def default_arguments_kernel(flag_ptr):
    dl.notify(flag_ptr, dl.rank())  # signal=1, "set", "inter_node"
    dl.wait(flag_ptr, 1, "sys", "acquire")  # waitValue=1


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_rank_and_num_ranks_read_the_context(target_name):
    need_library(target_name)
    asm = assembly(compile_kernel(rank_kernel, {"out_ptr": "*i32"}, target_name), target_name)
    assert context_is_defined_and_used(asm, target_name), asm


# The context's fields after the heap bases (abi.CONTEXT_LOCAL_RANK_OFFSET, ..._NUM_RANKS_OFFSET): 2064 and 2068
# (gfx942 loads them from the context's address: a scalar load's 0x810 / 0x814 or a vector load's offset).
LOCAL_FIELDS = {
    "sm_90": (rf"\[{abi.CONTEXT_SYMBOL}\+2064\]", rf"\[{abi.CONTEXT_SYMBOL}\+2068\]"),
    "gfx942": (r"_load_dword\s.*(0x810|offset:2064)$", r"_load_dword\s.*(0x814|offset:2068)$"),
}
DIVISION = {"sm_90": r"\bdiv\.u32\b", "gfx942": r"\bv_rcp_iflag_f32"}


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_rank_axes_read_their_context_fields(target_name):
    """Axis "local" reads local_rank / local_num_ranks (after the heap bases), "node" divides rank / num_ranks by
    local_num_ranks, "world" (and -1) reads neither."""
    need_real_library(target_name)
    rank_field, per_node_field = LOCAL_FIELDS[target_name]
    for axis, (ttir_names, reads_rank, reads_per_node, divides) in {
        "world": ((abi.RANK, abi.NUM_RANKS), False, False, False),
        -1: ((abi.RANK, abi.NUM_RANKS), False, False, False),
        "local": ((abi.LOCAL_RANK, abi.LOCAL_NUM_RANKS), True, True, False),
        "node": ((abi.NODE, abi.NUM_NODES), False, True, True),
    }.items():
        compiled = compile_kernel(rank_axis_kernel, {"out_ptr": "*i32"}, target_name, {"AXIS": axis})
        for name in ttir_names:
            assert f'symbol = "{name}"' in compiled.asm["ttir"], (axis, name)
        asm = assembly(compiled, target_name)
        assert "__triton_dist_" + "local" not in asm.replace(abi.CONTEXT_SYMBOL, ""), "the calls must be inlined"
        assert context_is_defined_and_used(asm, target_name), asm
        assert bool(re.search(rank_field, asm, re.M)) == reads_rank, (axis, asm)
        assert bool(re.search(per_node_field, asm, re.M)) == reads_per_node, (axis, asm)
        assert bool(re.search(DIVISION[target_name], asm)) == divides, (axis, asm)


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_symm_at_reads_the_heap_bases(target_name):
    need_library(target_name)
    signature = {"heap_ptr": "*i64", "out_ptr": "*i64", "peer": "i32"}
    asm = assembly(compile_kernel(symm_at_kernel, signature, target_name), target_name)
    assert context_is_defined_and_used(asm, target_name), asm


@pytest.mark.parametrize("target_name", TARGET_NAMES)
@pytest.mark.parametrize("flag", sorted(FLAG_TYPES))
@pytest.mark.parametrize("semantic", ["acquire", "relaxed"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_wait_compiles(scope, semantic, flag, target_name):
    need_library(target_name)
    signature = {"flags_ptr": FLAG_TYPES[flag], "n": "i32", "value": flag}
    compiled = compile_kernel(wait_kernel, signature, target_name, {"SCOPE": scope, "SEMANTIC": semantic})
    assert abi.wait_symbol(scope, semantic, "eq", flag) in compiled.asm["ttir"]
    assert "__triton_dist_wait" not in assembly(compiled, target_name), "the library call must be inlined"


@pytest.mark.parametrize("target_name", TARGET_NAMES)
@pytest.mark.parametrize("flag", sorted(FLAG_TYPES))
@pytest.mark.parametrize("comm", ["gpu", "intra_node", "inter_node"])
@pytest.mark.parametrize("op", ["set", "add"])
def test_notify_compiles(op, comm, flag, target_name):
    need_library(target_name)
    signature = {"flag_ptr": FLAG_TYPES[flag], "peer": "i32", "signal": flag}
    compiled = compile_kernel(notify_kernel, signature, target_name, {"OP": op, "COMM": comm})
    assert f"__triton_dist_notify_{op}_{comm}_{flag}" in compiled.asm["ttir"]
    asm = assembly(compiled, target_name)
    assert "__triton_dist_notify" not in asm, "the library call must be inlined"
    assert context_is_defined_and_used(asm, target_name), "notify translates the flag address with the heap bases"


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_defaults_and_consume_token_compile(target_name):
    need_library(target_name)
    compiled = compile_kernel(default_arguments_kernel, {"flag_ptr": "*i32"}, target_name)
    ttir = compiled.asm["ttir"]
    assert "__triton_dist_notify_set_inter_node_i32" in ttir and abi.wait_symbol("sys", "acquire", "eq", "i32") in ttir
    signature = {"flag_ptr": "*i32", "data_ptr": "*fp32", "out_ptr": "*fp32", "index": "i32"}
    compiled = compile_kernel(consume_kernel, signature, target_name)
    assert compiled.asm["ttir"].count("__triton_dist_consume_token") == 2  # the pointer and the integer


# ---------------------------------------------------------------------------------------------------------------
# What the real library's code must look like (PTX ISA / AMDGPU memory model spellings).

PTX_WAIT_LOAD = {"acquire": r"ld\.acquire\.{scope}", "relaxed": r"ld\.(relaxed\.{scope}|volatile)"}


@pytest.mark.parametrize("semantic", ["acquire", "relaxed"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_wait_polls_with_the_scope_ptx_instructions(scope, semantic):
    need_real_library("sm_90")
    signature = {"flags_ptr": "*i32", "n": "i32", "value": "i32"}
    compiled = compile_kernel(wait_kernel, signature, "sm_90", {"SCOPE": scope, "SEMANTIC": semantic})
    lines = assembly(compiled, "sm_90").splitlines()
    poll = index_of(lines, PTX_WAIT_LOAD[semantic].format(scope=scope))
    assert poll >= 0, f"no {semantic} {scope}-scope poll load in\n" + "\n".join(lines)
    if semantic == "relaxed":
        assert index_of(lines, r"ld\.acquire") < 0
    assert index_of(lines, r"\bbar(rier)?\.sync\b", last=True) > poll, "the program synchronizes after polling"


@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_wait_polls_with_the_scope_amdgcn_instructions(scope):
    need_real_library("gfx942")
    signature = {"flags_ptr": "*i32", "n": "i32", "value": "i32"}
    compiled = compile_kernel(wait_kernel, signature, "gfx942", {"SCOPE": scope, "SEMANTIC": "acquire"})
    lines = assembly(compiled, "gfx942").splitlines()
    assert index_of(lines, r"\bs_sleep\b") >= 0, "the polling loop backs off with s_sleep"
    poll = index_of(lines, r"\b(global|flat|buffer)_load_dword\b")
    assert poll >= 0, "\n".join(lines)
    if scope in ("gpu", "sys"):
        invalidate = index_of(lines, r"\bbuffer_inv\b.*\bsc1\b", last=True)
        assert invalidate > poll, "an acquire at device/system scope invalidates the caches after the poll"
    assert index_of(lines, r"\bs_barrier\b", last=True) > poll


@pytest.mark.parametrize("flag", sorted(FLAG_TYPES))
@pytest.mark.parametrize("comm", ["gpu", "intra_node", "inter_node"])
@pytest.mark.parametrize("op", ["set", "add"])
def test_notify_releases_at_the_comm_scope_ptx_instructions(op, comm, flag):
    need_real_library("sm_90")
    scope = "gpu" if comm == "gpu" else "sys"
    signature = {"flag_ptr": FLAG_TYPES[flag], "peer": "i32", "signal": flag}
    compiled = compile_kernel(notify_kernel, signature, "sm_90", {"OP": op, "COMM": comm})
    lines = assembly(compiled, "sm_90").splitlines()
    writes = r"\bst\.|\b(atom|red)\..*\bexch\b" if op == "set" else r"\b(atom|red)\..*\badd\b"
    write = index_of(lines, rf"(?=.*({writes}))(?=.*\.{scope}\b)")
    assert write >= 0, f"no {scope}-scope {op} in\n" + "\n".join(lines)
    released = "release" in lines[write] or index_of(lines[:write], rf"\bfence\.(sc|acq_rel)\.{scope}\b") >= 0
    assert released, f"the flag write is not a release at {scope} scope:\n" + "\n".join(lines)
    assert 0 <= index_of(lines, r"\bbar(rier)?\.sync\b") < write, "the program synchronizes before the write"


@pytest.mark.parametrize("comm", ["gpu", "intra_node"])
@pytest.mark.parametrize("op", ["set", "add"])
def test_notify_releases_at_the_comm_scope_amdgcn_instructions(op, comm):
    need_real_library("gfx942")
    signature = {"flag_ptr": "*i32", "peer": "i32", "signal": "i32"}
    compiled = compile_kernel(notify_kernel, signature, "gfx942", {"OP": op, "COMM": comm})
    lines = assembly(compiled, "gfx942").splitlines()
    write_pattern = r"\bglobal_(store_dword|atomic_swap)\b" if op == "set" else r"\bglobal_atomic_add\b"
    write = index_of(lines, write_pattern)
    assert write >= 0, "\n".join(lines)
    assert 0 <= index_of(lines[:write], r"\bbuffer_wbl2\b"), "a release writes back L2 before the flag write"
    assert 0 <= index_of(lines[:write], r"\bs_barrier\b"), "the program synchronizes before the write"


# ---------------------------------------------------------------------------------------------------------------
# Tensors of pointers: Triton's atomics, one write per distinct flag.


@pytest.mark.parametrize("target_name", TARGET_NAMES)
@pytest.mark.parametrize("op", ["set", "add"])
def test_notify_on_a_tensor_of_pointers_uses_release_atomics_once_per_flag(op, target_name):
    need_library(target_name)
    compiled = compile_kernel(
        notify_tensor_kernel,
        {"flags_ptr": "*i32", "peer": "i32", "signal": "i32"},
        target_name,
        {"N": 64, "OP": op, "COMM": "intra_node"},
        aligned=("flags_ptr",),
        num_warps=4,  # 128 (sm_90) / 256 (gfx942) threads for 64 flags: Triton replicates the elements
    )
    ttir = compiled.asm["ttir"]
    assert "__triton_dist_notify" not in ttir, "a tensor notify must not call the scalar (thread 0) function"
    rmw = "exch" if op == "set" else "add"
    assert re.search(rf"tt\.atomic_rmw {rmw}, release, sys", ttir), ttir
    lines = assembly(compiled, target_name).splitlines()
    if target_name == "sm_90":
        atomics = [line for line in lines if re.search(r"\b(atom|red)\.", line)]
        assert atomics and all(".sys" in line and "release" in line for line in atomics), "\n".join(atomics)
        assert all(line.strip().startswith("@") for line in atomics), "replicated elements are masked off"
        assert 0 <= index_of(lines, r"\bbar(rier)?\.sync\b") < index_of(lines, r"\b(atom|red)\.")
    else:
        atomic = index_of(lines, r"\bglobal_atomic_(swap|add)\b")
        assert atomic >= 0 and 0 <= index_of(lines[:atomic], r"\bbuffer_wbl2\b.*\bsc1\b")
        assert 0 <= index_of(lines[:atomic], r"\bs_barrier\b")


# ---------------------------------------------------------------------------------------------------------------
# The wait token is its own Triton type: it survives control flow and helper calls.


@triton.jit
def consume_in_helper(ptr, token):
    return tl.load(dl.consume_token(ptr, token))


@triton.jit
def token_through_control_flow(flag_ptr, data_ptr, out_ptr, rounds, FIRST: tl.constexpr):
    if tl.program_id(0) == 0:
        token = dl.wait(flag_ptr, 1, "sys", "acquire")
    else:
        token = dl.wait(flag_ptr + 1, 1, "gpu", "relaxed")
    for r in range(rounds):
        token = dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=r)
    offsets = dl.consume_token(tl.arange(0, 16), token)
    tl.store(out_ptr + offsets, tl.load(data_ptr + offsets))
    tl.store(out_ptr + 16, consume_in_helper(data_ptr, token))


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_tokens_flow_through_if_for_and_helpers(target_name):
    need_library(target_name)
    signature = {"flag_ptr": "*i32", "data_ptr": "*i32", "out_ptr": "*i32", "rounds": "i32"}
    compiled = compile_kernel(token_through_control_flow, signature, target_name, {"FIRST": True})
    ttir = compiled.asm["ttir"]
    assert ttir.count("__triton_dist_wait_") == 3 and "__triton_dist_consume_token" in ttir


# ---------------------------------------------------------------------------------------------------------------
# dl.wait(..., cmp=...): one library function per comparison.


@triton.jit(do_not_specialize=["value"])
def wait_cmp_kernel(flags_ptr, n, value, CMP: tl.constexpr):
    dl.wait(flags_ptr, n, "sys", "acquire", waitValue=value, cmp=CMP)


@pytest.mark.parametrize("target_name", TARGET_NAMES)
@pytest.mark.parametrize("flag", sorted(FLAG_TYPES))
@pytest.mark.parametrize("cmp", abi.COMPARISONS)
def test_wait_comparisons_call_and_inline_their_library_function(cmp, flag, target_name):
    need_library(target_name)
    signature = {"flags_ptr": FLAG_TYPES[flag], "n": "i32", "value": flag}
    compiled = compile_kernel(wait_cmp_kernel, signature, target_name, {"CMP": cmp})
    assert abi.wait_symbol("sys", "acquire", cmp, flag) in compiled.asm["ttir"]
    assert "__triton_dist_wait" not in assembly(compiled, target_name), "the library call must be inlined"


@pytest.mark.parametrize("cmp", abi.COMPARISONS)
def test_ordered_wait_comparisons_are_signed_ptx_instructions(cmp):
    """With 64-bit flags the flag test is the only 64-bit comparison of the kernel: signed for ordered tests."""
    need_real_library("sm_90")
    compiled = compile_kernel(wait_cmp_kernel, {"flags_ptr": "*i64", "n": "i32", "value": "i64"}, "sm_90", {"CMP": cmp})
    compares = set(re.findall(r"\bsetp\.(\w+)\.([su]64|b64)\b", assembly(compiled, "sm_90")))
    ordered = {op for op, kind in compares if kind == "s64"}
    if cmp in ("eq", "ne"):
        assert not ordered and any(op in ("eq", "ne") and kind == "b64" for op, kind in compares), compares
    else:
        assert ordered, compares


# ---------------------------------------------------------------------------------------------------------------
# dl.notify to a tensor of ranks: one barrier, one release write per listed rank.


@triton.jit(do_not_specialize=["signal"])
def notify_ranks_kernel(flags_ptr, signal, WORLD: tl.constexpr, OP: tl.constexpr, COMM: tl.constexpr):
    dl.notify(flags_ptr + dl.rank(), tl.arange(0, WORLD), signal=signal, sig_op=OP, comm_scope=COMM)


@pytest.mark.parametrize("target_name", TARGET_NAMES)
@pytest.mark.parametrize("op", ["set", "add"])
def test_notify_to_a_tensor_of_ranks_is_one_barrier_and_one_release_atomic_per_rank(op, target_name):
    need_library(target_name)
    signature = {"flags_ptr": "*i32", "signal": "i32"}
    constexprs = {"WORLD": 8, "OP": op, "COMM": "intra_node"}
    compiled = compile_kernel(notify_ranks_kernel, signature, target_name, constexprs, num_warps=4)
    ttir = compiled.asm["ttir"]
    assert "__triton_dist_notify" not in ttir, "no loop of scalar notifies"
    assert ttir.count(abi.SYMM_AT) == 1, "the flag's address on every listed rank comes from one elementwise call"
    rmw = "exch" if op == "set" else "add"
    assert len(re.findall(rf"tt\.atomic_rmw {rmw}, release, sys", ttir)) == 1, ttir
    assert ttir.count("gpu.barrier") == 1, ttir
    lines = assembly(compiled, target_name).splitlines()
    if target_name == "sm_90":
        atomics = [line for line in lines if re.search(r"\b(atom|red)\.", line)]
        assert atomics and all(".sys" in line and "release" in line for line in atomics), "\n".join(atomics)
        assert all(line.strip().startswith("@") for line in atomics), "replicated ranks are masked off"
        barriers = [i for i, line in enumerate(lines) if re.search(r"\bbar(rier)?\.sync\b", line)]
        assert len(barriers) == 1 and barriers[0] < index_of(lines, r"\b(atom|red)\."), "\n".join(lines)
    else:
        atomic = index_of(lines, r"\bglobal_atomic_(swap|add)\b")
        assert atomic >= 0 and 0 <= index_of(lines[:atomic], r"\bbuffer_wbl2\b.*\bsc1\b")
        assert 0 <= index_of(lines[:atomic], r"\bs_barrier\b")


@triton.jit
def notify_pairs_kernel(flags_ptr, WORLD: tl.constexpr):
    ranks = tl.arange(0, WORLD)
    dl.notify(flags_ptr + ranks, ranks, signal=ranks + 1, sig_op="add", comm_scope="gpu")


def test_notify_pairs_flags_and_ranks_elementwise():
    need_library("sm_90")
    compiled = compile_kernel(notify_pairs_kernel, {"flags_ptr": "*i32"}, "sm_90", {"WORLD": 4})
    assert re.search(r"tt\.atomic_rmw add, release, gpu", compiled.asm["ttir"])


@triton.jit(do_not_specialize=["signal"])
def notify_some_ranks_kernel(flags_ptr, signal, BLOCK: tl.constexpr):
    ranks = tl.arange(0, BLOCK)
    dl.notify(flags_ptr + dl.rank(), ranks, signal=signal, mask=ranks < dl.num_ranks())


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_notify_to_ranks_under_a_mask_skips_the_masked_ranks(target_name):
    """A world that is not a power of two: ranks tl.arange(0, 8) masked to those below num_ranks()."""
    need_library(target_name)
    signature = {"flags_ptr": "*i32", "signal": "i32"}
    compiled = compile_kernel(notify_some_ranks_kernel, signature, target_name, {"BLOCK": 8})
    ttir = compiled.asm["ttir"]
    atomic = re.search(r"tt\.atomic_rmw exch, release, sys, (%\w+), (%\w+), (%\w+)", ttir)
    assert atomic is not None, ttir
    mask = atomic.group(3)
    assert re.search(rf"{re.escape(mask)} = arith\.cmpi slt", ttir), "the atomic's mask is the rank comparison"
