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

**The layout is fixed per workspace, never per call.** A slot's region is split into halves (one-shot: the two
epoch parities; two-shot: the inbox and the gather buffer) of one block per sender (``RANK_STRIDE`` elements, from
the region's size), and a round's rows fill the start of a block. The ordering arguments only say that a word of
one half is not rewritten before its readers are done with it; they say nothing about a word that belongs to one
half in one call and to the other half in the next. When the strides followed the call's rows per round (as they
did, and as the all-reduce's still do), a call with fewer rows per round than the previous call on the same slot
put its other parity, or its inbox, inside the previous call's half: a peer that passed its flag round could push
the next call's rows over rows this rank was still reading (``test_a_peer_ahead_by_a_call_overwrites_nothing``).

The norm: ``h = residual + sum_r x_r`` in fp32, ``new_residual = h`` rounded to the dtype, ``normed =
new_residual * rsqrt(mean(new_residual^2) + eps) * weight`` in fp32 (the norm of the residual the caller gets, as
torch's add then RMSNorm computes it; for fp32 the two are the same). Every rank sums in the same order and norms
the same rounded rows, so with the same ``residual`` and ``weight`` on every rank (tensor parallelism) all ranks
get bit-identical outputs.

The **LL one-shot** (``_ar_rmsnorm_ll_kernel``, config "one_shot_ll"; low latency, never chosen by default) is
``all_reduce``'s "one_shot_ll" with the norm after the sum, built from its device helpers
(``ops/all_reduce/kernels.py``, whose docstring has the memory-ordering argument): no flag round; each row travels
as 8-byte words, the call's epoch in the high 32 bits and 32 bits of the row (two bf16 / fp16 elements, one fp32)
in the low. The grid is ``groups x SLICES`` programs (``config.ll_launch``): a group's ``ROUND_ROWS`` rows are
split into ``SLICES`` slices of ``BLOCK_W / SLICES`` words, one per program, so that at small M the row's pushes
are spread over several SMs (all_reduce's LL spreads a message over many programs; one program per row made the
fused op's LL push a 32 KiB row from one SM). Program ``(g, s)`` pushes slice ``s`` of its group's rows into row
block ``me`` of every peer's buffer of group ``g`` (epoch parity double-buffered), then per row polls the *whole*
row's words of each peer (every slice, each pushed by the peer's program of that slice; they land in this rank's
own buffer, so the polls are local loads), sums in rank order, adds the residual and norms the whole row as above
(each program of the row computes the same bits: the same code on the same values), and stores only its slice of
``new_residual`` and ``normed`` (slice 0 the fp8 scale). x, the residual and the weight are loaded before the polls,
so they arrive while the words travel. Every program reads whole rows, so splits multiply those local reads:
``config.LL_SPLIT_PROGRAMS`` bounds the launch that splits.

The layout is fixed likewise: a group's region is 2 parities x W senders x ``RANK_WORDS`` words, whatever the
call's rows per round (else a call with another row count could overwrite, with its other parity, a word a slow
reader of the previous call still polls for, and that reader would wait forever).

Epochs: one counter per program (slot ``g * SLICES + s`` of the workspace of that ``SLICES``, ``op.py``); all
programs of a group use their slots in every call that uses the group, so their counters, and the epochs their
words carry, agree (and agree across ranks, which launch the same grid). The ordering argument of all_reduce's LL
carries over with "a group's programs" for "a program": a peer's program rewrites a word of parity ``p`` at epoch
``e + 2`` only in its call after one in which it observed words of epoch ``e + 1`` from this rank's programs of the
group, which each pushed after its fence, which follows (kernel boundary) every read of epoch ``e`` by every program
of this rank's previous call. One round per program per call (the argument's condition), so a call holds at most
``SLOTS x ROUND_ROWS`` rows. All programs of a group must be resident together (each waits for every slice): a group
is at most 16 consecutive programs, which the GPU dispatches in order. With the wait watchdog on (``WATCHED``) the
polls are bounded and a row with a missing word waits for it with ``dl.wait``, as the all-reduce's. Under the CPU
emulation (``EMULATED``: Triton's interpreter runs no inline PTX; every program a thread) the words are plain
8-byte stores and loads, and a missing word is awaited with ``dl.wait`` on its high half (``_ll_receive_emulated``).

The **LL one-shot with a single reader** (``_ar_rmsnorm_ll_reader_kernel``, ``config.ll_single_reader``; an option,
never the default) keeps that grid and push, but only program ``(g, 0)`` reads: it polls the whole row's words, sums,
adds the residual, norms the row in registers and writes the whole of both outputs (and the fp8 scale); programs
``(g, s > 0)`` push their slice and exit. The split kernel above has each of a row's ``SLICES`` programs poll the same
32 KiB of words and load the same x, residual and weight (hidden 8192 bf16): 16 SMs hammering one row's lines of
L2 while the peer's words land in them, 16 x 80 KiB of local reads where one 80 KiB read suffices. The push stays
spread over the slices (one SM pushes only about 20 GB/s over NVLink: a 32 KiB row of words from one program costs
about 1.6 µs, what made the unsplit kernel slow), so the split is bounded by one wave of the SMs
(``config.LL_READER_PROGRAMS``) rather than by the reads. No step passes between two programs of one rank in a call:
the reader waits only for words the peers' programs push, so the programs of a group need not be resident
together, and the ordering argument above holds unchanged (it already went through kernel boundaries; every
program of the group still advances its slot's epoch each call). ``WIDE`` (16-bit elements, an even hidden size,
16-byte aligned tensors): x, the residual and the weight are loaded as one 4-byte payload per word (two elements:
the word's own layout), and both outputs are stored as packed pairs; masked by whole words (``words < n // 2``),
Triton vectorizes both to 16 bytes (4 words) per access: at hidden 8192 bf16 and 8 warps the reader issues 12
``ld.global.v4.b32`` and 8 ``st.global.v4.b32`` per thread where 16-bit accesses take 96 loads and 64 stores.

Where the M <= 16 time above ``all_reduce``'s goes (hidden 8192 bf16, 2 ranks; all_reduce's LL: 4.8 µs at M = 1 on
2 x H100, 64 programs of one warp, 64 words each; the fused kernels: 7.1 µs; read from the code and the sm_90
SASS, not yet measured piece by piece): the default (flag one-shot, chosen at these sizes) pays the flag round
(5.0 µs alone in the same all_reduce run, above the LL all-reduce's whole call), one program per row so one SM
pushes the whole 16 KiB row (about 0.8 µs at ~20 GB/s per SM), and after the wait two dependent local round trips
(the inbox and the residual, x kept from the push; then the weight, loaded only after the block reduction's two
``bar.sync``). The
split LL kernel (16 programs at M = 1) has every program poll all 4096 words (16 relaxed 8-byte loads per thread,
the 16 SMs on the same lines the peer's stores land in) and load all of x, the residual and the weight as 98
``ld.global.b16`` per thread (225 registers), then store 4 of its 64 predicated ``st.global.b16``. The unsplit
one pushes 32 KiB of words from one SM (about 1.6 µs). The single reader keeps the split push, one poll and one
set of loads per row, in 16-byte accesses (167 registers).

The **LL one-shot whose slices reduce the norm by atomics** (``_ar_rmsnorm_ll_atomic_kernel``,
``config.ll_reduce`` "atomic"; an option, never the default) keeps the split grid and push, and has program
``(g, s)`` poll only its slice's words of each peer (those the peer's program ``(g, s)`` pushed: as all_reduce's
LL, each program's poll is its own share of the message, where the split kernel above has each program poll the
whole row). Per row of its group it sums its slice in rank order in fp32, adds the residual slice, rounds to the
dtype, stores its slice of ``new_residual`` and the partial sum of squares of that *rounded* slice (the norm is
the returned residual's, as above) into flag ``1 + r`` of its own slot. Then it arrives: a ``bar.sync`` (every
thread's stores precede it), one ``atom.add.acq_rel.gpu`` of 1 on flag 0 of the group's first slot. The program
whose arrival completes the group's count (old value ``= SLICES - 1`` mod ``SLICES``) is the **last arriver**: it
sums the ``SLICES`` partials of each row in slice order (not arrival order: the same float sum on every rank, so
the promise of bit-identical outputs holds), reloads the row's new residual (every slice, through L2: ``.cg``),
norms it with the weight and writes the whole normed row (and the fp8 scale); the others exit. Why the last
arriver rather than every program waiting for the total and norming its own slice: nothing spins, so the group's
programs need not be resident together (the split kernel's launch bound does not apply: ``LL_READER_PROGRAMS``
bounds it as the single reader's), and no program waits on another of its own rank, which also keeps the CPU
emulation (programs as threads of one interpreter) free of any order between them. Its cost: one program loads
the row's new residual and the weight and stores the normed row after the atomic, where a spinning program would
store only its slice.

Ordering. Within a rank: program ``(g, s)``'s stores of its new residual slice and partials happen before its
``bar.sync``, which precedes its thread 0's release (the atomic, cumulative); the last arriver's atomic reads the
value every earlier arrival wrote (one RMW chain: each release is in the release sequence it reads), so its
acquire orders every slice's stores before its reloads (which follow a ``bar.sync`` that broadcasts the result).
Across calls: the counter and the partials are this rank's own memory, written only by this rank's programs of the
group (no peer writes a slot's flags), and a call's programs start only after the previous call's kernel has
ended (stream order, eager or CUDA-graph replay alike): every call adds exactly ``SLICES`` to a group's counter
(the grid always holds all of a group's programs; a workspace serves one ``SLICES``), so ``old mod SLICES`` names
the last arriver without a reset (the int32 wraps at ``2^32``, a multiple of ``SLICES``), and a partial is
rewritten only by the next call, after every read of it. A peer one call ahead touches only the LL words: its
program ``(g, s)`` rewrites a word of slice ``s`` and parity ``p`` at epoch ``e + 2`` only after observing the
words of epoch ``e + 1`` that this rank's program ``(g, s)`` pushed after its fence, which follows (kernel
boundary) every read of epoch ``e`` by this rank's previous call: all_reduce's LL argument, pair by pair of
programs of one slice, since each program reads only what its peer program of the same slice writes.

The **LL one-shot whose slices wait for each other** (``_ar_rmsnorm_ll_spin_kernel``, ``config.ll_reduce`` "spin";
an option, never the default until measured) is the atomic kernel up to its arrival: the same split grid and push,
program ``(g, s)`` polls only its slice's words, sums in rank order in fp32, adds its residual slice, rounds, stores
its slice of ``new_residual`` and the partial sum of squares of that rounded slice into flag ``1 + r`` of its own
slot, then arrives (``bar.sync``, one ``atom.add.acq_rel.gpu`` of 1 on the group's counter). Then, unlike the atomic
kernel, **every** program waits until the counter shows all ``SLICES`` arrivals of this call: the counter is
cumulative (``SLICES`` per call), so the target is the first multiple of ``SLICES`` above the value its own atomic
returned, and every thread polls the counter with ``ld.acquire.gpu`` until it equals the target (equality holds
until the next call, which starts after this kernel ends; int32 arithmetic wraps with the counter, ``2^32`` being a
multiple of ``SLICES``), then a barrier. It sums the ``SLICES`` partials in slice order (the atomic kernel's
sum: the same bits in every program, on every rank, and as "atomic"'s), and norms only its slice with its slice of
the weight, from the rounded slice still in registers (one row a group, the case at M <= 256 on 256 programs: no
reload of the row, no program writing a whole row); with several rows a group it reloads its own slices of the new
residual (its own stores, ordered by the arrival's ``bar.sync``). The cost over all_reduce's LL: the partial's
store, the arrival, the wait and ``SLICES`` loads of partials, all L2 round trips; one program per SM stores only
its slice of each output.

Ordering: as the atomic kernel's, with every program in the role of the last arriver: the store of a slice's
partial precedes (``bar.sync``) its thread 0's release (the atomic); a thread whose acquire load reads the target
reads the value of the last RMW of the counter's chain, so it synchronizes with every arrival's release (each
release is in the release sequence that value ends), and its loads of the partials after it see them. Across calls
the counter and partials are this rank's, written only by the group's programs, one call at a time (stream order),
and a partial is rewritten only by the next call, after every program's reads of it in this call.

Residency: every program of a group waits for every other, so a group's programs must be resident together. A
group is at most ``config.LL_SPIN_MAX_SLICES`` (16) consecutive programs, and the launch at most
``config.LL_READER_PROGRAMS`` (128, one wave of the 132 SMs of an H100 / H200 at one program per SM; a spinning
program holds only its slice, so several fit on an SM). The GPU dispatches a grid's programs in order, so the
programs of lower groups are resident before a group's last program is dispatched, and a group waits only for its
own 16; with the launch within one wave nothing waits for an SM at all. With one slice a group (no split) the
program's own arrival completes the count. Watched (``WATCHED``): the poll gives up after
``LL_WATCHED_POLL_PASSES`` loads, and where any thread's did (the barrier after the poll votes, ``bar.red.or``, so
every thread takes the same branch) the program waits with ``dl.wait`` on the counter, which the watchdog times
out naming it: a program whose peer or sibling never arrives ends in the watchdog's error, not a hang. Under the
CPU emulation (``EMULATED``) the wait is ``dl.wait`` alone: the interpreter starts every program of a launch on a
thread of its own, so a program's wait for its siblings ends (the emulation's wait backs off and times out under
the watchdog).

**Partials as LL words** (``WORDS``, ``config.ll_reduce`` "spin_words"; an option beside "spin"): the same kernel
without the counter. A program stores its row's partial as one 8-byte word in its slot's flags (``2 + 2 r``: the
partial's bits in the low half, the call's epoch in the high half, ``st.relaxed.gpu`` by one thread, single-copy
atomic), and waits by polling the row's ``SLICES`` words (relaxed 8-byte loads, every thread all of them, in one
asm loop) until each carries the epoch, then sums their low halves in slice order (``add.rn.f32`` from 0: the sum
the counter path computes, so the same bits). No atomic, no acquire, no second load of the partials: one local
round trip after the last sibling's store where the counter path takes three (its atomic, the poll of the counter,
the partials' loads). The word is the data, so nothing else needs ordering (a slice's new residual is never read by
another program); the words of a group all carry their programs' common epoch (the group's slots advance together,
module docstring above), a word of the previous call the previous epoch; a word is rewritten only by the next
call, after this kernel has ended. Watched: the poll is bounded, the barrier after it votes (``bar.red.or``), and
where any thread gave up the program waits on each word's high half with ``dl.wait`` (which the watchdog times out,
naming it), then polls again. Emulated: plain 8-byte loads, a missing word awaited with ``dl.wait``.

The e4m3 output needs the row's largest normed magnitude for its per-token scale, which no spinning program holds
(it holds its slice): the op runs "atomic"'s kernel, launch and workspace for it (``config.ll_spin_fp8_config``),
and the spin kernel refuses ``FP8`` at compile time. (A second exchange, of per-slice maxima on a second counter,
would let every program quantize its slice; not built.)

With ``FP8`` the normed row is quantized to e4m3 with a per-token scale: ``scale = max(max|normed| / 448,
FP8_MIN_SCALE)``, ``normed_fp8 = clamp(normed / scale, +-448)`` rounded to nearest (even), both from the fp32 row.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.ar_rmsnorm import config as cfg
from triton_dist.ops.common.flags import flag_round
from triton_dist.ops.common.ll_words import (
    _LL_WATCHED_POLL_PASSES,
    _ll_add,
    _ll_elements,
    _ll_fence_acq_rel_sys,
    _ll_next_epoch,
    _ll_pack,
    _ll_payload,
    _ll_receive,
    _ll_receive_late,
    _ll_store,
    _ll_store_elements,
    _ll_unpack,
)

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
    residual = tl.load(residual_ptr + row * hidden + offs, mask=mask, other=0.0)
    return _new_residual_of(acc, residual, new_residual_ptr, row, offs, mask, hidden)


@triton.jit
def _new_residual_of(acc, residual, new_residual_ptr, row, offs, mask, hidden):
    """``_new_residual`` with the residual row already loaded (``residual``, 0 past the hidden size)."""
    h = acc + residual.to(tl.float32)
    new = tl.where(mask, h, 0.0).to(new_residual_ptr.dtype.element_ty)
    tl.store(new_residual_ptr + row * hidden + offs, new, mask=mask)
    return new


@triton.jit
def _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, mask, eps, hidden, FP8: tl.constexpr):
    """Norm the new residual row ``new`` (0 past the hidden size) in fp32 and store it as ``normed``'s row ``row``:
    in ``normed``'s dtype, or (``FP8``) quantized to e4m3 with the row's scale stored at ``scale_ptr + row``."""
    weight = tl.load(weight_ptr + offs, mask=mask, other=0.0)
    _store_normed_with(new, weight, normed_ptr, scale_ptr, row, offs, mask, eps, hidden, FP8)


@triton.jit
def _store_normed_with(new, weight, normed_ptr, scale_ptr, row, offs, mask, eps, hidden, FP8: tl.constexpr):
    """``_store_normed`` with the weight already loaded (``weight``, 0 past the hidden size)."""
    h = new.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / hidden + eps)
    y = h * rstd * weight.to(tl.float32)
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
    RANK_STRIDE: tl.constexpr,
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
        inbox = slot_data  # [ranks][RANK_STRIDE]: the round's rows of my chunk from each rank
        gathered = inbox + ranks * RANK_STRIDE  # [ranks][RANK_STRIDE]: each owner's new residual rows
        for t in range(slot, tl.cdiv(chunk, ROUND_ROWS), tl.num_programs(0)):
            epoch += 1
            first = t * ROUND_ROWS  # the round's first row within each chunk
            for peer in range(0, ranks):
                remote = dl.symm_at(inbox + me * RANK_STRIDE, peer)
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
                        acc += tl.load(arrived + peer * RANK_STRIDE + r * BLOCK_H + offs, mask=in_row, other=0.0).to(
                            tl.float32
                        )
                    new = _new_residual(acc, residual_ptr, new_residual_ptr, row, offs, in_row, hidden)
                    for peer in range(0, ranks):  # every rank's gather buffer, mine included
                        tl.store(dl.symm_at(gathered + me * RANK_STRIDE + r * BLOCK_H + offs, peer), new, mask=in_row)
            landed = flag_round(slot_flags + ranks, me, epoch, ranks, gathered, WORLD)
            # Every rank norms every row of the round from its gather buffer, in the same code (its own rows too):
            # the same instructions on the same values, so the same bits on every rank.
            for owner in range(0, ranks):
                for r in range(0, ROUND_ROWS):
                    row = owner * chunk + first + r
                    if (first + r < chunk) & (row < rows):
                        new = tl.load(landed + owner * RANK_STRIDE + r * BLOCK_H + offs, mask=in_row, other=0.0)
                        if owner != me:
                            tl.store(new_residual_ptr + row * hidden + offs, new, mask=in_row)
                        _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, in_row, eps, hidden, FP8)
    else:
        for t in range(slot, tl.cdiv(rows, ROUND_ROWS), tl.num_programs(0)):
            epoch += 1
            parity = epoch % 2
            inbox = slot_data + parity * ranks * RANK_STRIDE  # [2 parities][ranks][RANK_STRIDE]
            first = t * ROUND_ROWS
            if ROUND_ROWS == 1:
                # One row per round (small calls): its residual row and the weight are loaded before the flag
                # round, so they arrive while the program waits for the peers (else two dependent local round
                # trips after the wait: the residual, then the weight behind the norm's block reduction).
                early_residual = tl.load(residual_ptr + first * hidden + offs, mask=in_row & (first < rows), other=0.0)
                early_weight = tl.load(weight_ptr + offs, mask=in_row, other=0.0)
            for peer in range(0, ranks):
                if peer != me:
                    remote = dl.symm_at(inbox + me * RANK_STRIDE, peer)
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
                            got = tl.load(arrived + peer * RANK_STRIDE + r * BLOCK_H + offs, mask=in_row, other=0.0)
                            acc += got.to(tl.float32)
                    if ROUND_ROWS == 1:
                        new = _new_residual_of(acc, early_residual, new_residual_ptr, row, offs, in_row, hidden)
                        _store_normed_with(
                            new, early_weight, normed_ptr, scale_ptr, row, offs, in_row, eps, hidden, FP8
                        )
                    else:
                        new = _new_residual(acc, residual_ptr, new_residual_ptr, row, offs, in_row, hidden)
                        _store_normed(new, weight_ptr, normed_ptr, scale_ptr, row, offs, in_row, eps, hidden, FP8)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _ll_receive_emulated(words_ptr, offs, mask, epoch):
    """The uint32 payloads of the words at ``words_ptr + offs`` (where ``mask``) once each carries ``epoch``, under
    the CPU emulation: plain 8-byte loads (the interpreter's are whole words), and while a word is missing a
    ``dl.wait`` on the high half of the first one (the emulation's wait backs off and times out under the
    watchdog, naming the word), then the missing words loaded again."""
    BLOCK: tl.constexpr = offs.shape[0]
    words = tl.load(words_ptr + offs, mask=mask, other=0).to(tl.uint64, bitcast=True)
    arrived, payload = _ll_unpack(words)
    missing = mask & (arrived != epoch)
    while tl.max(missing.to(tl.int32), axis=0) > 0:
        first = tl.min(tl.where(missing, offs, BLOCK), axis=0)
        high_half = (words_ptr + first).to(tl.pointer_type(tl.int32), bitcast=True) + 1  # little-endian
        dl.wait(high_half, 1, "sys", "relaxed", epoch, cmp="eq")
        again = tl.load(words_ptr + offs, mask=missing, other=0).to(tl.uint64, bitcast=True)
        arrived, fresh = _ll_unpack(again)
        payload = tl.where(missing, fresh, payload)
        missing = missing & (arrived != epoch)
    return payload


