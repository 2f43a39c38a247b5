"""gemm_ar's LL exchange (``GemmARConfig(ll=True)``) without GPUs: the kernel compiles for sm_90 with tensor cores,
one system-scope fence before its first word access, relaxed 8-byte word stores and polls (one per word a thread
holds, in one per-thread loop without barriers, shared memory or local memory), bounded polls and a watched
``dl.wait`` with the watchdog on; its configs and limits raise clearly before any launch."""

from __future__ import annotations

import importlib
import re
from types import SimpleNamespace

import pytest
import torch

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops.all_reduce import LL_WATCHED_POLL_PASSES
from triton_dist.ops.gemm_ar import GemmARConfig

gar = importlib.import_module("triton_dist.ops.gemm_ar")

SIGNATURE = {
    "a_ptr": "*bf16",
    "b_ptr": "*bf16",
    "out_ptr": "*bf16",
    "words_ptr": "*i64",
    "epochs_ptr": "*i32",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "stride_am": "i32",
    "stride_bk": "i32",
    "stride_om": "i32",
}
ALIGNED = ("a_ptr", "b_ptr", "out_ptr", "words_ptr", "N", "K", "stride_am", "stride_bk", "stride_om")


def _compile(config: GemmARConfig, watched: bool):
    from dl_compile import compile_kernel, need_real_library

    from triton_dist.compiler import watchdog

    need_real_library("sm_90")
    constexprs = {"BLOCK_M": config.block_m, "BLOCK_N": config.block_n, "BLOCK_K": config.block_k, "WATCHED": watched}
    if watched:
        watchdog.set_wait_timeout(5)
    try:
        return compile_kernel(
            gar._gemm_ar_ll_kernel,
            SIGNATURE,
            "sm_90",
            constexprs,
            ALIGNED,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
    finally:
        if watched:
            watchdog.set_wait_timeout(None)


CONFIGS = [GemmARConfig(16, 64, 128, 4, 4, ll=True), GemmARConfig(16, 128, 128, 4, 4, ll=True)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.block_m}x{c.block_n}")
def test_ll_kernel_ptx_fence_words_and_one_poll_loop(config):
    from asm_loops import loop_components, ptx_blocks
    from dl_compile import assembly, sass
    from test_ops_decode_all_reduce_ll import _check_poll_ptx, _poll_asm_blocks

    compiled = _compile(config, watched=False)
    ptx = assembly(compiled, "sm_90")
    lines = ptx.splitlines()
    per_thread = config.block_m * config.block_n // (32 * config.num_warps)
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    assert "mma" in ptx, "tensor cores expected"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word"
    assert len(stores) == per_thread, "one relaxed 8-byte store per word a thread holds"
    assert not re.search(r"st\.global(\.v\d)?\.b64", ptx), "a weak 8-byte store (not single-copy atomic)"
    assert "ld.acquire.sys" not in ptx and "st.release.sys" not in ptx, "no flag protocol"
    polls = _poll_asm_blocks(ptx)
    assert len(polls) == 1, f"{len(polls)} poll instances: one per peer iteration expected"
    _check_poll_ptx(polls[0], per_thread)
    inside = [line for loop in loop_components(ptx_blocks(ptx)) for b in loop for line in b.lines]
    assert not [line for line in inside if ".local" in line], "local memory inside a loop"
    assert not re.search(r"\b(LDL|STL)\b", sass(compiled)), "register spills"


def test_watched_ll_kernel_bounds_its_polls_and_waits_with_the_watchdog():
    from dl_compile import assembly
    from test_ops_decode_all_reduce_ll import _poll_asm_blocks

    config = CONFIGS[0]
    ptx = assembly(_compile(config, watched=True), "sm_90")
    polls = _poll_asm_blocks(ptx)
    assert len(polls) == 3, "the peer loop's poll, and the late path's first and repeated polls"
    for poll in polls:
        assert f"setp.lt.u32 %llp, %llpass, {LL_WATCHED_POLL_PASSES};" in poll, "an unbounded poll"
    assert "globaltimer" in ptx, "the late path's dl.wait is not the watched one"


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"split_k": 2}, "ll .* needs the fused kernel with split_k 1"),
        ({"gemm": "cublas"}, "ll .* needs the fused kernel with split_k 1"),
    ],
)
def test_bad_ll_config(kwargs, text):
    with pytest.raises(ValueError, match=text):
        GemmARConfig(16, 64, 128, ll=True, **kwargs)


def test_ll_limits_raise_before_the_collective(monkeypatch):
    world = SimpleNamespace(device=torch.device("cpu"), world_size=2, rank=0, group=None)
    monkeypatch.setattr(gar.rt, "current_world", lambda: world)
    monkeypatch.setattr(gar, "_agreed", gar.AgreedSignatures())

    def collective(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("the rank agreement ran for a config that cannot run")

    monkeypatch.setattr(gar, "check_ranks_call_alike", collective)
    monkeypatch.setattr(torch.version, "hip", None)
    config = GemmARConfig(16, 64, 128, ll=True)
    a, b = torch.zeros(1, 64, dtype=torch.bfloat16), torch.zeros(64, 64 * 257, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="at most 256 tiles; 1 x 16448 in 16 x 64 tiles makes 257"):
        gar._check_device_and_agreement(a, b, config)
    monkeypatch.setattr(torch.version, "hip", "6.2")
    with pytest.raises(ValueError, match="needs an NVIDIA GPU"):
        gar._check_device_and_agreement(a, torch.zeros(64, 64, dtype=torch.bfloat16), config)


def test_ll_region_holds_both_parities_of_every_rank_s_tile():
    config = GemmARConfig(16, 64, 128, ll=True)
    assert gar.ll_region_bytes(2, config) == 2 * 2 * 16 * 64 * 8
    assert gar.ll_region_bytes(8, config) == 4 * gar.ll_region_bytes(2, config)
