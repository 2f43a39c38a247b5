"""The torch reference of ``moe_dispatch`` / ``moe_combine``: one process, every rank's inputs given as lists.

It defines the layouts the kernels produce (see :class:`~triton_dist.ops.moe.config.MoeHandle`) and the order in
which combine adds: for a token of home rank ``s``, each rank ``d`` holding some of its experts first sums its own
rows ``w_k * y_k`` in k order (fp32), then the home rank adds those per-rank partials in rank order (fp32) and
casts to ``x``'s dtype. The tests compare the kernels against it; it needs no GPU and no triton_dist world.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from triton_dist.ops.moe.config import (
    FP8_AMAX_FLOOR,
    FP8_DTYPE,
    FP8_GROUP,
    FP8_MAX,
    MoeError,
    MoeHandle,
    check_inputs,
    fp8_groups,
    local_experts,
)


def quantize_fp8(x: torch.Tensor, reciprocal: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [..., H] as the fp8 dispatch quantizes it: ``(q, scales)``, q float8_e4m3fn [..., H], scales fp32
    [..., ceil(H / 128)]. Per group of 128 channels (the last may be shorter): ``scale = max(amax, 1e-4) / 448``
    and ``q = x * (448 / max(amax, 1e-4))`` clamped to [-448, 448] and rounded to nearest even (fp32 arithmetic: one
    IEEE division per group and an fp32 multiply per element, as the kernel does by default, the push's
    ``switches.FP8_RECIPROCAL``, and as DeepEP's per-token cast does). ``reciprocal=False`` (that switch off):
    ``q = x / scale``, an IEEE division per element (the same scales; a value may land one fp8 step away from the
    reciprocal's where the two fp32 results straddle a rounding boundary of e4m3)."""
    hidden, groups = x.shape[-1], fp8_groups(x.shape[-1])
    padded = torch.nn.functional.pad(x.float(), (0, groups * FP8_GROUP - hidden))
    grouped = padded.reshape(*x.shape[:-1], groups, FP8_GROUP)
    amax = grouped.abs().amax(dim=-1).clamp(min=FP8_AMAX_FLOOR)
    scales = amax / FP8_MAX
    if reciprocal:  # a tensor divided, not `448 / amax` (torch computes that as amax.reciprocal() * 448)
        values = grouped * (torch.full_like(amax, FP8_MAX) / amax).unsqueeze(-1)
    else:
        values = grouped / scales.unsqueeze(-1)
    q = values.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q.reshape(*x.shape[:-1], groups * FP8_GROUP)[..., :hidden].contiguous(), scales


