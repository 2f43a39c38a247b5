"""triton_dist.ops.gemm_ar without GPUs: the fused kernel compiles for sm_90 (tensor cores, pipelined loads, the flag
protocol, vector pushes) and gfx942, configs are checked, bad input raises before any launch, and the custom op
traces with fake tensors; the opt-in split-K kernel compiles for both targets within shared memory, without
spills in its loops on sm_90, with its flag protocol, and its configs, geometry and grid are checked (its helpers
run in the interpreter in test_ops_decode_gemm_ar_emulation.py)."""

from __future__ import annotations

import importlib
import re
from dataclasses import replace

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_library
from test_ops_decode_flash_decode import assert_no_local_memory_in_loops

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops.common import gpu
from triton_dist.ops.gemm_ar import GemmArError, gemm_ar
from triton_dist.ops.gemm_ar.config import (
    CUBLAS_ABOVE_M,
    CUBLAS_SPLIT_K_MAX_K,
    SPLIT_K_MAX_ELEMS,
    SPLIT_K_MAX_ITEMS,
    GemmARConfig,
    default_config,
    split_k_geometry,
    split_k_grid,
    tile_config,
)
from triton_dist.ops.gemm_ar.kernels import _gemm_ar_kernel, _gemm_ar_split_k_kernel
from triton_dist.ops.gemm_ar.op import CublasPlan, check_inputs, split_k_launch_args

gar_config = importlib.import_module("triton_dist.ops.gemm_ar.config")
gar_kernels = importlib.import_module("triton_dist.ops.gemm_ar.kernels")
gar_op = importlib.import_module("triton_dist.ops.gemm_ar.op")

SIGNATURE = {
    "a_ptr": "*bf16",
    "b_ptr": "*bf16",
    "out_ptr": "*bf16",
    "data_ptr": "*bf16",
    "flags_ptr": "*i32",
    "epochs_ptr": "*i32",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "stride_am": "i32",
    "stride_bk": "i32",
    "stride_om": "i32",
    "flags_stride": "i32",
}
ALIGNED = ("a_ptr", "b_ptr", "out_ptr", "data_ptr", "N", "K", "stride_am", "stride_bk", "stride_om")


