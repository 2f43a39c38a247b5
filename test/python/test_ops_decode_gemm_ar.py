"""triton_dist.ops.gemm_ar without GPUs: the fused kernel compiles for sm_90 (tensor cores, pipelined loads, the flag
protocol, vector pushes) and gfx942, configs are checked, bad input raises before any launch, and the custom op
traces with fake tensors."""

from __future__ import annotations

import re

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_library

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops.gemm_ar import GemmARConfig, _gemm_ar_kernel, check_inputs, default_config, gemm_ar

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
    config = default_config(m, 8192, 4096, "cuda" if target == "sm_90" else "hip")
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
def test_default_config_fits(m):
    config = default_config(m, 8192, 4096)
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
    with pytest.raises(error, match=text):
        check_inputs(a, b)
    if isinstance(a, torch.Tensor):
        with pytest.raises(error, match=text):
            gemm_ar(a, b)


def test_custom_op_traces_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda a, b: gemm_ar(a, b).float().sum(), tracing_mode="fake")(_t(8, 64), _t(64, 96))
    assert any(node.target == torch.ops.triton_dist.gemm_ar.default for node in graph.graph.nodes)
    out = make_fx(gemm_ar, tracing_mode="fake")(_t(3, 64), _t(64, 96))
    placeholders = [n for n in out.graph.nodes if n.op == "output"]
    assert placeholders, "graph has an output"


def test_public_name():
    assert triton_dist.ops.gemm_ar is gemm_ar
