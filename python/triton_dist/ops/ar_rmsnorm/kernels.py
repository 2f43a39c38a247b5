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

With ``FP8`` the normed row is quantized to e4m3 with a per-token scale: ``scale = max(max|normed| / 448,
FP8_MIN_SCALE)``, ``normed_fp8 = clamp(normed / scale, +-448)`` (round to nearest), both from the fp32 row; the
two-shot's owner gathers the quantized row in the residual's dtype (exact) and its scale as fp32 after the rows.

Every rank sums in the same order, so with the same ``residual`` and ``weight`` on every rank (tensor parallelism)
all ranks get bit-identical outputs. The norm: ``h = residual + sum_r x_r`` in fp32,
``normed = h * rsqrt(mean(h^2) + eps) * weight``; ``new_residual`` is ``h`` rounded to the dtype.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.ar_rmsnorm import config as cfg
from triton_dist.ops.common.flags import flag_round

FP8_MAX = tl.constexpr(cfg.FP8_MAX)
FP8_MIN_SCALE = tl.constexpr(cfg.FP8_MIN_SCALE)


@triton.jit
def _round_to_e4m3(v):
    """``v`` (fp32, |v| <= 448) rounded to the nearest e4m3 value (ties to even), still fp32: the step of v's binade
    ``[2^e, 2^(e + 1))`` is ``2^(e - 3)`` (3 mantissa bits), ``2^-9`` below ``2^-6`` (subnormals); scaling by the
    step's inverse is exact (a power of two) and ``(q + 1.5 * 2^23) - 1.5 * 2^23`` rounds ``|q| < 2^22`` to an
    integer, ties to even. The conversion to fp8 that follows is then exact, so it is the same on every target,
    Triton's interpreter included (whose fp8 conversion mis-rounds at binade edges and below 2^-6)."""
    exponent = (v.to(tl.int32, bitcast=True) >> 23) & 0xFF
    step = tl.maximum(exponent - 127, -6) - 3
    q = v * ((127 - step) << 23).to(tl.float32, bitcast=True)
    q = (q + 12582912.0) - 12582912.0
    return q * ((127 + step) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _norm_row(
    acc,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
    row,
    offs,
    mask,
    eps,
    hidden,
    FP8: tl.constexpr,
):
    """Add the residual row ``row`` to the fp32 sum ``acc``, store ``new_residual`` and the normed row (``FP8``:
    quantized to e4m3 with the row's scale, stored at ``scale_ptr + row``); returns (the normed row as the two-shot
    gathers it: in the residual's dtype, an e4m3 value exactly; the new residual row; the scale, 1.0 without FP8)."""
    h = acc + tl.load(residual_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    h = tl.where(mask, h, 0.0)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / hidden + eps)
    weight = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dtype = new_residual_ptr.dtype.element_ty
    y = h * rstd * weight
    if FP8:
        scale = tl.maximum(tl.max(tl.abs(y), axis=0) / FP8_MAX, FP8_MIN_SCALE)
        quantized = _round_to_e4m3(tl.clamp(y / scale, -FP8_MAX, FP8_MAX)).to(normed_ptr.dtype.element_ty)
        tl.store(normed_ptr + row * hidden + offs, quantized, mask=mask)
        tl.store(scale_ptr + row, scale)
        normed = quantized.to(dtype)  # exact: every e4m3 value is a bf16, fp16 and fp32 value
    else:
        scale = 1.0
        normed = y.to(dtype)
        tl.store(normed_ptr + row * hidden + offs, normed, mask=mask)
    residual = h.to(dtype)
    tl.store(new_residual_ptr + row * hidden + offs, residual, mask=mask)
    return normed, residual, scale


@triton.jit(do_not_specialize=["rows", "chunk"])  # one compiled kernel for every row count of a hidden size
def _ar_rmsnorm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
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
    FP8: tl.constexpr,
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
        scales = (gathered + ranks * 2 * BLOCK_H).to(tl.pointer_type(tl.float32), bitcast=True)  # [ranks] (FP8)
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
                normed, residual, scale = _norm_row(
                    acc,
                    residual_ptr,
                    weight_ptr,
                    normed_ptr,
                    new_residual_ptr,
                    scale_ptr,
                    row,
                    offs,
                    mask,
                    eps,
                    hidden,
                    FP8,
                )
                for peer in range(0, ranks):
                    if peer != me:
                        mine = gathered + me * 2 * BLOCK_H + offs
                        tl.store(dl.symm_at(mine, peer), normed, mask=mask)
                        tl.store(dl.symm_at(mine + BLOCK_H, peer), residual, mask=mask)
                        if FP8:
                            tl.store(dl.symm_at(scales + me, peer), scale)
            landed = flag_round(slot_flags + ranks, me, epoch, ranks, gathered, WORLD)
            for owner in range(0, ranks):
                row = owner * chunk + t
                if owner != me and row < rows:
                    mask = in_row
                    got = landed + owner * 2 * BLOCK_H + offs
                    gathered_row = tl.load(got, mask=mask)
                    tl.store(normed_ptr + row * hidden + offs, gathered_row.to(normed_ptr.dtype.element_ty), mask=mask)
                    tl.store(new_residual_ptr + row * hidden + offs, tl.load(got + BLOCK_H, mask=mask), mask=mask)
                    if FP8:  # after the wait: the scales' address comes from the consumed one
                        landed_scales = (landed + ranks * 2 * BLOCK_H).to(tl.pointer_type(tl.float32), bitcast=True)
                        tl.store(scale_ptr + row, tl.load(landed_scales + owner))
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
            _norm_row(
                acc,
                residual_ptr,
                weight_ptr,
                normed_ptr,
                new_residual_ptr,
                scale_ptr,
                t,
                offs,
                in_row,
                eps,
                hidden,
                FP8,
            )
    tl.store(epochs_ptr + slot, epoch)
