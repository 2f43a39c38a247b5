"""triton_dist.ops.moe without a GPU: the five kernels compile for sm_90 and gfx942 in both modes with the
synchronization the ordering argument needs (release before each flag, acquire on each wait, 16-byte copies), the
custom ops are registered with fake implementations, and bad calls raise before anything is launched (the device
first, ranks that disagree on H / dtype / E on every rank)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_real_library, ptxas_info
from in_place_check import rewritten_without_barrier
from test_runtime_world import run_ranks

import triton_dist.ops
from triton_dist import runtime as rt
from triton_dist.ops.common import dispatch
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.moe import MoeConfig, MoeError, kernels, switches
from triton_dist.ops.moe.config import BLOCK_H, MAX_ROW_BLOCK, kernel_constexprs

moe_op = importlib.import_module("triton_dist.ops.moe.op")

_I32 = "*i32"
SIGNATURES: dict[str, dict[str, str]] = {
    "route_count": {
        **{n: _I32 for n in ("idx_ptr", "tok_pos_ptr", "pair_pos_ptr")},
        "T": "i32",
        "part_ptr": _I32,
        **{n: "i32" for n in ("W", "E", "L")},
    },
    "route": {
        **{n: _I32 for n in ("row_ptr", "info_ptr", "epoch_ptr", "epochs_ptr", "counts_ptr", "flags_ptr", "part_ptr")},
        "E": "i32",
    },
    "push": {
        "x_ptr": "*bf16",
        "idx_ptr": _I32,
        "w_ptr": "*fp32",
        **{n: _I32 for n in ("tok_pos_ptr", "pair_pos_ptr", "row_ptr", "epoch_ptr", "info_ptr")},
        "T": "i32",
        "self_ptr": "*bf16",
        "tokens_ptr": "*bf16",
        **{n: _I32 for n in ("meta_ptr", "counts_ptr", "flags_ptr", "part_ptr")},
        **{n: "i32" for n in ("H", "CAP", "M", "E")},
    },
    "expand": {
        "recv_ptr": "*bf16",
        **{n: _I32 for n in ("src_rank_ptr", "src_token_ptr", "expert_ptr")},
        "weight_ptr": "*fp32",
        **{n: _I32 for n in ("slot_ptr", "comb_rows_ptr", "comb_src_ptr", "comb_dst_ptr", "counts_out_ptr")},
        **{n: _I32 for n in ("offsets_out_ptr", "src_offsets_ptr", "recv_tokens_ptr")},
        "scales_ptr": "*fp32",
        **{n: _I32 for n in ("gather_ptr", "status_ptr", "epoch_ptr", "tok_pos_ptr")},
        "tokens_ptr": "*bf16",
        **{n: _I32 for n in ("meta_ptr", "counts_ptr", "flags_ptr", "table_ptr")},
        **{n: "i32" for n in ("H", "CAP", "M", "L")},
    },
    "quantize": {"x_ptr": "*bf16", "T": "i32", "q_ptr": "*fp8e4nv", "scales_ptr": "*fp32", "H": "i32"},
    "combine_push": {
        "y_ptr": "*bf16",
        "weight_ptr": "*fp32",
        **{n: _I32 for n in ("comb_rows_ptr", "comb_src_ptr", "comb_dst_ptr", "epoch_ptr")},
        "slots": "i32",
        "combine_ptr": "*fp32",
        "flags_ptr": _I32,
        "H": "i32",
        "CAP": "i32",
    },
    "combine_reduce": {
        "out_ptr": "*bf16",
        **{n: _I32 for n in ("tok_pos_ptr", "row_ptr", "epoch_ptr")},
        "T": "i32",
        "y_ptr": "*bf16",
        "weight_ptr": "*fp32",
        **{n: _I32 for n in ("comb_rows_ptr", "comb_src_ptr")},
        "slots": "i32",
        "combine_ptr": "*fp32",
        "flags_ptr": _I32,
        **{n: "i32" for n in ("H", "CAP", "M")},
    },
}
"""Each kernel's runtime arguments as the op passes them (bf16 tokens, int32 expert ids, fp32 weights)."""


def _compile(
    name: str,
    target: str,
    low_latency: bool,
    world_size: int = 3,
    scales: int = 0,
    dequantize: bool = False,
    row_block: int = 0,
    gather: bool = False,
    bulk: bool = False,
    num_warps: int = 4,
    copiers: int = 0,
    self_mode: int = 0,
    stage: str = "",
    waves: int = 0,
    combine: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    prequant: bool = False,
) -> str:
    """The final assembly of kernel ``name`` for ``world_size`` ranks (3: the loop-of-notifies path), with every
    pointer and H 16-byte aligned, as the op launches it on one node; ``scales`` > 0: an fp8 payload
    (``dequantize``: expand writes bf16); ``row_block`` > 0: ``MoeConfig(whole_row=True)``'s kernels for rows of up
    to that many elements; ``gather``: expand for ``layout="gather"`` (``bulk``: its payload copied as one block,
    by ``copiers`` copy programs after the meta programs, or with none by every program after its meta rows);
    ``self_mode``: the push's ``SELF`` (1: without this rank's own payload, 2: only that, into ``self_ptr``), and for
    expand ``SELF_DIRECT`` (its block copy without those rows); ``stage``: that stage's text instead (``"ttgir"``);
    ``waves``: ``switches.EXPAND_OVERLAPS_PUSH``'s push and expand (``WAVES``; expand beside the push: 64 senders);
    ``combine``: the combine kernels' option constants (``op._combine_constexprs``; ``PACK`` 2: bf16 partials);
    ``extra``: more constants (the push's ``RECIPROCAL``); ``prequant``: the push that loads the rows
    ``_quantize_kernel`` quantized (``PREQUANT``; ``name`` "quantize": that kernel, for ``scales`` scales)."""
    constants = kernel_constexprs(world_size, 24, 8, 64, scales, dequantize, row_block)
    if name == "quantize":
        constexprs: dict[str, Any] = {"BLOCK_H": constants["push"]["BLOCK_H"], "SCALES": scales}
    else:
        constexprs = dict(constants[name])
    signature = dict(SIGNATURES[name])
    constexprs |= extra or {}
    if prequant:
        constexprs["PREQUANT"] = True
        signature |= {"pre_ptr": "*fp8e4nv", "pre_scales_ptr": "*fp32"}
    if combine:
        constexprs |= combine
        if combine.get("PACK") == 2:
            signature["combine_ptr"] = "*bf16"
        if combine.get("WAVES"):  # switches.REDUCE_OVERLAPS_PUSH: the combine waves' flags
            signature["waves_ptr"] = _I32
    if name == "route":
        constexprs["EXCHANGE"] = not low_latency
        if not low_latency:  # the summary also into host-mapped memory
            constexprs["HOST_INFO"] = True
            signature["host_info_ptr"] = _I32
    if name in ("push", "expand", "combine_reduce"):
        constexprs["LOW_LATENCY"] = low_latency
    if name == "push" and not low_latency and self_mode != 2:  # launched before the summary is read: it checks
        constexprs["CHECK_CAP"] = True  # the buffer sizes
        signature["COMBINE_CAP"] = "i32"
    if name == "push" and self_mode:
        constexprs["SELF"] = self_mode
    if name == "expand":
        constexprs["GATHER"] = gather
        constexprs["BULK"] = bulk
        if bulk:
            block = switches.bulk_copy_block(scales > 0)
            constexprs |= {"COPIERS": copiers, "COPY_BLOCK": block, "SELF_DIRECT": bool(self_mode)}
        if not low_latency:  # EXPAND_PER_SM programs per SM: it waits for the push's 64 per rank
            constexprs["SENDERS"] = 64
    if waves and name in ("push", "expand"):
        constexprs["WAVES"] = waves
        signature["waves_ptr"] = _I32
        if name == "expand":
            signature["COMBINE_CAP"] = "i32"
    if name in ("route", "push", "combine_push"):
        constexprs["WORLD"] = notify_world(world_size)
    if scales and name != "quantize":
        signature["tokens_ptr"] = "*fp8e4nv"
        if name == "push" and self_mode == 3:  # recv_x of fp8 rows, which the push stores this rank's own rows into
            signature["self_ptr"] = "*fp8e4nv"
        if name == "expand" and not dequantize:
            signature["recv_ptr"] = "*fp8e4nv"
    aligned = tuple(arg for arg in signature if arg.endswith("_ptr")) + (("H",) if "H" in signature else ())
    kernel = getattr(kernels, f"_{name}_kernel")
    compiled = compile_kernel(kernel, signature, target, constexprs, aligned=aligned, num_warps=num_warps)
    return compiled.asm[stage] if stage else assembly(compiled, target)


def _order(text: str, *patterns: str) -> list[int]:
    """The line of the first match of each pattern (-1 if none)."""
    lines = text.splitlines()
    return [next((i for i, line in enumerate(lines) if re.search(p, line)), -1) for p in patterns]


@pytest.mark.parametrize("low_latency", [False, True])
def test_sm90_flags_are_released_after_the_data_and_acquired_before_reading(low_latency: bool) -> None:
    need_real_library("sm_90")
    for name in ("push", "combine_push"):
        ptx = _compile(name, "sm_90", low_latency)
        lines = ptx.splitlines()
        (release,) = _order(ptx, r"st\.release\.sys")
        stores = [i for i, line in enumerate(lines[:release]) if re.search(r"st\.global\.v4\.b32", line)]
        barriers = [i for i, line in enumerate(lines[:release]) if "bar.sync" in line]
        assert stores, f"{name}: the payload moves in 16-byte stores, before the flag"
        assert barriers and stores[-1] < barriers[-1], f"{name}: data stores, the program barrier, then the release"
        assert "ld.acquire" not in ptx, f"{name} never waits"
    for name in ("expand", "combine_reduce"):
        ptx = _compile(name, "sm_90", low_latency)
        acquire, load = _order(ptx, r"ld\.acquire\.sys", r"ld\.global(\.nc)?\.v4\.b32")
        assert 0 <= acquire < load, f"{name}: the wait's acquire comes before the buffers are read"
    count = _compile("route_count", "sm_90", low_latency)
    assert "release" not in count and "acquire" not in count, "the route count kernel is local"
    route = _compile("route", "sm_90", low_latency)
    if low_latency:  # purely local: the counts travel with the data
        assert "release.sys" not in route and "acquire.sys" not in route
    else:  # the counts exchange: pushed, released, acquired
        store, release, acquire = _order(route, r"st\.global", r"st\.release\.sys", r"ld\.acquire\.sys")
        assert 0 <= store < release < acquire


@pytest.mark.parametrize("low_latency", [False, True])
def test_sm90_in_place_updates_wait_for_every_warps_load(low_latency: bool) -> None:
    """Issue 27: the push kernel loads a token's ``tok_pos`` row (two words, held by every warp) and stores its final
    places there at the end of the token's iteration. Without a program barrier between them the warp that stores
    ran tokens ahead of the others on GPUs, a later warp read the final place and added the prefix again, and its
    columns of the row went to another slot (the interpreter runs a program as one thread: the CPU emulation
    passes). The route kernel's epoch counter and count prefixes are updated in place as well; every kernel is
    checked, on the TTGIR Triton lowers each warp's code from."""
    need_real_library("sm_90")
    variants = [("push", 0), ("route", 0), ("route_count", 0), ("expand", 0), ("combine_push", 0)]
    variants += [("combine_reduce", 0)]
    if not low_latency:  # _self_push's two launches, and OWN_ROWS_IN_PUSH's one
        variants += [("push", 1), ("push", 2), ("push", 3)]
    for name, self_mode in variants:
        ttgir = _compile(name, "sm_90", low_latency, world_size=2, self_mode=self_mode, stage="ttgir")
        if name == "push":
            assert re.search(r"tt\.load %local_places", ttgir), "the check sees the push's load of tok_pos"
            if self_mode != 2:
                assert re.search(r"tt\.store %local_places", ttgir), "and its store of the final places"
        racing = rewritten_without_barrier(ttgir)
        assert not racing, f"{name} (SELF {self_mode}) updates in place without a barrier: {racing}"


def test_sm90_power_of_two_world_notifies_every_rank_in_one_release_atomic() -> None:
    need_real_library("sm_90")
    ptx = _compile("push", "sm_90", low_latency=True, world_size=2)
    assert re.search(r"atom\.global\.sys\.release\.exch\.b32", ptx), "one notify to a tensor of ranks"


@pytest.mark.parametrize("low_latency", [False, True])
def test_gfx942_kernels_compile_with_release_and_acquire(low_latency: bool) -> None:
    need_real_library("gfx942")
    for name in ("push", "combine_push"):
        text = _compile(name, "gfx942", low_latency)
        assert "global_store_dwordx4" in text, f"{name}: 16-byte payload stores"
        assert "buffer_wbl2" in text, f"{name}: the release writes back L2 before the flag"
    for name in ("expand", "combine_reduce"):
        text = _compile(name, "gfx942", low_latency)
        assert "buffer_inv" in text, f"{name}: the acquire invalidates before reading what peers wrote"
    _compile("route", "gfx942", low_latency)
    _compile("route_count", "gfx942", low_latency)


@pytest.mark.parametrize("low_latency", [False, True])
def test_sm90_fp8_push_quantizes_and_expand_keeps_or_dequantizes(low_latency: bool) -> None:
    need_real_library("sm_90")
    push = _compile("push", "sm_90", low_latency, scales=56)
    assert re.search(r"cvt\.rn\.satfinite\.e4m3x2\.f32", push), "the push kernel converts to e4m3 itself"
    assert re.search(r"div\.rn\.f32", push), "IEEE division for the scales and the scaled values (as the reference)"
    (release,) = _order(push, r"st\.release\.sys")
    stores = [
        i for i, line in enumerate(push.splitlines()[:release]) if re.search(r"st\.global\.(v\d\.)?b(8|16|32)", line)
    ]
    assert stores, "the quantized payload is stored before the flag"
    kept = _compile("expand", "sm_90", low_latency, scales=56)
    assert "e4m3" not in kept, "without dequantize the fp8 bytes are copied as they came"
    acquire, load = _order(kept, r"ld\.acquire\.sys", r"ld\.global(\.nc)?\.v\d\.b32")
    assert 0 <= acquire < load, "the fp8 rows are read (in vectors) after the wait's acquire"
    dequantized = _compile("expand", "sm_90", low_latency, scales=56, dequantize=True)
    assert "cvt.rn.f16x2.e4m3x2" in dequantized, "the expand kernel widens the fp8 rows"
    assert re.search(r"cvt\.rn\.bf16(x2)?\.f32", dequantized), "and writes bf16"


