"""``triton_dist.ops.grouped_gemm`` without a GPU: the kernel under Triton's interpreter against torch's per-expert
matmul (both layouts moe_dispatch gives, bf16, fp16 and fp8 with either weight-scale layout; rows read through
``gather_rows``, bf16 and fp8), its sm_90 code on the
tensor cores (wgmma, bf16 and e4m3), the custom op's fake, and the checks' messages.

Run as a script with a JSON request (``dl_compile.run_in_interpreter`` does, under ``TRITON_INTERPRET=1``), this file
runs the cases and prints, per case, what differed from torch.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest
import torch
from dl_compile import assembly, compile_kernel, need_library, run_in_interpreter

from triton_dist.ops.grouped_gemm import (
    GroupedGemmConfig,
    GroupedGemmError,
    grouped_gemm,
    kernels,
    quantize_weights_fp8,
)
from triton_dist.ops.moe.reference import dequantize_fp8, quantize_fp8

SMALL = GroupedGemmConfig(block_m=16, block_n=32, block_k=32, num_warps=4, num_stages=1)
"""Small tiles: several row and column tiles per expert at the interpreter's small shapes."""


def _quantize_weights(w: torch.Tensor, per_expert: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``w`` [L, K, N] in fp8 with scales per expert [L] or per 128 x 128 block [L, ceil(K/128), ceil(N/128)]."""
    if per_expert:
        scales = w.abs().amax(dim=(1, 2)) / 448
        return (w / scales[:, None, None]).to(torch.float8_e4m3fn), scales
    return quantize_weights_fp8(w)


def _weights_value(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    if scales.dim() == 1:
        return q.float() * scales[:, None, None]
    full = scales.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, : q.shape[1], : q.shape[2]]
    return q.float() * full


def _case(name: str) -> list[str]:
    """One case under the interpreter: ``grouped_gemm`` against torch, per expert's valid rows."""
    gen = torch.Generator().manual_seed(len(name))
    counts = torch.tensor([7, 0, 33], dtype=torch.int32)  # uneven, an empty expert, several row tiles
    experts, k, n = 3, 160, 144  # K and N: a full and a short 128-block, and not multiples of the tiles
    fp8 = name.startswith("fp8")
    dtype = torch.float16 if name == "fp16" else torch.bfloat16
    w = torch.randn(experts, k, n, generator=gen) / k**0.5
    low_latency = "ll" in name
    capacity = 36
    if low_latency:
        x = torch.randn(experts, capacity, k, generator=gen)
        if name.endswith("clamped"):
            counts = torch.tensor([7, 40, 0], dtype=torch.int32)  # 40 > capacity: clamped to 36
        offsets = None
        valid = [(e, slice(0, min(int(c), capacity))) for e, c in enumerate(counts)]
    else:
        x = torch.randn(int(counts.sum()), k, generator=gen)
        offsets = (torch.cumsum(counts, 0) - counts).to(torch.int32)
        valid = [(slice(int(o), int(o + c)),) for o, c in zip(offsets, counts, strict=True)]
    # "gather": x holds 19 distinct rows; row r of the problem reads x[gather[r]] (repeats, any order).
    gather = torch.randint(0, 19, (x.shape[0],), generator=gen, dtype=torch.int32) if "gather" in name else None
    if gather is not None:
        x = torch.randn(19, k, generator=gen)
    if fp8:
        xq, xs = quantize_fp8(x)
        wq, ws = _quantize_weights(w, per_expert=name.endswith("per_expert"))
        y = grouped_gemm(xq, wq, counts, offsets, x_scales=xs, w_scales=ws, config=SMALL, gather_rows=gather)
        x_value, w_value = dequantize_fp8(xq, xs), _weights_value(wq, ws)
        want_dtype, tolerance = torch.bfloat16, 1e-2
    else:
        xd, wd = x.to(dtype), w.to(dtype)
        y = grouped_gemm(xd, wd, counts, offsets, config=SMALL, gather_rows=gather)
        x_value, w_value = xd.float(), wd.float()
        want_dtype, tolerance = dtype, 1e-2
    if gather is not None:  # what the kernel must equal: the expanded rows
        x, x_value = x[gather.long()], x_value[gather.long()]
        if fp8:
            xq = xq[gather.long()]
    problems = []
    if y.dtype != want_dtype or y.shape != (*x.shape[:-1], n):
        problems.append(f"y is {y.dtype} {list(y.shape)}")
    for e, at in enumerate(valid):
        rows = at if not low_latency else (at[0], at[1])
        want = x_value[rows] @ w_value[e]
        got = y[rows].float()
        if not torch.allclose(got, want, rtol=tolerance, atol=tolerance):
            problems.append(f"expert {e}: max error {(got - want).abs().max().item():.4g}")
    if fp8 and not problems:  # the check above can fail: the unscaled product is far off
        unscaled = xq[valid[2]].float() @ wq[2].float() if not low_latency else None
        if unscaled is not None and torch.allclose(unscaled, y[valid[2]].float(), rtol=tolerance, atol=tolerance):
            problems.append("the scales made no difference")
    return problems


CASES = ("bf16", "bf16_ll", "bf16_ll_clamped", "fp16", "fp8", "fp8_per_expert", "fp8_ll", "bf16_gather", "fp8_gather")


def test_grouped_gemm_matches_torch_under_the_interpreter() -> None:
    result = run_in_interpreter(__file__, {"cases": list(CASES)})
    assert sorted(result) == sorted(CASES)
    failed = {name: problems for name, problems in result.items() if problems}
    assert not failed, failed


def _compile(fp8: bool, config: GroupedGemmConfig, gather: bool = False) -> str:
    operand = "*fp8e4nv" if fp8 else "*bf16"
    signature = {"x_ptr": operand, "w_ptr": operand, "y_ptr": "*bf16", "counts_ptr": "*i32", "offsets_ptr": "*i32"}
    signature |= {"xs_ptr": "*fp32", "ws_ptr": "*fp32", "gather_ptr": "*i32"}
    ints = ("N", "K", "L", "CAP", "TOTAL", "XR", "stride_xm", "stride_we", "stride_wk", "stride_ym", "stride_xs")
    signature |= {name: "i32" for name in (*ints, "stride_wse", "stride_wsk")}
    constexprs = {"BLOCK_M": config.block_m, "BLOCK_N": config.block_n, "BLOCK_K": config.block_k, "LP": 64}
    constexprs |= {
        "FP8": fp8,
        "WIDEN": False,
        "GATHER": gather,
        "stride_wn": 1,
    }  # [L, K, N] contiguous weights, as the layer's
    aligned = ("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_xm", "stride_we", "stride_wk", "stride_ym")
    compiled = compile_kernel(
        kernels._grouped_gemm_kernel,
        signature,
        "sm_90",
        constexprs,
        aligned=aligned,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return assembly(compiled, "sm_90")


@pytest.mark.parametrize(
    ("fp8", "gather"), [(False, False), (True, False), (False, True)], ids=["bf16", "fp8", "gather"]
)
def test_sm90_grouped_gemm_runs_on_wgmma(fp8: bool, gather: bool) -> None:
    """The sm_90 code multiplies on wgmma and pipelines its loads, also where A's rows come through gather_rows."""
    need_library("sm_90")
    from triton_dist.ops.grouped_gemm.config import default_config

    config = default_config(4096 / 8, fp8)
    ptx = _compile(fp8, config, gather)
    kind = r"e4m3\.e4m3" if fp8 else r"bf16\.bf16"
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n128k(16|32)\.f32\.{kind}", ptx), "tensor cores, wgmma"
    assert "cp.async" in ptx, "the operands stream in asynchronously (software pipelining)"


def test_quantize_weights_fp8_scales_each_128_block() -> None:
    w = torch.zeros(2, 200, 130)  # blocks: K 128 + 72, N 128 + 2
    w[0, 0, 0], w[0, 150, 129], w[1, 5, 5] = 896.0, -4.0, 42.0
    q, scales = quantize_weights_fp8(w)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w.shape and scales.shape == (2, 2, 2)
    assert scales[0, 0, 0] == 2.0 and scales[0, 1, 1] == torch.tensor(4.0) / 448 and scales[1, 0, 0] == 42.0 / 448
    assert scales[0, 0, 1] == torch.tensor(1e-4) / 448, "an all-zero block"
    assert q[0, 0, 0].float() == 448.0 and q[0, 150, 129].float() == -448.0 and q[1, 5, 5].float() == 448.0
    with pytest.raises(GroupedGemmError, match="w must be a float tensor \\[L, K, N\\]"):
        quantize_weights_fp8(torch.zeros(3, 3))


def test_custom_op_is_registered_with_a_fake() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    import triton_dist.ops

    assert triton_dist.ops.grouped_gemm is grouped_gemm and triton_dist.ops.quantize_weights_fp8 is quantize_weights_fp8
    with FakeTensorMode():
        x = torch.empty(4, 36, 160, dtype=torch.float8_e4m3fn)
        w = torch.empty(4, 160, 96, dtype=torch.float8_e4m3fn)
        y = torch.ops.triton_dist.grouped_gemm(x, w, torch.empty(4, dtype=torch.int32), None, None, None, None)
        assert y.shape == (4, 36, 96) and y.dtype == torch.bfloat16


def _bf16(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.bfloat16)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16), c),
            "normal layout x \\[rows, K\\] needs expert_offsets",
        ),
        (lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 16, 16), c, c), "x has 32 columns but w is \\[L, K=16, N=16\\]"),
        (lambda c: grouped_gemm(_bf16(3, 8, 32), _bf16(2, 32, 16), c), "x \\[L, capacity, K\\] has 3 experts"),
        (lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16).half(), c, c), "must both be bf16, both fp16"),
        (lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16), c.long(), c), "expert_counts must be int32 \\[L=2\\]"),
        (
            lambda c: grouped_gemm(
                _bf16(8, 32).to(torch.float8_e4m3fn), _bf16(2, 32, 16).to(torch.float8_e4m3fn), c, c
            ),
            "fp8 x needs x_scales, fp32 \\[8, 1\\]",
        ),
        (
            lambda c: grouped_gemm(
                _bf16(8, 32).to(torch.float8_e4m3fn),
                _bf16(2, 32, 16).to(torch.float8_e4m3fn),
                c,
                c,
                x_scales=torch.ones(8, 1),
                w_scales=torch.ones(2, 2),
            ),
            "fp8 w needs w_scales, fp32 \\[L\\] \\(per expert\\) or \\[2, 1, 1\\]",
        ),
        (lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16), c, c, x_scales=torch.ones(8, 1)), "are for fp8"),
        (lambda c: grouped_gemm(_bf16(8, 32).t(), _bf16(2, 8, 16), c, c), "x's rows must be contiguous"),
        (
            lambda c: grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16), c, c, gather_rows=c.long()),
            "gather_rows must be a contiguous int32 tensor \\[R\\]",
        ),
        (
            lambda c: grouped_gemm(_bf16(2, 8, 32), _bf16(2, 32, 16), c, gather_rows=c),
            "gather_rows is for the normal layout",
        ),
    ],
)
def test_bad_arguments_name_the_tensor(call: Any, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the checks come before the device's
    with pytest.raises(GroupedGemmError, match=message):
        call(torch.zeros(2, dtype=torch.int32))


def test_cpu_tensors_without_the_interpreter_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    counts = torch.zeros(2, dtype=torch.int32)
    with pytest.raises(GroupedGemmError, match="x is on the CPU; the kernel runs on GPUs"):
        grouped_gemm(_bf16(8, 32), _bf16(2, 32, 16), counts, counts)
    with pytest.raises(GroupedGemmError, match="fp8 needs block_k in \\[32, 128\\]"):
        GroupedGemmConfig(block_k=256).check(fp8=True)


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    results: dict[str, Any] = {}
    for case in request["cases"]:
        try:
            results[case] = _case(case)
        except Exception as error:  # noqa: BLE001 (reported to the test)
            results[case] = [f"{type(error).__name__}: {error}"]
    print(json.dumps(results))
    sys.stdout.flush()
