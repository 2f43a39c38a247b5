"""Probe (session 16, jobs 5 and 7): where flash_decode's fixed cost goes, from %globaltimer stamps per phase, and
whether dedicated combiner programs (each a quarter of the head dim) beat split 0 combining everything.

It copies the kernel of commit 7048351 (split 0 combines; ``_arrive`` / ``_role`` / ``_depart`` of that commit) with
stamps added, and a variant with ``C`` combiner programs per group; both use that commit's helpers, so it runs there:

    git checkout 7048351 && cp docs/results/probes/2026-11-26-flash_decode_timeline.py bench/fd_timeline.py
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        torchrun --nproc-per-node=2 bench/fd_timeline.py

Ran on 2 x NVIDIA H100 80GB HBM3, 2026-11-26 ~00:45 UTC (job 5: the stamps, cases (1, 64k), (1, 1k), (8, 64k); job
7: this file, both variants graphed). Numbers: docs/results/2026-11-26-2xH100-session16.md, section 3. The stamps
are taken in a CUDA graph of 12 back-to-back calls, replayed; per call, times are from the call's first program
start, medians over calls 3-12. The variant became the kernel of commit 7aa1bb7.
"""

import importlib
import statistics

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops.all_reduce import _notify_every_rank, graphed_us
from triton_dist.testing import rank0_print, setup_distributed

fd = importlib.import_module("triton_dist.ops.flash_decode")


@triton.jit
def _now():
    pid = tl.program_id(0)
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [pid], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _stamped_kernel(q_ptr, k_ptr, v_ptr, len_ptr, out_ptr, rec_ptr, flags_ptr, state_ptr, groups, kv_heads, local_len,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, stride_ob, stride_oh,
    sm_scale, rec_parity_stride, flag_parity_stride, stamps_ptr,
    SPLITS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    WIDE: tl.constexpr, RG: tl.constexpr, CHUNK: tl.constexpr, WORLD: tl.constexpr):  # fmt: skip
    """7048351's _flash_decode_kernel, with stamps: start, ticket, attention, push + flag, wait, combine, end."""
    t0 = _now()
    me = dl.rank()
    ranks = dl.num_ranks()
    ticket, epoch = fd._arrive(state_ptr)
    t1 = _now()
    group, split = fd._role(ticket, groups, SPLITS)
    seq = (group // kv_heads).to(tl.int64)
    head = (group % kv_heads).to(tl.int64)
    partial, lse = fd._split_attention(q_ptr, k_ptr, v_ptr, len_ptr, seq, head, split, local_len,
        stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, sm_scale,
        SPLITS, GROUP, ROWS, D, BLOCK_N, WIDE)  # fmt: skip
    t2 = _now()
    RECORD: tl.constexpr = GROUP * D + 16
    records, flags = fd._epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride)
    slot = fd._slot(group, me, ranks, split, SPLITS)
    for peer in range(0, ranks):
        fd._store_record(dl.symm_at(records + slot * RECORD, peer), partial, lse, GROUP, ROWS, D)
    _notify_every_rank(flags + slot, epoch, ranks, WORLD)
    t3 = _now()
    t4 = t3
    t5 = t3
    if split == 0:
        first = fd._slot(group, 0, ranks, 0, SPLITS)
        token = dl.wait(flags + first, ranks * SPLITS, "sys", "acquire", waitValue=epoch)
        base = dl.consume_token(records + first * RECORD, token)
        t4 = _now()
        result = fd._combine_records(base, ranks * SPLITS, GROUP, RG, D, CHUNK)
        fd._store_output(out_ptr, seq, head, stride_ob, stride_oh, result, GROUP, RG, D)
        t5 = _now()
    fd._depart(state_ptr, epoch, groups * SPLITS)
    t6 = _now()
    row = stamps_ptr + ticket * 8
    tl.store(row + 0, t0)
    tl.store(row + 1, t1)
    tl.store(row + 2, t2)
    tl.store(row + 3, t3)
    tl.store(row + 4, t4)
    tl.store(row + 5, t5)
    tl.store(row + 6, t6)
    tl.store(row + 7, split.to(tl.int64))


