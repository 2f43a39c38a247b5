"""triton_dist.ops.matmul's skinny GEMM (``skinny_matmul``, A [M <= 64, K] @ B [K, N]) without a GPU: its kernels
against torch in Triton's interpreter (``TRITON_INTERPRET=1``, a process of its own) at M = 1, 8, 64 (bf16, one
case fp16) and ragged N and K, with and without split-K, both the TMA-descriptor and the pointer kernel; their sm_90
compilation at the configurations the cost model picks for the decode shapes (wgmma and TMA, no spills); the cost
model's choices; and the operand errors."""

from __future__ import annotations

import importlib
import json
import re
import sys

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_library, ptxas_info

skinny_config = importlib.import_module("triton_dist.ops.matmul.skinny_config")
skinny_kernels = importlib.import_module("triton_dist.ops.matmul.skinny_kernels")

CASES = [
    # (M, K, N, config fields or None for the default under the interpreter; bf16 unless the fields name a dtype)
    (1, 200, 72, dict(block_m=16, block_n=32, block_k=32, split_k=1, use_tma=False)),
    (1, 200, 72, dict(block_m=64, block_n=32, block_k=32, split_k=3, use_tma=True)),
    (8, 136, 40, dict(block_m=16, block_n=32, block_k=16, split_k=4, use_tma=False)),
    (8, 136, 40, dict(block_m=64, block_n=16, block_k=32, split_k=1, use_tma=True)),
    (64, 264, 56, dict(block_m=64, block_n=32, block_k=32, split_k=5, use_tma=True)),
    (64, 264, 56, dict(block_m=64, block_n=32, block_k=64, split_k=2, use_tma=False)),
    (5, 96, 24, None),
    (3, 72, 48, dict(block_m=64, block_n=16, block_k=16, split_k=2, use_tma=True, dtype="float16")),
]
"""Ragged N and K (not multiples of the blocks), splits that divide K's blocks unevenly (K = 264 in 32-blocks: 9
blocks, 5 splits of 2 and the last of 1), a split-K count above the blocks' (200 in 32-blocks: 7 blocks, 3 splits)."""


def _interpreted(request: dict) -> list[dict]:
    """The cases under the interpreter: each result against torch's fp32 product, whether two calls agree bit for
    bit, whether the counters are back at 0, and whether C's row padding (out is a view of wider rows) was left."""
    import dataclasses

    from triton_dist.ops.matmul.skinny_config import SkinnyConfig
    from triton_dist.ops.matmul.skinny_op import _workspaces, skinny_matmul

    gen = torch.Generator().manual_seed(request["seed"])
    results = []
    for m, k, n, fields in request["cases"]:
        fields = dict(fields or {})
        dtype = getattr(torch, fields.pop("dtype", "bfloat16"))
        config = dataclasses.replace(SkinnyConfig(num_stages=1), **fields) if fields else None
        a = torch.randn(m, k, generator=gen).to(dtype)
        b = torch.randn(k, n, generator=gen).to(dtype)
        wide = torch.full((m, n + 8), float("nan"), dtype=dtype)
        got = skinny_matmul(a, b, out=wide[:, :n], config=config)
        again = skinny_matmul(a, b, config=config)
        want = a.float() @ b.float()
        counters = _workspaces[torch.device("cpu")][1]
        results.append(
            {
                "error": float((got.float() - want).abs().max() / want.abs().max()),
                "repeatable": bool(torch.equal(got, again)),
                "in_place": got.data_ptr() == wide.data_ptr(),
                "padding_untouched": bool(wide[:, n:].isnan().all()),
                "counters_zero": int(counters.abs().sum()) == 0,
                "dtype": str(again.dtype),
            }
        )
    return results