@triton.jit
def _ll_row_sum(
    words,
    offs,
    mask,
    mine,
    packed,
    epoch,
    me,
    ranks,
    STRIDE: tl.constexpr,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    PASSES: tl.constexpr,
    LATE: tl.constexpr,
    EMULATED: tl.constexpr,
):
    """The fp32 sums of one row's low and high elements over the ranks in rank order (mine from ``mine``, a peer's
    from its words at ``words + peer * STRIDE + offs``) and an int32 1 per lane whose word a bounded poll missed
    (``PASSES`` > 0). ``LATE``: every word awaited (``_ll_receive_late``); ``EMULATED``: the interpreter's receive."""
    acc_low = tl.zeros(offs.shape, dtype=tl.float32)
    acc_high = tl.zeros(offs.shape, dtype=tl.float32)
    missing = tl.zeros(offs.shape, dtype=tl.int32)
    for peer in range(0, ranks):  # rank order: the same sum on every rank
        if peer == me:
            acc_low, acc_high = _ll_add(acc_low, acc_high, mine, DTYPE, PER_WORD)
        else:
            if EMULATED:
                got = _ll_receive_emulated(words + peer * STRIDE, offs, mask, epoch)
            elif LATE:
                got = _ll_receive_late(words + peer * STRIDE, offs, mask, packed, epoch, PASSES)
            else:
                got, late = _ll_receive(words + peer * STRIDE + offs, mask, packed, PASSES)
                missing |= late
            acc_low, acc_high = _ll_add(acc_low, acc_high, got, DTYPE, PER_WORD)
    return acc_low, acc_high, missing


