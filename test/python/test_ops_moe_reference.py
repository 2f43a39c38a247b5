"""The torch reference of moe_dispatch / moe_combine (triton_dist.ops.moe.reference) and the input checks.

The reference defines the layouts the kernels must produce, so it is checked here against facts computed straight
from the inputs: a hand-worked example, combine of identity-like experts, the once-per-rank token count, and the
low-latency layout against the normal one.
"""

from __future__ import annotations

import pytest
import torch

from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.moe import MoeError, reference_combine, reference_dispatch
from triton_dist.ops.moe.config import check_inputs


def _inputs(counts: list[int], hidden: int, experts: int, k: int, seed: int = 0, none_rate: float = 0.0):
    """Random routing per rank: distinct experts per token, some slots -1 with probability ``none_rate``."""
    gen = torch.Generator().manual_seed(seed)
    xs, idxs, weights = [], [], []
    for tokens in counts:
        xs.append(torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16))
        idx = torch.stack([torch.randperm(experts, generator=gen)[:k] for _ in range(tokens)] or [torch.zeros(0, k)])
        idx = idx.reshape(tokens, k)
        idx[torch.rand(tokens, k, generator=gen) < none_rate] = -1
        idxs.append(idx.to(torch.int32))
        weights.append(torch.rand(tokens, k, generator=gen))
    return xs, idxs, weights


def test_hand_worked_layout() -> None:
    # 2 ranks, 4 experts: rank 0 holds experts 0, 1; rank 1 holds 2, 3.
    xs = [torch.arange(3, dtype=torch.float32)[:, None].repeat(1, 2), 10 + torch.arange(2.0)[:, None].repeat(1, 2)]
    idxs = [torch.tensor([[1, 2], [0, 1], [-1, 3]]), torch.tensor([[1, 0], [3, -1]])]
    weights = [torch.tensor([[0.5, 0.25], [1.0, 2.0], [9.0, 4.0]]), torch.tensor([[3.0, 5.0], [6.0, 7.0]])]
    (rx0, h0), (rx1, h1) = reference_dispatch(xs, idxs, weights, 4)
    # Rank 0, expert 0: (src 0, tok 1, k 0), (src 1, tok 0, k 1); expert 1: (0, 0, 0), (0, 1, 1), (1, 0, 0).
    assert h0.expert_counts.tolist() == [2, 3] and h0.expert_offsets.tolist() == [0, 2]
    assert h0.recv_src_rank.tolist() == [0, 1, 0, 0, 1]
    assert h0.recv_src_token.tolist() == [1, 0, 0, 1, 0]
    assert h0.recv_topk_slot.tolist() == [0, 1, 0, 1, 0]
    assert h0.recv_expert.tolist() == [0, 0, 1, 1, 1]
    assert h0.recv_weights.tolist() == [1.0, 5.0, 0.5, 2.0, 3.0]
    assert rx0[:, 0].tolist() == [1.0, 10.0, 0.0, 1.0, 10.0]
    assert h0.src_offsets.tolist() == [[0, 1], [0, 2]]
    assert h0.num_recv_tokens == 3  # tokens 0 and 1 of rank 0, token 0 of rank 1: each once
    # Rank 1, expert 2: (0, 0, 1); expert 3: (0, 2, 1), (1, 1, 0).
    assert h1.expert_counts.tolist() == [1, 2] and h1.recv_src_token.tolist() == [0, 2, 1]
    assert rx1[:, 0].tolist() == [0.0, 2.0, 11.0] and h1.num_recv_tokens == 3
    y0, y1 = rx0 * 2, rx1 * 3  # experts on rank 0 double, on rank 1 triple
    out0, out1 = reference_combine([y0, y1], [h0, h1])
    assert out0[:, 0].tolist() == [0 * (0.5 * 2 + 0.25 * 3), 1 * (1.0 * 2 + 2.0 * 2), 2 * (4.0 * 3)]
    assert out1[:, 0].tolist() == [10 * (3.0 * 2 + 5.0 * 2), 11 * (6.0 * 3)]


