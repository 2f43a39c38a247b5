"""triton_dist.ops.ag_gemm without a GPU: its kernels compile for sm_90 (TMA path) and gfx942 (pointer fallback),
the custom op is registered with a fake implementation, bad operands raise named errors before anything runs,
and the tuning table / cost model choose configurations as documented."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re

import pytest
import torch
from dl_compile import TARGETS, assembly, compile_kernel, need_library

from triton_dist.ops import tuning
from triton_dist.ops.matmul import HOPPER_CANDIDATES
from triton_dist.ops.tuning import OverlapConfig

ag = importlib.import_module("triton_dist.ops.ag_gemm")

GEMM_INTS = {"M_LOCAL": "i32", "N": "i32", "K": "i32", "chunk_tiles": "i32", "flags_per_chunk": "i32"}
TMA_SIGNATURE = {
    "a_desc": "tensordesc<bf16[128,64]>",
    "recv_desc": "tensordesc<bf16[128,64]>",
    "b_desc": "tensordesc<bf16[64,256]>",
    "c_desc": "tensordesc<bf16[128,128]>",
    "flags_ptr": "*i32",
    "epoch_ptr": "*i32",
    **GEMM_INTS,
}
"""The TMA kernel's arguments at 128x256x64 tiles (the compile tests here and in test_call_free_checks.py)."""


def test_tma_kernel_waits_with_acquire_and_fences_before_tma_loads() -> None:
    need_library("sm_90")
    signature = TMA_SIGNATURE
    for flatten in (False, True):
        constexprs = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_N=2, FLATTEN_PEERS=flatten)
        ptx = assembly(compile_kernel(ag._ag_gemm_tma_kernel, signature, "sm_90", constexprs, num_warps=8), "sm_90")
        assert "wgmma.mma_async" in ptx
        assert "ld.acquire.sys" in ptx, "the peer rows are read after an acquire of their chunk flag"
        assert "fence.proxy.async.global" in ptx, "TMA (async proxy) reads are fenced after the generic acquire"
        assert "cp.async.bulk.tensor" in ptx


def _defining_region(lines: list[str], value: str) -> list[str]:
    """The lines of the ``scf.if`` that defines ``value`` (``%13`` of ``%13#1``), up to its ``} else {``."""
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(value)}(:\d+)? = scf\.if", line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(" " * indent + "}"))
    return lines[start:end]


def test_flattened_peer_loop_loads_each_tile_only_after_its_wait() -> None:
    """With FLATTEN_PEERS the pipeliner issues the next tiles' TMA loads ahead of time; each load of the receive
    buffer must still take its row from the ``scf.if`` that waits for that tile's flags (the token's data
    dependence), never from a value computed before the wait."""
    need_library("sm_90")
    signature = TMA_SIGNATURE
    constexprs = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_N=2, FLATTEN_PEERS=True)
    ttgir = compile_kernel(ag._ag_gemm_tma_kernel, signature, "sm_90", constexprs, num_warps=8).asm["ttgir"]
    lines = ttgir.splitlines()
    loads = [re.search(r"async_tma_copy_global_to_local %recv_desc\[(%[\w]+)#\d+", line) for line in lines]
    rows = [match.group(1) for match in loads if match]
    assert len(rows) >= 3, "the flattened loop is pipelined (prologue copies and the loop's own)"
    for row in rows:
        region = _defining_region(lines, row)
        assert any("__triton_dist_wait_sys_acquire" in line for line in region), (row, region)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_pointer_kernel_and_producers_compile(target: str) -> None:
    need_library(target)
    pointer_signature = {
        **{name: "*fp16" for name in ("a_ptr", "recv_ptr", "b_ptr", "c_ptr")},
        "flags_ptr": "*i32",
        "epoch_ptr": "*i32",
        **GEMM_INTS,
    }
    constexprs = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8)
    text = assembly(compile_kernel(ag._ag_gemm_ptr_kernel, pointer_signature, target, constexprs, num_warps=8), target)
    assert ("mfma" in text) if target == "gfx942" else ("mma" in text)
    push_signature = {
        "a_ptr": "*bf16",
        "recv_ptr": "*bf16",
        "flags_ptr": "*i32",
        "epoch_ptr": "*i32",
        **{name: "i32" for name in ("M_LOCAL", "K", "CHUNK_ROWS", "num_chunks")},
    }
    compile_kernel(ag._push_kernel, push_signature, target, {"BLOCK": ag.PUSH_BLOCK}, num_warps=16)
    compile_kernel(ag._begin_kernel, {"epoch_ptr": "*i32", "barrier_ptr": "*i32"}, target, {}, num_warps=1)