@triton.jit
def _ll_row_sum_awaited(
    words,
    offs,
    mask,
    mine,
    packed,
    epoch,
    me,
    ranks,
    STRIDE: tl.constexpr,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    PASSES: tl.constexpr,
    WATCHED: tl.constexpr,
    EMULATED: tl.constexpr,
):
    """``_ll_row_sum``'s sums with every word in: under the watchdog (``WATCHED``) the polls are bounded, and a row
    whose bounded polls missed a word is summed again with every word awaited (one reduction per row decides)."""
    acc_low, acc_high, missing = _ll_row_sum(
        words, offs, mask, mine, packed, epoch, me, ranks, STRIDE, DTYPE, PER_WORD, PASSES, False, EMULATED
    )
    if WATCHED:
        if tl.max(missing, axis=0) > 0:
            acc_low, acc_high, missing = _ll_row_sum(
                words, offs, mask, mine, packed, epoch, me, ranks, STRIDE, DTYPE, PER_WORD, PASSES, True, EMULATED
            )
    return acc_low, acc_high


@triton.jit
def _ll_payload_where(x_ptr, words, n, keep, PER_WORD: tl.constexpr):
    """``_ll_payload`` of the lanes where ``keep`` (the others read as 0): a program's slice of a row."""
    if PER_WORD == 2:
        first = words * 2
        low = tl.load(x_ptr + first, mask=keep & (first < n), other=0.0).to(tl.uint16, bitcast=True).to(tl.uint32)
        high = tl.load(x_ptr + first + 1, mask=keep & (first + 1 < n), other=0.0)
        payload = low | (high.to(tl.uint16, bitcast=True).to(tl.uint32) << 16)
    else:
        payload = tl.load(x_ptr + words, mask=keep & (words < n), other=0.0).to(tl.uint32, bitcast=True)
    return payload