@pytest.mark.parametrize(
    ("counts", "experts", "k"),
    [([16, 16], 8, 2), ([7, 0, 12], 6, 1), ([5, 9], 16, 8), ([0, 0], 4, 2), ([3, 20, 1], 24, 8)],
)
def test_combine_of_scaling_experts_matches_direct_sum(counts: list[int], experts: int, k: int) -> None:
    """Expert e multiplies its input by (e + 1): combine must give x * sum_k w_k (e_k + 1) for every token,
    whatever the layout; random routing, T = 0 ranks, k = 1 and 8, uneven T, slots of -1."""
    xs, idxs, weights = _inputs(counts, 32, experts, k, seed=len(counts) + k, none_rate=0.2)
    for mode, cap in (("normal", None), ("low_latency", max(max(counts), 1))):
        results = reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)
        ys = [(rx.float() * (h.recv_expert.float() + 1).unsqueeze(-1)).to(rx.dtype) for rx, h in results]
        outs = reference_combine(ys, [h for _, h in results])
        for r, out in enumerate(outs):
            scale = torch.where(idxs[r] >= 0, weights[r] * (idxs[r] + 1).float(), 0).sum(1, keepdim=True)
            torch.testing.assert_close(out.float(), xs[r].float() * scale, rtol=2e-2, atol=2e-2)