def _loads_before_first_store(ptx: str) -> int:
    """16-byte global loads in the PTX before its first 16-byte global store (in text order)."""
    lines = ptx.splitlines()
    first = next(i for i, line in enumerate(lines) if re.search(r"st\.global\.v4\.", line))
    return sum(1 for line in lines[:first] if re.search(r"ld\.global(\.nc)?\.v4\.", line))


def test_sm90_whole_row_loads_every_row_before_storing_and_does_not_spill(tmp_path: Any) -> None:
    """The default ``MoeConfig(whole_row=True)`` at H = 7168 bf16 (BLOCK_H 8192, 4 warps): push and expand issue a
    row's eight 16-byte loads per thread before the first 16-byte store (the chunks of ``whole_row=False``: one),
    combine's push all k = 8 rows' 64, and no kernel spills registers (ptxas -v)."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    assert block == 8192
    for name, loads in (("push", 8), ("expand", 8), ("combine_push", 64)):
        chunked = _loads_before_first_store(_compile(name, "sm_90", False, world_size=2))
        assert chunked < loads, f"{name}: the chunks move one at a time ({chunked} loads before a store)"
    for name, loads in (("push", 8), ("expand", 8), ("combine_push", 64), ("combine_reduce", 0)):
        ptx = _compile(name, "sm_90", False, world_size=2, row_block=block)
        if loads:
            assert _loads_before_first_store(ptx) == loads, name
        info = ptxas_info(ptx, tmp_path)
        assert re.search(r"Used \d+ registers", info), info
        assert "0 bytes spill stores, 0 bytes spill loads" in info and "bytes stack frame" in info, f"{name}: {info}"
        assert not re.search(r"[1-9]\d* bytes spill", info), f"{name} spills: {info}"


def _v4(ptx: str, op: str) -> int:
    """The PTX's 16-byte global ``op`` (``ld`` / ``st``) instructions."""
    return len(re.findall(rf"{op}\.global(\.nc)?\.v4\.", ptx))


def test_sm90_combine_options_halve_the_partials_stores_and_load_every_rank_together(tmp_path: Any) -> None:
    """``MoeConfig(combine_partials="input")`` (the default) at H = 7168 bf16 (BLOCK_H 8192, 4 warps): the push
    converts its fp32 sums to bf16 and stores half the 16-byte vectors of ``"fp32"``'s (8 a thread and row, not 16),
    the reduce reads bf16; ``combine_spread`` (the default): the reduce's 2 ranks' partials all loaded before its
    first store (without it, the loop: one rank's an iteration), and the push's spread start wraps around (a
    remainder); none of them spills registers."""
    need_real_library("sm_90")
    block = MoeConfig().row_block(7168)
    fp32 = _compile("combine_push", "sm_90", False, world_size=2, row_block=block)
    bf16 = _compile("combine_push", "sm_90", False, world_size=2, row_block=block, combine={"PACK": 2})
    spread = _compile("combine_push", "sm_90", False, world_size=2, row_block=block, combine={"SPREAD": True})
    assert (_v4(fp32, "st"), _v4(bf16, "st")) == (16, 8), "a partial row: 16 fp32 or 8 bf16 vectors a thread"
    assert re.search(r"cvt\.rn\.bf16x2\.f32", bf16) and not re.search(r"cvt\.rn\.bf16", fp32)
    assert _loads_before_first_store(bf16) == 64, "the k rows' loads still in flight together"
    assert re.search(r"rem\.(s|u)32", spread) and not re.search(r"rem\.(s|u)32", fp32), "the wrap-around"
    plain = _compile("combine_reduce", "sm_90", False, world_size=2, row_block=block)
    assert _v4(plain, "ld") == 16, "the loop: one rank's fp32 partial (16 vectors) an iteration"
    wide = _compile("combine_reduce", "sm_90", False, world_size=2, row_block=block, combine={"UNROLL": 2})
    assert _loads_before_first_store(wide) == 32 == _v4(wide, "ld"), "unrolled: both ranks' fp32 partials"
    reduces = [wide]
    for low_latency in (False, True):
        both = _compile("combine_reduce", "sm_90", low_latency, 2, row_block=block, combine={"PACK": 2, "UNROLL": 2})
        assert _loads_before_first_store(both) == 16 == _v4(both, "ld"), "both ranks' bf16 partials (8 vectors each)"
        reduces.append(both)
    for ptx in (bf16, spread, *reduces):
        info = ptxas_info(ptx, tmp_path)
        assert "0 bytes spill stores, 0 bytes spill loads" in info, info


def test_combine_options_are_checked_and_reach_the_kernels() -> None:
    """``MoeConfig.combine_partials`` / ``combine_spread``: their defaults (``"input"`` and True, measured fastest);
    refused with what is allowed; the partials' dtype; the combine kernels' constants (none for fp32 partials without
    spread: the kernels compile as before the options; the reduce's unrolled ranks on one node of at most
    ``SPREAD_REDUCE_RANKS``)."""
    from triton_dist.ops.moe.config import SPREAD_REDUCE_RANKS

    assert (MoeConfig().combine_partials, MoeConfig().combine_spread) == ("input", True), "the defaults"
    for bad in ("bf16", "FP32", None, torch.bfloat16):
        with pytest.raises(MoeError, match=r"combine_partials must be one of \['fp32', 'input'\], got"):
            MoeConfig(combine_partials=bad)  # type: ignore[arg-type]
    with pytest.raises(MoeError, match="combine_spread must be True or False, got 1"):
        MoeConfig(combine_spread=1)  # type: ignore[arg-type]
    fp32 = MoeConfig(combine_partials="fp32", combine_spread=False)
    assert (fp32.combine_partials, fp32.combine_spread) == ("fp32", False), "the options before the defaults"
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert fp32.partial_dtype(dtype) == torch.float32 and MoeConfig().partial_dtype(dtype) == dtype
    plan = SimpleNamespace(nodes=1, world_size=2)
    constants = moe_op._combine_constexprs
    assert constants(torch.float32, False, plan) == {} and constants(torch.float32, False, plan, reduce=True) == {}
    assert constants(torch.bfloat16, True, plan) == {"PACK": 2, "SPREAD": True}
    assert constants(torch.float16, True, plan, reduce=True) == {"PACK": 2, "UNROLL": 2}
    wide = SimpleNamespace(nodes=1, world_size=SPREAD_REDUCE_RANKS + 1)
    assert constants(torch.float32, True, wide, reduce=True) == {}, "more ranks: the loop"
    assert constants(torch.float32, True, SimpleNamespace(nodes=2, world_size=4), reduce=True) == {}, "across nodes"
    assert constants(torch.float32, True, SimpleNamespace(nodes=1, world_size=3), reduce=True) == {"UNROLL": 4}


def test_whole_row_config_picks_the_block_and_is_checked() -> None:
    assert MoeConfig().row_block(7168) == 8192, "the default moves whole rows"
    assert MoeConfig(whole_row=False).row_block(7168) == 0, "whole_row=False keeps BLOCK_H chunks"
    whole = MoeConfig()
    assert [whole.row_block(h) for h in (1, 32, 160, 7168, MAX_ROW_BLOCK, MAX_ROW_BLOCK + 1)] == [
        128,
        128,
        256,
        8192,
        MAX_ROW_BLOCK,
        0,
    ]
    default, wide = kernel_constexprs(2, 8, 2, 4), kernel_constexprs(2, 8, 2, 4, row_block=256)
    for name in ("push", "expand", "combine_push"):
        assert (default[name]["BLOCK_H"], default[name]["WHOLE_ROW"]) == (BLOCK_H, False)
        assert (wide[name]["BLOCK_H"], wide[name]["WHOLE_ROW"]) == (256, True)
    assert wide["combine_reduce"]["BLOCK_H"] == 256
    for bad in (64, 384, 2 * MAX_ROW_BLOCK):
        with pytest.raises(MoeError, match=f"row_block must be 0 or a power of two.*got {bad}"):
            kernel_constexprs(2, 8, 2, 4, row_block=bad)
    with pytest.raises(MoeError, match="whole_row must be True or False, got 1"):
        MoeConfig(whole_row=1)  # type: ignore[arg-type]
    assert MoeConfig().programs_per_sm is None and MoeConfig(programs_per_sm=2).programs_per_sm == 2
    assert (MoeConfig().per_sm("normal"), MoeConfig().per_sm("low_latency")) == (2, 1), "the modes' defaults"
    assert MoeConfig(programs_per_sm=3).per_sm("low_latency") == 3
    assert MoeConfig().pipelined and not MoeConfig(pipelined=False).pipelined, "pipelined by default"
    with pytest.raises(MoeError, match="pipelined must be True or False, got 1"):
        MoeConfig(pipelined=1)  # type: ignore[arg-type]
    for bad_count in (0, 9, True, 1.0):
        with pytest.raises(MoeError, match=f"programs_per_sm must be None or an int in \\[1, 8\\], got {bad_count!r}"):
            MoeConfig(programs_per_sm=bad_count)  # type: ignore[arg-type]


def test_route_and_expand_options_are_checked_and_pick_their_constants() -> None:
    """``MoeConfig(route_programs=..., expand_block=...)``: powers of two in range or their defaults (None / 0),
    anything else refused naming the value; the route count programs they give on GPUs and under the emulation, and
    the route kernel's prefix rows per step (the default's unchanged: 16 rows of 256 experts)."""
    from triton_dist.ops.moe.config import (
        EMULATED_ROUTE_PROGRAMS,
        MAX_EXPAND_BLOCK,
        MAX_ROUTE_PROGRAMS,
        ROUTE_PROGRAMS,
    )

    assert MoeConfig().route_programs is None and MoeConfig().expand_block == 0
    for bad in (0, 3, 96, 2 * MAX_ROUTE_PROGRAMS, True, 64.0):
        with pytest.raises(
            MoeError, match=f"route_programs must be None or a power of two in \\[1, 1024\\], got {bad!r}"
        ):
            MoeConfig(route_programs=bad)  # type: ignore[arg-type]
    for bad in (-1, 3, 2 * MAX_EXPAND_BLOCK, False, 16.0):
        with pytest.raises(MoeError, match=f"expand_block must be 0 or a power of two in \\[1, 64\\], got {bad!r}"):
            MoeConfig(expand_block=bad)  # type: ignore[arg-type]
    assert MoeConfig(route_programs=1, expand_block=MAX_EXPAND_BLOCK).expand_block == MAX_EXPAND_BLOCK
    gpu = [MoeConfig(route_programs=r).route_count_programs(False) for r in (None, 1, 128, 256)]
    assert gpu == [ROUTE_PROGRAMS, 1, 128, 256]
    emulated = [MoeConfig(route_programs=r).route_count_programs(True) for r in (None, 1, 32, 128, 256, 1024)]
    assert emulated == [EMULATED_ROUTE_PROGRAMS, 1, 2, 8, 16, 16]
    rows = [kernel_constexprs(2, 256, 8, 264, route_programs=r)["route"]["PB"] for r in (4, 64, 128, 256, 1024)]
    assert rows == [1, 16, 32, 64, 64]
    steps = [kernel_constexprs(2, 256, 8, 264, route_programs=r)["route_count"]["BLOCK_T"] for r in (64, 256, 512)]
    assert steps == [16, 16, 8], "tokens per count step: 16 at k = 8, fewer once 4096 tokens leave steps half empty"
    assert kernel_constexprs(2, 8, 2, 1, route_programs=EMULATED_ROUTE_PROGRAMS)["route_count"]["BLOCK_T"] == 64