@triton.jit
def _ll_store_where(out_ptr, words, n, low, high, keep, PER_WORD: tl.constexpr):
    """``_ll_store_elements`` of the lanes where ``keep``: a program's slice of a row."""
    if PER_WORD == 2:
        first = words * 2
        tl.store(out_ptr + first, low, mask=keep & (first < n))
        tl.store(out_ptr + first + 1, high, mask=keep & (first + 1 < n))
    else:
        tl.store(out_ptr + words, low, mask=keep & (words < n))


@triton.jit
def _ll_norm_values(
    acc_low,
    acc_high,
    residual,
    weight,
    eps,
    hidden,
    DTYPE: tl.constexpr,
    OUT: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
):
    """The LL kernels' residual add and RMSNorm of one row in the LL words' layout, nothing stored: returns the new
    residual's two element lanes (``DTYPE``), the normed row's (``OUT``; e4m3 with ``FP8``) and the row's fp8 scale
    (0.0 without ``FP8``). Lane ``w`` holds elements ``PER_WORD * w`` (``acc_low``) and ``2 w + 1`` (``acc_high``,
    ``PER_WORD`` 2), the fp32 sums of the ranks' rows; ``residual`` and ``weight`` are LL payloads (``_ll_payload``).
    Elements past the hidden size read 0 (x's, the residual's and the weight's): their new residual is 0. The same
    arithmetic, per element, as the flag kernels' helpers, so every kernel gets the same bits."""
    res_low, res_high = _ll_elements(residual, DTYPE, PER_WORD)
    w_low, w_high = _ll_elements(weight, DTYPE, PER_WORD)
    new_low = (acc_low + res_low.to(tl.float32)).to(DTYPE)
    h_low = new_low.to(tl.float32)
    if PER_WORD == 2:
        new_high = (acc_high + res_high.to(tl.float32)).to(DTYPE)
        h_high = new_high.to(tl.float32)
        squares = tl.sum(h_low * h_low + h_high * h_high, axis=0)
    else:
        new_high = new_low
        h_high = h_low
        squares = tl.sum(h_low * h_low, axis=0)
    rstd = tl.rsqrt(squares / hidden + eps)
    out_low, out_high, scale = _ll_scaled(h_low, h_high, rstd, w_low, w_high, OUT, FP8)
    return new_low, new_high, out_low, out_high, scale


@triton.jit
def _ll_scaled(h_low, h_high, rstd, w_low, w_high, OUT: tl.constexpr, FP8: tl.constexpr):
    """The normed row's two element lanes in ``OUT`` (e4m3 with ``FP8``, by the row's scale) and that scale (0.0
    without ``FP8``), from the new residual's lanes in fp32, the row's ``rstd`` and the weight's lanes."""
    y_low = h_low * rstd * w_low.to(tl.float32)
    y_high = h_high * rstd * w_high.to(tl.float32)
    if FP8:
        scale = tl.maximum(tl.max(tl.maximum(tl.abs(y_low), tl.abs(y_high)), axis=0) / FP8_MAX, FP8_MIN_SCALE)
        out_low = _round_to_e4m3(tl.clamp(y_low / scale, -FP8_MAX, FP8_MAX)).to(OUT)
        out_high = _round_to_e4m3(tl.clamp(y_high / scale, -FP8_MAX, FP8_MAX)).to(OUT)
    else:
        scale = 0.0
        out_low = y_low.to(OUT)
        out_high = y_high.to(OUT)
    return out_low, out_high, scale


@triton.jit
def _ll_norm_row(
    acc_low,
    acc_high,
    residual,
    weight,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
    row,
    words,
    keep,
    eps,
    hidden,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    store_scale,
):
    """``_new_residual`` then ``_store_normed`` for row ``row`` in the LL words' layout (no layout conversion), the
    whole row computed and the lanes where ``keep`` (this program's slice) stored: lane ``w`` holds elements
    ``PER_WORD * w`` (``acc_low``) and ``2 w + 1`` (``acc_high``, ``PER_WORD`` 2), the fp32 sums of the ranks' rows;
    ``residual`` and ``weight`` are the row's residual and the weight as LL payloads (``_ll_payload``; the weight
    may be 0 outside ``keep`` but for ``FP8``, whose scale is the whole row's); the outputs are written the same
    way. ``store_scale``: this program writes the row's fp8 scale (the same value in every program of the row). The
    same arithmetic, per element, as the flag kernels' helpers, so every program of a row gets the same bits."""
    base = row * hidden
    new_low, new_high, y_low, y_high, scale = _ll_norm_values(
        acc_low, acc_high, residual, weight, eps, hidden, DTYPE, normed_ptr.dtype.element_ty, PER_WORD, FP8
    )
    _ll_store_where(new_residual_ptr + base, words, hidden, new_low, new_high, keep, PER_WORD)
    _ll_store_where(normed_ptr + base, words, hidden, y_low, y_high, keep, PER_WORD)
    if FP8:
        if store_scale:
            tl.store(scale_ptr + row, scale)


@triton.jit
def _ll_call_epoch(epoch_ptr, EMULATED: tl.constexpr):
    """A program's epoch of this call: its slot's counter moved on, after the fence that releases the previous
    call's reads of its group and acquires what it observed (the interpreter runs no PTX: its memory is coherent
    and its 8-byte accesses whole)."""
    if EMULATED:
        epoch = _ll_next_epoch(tl.load(epoch_ptr))
    else:
        epoch = _ll_next_epoch(_ll_fence_acq_rel_sys(tl.load(epoch_ptr)))
    return epoch


@triton.jit
def _ll_push_slice(
    x_ptr,
    words,
    sliced,
    first,
    rows,
    hidden,
    epoch,
    me,
    ranks,
    RANK_WORDS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    ROUND_ROWS: tl.constexpr,
    PER_WORD: tl.constexpr,
    WIDE: tl.constexpr,
    EMULATED: tl.constexpr,
):
    """Push my slice (``sliced`` words) of each of the group's rows, from row ``first`` on, as LL words of
    ``epoch`` into row block ``me`` of every peer's buffer at ``words`` (rows past the last: no word)."""
    for r in range(0, ROUND_ROWS):
        row = first + r
        n = tl.where(row < rows, hidden, 0)  # the row's elements
        mask = sliced * PER_WORD < n
        packed = _ll_pack(_ll_payload_wide(x_ptr + row * hidden, sliced, n, PER_WORD, WIDE), epoch)
        for peer in range(0, ranks):
            if peer != me:
                remote = dl.symm_at(words + me * RANK_WORDS + r * BLOCK_W + sliced, peer)
                if EMULATED:
                    tl.store(remote, packed.to(tl.int64, bitcast=True), mask=mask)
                else:
                    _ll_store(remote, packed, mask)


