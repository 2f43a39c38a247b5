"""The fused all-reduce + residual add + RMSNorm kernel: one launch, no host synchronization (CUDA-graph capturable).

Rows are the unit: a program moves whole rows (``BLOCK_H`` >= the hidden size, one row per flag round), so the
norm's sum of squares needs no exchange between programs. Each program owns slot ``program_id`` of a
per-program symmetric workspace (``ops/common/slot_workspace.py``): a device-side epoch counter and flags that only
take epoch values, exactly as the all-reduce's kernels (``ops/all_reduce/kernels.py``), whose ordering arguments
carry over row for row:

- **one-shot push** (``TWO_SHOT`` False): the program pushes row ``t`` of ``x`` into row ``me`` of every peer's
  inbox (double-buffered by epoch parity), runs a flag round (release / acquire), sums the ranks' rows in rank
  order in fp32, adds this rank's ``residual`` row, and writes ``new_residual`` and the normed row.
- **two-shot** (``TWO_SHOT`` True): rank ``r`` owns rows ``[r * chunk, (r + 1) * chunk)``. The program pushes row
  ``t`` of every owner's chunk into that owner's inbox, flag round; the owner sums in rank order, adds its
  ``residual`` row, norms, writes both rows here and pushes them into every peer's gather buffer, flag round; every
  rank copies the other owners' rows out. Single buffers (the all-reduce's two-shot argument).

Every rank sums in the same order, so with the same ``residual`` and ``weight`` on every rank (tensor parallelism)
all ranks get bit-identical outputs. The norm: ``h = residual + sum_r x_r`` in fp32,
``normed = h * rsqrt(mean(h^2) + eps) * weight``; ``new_residual`` is ``h`` rounded to the dtype.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.flags import flag_round


@triton.jit
def _norm_row(acc, residual_ptr, weight_ptr, normed_ptr, new_residual_ptr, row, offs, mask, eps, hidden):
    """Add the residual row ``row`` to the fp32 sum ``acc``, store ``new_residual`` and the normed row; returns
    the two rows in the output dtype (for the two-shot's gather)."""
    h = acc + tl.load(residual_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    h = tl.where(mask, h, 0.0)
    scale = tl.rsqrt(tl.sum(h * h, axis=0) / hidden + eps)
    weight = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dtype = normed_ptr.dtype.element_ty
    normed = (h * scale * weight).to(dtype)
    residual = h.to(dtype)
    tl.store(new_residual_ptr + row * hidden + offs, residual, mask=mask)
    tl.store(normed_ptr + row * hidden + offs, normed, mask=mask)
    return normed, residual


@triton.jit
def _ar_rmsnorm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    new_residual_ptr,
    eps,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    rows,
    hidden,
    chunk,
    flags_stride,
    REGION: tl.constexpr,
    BLOCK_H: tl.constexpr,
    TWO_SHOT: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION
    slot_flags = flags_ptr + slot * flags_stride
    offs = tl.arange(0, BLOCK_H)
    in_row = offs < hidden
    if TWO_SHOT:
        inbox = slot_data  # [ranks][BLOCK_H]: row t of my chunk from each rank
        gathered = inbox + ranks * BLOCK_H  # [ranks][2][BLOCK_H]: (normed, new_residual) of row t of each owner
        for t in range(slot, chunk, tl.num_programs(0)):
            epoch += 1
            for peer in range(0, ranks):
                row = peer * chunk + t
                mask = in_row & (row < rows)
                remote = dl.symm_at(inbox + me * BLOCK_H + offs, peer)
                tl.store(remote, tl.load(x_ptr + row * hidden + offs, mask=mask), mask=mask)
            arrived = flag_round(slot_flags, me, epoch, ranks, inbox, WORLD)
            row = me * chunk + t
            mask = in_row & (row < rows)
            acc = tl.zeros([BLOCK_H], dtype=tl.float32)
            for peer in range(0, ranks):
                acc += tl.load(arrived + peer * BLOCK_H + offs, mask=mask, other=0.0).to(tl.float32)
            if row < rows:
                normed, residual = _norm_row(
                    acc, residual_ptr, weight_ptr, normed_ptr, new_residual_ptr, row, offs, mask, eps, hidden
                )
                for peer in range(0, ranks):
                    if peer != me:
                        mine = gathered + me * 2 * BLOCK_H + offs
                        tl.store(dl.symm_at(mine, peer), normed, mask=mask)
                        tl.store(dl.symm_at(mine + BLOCK_H, peer), residual, mask=mask)
            landed = flag_round(slot_flags + ranks, me, epoch, ranks, gathered, WORLD)
            for owner in range(0, ranks):
                row = owner * chunk + t
                if owner != me and row < rows:
                    mask = in_row
                    got = landed + owner * 2 * BLOCK_H + offs
                    tl.store(normed_ptr + row * hidden + offs, tl.load(got, mask=mask), mask=mask)
                    tl.store(new_residual_ptr + row * hidden + offs, tl.load(got + BLOCK_H, mask=mask), mask=mask)
    else:
        for t in range(slot, rows, tl.num_programs(0)):
            epoch += 1
            parity = epoch % 2
            inbox = slot_data + parity * ranks * BLOCK_H  # [2 parities][ranks][BLOCK_H]
            mine = tl.load(x_ptr + t * hidden + offs, mask=in_row)
            for peer in range(0, ranks):
                if peer != me:
                    tl.store(dl.symm_at(inbox + me * BLOCK_H + offs, peer), mine, mask=in_row)
            arrived = flag_round(slot_flags + parity * ranks, me, epoch, ranks, inbox, WORLD)
            acc = tl.zeros([BLOCK_H], dtype=tl.float32)
            for peer in range(0, ranks):  # rank order: the same sum on every rank
                if peer == me:
                    acc += mine.to(tl.float32)
                else:
                    acc += tl.load(arrived + peer * BLOCK_H + offs, mask=in_row, other=0.0).to(tl.float32)
            _norm_row(acc, residual_ptr, weight_ptr, normed_ptr, new_residual_ptr, t, offs, in_row, eps, hidden)
    tl.store(epochs_ptr + slot, epoch)
