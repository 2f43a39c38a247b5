"""The all-reduce kernels: one launch each, no host synchronization (so they can be captured in CUDA graphs).

- **one-shot** (pull): each program copies its slice of ``x`` into its slot of a symmetric staging buffer, tells
  every rank (one flag per rank, ``dl.notify`` with the epoch), waits for every rank's flag (``dl.wait``), then
  loads the slice from every rank's staging buffer through ``dl.symm_at`` (16-byte vector loads) and sums in fp32.
  One flag round; each rank reads ``(W - 1) * bytes`` over NVLink. Best for small messages.
- **one-shot push** ("one_shot_push"): each program stores its slice of ``x`` straight into row ``me`` of every
  peer's inbox (remote 16-byte stores, no staging copy), tells every rank, waits for every rank's flag, then sums
  its own slice from ``x`` and the peers' rows from its own inbox (local loads). The same one flag round and
  NVLink traffic as the one-shot; the data crosses before the flag rather than after it, as stores.
- **two-shot** (push reduce-scatter, then push all-gather): rank ``r`` owns chunk ``r``. Each program pushes the
  slice of chunk ``p`` straight from ``x`` into rank ``p``'s inbox (remote 16-byte stores), flags; the owner sums
  its inbox in fp32, writes the result to ``out`` and pushes it into every rank's gather buffer, flags again; each
  rank copies the gathered chunks into ``out``. Two flag rounds; each rank sends ``2 (W - 1) / W * bytes``. Best
  for large messages. Stores rather than loads cross NVLink because stores reach full bandwidth with far fewer
  programs (the reference measurements: ~325 GB/s from 16 CTAs, where loads need ~66).
- **LL one-shot** ("one_shot_ll", low latency; NVIDIA only, at most ``ll_max_numel(itemsize)`` elements, one round
  per program): the data words carry the epoch, so there is no flag and no remote load. The data travels in 8-byte
  words, the call's epoch in the high 32 bits and 32 bits of data in the low (two bf16 / fp16 elements, or one fp32:
  ``ll_elements_per_word``); each program stores its slice's words into its row of every peer's buffer
  (``st.relaxed.sys.global.b64``: a strong, naturally aligned 8-byte access is single-copy atomic in the PTX memory
  model, so a reader sees a word whole or not at all), then each thread polls its own lanes' words in its own buffer
  (``ld.relaxed.sys.global.b64`` in a per-thread PTX loop, no barrier or shared memory per pass) row by row in rank
  order until each holds the epoch, and sums as the one-shot does. Latency: one one-way NVLink write, the cost 2x the
  traffic.
  Its poll is plain loads, not a ``dl.wait``. With the wait watchdog on, the kernel is compiled with bounded
  polls (``LL_WATCHED_POLL_PASSES``) and one reduction per call of whether any word missed them; only then does
  it wait with ``dl.wait`` on the high half of each missing word in turn (``_ll_receive_late``), so a dead peer
  ends in the watchdog's ``WaitTimeoutError`` naming that word, as in every other kernel.
  The committed tables (``ops/tuning``) pick it per GPU and size; the tuner (``bench/all_reduce.py --tune``)
  offers it, and a config can force it.

Every rank sums the ranks' values in the same order (rank 0, 1, ...), and a two-shot chunk is reduced by one rank
only, so all ranks get bit-identical results.

Synchronization, per program slot (``ops/common/slot_workspace.py``): a device-side epoch counter, flags that only take
epoch values, so nothing is ever reset and nothing waits on the host. The ordering arguments:

- one-shot: the staging buffer and the flags are double-buffered by epoch parity. A rank rewrites parity ``p`` at
  epoch ``e + 2`` only after its wait at ``e + 1`` returned, i.e. after every peer notified ``e + 1``, which each
  peer does after it finished reading epoch ``e``'s data (the notify's release covers those loads) and after its
  wait for ``e`` returned (so the ``eq`` test cannot miss a value).
- one-shot push: the inbox and the flags are double-buffered by epoch parity, and the one-shot's argument holds
  with "I push into peer ``q``'s inbox" for "I rewrite my staging buffer": I push parity ``p`` at ``e + 2`` only
  after my wait at ``e + 1`` returned, i.e. after ``q`` notified ``e + 1``, which ``q`` does after it finished
  reading its inbox of epoch ``e``.
- two-shot: single buffers suffice. A peer pushes into my inbox at ``e + 1`` only after its second wait at ``e``,
  i.e. after my second notify at ``e``, which follows my inbox reads of ``e``; it pushes into my gather buffer at
  ``e + 1`` only after its first wait at ``e + 1``, i.e. after my first notify at ``e + 1``, which follows my
  gather-buffer reads of ``e``. The same two facts order the flags.
- LL one-shot: its own slot workspace; per slot, ``2 parities x W senders x LL_LANES`` words; rank ``q``'s words
  for me lie in row ``q`` of the epoch's parity. Epochs start at 1 (buffers start zeroed, so no word ever looks
  written before it is) and wrap from 2^31 - 1 to 2, never 0. A word of epoch ``e`` is read only by a poll that
  waits for ``e`` exactly; the only question is whether a peer can overwrite it (epoch ``e + 2``, same parity)
  before I have read it. Peer ``q`` pushes ``e + 2`` in its next call, after it observed (relaxed loads) my
  epoch-``e + 1`` words, which I pushed in the call after the one that read ``e``. Every thread executes
  ``fence.acq_rel.sys`` at the start of each call: my fence in call ``e + 1`` follows my reads of ``e`` (the kernel
  boundary orders the previous call's threads before this call's) and precedes my pushes of ``e + 1``: a release
  fence; ``q``'s fence in its call ``e + 2`` follows its observation of those words (the previous call, the kernel
  boundary again) and precedes its push of ``e + 2``: an acquire fence. The observed relaxed (morally strong)
  store-load pair makes the two fences synchronize, so my reads of ``e`` happen before ``q``'s writes of ``e + 2``
  and cannot see them. No step of this passes between two threads of one call (each thread sums the words it
  loaded itself; the steps from one thread to another are kernel boundaries), so the poll needs no barrier.
  (Within one call a program does one round only: a second would need this fence, and a barrier of the program's
  threads, between its rounds.)

**The layout is fixed per workspace, never per call.** A slot's region is cut into blocks of ``STRIDE`` elements
(``config.LaunchShape.stride``: the workspace's capacity per round, the same bytes for every message and element
size): one-shot, the two parity halves; push, 2 parities x W senders' rows; two-shot, W senders' inbox rows then W
owners' gather rows. A round's elements (``ROUND`` <= ``STRIDE``) fill the start of a block. The ordering arguments
above only say that a word of one half (one parity, or the inbox against the gather buffer) is not rewritten
before its readers are done with it; they say nothing about a word that lies in one half in one call and in the
other half in the next. With blocks of the call's ``ROUND`` (as before), two calls on one slot with different
elements per round broke them: one-shot and push, the next call's other parity began inside the half a slow
reader still read (fewer elements per round); two-shot, the next call's inbox reached over the gather buffer a slow
owner still copied (more): a peer a call ahead overwrote data in flight (``test_emulation_all_reduce.py``). The
LL one-shot's words were always laid out by ``LL_LANES`` per sender.

Each flag round is one ``dl.notify`` to a tensor of every rank (one program barrier, the writes in parallel) when the
world size is a power of two, a loop of notifies otherwise (``ops/common/flags.py``).
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.flags import flag_round
from triton_dist.ops.common.ll_words import (
    _LL_WATCHED_POLL_PASSES,
    _ll_add,
    _ll_fence_acq_rel_sys,
    _ll_next_epoch,
    _ll_pack,
    _ll_payload,
    _ll_receive,
    _ll_receive_late,
    _ll_store,
    _ll_store_elements,
)


@triton.jit
def _one_shot_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    n,
    flags_stride,
    REGION: tl.constexpr,
    ROUND: tl.constexpr,
    STRIDE: tl.constexpr,
    BLOCK: tl.constexpr,
    STAGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION
    slot_flags = flags_ptr + slot * flags_stride
    for t in range(slot, tl.cdiv(n, ROUND), tl.num_programs(0)):
        epoch += 1
        parity = epoch % 2
        base = t * ROUND
        if STAGE:
            staged = slot_data + parity * STRIDE  # [2 parities][STRIDE]: the round fills the start of its half
            for s in range(0, ROUND, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = base + offs < n
                tl.store(staged + offs, tl.load(x_ptr + base + offs, mask=mask), mask=mask)
        else:  # x is on the heap and stays unchanged (benchmarks of the staging cost only)
            staged = x_ptr + base
        staged = flag_round(slot_flags + parity * ranks, me, epoch, ranks, staged, WORLD)
        for s in range(0, ROUND, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            mask = base + offs < n
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                acc += tl.load(dl.symm_at(staged + offs, peer), mask=mask).to(tl.float32)
            tl.store(out_ptr + base + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _one_shot_push_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    n,
    flags_stride,
    REGION: tl.constexpr,
    ROUND: tl.constexpr,
    STRIDE: tl.constexpr,
    BLOCK: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION  # [2 parities][ranks][STRIDE]: row q holds rank q's slice
    slot_flags = flags_ptr + slot * flags_stride
    for t in range(slot, tl.cdiv(n, ROUND), tl.num_programs(0)):
        epoch += 1
        parity = epoch % 2
        base = t * ROUND
        inbox = slot_data + parity * ranks * STRIDE
        # Push my slice into row `me` of every peer's inbox (remote 16-byte stores, straight from x).
        for peer in range(0, ranks):
            if peer != me:
                remote = dl.symm_at(inbox + me * STRIDE, peer)
                for s in range(0, ROUND, BLOCK):
                    offs = s + tl.arange(0, BLOCK)
                    mask = base + offs < n
                    tl.store(remote + offs, tl.load(x_ptr + base + offs, mask=mask), mask=mask)
        arrived = flag_round(slot_flags + parity * ranks, me, epoch, ranks, inbox, WORLD)
        # Sum in rank order (the same on every rank): my own slice from x, the others' from my inbox (local loads).
        for s in range(0, ROUND, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            mask = base + offs < n
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                if peer == me:
                    acc += tl.load(x_ptr + base + offs, mask=mask).to(tl.float32)
                else:
                    acc += tl.load(arrived + peer * STRIDE + offs, mask=mask).to(tl.float32)
            tl.store(out_ptr + base + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _two_shot_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    n,
    chunk,
    flags_stride,
    REGION: tl.constexpr,
    ROUND: tl.constexpr,
    STRIDE: tl.constexpr,
    BLOCK: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    inbox = data_ptr + slot * REGION  # [ranks][STRIDE]: slice of chunk `me` from each rank
    gathered = inbox + ranks * STRIDE  # [ranks][STRIDE]: reduced slice of chunk `owner` from each owner
    scatter_flags = flags_ptr + slot * flags_stride
    gather_flags = scatter_flags + ranks
    for t in range(slot, tl.cdiv(chunk, ROUND), tl.num_programs(0)):
        epoch += 1
        base = t * ROUND
        # Reduce-scatter: push slice t of chunk `peer` into rank peer's inbox, row `me`.
        for peer in range(0, ranks):
            remote = dl.symm_at(inbox + me * STRIDE, peer)
            for s in range(0, ROUND, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = (base + offs < chunk) & (peer * chunk + base + offs < n)
                tl.store(remote + offs, tl.load(x_ptr + peer * chunk + base + offs, mask=mask), mask=mask)
        arrived = flag_round(scatter_flags, me, epoch, ranks, inbox, WORLD)
        # Reduce my chunk's slice; store it here and push it into every peer's gather buffer, row `me`.
        for s in range(0, ROUND, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            mask = (base + offs < chunk) & (me * chunk + base + offs < n)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                acc += tl.load(arrived + peer * STRIDE + offs, mask=mask).to(tl.float32)
            reduced = acc.to(out_ptr.dtype.element_ty)
            tl.store(out_ptr + me * chunk + base + offs, reduced, mask=mask)
            for peer in range(0, ranks):
                if peer != me:
                    tl.store(dl.symm_at(gathered + me * STRIDE + offs, peer), reduced, mask=mask)
        landed = flag_round(gather_flags, me, epoch, ranks, gathered, WORLD)
        # All-gather: copy every other owner's reduced slice into out.
        for owner in range(0, ranks):
            if owner != me:
                for s in range(0, ROUND, BLOCK):
                    offs = s + tl.arange(0, BLOCK)
                    mask = (base + offs < chunk) & (owner * chunk + base + offs < n)
                    values = tl.load(landed + owner * STRIDE + offs, mask=mask)
                    tl.store(out_ptr + owner * chunk + base + offs, values, mask=mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _one_shot_ll_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    epochs_ptr,
    n,
    REGION: tl.constexpr,
    LANES: tl.constexpr,
    BLOCK: tl.constexpr,
    PER_WORD: tl.constexpr,
    WATCHED: tl.constexpr = False,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    DTYPE: tl.constexpr = x_ptr.dtype.element_ty
    # The fence: release for the previous call's reads of this slot, acquire for its observations (module docstring).
    epoch = _ll_next_epoch(_ll_fence_acq_rel_sys(tl.load(epochs_ptr + slot)))
    parity = epoch % 2
    words = data_ptr + slot * REGION + parity * ranks * LANES  # [ranks][LANES]: row p holds rank p's words
    offs = tl.arange(0, BLOCK)
    word = slot * BLOCK + offs  # the message's words: PER_WORD elements each
    mask = word * PER_WORD < n
    mine = _ll_payload(x_ptr, word, n, PER_WORD)
    packed = _ll_pack(mine, epoch)
    for peer in range(0, ranks):
        if peer != me:
            _ll_store(dl.symm_at(words + me * LANES + offs, peer), packed, mask)
    acc_low = tl.zeros([BLOCK], dtype=tl.float32)
    acc_high = tl.zeros([BLOCK], dtype=tl.float32)
    missing = tl.zeros([BLOCK], dtype=tl.int32)
    # Watched: bounded polls, so a dead peer reaches a dl.wait the watchdog can stop (below).
    PASSES: tl.constexpr = _LL_WATCHED_POLL_PASSES * WATCHED
    for peer in range(0, ranks):  # rank order: the same sum on every rank
        if peer == me:
            acc_low, acc_high = _ll_add(acc_low, acc_high, mine, DTYPE, PER_WORD)
        else:
            got, late = _ll_receive(words + peer * LANES + offs, mask, packed, PASSES)
            acc_low, acc_high = _ll_add(acc_low, acc_high, got, DTYPE, PER_WORD)
            missing |= late
    if WATCHED:
        if tl.max(missing, axis=0) > 0:  # one reduction per call; the sum again, every word awaited
            acc_low = tl.zeros([BLOCK], dtype=tl.float32)
            acc_high = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                if peer == me:
                    acc_low, acc_high = _ll_add(acc_low, acc_high, mine, DTYPE, PER_WORD)
                else:
                    got = _ll_receive_late(words + peer * LANES, offs, mask, packed, epoch, PASSES)
                    acc_low, acc_high = _ll_add(acc_low, acc_high, got, DTYPE, PER_WORD)
    _ll_store_elements(out_ptr, word, n, acc_low.to(DTYPE), acc_high.to(DTYPE), PER_WORD)
    # Every warp loaded the counter above; one thread stores the next value. Nothing else makes the warps meet (no
    # flag, no cross-warp reduction), so without this barrier a warp that had not loaded the counter yet could read
    # the next call's epoch and push and poll words of the wrong parity and epoch.
    tl.debug_barrier()
    tl.store(epochs_ptr + slot, epoch)