def dequantize_fp8(q: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The values of ``quantize_fp8``'s ``(q, scales)``: each group of 128 channels times its scale (fp32), in
    ``dtype``."""
    hidden, groups = q.shape[-1], scales.shape[-1]
    values = torch.nn.functional.pad(q.float(), (0, groups * FP8_GROUP - hidden))
    values = values.reshape(*q.shape[:-1], groups, FP8_GROUP) * scales.unsqueeze(-1)
    return values.reshape(*q.shape[:-1], groups * FP8_GROUP)[..., :hidden].to(dtype)


def _check_ids(rank: int, topk_idx: torch.Tensor, num_experts: int) -> None:
    bad = (topk_idx < -1) | (topk_idx >= num_experts)
    if bool(bad.any()):
        token, slot = (int(v) for v in bad.nonzero()[0])
        raise MoeError(
            f"moe_dispatch: rank {rank}: topk_idx[{token}, {slot}] = {int(topk_idx[token, slot])} is not an expert "
            f"id in [0, {num_experts}) or -1 (none)"
        )


def reference_dispatch(
    xs: Sequence[torch.Tensor],
    topk_idxs: Sequence[torch.Tensor],
    topk_weights: Sequence[torch.Tensor],
    num_experts: int,
    mode: str = "normal",
    max_tokens_per_rank: int | None = None,
    fp8: bool = False,
    dequantize: bool = False,
    fp8_reciprocal: bool = True,
) -> list[tuple[torch.Tensor, MoeHandle]]:
    """``moe_dispatch`` on every rank at once: ``xs[r]``, ``topk_idxs[r]``, ``topk_weights[r]`` are rank ``r``'s
    arguments (the world size is ``len(xs)``). Returns rank ``r``'s ``(recv_x, handle)`` at index ``r``.

    ``fp8``: the rows are ``quantize_fp8``'s fp8 values, their scales in ``handle.recv_scales`` (zero past a
    low-latency expert's count), or with ``dequantize`` the dequantized values in x's dtype; ``fp8_reciprocal``:
    quantized as ``quantize_fp8(x, reciprocal=fp8_reciprocal)`` (the push's ``switches.FP8_RECIPROCAL``, on by
    default).

    Raises :class:`MoeError` as the op does: bad arguments, ranks whose H or dtype differ, and an expert id
    outside ``[-1, E)`` (which the kernels report through ``MoeHandle.status`` instead).
    """
    world = len(xs)
    if world == 0 or not len(topk_idxs) == len(topk_weights) == world:
        raise MoeError("reference_dispatch: give one x, topk_idx and topk_weights per rank (equal, non-empty lists)")
    for r in range(world):
        check_inputs(
            xs[r], topk_idxs[r], topk_weights[r], num_experts, world, mode, max_tokens_per_rank, fp8, None, dequantize
        )
        if xs[r].shape[1] != xs[0].shape[1] or xs[r].dtype != xs[0].dtype:
            raise MoeError(
                f"moe_dispatch: ranks called with different inputs (rank 0: x {xs[0].dtype} H={xs[0].shape[1]}; "
                f"rank {r}: x {xs[r].dtype} H={xs[r].shape[1]})"
            )
        _check_ids(r, topk_idxs[r], num_experts)
    experts = local_experts(num_experts, world)
    hidden, dtype = xs[0].shape[1], xs[0].dtype
    groups = fp8_groups(hidden) if fp8 else 0
    quantized = [quantize_fp8(x.cpu(), fp8_reciprocal) for x in xs] if fp8 else []
    results = []
    for dest in range(world):
        # Every (source, token, k) pair routed to one of dest's experts, in (source, token, k) order.
        src_rank, src_token, slot, expert = [], [], [], []
        tokens = 0
        for src in range(world):
            idx = topk_idxs[src].long()
            hit = (idx >= dest * experts) & (idx < (dest + 1) * experts)
            pairs = hit.nonzero()  # row-major: by token, then k
            tokens += int(hit.any(dim=1).sum())
            src_rank.append(torch.full((pairs.shape[0],), src, dtype=torch.int64))
            src_token.append(pairs[:, 0])
            slot.append(pairs[:, 1])
            expert.append(idx[pairs[:, 0], pairs[:, 1]])
        rank_of, token_of = torch.cat(src_rank), torch.cat(src_token)
        slot_of, expert_of = torch.cat(slot), torch.cat(expert)
        order = torch.sort(expert_of, stable=True).indices  # group by expert, keep (source, token, k) within
        rank_of, token_of, slot_of, expert_of = rank_of[order], token_of[order], slot_of[order], expert_of[order]
        weight_of = torch.zeros(order.shape[0], dtype=torch.float32)
        rows_x = torch.zeros(order.shape[0], hidden, dtype=dtype)
        rows_q = torch.zeros(order.shape[0], hidden, dtype=torch.uint8)  # fp8 bits
        rows_scales = torch.zeros(order.shape[0], groups, dtype=torch.float32)
        for src in range(world):
            mine = rank_of == src
            weight_of[mine] = topk_weights[src].float()[token_of[mine], slot_of[mine]]
            rows_x[mine] = xs[src][token_of[mine]].cpu().to(dtype)
            if fp8:
                q, scales = quantized[src]
                rows_q[mine] = q.view(torch.uint8)[token_of[mine]]
                rows_scales[mine] = scales[token_of[mine]]
        if fp8 and dequantize:
            rows_x = dequantize_fp8(rows_q.view(FP8_DTYPE), rows_scales, dtype)
        local = expert_of - dest * experts
        counts = torch.bincount(local, minlength=experts).to(torch.int32)
        starts = torch.cumsum(counts, 0) - counts
        src_offsets = torch.zeros(experts, world, dtype=torch.int32)
        for src in range(world):
            src_offsets[:, src] = torch.bincount(local[rank_of < src], minlength=experts).to(torch.int32)
        meta = (
            rank_of.to(torch.int32),
            token_of.to(torch.int32),
            expert_of.to(torch.int32),
            weight_of,
            slot_of.to(torch.int32),
        )
        kept = fp8 and not dequantize
        recv_scales = rows_scales if kept else None
        if mode == "normal":
            recv_x = rows_q.view(FP8_DTYPE) if kept else rows_x
            offsets = starts.to(torch.int32)
        else:
            assert max_tokens_per_rank is not None  # check_inputs
            capacity = world * max_tokens_per_rank
            column = torch.arange(order.shape[0]) - starts[local]  # the row's place within its expert
            if kept:
                recv_q = torch.zeros(experts, capacity, hidden, dtype=torch.uint8)
                recv_q[local, column] = rows_q
                recv_x = recv_q.view(FP8_DTYPE)
                recv_scales = torch.zeros(experts, capacity, groups, dtype=torch.float32)
                recv_scales[local, column] = rows_scales
            else:
                recv_x = torch.zeros(experts, capacity, hidden, dtype=dtype)
                recv_x[local, column] = rows_x
            padded = []
            for values, fill in zip(meta, (-1, -1, -1, 0.0, -1), strict=True):
                full = torch.full((experts, capacity), fill, dtype=values.dtype)
                full[local, column] = values
                padded.append(full)
            meta = tuple(padded)
            offsets = (torch.arange(experts) * capacity).to(torch.int32)
        handle = MoeHandle(
            mode=mode,
            rank=dest,
            world_size=world,
            num_experts=num_experts,
            num_tokens=xs[dest].shape[0],
            hidden=hidden,
            dtype=dtype,
            max_tokens_per_rank=max_tokens_per_rank,
            expert_counts=counts,
            expert_offsets=offsets,
            src_offsets=src_offsets,
            recv_src_rank=meta[0],
            recv_src_token=meta[1],
            recv_expert=meta[2],
            recv_weights=meta[3],
            recv_topk_slot=meta[4],
            num_recv_tokens=tokens,
            fp8=fp8,
            recv_scales=recv_scales,
        )
        results.append((recv_x, handle))
    return results


def reference_combine(
    ys: Sequence[torch.Tensor],
    handles: Sequence[MoeHandle],
    round_partial: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """``moe_combine`` on every rank at once: ``ys[d]`` is rank ``d``'s expert output, one row per row it received
    (``handles[d]``'s layout). Returns each home rank's [T, H] result in x's dtype: per token, each rank's partial
    ``sum_k w_k * y_k`` over its rows in k order, then the partials added in rank order, all in fp32.

    ``round_partial``: applied to each rank's fp32 partials (a [T, H] fp32 tensor, zero where the rank holds none of
    the token's experts) before they are added, returning fp32, e.g. ``lambda p: p.to(torch.bfloat16).float()`` for
    the op's default, ``MoeConfig(combine_partials="input")``, with bf16 ``y`` on GPUs (rounded to nearest even);
    None (no rounding) gives ``MoeConfig(combine_partials="fp32")``'s sums. Raises :class:`MoeError` unless there is
    one ``y`` per handle."""
    world = len(handles)
    if len(ys) != world:
        raise MoeError("reference_combine: give one y per rank's handle")
    # Each rank's rows and meta flattened once; per home rank only the rows it holds are widened to fp32 (a
    # low-latency y is mostly capacity padding: widening all of it per home rank cost seconds at 4 ranks, H = 7168).
    held = []
    for handle, y in zip(handles, ys, strict=True):
        src, token = handle.recv_src_rank.reshape(-1).long(), handle.recv_src_token.reshape(-1).long()
        weight, slot = handle.recv_weights.reshape(-1), handle.recv_topk_slot.reshape(-1).long()
        held.append((y.reshape(-1, handle.hidden).cpu(), src, token, weight, slot))
    outs = []
    for home in range(world):
        total = torch.zeros(handles[home].num_tokens, handles[home].hidden, dtype=torch.float32)
        for y, src, token, weight, slot in held:
            mine = (src == home).nonzero().squeeze(1)
            mine = mine[torch.sort(token[mine] * 64 + slot[mine], stable=True).indices]  # each token's rows in k order
            rows, tokens, weights = y[mine].float(), token[mine].tolist(), weight[mine]
            partial = torch.zeros_like(total)
            for at, t in enumerate(tokens):
                partial[t] += weights[at] * rows[at]
            total += partial if round_partial is None else round_partial(partial)
        outs.append(total.to(handles[home].dtype))
    return outs