def test_the_kernels_match_torch_in_the_interpreter() -> None:
    from dl_compile import run_in_interpreter

    results = run_in_interpreter(__file__, {"seed": 64, "cases": CASES})
    for case, got in zip(CASES, results, strict=True):
        assert got["error"] < 2**-7, f"{case}: {got}"  # a bf16 rounding of the output (the interpreter truncates)
        assert got["repeatable"] and got["in_place"] and got["padding_untouched"], f"{case}: {got}"
        assert got["counters_zero"], f"{case}: the split-K counters were not reset: {got}"
        want_dtype = f"torch.{(case[3] or {}).get('dtype', 'bfloat16')}"
        assert got["dtype"] == want_dtype, f"{case}: {got}"


DECODE_SHAPES = {
    "Llama-3-8B": {"qkv": (4096, 3072), "gate_up": (4096, 14336), "down": (7168, 4096), "o": (2048, 4096)},
    "Qwen3-32B": {"qkv": (5120, 5120), "gate_up": (5120, 25600), "down": (12800, 5120), "o": (4096, 5120)},
}
"""Per-rank (K, N) of each decode GEMM at world size 2."""


def _picked() -> list[skinny_config.SkinnyConfig]:
    picked = {
        skinny_config.skinny_config(m, n, k, 132)
        for shapes in DECODE_SHAPES.values()
        for k, n in shapes.values()
        for m in (1, 8, 64)
    }
    return sorted(picked, key=lambda c: c.short())