def test_sm90_expand_block_and_many_route_programs_fit_without_spilling(tmp_path: Any) -> None:
    """At H = 7168, E = 256, k = 8 on sm_90: the pipelined gather expand kernel with ``MoeConfig(expand_block=16)``
    keeps the default's residency (at most 64 registers, so 8 programs of 128 threads fit an SM: its meta and copy
    programs run together) and spills nothing; the route kernel of 256 count programs (64 rows a step, 8 warps)
    spills nothing."""
    need_real_library("sm_90")
    block = MoeConfig().row_block(7168)
    constexprs = dict(kernel_constexprs(2, 256, 8, 264, 0, False, block)["expand"])
    constexprs |= {"LOW_LATENCY": False, "GATHER": True, "BULK": True, "COPIERS": 528, "SENDERS": 264}
    constexprs |= {"COPY_BLOCK": switches.BULK_COPY_BLOCK, "SELF_DIRECT": True, "META_BLOCK": 16}
    signature = dict(SIGNATURES["expand"])
    aligned = tuple(arg for arg in signature if arg.endswith("_ptr")) + ("H",)
    expand = assembly(compile_kernel(kernels._expand_kernel, signature, "sm_90", constexprs, aligned=aligned), "sm_90")
    info = ptxas_info(expand, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    assert int(re.search(r"Used (\d+) registers", info).group(1)) <= 64, info  # type: ignore[union-attr]
    route = dict(kernel_constexprs(2, 256, 8, 264, route_programs=256)["route"])
    route |= {"EXCHANGE": True, "WORLD": notify_world(2), "HOST_INFO": True}
    signature = {**SIGNATURES["route"], "host_info_ptr": _I32}
    aligned = tuple(arg for arg in signature if arg.endswith("_ptr"))
    ptx = assembly(
        compile_kernel(kernels._route_kernel, signature, "sm_90", route, aligned=aligned, num_warps=moe_op.ROUTE_WARPS),
        "sm_90",
    )
    info = ptxas_info(ptx, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info


def test_dispatch_refuses_a_config_that_is_not_a_moe_config(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_world(monkeypatch)
    x, idx, weights = torch.zeros(3, 64), torch.zeros(3, 2, dtype=torch.int32), torch.zeros(3, 2)
    with pytest.raises(MoeError, match="config must be a MoeConfig or None, got dict"):
        triton_dist.ops.moe_dispatch(x, idx, weights, 8, config={"whole_row": True})  # type: ignore[arg-type]


def test_custom_ops_are_registered_and_exported() -> None:
    assert triton_dist.ops.moe_dispatch is moe_op.moe_dispatch and "moe_combine" in triton_dist.ops.__all__
    schema = str(torch.ops.triton_dist.moe_dispatch.default._schema)
    assert "Tensor topk_idx" in schema and 'str mode="normal"' in schema
    assert "Tensor y" in str(torch.ops.triton_dist.moe_combine.default._schema)


def test_fake_low_latency_dispatch_has_the_grouped_gemm_layout() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(5, 64, dtype=torch.bfloat16)
        idx, weights = torch.empty(5, 2, dtype=torch.int32), torch.empty(5, 2)
        outs = torch.ops.triton_dist.moe_dispatch(x, idx, weights, 8, "low_latency", 16)
        assert outs[0].shape == (8, 16, 64) and outs[0].dtype == torch.bfloat16
        assert outs[7].shape == (8, 16) and outs[7].dtype == torch.float32
        y = torch.empty(8, 16, 64, dtype=torch.bfloat16)
        out = torch.ops.triton_dist.moe_combine(y, outs[7], outs[14], outs[15], outs[16], outs[11], outs[12],
                                                outs[13], 8, "low_latency", 16)  # fmt: skip
        assert out.shape == (5, 64)
        with pytest.raises(MoeError, match="exceed max_tokens_per_rank=4"):
            torch.ops.triton_dist.moe_dispatch(x, idx, weights, 8, "low_latency", 4)
        wide = torch.empty(5, 200, dtype=torch.bfloat16)  # fp8: e4m3 rows and 2 scales per row (128 + 72 channels)
        fp8 = torch.ops.triton_dist.moe_dispatch(wide, idx, weights, 8, "low_latency", 16, True)
        assert fp8[0].dtype == torch.float8_e4m3fn and fp8[17].shape == (8, 16, 2) and fp8[17].dtype == torch.float32
        dequantized = torch.ops.triton_dist.moe_dispatch(wide, idx, weights, 8, "low_latency", 16, True, True)
        assert dequantized[0].dtype == torch.bfloat16 and dequantized[17].numel() == 0


def _fake_world(monkeypatch: pytest.MonkeyPatch, world_size: int = 2) -> SimpleNamespace:
    world = SimpleNamespace(device=torch.device("cpu"), world_size=world_size, rank=0, group=None)
    monkeypatch.setattr(rt, "is_initialized", lambda: True)
    monkeypatch.setattr(rt, "current_world", lambda: world)
    monkeypatch.setattr(moe_op, "gpu_world", lambda name, error: world)
    monkeypatch.setattr(moe_op, "sm_count", lambda device: 132)
    monkeypatch.setattr(moe_op, "check_load_store_world", lambda op, world, error: world)  # no heap, no nodes
    return world


def test_ranks_that_disagree_on_hidden_raise_before_any_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_world(monkeypatch)
    made: list[Any] = []
    monkeypatch.setattr(moe_op, "_make_plan", lambda *args: made.append(args))
    seen: list[dict] = []

    def gather(described: dict, group: Any) -> list[dict]:
        seen.append(described)
        return [described, {**described, "hidden": described["hidden"] * 2, "num_experts": 16}]

    monkeypatch.setattr(dispatch, "gather_from_ranks", gather)
    moe_op._plans.clear()
    x, idx, weights = torch.zeros(3, 64, dtype=torch.bfloat16), torch.zeros(3, 2, dtype=torch.int32), torch.zeros(3, 2)
    with pytest.raises(MoeError, match=r"different inputs.*hidden: rank 0: 64, rank 1: 128.*num_experts"):
        triton_dist.ops.moe_dispatch(x, idx, weights, 8)
    assert not made, "no plan (no workspace, no launch) when the ranks disagree"
    assert 3 not in seen[0].values() and seen[0]["dtype"] == "torch.bfloat16", "T (3) may differ between ranks"


def test_device_is_named_before_dtype_and_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _fake_world(monkeypatch)
    world.device = torch.device("cuda", 0)
    x = torch.zeros(3, 64, dtype=torch.int8)
    with pytest.raises(MoeError, match="x is on cpu, but this rank's triton_dist device is cuda:0"):
        triton_dist.ops.moe_dispatch(x, torch.zeros(3, 2), torch.zeros(2), 8)


def _moe_on_a_cpu_world(rank: int, world_size: int) -> None:
    del rank, world_size
    rt.init(heap_size="64M", device="cpu")
    try:
        x = torch.zeros(4, 8, dtype=torch.int8)  # a bad dtype too: the world is named first
        with pytest.raises(MoeError, match="initialized with device='cpu'; the ops run on GPUs"):
            triton_dist.ops.moe_dispatch(x, torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 2), 4)
    finally:
        rt.finalize()


def test_dispatch_after_init_on_the_cpu_names_the_problem() -> None:
    run_ranks(_moe_on_a_cpu_world, 1)


def test_dispatch_before_init_says_to_call_init() -> None:
    x, idx, weights = torch.zeros(3, 64, dtype=torch.bfloat16), torch.zeros(3, 2, dtype=torch.int32), torch.zeros(3, 2)
    with pytest.raises(RuntimeError, match="triton_dist.init"):
        triton_dist.ops.moe_dispatch(x, idx, weights, 8)


def test_launch_plans_are_kept_per_argument_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan compiled for int32 expert ids must not be relaunched with int64 ones (it would misread them)."""
    compiled: list[str] = []

    class Recorded:
        def __init__(self, key: str) -> None:
            self.key = key

        def launch(self, device: torch.device, *leading: Any) -> None:
            compiled.append(f"launch {self.key}")

    def compile_plan(kernel: Any, grid: Any, named: dict[str, Any], leading: int, **options: Any) -> Recorded:
        compiled.append(f"compile {named['idx_ptr'].dtype}")
        return Recorded(str(named["idx_ptr"].dtype))

    monkeypatch.setattr(moe_op, "compile_plan", compile_plan)
    monkeypatch.setattr(torch.cuda, "device", lambda device: _Nothing())
    workspace = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    plan = moe_op._Plan(("key",), "normal", 2, 8, 2, 64, torch.bfloat16, 0, 4, workspace)
    meta = torch.device("meta")
    for dtype in (torch.int32, torch.int64, torch.int32):
        moe_op._launch(plan, "route_count", {"idx_ptr": torch.empty(4, 2, dtype=dtype, device=meta), "T": 4}, meta)
    assert compiled == [
        "compile torch.int32",
        "launch torch.int32",
        "compile torch.int64",
        "launch torch.int64",
        "launch torch.int32",
    ]


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def test_combine_refuses_a_reference_handle() -> None:
    from triton_dist.ops.moe import reference_dispatch
    from triton_dist.ops.moe.config import check_combine_input

    xs = [torch.zeros(2, 8, dtype=torch.bfloat16)] * 2
    idx, weights = [torch.tensor([[0, 3], [1, -1]])] * 2, [torch.ones(2, 2)] * 2
    recv_x, handle = reference_dispatch(xs, idx, weights, 4)[0]
    with pytest.raises(MoeError, match="reference_dispatch made it"):
        check_combine_input(recv_x, handle)


def _stores(ptx: str) -> int:
    """16-byte global stores in the PTX (in text: a loop's body counts once)."""
    return sum(1 for line in ptx.splitlines() if re.search(r"st\.global\.v4\.", line))


def test_sm90_gather_expand_stores_each_row_once_and_does_not_spill(tmp_path: Any) -> None:
    """``layout="gather"``'s expand at H = 7168 bf16, whole rows: the row's eight 16-byte loads before its first
    store, one row of stores (no per-k loop of them, which the expanded layout has), no spills."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    expanded = _compile("expand", "sm_90", False, world_size=2, row_block=block)
    gathered = _compile("expand", "sm_90", False, world_size=2, row_block=block, gather=True)
    assert _loads_before_first_store(gathered) == 8
    assert 0 < _stores(gathered) <= _stores(expanded), (_stores(gathered), _stores(expanded))
    info = ptxas_info(gathered, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info


def test_fake_gather_dispatch_returns_each_token_once() -> None:
    """The fake of ``layout="gather"``: recv_x [received, H] (the combine rows' count), gather_rows [rows]."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()):
        x = torch.empty(5, 64, dtype=torch.float16)
        idx, weights = torch.empty(5, 2, dtype=torch.int64), torch.empty(5, 2)
        outs = torch.ops.triton_dist.moe_dispatch(x, idx, weights, 8, layout="gather")
        assert str(outs[0].shape[0]) == str(outs[14].shape[0]) != str(outs[4].shape[0]), "received, not rows"
        assert outs[18].shape == outs[4].shape and outs[18].dtype == torch.int32
        plain = torch.ops.triton_dist.moe_dispatch(x, idx, weights, 8)
        assert plain[18].shape == (0,)


def test_gather_layout_is_for_normal_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton_dist.ops.moe.config import check_inputs

    x, idx, weights = torch.zeros(4, 16), torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 2)
    with pytest.raises(MoeError, match="layout='gather' is for normal mode"):
        check_inputs(x, idx, weights, 8, 2, "low_latency", 4, layout="gather")
    with pytest.raises(MoeError, match="layout must be one of \\['expanded', 'gather'\\], got 'once'"):
        check_inputs(x, idx, weights, 8, 2, layout="once")


def test_fake_normal_dispatch_has_a_data_dependent_row_count() -> None:
    """Normal mode's rows are known only after the counts exchange: the fake gives unbacked sizes, so
    torch.compile can trace through it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()):
        x = torch.empty(5, 64, dtype=torch.float16)
        idx, weights = torch.empty(5, 2, dtype=torch.int64), torch.empty(5, 2)
        outs = torch.ops.triton_dist.moe_dispatch(x, idx, weights, 8)
        rows, received = outs[0].shape[0], outs[14].shape[0]
        assert isinstance(rows, torch.SymInt) and isinstance(received, torch.SymInt)
        assert outs[0].shape[1] == 64 and outs[0].dtype == torch.float16 and outs[14].shape[1] == 2
        assert outs[11].shape == (5, 1), "tok_pos: one column per rank (no world: 1)"


def test_buffer_capacity_and_flag_layout() -> None:
    from triton_dist.ops.moe.config import MAX_RANKS, capacity, flag_layout, pow2

    assert [capacity(n) for n in (0, 1, 64, 65, 1000)] == [64, 64, 64, 128, 1024]
    assert [pow2(n) for n in (1, 2, 3, 8, 9)] == [2, 2, 4, 8, 16]
    layout = flag_layout(programs=7)
    assert layout["DATA_FLAGS"] >= MAX_RANKS, "count flags of every rank come first"
    assert layout["COMBINE_FLAGS"] - layout["DATA_FLAGS"] == MAX_RANKS * 7 == layout["FLAGS"] - layout["COMBINE_FLAGS"]


@pytest.mark.parametrize("mode", ["normal", "low_latency"])
def test_each_launch_passes_the_kernels_leading_parameters_in_order(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A LaunchPlan passes the per-call arguments by position: the names the op passes must be the kernel's first
    parameters, in the kernel's order (the CPU emulation passes them by name, so it cannot catch this)."""
    seen: dict[str, list[str]] = {}

    def launch(
        plan: Any, name: str, leading: dict[str, Any], device: torch.device, gather: bool = False, self_mode: int = 0,
        **options: Any,
    ) -> None:  # fmt: skip
        seen.setdefault(name, list(leading))
        if "info_ptr" in leading:  # what the route kernel writes: nothing received, no bad ids
            leading["info_ptr"].zero_()

    monkeypatch.setattr(moe_op, "_launch", launch)
    ws = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    buffers = moe_op._Buffers(torch.zeros(2, 64, 8), torch.zeros(2, 64, 7), torch.zeros(2, 64, 8))
    plan = moe_op._Plan(("k",), mode, 2, 8, 2, 8, torch.float32, 4, 1, ws, buffers)
    monkeypatch.setattr(moe_op, "_plan_for", lambda *args: plan)
    x, idx, weights = torch.zeros(3, 8), torch.zeros(3, 2, dtype=torch.int32), torch.zeros(3, 2)
    outputs = moe_op._dispatch(x, idx, weights, 8, mode, 4 if mode == "low_latency" else None)
    comb_rows, comb_src, comb_dst, tok_pos, row, epoch = outputs[14], outputs[15], outputs[16], *outputs[11:14]
    key = (mode, 8, torch.float32, 8, 2, 4 if mode == "low_latency" else None, x.device, False, True, 1, False)
    monkeypatch.setattr(moe_op._plans, "get", lambda signature: plan if signature == key else None)
    agreed: list[dict[str, Any]] = []  # the combine options, agreed with the ranks at the plan's first combine
    monkeypatch.setattr(moe_op._plans, "agree", agreed.append)
    for _ in range(2):
        combine_args = (comb_rows, comb_src, comb_dst, tok_pos, row, epoch, key)
        moe_op._combine(torch.zeros(*outputs[0].shape), outputs[7], *combine_args)
    assert [(a["combine_partials"], a["combine_spread"]) for a in agreed] == [("input", True)], agreed
    assert sorted(seen) == ["combine_push", "combine_reduce", "expand", "push", "route", "route_count"]
    for name, names in seen.items():
        kernel = getattr(kernels, f"_{name}_kernel")
        assert names == list(kernel.arg_names[: len(names)]), name


def test_bench_times_the_variants_beside_the_default(tmp_path: Any) -> None:
    """bench/moe.py asks for ``MoeConfig(whole_row=False)`` through ``config=`` with ``--chunked``, times
    ``MoeConfig(programs_per_sm=2)`` unless ``--skip-programs`` and ``layout="gather"`` unless ``--skip-gather``
    (expanding its rows for the checks), and writes their rows, labelled, beside the default's."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_moe_chunked", Path(__file__).parents[2] / "bench" / "moe.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    options, why = bench.chunked_option()
    assert why == "" and options == {"config": MoeConfig(whole_row=False)}
    assert not bench.parse_args([]).chunked and bench.parse_args(["--chunked"]).chunked
    assert not bench.parse_args([]).skip_programs and bench.parse_args(["--skip-programs"]).skip_programs
    assert not bench.parse_args([]).skip_gather and bench.parse_args(["--skip-gather"]).skip_gather
    recv_once, rows = torch.arange(6.0).view(3, 2), torch.tensor([2, 0, 2, 1], dtype=torch.int32)
    assert torch.equal(bench.expanded(recv_once, SimpleNamespace(gather_rows=rows)), recv_once[[2, 0, 2, 1]])
    assert bench.expanded(recv_once, SimpleNamespace(gather_rows=None)) is recv_once

    def row(path: str, dispatch: float) -> dict[str, Any]:
        timings = {f"{op} {t}": dispatch for op in ("dispatch", "combine") for t in ("device", "idle")}
        return {"path": path, "mode": "normal", "tokens": 128, "verified": "ok", "bytes per rank": 1e6, **timings}

    rows = [row(bench.OURS, 25.0), row(bench.CHUNKED, 50.0), row(bench.PER_SM2, 20.0), row(bench.NCCL, 100.0)]
    rows.append(row(bench.GATHER, 10.0))
    text = bench.write_results(tmp_path, "T", rows, {"notes": []}, [], 0.0).read_text()
    assert "| ours | normal | 128 | 25.0 / 25.0 / — |" in text and "| 4.00 / 4.00 / 4.00 / 4.00 |" in text
    assert "| ours chunked | normal | 128 | 50.0 / 50.0 / — |" in text
    assert "| ours 2 programs/SM | normal | 128 | 20.0 / 20.0 / — |" in text and "| 5.00 / 5.00 / 5.00 / 5.00 |" in text
    assert "| ours gather | normal | 128 | 10.0 / 10.0 / — |" in text and "| 10.00 / 10.00 / 10.00 / 10.00 |" in text


def test_sm90_own_tokens_go_straight_into_recv_x_beside_the_push(tmp_path: Any) -> None:
    """``_self_push``: the push kernel's ``SELF = 2`` pass stores this rank's own rows into ``self_ptr`` as 16-byte
    vectors and sets no flag and waits for nothing (it runs beside the ``SELF = 1`` push on a side stream, ordered by
    events); the ``SELF = 1`` push still releases its flags after its stores; the expand kernel's copy programs,
    leaving those rows out, still move 16-byte vectors, at most 64 registers per thread (eight programs per SM)."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    own = _compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=2)
    assert "release" not in own and "acquire" not in own and "atom." not in own, "no flag"
    assert sum(1 for line in own.splitlines() if re.search(r"st\.global\.v4\.", line)) == 8, own[-3000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in ptxas_info(own, tmp_path)
    others = _compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=1)
    stores = [i for i, line in enumerate(others.splitlines()) if "st.global.v4" in line]
    (release,) = _order(others, r"atom\.global\.sys\.release")
    assert stores and 0 <= stores[-1] < release, "the other ranks' rows, then the flags"
    copy = _compile(
        "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, copiers=528, self_mode=1
    )
    vectors = switches.BULK_COPY_BLOCK * 2 // (128 * 16)
    assert sum(1 for line in copy.splitlines() if re.search(r"ld\.global(\.nc)?\.v4\.", line)) == vectors
    info = ptxas_info(copy, tmp_path)
    # (Without the wait's watchdog, as the tests compile, ptxas keeps one value across the copy loop in 4 bytes of
    # stack, stored before the loop and loaded after it: none inside.)
    spilled = int(re.search(r"(\d+) bytes spill stores", info).group(1))  # type: ignore[union-attr]
    assert spilled <= 4, info
    registers = int(re.search(r"Used (\d+) registers", info).group(1))  # type: ignore[union-attr]
    assert registers <= 64, f"eight programs of 128 threads per SM: {info}"


def _registers(ptx: str, tmp_path: Any) -> int:
    """Registers per thread ptxas gives ``ptx`` on sm_90a, after asserting that nothing spills."""
    info = ptxas_info(ptx, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    return int(re.search(r"Used (\d+) registers", info).group(1))  # type: ignore[union-attr]


def test_sm90_the_own_rows_launch_fits_beside_the_push_and_the_push_can_store_them_itself(tmp_path: Any) -> None:
    """Issue 27's swing of the ``own`` phase (the ``SELF = 2`` launch on the side stream) is not the SMs': at H =
    7168, E = 256, k = 8 on 2 ranks (132 SMs, two push programs per SM), the early ``SELF = 1`` push takes at most 80
    registers per thread at 4 warps and no shared memory, and ``SELF = 2`` at most 64, so all of the second launch's
    programs fit on the SMs beside the first's (64K registers, 2048 threads per SM) the moment it is launched: its
    start waits only for the host (``switches.OWN_ROWS_IN_PUSH``). ``SELF = 3`` (that option's one launch) stores each
    own row into ``self_ptr`` and each other rank's into the token buffer from the one load (16 vectors of 16 bytes per
    thread: 8 each), releases its flags after every store, and spills nothing within the first's registers."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    per_sm = 2  # config.NORMAL_PROGRAMS_PER_SM programs of 4 warps

    def allocated(registers: int) -> int:  # per program: a warp's registers come in units of 256
        return 4 * -(-registers * 32 // 256) * 256

    first = _registers(_compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=1), tmp_path)
    own = _registers(_compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=2), tmp_path)
    assert first <= 80 and own <= 64, (first, own)
    assert per_sm * (allocated(first) + allocated(own)) <= 65536 and per_sm * 2 * 128 <= 2048
    one = _compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=3)
    assert _registers(one, tmp_path) <= first
    stores = [i for i, line in enumerate(one.splitlines()) if re.search(r"st\.global\.v4\.", line)]
    (release,) = _order(one, r"atom\.global\.sys\.release")
    assert len(stores) == 16 and stores[-1] < release, "my own and the other rank's rows, then the flags"


def _expand_beside_push_registers(expand: str, tmp_path: Any) -> int:
    """The registers per thread of the expand kernel beside the push (its PTX ``expand``), after checking that it
    loads in 16-byte vectors and spills at most 4 bytes."""
    assert sum(1 for line in expand.splitlines() if re.search(r"ld\.global(\.nc)?\.v4\.", line)) >= 4
    info = ptxas_info(expand, tmp_path)
    spilled = int(re.search(r"(\d+) bytes spill stores", info).group(1))  # type: ignore[union-attr]
    assert spilled <= 4, info
    return int(re.search(r"Used (\d+) registers", info).group(1))  # type: ignore[union-attr]


def test_sm90_the_expand_beside_the_push_fits_with_it(tmp_path: Any) -> None:
    """``switches.EXPAND_OVERLAPS_PUSH``: at H = 7168, E = 256, k = 8 on 2 ranks (132 SMs), the push with its wave flags
    (``WAVES``, ``SELF = 3``) and the expand kernel beside it (``EXPAND_OVERLAP_PER_SM`` meta and
    ``OVERLAP_COPIERS_PER_SM`` copy programs per SM) fit on every SM together, two push programs with them (64K
    registers, 2048 threads): whichever launch starts first, the push's programs find room while the expand's spin
    on its flags. Nothing spills; the push releases each wave's flags (a notify per wave) after its stores, and the
    expand copies 16-byte vectors and acquires its flags before its loads."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    waves = switches.EXPAND_WAVES

    def allocated(registers: int) -> int:  # per program of 4 warps: a warp's registers come in units of 256
        return 4 * -(-registers * 32 // 256) * 256

    push = _compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=3, waves=waves)
    pushed = _registers(push, tmp_path)
    plain = _registers(_compile("push", "sm_90", False, world_size=2, row_block=block, self_mode=3), tmp_path)
    assert pushed <= 96, (pushed, plain)
    releases = [i for i, line in enumerate(push.splitlines()) if re.search(r"atom\.global\.sys\.release", line)]
    assert len(releases) >= 2, "the waves' flags and the data flags"
    copiers = switches.OVERLAP_COPIERS_PER_SM * 132
    expand = _compile(
        "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, copiers=copiers, self_mode=1,
        waves=waves,
    )  # fmt: skip
    expanded = _expand_beside_push_registers(expand, tmp_path)
    per_sm = switches.EXPAND_OVERLAP_PER_SM + switches.OVERLAP_COPIERS_PER_SM
    used = 2 * allocated(pushed) + per_sm * allocated(expanded)
    assert used <= 65536 and (2 + per_sm) * 128 <= 2048, (pushed, expanded, used)


def test_sm90_the_fp8_expand_beside_the_push_leaves_room_for_a_push_program(tmp_path: Any) -> None:
    """``switches.EXPAND_OVERLAPS_PUSH`` with fp8 rows kept (``switches.FP8_OVERLAPS_PUSH``): at H = 7168, E = 256, k =
    8 on 2 ranks (132 SMs), the fp8 push with its wave flags and ``SELF = 3`` at ``FP8_PUSH_WARPS`` warps
    (``switches.FP8_NARROW_PUSH`` off; on, ``test_sm90_the_narrow_fp8_push_fits_twice_beside_the_expand``) spills
    nothing and takes at most 64 registers per thread, so that however the expand kernel beside it (fp8 kept:
    ``EXPAND_OVERLAP_PER_SM`` meta and ``OVERLAP_COPIERS_PER_SM`` copy programs per SM, 4 per SM on average) places its
    programs, some SM holds at most 4 of them and has room for a push program (64K registers, 2048 threads): the push,
    which waits for nothing, keeps running while the expand's programs spin on its flags. The push stores the quantized
    rows (and this rank's own into ``self_ptr``) before it releases its flags."""
    from triton_dist.ops.moe.config import FP8_PUSH_WARPS

    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    waves = switches.EXPAND_WAVES

    def allocated(registers: int, warps: int) -> int:  # per program: a warp's registers come in units of 256
        return warps * -(-registers * 32 // 256) * 256

    push = _compile(
        "push", "sm_90", False, world_size=2, row_block=block, self_mode=3, waves=waves, scales=56,
        num_warps=FP8_PUSH_WARPS,
    )  # fmt: skip
    pushed = _registers(push, tmp_path)
    assert pushed <= 64, pushed
    # On a GPU the cast rounds (to nearest even, saturating), not kernels.round_to_e4m3: the interpreter's rounding
    # costs 30 registers here.
    assert "cvt.rn.satfinite.e4m3x2.f32" in push and "0f46C00000" not in push
    lines = push.splitlines()
    releases = [i for i, line in enumerate(lines) if re.search(r"atom\.global\.sys\.release", line)]
    stores = [i for i, line in enumerate(lines) if re.search(r"st\.global(\.\w+)*\.b(8|16|32)\b|st\.global\.v", line)]
    assert len(releases) >= 2 and stores and stores[0] < releases[0], "the rows, then the waves' and data flags"
    expand = _compile(
        "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, scales=56,
        copiers=switches.OVERLAP_COPIERS_PER_SM * 132, self_mode=1, waves=waves,
    )  # fmt: skip
    expanded = _expand_beside_push_registers(expand, tmp_path)
    per_sm = switches.EXPAND_OVERLAP_PER_SM + switches.OVERLAP_COPIERS_PER_SM
    used = allocated(pushed, FP8_PUSH_WARPS) + per_sm * allocated(expanded, 4)
    assert used <= 65536 and (FP8_PUSH_WARPS + 4 * per_sm) * 32 <= 2048, (pushed, expanded, used)


def test_sm90_the_reduce_beside_the_combine_push_fits_with_it_and_waits_per_wave(tmp_path: Any) -> None:
    """``switches.REDUCE_OVERLAPS_PUSH`` at H = 7168 bf16 (BLOCK_H 8192, 4 warps), k = 8 on 2 ranks (132 SMs, two
    programs per SM each), bf16 partials and ``combine_spread`` (the default options): the push with its waves still
    loads all k rows before its first store, stores the partial in bf16 before its first release, and releases once per
    wave (one notify to both ranks) with no combine flag after; the reduce beside it acquires a wave's flags before it
    loads a partial; neither spills, and two programs of each fit on an SM together (64K registers, 2048 threads), so
    whichever launch starts first the push's programs find room while the reduce's spin. At 3 ranks the reduce's loop
    over ranks (fp32 partials) does not spill either. With ``switches.OWN_PARTIALS_IN_REDUCE`` (the reduce summing its
    own tokens' rows of ``y``) the same holds. All at ``switches.COMBINE_WAVE_MIN_SLOTS`` (``WAVE_MIN``: a pair's waves
    from its slots, the push's loop over waves to the most of its homes'), as the op launches them."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    waves = {"WAVES": switches.COMBINE_WAVES, "WAVE_SLOTS": switches.MAX_COMBINE_WAVES, "WP": 2}
    waves["WAVE_MIN"] = switches.COMBINE_WAVE_MIN_SLOTS  # each (home, holder) pair its own waves, as launched
    push = _compile("combine_push", "sm_90", False, 2, row_block=block, combine={"PACK": 2, "SPREAD": True, **waves})
    reduce = _compile(
        "combine_reduce", "sm_90", False, 2, row_block=block, combine={"PACK": 2, "UNROLL": 2, "SENDERS": 264, **waves}
    )  # fmt: skip
    lines = push.splitlines()
    releases = [i for i, line in enumerate(lines) if re.search(r"atom\.global\.sys\.release", line)]
    stores = [i for i, line in enumerate(lines) if re.search(r"st\.global\.v4\.", line)]
    assert len(releases) == 1, "one notify, in the loop over waves (to both ranks at once); no combine flag after"
    assert stores and stores[0] < releases[0], "the partials, then the wave's flag"
    assert _loads_before_first_store(push) == 64 and re.search(r"cvt\.rn\.bf16x2\.f32", push)
    acquire, load = _order(reduce, r"ld\.acquire\.sys", r"ld\.global(\.nc)?\.v4\.b32")
    assert 0 <= acquire < load, "a wave's flags acquired before its partials are read"
    assert _v4(reduce, "ld") == 16, "both ranks' bf16 partials, unrolled (8 vectors each)"

    def allocated(registers: int) -> int:  # per program of 4 warps: a warp's registers come in units of 256
        return 4 * -(-registers * 32 // 256) * 256

    pushed, reduced = _registers(push, tmp_path), _registers(reduce, tmp_path)
    assert pushed <= 136 and reduced <= 96, (pushed, reduced)
    assert 2 * (allocated(pushed) + allocated(reduced)) <= 65536 and 4 * 128 <= 2048, (pushed, reduced)
    loop = _compile("combine_reduce", "sm_90", False, 3, row_block=block, combine={**waves, "WP": 4, "SENDERS": 264})
    _registers(loop, tmp_path)
    # switches.OWN_PARTIALS_IN_REDUCE: the push leaves my own slots out, the reduce sums my own tokens' k rows of y
    # itself, a quarter of a row a step (its k rows' 16-byte loads before the step's store); two of each still fit an
    # SM.
    own = {**waves, "OWN": True}
    push = _compile("combine_push", "sm_90", False, 2, row_block=block, combine={"PACK": 2, "SPREAD": True, **own})
    reduce = _compile(
        "combine_reduce", "sm_90", False, 2, row_block=block,
        combine={"PACK": 2, "UNROLL": 2, "SENDERS": 264, **own, "K": 8, "SPLIT": switches.OWN_SPLIT},
    )  # fmt: skip
    assert _loads_before_first_store(reduce) >= 16, "the k rows of y (2 vectors each) and the peer's partial"
    pushed, reduced = _registers(push, tmp_path), _registers(reduce, tmp_path)
    assert pushed <= 136 and reduced <= 104, (pushed, reduced)
    assert 2 * (allocated(pushed) + allocated(reduced)) <= 65536, (pushed, reduced)


def test_sm90_the_pair_s_wave_rules_compile_to_the_same_residency(tmp_path: Any) -> None:
    """The pair (``REDUCE_OVERLAPS_PUSH`` + ``OWN_PARTIALS_IN_REDUCE``, H = 7168 bf16, k = 8, 2 ranks, 264 programs)
    under each rule for a pair's waves: ``COMBINE_WAVE_MIN_SLOTS`` 256 (``WAVE_MIN``), 0 (every pair all its waves:
    ``bench/moe.py``'s ``all-waves``) and ``COMBINE_WAVES_BY_PROGRAMS`` (``WAVE_MAX`` = the programs). All three give
    the push 128 registers and the reduce the same 96-register allocation (warps take registers in units of 256), so
    the same residency beside each other: at 4096 tokens, where every rule gives each pair 8 waves, they run the same
    schedule on the same occupancy (docs/design.md, "MoE combine at 4096 tokens"). The rules' builds spill nothing
    but the push at 0, which keeps at most 12 bytes of per-wave values on the stack; each releases once per wave."""
    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)

    def allocated(registers: int) -> int:  # per program of 4 warps: a warp's registers come in units of 256
        return 4 * -(-registers * 32 // 256) * 256

    waves = {"WAVES": switches.COMBINE_WAVES, "WAVE_SLOTS": switches.MAX_COMBINE_WAVES, "WP": 2, "OWN": True}
    reduce_constants = {"PACK": 2, "UNROLL": 2, "SENDERS": 264, "K": 8, "SPLIT": switches.OWN_SPLIT}
    found: dict[str, tuple[int, int]] = {}
    for label, rule in (("min256", {"WAVE_MIN": 256}), ("all", {}), ("by_programs", {"WAVE_MAX": 264})):
        push = _compile(
            "combine_push", "sm_90", False, 2, row_block=block, combine={"PACK": 2, "SPREAD": True, **waves, **rule}
        )  # fmt: skip
        reduce = _compile(
            "combine_reduce", "sm_90", False, 2, row_block=block, combine={**reduce_constants, **waves, **rule}
        )  # fmt: skip
        assert len(re.findall(r"atom\.global\.sys\.release", push)) == 1, label
        infos = [ptxas_info(ptx, tmp_path) for ptx in (push, reduce)]
        used = [int(re.search(r"Used (\d+) registers", info).group(1)) for info in infos]  # type: ignore[union-attr]
        spilled = [int(re.search(r"(\d+) bytes spill loads", info).group(1)) for info in infos]  # type: ignore[union-attr]
        assert spilled[1] == 0 and (spilled[0] == 0 or (label == "all" and spilled[0] <= 12)), (label, infos)
        found[label] = (used[0], allocated(used[1]))
    assert set(found.values()) == {(128, allocated(96))}, found
    assert 2 * (allocated(128) + allocated(96)) <= 65536


def test_expand_overlaps_push_is_on_by_default_at_eight_waves() -> None:
    """``switches.EXPAND_OVERLAPS_PUSH``: on by default at ``EXPAND_WAVES = 8`` (measured fastest);
    ``set_expand_overlaps_push`` returns the previous setting and refuses a non-bool; on, it turns on the own rows in
    the push where those apply (the pipelined gather layout on one node, bf16, or fp8 rows kept with
    ``FP8_OVERLAPS_PUSH``, not dequantized on receipt); the push's waves are at most the route count programs."""
    assert switches.EXPAND_OVERLAPS_PUSH is True and switches.EXPAND_WAVES == 8
    with pytest.raises(MoeError, match="on must be True or False, got 'yes'"):
        switches.set_expand_overlaps_push("yes")  # type: ignore[arg-type]
    plan = SimpleNamespace(pipelined=True, nodes=1, route_programs=2)
    assert moe_op._own_in_push(plan, True, False)  # type: ignore[arg-type]
    assert not moe_op._own_in_push(plan, True, True), "dequantized on receipt: the expand copies each row"  # type: ignore[arg-type]
    assert not moe_op._own_in_push(plan, False, False), "the expanded layout"  # type: ignore[arg-type]
    assert not moe_op._own_in_push(SimpleNamespace(pipelined=False, nodes=1), True, False)  # type: ignore[arg-type]
    assert not moe_op._own_in_push(SimpleNamespace(pipelined=True, nodes=2), True, False), "across nodes"  # type: ignore[arg-type]
    assert moe_op._waves(plan) == 2 and moe_op._waves(SimpleNamespace(route_programs=64)) == 8  # type: ignore[arg-type]
    assert switches.set_expand_waves(16) == 8 and moe_op._waves(SimpleNamespace(route_programs=64)) == 16  # type: ignore[arg-type]
    try:
        for wrong in (0, 3, 32, True):
            with pytest.raises(MoeError, match=f"waves must be a power of two in \\[1, 16\\], got {wrong!r}"):
                switches.set_expand_waves(wrong)
    finally:
        assert switches.set_expand_waves(8) == 16
    assert switches.set_expand_overlaps_push(False) is True
    try:
        assert not moe_op._own_in_push(plan, True, False)  # type: ignore[arg-type]
    finally:
        assert switches.set_expand_overlaps_push(True) is False


def test_fp8_overlaps_push_and_narrow_push_are_on_by_default() -> None:
    """``switches.FP8_OVERLAPS_PUSH`` and ``switches.FP8_NARROW_PUSH``: on by default (measured fastest on 2 x H200:
    196.9 µs against 336.7 for the expand after the 16-warp push, the same bits), so fp8 rows kept join the own rows in
    the push and the expand beside it (not dequantized ones, nor the expanded layout, nor with ``EXPAND_OVERLAPS_PUSH``
    off) and the pipelined fp8 push runs 4 warps; off, fp8 rows kept take the path before (no own rows in the push,
    hence no expand beside it) whatever ``OWN_ROWS_IN_PUSH`` says, while bf16 keeps the overlap, and the push runs
    ``FP8_PUSH_WARPS``; the setters return the previous setting and refuse a non-bool."""
    assert (
        switches.FP8_OVERLAPS_PUSH is True
        and switches.FP8_NARROW_PUSH is True
        and switches.EXPAND_OVERLAPS_PUSH is True
    )
    with pytest.raises(MoeError, match="set_fp8_overlaps_push: on must be True or False, got 1"):
        switches.set_fp8_overlaps_push(1)  # type: ignore[arg-type]
    plan = SimpleNamespace(pipelined=True, nodes=1, fp8=True)
    assert moe_op._own_in_push(plan, True, False, False), "bf16: the overlap's own rows"  # type: ignore[arg-type]
    assert moe_op._own_in_push(plan, True, False, True), "fp8 kept joins"  # type: ignore[arg-type]
    assert not moe_op._own_in_push(plan, True, True, True), "dequantized: the expand after"  # type: ignore[arg-type]
    assert not moe_op._own_in_push(plan, False, False, True), "the expanded layout"  # type: ignore[arg-type]
    assert moe_op._fp8_push_warps(plan) == 4 and moe_op._fp8_push_warps(plan, True) == 4  # type: ignore[arg-type]
    overlapped = switches.set_expand_overlaps_push(False)
    try:
        assert not moe_op._own_in_push(plan, True, False, True), "neither overlap nor own rows"  # type: ignore[arg-type]
    finally:
        switches.set_expand_overlaps_push(overlapped)
    assert switches.set_fp8_overlaps_push(False) is True and switches.set_fp8_narrow_push(False) is True
    try:
        assert not moe_op._own_in_push(plan, True, False, True), "fp8 kept: the path before"  # type: ignore[arg-type]
        assert moe_op._own_in_push(plan, True, False, False), "bf16 keeps the overlap"  # type: ignore[arg-type]
        own = switches.set_own_rows_in_push(True)
        try:
            assert not moe_op._own_in_push(plan, True, False, True), "OWN_ROWS_IN_PUSH alone: not fp8"  # type: ignore[arg-type]
        finally:
            switches.set_own_rows_in_push(own)
        assert moe_op._fp8_push_warps(plan) == moe_op.FP8_PUSH_WARPS > 4  # type: ignore[arg-type]
        assert moe_op._fp8_push_warps(plan, True) == 4, "prequantized: 4 warps whatever the option"  # type: ignore[arg-type]
    finally:
        assert switches.set_fp8_overlaps_push(True) is False and switches.set_fp8_narrow_push(True) is False


def test_the_expand_beside_the_push_takes_its_per_sm_split_and_the_push_its_warps_at_the_next_dispatch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``switches.set_expand_overlap_per_sm`` / ``set_overlap_copiers_per_sm`` (defaults 2 and 2) and
    ``set_fp8_narrow_push_warps`` (default 4): each checks its argument and returns the previous value, and the next
    launch of the expand beside the push, of its gate (``EXPAND_RESIDENT_FIRST``) and of the fp8 push takes the new
    value in a launch plan of its own, the plan kept: at 132 SMs the expand's grid is (meta + copy) programs per SM
    times 132, its ``COPIERS`` the copy programs, the gate counts that grid; the fp8 push's warps
    (``_fp8_push_warps``, in its launch plan's key). The two counts together stay within ``MAX_OVERLAP_PER_SM`` = 4.
    (GPU launches, recorded instead of compiled; under the emulation the split is the push's programs and no copy
    programs, whatever the setters say.)"""

    def settings() -> tuple[int, int, int]:
        return switches.EXPAND_OVERLAP_PER_SM, switches.OVERLAP_COPIERS_PER_SM, switches.FP8_NARROW_PUSH_WARPS

    assert settings() == (2, 2, 4)
    for setter in (switches.set_expand_overlap_per_sm, switches.set_overlap_copiers_per_sm):
        for wrong in (0, True, 2.0):
            with pytest.raises(MoeError, match=f"{setter.__name__}: count must be an int >= 1, got {wrong!r}"):
                setter(wrong)  # type: ignore[arg-type]
        # 3 beside the other's 2: 5 expand programs of 7,168 registers leave an SM 29,696, under the 16-warp push's
        with pytest.raises(MoeError, match=f"{setter.__name__}: 3 with .* = 2 makes 5 .* than MAX_OVERLAP_PER_SM = 4"):
            setter(3)
    for wrong in (2, 16, True):
        with pytest.raises(MoeError, match=f"set_fp8_narrow_push_warps: warps must be 4 or 8, got {wrong!r}"):
            switches.set_fp8_narrow_push_warps(wrong)  # type: ignore[arg-type]
    assert settings() == (2, 2, 4), "a refused setting changes nothing"

    recorded: list[tuple[str, int, dict[str, Any], int]] = []

    def compile_plan(kernel: Any, grid: Any, named: dict[str, Any], leading: int, num_warps: int) -> Any:
        recorded.append((kernel.fn.__name__, grid[0], named, num_warps))
        return SimpleNamespace(launch=lambda *args: None)

    monkeypatch.setattr(moe_op, "compile_plan", compile_plan)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    zeros = functools.partial(torch.zeros, dtype=torch.int32)
    workspace = SimpleNamespace(
        started=zeros(1), flags=zeros(64), table=zeros(8 * 132, 64), waves=zeros(2, 4096), counts=zeros(2, 64)
    )
    buffers = SimpleNamespace(
        tokens=torch.zeros(2, 64, 256, dtype=torch.uint8), meta=zeros(2, 64, 16), combine_slots=64, token_slots=64,
        across=None,
    )  # fmt: skip
    plan = moe_op._Plan(
        ("split",), "normal", 2, 16, 4, 256, torch.bfloat16, 0, 264, workspace, buffers, fp8=True, sms=132,  # type: ignore[arg-type]
        pipelined=True,
    )  # fmt: skip
    device = torch.device("cuda")
    recv = {"recv_ptr": torch.zeros(1, dtype=moe_op.FP8_DTYPE)}

    def launch_expand_and_gate() -> list[tuple[int, int, int]]:
        recorded.clear()
        moe_op._launch(plan, "expand", recv, device, True, self_mode=1, waves=8)
        moe_op._launch(plan, "expand_started", {}, device)
        (expand, grid, named, _), (gate, _, counted, _) = recorded
        assert (expand, gate) == ("_expand_kernel", "_started_kernel")
        return [(grid, named["COPIERS"], counted["PROGRAMS"])]

    assert plan.overlap_split() == (264, 264) and launch_expand_and_gate() == [(528, 264, 528)]
    previous = (switches.set_expand_overlap_per_sm(1), switches.set_overlap_copiers_per_sm(3))
    try:
        assert previous == (2, 2) and plan.overlap_split() == (132, 396)
        assert launch_expand_and_gate() == [(528, 396, 528)]
        assert switches.set_overlap_copiers_per_sm(1) == 3 and launch_expand_and_gate() == [(264, 132, 264)]
        emulated = moe_op._Plan(("split",), "normal", 2, 16, 4, 256, torch.bfloat16, 0, 4, workspace, sms=0)  # type: ignore[arg-type]
        assert emulated.overlap_split() == (4, 0)
    finally:
        switches.set_expand_overlap_per_sm(2)
        switches.set_overlap_copiers_per_sm(2)
    recorded.clear()
    moe_op._launch(plan, "expand", recv, device, True, self_mode=1, waves=8)
    assert recorded == [], "the default split's launch plan was kept"
    assert len(plan.launches) == 6, "three splits, the expand and its gate each"

    assert moe_op._fp8_push_warps(plan) == 4 and switches.set_fp8_narrow_push_warps(8) == 4
    try:
        assert moe_op._fp8_push_warps(plan) == 8 and moe_op._fp8_push_warps(plan, True) == 4
        narrow = switches.set_fp8_narrow_push(False)
        try:
            assert moe_op._fp8_push_warps(plan) == moe_op.FP8_PUSH_WARPS, "the wide push: 16 whatever the narrow's"
        finally:
            switches.set_fp8_narrow_push(narrow)
    finally:
        assert switches.set_fp8_narrow_push_warps(4) == 8


def test_own_rows_in_push_is_an_option_off_by_default() -> None:
    """``switches.OWN_ROWS_IN_PUSH``: off unless set (``EXPAND_OVERLAPS_PUSH``, on by default, implies it: off here);
    ``set_own_rows_in_push`` returns the previous setting and refuses a non-bool; it applies where the side stream's
    launch would (the pipelined gather layout) and (with ``FP8_OVERLAPS_PUSH``) to fp8 rows kept, not dequantized on
    receipt, at any T."""
    assert switches.OWN_ROWS_IN_PUSH is False
    with pytest.raises(MoeError, match="on must be True or False, got 1"):
        switches.set_own_rows_in_push(1)  # type: ignore[arg-type]
    plan = SimpleNamespace(pipelined=True, nodes=1)
    overlapped = switches.set_expand_overlaps_push(False)
    try:
        assert not moe_op._own_in_push(plan, True, False)  # type: ignore[arg-type]
        assert switches.set_own_rows_in_push(True) is False
        try:
            assert moe_op._own_in_push(plan, True, False)  # type: ignore[arg-type]
            assert not moe_op._own_in_push(plan, False, False) and not moe_op._own_in_push(plan, True, True)  # type: ignore[arg-type]
            assert not moe_op._own_in_push(SimpleNamespace(pipelined=False, nodes=1), True, False)  # type: ignore[arg-type]
        finally:
            assert switches.set_own_rows_in_push(False) is True
        assert not moe_op._own_in_push(plan, True, False)  # type: ignore[arg-type]
    finally:
        switches.set_expand_overlaps_push(overlapped)


@pytest.mark.parametrize("scales", [0, 56])
def test_sm90_bulk_gather_expand_copies_one_flat_block_and_fits_its_copy_programs(tmp_path: Any, scales: int) -> None:
    """``MoeConfig(pipelined=True)``'s gather layout on one node: the expand kernel's copy programs move the payload
    as one flat block of 16-byte vectors (a thread's ``switches.bulk_copy_block`` / 128 elements per step, 8 KB a
    program:
    4 loads and stores of bf16 or of fp8, and no other 16-byte load: the meta programs copy no row), and at most 64
    registers per thread, so ``EXPAND_PER_SM`` meta and ``BULK_COPIERS_PER_SM`` copy programs of 128 threads fit
    on an SM together (64K registers) and copy while the meta is written; nothing spills."""
    from triton_dist.ops.moe.config import EXPAND_PER_SM

    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    copiers = switches.BULK_COPIERS_PER_SM * 132
    bulk = _compile(
        "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, copiers=copiers, scales=scales
    )

    def count(pattern: str) -> int:
        return sum(1 for line in bulk.splitlines() if re.search(pattern, line))

    vectors = switches.bulk_copy_block(scales > 0) * (1 if scales else 2) // (128 * 16)
    assert vectors == 4, "8 KB a step: four 16-byte vectors per thread, bf16 or fp8"
    assert count(r"ld\.global(\.nc)?\.v4\.") == vectors and count(r"st\.global\.v4\.") == vectors, bulk[-3000:]
    info = ptxas_info(bulk, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    registers = int(re.search(r"Used (\d+) registers", info).group(1))  # type: ignore[union-attr]
    assert (EXPAND_PER_SM + switches.BULK_COPIERS_PER_SM) * 128 * -(-registers // 8) * 8 <= 65536, info


def test_pooled_outputs_are_aligned_disjoint_views() -> None:
    """The eager path's int32 outputs: views of one allocation, each at a multiple of 64 bytes (the kernels are
    compiled for 16-byte aligned pointers), none overlapping another, of the shapes asked for (scalars and empty
    ones included); unpooled: separate tensors."""
    shapes = [(3, 2), (0,), (), (5,), (2, 3, 4), (1,)]
    views = moe_op._int32s(shapes, torch.device("cpu"), pooled=True)
    assert [tuple(v.shape) for v in views] == shapes and all(v.is_contiguous() for v in views)
    base = views[0].untyped_storage().data_ptr()
    assert all(v.untyped_storage().data_ptr() == base for v in views), "one allocation"
    assert all(v.data_ptr() % 64 == 0 for v in views)
    for i, v in enumerate(views):
        v.fill_(i)
    assert all(bool((v == i).all()) for i, v in enumerate(views)), "no view overlaps another"
    separate = moe_op._int32s(shapes, torch.device("cpu"), pooled=False)
    assert len({v.untyped_storage().data_ptr() for v in separate if v.numel()}) == 5


def test_the_summary_is_polled_from_host_memory_until_every_word_landed() -> None:
    """Normal mode reads the route kernel's summary from host-mapped memory (set to -1 before the launch, every
    word the kernel writes >= 0) without synchronizing the stream; a kernel that ended without writing it is an
    error naming the problem, not a hang; without host memory the device's words are copied."""
    info = torch.arange(8, dtype=torch.int32)
    assert moe_op._summary(info, None, None) == list(range(8))
    host = torch.tensor([3, 1, 4, 1, 0, 0, 7, 0], dtype=torch.int32)
    assert moe_op._summary(info, host, None) == host.tolist()

    class Landing:
        """A route kernel still running for two queries, whose last word lands before the third."""

        queries = 0

        def query(self) -> bool:
            self.queries += 1
            if self.queries == 3:
                host[7] = 0
            return self.queries >= 3

    host[7] = -1
    landing = Landing()
    assert moe_op._summary(info, host, landing) == [3, 1, 4, 1, 0, 0, 7, 0] and landing.queries == 3  # type: ignore[arg-type]
    host[2] = -1
    with pytest.raises(RuntimeError, match="route kernel ended without writing its summary"):
        moe_op._summary(info, host, SimpleNamespace(query=lambda: True))  # type: ignore[arg-type]


def test_bench_only_dispatch_times_the_four_variants_at_one_and_4096_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/moe.py --only-dispatch``: its own default sizes (1 and 4096), any other ``--tokens`` kept."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_moe_quick", Path(__file__).parents[2] / "bench" / "moe.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    assert not bench.parse_args([]).only_dispatch
    assert bench.parse_args(["--only-dispatch"]).tokens == [1, 4096]
    assert bench.parse_args(["--only-dispatch", "--tokens", "128"]).tokens == [128]
    assert bench.parse_args([]).tokens == list(bench.TOKENS)
    # --route-programs / --expand-block: the pipelined gather dispatch with each option and each pair of both
    args = bench.parse_args(["--only-dispatch", "--route-programs", "128,256", "--expand-block", "16"])
    assert (args.route_programs, args.expand_block) == ([128, 256], [16])
    assert bench.parse_args(["--only-dispatch"]).route_programs == []
    with pytest.raises(SystemExit):
        bench.parse_args(["--expand-block", "16"])  # only with --only-dispatch
    configs = bench.option_configs([256], [16])
    assert configs == {
        "route 256": MoeConfig(pipelined=True, route_programs=256),
        "expand 16": MoeConfig(pipelined=True, expand_block=16),
        "route 256 expand 16": MoeConfig(pipelined=True, route_programs=256, expand_block=16),
    }
    with pytest.raises(MoeError, match="route_programs must be None or a power of two"):
        bench.option_configs([96], [])
    # The own-in-push row: its key sets switches.OWN_ROWS_IN_PUSH for the call only (restored after, also if it raises)
    seen: list[tuple[bool, dict[str, Any]]] = []

    def fake(*args: Any, **kwargs: Any) -> str:
        seen.append((switches.OWN_ROWS_IN_PUSH, kwargs))
        if kwargs.get("layout") == "expanded":
            raise MoeError("refused")
        return "dispatched"

    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", fake)
    assert bench.dispatch_with(0, 1, 2, 8, {"layout": "gather", bench.OWN_IN_PUSH: True}) == "dispatched"
    assert bench.dispatch_with(0, 1, 2, 8, {"layout": "gather"}) == "dispatched"
    with pytest.raises(MoeError, match="refused"):
        bench.dispatch_with(0, 1, 2, 8, {"layout": "expanded", bench.OWN_IN_PUSH: True})
    assert seen == [(True, {"layout": "gather"}), (False, {"layout": "gather"}), (True, {"layout": "expanded"})]
    assert switches.OWN_ROWS_IN_PUSH is False
    # The rows without the overlap (the default): its key sets switches.EXPAND_OVERLAPS_PUSH for the call only, likewise
    overlaps: list[bool] = []
    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", lambda *a, **k: overlaps.append(switches.EXPAND_OVERLAPS_PUSH))
    bench.dispatch_with(0, 1, 2, 8, {"layout": "gather", bench.OVERLAP: False})
    bench.dispatch_with(0, 1, 2, 8, {"layout": "gather"})
    assert overlaps == [False, True] and switches.EXPAND_OVERLAPS_PUSH is True
    waves: list[int] = []
    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", lambda *a, **k: waves.append(switches.EXPAND_WAVES))
    bench.dispatch_with(0, 1, 2, 8, {"layout": "gather", bench.OVERLAP: 16})
    assert waves == [16] and switches.EXPAND_WAVES == 8
    # An fp8 row's FP8_OVERLAP key sets switches.FP8_OVERLAPS_PUSH (on by default) for the call only, the others
    # untouched
    fp8_seen: list[tuple[bool, bool, bool]] = []

    def fp8_fake(*args: Any, **kwargs: Any) -> None:
        fp8_seen.append((switches.FP8_OVERLAPS_PUSH, switches.EXPAND_OVERLAPS_PUSH, switches.OWN_ROWS_IN_PUSH))
        raise MoeError("refused")

    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", fp8_fake)
    with pytest.raises(MoeError, match="refused"):
        bench.dispatch_with(0, 1, 2, 8, {"layout": "gather", "fp8": True, bench.FP8_OVERLAP: False})
    assert fp8_seen == [(False, True, False)] and switches.FP8_OVERLAPS_PUSH is True

    def settings() -> tuple[bool, ...]:  # the fp8 push's option rows' keys set their options for the call only
        return switches.FP8_OVERLAPS_PUSH, switches.FP8_RECIPROCAL, switches.FP8_NARROW_PUSH, switches.FP8_PREQUANTIZE

    push_seen: list[tuple[bool, ...]] = []
    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", lambda *a, **k: push_seen.append(settings()))
    for keys in bench.FP8_PUSH_ROWS.values():
        bench.dispatch_with(0, 1, 2, 8, {"layout": "gather", "fp8": True, **keys})
    assert list(bench.FP8_PUSH_ROWS)[:2] == ["expand-after", "overlap wide"]
    assert push_seen == [  # (overlap, reciprocal, narrow, prequantize)
        (False, True, False, False),  # expand-after: fp8's default before 2026-11-27 (with the reciprocal)
        (True, True, False, False),  # overlap wide
        (True, False, True, False),  # division (beside the default's overlap and narrow push)
        (True, True, True, True),  # prequantized
        (True, False, True, True),  # prequantized division
        (False, True, False, True),  # expand-after prequantized
    ]
    assert settings() == (True, True, True, False), "the default: the expand beside the 4-warp push, the reciprocal"
    assert bench.parse_args(["--only-dispatch", "--expand-waves", "8,16"]).expand_waves == [8, 16]
    with pytest.raises(SystemExit):
        bench.parse_args(["--expand-waves", "8"])  # only with --only-dispatch


def test_sm90_fp8_push_splits_each_row_over_more_warps_without_spilling(tmp_path: Any) -> None:
    """With ``switches.FP8_NARROW_PUSH`` off the fp8 push runs ``FP8_PUSH_WARPS`` warps: at H = 7168 (whole rows) each
    thread quantizes a quarter of what it does at 4 warps (fewer than half the PTX instructions), and nothing spills."""
    from triton_dist.ops.moe.config import FP8_PUSH_WARPS

    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)

    def instructions(ptx: str) -> int:
        return sum(
            1 for line in ptx.splitlines() if line.strip() and not line.strip().startswith(("//", ".", "$", "{", "}"))
        )

    four = _compile("push", "sm_90", False, world_size=2, row_block=block, scales=56)
    wide = _compile("push", "sm_90", False, world_size=2, row_block=block, scales=56, num_warps=FP8_PUSH_WARPS)
    assert FP8_PUSH_WARPS >= 8 and 2 * instructions(wide) < instructions(four), (instructions(wide), instructions(four))
    info = ptxas_info(wide, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info


def test_normal_expand_runs_more_programs_than_push_and_waits_for_the_pushs_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Normal mode on one node launches ``EXPAND_PER_SM`` expand programs per SM: the expand grid is the plan's
    ``expanders``, and its wait counts the push's programs per rank (``SENDERS``); a plan without
    ``expanders`` (low-latency mode, the emulation) launches the push's grid and waits for its own."""
    from triton_dist.ops.moe.config import EXPAND_PER_SM

    launched: dict[str, Any] = {}

    class Recorded:
        def launch(self, device: torch.device, *leading: Any) -> None:
            return None

    def compile_plan(kernel: Any, grid: Any, named: dict[str, Any], leading: int, **options: Any) -> Recorded:
        launched[kernel.__name__] = (grid, named.get("SENDERS", 0), options["num_warps"])
        launched["copiers"] = named.get("COPIERS")
        return Recorded()

    monkeypatch.setattr(moe_op, "compile_plan", compile_plan)
    monkeypatch.setattr(torch.cuda, "device", lambda device: _Nothing())
    meta = torch.device("meta")
    workspace = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    buffers = moe_op._Buffers(torch.zeros(2, 64, 8), torch.zeros(2, 64, 7), torch.zeros(2, 64, 8))
    assert EXPAND_PER_SM > 1
    for expanders, senders in ((4 * EXPAND_PER_SM, 4), (0, 0)):
        plan = moe_op._Plan(("key",), "normal", 2, 8, 2, 64, torch.bfloat16, 0, 4, workspace, buffers)
        plan.expanders = expanders
        plan.launches.clear()
        moe_op._launch(plan, "expand", {"recv_ptr": torch.empty(1, 64, dtype=torch.bfloat16, device=meta)}, meta)
        assert launched["_expand_kernel"] == ((expanders or 4, 1, 1), senders, 4)
    plan.fp8 = plan.pipelined = True  # the pipelined fp8 push: 4 warps (FP8_NARROW_PUSH), more with it off
    moe_op._launch(plan, "push", {"x_ptr": torch.empty(1, 64, dtype=torch.bfloat16, device=meta)}, meta)
    assert launched["_push_kernel"][::2] == ((4, 1, 1), 4)
    narrow = switches.set_fp8_narrow_push(False)
    try:
        moe_op._launch(plan, "push", {"x_ptr": torch.empty(1, 64, dtype=torch.bfloat16, device=meta)}, meta)
        assert launched["_push_kernel"][::2] == ((4, 1, 1), moe_op.FP8_PUSH_WARPS)
    finally:
        switches.set_fp8_narrow_push(narrow)
    # Pipelined, the gather layout's expand (fp8 kept) gets its copy programs after the meta programs, which still
    # wait for the push's programs; dequantizing, it copies each row itself and gets none.
    plan.expanders, plan.copiers = 4 * EXPAND_PER_SM, 6
    fp8_rows = {"recv_ptr": torch.empty(1, 64, dtype=moe_op.FP8_DTYPE, device=meta)}
    moe_op._launch(plan, "expand", fp8_rows, meta, gather=True)
    assert launched["_expand_kernel"] == ((4 * EXPAND_PER_SM + 6, 1, 1), 4, 4) and launched["copiers"] == 6
    moe_op._launch(plan, "expand", {"recv_ptr": torch.empty(1, 64, dtype=torch.bfloat16, device=meta)}, meta, True)
    assert launched["_expand_kernel"] == ((4 * EXPAND_PER_SM, 1, 1), 4, 4) and not launched["copiers"]


def test_pipelined_gather_pushes_its_own_tokens_straight_into_recv_x(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_self_push``: the pipelined gather layout without fp8 (on a GPU from ``SELF_PUSH_MIN_ELEMENTS`` elements of
    x, on the CPU at any size), not fp8, the expanded layout or a plan without ``pipelined``; its launches: the push
    with ``SELF = 1`` (and the early push's size check), its ``SELF = 2`` pass (no check: launched once sized), each
    its own launch plan, and the expand kernel's copy told to leave the own rows out (``SELF_DIRECT``)."""
    launched: list[tuple[str, dict[str, Any]]] = []

    class Recorded:
        def launch(self, device: torch.device, *leading: Any) -> None:
            return None

    def compile_plan(kernel: Any, grid: Any, named: dict[str, Any], leading: int, **options: Any) -> Recorded:
        launched.append((kernel.__name__, named))
        return Recorded()

    monkeypatch.setattr(moe_op, "compile_plan", compile_plan)
    monkeypatch.setattr(torch.cuda, "device", lambda device: _Nothing())
    meta = torch.device("meta")
    workspace = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    buffers = moe_op._Buffers(torch.zeros(2, 64, 8), torch.zeros(2, 64, 7), torch.zeros(2, 64, 8))
    plan = moe_op._Plan(("key",), "normal", 2, 8, 2, 64, torch.bfloat16, 0, 4, workspace, buffers)
    small = torch.empty(switches.SELF_PUSH_MIN_ELEMENTS // 64 - 1, 64, dtype=torch.bfloat16, device=meta)
    large = torch.empty(switches.SELF_PUSH_MIN_ELEMENTS // 64, 64, dtype=torch.bfloat16, device=meta)
    assert not moe_op._self_push(plan, True, False, large), "not pipelined"
    plan.pipelined = True
    assert moe_op._self_push(plan, True, False, large) and moe_op._self_push(plan, True, False, torch.zeros(1, 64))
    assert not moe_op._self_push(plan, True, False, small), "too few elements on a GPU"
    assert not moe_op._self_push(plan, True, True, large) and not moe_op._self_push(plan, False, False, large)
    for mode in (1, 2):
        moe_op._launch(plan, "push", {"x_ptr": large}, meta, self_mode=mode)
    moe_op._launch(plan, "expand", {"recv_ptr": large}, meta, gather=True, self_mode=1)
    (_, others), (_, own), (_, expand) = launched
    assert others["SELF"] == 1 and others["CHECK_CAP"] and own["SELF"] == 2 and not own["CHECK_CAP"]
    assert expand["BULK"] and expand["SELF_DIRECT"]
    assert len(plan.launches) == 3, "one launch plan each"


@pytest.mark.parametrize(("layout", "fp8"), [("expanded", False), ("gather", False), ("gather", True)])
def test_expand_launched_from_addresses_gets_the_outputs_it_returns(
    monkeypatch: pytest.MonkeyPatch, layout: str, fp8: bool
) -> None:
    """Once the expand kernel's launch plan exists (GPUs), a pipelined normal-mode dispatch launches it from its
    outputs' addresses and makes their views afterwards: the plan it finds is the one the first call compiled (the
    same key) and the addresses are those of the tensors the call returns, in the kernel's order (fp8: the scales);
    without ``pipelined``, from the tensors."""
    from triton_dist.ops.moe.config import FP8_DTYPE

    leading: list[list[Any]] = []

    class Recorded:
        def launch(self, device: torch.device, *args: Any) -> None:
            leading.append(list(args))

    def launch(
        plan: Any,
        name: str,
        args: dict[str, Any],
        device: torch.device,
        gather: bool = False,
        self_mode: int = 0,
        waves: int = 0,
    ) -> None:
        if "info_ptr" in args:  # the route kernel's summary: 6 rows and 4 tokens received, the buffers fit
            args["info_ptr"].copy_(torch.tensor([6, 4, 4, 4, 0, 0, 1, 0], dtype=torch.int32))
        if name == "expand":  # the first call: compiled from tensors, under the key _launch gives it
            dtypes = [v.dtype for v in args.values() if isinstance(v, torch.Tensor)]
            plan.launches[moe_op._launch_key(name, gather, self_mode, dtypes)] = Recorded()
            leading.append(list(args.values()))

    monkeypatch.setattr(moe_op, "_launch", launch)
    monkeypatch.setattr(moe_op, "_by_address", lambda device: True)
    monkeypatch.setattr(switches, "EXPAND_OVERLAPS_PUSH", False)  # the expand after the push (the gather layout's)
    ws = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    buffers = moe_op._Buffers(torch.zeros(2, 64, 8), torch.zeros(2, 64, 7), torch.zeros(2, 64, 8))
    plan = moe_op._Plan(("k",), "normal", 2, 8, 2, 256, torch.bfloat16, 0, 1, ws, buffers, fp8=fp8)
    monkeypatch.setattr(moe_op, "_plan_for", lambda *args: plan)
    x, idx, weights = torch.zeros(3, 256, dtype=torch.bfloat16), torch.zeros(3, 2, dtype=torch.int32), torch.zeros(3, 2)
    for _ in range(2):
        moe_op._dispatch(x, idx, weights, 8, "normal", None, fp8, layout=layout, pooled=True)
    assert len(leading) == 2 and all(isinstance(v, torch.Tensor) for v in leading[1]), "not pipelined: tensors"
    leading.clear()
    plan.launches.clear()
    plan.pipelined = True
    first = moe_op._dispatch(x, idx, weights, 8, "normal", None, fp8, layout=layout, pooled=True)
    second = moe_op._dispatch(x, idx, weights, 8, "normal", None, fp8, layout=layout, pooled=True)
    assert len(leading) == 2 and all(not isinstance(v, torch.Tensor) for v in leading[1][1:15]), "by address"
    for got, call in zip(leading, (first, second), strict=True):
        recv_x, counts, offsets, src_offsets, src_rank, src_token, expert, weights_out, slot = call[:9]
        recv_tokens, status, tok_pos, _, epoch, comb_rows, comb_src, comb_dst, scales, gather_rows = call[9:]
        scales_at = scales if fp8 else weights_out
        gather_at = gather_rows if layout == "gather" else slot
        want = [recv_x, src_rank, src_token, expert, weights_out, slot, comb_rows, comb_src, comb_dst, counts, offsets]
        want += [src_offsets, recv_tokens, scales_at, gather_at, status, epoch, tok_pos]
        addresses = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in got]
        assert addresses == [t.data_ptr() for t in want]
    assert second[0].dtype == (FP8_DTYPE if fp8 else torch.bfloat16) and list(second[0].shape) == [
        4 if layout == "gather" else 6,
        256,
    ]
    assert list(second[14].shape) == [4, 2] and second[7].dtype == torch.float32 and list(second[4].shape) == [6]


ROUNDING_SCRIPT = """
import torch, triton, triton.language as tl
from triton_dist.ops.moe.kernels import round_to_e4m3

@triton.jit
def _round(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, round_to_e4m3(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

fp8 = torch.float8_e4m3fn
grid = torch.arange(256, dtype=torch.uint8).view(fp8).float()
grid = grid[grid.isfinite()].unique()  # every finite e4m3 value, -448 .. 448, with -0 merged into 0
ties = (grid[1:] + grid[:-1]) / 2  # halfway between neighbours: to nearest even
gen = torch.Generator().manual_seed(7)
scaled = (torch.randn(4096, generator=gen) * torch.logspace(-12, 2.6, 4096)).clamp(-448, 448)  # x / scale's range
v = torch.cat([grid, ties, -ties, ties.nextafter(grid[1:]), ties.nextafter(grid[:-1]), scaled,
               torch.tensor([0.0, -0.0, 1e-30, -1e-30, -2.0**-10, 2.0**-10, -0.015624, 0.015624])])
out = torch.full_like(v, float("nan"))
_round[(1,)](v, out, v.numel(), BLOCK=triton.next_power_of_2(v.numel()))
want = v.to(fp8).float()
bad = (out.view(torch.int32) != want.view(torch.int32)).nonzero().flatten()
print("values", v.numel(), "mismatches", bad.numel())
for i in bad[:8].tolist():
    print("v", v[i].item(), "got", out[i].item(), "want", want[i].item())
"""


def test_fp8_rounding_matches_torch_cast_bit_for_bit(tmp_path: Path) -> None:
    """The fp8 rounding the push kernel does under Triton's interpreter (``kernels.round_to_e4m3``) against torch's
    cast to float8_e4m3fn, bit for bit in fp32: every e4m3 value, the ties between neighbours and their neighbours,
    random values from far below the subnormal step to near 448, and the signs of zero (a tiny negative value must
    give -0, fp8 byte 0x80, as torch's cast does: the GPU test's H = 7168 rows differed there)."""
    script = tmp_path / "rounding.py"
    script.write_text(ROUNDING_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"), TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mismatches 0" in result.stdout, result.stdout


def _push_divisions(ptx: str) -> int:
    """The fp32 divisions (``div.rn.f32``) in ``ptx``."""
    return sum(1 for line in ptx.splitlines() if re.search(r"\bdiv\.rn\.f32\b", line))


@functools.cache
def _fp8_push(warps: int, overlap: bool, reciprocal: bool) -> str:
    """The PTX of the fp8 push at H = 7168 (whole rows), E = 24, k = 8 on 2 ranks at ``warps`` warps, with the overlap's
    wave flags and own rows (``switches.FP8_OVERLAPS_PUSH``) or as the fp8 gather dispatch launches it with that option
    off (the early push), with ``RECIPROCAL`` or not (compiled once per test session)."""
    block = MoeConfig(whole_row=True).row_block(7168)
    waves, self_mode = (switches.EXPAND_WAVES, 3) if overlap else (0, 0)
    extra = {"RECIPROCAL": True} if reciprocal else None
    return _compile(
        "push", "sm_90", False, world_size=2, row_block=block, scales=56, num_warps=warps, waves=waves,
        self_mode=self_mode, extra=extra,
    )  # fmt: skip


def test_sm90_fp8_reciprocal_push_divides_once_per_group(tmp_path: Any) -> None:
    """``switches.FP8_RECIPROCAL`` (``RECIPROCAL``, the default): at H = 7168 (whole rows of 8192 lanes) the fp8 push
    divides twice per group a thread holds (the scale, and 448 over the group's amax) and multiplies each value, where
    the division (the switch off) divides each of its values too (16 a thread at ``FP8_PUSH_WARPS`` = 16, 64 at 4
    warps): at most a quarter of the divisions; it still casts with the hardware, spills nothing and takes no more
    registers (4 at most: a multiple of 8 is allocated), at 16 warps (the push with ``FP8_OVERLAPS_PUSH`` and
    ``FP8_NARROW_PUSH`` off) and at the narrow push's 4 (with the overlap's waves and own rows: the default)."""
    from triton_dist.ops.moe.config import FP8_PUSH_WARPS

    need_real_library("sm_90")
    for warps, overlap in ((FP8_PUSH_WARPS, False), (4, True)):
        per_thread = MoeConfig(whole_row=True).row_block(7168) // (32 * warps)
        divided, multiplied = _fp8_push(warps, overlap, False), _fp8_push(warps, overlap, True)
        assert _push_divisions(divided) >= per_thread, (warps, _push_divisions(divided))
        assert 4 * _push_divisions(multiplied) <= _push_divisions(divided), (warps, _push_divisions(multiplied))
        muls = sum(1 for line in multiplied.splitlines() if re.search(r"\bmul(\.rn)?\.f32\b", line))
        assert muls >= per_thread, (warps, muls)
        assert "cvt.rn.satfinite.e4m3x2.f32" in multiplied
        assert _registers(multiplied, tmp_path) <= _registers(divided, tmp_path) + 4, warps


def test_sm90_the_narrow_fp8_push_fits_twice_beside_the_expand(tmp_path: Any) -> None:
    """``switches.FP8_NARROW_PUSH`` (on by default, with ``FP8_OVERLAPS_PUSH``; here with ``FP8_RECIPROCAL`` too, the
    larger of the two): at H = 7168, k = 8 on 2 ranks the push with its wave flags and own rows at 4 warps leaves room
    on an SM for two of its programs (the push's ``NORMAL_PROGRAMS_PER_SM``) beside the expand kernel's
    ``EXPAND_OVERLAP_PER_SM + OVERLAP_COPIERS_PER_SM`` programs (64K registers, 2048 threads); at ``FP8_PUSH_WARPS`` =
    16 only one fits there (the push beside the expand ran at most one program per SM: 211.5 µs against 110.8 alone on 2
    x H200). Nothing spills."""
    from triton_dist.ops.moe.config import FP8_PUSH_WARPS, NORMAL_PROGRAMS_PER_SM

    need_real_library("sm_90")

    def allocated(registers: int, warps: int) -> int:  # per program: a warp's registers come in units of 256
        return warps * -(-registers * 32 // 256) * 256

    expand = _compile(
        "expand", "sm_90", False, world_size=2, row_block=MoeConfig(whole_row=True).row_block(7168), gather=True,
        bulk=True, scales=56, copiers=switches.OVERLAP_COPIERS_PER_SM * 132, self_mode=1, waves=switches.EXPAND_WAVES,
    )  # fmt: skip
    per_sm = switches.EXPAND_OVERLAP_PER_SM + switches.OVERLAP_COPIERS_PER_SM
    beside = per_sm * allocated(_expand_beside_push_registers(expand, tmp_path), 4)
    wide = allocated(_registers(_fp8_push(FP8_PUSH_WARPS, True, False), tmp_path), FP8_PUSH_WARPS)
    narrow = allocated(_registers(_fp8_push(4, True, True), tmp_path), 4)
    assert beside + NORMAL_PROGRAMS_PER_SM * wide > 65536 >= beside + wide, (beside, wide)
    assert beside + NORMAL_PROGRAMS_PER_SM * narrow <= 65536, (beside, narrow)
    assert (4 * per_sm + 4 * NORMAL_PROGRAMS_PER_SM) * 32 <= 2048


def test_sm90_the_push_share_probes_splits_fit_and_the_8_warp_push_does_not_spill(tmp_path: Any) -> None:
    """The splits of docs/results/probes/2026-11-27-moe_fp8_push_share.py (docs/design.md, "The fp8 push's share of
    an SM"), at H = 7168, k = 8 on 2 ranks with the overlap's waves, own rows and ``FP8_RECIPROCAL``: three 4-warp
    push programs fit beside one meta and one copy program of the expand (``MoeConfig(programs_per_sm=3)``,
    ``EXPAND_OVERLAP_PER_SM`` = ``OVERLAP_COPIERS_PER_SM`` = 1), not beside its default four; the 8-warp push
    (``switches.FP8_NARROW_PUSH_WARPS`` = 8) spills nothing, takes fewer registers a thread than at 4 warps and more
    than at 16, and two of its programs fit beside three of the expand's (beside four only at the 48 registers the
    expand takes here, 6,144 a program, not at the 56 of the op's 256 experts); and beside ``MAX_OVERLAP_PER_SM``
    expand programs every push (4, 8 or 16 warps) has room for a program of its own."""
    from triton_dist.ops.moe.config import FP8_PUSH_WARPS

    need_real_library("sm_90")

    def allocated(registers: int, warps: int) -> int:  # per program: a warp's registers come in units of 256
        return warps * -(-registers * 32 // 256) * 256

    expand = _compile(
        "expand", "sm_90", False, world_size=2, row_block=MoeConfig(whole_row=True).row_block(7168), gather=True,
        bulk=True, scales=56, copiers=132, self_mode=1, waves=switches.EXPAND_WAVES,
    )  # fmt: skip
    beside = allocated(_expand_beside_push_registers(expand, tmp_path), 4)
    narrow = allocated(_registers(_fp8_push(4, True, True), tmp_path), 4)
    eight = _registers(_fp8_push(8, True, True), tmp_path)
    wide = allocated(_registers(_fp8_push(FP8_PUSH_WARPS, True, True), tmp_path), FP8_PUSH_WARPS)
    assert 3 * narrow + 2 * beside <= 65536 < 3 * narrow + 4 * beside, (narrow, beside)
    assert (
        _registers(_fp8_push(FP8_PUSH_WARPS, True, True), tmp_path)
        < eight
        < _registers(_fp8_push(4, True, True), tmp_path)
    )
    assert 2 * allocated(eight, 8) + 3 * beside <= 65536, (eight, beside)
    most = switches.MAX_OVERLAP_PER_SM * beside
    assert all(most + push <= 65536 for push in (narrow, allocated(eight, 8), wide)), (most, narrow, eight, wide)


def test_sm90_the_prequantized_push_only_moves_bytes_and_fits_beside_the_expand(tmp_path: Any) -> None:
    """``switches.FP8_PREQUANTIZE``: ``_quantize_kernel`` (at 4 warps, H = 7168) quantizes with the push's operations
    (its divisions, or with ``RECIPROCAL`` two per group a thread holds) and hardware casts, storing 16-byte vectors,
    and spills nothing; the push that loads its rows (``PREQUANT``) divides nothing, needs no shared memory (the
    quantizing fp8 push sends each scale through it, two barriers per destination), stores the rows as 16-byte vectors,
    and with the overlap's waves and own rows takes at most 64 registers at 4 warps: two of its programs fit on an SM
    beside the expand kernel's four."""
    from triton_dist.ops.moe.config import NORMAL_PROGRAMS_PER_SM

    need_real_library("sm_90")
    block = MoeConfig(whole_row=True).row_block(7168)
    for reciprocal in (False, True):
        quantize = _compile(
            "quantize", "sm_90", False, world_size=2, row_block=block, scales=56,
            extra={"RECIPROCAL": True} if reciprocal else None,
        )  # fmt: skip
        assert "cvt.rn.satfinite.e4m3x2.f32" in quantize and "st.global.v4.b32" in quantize
        assert _push_divisions(quantize) >= (8 if reciprocal else block // 128), _push_divisions(quantize)
        assert not reciprocal or _push_divisions(quantize) <= 8, _push_divisions(quantize)
        _registers(quantize, tmp_path)
    push = _compile(
        "push", "sm_90", False, world_size=2, row_block=block, scales=56, self_mode=3, waves=switches.EXPAND_WAVES,
        prequant=True,
    )  # fmt: skip
    assert _push_divisions(push) == 0 and "st.shared" not in push and "st.global.v4.b32" in push
    registers = _registers(push, tmp_path)
    assert registers <= 64, registers
    expand = _compile(
        "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, scales=56,
        copiers=switches.OVERLAP_COPIERS_PER_SM * 132, self_mode=1, waves=switches.EXPAND_WAVES,
    )  # fmt: skip
    per_sm = switches.EXPAND_OVERLAP_PER_SM + switches.OVERLAP_COPIERS_PER_SM
    beside = per_sm * 4 * -(-_expand_beside_push_registers(expand, tmp_path) * 32 // 256) * 256
    assert beside + NORMAL_PROGRAMS_PER_SM * 4 * -(-registers * 32 // 256) * 256 <= 65536


def test_fp8_push_options_have_their_defaults_and_reach_the_push(monkeypatch: pytest.MonkeyPatch) -> None:
    """``switches.FP8_RECIPROCAL`` and ``switches.FP8_NARROW_PUSH`` on by default, ``switches.FP8_PREQUANTIZE`` off;
    their setters return the previous setting and refuse a non-bool; the pipelined fp8 push is compiled with
    ``RECIPROCAL`` if set and at 4 warps with ``FP8_NARROW_PUSH`` (off: at ``FP8_PUSH_WARPS``), a launch plan per
    setting (switching back reuses the first); a bf16 push takes neither. ``FP8_PREQUANTIZE`` (normal mode, fp8): the
    quantize kernel writes the plan's staging buffers (a power of two of rows, grown with T) with the reciprocal if set,
    and the push, at 4 warps, loads them (``PREQUANT``, not ``RECIPROCAL``); its launch plans are keyed by the staging
    rows."""
    assert switches.FP8_RECIPROCAL is True and switches.FP8_NARROW_PUSH is True and switches.FP8_PREQUANTIZE is False
    with pytest.raises(MoeError, match="set_fp8_reciprocal: on must be True or False, got 1"):
        switches.set_fp8_reciprocal(1)  # type: ignore[arg-type]
    with pytest.raises(MoeError, match="set_fp8_narrow_push: on must be True or False, got 'on'"):
        switches.set_fp8_narrow_push("on")  # type: ignore[arg-type]
    with pytest.raises(MoeError, match="set_fp8_prequantize: on must be True or False, got None"):
        switches.set_fp8_prequantize(None)  # type: ignore[arg-type]
    compiled: list[tuple[bool, int]] = []
    named_of: dict[str, dict[str, Any]] = {}

    class Recorded:
        def launch(self, device: torch.device, *leading: Any) -> None:
            return None

    def compile_plan(kernel: Any, grid: Any, named: dict[str, Any], leading: int, **options: Any) -> Recorded:
        compiled.append((named.get("RECIPROCAL", False), options["num_warps"]))
        named_of[kernel.__name__] = named
        return Recorded()

    monkeypatch.setattr(moe_op, "compile_plan", compile_plan)
    monkeypatch.setattr(torch.cuda, "device", lambda device: _Nothing())
    meta = torch.device("meta")
    workspace = moe_op._Workspace(*(torch.zeros(1) for _ in range(5)))
    buffers = moe_op._Buffers(torch.zeros(2, 64, 8), torch.zeros(2, 64, 7), torch.zeros(2, 64, 8))
    plan = moe_op._Plan(("key",), "normal", 2, 8, 2, 64, torch.bfloat16, 0, 4, workspace, buffers)
    x = {"x_ptr": torch.empty(1, 64, dtype=torch.bfloat16, device=meta)}
    moe_op._launch(plan, "push", x, meta)
    assert compiled == [(False, 4)], "bf16"
    plan.fp8 = plan.pipelined = True
    wide = moe_op.FP8_PUSH_WARPS
    for reciprocal, narrow, want in ((False, False, (False, wide)), (True, False, (True, wide)),
                                     (True, True, (True, 4)), (False, True, (False, 4))):  # fmt: skip
        previous = switches.set_fp8_reciprocal(reciprocal), switches.set_fp8_narrow_push(narrow)
        try:
            compiled.clear()
            moe_op._launch(plan, "push", x, meta)
            assert compiled == [want], (reciprocal, narrow, compiled)
        finally:
            assert (switches.set_fp8_reciprocal(previous[0]), switches.set_fp8_narrow_push(previous[1])) == (
                reciprocal,
                narrow,
            )
    compiled.clear()
    moe_op._launch(plan, "push", x, meta)
    assert compiled == [], "the default's launch plan, kept"
    plan.hidden = 256  # two scales a row
    previous = switches.set_fp8_prequantize(True), switches.set_fp8_reciprocal(True)
    try:
        assert moe_op._prequantized(plan)
        staged = moe_op._staging(plan, 5, meta)
        assert staged[0].shape == (8, 256) and staged[0].dtype == moe_op.FP8_DTYPE and staged[1].shape == (8, 2)
        assert moe_op._staging(plan, 8, meta) is staged and moe_op._staging(plan, 9, meta)[0].shape == (16, 256)
        compiled.clear()
        moe_op._launch(plan, "quantize", {"x_ptr": x["x_ptr"], "T": 9}, meta)
        moe_op._launch(plan, "push", x, meta)
        assert compiled == [(True, 4), (False, 4)], compiled
        quantized, pushed = named_of["_quantize_kernel"], named_of["_push_kernel"]
        assert quantized["q_ptr"] is plan.staged[0] and quantized["scales_ptr"] is plan.staged[1]
        assert pushed["PREQUANT"] and pushed["pre_ptr"] is plan.staged[0] and pushed["pre_scales_ptr"] is plan.staged[1]
        moe_op._staging(plan, 17, meta)
        compiled.clear()
        moe_op._launch(plan, "push", x, meta)
        assert compiled == [(False, 4)] and named_of["_push_kernel"]["pre_ptr"] is plan.staged[0], "grown: compiled"
        plan.mode = "low_latency"
        assert not moe_op._prequantized(plan), "low-latency mode quantizes in the push"
    finally:
        switches.set_fp8_prequantize(previous[0])
        switches.set_fp8_reciprocal(previous[1])
