"""The torch reference of ``moe_dispatch`` / ``moe_combine``: one process, every rank's inputs given as lists.

It defines the layouts the kernels produce (see :class:`~triton_dist.ops.moe.config.MoeHandle`) and the order in
which combine adds: for a token of home rank ``s``, each rank ``d`` holding some of its experts first sums its own
rows ``w_k * y_k`` in k order (fp32), then the home rank adds those per-rank partials in rank order (fp32) and
casts to ``x``'s dtype. The tests compare the kernels against it; it needs no GPU and no triton_dist world.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from triton_dist.ops.moe.config import MoeError, MoeHandle, check_inputs, local_experts


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
) -> list[tuple[torch.Tensor, MoeHandle]]:
    """``moe_dispatch`` on every rank at once: ``xs[r]``, ``topk_idxs[r]``, ``topk_weights[r]`` are rank ``r``'s
    arguments (the world size is ``len(xs)``). Returns rank ``r``'s ``(recv_x, handle)`` at index ``r``.

    Raises :class:`MoeError` as the op does: bad arguments, ranks whose H or dtype differ, and an expert id
    outside ``[-1, E)`` (which the kernels report through ``MoeHandle.status`` instead).
    """
    world = len(xs)
    if world == 0 or not len(topk_idxs) == len(topk_weights) == world:
        raise MoeError("reference_dispatch: give one x, topk_idx and topk_weights per rank (equal, non-empty lists)")
    for r in range(world):
        check_inputs(xs[r], topk_idxs[r], topk_weights[r], num_experts, world, mode, max_tokens_per_rank)
        if xs[r].shape[1] != xs[0].shape[1] or xs[r].dtype != xs[0].dtype:
            raise MoeError(
                f"moe_dispatch: ranks called with different inputs (rank 0: x {xs[0].dtype} H={xs[0].shape[1]}; "
                f"rank {r}: x {xs[r].dtype} H={xs[r].shape[1]})"
            )
        _check_ids(r, topk_idxs[r], num_experts)
    experts = local_experts(num_experts, world)
    hidden, dtype = xs[0].shape[1], xs[0].dtype
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
        for src in range(world):
            mine = rank_of == src
            weight_of[mine] = topk_weights[src].float()[token_of[mine], slot_of[mine]]
            rows_x[mine] = xs[src][token_of[mine]].cpu().to(dtype)
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
        if mode == "normal":
            recv_x = rows_x
            offsets = starts.to(torch.int32)
        else:
            assert max_tokens_per_rank is not None  # check_inputs
            capacity = world * max_tokens_per_rank
            recv_x = torch.zeros(experts, capacity, hidden, dtype=dtype)
            column = torch.arange(order.shape[0]) - starts[local]  # the row's place within its expert
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
        )
        results.append((recv_x, handle))
    return results


def reference_combine(ys: Sequence[torch.Tensor], handles: Sequence[MoeHandle]) -> list[torch.Tensor]:
    """``moe_combine`` on every rank at once: ``ys[d]`` is rank ``d``'s expert output, one row per row it received
    (``handles[d]``'s layout). Returns each home rank's [T, H] result in x's dtype: per token, each rank's partial
    ``sum_k w_k * y_k`` over its rows in k order, then the partials added in rank order, all in fp32."""
    world = len(handles)
    if len(ys) != world:
        raise MoeError("reference_combine: give one y per rank's handle")
    outs = []
    for home in range(world):
        total = torch.zeros(handles[home].num_tokens, handles[home].hidden, dtype=torch.float32)
        for d in range(world):
            handle, y = handles[d], ys[d].reshape(-1, handles[d].hidden).cpu().float()
            src, token = handle.recv_src_rank.reshape(-1).long(), handle.recv_src_token.reshape(-1).long()
            weight, slot = handle.recv_weights.reshape(-1), handle.recv_topk_slot.reshape(-1).long()
            mine = (src == home).nonzero().squeeze(1)
            key = token[mine] * 64 + slot[mine]  # each token's rows here in k order
            partial = torch.zeros_like(total)
            for row in mine[torch.sort(key, stable=True).indices].tolist():
                partial[token[row]] += weight[row] * y[row]
            total += partial
        outs.append(total.to(handles[home].dtype))
    return outs