def test_the_cost_model_splits_narrow_products_and_fills_the_sms() -> None:
    for m in (1, 8, 64):
        for shapes in DECODE_SHAPES.values():
            for k, n in shapes.values():
                config = skinny_config.skinny_config(m, n, k, 132)
                per_split, splits = skinny_config.split_blocks(k, config)
                programs = -(-n // config.block_n) * splits
                assert config.split_k == splits and config.block_m == 64 and config.use_tma, config
                assert (splits - 1) * per_split < -(-k // config.block_k) <= splits * per_split, config
                assert 64 <= programs <= 132, f"{m}, {k}, {n}: {config} runs {programs} programs"
    # Llama-3-8B's QKV at W = 2 has 24 column tiles of 128: alone they would leave most of the 132 SMs idle
    assert skinny_config.skinny_config(64, 3072, 4096, 132).split_k > 1
    # a wide product needs no split
    assert skinny_config.skinny_config(64, 25600, 5120, 132).split_k == 1
    # the pointer kernel where there is no TMA
    assert not skinny_config.skinny_config(8, 4096, 4096, 104, use_tma=False).use_tma
    with pytest.raises(ValueError, match="M must be 1..64"):
        skinny_config.skinny_config(65, 4096, 4096, 132)


def test_the_layers_give_the_skinny_gemm_what_it_takes() -> None:
    from triton_dist.layers.attention import SKINNY_MAX_ROWS

    assert SKINNY_MAX_ROWS == skinny_config.MAX_ROWS


def test_split_blocks_leaves_no_split_empty() -> None:
    config = skinny_config.SkinnyConfig(block_k=128, split_k=5)
    assert skinny_config.split_blocks(4096, config) == (7, 5)  # 32 blocks: 7, 7, 7, 7, 4
    assert skinny_config.split_blocks(300, config) == (1, 3)  # 3 blocks: at most 3 splits
    assert skinny_config.split_blocks(4096, skinny_config.SkinnyConfig(block_k=128, split_k=6)) == (6, 6)


def test_config_round_trips_through_dict() -> None:
    config = skinny_config.SkinnyConfig(64, 256, 64, 3, 5, 8, True)
    assert skinny_config.SkinnyConfig.from_dict(config.as_dict()) == config
    with pytest.raises(ValueError, match="block_m must be 16, 32 or 64"):
        skinny_config.SkinnyConfig.from_dict({**config.as_dict(), "block_m": 128})


def _signature(config: skinny_config.SkinnyConfig) -> dict[str, str]:
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    ints = {name: "i32" for name in ("M", "N", "K")}
    if config.use_tma:
        head = {"a_desc": f"tensordesc<bf16[{bm},{bk}]>", "b_desc": f"tensordesc<bf16[{bk},{bn}]>"}
        tail = {"stride_cm": "i32", "blocks_per_split": "i32"}
    else:
        head = {"a_ptr": "*bf16", "b_ptr": "*bf16"}
        tail = {"stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32", "blocks_per_split": "i32"}
    return {**head, "c_ptr": "*bf16", "partial_ptr": "*fp32", "counter_ptr": "*i32", **ints, **tail}


def _compile(config: skinny_config.SkinnyConfig):  # noqa: ANN202 (triton's CompiledKernel)
    from triton_dist.ops.matmul.skinny_op import reduce_chunk

    kernel = skinny_kernels._skinny_tma_kernel if config.use_tma else skinny_kernels._skinny_ptr_kernel
    constexprs = dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=config.split_k,
        REDUCE_CHUNK=reduce_chunk(config),
        WIDEN=False,
    )
    return compile_kernel(
        kernel, _signature(config), "sm_90", constexprs, num_warps=config.num_warps, num_stages=config.num_stages
    )


@pytest.mark.parametrize("config", _picked(), ids=lambda c: c.short())
def test_the_picked_configs_compile_for_sm90_to_pipelined_wgmma_without_spills(
    config: skinny_config.SkinnyConfig, tmp_path: object
) -> None:
    """Every configuration the cost model picks for the decode shapes: TMA loads into ``num_stages`` buffers,
    asynchronous wgmma, no spills (ptxas), and with split-K the arrival atomic and the reset."""
    need_library("sm_90")
    compiled = _compile(config)
    ptx = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    stage = config.stage_bytes()
    assert compiled.metadata.shared >= config.num_stages * stage - stage, "fewer pipeline buffers than asked"
    info = ptxas_info(ptx, tmp_path)
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", info)]
    assert spills and max(spills) == 0, info
    assert ("atom.global.gpu.acq_rel.add" in ptx) == (config.split_k > 1), config
    assert ("atom.global.gpu.relaxed.exch" in ptx) == (config.split_k > 1), config  # the counter's reset
    print(config.short(), re.findall(r"Used \d+ registers", info), f"shared {compiled.metadata.shared}")


@pytest.mark.parametrize(
    "config",
    [
        skinny_config.SkinnyConfig(16, 128, 128, 4, 4, 4, True),
        skinny_config.SkinnyConfig(64, 128, 64, 1, 3, 8, False),
        skinny_config.SkinnyConfig(64, 64, 128, 3, 3, 8, False),
    ],
    ids=lambda c: c.short(),
)
def test_small_tiles_and_the_pointer_kernel_compile_to_mma(config: skinny_config.SkinnyConfig, tmp_path: object):
    """``block_m`` 16 (M <= 16) compiles to ``mma.sync`` on sm_90 (Triton 3.6 gives wgmma only 64-row tiles); the
    pointer kernel (targets without TMA) to wgmma with masked loads. Neither spills."""
    need_library("sm_90")
    ptx = assembly(_compile(config), "sm_90")
    assert ("mma.sync" in ptx) if config.block_m == 16 else ("wgmma.mma_async" in ptx)
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", ptxas_info(ptx, tmp_path))]
    assert spills and max(spills) == 0


@pytest.mark.parametrize(
    ("a", "b", "error", "words"),
    [
        (torch.zeros(4, 8, dtype=torch.float32), torch.zeros(8, 8, dtype=torch.float32), TypeError, "bfloat16"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.float16), TypeError, "one dtype"),
        (torch.zeros(65, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16), ValueError, "1..64 rows"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(16, 8, dtype=torch.bfloat16), ValueError, "a.shape"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16).t(), ValueError, "row-maj"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16), ValueError, "GPU"),
    ],
)
def test_bad_operands_raise_before_launch(a: torch.Tensor, b: torch.Tensor, error: type, words: str) -> None:
    from triton_dist.ops.matmul.skinny_op import skinny_matmul

    with pytest.raises(error, match=re.escape(words)):
        skinny_matmul(a, b)


if __name__ == "__main__":
    print(json.dumps(_interpreted(json.loads(sys.argv[1]))))
