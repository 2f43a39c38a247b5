"""triton_dist.ops.flash_decode without GPUs: the one-launch kernel compiles for sm_90 (tensor cores, pipelined K/V
loads, the flag protocol) and gfx942 for every group size and split count, split counts respect the workspace,
bad input raises before any launch, and the custom op traces with fake tensors."""

from __future__ import annotations

import re

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_library

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops import flash_decode as flash_decode_fn
from triton_dist.ops.flash_decode import (
    FLAG_CAPACITY,
    MAX_SPLITS,
    RECORD_CAPACITY_BYTES,
    FlashDecodeConfig,
    _flash_decode_kernel,
    check_inputs,
    choose_splits,
    record_floats,
)

SIGNATURE = {
    "q_ptr": "*bf16",
    "k_ptr": "*bf16",
    "v_ptr": "*bf16",
    "len_ptr": "*i32",
    "out_ptr": "*bf16",
    "rec_ptr": "*fp32",
    "flags_ptr": "*i32",
    "state_ptr": "*i32",
    "groups": "i32",
    "kv_heads": "i32",
    "stride_qb": "i32",
    "stride_qh": "i32",
    "stride_kb": "i64",
    "stride_kh": "i32",
    "stride_ks": "i32",
    "stride_vb": "i64",
    "stride_vh": "i32",
    "stride_vs": "i32",
    "stride_ob": "i32",
    "stride_oh": "i32",
    "sm_scale": "fp32",
    "rec_parity_stride": "i32",
    "flag_parity_stride": "i32",
}
ALIGNED = ("q_ptr", "k_ptr", "v_ptr", "out_ptr", "rec_ptr", "stride_qb", "stride_qh", "stride_kb", "stride_kh")
ALIGNED += ("stride_ks", "stride_vb", "stride_vh", "stride_vs", "stride_ob", "stride_oh")  # as Triton specializes


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize(("group", "splits", "world"), [(8, 1, 2), (8, 16, 2), (1, 4, 0), (16, 3, 8)])
def test_kernel_compiles(group, splits, world, target):
    need_library(target)
    constexprs = {"SPLITS": splits, "GROUP": group, "ROWS": 16, "D": 128, "BLOCK_N": 64, "WORLD": world}
    compiled = compile_kernel(_flash_decode_kernel, SIGNATURE, target, constexprs, ALIGNED, num_warps=4)
    asm = assembly(compiled, target)
    if target == "sm_90":
        assert "mma" in asm and "cp.async" in asm
        assert "ld.acquire.sys" in asm  # the combiner's dl.wait
        assert re.search(r"st\.release\.sys|atom\.global\.sys\.release|fence\.(acq_rel|sc)\.sys", asm)  # dl.notify
        assert "atom.global.gpu.relaxed.add" in asm and "atom.global.gpu.acq_rel.add" in asm  # tickets, finish count
    else:
        assert "v_mfma" in asm


@pytest.mark.parametrize("batch", [1, 8, 64])
@pytest.mark.parametrize("kv_heads", [1, 8])
@pytest.mark.parametrize("group", [1, 8, 16])
@pytest.mark.parametrize("local_len", [64, 4096, 524_288])
@pytest.mark.parametrize("world_size", [2, 8])
def test_choose_splits_fits_workspace(batch, kv_heads, group, local_len, world_size):
    splits = choose_splits(batch, kv_heads, group, local_len, world_size, 132, 64)
    groups = batch * kv_heads
    assert 1 <= splits <= MAX_SPLITS
    if groups * world_size * record_floats(group) * 4 > RECORD_CAPACITY_BYTES:
        assert splits == 1  # even one split per group does not fit: flash_decode raises, naming the workspace
        return
    assert groups * world_size * splits <= FLAG_CAPACITY
    assert groups * world_size * splits * record_floats(group) * 4 <= RECORD_CAPACITY_BYTES
    if local_len >= 128 * MAX_SPLITS:
        assert groups * splits >= min(132, groups * MAX_SPLITS)  # small batches still fill the GPU


def _inputs(batch=2, q_heads=8, kv_heads=2, local_len=64, dim=128, dtype=torch.bfloat16):
    q = torch.zeros(batch, q_heads, dim, dtype=dtype)
    k = torch.zeros(batch, kv_heads, local_len, dim, dtype=dtype)
    return q, k, k.clone(), torch.zeros(batch, dtype=torch.int32)


@pytest.mark.parametrize(
    ("change", "error", "text"),
    [
        (lambda q, k, v, n: (q[..., :64], k[..., :64], v[..., :64], n), ValueError, "only head_dim 128"),
        (lambda q, k, v, n: (q[:, :7], k, v, n), ValueError, "multiple of kv_heads"),
        (lambda q, k, v, n: (q, k, v, n.long()), ValueError, "int32"),
        (lambda q, k, v, n: (q, k, v[:, :, :32], n), ValueError, "same shape"),
        (lambda q, k, v, n: (q.float(), k.float(), v.float(), n), TypeError, "bfloat16"),
        (lambda q, k, v, n: (q, k.half(), v, n), TypeError, "bfloat16"),
        (lambda q, k, v, n: (q[:1], k, v, n[:1]), ValueError, "batch"),
        (lambda q, k, v, n: (q[0], k, v, n), ValueError, "q must be"),
        (lambda q, k, v, n: (q, k[0], v[0], n), ValueError, "k and v must be"),
        (lambda q, k, v, n: (q.repeat(1, 3, 1), k, v, n), ValueError, "at most 16"),
        (lambda q, k, v, n: (q, k.transpose(2, 3), v.transpose(2, 3), n), ValueError, "head_dim"),
    ],
)
def test_bad_input_raises_before_launch(change, error, text):
    args = change(*_inputs(q_heads=8 if text != "at most 16" else 12, kv_heads=2 if text != "at most 16" else 1))
    with pytest.raises(error, match=text):
        check_inputs(*args)
    with pytest.raises(error, match=text):
        flash_decode_fn(*args)


def test_bad_config():
    with pytest.raises(ValueError, match="splits"):
        FlashDecodeConfig(splits=MAX_SPLITS + 1)
    with pytest.raises(ValueError, match="block_n"):
        FlashDecodeConfig(block_n=48)


def test_custom_op_traces_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda q, k, v, n: flash_decode_fn(q, k, v, n) + 1, tracing_mode="fake")(*_inputs())
    assert any(node.target == torch.ops.triton_dist.flash_decode.default for node in graph.graph.nodes)