@triton.jit
def _combine_slice(base, count, cols0, GROUP: tl.constexpr, RG: tl.constexpr, D: tl.constexpr, DS: tl.constexpr,
                   NREC: tl.constexpr):  # fmt: skip
    """Columns [cols0, cols0 + DS) of the combine of ``count`` <= NREC records, all loaded in one step."""
    RECORD: tl.constexpr = GROUP * D + 16
    index = tl.arange(0, NREC)
    rows = tl.arange(0, RG)
    dims = cols0 + tl.arange(0, DS)
    row_ok = rows < GROUP
    ok = row_ok[:, None] & (index < count)[None, :]
    records = base + index[None, :] * RECORD
    lse = tl.load(records + GROUP * D + rows[:, None], mask=ok, other=float("-inf"))
    outs = tl.load(records[:, :, None] + rows[:, None, None] * D + dims[None, None, :], mask=ok[:, :, None], other=0.0)
    best = tl.max(lse, 1, keep_dims=True)
    empty = best == float("-inf")
    w = tl.where(empty, 0.0, tl.exp(lse - best))
    weight = tl.sum(w, 1, keep_dims=True)
    total = tl.sum(w[:, :, None] * outs, 1, keep_dims=True)
    return tl.sum(total / tl.where(weight > 0, weight, 1.0)[:, :, None], 1)


@triton.jit
def _combiners_kernel(q_ptr, k_ptr, v_ptr, len_ptr, out_ptr, rec_ptr, flags_ptr, state_ptr, groups, kv_heads, local_len,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, stride_ob, stride_oh,
    sm_scale, rec_parity_stride, flag_parity_stride, stamps_ptr,
    SPLITS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    WIDE: tl.constexpr, RG: tl.constexpr, CHUNK: tl.constexpr, WORLD: tl.constexpr, C: tl.constexpr,
    NREC: tl.constexpr):  # fmt: skip
    """The variant: every split produces; the last ``groups * C`` tickets combine a quarter (C = 4) of the columns."""
    t0 = _now()
    me = dl.rank()
    ranks = dl.num_ranks()
    ticket, epoch = fd._arrive(state_ptr)
    t1 = _now()
    producers = groups * SPLITS
    RECORD: tl.constexpr = GROUP * D + 16
    records, flags = fd._epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride)
    t2 = t1
    t3 = t1
    t4 = t1
    t5 = t1
    role = ticket * 0 - 1
    if ticket < producers:
        group = ticket // SPLITS
        split = ticket % SPLITS
        seq = (group // kv_heads).to(tl.int64)
        head = (group % kv_heads).to(tl.int64)
        partial, lse = fd._split_attention(q_ptr, k_ptr, v_ptr, len_ptr, seq, head, split, local_len,
            stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, sm_scale,
            SPLITS, GROUP, ROWS, D, BLOCK_N, WIDE)  # fmt: skip
        t2 = _now()
        slot = fd._slot(group, me, ranks, split, SPLITS)
        for peer in range(0, ranks):
            fd._store_record(dl.symm_at(records + slot * RECORD, peer), partial, lse, GROUP, ROWS, D)
        _notify_every_rank(flags + slot, epoch, ranks, WORLD)
        t3 = _now()
        role = split + 1
    else:
        group = (ticket - producers) // C
        c = (ticket - producers) % C
        seq = (group // kv_heads).to(tl.int64)
        head = (group % kv_heads).to(tl.int64)
        first = fd._slot(group, 0, ranks, 0, SPLITS)
        token = dl.wait(flags + first, ranks * SPLITS, "sys", "acquire", waitValue=epoch)
        base = dl.consume_token(records + first * RECORD, token)
        t4 = _now()
        DS: tl.constexpr = D // C
        result = _combine_slice(base, ranks * SPLITS, c * DS, GROUP, RG, D, DS, NREC)
        rows = tl.arange(0, RG)
        dims = c * DS + tl.arange(0, DS)
        out_ptrs = out_ptr + seq * stride_ob + (head * GROUP + rows)[:, None] * stride_oh + dims[None, :]
        tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty), mask=(rows < GROUP)[:, None])
        t5 = _now()
        role = 0
    fd._depart(state_ptr, epoch, groups * (SPLITS + C))
    t6 = _now()
    row = stamps_ptr + ticket * 8
    tl.store(row + 0, t0)
    tl.store(row + 1, t1)
    tl.store(row + 2, t2)
    tl.store(row + 3, t3)
    tl.store(row + 4, t4)
    tl.store(row + 5, t5)
    tl.store(row + 6, t6)
    tl.store(row + 7, role.to(tl.int64))


