"""The device-side checks leave Hopper's asynchronous MMA alone (``triton_dist/compiler/call_free_checks.py``).

ptxas serializes every ``wgmma.mma_async`` of a kernel that contains a call (info C7510). The checks' failure path
was a call of ``__assertfail``; in a kernel with wgmma the ``llir`` stage now replaces those calls by a trap. These
tests run Triton's own ptxas (shipped in the wheel) on the PTX of the ops' GEMM kernels, so the serialization
cannot come back unnoticed.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dl_compile import assembly, compile_kernel, load_gpu_check_kernels, need_library, ptxas_info
from test_ops_ag_gemm import TMA_SIGNATURE

from triton_dist.compiler import Checks
from triton_dist.compiler.call_free_checks import (
    SerializedWgmmaWarning,
    drop_check_message_calls,
    has_wgmma,
    make_checks_call_free,
)
from triton_dist.compiler.watchdog import set_wait_timeout
from triton_dist.ops.gemm_ar.config import tile_config
from triton_dist.ops.gemm_ar.kernels import _gemm_ar_kernel

ag = importlib.import_module("triton_dist.ops.ag_gemm")
grs = importlib.import_module("triton_dist.ops.gemm_rs")

SERIALIZED = "C7510"
"""ptxas's info code for 'wgmma.mma_async instructions are serialized due to ...'."""

AG_GEMM_CONSTEXPRS = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_N=2, FLATTEN_PEERS=False)


def calls(ptx: str) -> list[str]:
    return re.findall(r"\bcall(?:\.uni)?\s+(\w+)", ptx)


@contextmanager
def wait_watchdog(watched: bool) -> Iterator[None]:
    """Compile with the wait watchdog on (its default outside these tests) or off (conftest's pin)."""
    set_wait_timeout(600.0 if watched else 0.0)
    try:
        yield
    finally:
        set_wait_timeout(None)


def compile_ag_gemm(checks: Checks, flatten_peers: bool = False):  # noqa: ANN201
    constexprs = {**AG_GEMM_CONSTEXPRS, "FLATTEN_PEERS": flatten_peers}
    return compile_kernel(ag._ag_gemm_tma_kernel, TMA_SIGNATURE, "sm_90", constexprs, num_warps=8, checks=checks)


@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
@pytest.mark.parametrize("flatten_peers", [False, True], ids=["peer-loop", "flattened-peer-loop"])
def test_ag_gemm_keeps_its_wgmma_asynchronous_with_the_default_checks(tmp_path, watched, flatten_peers):
    """Also the flattened peer loop (a tuned choice), which waits for each tile's chunk inside the software-pipelined
    loop, the pattern that serialized gemm_rs with the watchdog on."""
    need_library("sm_90")
    with wait_watchdog(watched):
        compiled = compile_ag_gemm(Checks.DEFAULT, flatten_peers)
    assert ("%globaltimer" in compiled.asm["ptx"]) == watched, "the watched wait reads the clock"
    assert "triton_dist: dl.wait in kernel" in compiled.asm["ttir"], "the checks are still emitted"
    ptx = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in ptx
    assert calls(ptx) == [], "no call may remain in a kernel with wgmma"
    assert "trap;" in ptx, "a failed check still stops the kernel"
    info = ptxas_info(compiled.asm["ptx"], tmp_path)
    assert not re.search(r"\(C75(10|18)\)", info), info


def test_debug_level_keeps_the_messages_and_pays_the_serialization(tmp_path):
    """TRITON_DIST_DEBUG=1 trades MMA speed for the messages; this also shows that ptxas does serialize a kernel
    with a call, i.e. that the test above can fail."""
    need_library("sm_90")
    compiled = compile_ag_gemm(Checks.DEBUG)
    ptx = assembly(compiled, "sm_90")
    assert "__assertfail" in calls(ptx)
    assert SERIALIZED in ptxas_info(compiled.asm["ptx"], tmp_path)


GEMM_RS_TRITON = [c for c in grs.CANDIDATES if c.gemm == "triton" and not c.fallback]
"""Every Triton configuration the tuner may store."""


@pytest.mark.parametrize("config", GEMM_RS_TRITON, ids=lambda c: c.short())
@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
def test_gemm_rs_fused_kernel_keeps_its_wgmma_asynchronous(tmp_path, watched, config):
    """Also with the watchdog: a watched wait holds a path that stops the kernel, and ptxas serialized every wgmma
    (info C7518, "compiler-inserted WG.DP in divergent path") while the own tile awaited its peers with the MMA's
    right half live; on 2 x H200 the fused kernel went from 0.61 to 0.74 ms (8192,4096,12288). The own tile now
    awaits its peers before its main loop."""
    need_library("sm_90")
    from test_ops_gemm_rs import compile_gemm_rs

    with wait_watchdog(watched):
        compiled = compile_gemm_rs(config, "sm_90", checks=Checks.DEFAULT)
    ptx = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in ptx
    # The two-kernel variant's GEMM waits for nothing (its second kernel does).
    assert ("%globaltimer" in ptx) == (watched and config.fused), "a watched wait reads the clock"
    assert calls(ptx) == []
    info = ptxas_info(compiled.asm["ptx"], tmp_path)
    assert not re.search(r"\(C75(10|18)\)", info), info


