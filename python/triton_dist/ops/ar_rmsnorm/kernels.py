"""The fused all-reduce + residual add + RMSNorm kernel: one launch, no host synchronization (CUDA-graph capturable).

Rows are the unit: a program moves whole rows (``BLOCK_H`` >= the hidden size), ``ROUND_ROWS`` of them per flag
round (``config.round_rows``: one while the programs outnumber a round's rows, more for large calls, so a program
pays fewer flag rounds), and norms each row by itself, so the norm's sum of squares needs no exchange between
programs. Each program owns slot ``program_id`` of a per-program symmetric workspace
(``ops/common/slot_workspace.py``): a device-side epoch counter and flags that only take epoch values, exactly as
the all-reduce's kernels (``ops/all_reduce/kernels.py``), whose ordering arguments carry over round for round:

- **one-shot push** (``TWO_SHOT`` False): the program pushes its rows of ``x`` into row block ``me`` of every
  peer's inbox (double-buffered by epoch parity), runs a flag round (release / acquire), then per row sums the
  ranks' rows in rank order in fp32, adds this rank's ``residual`` row and writes ``new_residual`` and the normed
  row.
- **two-shot** (``TWO_SHOT`` True): rank ``r`` owns rows ``[r * chunk, (r + 1) * chunk)``. The program pushes its
  rows of every owner's chunk into that owner's inbox, flag round; the owner sums in rank order, adds its
  ``residual`` row, writes ``new_residual`` and pushes the new residual row (in the dtype) into every rank's gather
  buffer (its own included), flag round; every rank writes the other owners' new residual rows and norms every
  row of the round from its gather buffer (the same code for every row, so the same bits on every rank). Single
  buffers (the all-reduce's two-shot argument). Each rank receives one row per row of the message, as the
  all-reduce's two-shot gathers: the norm travels as its input, not as a second row.

The norm: ``h = residual + sum_r x_r`` in fp32, ``new_residual = h`` rounded to the dtype, ``normed =
new_residual * rsqrt(mean(new_residual^2) + eps) * weight`` in fp32 (the norm of the residual the caller gets, as
torch's add then RMSNorm computes it; for fp32 the two are the same). Every rank sums in the same order and norms
the same rounded rows, so with the same ``residual`` and ``weight`` on every rank (tensor parallelism) all ranks
get bit-identical outputs.

With ``FP8`` the normed row is quantized to e4m3 with a per-token scale: ``scale = max(max|normed| / 448,
FP8_MIN_SCALE)``, ``normed_fp8 = clamp(normed / scale, +-448)`` rounded to nearest (even), both from the fp32 row.
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
def _new_residual(acc, residual_ptr, new_residual_ptr, row, offs, mask, hidden):
    """``acc`` (the fp32 sum of the ranks' rows) plus the residual row ``row``, rounded to the dtype: stored as
    ``new_residual``'s row and returned (0 past the hidden size)."""
    h = acc + tl.load(residual_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    new = tl.where(mask, h, 0.0).to(new_residual_ptr.dtype.element_ty)
    tl.store(new_residual_ptr + row * hidden + offs, new, mask=mask)
    return new


@triton.jit
def _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, mask, eps, hidden, FP8: tl.constexpr):
    """Norm the new residual row ``new`` (0 past the hidden size) in fp32 and store it as ``normed``'s row ``row``:
    in ``normed``'s dtype, or (``FP8``) quantized to e4m3 with the row's scale stored at ``scale_ptr + row``."""
    h = new.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / hidden + eps)
    y = h * rstd * tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if FP8:
        scale = tl.maximum(tl.max(tl.abs(y), axis=0) / FP8_MAX, FP8_MIN_SCALE)
        quantized = _round_to_e4m3(tl.clamp(y / scale, -FP8_MAX, FP8_MAX))
        tl.store(normed_ptr + row * hidden + offs, quantized.to(normed_ptr.dtype.element_ty), mask=mask)
        tl.store(scale_ptr + row, scale)
    else:
        tl.store(normed_ptr + row * hidden + offs, y.to(normed_ptr.dtype.element_ty), mask=mask)


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
    ROUND_ROWS: tl.constexpr,
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
    ROUND: tl.constexpr = ROUND_ROWS * BLOCK_H  # one rank's rows of one round in a buffer
    if TWO_SHOT:
        inbox = slot_data  # [ranks][ROUND_ROWS][BLOCK_H]: the round's rows of my chunk from each rank
        gathered = inbox + ranks * ROUND  # [ranks][ROUND_ROWS][BLOCK_H]: each owner's new residual rows
        for t in range(slot, tl.cdiv(chunk, ROUND_ROWS), tl.num_programs(0)):
            epoch += 1
            first = t * ROUND_ROWS  # the round's first row within each chunk
            for peer in range(0, ranks):
                remote = dl.symm_at(inbox + me * ROUND, peer)
                for r in range(0, ROUND_ROWS):
                    row = peer * chunk + first + r
                    mask = in_row & (first + r < chunk) & (row < rows)
                    tl.store(remote + r * BLOCK_H + offs, tl.load(x_ptr + row * hidden + offs, mask=mask), mask=mask)
            arrived = flag_round(slot_flags, me, epoch, ranks, inbox, WORLD)
            for r in range(0, ROUND_ROWS):
                row = me * chunk + first + r
                if (first + r < chunk) & (row < rows):
                    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
                    for peer in range(0, ranks):  # rank order: the same sum on every rank
                        acc += tl.load(arrived + peer * ROUND + r * BLOCK_H + offs, mask=in_row, other=0.0).to(
                            tl.float32
                        )
                    new = _new_residual(acc, residual_ptr, new_residual_ptr, row, offs, in_row, hidden)
                    for peer in range(0, ranks):  # every rank's gather buffer, mine included
                        tl.store(dl.symm_at(gathered + me * ROUND + r * BLOCK_H + offs, peer), new, mask=in_row)
            landed = flag_round(slot_flags + ranks, me, epoch, ranks, gathered, WORLD)
            # Every rank norms every row of the round from its gather buffer, in the same code (its own rows too):
            # the same instructions on the same values, so the same bits on every rank.
            for owner in range(0, ranks):
                for r in range(0, ROUND_ROWS):
                    row = owner * chunk + first + r
                    if (first + r < chunk) & (row < rows):
                        new = tl.load(landed + owner * ROUND + r * BLOCK_H + offs, mask=in_row, other=0.0)
                        if owner != me:
                            tl.store(new_residual_ptr + row * hidden + offs, new, mask=in_row)
                        _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, in_row, eps, hidden, FP8)
    else:
        for t in range(slot, tl.cdiv(rows, ROUND_ROWS), tl.num_programs(0)):
            epoch += 1
            parity = epoch % 2
            inbox = slot_data + parity * ranks * ROUND  # [2 parities][ranks][ROUND_ROWS][BLOCK_H]
            first = t * ROUND_ROWS
            for peer in range(0, ranks):
                if peer != me:
                    remote = dl.symm_at(inbox + me * ROUND, peer)
                    for r in range(0, ROUND_ROWS):
                        mask = in_row & (first + r < rows)
                        mine = tl.load(x_ptr + (first + r) * hidden + offs, mask=mask)
                        tl.store(remote + r * BLOCK_H + offs, mine, mask=mask)
            arrived = flag_round(slot_flags + parity * ranks, me, epoch, ranks, inbox, WORLD)
            for r in range(0, ROUND_ROWS):
                row = first + r
                if row < rows:
                    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
                    for peer in range(0, ranks):  # rank order: the same sum on every rank
                        if peer == me:
                            acc += tl.load(x_ptr + row * hidden + offs, mask=in_row, other=0.0).to(tl.float32)
                        else:
                            got = tl.load(arrived + peer * ROUND + r * BLOCK_H + offs, mask=in_row, other=0.0)
                            acc += got.to(tl.float32)
                    new = _new_residual(acc, residual_ptr, new_residual_ptr, row, offs, in_row, hidden)
                    _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, in_row, eps, hidden, FP8)
    tl.store(epochs_ptr + slot, epoch)