def main():
    world = setup_distributed(heap_size="1G")
    W = world.world_size
    for batch, ctx in ((1, 64 << 10), (1, 128 << 10), (8, 64 << 10), (1, 16 << 10)):
        q = torch.randn(batch, 64, 128, device="cuda").bfloat16()
        k = torch.randn(batch, 8, ctx, 128, device="cuda").bfloat16()
        v = torch.randn(batch, 8, ctx, 128, device="cuda").bfloat16()
        lengths = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
        out = torch.empty_like(q)
        prepared = fd._prepare(q, k, v, lengths, None, None)
        grid, named, options = fd.launch_args(q, k, v, lengths, out, prepared, W)
        # Both variants graphed on the same inputs (their stamps cost both alike); outputs compared.
        C = 4
        nrec = triton.next_power_of_2(W * named["SPLITS"])
        variants = {
            "split0": (_stamped_kernel, grid, {}),
            f"combiners{C}": (_combiners_kernel, (grid[0] + named["groups"] * C, 1, 1), {"C": C, "NREC": nrec}),
        }
        for vname, (kern, vgrid, extra) in variants.items():
            stamps1 = torch.zeros(vgrid[0], 8, dtype=torch.int64, device="cuda")
            out.fill_(float("nan"))
            kern[vgrid](**named, stamps_ptr=stamps1, **extra, **options)
            torch.cuda.synchronize()
            ok = not torch.isnan(out).any().item()

            def launch(kern=kern, vgrid=vgrid, extra=extra, s=stamps1, named=named, options=options):
                kern[vgrid](**named, stamps_ptr=s, **extra, **options)

            us = graphed_us(launch)
            rank0_print(f"RESULT B={batch} ctx/rank={ctx >> 10}k {vname}: graphed {us:.1f} us, output complete {ok}")
            if vname == "split0":
                ref = out.clone()
            else:
                diff = (out.float() - ref.float()).abs().max().item()
                rank0_print(f"RESULT B={batch} ctx/rank={ctx >> 10}k {vname}: max diff vs split0 {diff:.3g}")
        # The timeline of the split-0 kernel: a graph of `calls` launches, replayed, each call's stamps kept.
        programs = grid[0]
        calls = 12
        stamps = torch.zeros(calls, programs, 8, dtype=torch.int64, device="cuda")
        for _ in range(3):
            _stamped_kernel[grid](**named, stamps_ptr=stamps[0], **options)
        torch.cuda.synchronize()
        rt.barrier()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for c in range(calls):
                _stamped_kernel[grid](**named, stamps_ptr=stamps[c], **options)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        rt.barrier()
        g.replay()
        torch.cuda.synchronize()
        s = stamps.cpu()
        res = {}
        for c in range(2, calls):
            t = s[c].double() / 1000.0  # µs
            start = t[:, 0].min()
            comb = t[:, 7] == 0
            res.setdefault("kernel span (first start -> last end)", []).append(float(t[:, 6].max() - start))
            res.setdefault("ticket (t1-t0) median", []).append(float((t[:, 1] - t[:, 0]).median()))
            res.setdefault("last program start", []).append(float(t[:, 0].max() - start))
            res.setdefault("attention end, median", []).append(float((t[:, 2]).median() - start))
            res.setdefault("attention end, last", []).append(float(t[:, 2].max() - start))
            res.setdefault("push+notify (t3-t2) median", []).append(float((t[:, 3] - t[:, 2]).median()))
            res.setdefault("push+notify (t3-t2) max", []).append(float((t[:, 3] - t[:, 2]).max()))
            res.setdefault("last record flagged (max t3)", []).append(float(t[:, 3].max() - start))
            res.setdefault("combiner wait end, last", []).append(float(t[comb, 4].max() - start))
            res.setdefault("combine+store (t5-t4) median", []).append(float((t[comb, 5] - t[comb, 4]).median()))
            res.setdefault("combine end, last", []).append(float(t[comb, 5].max() - start))
            res.setdefault("depart (t6-t5) median", []).append(float((t[:, 6] - t[:, 5]).median()))
            if c > 2:
                prev = s[c - 1].double() / 1000.0
                res.setdefault("gap: previous call's last end -> this call's first start", []).append(
                    float(start - prev[:, 6].max())
                )
        for key, vals in res.items():
            print(
                f"RESULT rank {world.rank} B={batch} ctx/rank={ctx >> 10}k programs={programs}: {key}: "
                f"{statistics.median(vals):.2f} us",
                flush=True,
            )
        rt.barrier()


if __name__ == "__main__":
    main()
