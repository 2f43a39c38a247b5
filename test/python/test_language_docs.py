"""The claims of docs/language.md about using Triton's own operations on peer memory, checked in the compiled code:
remote atomics through ``dl.symm_at`` (orderings and scopes), ``tl.dot`` on tiles loaded through it, block pointers
and tensor descriptors over a translated base, the world size as a ``tl.constexpr`` (an unrolled peer loop), and
``dir(dl)`` listing only the API.

Instruction checks run on sm_90 with the real library. On gfx942 the kernels are compiled without the device-side
checks (``Checks.NONE``): each ``tt.assert`` brings Triton's printf hostcall code, whose own atomics and vector loads
would blur what is looked for.
"""

from __future__ import annotations

import re

import pytest
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, need_library, need_real_library

import triton_dist.language as dl
from triton_dist.compiler import Checks

TARGET_NAMES = ["sm_90", "gfx942"]


def _asm(kernel, signature, target_name, constexprs=None, aligned=(), num_warps=4):
    checks = Checks.NONE if target_name == "gfx942" else None
    compiled = compile_kernel(kernel, signature, target_name, constexprs, aligned, num_warps, checks)
    return assembly(compiled, target_name)


def test_dir_shows_only_the_api():
    assert dir(dl) == sorted(dl.__all__)
    assert set(dl.__all__) == {
        "consume_token",
        "get",
        "notify",
        "num_ranks",
        "put_signal",
        "rank",
        "signal_wait",
        "symm_at",
        "wait",
        "wait_token",
        "wait_token_type",
    }


@triton.jit
def remote_atomics(counter_ptr, lock_ptr, out_ptr, peer, SEM: tl.constexpr, SCOPE: tl.constexpr):
    old = tl.atomic_add(dl.symm_at(counter_ptr, peer), 1, sem=SEM, scope=SCOPE)
    taken = tl.atomic_cas(dl.symm_at(lock_ptr, peer), 0, 1, sem=SEM, scope=SCOPE)
    tl.store(out_ptr, old + taken)


ATOMICS_SIGNATURE = {"counter_ptr": "*i32", "lock_ptr": "*i32", "out_ptr": "*i32", "peer": "i32"}


@pytest.mark.parametrize("scope", ["gpu", "sys"])
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
def test_remote_atomics_keep_their_ordering_and_scope(sem, scope):
    need_real_library("sm_90")
    asm = _asm(remote_atomics, ATOMICS_SIGNATURE, "sm_90", {"SEM": sem, "SCOPE": scope})
    atomics = [line.strip() for line in asm.splitlines() if re.search(r"\batom\.", line)]
    kinds = {"add" if ".add." in line else "cas" if ".cas." in line else "other" for line in atomics}
    assert kinds == {"add", "cas"}, atomics
    for line in atomics:
        qualifiers = set(line.split()[1].split("."))
        assert {"global", sem, scope} <= qualifiers, line


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_remote_atomics_compile_on_both_targets(target_name):
    need_library(target_name)
    asm = _asm(remote_atomics, ATOMICS_SIGNATURE, target_name, {"SEM": "acq_rel", "SCOPE": "sys"})
    pattern = r"\batom\.global\b" if target_name == "sm_90" else r"\bglobal_atomic_(add|cmpswap)\b"
    assert len(re.findall(pattern, asm)) >= 2, asm


@triton.jit
def dot_on_a_peer_tile(a_ptr, b_ptr, c_ptr, peer, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_peer = dl.symm_at(a_ptr, peer)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_peer + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


DOT_PIPELINE = {
    "sm_90": (r"\bcp\.async\.cg\.shared\.global\b", r"\bwgmma\.mma_async\b"),  # cg: 16-byte copies
    "gfx942": (r"\bglobal_load_dwordx4\b", r"\bv_mfma_f32_\w+_bf16\b"),
}


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_dot_on_tiles_loaded_through_symm_at_is_pipelined_like_local_tiles(target_name):
    need_library(target_name)
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "peer": "i32", "K": "i32"}
    constexprs = {"BM": 64, "BN": 64, "BK": 32}
    asm = _asm(dot_on_a_peer_tile, signature, target_name, constexprs, aligned=("a_ptr", "b_ptr", "c_ptr", "K"))
    loads, mma = DOT_PIPELINE[target_name]
    assert re.search(loads, asm) and re.search(mma, asm), asm


@triton.jit
def block_pointer_over_a_peer(x_ptr, out_ptr, peer, M, N, BM: tl.constexpr, BN: tl.constexpr):
    block = tl.make_block_ptr(dl.symm_at(x_ptr, peer), (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    tile = tl.load(block, boundary_check=(0, 1))
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], tile)