def test_low_latency_layout_is_the_normal_layout_padded_per_expert() -> None:
    counts, experts, world, cap = [6, 9, 4], 12, 3, 10
    xs, idxs, weights = _inputs(counts, 16, experts, 3, seed=5, none_rate=0.1)
    normal = reference_dispatch(xs, idxs, weights, experts)
    low = reference_dispatch(xs, idxs, weights, experts, mode="low_latency", max_tokens_per_rank=cap)
    for (nx, nh), (lx, lh) in zip(normal, low, strict=True):
        assert lx.shape == (experts // world, world * cap, 16)
        assert torch.equal(nh.expert_counts, lh.expert_counts) and torch.equal(nh.src_offsets, lh.src_offsets)
        assert lh.expert_offsets.tolist() == [e * world * cap for e in range(experts // world)]
        for e, (start, count) in enumerate(zip(nh.expert_offsets.tolist(), nh.expert_counts.tolist(), strict=True)):
            assert torch.equal(lx[e, :count], nx[start : start + count])
            assert torch.equal(lh.recv_src_token[e, :count], nh.recv_src_token[start : start + count])
            assert (lh.recv_src_rank[e, count:] == -1).all() and (lx[e, count:] == 0).all()


@pytest.mark.parametrize("rounding", [None, "bf16"])
def test_low_latency_combine_reads_only_held_rows_and_gives_the_normal_layouts_bits(rounding: str | None) -> None:
    """At 4 ranks, combine of the low-latency layout with NaN in every padding row: the same bits as combine of the
    normal layout (the reference reads a rank's held rows only; the GPU test's checks widen just those), with fp32
    partials and with each rank's partial rounded to bf16 first."""
    counts, experts, world, cap = [7, 0, 12, 5], 16, 4, 12
    xs, idxs, weights = _inputs(counts, 24, experts, 4, seed=11, none_rate=0.2)
    normal = reference_dispatch(xs, idxs, weights, experts)
    low = reference_dispatch(xs, idxs, weights, experts, mode="low_latency", max_tokens_per_rank=cap)
    padded = []
    for rx, h in low:
        y = rx.clone()
        y[h.recv_src_rank < 0] = float("nan")
        padded.append(y)
    round_partial = None if rounding is None else (lambda p: p.to(torch.bfloat16).float())
    want = reference_combine([rx for rx, _ in normal], [h for _, h in normal], round_partial)
    got = reference_combine(padded, [h for _, h in low], round_partial)
    assert len(got) == world
    for g, w in zip(got, want, strict=True):
        assert not g.isnan().any() and torch.equal(g, w)


def test_every_token_to_one_rank_and_a_rank_receiving_nothing() -> None:
    xs, idxs, weights = _inputs([8, 5], 8, 8, 2, seed=3)
    idxs = [torch.randint(4, 8, (t, 2), dtype=torch.int64) for t in (8, 5)]  # all on rank 1's experts
    (rx0, h0), (rx1, h1) = reference_dispatch(xs, idxs, weights, 8)
    assert rx0.shape == (0, 8) and h0.expert_counts.tolist() == [0, 0, 0, 0] and h0.num_recv_tokens == 0
    assert h1.num_recv_tokens == 13 and int(h1.expert_counts.sum()) == 26
    out0, out1 = reference_combine([rx0, rx1], [h0, h1])
    torch.testing.assert_close(out0.float(), xs[0].float() * weights[0].sum(1, keepdim=True), rtol=2e-2, atol=2e-2)


def test_bad_inputs_name_the_problem() -> None:
    xs, idxs, weights = _inputs([4, 4], 8, 8, 2)
    bad = [idxs[0].clone(), idxs[1]]
    bad[0][2, 1] = 8
    with pytest.raises(MoeError, match=r"rank 0: topk_idx\[2, 1\] = 8 is not an expert id in \[0, 8\)"):
        reference_dispatch(xs, bad, weights, 8)
    bad[0][2, 1] = -2
    with pytest.raises(MoeError, match="= -2 is not an expert id"):
        reference_dispatch(xs, bad, weights, 8)
    with pytest.raises(MoeError, match="exceed max_tokens_per_rank=3"):
        reference_dispatch(xs, idxs, weights, 8, mode="low_latency", max_tokens_per_rank=3)
    with pytest.raises(MoeError, match="positive multiple of the world size"):
        reference_dispatch(xs, idxs, weights, 7)
    wide = [xs[0], torch.zeros(4, 16, dtype=torch.bfloat16)]
    with pytest.raises(MoeError, match="different inputs"):
        reference_dispatch(wide, idxs, weights, 8)
    with pytest.raises(MoeError, match="dequantize=True is for fp8 payloads"):
        check_inputs(xs[0], idxs[0], weights[0], 8, 2, dequantize=True)
    with pytest.raises(MoeError, match="fp8 must be True or False, got 1"):
        check_inputs(xs[0], idxs[0], weights[0], 8, 2, fp8=1)
    with pytest.raises(MoeError, match="needs max_tokens_per_rank"):
        check_inputs(xs[0], idxs[0], weights[0], 8, 2, mode="low_latency")
    with pytest.raises(MoeError, match="mode must be one of"):
        check_inputs(xs[0], idxs[0], weights[0], 8, 2, mode="fast")
    with pytest.raises(MoeError, match=r"topk_weights must have topk_idx's shape"):
        check_inputs(xs[0], idxs[0], weights[0][:, :1], 8, 2)
    assert issubclass(MoeError, OpInputError)


def test_device_is_checked_before_dtype() -> None:
    x = torch.zeros(4, 8, dtype=torch.int8)  # wrong dtype and wrong device: the device is named
    idx, weights = torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 2)
    with pytest.raises(MoeError, match="x is on cpu, but this rank's triton_dist device is cuda:0"):
        check_inputs(x, idx, weights, 8, 2, device=torch.device("cuda", 0))
    with pytest.raises(MoeError, match="topk_idx is on cpu"):
        check_inputs(torch.zeros(4, 8, device="meta"), idx, weights, 8, 2, device=torch.device("meta"))
    with pytest.raises(MoeError, match="x has dtype int8; supported: bfloat16, float16, float32"):
        check_inputs(x, idx, weights, 8, 2)


def test_quantize_fp8_by_hand() -> None:
    from triton_dist.ops.moe.reference import dequantize_fp8, quantize_fp8

    x = torch.zeros(2, 136)  # two groups: 128 channels, then a short one of 8
    x[0, 0], x[0, 1], x[0, 2], x[0, 3] = 448.0, 42.0, 46.0, -1.0  # scale 1: ties go to the even mantissa
    x[0, 128:] = torch.arange(8.0) - 3.0  # the short group: amax 4, scale 4 / 448
    x[1, 5] = 896.0  # scale 2; row 1's second group is all zero
    q, scales = quantize_fp8(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (2, 136) and scales.shape == (2, 2)
    assert scales[0, 0] == 1.0 and scales[1, 0] == 2.0
    assert scales[0, 1] == torch.tensor(4.0) / 448 and scales[1, 1] == torch.tensor(1e-4) / 448
    assert q[0, :4].float().tolist() == [448.0, 40.0, 48.0, -1.0]  # 42 -> 40, 46 -> 48 (nearest even)
    assert q[0, 128:].float().abs().max() == 448.0 and q[1, 5].float() == 448.0 and q[1, 128:].float().eq(0).all()
    back = dequantize_fp8(q, scales)
    assert back[1, 5] == 896.0 and back[0, 131] == 0.0 and back[0, 135] == 4.0
    assert dequantize_fp8(q, scales, torch.bfloat16).dtype == torch.bfloat16


def test_quantize_fp8_with_the_reciprocal_by_hand() -> None:
    """``quantize_fp8(x)`` (``reciprocal=True``, the push's default ``switches.FP8_RECIPROCAL``): the same scales as
    ``reciprocal=False``, each value times ``448 / amax`` (fp32) instead of divided by ``amax / 448``. With amax 13,
    x = 39 / 4096 divided by the scale is 0.328125 exactly, a tie between the e4m3 values 0.3125 and 0.34375 (to the
    even one, 0.3125), and times the reciprocal one fp32 step above it (to 0.34375)."""
    from triton_dist.ops.moe.reference import quantize_fp8

    x = torch.zeros(1, 128)
    x[0, 0], x[0, 1], x[0, 2] = 13.0, 39 / 4096, -13.0
    divided, scales = quantize_fp8(x, reciprocal=False)
    multiplied, same = quantize_fp8(x)
    assert torch.equal(scales, same) and scales[0, 0] == torch.tensor(13.0) / 448
    assert (torch.tensor(39 / 4096) / scales[0, 0]).item() == 0.328125
    assert divided[0, :3].float().tolist() == [448.0, 0.3125, -448.0]
    assert multiplied[0, :3].float().tolist() == [448.0, 0.34375, -448.0]
    assert torch.equal(divided[0, 3:].float(), multiplied[0, 3:].float())


def test_quantize_fp8_round_trip_is_within_e4m3_precision() -> None:
    from triton_dist.ops.moe.reference import dequantize_fp8, quantize_fp8

    x = torch.randn(16, 300, generator=torch.Generator().manual_seed(3)) * torch.logspace(-3, 2, 300)
    q, scales = quantize_fp8(x)
    back = dequantize_fp8(q, scales)
    per_channel_scale = scales.repeat_interleave(128, dim=1)[:, :300]
    # Half a step of e4m3: 2^-4 relative for normals, 2^-10 of the scale in the subnormal range.
    assert ((back - x).abs() <= x.abs() / 16 + per_channel_scale / 1024).all()
    assert ((back - x).abs() > 0).any(), "fp8 loses precision: the check above can fail"


@pytest.mark.parametrize("mode", ["normal", "low_latency"])
def test_fp8_reference_dispatch_carries_the_quantized_rows(mode: str) -> None:
    from triton_dist.ops.moe.reference import dequantize_fp8, quantize_fp8

    xs, idxs, weights = _inputs([5, 3], 160, 8, 2, seed=4)
    cap = 5 if mode == "low_latency" else None
    plain = reference_dispatch(xs, idxs, weights, 8, mode, cap)
    fp8 = reference_dispatch(xs, idxs, weights, 8, mode, cap, fp8=True)
    dequantized = reference_dispatch(xs, idxs, weights, 8, mode, cap, fp8=True, dequantize=True)
    for (rx, h), (qx, qh), (dx, dh) in zip(plain, fp8, dequantized, strict=True):
        assert qx.dtype == torch.float8_e4m3fn and qh.fp8 and qh.recv_scales is not None and dh.recv_scales is None
        assert dx.dtype == torch.bfloat16 and torch.equal(qh.recv_src_token, h.recv_src_token)
        flat = [t.reshape(-1, t.shape[-1]) for t in (rx, qx, qh.recv_scales, dx)]
        valid = (h.recv_src_rank.reshape(-1) >= 0).nonzero().squeeze(1)
        want_q, want_scales = quantize_fp8(flat[0][valid])
        assert torch.equal(flat[1][valid].view(torch.uint8), want_q.view(torch.uint8))
        assert torch.equal(flat[2][valid], want_scales)
        assert torch.equal(flat[3][valid], dequantize_fp8(want_q, want_scales, torch.bfloat16))