@triton.jit(do_not_specialize=["rows"])  # one compiled kernel for every row count of a hidden size
def _ar_rmsnorm_ll_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
    eps,
    data_ptr,
    epochs_ptr,
    rows,
    hidden,
    REGION: tl.constexpr,
    RANK_WORDS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    ROUND_ROWS: tl.constexpr,
    SLICES: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WATCHED: tl.constexpr = False,
    EMULATED: tl.constexpr = False,
):
    slot = tl.program_id(0)
    group = slot // SLICES  # the group's ROUND_ROWS rows
    part = slot % SLICES  # my slice of each of them
    me = dl.rank()
    ranks = dl.num_ranks()
    DTYPE: tl.constexpr = x_ptr.dtype.element_ty
    epoch = _ll_call_epoch(epochs_ptr + slot, EMULATED)
    SLICE_W: tl.constexpr = BLOCK_W // SLICES  # my slice's words of a row
    # [2 parities][ranks][RANK_WORDS], whatever the call's rows (module docstring: the layout is fixed).
    words = data_ptr + group * REGION + (epoch % 2) * ranks * RANK_WORDS
    offs = tl.arange(0, BLOCK_W)  # a row's words: PER_WORD elements each
    keep = offs // SLICE_W == part  # my slice's lanes of the row
    sliced = part * SLICE_W + tl.arange(0, SLICE_W)
    first = group * ROUND_ROWS
    _ll_push_slice(
        x_ptr,
        words,
        sliced,
        first,
        rows,
        hidden,
        epoch,
        me,
        ranks,
        RANK_WORDS,
        BLOCK_W,
        ROUND_ROWS,
        PER_WORD,
        False,
        EMULATED,
    )
    # Receive every slice of the row, sum, add the residual, norm the whole row; store my slice: row by row.
    PASSES: tl.constexpr = _LL_WATCHED_POLL_PASSES * WATCHED
    for r in range(0, ROUND_ROWS):
        row = first + r
        if row < rows:
            mask = offs * PER_WORD < hidden
            # x, the residual and the weight are local: loaded before the poll, so they arrive while it waits.
            mine = _ll_payload(x_ptr + row * hidden, offs, hidden, PER_WORD)
            residual = _ll_payload(residual_ptr + row * hidden, offs, hidden, PER_WORD)
            if FP8:  # the scale is the whole row's largest normed value
                weight = _ll_payload(weight_ptr, offs, hidden, PER_WORD)
            else:
                weight = _ll_payload_where(weight_ptr, offs, hidden, keep, PER_WORD)
            packed = _ll_pack(mine, epoch)
            row_words = words + r * BLOCK_W
            acc_low, acc_high = _ll_row_sum_awaited(
                row_words,
                offs,
                mask,
                mine,
                packed,
                epoch,
                me,
                ranks,
                RANK_WORDS,
                DTYPE,
                PER_WORD,
                PASSES,
                WATCHED,
                EMULATED,
            )
            _ll_norm_row(
                acc_low,
                acc_high,
                residual,
                weight,
                normed_ptr,
                new_residual_ptr,
                scale_ptr,
                row,
                offs,
                keep,
                eps,
                hidden,
                DTYPE,
                PER_WORD,
                FP8,
                part == 0,  # one program of the row stores its fp8 scale
            )
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _ll_payload_wide(x_ptr, words, n, PER_WORD: tl.constexpr, WIDE: tl.constexpr):
    """``_ll_payload``; ``WIDE`` (16-bit elements, an even ``n``, ``x_ptr`` 4-byte aligned): one 4-byte load per
    word, which is the word's payload as it stands (element ``2 w`` in the low half, little-endian), masked by
    whole words so that Triton can vectorize it (``words * 2 < n`` varies per lane in its analysis)."""
    if WIDE:
        payload = tl.load(x_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + words, mask=words < n // 2, other=0)
    else:
        payload = _ll_payload(x_ptr, words, n, PER_WORD)
    return payload


@triton.jit
def _ll_store_pairs(out_ptr, words, n, low, high, PER_WORD: tl.constexpr, WIDE: tl.constexpr):
    """``_ll_store_elements`` of 16-bit ``low`` / ``high``; ``WIDE`` (an even ``n``, ``out_ptr`` 4-byte aligned):
    each word's two elements as one packed 4-byte store."""
    if WIDE:
        packed = low.to(tl.uint16, bitcast=True).to(tl.uint32) | (high.to(tl.uint16, bitcast=True).to(tl.uint32) << 16)
        tl.store(out_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + words, packed, mask=words < n // 2)
    else:
        _ll_store_elements(out_ptr, words, n, low, high, PER_WORD)


@triton.jit
def _ll_norm_whole_row(
    acc_low,
    acc_high,
    residual,
    weight,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
    row,
    words,
    eps,
    hidden,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WIDE: tl.constexpr,
):
    """``_ll_norm_row`` for a program that owns the whole row: the same arithmetic per element (so the same bits),
    every lane stored (``WIDE``: as packed pairs; the e4m3 output element by element) and the fp8 scale."""
    base = row * hidden
    new_low, new_high, y_low, y_high, scale = _ll_norm_values(
        acc_low, acc_high, residual, weight, eps, hidden, DTYPE, normed_ptr.dtype.element_ty, PER_WORD, FP8
    )
    _ll_store_pairs(new_residual_ptr + base, words, hidden, new_low, new_high, PER_WORD, WIDE)
    _ll_store_normed(normed_ptr, scale_ptr, row, words, hidden, y_low, y_high, scale, PER_WORD, FP8, WIDE)


@triton.jit
def _ll_store_normed(
    normed_ptr,
    scale_ptr,
    row,
    words,
    hidden,
    out_low,
    out_high,
    scale,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Store a whole normed row (``WIDE``: as packed pairs; the e4m3 output element by element) and its fp8 scale."""
    base = row * hidden
    if FP8:
        _ll_store_elements(normed_ptr + base, words, hidden, out_low, out_high, PER_WORD)
        tl.store(scale_ptr + row, scale)
    else:
        _ll_store_pairs(normed_ptr + base, words, hidden, out_low, out_high, PER_WORD, WIDE)


@triton.jit(do_not_specialize=["rows"])  # one compiled kernel for every row count of a hidden size
def _ar_rmsnorm_ll_reader_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    normed_ptr,
    new_residual_ptr,
    scale_ptr,
    eps,
    data_ptr,
    epochs_ptr,
    rows,
    hidden,
    REGION: tl.constexpr,
    RANK_WORDS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    ROUND_ROWS: tl.constexpr,
    SLICES: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WIDE: tl.constexpr = False,
    WATCHED: tl.constexpr = False,
    EMULATED: tl.constexpr = False,
):
    slot = tl.program_id(0)
    group = slot // SLICES  # the group's ROUND_ROWS rows
    part = slot % SLICES  # my slice of each of them; part 0 also reads and norms them
    me = dl.rank()
    ranks = dl.num_ranks()
    DTYPE: tl.constexpr = x_ptr.dtype.element_ty
    epoch = _ll_call_epoch(epochs_ptr + slot, EMULATED)
    SLICE_W: tl.constexpr = BLOCK_W // SLICES
    words = data_ptr + group * REGION + (epoch % 2) * ranks * RANK_WORDS  # [2 parities][ranks][RANK_WORDS]
    sliced = part * SLICE_W + tl.arange(0, SLICE_W)
    first = group * ROUND_ROWS
    _ll_push_slice(
        x_ptr,
        words,
        sliced,
        first,
        rows,
        hidden,
        epoch,
        me,
        ranks,
        RANK_WORDS,
        BLOCK_W,
        ROUND_ROWS,
        PER_WORD,
        WIDE,
        EMULATED,
    )
    if part == 0:  # the group's reader: every word of its rows, from every peer's programs of every slice
        PASSES: tl.constexpr = _LL_WATCHED_POLL_PASSES * WATCHED
        offs = tl.arange(0, BLOCK_W)
        mask = offs * PER_WORD < hidden
        # The weight, x and the residual are local: loaded before the poll, so they arrive while it waits.
        weight = _ll_payload_wide(weight_ptr, offs, hidden, PER_WORD, WIDE)
        for r in range(0, ROUND_ROWS):
            row = first + r
            if row < rows:
                mine = _ll_payload_wide(x_ptr + row * hidden, offs, hidden, PER_WORD, WIDE)
                residual = _ll_payload_wide(residual_ptr + row * hidden, offs, hidden, PER_WORD, WIDE)
                packed = _ll_pack(mine, epoch)
                row_words = words + r * BLOCK_W
                acc_low, acc_high = _ll_row_sum_awaited(
                    row_words,
                    offs,
                    mask,
                    mine,
                    packed,
                    epoch,
                    me,
                    ranks,
                    RANK_WORDS,
                    DTYPE,
                    PER_WORD,
                    PASSES,
                    WATCHED,
                    EMULATED,
                )
                _ll_norm_whole_row(
                    acc_low,
                    acc_high,
                    residual,
                    weight,
                    normed_ptr,
                    new_residual_ptr,
                    scale_ptr,
                    row,
                    offs,
                    eps,
                    hidden,
                    DTYPE,
                    PER_WORD,
                    FP8,
                    WIDE,
                )
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _ll_payload_fresh(x_ptr, words, n, PER_WORD: tl.constexpr, WIDE: tl.constexpr):
    """``_ll_payload_wide`` of values other programs of this launch stored: loaded through L2 (``.cg``), never from
    this SM's L1, after the acquire that ordered their stores (``_ar_rmsnorm_ll_atomic_kernel``)."""
    if WIDE:
        payload = tl.load(
            x_ptr.to(tl.pointer_type(tl.uint32), bitcast=True) + words,
            mask=words < n // 2,
            other=0,
            cache_modifier=".cg",
        )
    elif PER_WORD == 2:
        first = words * 2
        low = tl.load(x_ptr + first, mask=first < n, other=0.0, cache_modifier=".cg")
        high = tl.load(x_ptr + first + 1, mask=first + 1 < n, other=0.0, cache_modifier=".cg")
        low_bits = low.to(tl.uint16, bitcast=True).to(tl.uint32)
        payload = low_bits | (high.to(tl.uint16, bitcast=True).to(tl.uint32) << 16)
    else:
        payload = tl.load(x_ptr + words, mask=words < n, other=0.0, cache_modifier=".cg").to(tl.uint32, bitcast=True)
    return payload


@triton.jit
def _ll_slice_new_residual(
    x_ptr,
    residual_ptr,
    new_residual_ptr,
    row_words,
    row,
    sliced,
    hidden,
    epoch,
    me,
    ranks,
    RANK_WORDS: tl.constexpr,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    WIDE: tl.constexpr,
    WATCHED: tl.constexpr,
    EMULATED: tl.constexpr,
):
    """A program's slice (``sliced`` words) of row ``row``, whose words from the peers land at ``row_words``: x and
    the residual loaded before the poll (they arrive while it waits), the peers' words awaited and summed with x in
    rank order in fp32, the residual added, the sum rounded to ``DTYPE`` and stored as the slice of
    ``new_residual``. Returns the rounded slice in fp32 (its low and high element lanes; 0 past the hidden size) and
    the slice's sum of squares of it (fp32, ``tl.sum`` over the slice)."""
    PASSES: tl.constexpr = _LL_WATCHED_POLL_PASSES * WATCHED
    mine = _ll_payload_wide(x_ptr + row * hidden, sliced, hidden, PER_WORD, WIDE)
    residual = _ll_payload_wide(residual_ptr + row * hidden, sliced, hidden, PER_WORD, WIDE)
    packed = _ll_pack(mine, epoch)
    in_slice = sliced * PER_WORD < hidden
    acc_low, acc_high = _ll_row_sum_awaited(
        row_words,
        sliced,
        in_slice,
        mine,
        packed,
        epoch,
        me,
        ranks,
        RANK_WORDS,
        DTYPE,
        PER_WORD,
        PASSES,
        WATCHED,
        EMULATED,
    )
    res_low, res_high = _ll_elements(residual, DTYPE, PER_WORD)
    new_low = (acc_low + res_low.to(tl.float32)).to(DTYPE)  # 0 past the hidden size
    h_low = new_low.to(tl.float32)
    if PER_WORD == 2:
        new_high = (acc_high + res_high.to(tl.float32)).to(DTYPE)
        h_high = new_high.to(tl.float32)
        squares = tl.sum(h_low * h_low + h_high * h_high, axis=0)
    else:
        new_high = new_low
        h_high = h_low
        squares = tl.sum(h_low * h_low, axis=0)
    _ll_store_pairs(new_residual_ptr + row * hidden, sliced, hidden, new_low, new_high, PER_WORD, WIDE)
    return h_low, h_high, squares


@triton.jit
def _ll_partials_total(first_ptr, stride, SLICES: tl.constexpr):
    """The fp32 sum of a row's ``SLICES`` partial sums of squares, stored as int32 bits at ``first_ptr + s *
    stride`` (slice ``s``'s slot), in slice order (not arrival order: the same float sum in every program of the row
    and on every rank), loaded through L2 (``.cg``: other programs stored them, ordered by an acquire before)."""
    total = tl.zeros([], dtype=tl.float32)
    for s in tl.static_range(SLICES):
        total += tl.load(first_ptr + s * stride, cache_modifier=".cg").to(tl.float32, bitcast=True)
    return total


@triton.jit(do_not_specialize=["rows"])  # one compiled kernel for every row count of a hidden size
def _ar_rmsnorm_ll_atomic_kernel(
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
    flags_stride,
    REGION: tl.constexpr,
    RANK_WORDS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    ROUND_ROWS: tl.constexpr,
    SLICES: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WIDE: tl.constexpr = False,
    WATCHED: tl.constexpr = False,
    EMULATED: tl.constexpr = False,
):
    slot = tl.program_id(0)
    group = slot // SLICES  # the group's ROUND_ROWS rows
    part = slot % SLICES  # my slice of each of them
    me = dl.rank()
    ranks = dl.num_ranks()
    DTYPE: tl.constexpr = x_ptr.dtype.element_ty
    epoch = _ll_call_epoch(epochs_ptr + slot, EMULATED)
    SLICE_W: tl.constexpr = BLOCK_W // SLICES
    words = data_ptr + group * REGION + (epoch % 2) * ranks * RANK_WORDS  # [2 parities][ranks][RANK_WORDS]
    sliced = part * SLICE_W + tl.arange(0, SLICE_W)
    first = group * ROUND_ROWS
    _ll_push_slice(
        x_ptr,
        words,
        sliced,
        first,
        rows,
        hidden,
        epoch,
        me,
        ranks,
        RANK_WORDS,
        BLOCK_W,
        ROUND_ROWS,
        PER_WORD,
        WIDE,
        EMULATED,
    )
    # Receive my slice of each row from every peer (the words the peers' programs of my slice pushed), sum in rank
    # order, add the residual, round: my slice of the new residual, and its partial sum of squares into my slot.
    partials = flags_ptr + slot * flags_stride + 1  # my slot's flags past the counter: one fp32 (as bits) per row
    for r in range(0, ROUND_ROWS):
        row = first + r
        if row < rows:
            _, _, squares = _ll_slice_new_residual(
                x_ptr,
                residual_ptr,
                new_residual_ptr,
                words + r * BLOCK_W,
                row,
                sliced,
                hidden,
                epoch,
                me,
                ranks,
                RANK_WORDS,
                DTYPE,
                PER_WORD,
                WIDE,
                WATCHED,
                EMULATED,
            )
            tl.store(partials + r, squares.to(tl.int32, bitcast=True))
    tl.store(epochs_ptr + slot, epoch)
    # Arrive: every thread's stores above precede (bar.sync) the one atomic, whose release publishes them; the
    # arrival that completes the group's count (SLICES per call, module docstring) acquires every slice's.
    tl.debug_barrier()
    arrived = tl.atomic_add(flags_ptr + group * SLICES * flags_stride, 1, sem="acq_rel", scope="gpu")
    if (arrived & (SLICES - 1)) == SLICES - 1:  # the last of the group's programs: norm its rows, every slice
        offs = tl.arange(0, BLOCK_W)
        weight = _ll_payload_wide(weight_ptr, offs, hidden, PER_WORD, WIDE)
        w_low, w_high = _ll_elements(weight, DTYPE, PER_WORD)
        for r in range(0, ROUND_ROWS):
            row = first + r
            if row < rows:
                total = _ll_partials_total(flags_ptr + group * SLICES * flags_stride + 1 + r, flags_stride, SLICES)
                rstd = tl.rsqrt(total / hidden + eps)
                new = _ll_payload_fresh(new_residual_ptr + row * hidden, offs, hidden, PER_WORD, WIDE)
                new_low, new_high = _ll_elements(new, DTYPE, PER_WORD)
                h_low, h_high = new_low.to(tl.float32), new_high.to(tl.float32)
                out = _ll_scaled(h_low, h_high, rstd, w_low, w_high, normed_ptr.dtype.element_ty, FP8)
                _ll_store_normed(normed_ptr, scale_ptr, row, offs, hidden, *out, PER_WORD, FP8, WIDE)


@triton.constexpr_function
def _ll_spin_asm(max_passes=0):
    """(PTX, constraints) of the threads' wait for an arrival counter (operand ``$1``) to equal ``$2``: each thread
    loads it with ``ld.acquire.gpu.global.b32`` in a loop until it does, then the program's threads meet in a barrier
    (barrier 0, every thread: ``bar.sync``'s). ``max_passes`` > 0 gives up after that many loads, and the barrier is
    ``bar.red.or.pred``: ``$0`` is 1 in every thread where any thread gave up (so the program branches as one), else
    0; without it ``$0`` is 0. The label and registers are declared inside ``{ }``, so each instance has its own (as
    ``ll_words._ll_poll_asm``). Run by every thread once: a scalar asm (a barrier inside it must be reached by all)."""
    lines = ["{", ".reg .pred %lsp;", ".reg .b32 %lsv;"]
    if max_passes:
        lines += [".reg .pred %lsq;", ".reg .b32 %lsn;", "mov.b32 %lsn, 0;"]
    lines += ["LL_SPIN:", "ld.acquire.gpu.global.b32 %lsv, [$1];", "setp.ne.b32 %lsp, %lsv, $2;"]
    if max_passes:
        lines += ["add.u32 %lsn, %lsn, 1;", f"setp.lt.u32 %lsq, %lsn, {max_passes};", "and.pred %lsq, %lsp, %lsq;"]
        lines += ["@%lsq bra LL_SPIN;", "bar.red.or.pred %lsp, 0, %lsp;", "selp.b32 $0, 1, 0, %lsp;", "}"]
    else:
        lines += ["@%lsp bra LL_SPIN;", "bar.sync 0;", "mov.b32 $0, 0;", "}"]
    return "\n\t".join(lines), "=r,l,r"


@triton.jit
def _ll_arrive_and_wait(counter_ptr, SLICES: tl.constexpr, WATCHED: tl.constexpr, EMULATED: tl.constexpr):
    """Count this program's arrival on its group's counter and wait for the group's other ``SLICES - 1`` arrivals
    of this call (``_ar_rmsnorm_ll_spin_kernel``): a ``bar.sync`` (every thread's stores before it), one
    ``atom.add.acq_rel.gpu`` of 1; the call's ``SLICES`` arrivals take the counter from a multiple of ``SLICES`` to
    the next, so this call's target is the first multiple above the value the atomic returned (int32 arithmetic
    that wraps, as the counter does: 2^32 is a multiple of ``SLICES``). Every thread then polls the counter with
    acquire loads until it equals the target (equality: the counter holds the target until the next call, which
    starts after this kernel ends), then the threads meet in a barrier (``_ll_spin_asm``). ``WATCHED``: the poll
    gives up after ``LL_WATCHED_POLL_PASSES`` loads and, where any thread's did (the barrier's vote: every thread
    takes the same branch), the program waits with ``dl.wait`` (which the wait watchdog times out, naming the
    counter). ``EMULATED``: ``dl.wait`` alone (the interpreter runs no PTX; its programs are threads that all
    start, so waiting for the others ends)."""
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    target = (arrived & -SLICES) + SLICES
    if EMULATED:
        dl.wait(counter_ptr, 1, "gpu", "acquire", target, cmp="eq")
    else:
        ASM: tl.constexpr = _ll_spin_asm(_LL_WATCHED_POLL_PASSES * WATCHED)
        late = tl.inline_asm_elementwise(ASM[0], ASM[1], [counter_ptr, target], dtype=tl.int32, is_pure=False, pack=1)
        if WATCHED:
            if late != 0:  # the same in every thread (the asm's barrier vote)
                dl.wait(counter_ptr, 1, "gpu", "acquire", target, cmp="eq")


@triton.constexpr_function
def _ll_partial_words_asm(slices, max_passes=0):
    """(PTX, constraints) of a thread's wait for a row's ``slices`` partial words (``_ll_partials_awaited``):
    operands ``$0`` the fp32 total (as b32), ``$1`` (``max_passes`` > 0) 1 where any thread of the program gave up,
    then the first word's address, the bytes from one slice's word to the next (b64) and the epoch. Each pass loads
    every word still pending (``ld.relaxed.gpu.global.b64``, independent loads in flight together) and drops those
    whose high half is the epoch (a word seen whole: single-copy atomic), until none is pending (``max_passes``:
    at most that many passes, then ``bar.red.or.pred`` votes on whether any thread gave up, so the program branches
    as one); then sums the words' low halves as fp32 in slice order from 0 (``add.rn.f32``: the sum
    ``_ll_partials_total`` computes). Registers and label inside ``{ }`` (as ``ll_words._ll_poll_asm``)."""
    words = range(slices)
    base = 1 + (1 if max_passes else 0)
    lines = ["{", ".reg .pred %lwp;", ".reg .b32 %lwlo, %lwhi, %lwany, %lwt;"]
    lines += [f".reg .b64 %lwa<{slices}>;", f".reg .b64 %lww<{slices}>;", f".reg .b32 %lwk<{slices}>;"]
    lines.append(f"mov.b64 %lwa0, ${base};")
    lines += [f"add.s64 %lwa{i}, %lwa{i - 1}, ${base + 1};" for i in words if i > 0]
    lines += [f"mov.b32 %lwk{i}, ${base + 2};" for i in words]
    lines += [f"mov.b64 %lww{i}, 0;" for i in words]
    if max_passes:
        lines += [".reg .pred %lwq;", ".reg .b32 %lwn;", "mov.b32 %lwn, 0;"]
    lines.append("LL_WORDS:")
    for i in words:
        lines += [f"setp.ne.b32 %lwp, %lwk{i}, 0;", f"@%lwp ld.relaxed.gpu.global.b64 %lww{i}, [%lwa{i}];"]
    for i in words:
        lines.append(f"mov.b64 {{%lwlo, %lwhi}}, %lww{i};")
        lines += [f"setp.eq.b32 %lwp, %lwhi, %lwk{i};", f"selp.b32 %lwk{i}, 0, %lwk{i}, %lwp;"]
    lines.append("mov.b32 %lwany, %lwk0;")
    lines += [f"or.b32 %lwany, %lwany, %lwk{i};" for i in words if i > 0]
    if max_passes:
        lines += ["add.u32 %lwn, %lwn, 1;", f"setp.lt.u32 %lwq, %lwn, {max_passes};"]
        lines.append("setp.ne.and.b32 %lwp, %lwany, 0, %lwq;")
    else:
        lines.append("setp.ne.b32 %lwp, %lwany, 0;")
    lines.append("@%lwp bra LL_WORDS;")
    lines.append("mov.b32 %lwt, 0f00000000;")
    for i in words:
        lines += [f"mov.b64 {{%lwlo, %lwhi}}, %lww{i};", "add.rn.f32 %lwt, %lwt, %lwlo;"]
    lines.append("mov.b32 $0, %lwt;")
    if max_passes:
        lines += ["setp.ne.b32 %lwp, %lwany, 0;", "bar.red.or.pred %lwp, 0, %lwp;", "selp.b32 $1, 1, 0, %lwp;"]
    lines.append("}")
    return "\n\t".join(lines), ",".join(["=r"] * (base) + ["l", "l", "r"])


@triton.jit
def _ll_partial_word_store(word_ptr, squares, epoch, EMULATED: tl.constexpr):
    """Store a slice's partial sum of squares (fp32, the same in every thread) as an LL word at ``word_ptr`` (an
    int32 pointer, 8-byte aligned): its bits in the low half, ``epoch`` in the high half. One thread stores it
    (``st.relaxed.gpu.global.b64``, single-copy atomic); the emulation stores it as one 8-byte value."""
    bits = squares.to(tl.int32, bitcast=True)
    if EMULATED:
        word = (epoch.to(tl.int64) << 32) | (bits.to(tl.uint32).to(tl.int64))
        tl.store(word_ptr.to(tl.pointer_type(tl.int64), bitcast=True), word)
    else:
        tl.inline_asm_elementwise(
            "{ .reg .pred %lwsp; .reg .b32 %lwst; .reg .b64 %lwsw; mov.u32 %lwst, %tid.x; "
            "setp.eq.u32 %lwsp, %lwst, 0; mov.b64 %lwsw, {$2, $3}; @%lwsp st.relaxed.gpu.global.b64 [$1], %lwsw; "
            "mov.u32 $0, 0; }",
            "=r,l,r,r",
            [word_ptr, bits, epoch],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )


@triton.jit
def _ll_partials_awaited(first_ptr, stride, epoch, SLICES: tl.constexpr, WATCHED: tl.constexpr, EMULATED: tl.constexpr):
    """The fp32 sum, in slice order from 0, of a row's ``SLICES`` partial words (``_ll_partial_word_store``; int32
    pointer ``first_ptr`` to slice 0's, ``stride`` int32 elements from one slice's to the next) once every word
    carries ``epoch`` (``_ll_partial_words_asm``: the sum ``_ll_partials_total`` computes from flags). ``WATCHED``:
    the poll is bounded and, where any thread gave up, the program waits for each word in turn with ``dl.wait``
    on its high half (which the wait watchdog times out, naming the word), then polls again. ``EMULATED``: plain
    8-byte loads, a missing word awaited with ``dl.wait``."""
    if EMULATED:
        total = tl.zeros([], dtype=tl.float32)
        for s in tl.static_range(SLICES):
            word_ptr = (first_ptr + s * stride).to(tl.pointer_type(tl.int64), bitcast=True)
            word = tl.load(word_ptr)
            if (word >> 32).to(tl.int32) != epoch:
                dl.wait(first_ptr + s * stride + 1, 1, "gpu", "relaxed", epoch, cmp="eq")  # the high half
                word = tl.load(word_ptr)
            total += word.to(tl.int32).to(tl.float32, bitcast=True)
    else:
        ASM: tl.constexpr = _ll_partial_words_asm(SLICES, _LL_WATCHED_POLL_PASSES * WATCHED)
        step = stride.to(tl.int64) * 4  # bytes
        if WATCHED:
            bits, late = tl.inline_asm_elementwise(
                ASM[0], ASM[1], [first_ptr, step, epoch], dtype=(tl.int32, tl.int32), is_pure=False, pack=1
            )
            if late != 0:  # the same in every thread (the asm's barrier vote)
                for s in tl.static_range(SLICES):
                    dl.wait(first_ptr + s * stride + 1, 1, "gpu", "relaxed", epoch, cmp="eq")  # the high half
                bits, late = tl.inline_asm_elementwise(
                    ASM[0], ASM[1], [first_ptr, step, epoch], dtype=(tl.int32, tl.int32), is_pure=False, pack=1
                )
        else:
            bits = tl.inline_asm_elementwise(
                ASM[0], ASM[1], [first_ptr, step, epoch], dtype=tl.int32, is_pure=False, pack=1
            )
        total = bits.to(tl.float32, bitcast=True)
    return total


@triton.jit
def _ll_norm_slice(
    h_low,
    h_high,
    total,
    weight,
    normed_ptr,
    row,
    sliced,
    eps,
    hidden,
    DTYPE: tl.constexpr,
    PER_WORD: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Norm a program's slice of row ``row`` (its new residual's lanes in fp32) by the row's sum of squares
    ``total`` and store it as ``normed``'s slice: ``_ll_scaled``'s arithmetic (so the same bits as the other LL
    kernels' for the same ``total``). ``weight``: the weight's slice as LL payloads."""
    w_low, w_high = _ll_elements(weight, DTYPE, PER_WORD)
    rstd = tl.rsqrt(total / hidden + eps)
    out_low, out_high, _ = _ll_scaled(h_low, h_high, rstd, w_low, w_high, normed_ptr.dtype.element_ty, False)
    _ll_store_pairs(normed_ptr + row * hidden, sliced, hidden, out_low, out_high, PER_WORD, WIDE)


@triton.jit
def _ll_spin_publish(slot_flags, r, squares, epoch, WORDS: tl.constexpr, EMULATED: tl.constexpr):
    """Publish a program's partial sum of squares of row ``r`` of its group in its slot's flags ``slot_flags``:
    flag ``1 + r`` (its bits; the arrival that follows publishes it), or ``WORDS``: the LL word at flags
    ``2 + 2 r`` (``_ll_partial_word_store``: the epoch in its high half; the flags of a slot are an even count)."""
    if WORDS:
        _ll_partial_word_store(slot_flags + 2 + 2 * r, squares, epoch, EMULATED)
    else:
        tl.store(slot_flags + 1 + r, squares.to(tl.int32, bitcast=True))


@triton.jit
def _ll_spin_total(
    group_flags,
    r,
    flags_stride,
    epoch,
    SLICES: tl.constexpr,
    WORDS: tl.constexpr,
    WATCHED: tl.constexpr,
    EMULATED: tl.constexpr,
):
    """Row ``r``'s sum of squares: the ``SLICES`` partials ``_ll_spin_publish`` stored in the group's slots (the
    first at ``group_flags``), summed in slice order: after the arrivals' wait, loaded (``_ll_partials_total``); or
    ``WORDS``: awaited, each word until it carries ``epoch`` (``_ll_partials_awaited``)."""
    if WORDS:
        total = _ll_partials_awaited(group_flags + 2 + 2 * r, flags_stride, epoch, SLICES, WATCHED, EMULATED)
    else:
        total = _ll_partials_total(group_flags + 1 + r, flags_stride, SLICES)
    return total


@triton.jit(do_not_specialize=["rows"])  # one compiled kernel for every row count of a hidden size
def _ar_rmsnorm_ll_spin_kernel(
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
    flags_stride,
    REGION: tl.constexpr,
    RANK_WORDS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    ROUND_ROWS: tl.constexpr,
    SLICES: tl.constexpr,
    PER_WORD: tl.constexpr,
    FP8: tl.constexpr,
    WIDE: tl.constexpr = False,
    WATCHED: tl.constexpr = False,
    EMULATED: tl.constexpr = False,
    WORDS: tl.constexpr = False,
):
    tl.static_assert(not FP8, "ll_reduce='spin' writes no e4m3 output (the op runs 'atomic' for it)")
    slot = tl.program_id(0)
    group = slot // SLICES  # the group's ROUND_ROWS rows
    part = slot % SLICES  # my slice of each of them
    me = dl.rank()
    ranks = dl.num_ranks()
    DTYPE: tl.constexpr = x_ptr.dtype.element_ty
    epoch = _ll_call_epoch(epochs_ptr + slot, EMULATED)
    SLICE_W: tl.constexpr = BLOCK_W // SLICES
    words = data_ptr + group * REGION + (epoch % 2) * ranks * RANK_WORDS  # [2 parities][ranks][RANK_WORDS]
    sliced = part * SLICE_W + tl.arange(0, SLICE_W)
    first = group * ROUND_ROWS
    _ll_push_slice(
        x_ptr,
        words,
        sliced,
        first,
        rows,
        hidden,
        epoch,
        me,
        ranks,
        RANK_WORDS,
        BLOCK_W,
        ROUND_ROWS,
        PER_WORD,
        WIDE,
        EMULATED,
    )
    weight = _ll_payload_wide(weight_ptr, sliced, hidden, PER_WORD, WIDE)  # my slice only; local, loaded early
    counter = flags_ptr + group * SLICES * flags_stride  # flag 0 of the group's first slot
    if ROUND_ROWS == 1:  # the group's one row (a group always has its first row): the slice stays in registers
        h_low, h_high, squares = _ll_slice_new_residual(
            x_ptr,
            residual_ptr,
            new_residual_ptr,
            words,
            first,
            sliced,
            hidden,
            epoch,
            me,
            ranks,
            RANK_WORDS,
            DTYPE,
            PER_WORD,
            WIDE,
            WATCHED,
            EMULATED,
        )
        _ll_spin_publish(flags_ptr + slot * flags_stride, 0, squares, epoch, WORDS, EMULATED)
        tl.store(epochs_ptr + slot, epoch)
        if not WORDS:
            _ll_arrive_and_wait(counter, SLICES, WATCHED, EMULATED)
        total = _ll_spin_total(counter, 0, flags_stride, epoch, SLICES, WORDS, WATCHED, EMULATED)
        _ll_norm_slice(h_low, h_high, total, weight, normed_ptr, first, sliced, eps, hidden, DTYPE, PER_WORD, WIDE)
    else:  # several rows: each row's slice of the new residual is reloaded (my own stores) after the wait
        for r in range(0, ROUND_ROWS):
            row = first + r
            if row < rows:
                _, _, squares = _ll_slice_new_residual(
                    x_ptr,
                    residual_ptr,
                    new_residual_ptr,
                    words + r * BLOCK_W,
                    row,
                    sliced,
                    hidden,
                    epoch,
                    me,
                    ranks,
                    RANK_WORDS,
                    DTYPE,
                    PER_WORD,
                    WIDE,
                    WATCHED,
                    EMULATED,
                )
                _ll_spin_publish(flags_ptr + slot * flags_stride, r, squares, epoch, WORDS, EMULATED)
        tl.store(epochs_ptr + slot, epoch)
        if WORDS:
            tl.debug_barrier()  # my threads' stores of the new residual before their reloads
        else:
            _ll_arrive_and_wait(counter, SLICES, WATCHED, EMULATED)
        for r in range(0, ROUND_ROWS):
            row = first + r
            if row < rows:
                total = _ll_spin_total(counter, r, flags_stride, epoch, SLICES, WORDS, WATCHED, EMULATED)
                new = _ll_payload_fresh(new_residual_ptr + row * hidden, sliced, hidden, PER_WORD, WIDE)
                new_low, new_high = _ll_elements(new, DTYPE, PER_WORD)
                h_low, h_high = new_low.to(tl.float32), new_high.to(tl.float32)
                _ll_norm_slice(
                    h_low, h_high, total, weight, normed_ptr, row, sliced, eps, hidden, DTYPE, PER_WORD, WIDE
                )