def test_custom_op_is_registered() -> None:
    assert hasattr(torch.ops.triton_dist, "ag_gemm")
    schema = str(torch.ops.triton_dist.ag_gemm.default._schema)
    assert "Tensor a" in schema and "bool return_gathered" in schema


@pytest.mark.parametrize(
    ("a", "b", "words"),
    [
        (torch.zeros(8, 8, dtype=torch.bfloat16).t(), torch.zeros(8, 8, dtype=torch.bfloat16), "contiguous"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.float16), "same dtype"),
        (torch.zeros(4, 8, dtype=torch.float32), torch.zeros(8, 8, dtype=torch.float32), "bfloat16 or float16"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(16, 8, dtype=torch.bfloat16), "must equal"),
    ],
)
def test_bad_operands_raise_named_errors(a: torch.Tensor, b: torch.Tensor, words: str) -> None:
    """The layout checks ag_gemm makes once the operands are on a GPU (a CPU-only machine reaches them directly)."""
    from triton_dist.ops.matmul import check_operands

    with pytest.raises((TypeError, ValueError), match=words):
        check_operands(a, b, "ag_gemm", tma_rows=False)
    with pytest.raises(ag.AgGemmError, match="on a GPU"):  # the device comes first
        ag.ag_gemm(a, b)


def test_errors_are_one_family_and_name_the_dtype() -> None:
    from triton_dist.ops.common.errors import OpInputError
    from triton_dist.ops.matmul import check_operands

    assert issubclass(ag.AgGemmError, OpInputError) and issubclass(OpInputError, ValueError)
    with pytest.raises(TypeError, match="bfloat16 or float16"):  # the dtype check behind the device check
        check_operands(torch.zeros(4, 8), torch.zeros(8, 8), "ag_gemm")
    with pytest.raises(ag.AgGemmError, match="must be a torch.Tensor"):
        ag.ag_gemm([[1.0]], torch.zeros(8, 8))


def test_rows_that_cannot_feed_tma_take_the_pointer_kernel() -> None:
    tile = HOPPER_CANDIDATES[0]
    aligned_a, aligned_b = torch.zeros(256, 1024, dtype=torch.bfloat16), torch.zeros(1024, 512, dtype=torch.bfloat16)
    assert ag.tma_fits(tile, aligned_a, aligned_b)
    assert not ag.tma_fits(tile, torch.zeros(256, 1003, dtype=torch.bfloat16), torch.zeros(1003, 512)), "K rows"
    assert not ag.tma_fits(tile, aligned_a, torch.zeros(1024, 1001, dtype=torch.bfloat16)), "N rows"
    assert not ag.tma_fits(tile, torch.zeros(200, 1024, dtype=torch.bfloat16), aligned_b), "shard rows vs BLOCK_M"
    odd = torch.zeros(256 * 1024 + 1, dtype=torch.bfloat16)[1:].view(256, 1024)
    assert not ag.tma_fits(tile, odd, aligned_b), "a view starting off a 16-byte boundary"
    assert not ag.tma_fits(dataclasses.replace(tile, use_tma=False), aligned_a, aligned_b)


def test_tuned_table_wins_over_cost_model(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path))
    config = OverlapConfig(matmul=HOPPER_CANDIDATES[2], chunk_tiles=8, producer="sm", push_ctas=32)
    entry = tuning.key("ag_gemm", 4096, 1024, 2048, torch.float16, 2, "GPU X")
    tuning.store(tuning.cache_path(), entry, config, {"ms": 1.0})
    assert json.loads(tuning.cache_path().read_text())[entry]["config"]["chunk_tiles"] == 8
    chosen, source = tuning.choose("ag_gemm", 4096, 1024, 2048, torch.float16, 2, 2, "GPU X")
    assert (chosen, source) == (config, "tuned")
    chosen, source = tuning.choose("ag_gemm", 4096, 1024, 2048, torch.float16, 2, 2, "GPU Y")
    assert source == "cost model"