@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
@pytest.mark.parametrize("m", [64, 128])
def test_gemm_ar_keeps_its_wgmma_asynchronous(tmp_path, m, watched):
    """gemm_ar's tiles for M >= 64 use wgmma (smaller ones mma.sync, which a call does not slow down)."""
    need_library("sm_90")
    from test_ops_decode_gemm_ar import ALIGNED, SIGNATURE

    config = tile_config(m, 8192, 14336)
    constexprs = {"REGION": 16384, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n,
                  "BLOCK_K": config.block_k, "EXCHANGE": True, "WORLD": 2}  # fmt: skip
    with wait_watchdog(watched):
        compiled = compile_kernel(
            _gemm_ar_kernel, SIGNATURE, "sm_90", constexprs, ALIGNED, num_warps=config.num_warps,
            checks=Checks.DEFAULT,
        )  # fmt: skip
    ptx = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in ptx
    assert ("%globaltimer" in ptx) == watched, "the watched wait reads the clock"
    assert calls(ptx) == []
    info = ptxas_info(compiled.asm["ptx"], tmp_path)
    assert not re.search(r"\(C75(10|18)\)", info), info


LLIR = """\
@assertMessage_0 = internal constant [30 x i8] c"triton_dist: dl.wait in k: x\\00"
@assertMessage_1 = internal constant [12 x i8] c"user: x > 0\\00"
declare void @__assertfail(ptr, ptr, i32, ptr, i64)

define void @k() {
  tail call void @__assertfail(ptr nonnull @assertMessage_0, ptr nonnull @f, i32 3, ptr nonnull @g, i64 1), !dbg !15
  unreachable, !dbg !15
b:
  call void @__assertfail(ptr nonnull @assertMessage_1, ptr nonnull @f, i32 4, ptr nonnull @g, i64 1), !dbg !16
  unreachable
  ; wgmma.mma_async
}
"""


def test_only_the_checks_calls_are_replaced():
    assert has_wgmma(LLIR)
    result, replaced, left = drop_check_message_calls(LLIR)
    assert (replaced, left) == (1, 0)
    assert "  call void @llvm.trap(), !dbg !15\n" in result
    assert "@__assertfail(ptr nonnull @assertMessage_1," in result, "a user's assert keeps its message"
    assert "@__assertfail(ptr nonnull @assertMessage_0," not in result
    assert result.rstrip().endswith("declare void @llvm.trap()")


MERGED = """\
@assertMessage_0 = internal constant [30 x i8] c"triton_dist: dl.wait in k: x\\00"
@assertMessage_1 = internal constant [30 x i8] c"triton_dist: dl.rank in k: y\\00"
define void @k() {
  %m = phi ptr [ @assertMessage_0, %a ], [ @assertMessage_1, %b ]
  tail call void @__assertfail(ptr %m, ptr nonnull @f, i32 3, ptr nonnull @g, i64 1), !dbg !15
  unreachable
  ; wgmma.mma_async
}
"""


def test_a_call_merged_through_a_phi_is_replaced_when_only_checks_assert():
    result, replaced, left = drop_check_message_calls(MERGED)
    assert (replaced, left) == (1, 0) and "@__assertfail(ptr" not in result


def test_a_call_it_cannot_attribute_is_left_with_a_warning_not_an_error():
    with_user = MERGED.replace(
        "define void @k()", '@assertMessage_2 = internal constant [5 x i8] c"mine\\00"\ndefine void @k()'
    )
    result, replaced, left = drop_check_message_calls(with_user)
    assert (replaced, left) == (0, 1) and "@__assertfail(ptr %m," in result
    with pytest.warns(SerializedWgmmaWarning, match="serializes its wgmma"):
        assert make_checks_call_free(with_user) == result
    changed = LLIR.replace(
        "tail call void @__assertfail(ptr nonnull @assertMessage_0",
        "call fastcc void @__assertfail(ptr @assertMessage_0",
    )
    with pytest.warns(SerializedWgmmaWarning):
        make_checks_call_free(changed)


def test_kernels_without_checks_are_left_as_they_are():
    text = LLIR.replace("triton_dist: ", "someone: ")
    assert drop_check_message_calls(text) == (text, 0, 0)


def test_the_gpu_guard_check_has_a_wgmma_kernel_whose_checks_trap(tmp_path):
    """test/gpu/check_guards.py's ``dot_then_wait`` is what its wgmma cases say it is: a kernel with wgmma whose
    checks leave no call by default and keep the message (the call) under TRITON_DIST_DEBUG=1."""
    need_library("sm_90")
    kernels = load_gpu_check_kernels("check_guards.py", tmp_path)
    signature = {"a_ptr": "*bf16", "out_ptr": "*bf16", "flag_ptr": "*i32"}
    default = assembly(compile_kernel(kernels.dot_then_wait, signature, "sm_90", checks=Checks.DEFAULT), "sm_90")
    assert "wgmma.mma_async" in default and calls(default) == [] and "trap;" in default
    debug = assembly(compile_kernel(kernels.dot_then_wait, signature, "sm_90", checks=Checks.DEBUG), "sm_90")
    assert "__assertfail" in calls(debug)