@triton.jit
def descriptor_over_a_peer(x_ptr, out_ptr, peer, M, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(dl.symm_at(x_ptr, peer), shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tile = desc.load([0, 0])
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], tile)


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_block_pointers_over_a_translated_base_compile(target_name):
    need_library(target_name)
    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "peer": "i32", "M": "i32", "N": "i32"}
    asm = _asm(block_pointer_over_a_peer, signature, target_name, {"BM": 32, "BN": 32}, aligned=("x_ptr",))
    assert re.search(r"\bld\.global\b|\b(global|buffer)_load_", asm), asm


def test_a_tensor_descriptor_over_a_translated_base_is_a_tma_load_on_sm_90():
    need_real_library("sm_90")
    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "peer": "i32", "M": "i32"}
    asm = _asm(descriptor_over_a_peer, signature, "sm_90", {"N": 64, "BM": 32, "BN": 64}, aligned=("x_ptr",))
    assert re.search(r"\bcp\.async\.bulk\.tensor\.2d\b", asm) and re.search(r"\btensormap\.replace\b", asm), asm


@triton.jit
def push_to_all(x_ptr, dst_ptr, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for p in tl.static_range(WORLD):
        tl.store(dl.symm_at(dst_ptr + dl.rank() * BLOCK + offs, p), x)


@triton.jit
def push_to_all_runtime_world(x_ptr, dst_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for p in range(dl.num_ranks()):
        tl.store(dl.symm_at(dst_ptr + dl.rank() * BLOCK + offs, p), x)


def test_a_constexpr_world_size_unrolls_the_peer_loop():
    need_library("sm_90")
    signature = {"x_ptr": "*fp32", "dst_ptr": "*fp32"}
    unrolled = _asm(push_to_all, signature, "sm_90", {"WORLD": 4, "BLOCK": 512}, aligned=("x_ptr", "dst_ptr"))
    looped = _asm(push_to_all_runtime_world, signature, "sm_90", {"BLOCK": 512}, aligned=("x_ptr", "dst_ptr"))
    vector_store = r"\bst\.global\.v4\.b32\b"
    assert len(re.findall(vector_store, unrolled)) == 4, unrolled
    assert len(re.findall(vector_store, looped)) == 1, looped


@triton.jit(do_not_specialize=["epoch"])
def counter_epochs(counter_ptr, epoch, WORLD: tl.constexpr):
    """The docs' counter pattern: every rank adds 1 on every rank, then waits for WORLD * epoch with cmp="ge"."""
    dl.notify(counter_ptr, tl.arange(0, WORLD), signal=1, sig_op="add", comm_scope="intra_node")
    dl.wait(counter_ptr, 1, "sys", "acquire", waitValue=WORLD * epoch, cmp="ge")


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_the_counter_with_epochs_pattern_compiles(target_name):
    need_library(target_name)
    compiled = compile_kernel(counter_epochs, {"counter_ptr": "*i32", "epoch": "i32"}, target_name, {"WORLD": 4})
    ttir = compiled.asm["ttir"]
    assert "tt.atomic_rmw add, release, sys" in ttir and "__triton_dist_wait_sys_acquire_ge_i32" in ttir


# --- the refusals the page quotes ----------------------------------------------------------------------------------


@triton.jit
def wait_for_a_wide_value(flags_ptr, value):
    dl.wait(flags_ptr, 1, "sys", "acquire", waitValue=value.to(tl.int64))


@triton.jit
def _combine_with_a_wait(a, b):
    dl.wait(a.to(tl.pointer_type(tl.int32)), 1, "sys", "acquire")
    return a + b


@triton.jit
def wait_in_a_scan_combiner(x_ptr):
    offsets = tl.arange(0, 16)
    tl.store(x_ptr + offsets, tl.associative_scan(tl.load(x_ptr + offsets), 0, _combine_with_a_wait))


def _quoted(message: str) -> str:
    """``message`` as docs/language.md wraps it: one space between words."""
    return " ".join(message.split())


@pytest.mark.parametrize(
    ("kernel", "signature", "quoted"),
    [
        (
            wait_for_a_wide_value,
            {"flags_ptr": "*i32", "value": "i32"},
            "dl.wait: waitValue is a scalar int64, wider than the int32 flags: it would be truncated; convert it "
            "explicitly (.to(tl.int32)) where its values fit",
        ),
        (
            wait_in_a_scan_combiner,
            {"x_ptr": "*i32"},
            "dl.wait cannot be called in the combine function of tl.associative_scan: ...; call it before or after "
            "tl.associative_scan",
        ),
    ],
    ids=["narrowing", "combiner"],
)
def test_the_quoted_refusals_are_the_compilers(kernel, signature, quoted):
    """The page quotes these messages (an elided middle as "..."): each is on the page and is what compiling says."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text()
    assert quoted in _quoted(page)
    with pytest.raises(triton.CompilationError) as error:
        compile_kernel(kernel, signature, "sm_90")
    message = _quoted(str(error.value))
    for part in quoted.split("..."):
        assert part.strip(";: ") in message, (part, message)