SHARED_LIMIT = {"sm_90": 232448, "gfx942": 65536}
"""Bytes of shared memory / LDS one program may use (Triton refuses a launch past it)."""


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize("m", [1, 32, 64, 128, 256])
def test_kernel_compiles(m, target):
    need_library(target)
    config = tile_config(m, 8192, 4096, "cuda" if target == "sm_90" else "hip")
    constexprs = {
        "REGION": 2 * 2 * 128 * 64,
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": True,
        "WORLD": 2,
    }
    compiled = compile_kernel(
        _gemm_ar_kernel,
        SIGNATURE,
        target,
        constexprs,
        ALIGNED,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    assert compiled.metadata.shared <= SHARED_LIMIT[target]  # the default tile launches on that target
    asm = assembly(compiled, target)
    if target == "sm_90":
        assert "mma" in asm  # tensor cores (mma.sync or wgmma)
        assert "cp.async" in asm  # software-pipelined operand loads
        assert "ld.acquire.sys" in asm  # dl.wait
        assert re.search(r"st\.release\.sys|atom\.global\.sys\.release|fence\.(acq_rel|sc)\.sys", asm)  # notify
    else:
        assert "v_mfma" in asm


def test_exchange_off_compiles_without_flags():
    need_library("sm_90")
    constexprs = {"REGION": 16384, "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "EXCHANGE": False, "WORLD": 2}
    asm = assembly(compile_kernel(_gemm_ar_kernel, SIGNATURE, "sm_90", constexprs, ALIGNED), "sm_90")
    assert "ld.acquire.sys" not in asm


@pytest.mark.parametrize("m", [1, 8, 16, 17, 32, 64, 65, 128, 256])
def test_tile_config_fits(m):
    config = tile_config(m, 8192, 4096)
    assert config.block_m >= min(m, 16) and config.block_m <= 128
    assert config.block_m * config.block_n <= 128 * 64


@pytest.mark.parametrize(
    ("args", "text"),
    [((15, 64, 64), "block_m must be a power of two"), ((16, 48, 64), "block_n"), ((128, 128, 64), "<= 8192")],
)
def test_bad_config(args, text):
    with pytest.raises(ValueError, match=text):
        GemmARConfig(*args)


def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(*shape, dtype=dtype)


@pytest.mark.parametrize(
    ("a", "b", "error", "text"),
    [
        (_t(4, 64), _t(32, 128), ValueError, "must equal b.shape"),
        (_t(4, 64, dtype=torch.float32), _t(64, 128, dtype=torch.float32), TypeError, "bfloat16 or float16"),
        (_t(4, 64), _t(64, 128, dtype=torch.float16), TypeError, "same dtype"),
        (_t(4, 64), _t(128, 64).t(), ValueError, "row-major"),
        (_t(1, 4, 64), _t(64, 128), ValueError, "2-D"),
        ("a", _t(64, 128), TypeError, "must be a torch.Tensor"),
    ],
)
def test_bad_input_raises_before_launch(a, b, error, text):
    """Each problem raises GemmArError (the op's family), also the TypeError or ValueError it always was."""
    with pytest.raises(GemmArError, match=text) as raised:
        check_inputs(a, b)
    assert isinstance(raised.value, error)
    with pytest.raises(GemmArError, match=text):
        gemm_ar(a, b)


def test_custom_op_traces_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda a, b: gemm_ar(a, b).float().sum(), tracing_mode="fake")(_t(8, 64), _t(64, 96))
    assert any(node.target == torch.ops.triton_dist.gemm_ar.default for node in graph.graph.nodes)
    # make_fx traces a function with exactly the parameters it is given: gemm_ar's keyword-only norm epilogue
    # (residual=, norm_weight=, eps=) needs the two-operand call wrapped.
    out = make_fx(lambda a, b: gemm_ar(a, b), tracing_mode="fake")(_t(3, 64), _t(64, 96))
    placeholders = [n for n in out.graph.nodes if n.op == "output"]
    assert placeholders, "graph has an output"


SPLIT_K_SIGNATURE = {
    **{name: kind for name, kind in SIGNATURE.items() if name not in ("data_ptr", "epochs_ptr", "flags_stride")},
    "data_ptr": "*fp32",
    "state_ptr": "*i64",  # the call state (ops/common/call_epoch.py)
    "chunk": "i32",
    "splits": "i32",
    "flags_stride": "i32",
}
SPLIT_K_ALIGNED = (*ALIGNED, "chunk")
SPLIT_K_CONFIGS = [  # the candidates of bench/gemm_ar.py and bench/gemm_ar_tiles.py's split-K sweep span these
    GemmARConfig(16, 64, 128, 4, 4, split_k=4),
    GemmARConfig(32, 64, 128, 4, 4, split_k=2),
    GemmARConfig(32, 64, 128, 4, 5, split_k=4),
    GemmARConfig(64, 64, 128, 4, 4, split_k=2),
    GemmARConfig(32, 64, 128, 4, 3, split_k=8, exchange=False),
    GemmARConfig(32, 128, 64, 4, 5, split_k=4, exchange=False),  # a wide tile: longer contiguous runs of B's rows
]


def compile_split_k(config: GemmARConfig, target: str, world: int = 2):  # noqa: ANN201
    stages = config.num_stages if target == "sm_90" else min(config.num_stages, 3)
    constexprs = {
        "REGION": world * SPLIT_K_MAX_ELEMS,
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": config.exchange,
        "WORLD": world,
    }
    return compile_kernel(
        _gemm_ar_split_k_kernel,
        SPLIT_K_SIGNATURE,
        target,
        constexprs,
        SPLIT_K_ALIGNED,
        num_warps=config.num_warps,
        num_stages=stages,
    )


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize("config", SPLIT_K_CONFIGS, ids=str)
def test_split_k_kernel_compiles_with_its_flag_protocol(config, target):
    need_library(target)
    compiled = compile_split_k(config, target)
    assert compiled.metadata.shared <= SHARED_LIMIT[target]
    asm = assembly(compiled, target)
    if target == "sm_90":
        assert "mma" in asm and "cp.async" in asm
        scope = "sys" if config.exchange else "gpu"  # other ranks' partials, or only this GPU's programs'
        assert f"ld.acquire.{scope}" in asm  # the phase-2 wait
        assert re.search(rf"st\.release\.{scope}|atom\.global\.{scope}\.release|fence\.(acq_rel|sc)\.{scope}", asm)
        assert "atom.global.gpu.relaxed.add.u64" in asm  # the arrival (ops/common/call_epoch.py)
        assert "acq_rel.add" not in asm, "no departure atomic: the last program to arrive hands the epoch over"
        if not config.exchange:
            assert "ld.acquire.sys" not in asm
    else:
        assert "v_mfma" in asm


@pytest.mark.parametrize("config", SPLIT_K_CONFIGS[:4], ids=str)
def test_split_k_kernel_loops_do_not_spill_on_sm90(config, tmp_path):
    need_library("sm_90")
    assert_no_local_memory_in_loops(compile_split_k(config, "sm_90"), tmp_path)


@pytest.mark.parametrize("split_k", [0, 17, 32, -2, 2.0])
def test_bad_split_k(split_k):
    with pytest.raises(ValueError, match="split_k must be an integer in"):
        GemmARConfig(32, 64, 128, split_k=split_k)


def test_tile_config_splits_k_only_where_64_column_tiles_leave_sms_idle():
    for m in (1, 16, 32, 64, 128, 256):
        for n in (5120, 8192):
            assert tile_config(m, n, 4096).split_k == 1, "no SM count, no split"
            assert tile_config(m, n, 4096, "hip", sms=304).split_k == 1, "not measured on AMD"
            assert tile_config(m, 8192, 4096, sms=132).split_k == 1, "128 tiles of 64 columns fill 132 SMs"
            if m > 32:
                assert tile_config(m, n, 4096, sms=132).split_k == 1
    # Qwen3-32B o_proj / down_proj at 2 ranks: 80 tiles of 64 columns on 132 SMs -> 40 of 128, in 3 pieces.
    for m, block_m in ((1, 16), (16, 16), (32, 32)):
        for k in (4096, 12800):
            config = tile_config(m, 5120, k, sms=132)
            assert (config.block_m, config.block_n, config.block_k, config.split_k) == (block_m, 128, 128, 3)
            split_k_geometry(m, 5120, k, config)  # fits the split-K buffers
    assert tile_config(8, 5120, 512, sms=132).split_k == 2, "each piece keeps two 128-deep blocks"
    assert tile_config(8, 5120, 200, sms=132).split_k == 1
    assert tile_config(8, 2048, 4096, sms=132).split_k == 3, "never more than 3 pieces"


@pytest.mark.parametrize("m", [1, 32, 64, 65, 128, 256])
def test_default_config_takes_cublas_above_its_row_bound_on_nvidia_only(m):
    for n, k in ((5120, 4096), (8192, 14336)):
        tile = tile_config(m, n, k, sms=132)
        chosen = default_config(m, n, k, sms=132)
        short_split = 16 < m <= 32 and tile.split_k > 1 and k <= CUBLAS_SPLIT_K_MAX_K
        if m > CUBLAS_ABOVE_M or short_split:
            assert chosen == GemmARConfig(**{**tile.__dict__, "gemm": "cublas", "split_k": 1})
        else:
            assert chosen == tile and chosen.gemm == "triton"
        assert default_config(m, n, k, "hip", sms=304) == tile_config(m, n, k, "hip", sms=304), "AMD: fused"
    # The measured cases: Qwen3-32B o_proj / down_proj at 2 ranks, M = 32 (both split by the tile).
    assert default_config(32, 5120, 4096, sms=132).gemm == "cublas"
    assert default_config(32, 5120, 12800, sms=132).gemm == "triton"
    assert default_config(8, 5120, 4096, sms=132).gemm == "triton", "16-row split tiles stay fused"


def test_bad_gemm_choice():
    with pytest.raises(ValueError, match="gemm must be one of"):
        GemmARConfig(32, 64, 128, gemm="rocblas")
    with pytest.raises(ValueError, match="does not split K"):
        GemmARConfig(32, 64, 128, split_k=2, gemm="cublas")


@pytest.mark.parametrize("exchange", [True, False])
@pytest.mark.parametrize("row_stride", [48, 64])
def test_cublas_plan_multiplies_into_out_then_all_reduces_in_place(monkeypatch, exchange, row_stride):
    """The cuBLAS path (CPU tensors, the all-reduce replaced by a stand-in that doubles, as two equal ranks would):
    the product lands in ``out`` (through a contiguous buffer when out's rows are padded), the all-reduce runs in
    place on it, once, and only with the exchange on."""
    calls = []

    def fake_all_reduce(x):
        assert x.is_contiguous()
        calls.append(x.shape)
        return x.mul_(2)

    monkeypatch.setattr(gar_op, "all_reduce_in_place", fake_all_reduce)
    a = torch.randn(5, 40)
    b = torch.randn(40, 48)
    storage = torch.full((5, row_stride), float("nan"))
    out = storage[:, :48]
    CublasPlan(exchange=exchange).launch(torch.device("cpu"), a, b, out)
    want = a @ b * (2 if exchange else 1)
    torch.testing.assert_close(out, want)
    assert calls == ([torch.Size([5, 48])] if exchange else [])
    if row_stride > 48:
        assert torch.isnan(storage[:, 48:]).all(), "the padding is not written"


@pytest.mark.parametrize(("items", "sms", "want"), [(80, 132, 80), (320, 132, 132), (1, 132, 1), (1000, 7, 7)])
def test_split_k_grid_is_capped_at_the_sm_count(items, sms, want):
    assert split_k_grid(items, sms) == want


def test_split_k_launch_args_cap_the_grid():
    a, b, out = _t(32, 4096), _t(4096, 5120), _t(32, 5120)
    (grid, _, _), named = split_k_launch_args(a, b, out, GemmARConfig(32, 64, 128, split_k=4), 2, 132, _FakeWorkspace())
    assert grid == 132 and named["splits"] == 4 and named["chunk"] == 1024 and named["REGION"] == 3 * SPLIT_K_MAX_ELEMS
    (grid, _, _), _ = split_k_launch_args(a, b, out, GemmARConfig(32, 64, 128, split_k=4), 2, 40, _FakeWorkspace())
    assert grid == 40


class _FakeWorkspace:
    flags = torch.zeros(2, SPLIT_K_MAX_ITEMS * 3, dtype=torch.int32)
    epochs = torch.zeros(2, dtype=torch.int32)

    def data_as(self, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(1, dtype=dtype)


@pytest.mark.parametrize(
    ("shape", "config", "limit"),
    [
        ((256, 8192, 4096), GemmARConfig(128, 64, 64, split_k=2), "SPLIT_K_MAX_ELEMS"),
        ((16, 8192, 4096), GemmARConfig(16, 16, 64, split_k=8), "SPLIT_K_MAX_ITEMS"),
    ],
)
def test_split_k_refuses_what_its_buffers_cannot_hold(shape, config, limit):
    m, n, k = shape
    with pytest.raises(ValueError, match=limit):
        split_k_geometry(m, n, k, config)
    with pytest.raises(ValueError, match=limit):  # before the workspace is touched
        split_k_launch_args(_t(m, k), _t(k, n), _t(m, n), config, 2, 132, None)


def test_public_name():
    assert triton_dist.ops.gemm_ar is gemm_ar


@pytest.mark.parametrize(("m", "bucket"), [(1, 1), (2, 2), (5, 8), (8, 8), (17, 32), (33, 64), (100, 128), (256, 256)])
def test_rows_bucket_rounds_up_to_a_power_of_two(m, bucket):
    assert gar_config.rows_bucket(m) == bucket


def test_config_round_trips_through_a_tuning_table(tmp_path):
    config = GemmARConfig(32, 128, 128, 4, 4, split_k=3)
    assert GemmARConfig.from_dict(config.as_dict()) == config
    path = tmp_path / "table.json"
    gar_config.tuning.store(path, "gemm_ar|k", config, {"us": 1.0})
    assert GemmARConfig.from_dict(gar_config.tuning.read_table(path)["gemm_ar|k"]["config"]) == config
    with pytest.raises(ValueError, match="does not know"):
        GemmARConfig.from_dict({**config.as_dict(), "pipelined": True})
    with pytest.raises(ValueError, match="split_k must be"):
        GemmARConfig.from_dict({**config.as_dict(), "split_k": 99})


def test_chosen_config_takes_the_tuned_entry_of_the_rows_bucket_else_the_default(monkeypatch, tmp_path):
    """A call without a config runs the tuned table's entry for (rows bucket, N, global K, dtype, world size, GPU):
    the user's cache before the package table; shapes, row counts or GPUs without an entry get default_config."""
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "package.json"
    monkeypatch.setattr(gar_config.tuning.tables, "PACKAGE_TABLE", package)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setitem(gpu._sms, None, 132)
    monkeypatch.setattr(gar_op.rt, "current_world", lambda: type("World", (), {"world_size": 2})())
    a, b = torch.empty(100, 2048, dtype=torch.bfloat16), torch.empty(2048, 8192, dtype=torch.bfloat16)
    default = default_config(100, 8192, 2048, "cuda", 132)
    assert gar_op.chosen_config(a, b) == default  # no table at all
    fused = GemmARConfig(128, 64, 128, 4, 4)
    key = gar_config.tuning_key(100, 8192, 2048, torch.bfloat16, 2, torch.device("cpu"))
    assert key == "gemm_ar|128,8192,4096|bfloat16|2|Fake GPU"
    gar_config.tuning.store(package, key, fused, {"us": 92.4})
    assert gar_op.chosen_config(a, b) == fused  # M = 100 takes M = 128's entry
    assert gar_op.chosen_config(a[:64], b) == default_config(64, 8192, 2048, "cuda", 132)  # bucket 64: none
    cublas = replace(fused, gemm="cublas")
    gar_config.tuning.store(gar_config.tuning.cache_path(), key, cublas, {"us": 90.0})
    assert gar_op.chosen_config(a, b) == cublas  # the user's cache first
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Other GPU")
    assert gar_op.chosen_config(a, b) == default
