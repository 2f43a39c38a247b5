"""triton_dist.ops.matmul without a GPU: the kernels compile for sm_90 (TMA) and gfx942 (pointer fallback), the
configuration helpers, and operand errors raised before any launch."""

from __future__ import annotations

import importlib

import pytest
import torch
from dl_compile import TARGETS, assembly, compile_kernel

mm = importlib.import_module("triton_dist.ops.matmul")  # the package's `matmul` attribute is the function

TMA_SIGNATURE = {
    "a_desc": "tensordesc<bf16[128,64]>",
    "b_desc": "tensordesc<bf16[64,256]>",
    "c_desc": "tensordesc<bf16[128,128]>",
    "M": "i32",
    "N": "i32",
    "K": "i32",
}
PTR_SIGNATURE = {
    "a_ptr": "*fp16",
    "b_ptr": "*fp16",
    "c_ptr": "*fp16",
    **{name: "i32" for name in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn")},
    "stride_cm": "i32",
    "stride_cn": "i32",
}


def test_tma_kernel_compiles_for_sm90_with_wgmma_and_bulk_tensor_copies() -> None:
    constexprs = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_N=2, WARP_SPECIALIZE=False)
    compiled = compile_kernel(mm._matmul_tma_kernel, TMA_SIGNATURE, "sm_90", constexprs, num_warps=8)
    ptx = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor" in ptx  # TMA loads and stores


def test_warp_specialize_changes_nothing_on_sm90_with_triton_3_6() -> None:
    """``MatmulConfig.warp_specialize`` asks Triton to warp-specialize the tile loop; Triton 3.6 ignores the request
    on sm_90 (its Hopper pass makes no partitions), so both settings compile to the same PTX. If a Triton upgrade
    starts honouring it, this fails: the candidates differ again and the tuned tables must be measured anew."""
    compiled = {}
    for ws in (False, True):
        constexprs = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_N=2, WARP_SPECIALIZE=ws)
        compiled[ws] = compile_kernel(mm._matmul_tma_kernel, TMA_SIGNATURE, "sm_90", constexprs, num_warps=8)
    assert "ttg.warp_specialize" not in compiled[True].asm["ttgir"]
    assert assembly(compiled[True], "sm_90") == assembly(compiled[False], "sm_90")


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_pointer_kernel_compiles_for_both_targets(target: str) -> None:
    constexprs = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8)
    compiled = compile_kernel(mm._matmul_ptr_kernel, PTR_SIGNATURE, target, constexprs, num_warps=8)
    text = assembly(compiled, target)
    assert ("mfma" in text) if target == "gfx942" else ("mma" in text)


def test_config_for_target_falls_back_without_tma() -> None:
    sm90, _, _ = TARGETS["sm_90"]
    gfx942, _, _ = TARGETS["gfx942"]
    config = mm.HOPPER_CANDIDATES[0]
    assert mm.config_for_target(config, sm90) is config
    fallback = mm.config_for_target(config, gfx942)
    assert not fallback.use_tma and fallback.block_m == config.block_m and fallback.block_n <= 128
    assert mm.default_config(8192, 2048, 12288, gfx942).use_tma is False


def test_config_round_trips_through_dict() -> None:
    config = mm.MatmulConfig(128, 128, 64, 4, 4, 8, False, 1)
    assert mm.MatmulConfig.from_dict(config.as_dict()) == config
    with pytest.raises(ValueError, match="unknown fields"):
        mm.MatmulConfig.from_dict({"block_q": 1})


@pytest.mark.parametrize(
    ("a", "b", "error", "words"),
    [
        (torch.zeros(4, 8, dtype=torch.float32), torch.zeros(8, 8, dtype=torch.float32), TypeError, "bfloat16"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.float16), TypeError, "same dtype"),
        (torch.zeros(8, 4, dtype=torch.bfloat16).t(), torch.zeros(8, 8, dtype=torch.bfloat16), ValueError, "contig"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(16, 8, dtype=torch.bfloat16), ValueError, "a.shape[1]"),
        (torch.zeros(4, 8, 1, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16), ValueError, "2-D"),
        (torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16), ValueError, "GPU"),
    ],
)
def test_bad_operands_raise_before_launch(a: torch.Tensor, b: torch.Tensor, error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        mm.matmul(a, b)