def test_cost_model_picks_fusion_only_where_it_can_win() -> None:
    big, estimate = tuning.cost_model("ag_gemm", 8192, 4096, 12288, 2, 2)
    assert big.backend == "fused" and estimate["fused_ms"] < estimate["baseline_ms"]
    small, _ = tuning.cost_model("ag_gemm", 128, 256, 256, 2, 2)  # 64 rows per rank: below one tile
    assert small.backend == "nccl"
    single, _ = tuning.cost_model("ag_gemm", 8192, 4096, 12288, 2, 1)
    assert single.backend == "nccl"
    # Tiny problems: the fused op's fixed costs (barrier, flag kernels) exceed what overlap can save.
    tiny, estimate = tuning.cost_model("ag_gemm", 1024, 256, 256, 2, 2)
    assert tiny.backend == "nccl", estimate
    # Communication-bound: the copy-engine push of one shard beats NCCL's all-gather, so fusion still wins.
    comm_bound, estimate = tuning.cost_model("ag_gemm", 65536, 16, 8192, 2, 2)
    assert comm_bound.backend == "fused" and estimate["fused_ms"] < estimate["baseline_ms"]


def test_overlap_config_validates() -> None:
    with pytest.raises(ValueError, match="producer"):
        OverlapConfig(producer="dma")
    with pytest.raises(ValueError, match="backend"):
        OverlapConfig(backend="nvshmem")
    config = OverlapConfig(producer="sm", push_ctas=8)
    assert OverlapConfig.from_dict(json.loads(json.dumps(config.as_dict()))) == config
    flat = OverlapConfig(flatten_peers=True)
    assert OverlapConfig.from_dict(json.loads(json.dumps(flat.as_dict()))) == flat
    assert flat.short().endswith("/flat") and not config.short().endswith("/flat")
    older = {key: value for key, value in flat.as_dict().items() if key != "flatten_peers"}
    assert OverlapConfig.from_dict(older).flatten_peers is False, "tables written before the field keep loading"


def test_cublas_backend_config_validates_and_round_trips() -> None:
    cublas = OverlapConfig(backend="cublas")
    assert cublas.short() == "cublas-ce" and "cublas" in tuning.BACKENDS
    assert OverlapConfig.from_dict(json.loads(json.dumps(cublas.as_dict()))) == cublas
    with pytest.raises(ValueError, match="copy engine"):
        OverlapConfig(backend="cublas", producer="sm")


def test_wait_shard_kernel_compiles_to_an_acquire_of_the_flag() -> None:
    need_library("sm_90")
    compiled = compile_kernel(ag._wait_shard_kernel, {"flags_ptr": "*i32", "epoch_ptr": "*i32", "flag_index": "i32"},
                              "sm_90", {}, num_warps=1)  # fmt: skip
    assert "ld.acquire.sys" in assembly(compiled, "sm_90"), "the shard's rows are read after an acquire of its flag"


def test_parity_wait_kernel_resets_its_flag_only_after_the_acquire_and_a_barrier() -> None:
    """The ``"memop_parity"`` wait: the flag's acquire, then a barrier of the program's threads, then the store of 0
    to that same flag (a thread still spinning must never see its own program's reset; the kernel's own
    ``tl.debug_barrier`` makes sure of the barrier whatever ``dl.wait`` ends with)."""
    need_library("sm_90")
    kernels = importlib.import_module("triton_dist.ops.ag_gemm.kernels")
    signature = {"flag_index": "i32", "flags_ptr": "*i32"}
    text = assembly(compile_kernel(kernels._wait_flag_then_reset_kernel, signature, "sm_90", {}, num_warps=1), "sm_90")
    acquire = re.search(r"ld\.acquire\.sys\.global\.b32\s+%r\d+, \[(%rd\d+)\]", text)
    assert acquire is not None, "the flag is awaited with an acquire"
    barrier = text.find("bar.sync", acquire.end())
    assert barrier > 0, "a barrier after the wait"
    reset = re.search(rf"st\.global\.b32\s+\[\s*{acquire.group(1)}(\s*\+\s*0)?\s*\]", text[barrier:])
    assert reset is not None, f"the reset stores to the awaited flag after the barrier:\n{text[barrier:][:600]}"
