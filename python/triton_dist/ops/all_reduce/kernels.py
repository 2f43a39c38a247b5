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

Each flag round is one ``dl.notify`` to a tensor of every rank (one program barrier, the writes in parallel) when the
world size is a power of two, a loop of notifies otherwise (``ops/common/flags.py``).
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.flags import flag_round


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
            staged = slot_data + parity * ROUND
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
    BLOCK: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION  # [2 parities][ranks][ROUND]: row q holds rank q's slice
    slot_flags = flags_ptr + slot * flags_stride
    for t in range(slot, tl.cdiv(n, ROUND), tl.num_programs(0)):
        epoch += 1
        parity = epoch % 2
        base = t * ROUND
        inbox = slot_data + parity * ranks * ROUND
        # Push my slice into row `me` of every peer's inbox (remote 16-byte stores, straight from x).
        for peer in range(0, ranks):
            if peer != me:
                remote = dl.symm_at(inbox + me * ROUND, peer)
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
                    acc += tl.load(arrived + peer * ROUND + offs, mask=mask).to(tl.float32)
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
    BLOCK: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    inbox = data_ptr + slot * REGION  # [ranks][ROUND]: slice of chunk `me` from each rank
    gathered = inbox + ranks * ROUND  # [ranks][ROUND]: reduced slice of chunk `owner` from each owner
    scatter_flags = flags_ptr + slot * flags_stride
    gather_flags = scatter_flags + ranks
    for t in range(slot, tl.cdiv(chunk, ROUND), tl.num_programs(0)):
        epoch += 1
        base = t * ROUND
        # Reduce-scatter: push slice t of chunk `peer` into rank peer's inbox, row `me`.
        for peer in range(0, ranks):
            remote = dl.symm_at(inbox + me * ROUND, peer)
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
                acc += tl.load(arrived + peer * ROUND + offs, mask=mask).to(tl.float32)
            reduced = acc.to(out_ptr.dtype.element_ty)
            tl.store(out_ptr + me * chunk + base + offs, reduced, mask=mask)
            for peer in range(0, ranks):
                if peer != me:
                    tl.store(dl.symm_at(gathered + me * ROUND + offs, peer), reduced, mask=mask)
        landed = flag_round(gather_flags, me, epoch, ranks, gathered, WORLD)
        # All-gather: copy every other owner's reduced slice into out.
        for owner in range(0, ranks):
            if owner != me:
                for s in range(0, ROUND, BLOCK):
                    offs = s + tl.arange(0, BLOCK)
                    mask = (base + offs < chunk) & (owner * chunk + base + offs < n)
                    values = tl.load(landed + owner * ROUND + offs, mask=mask)
                    tl.store(out_ptr + owner * chunk + base + offs, values, mask=mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _ll_fence_acq_rel_sys(value):
    """``fence.acq_rel.sys`` in every thread that runs it; returns ``value`` (so a caller can thread it through)."""
    return tl.inline_asm_elementwise(
        "fence.acq_rel.sys;\n\tmov.b32 $0, $1;", "=r,r", [value], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _ll_payload(x_ptr, words, n, PER_WORD: tl.constexpr):
    """The 32 data bits of each LL word ``words`` (uint32): ``PER_WORD`` 2 (16-bit elements), elements ``2 w`` in
    the low half and ``2 w + 1`` in the high; 1 (fp32), element ``w``. Elements at or past ``n`` read as 0."""
    if PER_WORD == 2:
        first = words * 2
        low = tl.load(x_ptr + first, mask=first < n, other=0.0).to(tl.uint16, bitcast=True).to(tl.uint32)
        high = tl.load(x_ptr + first + 1, mask=first + 1 < n, other=0.0).to(tl.uint16, bitcast=True).to(tl.uint32)
        payload = low | (high << 16)
    else:
        payload = tl.load(x_ptr + words, mask=words < n, other=0.0).to(tl.uint32, bitcast=True)
    return payload


@triton.jit
def _ll_pack(payload, epoch):
    """One uint64 word per lane: ``epoch`` (int32, > 0) in the high 32 bits, ``payload`` (uint32) in the low."""
    high = epoch.to(tl.uint32, bitcast=True).to(tl.uint64) << 32
    return high | payload.to(tl.uint64)


@triton.jit
def _ll_unpack(words):
    """(the int32 epoch of each word, its uint32 payload): the inverse of ``_ll_pack``."""
    return (words >> 32).to(tl.uint32).to(tl.int32, bitcast=True), words.to(tl.uint32)


@triton.jit
def _ll_elements(payload, DTYPE: tl.constexpr, PER_WORD: tl.constexpr):
    """(the low element, the high element) of each payload as ``DTYPE`` (``PER_WORD`` 1: the high is the low)."""
    if PER_WORD == 2:
        low = (payload & 0xFFFF).to(tl.uint16).to(DTYPE, bitcast=True)
        high = (payload >> 16).to(tl.uint16).to(DTYPE, bitcast=True)
    else:
        low = payload.to(DTYPE, bitcast=True)
        high = low
    return low, high


@triton.jit
def _ll_store_elements(out_ptr, words, n, low, high, PER_WORD: tl.constexpr):
    """Store each word's elements where ``_ll_payload`` read them (``high`` only for ``PER_WORD`` 2)."""
    if PER_WORD == 2:
        first = words * 2
        tl.store(out_ptr + first, low, mask=first < n)
        tl.store(out_ptr + first + 1, high, mask=first + 1 < n)
    else:
        tl.store(out_ptr + words, low, mask=words < n)


@triton.jit
def _ll_next_epoch(epoch):
    """The epoch after ``epoch``: + 1, from ``LL_EPOCH_MAX`` back to 2 (never 0, the zeroed buffers' value; the
    parity still alternates: LL_EPOCH_MAX is odd)."""
    return tl.where(epoch >= 2147483647, 2, epoch + 1)


@triton.jit
def _ll_store(ptrs, words, mask):
    """``st.relaxed.sys.global.b64`` of each lane's word where ``mask``: a strong, naturally aligned 8-byte store,
    single-copy atomic in the PTX memory model (a reader sees the whole word or none of it). Returns dummies."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred %p; setp.ne.b32 %p, $3, 0; @%p st.relaxed.sys.global.b64 [$1], $2; mov.u32 $0, 0; }",
        "=r,l,l,r",
        [ptrs, words, mask.to(tl.int32)],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.constexpr_function
def _ll_words_per_thread(block, num_warps):
    """The elements of a ``block``-element tensor each thread holds at ``num_warps`` warps (at least 1: a smaller
    block is replicated over the threads)."""
    return max(1, block // (32 * num_warps))


LL_WATCHED_POLL_PASSES = 1 << 16
"""With the wait watchdog on, a poll gives up after this many passes (tens of ms) and the receive waits on its
first missing word with ``dl.wait``, which the watchdog times out (``_ll_receive_late``)."""
_LL_WATCHED_POLL_PASSES = tl.constexpr(LL_WATCHED_POLL_PASSES)


@triton.constexpr_function
def _ll_poll_asm(count, max_passes=0):
    """(PTX, constraints) of one thread's poll of ``count`` words. Operands: ``$0 .. $count-1`` the words (out,
    b64), then their addresses, then the epoch each word must carry (0 for a masked lane: never loaded, returns 0;
    an epoch is never 0). ``max_passes`` > 0 bounds the loop: after that many passes the words still missing are
    returned as last read (their high 32 bits are not the epoch); the caller checks.

    One loop per thread, no other thread involved: each pass loads every word still pending
    (``ld.relaxed.sys.global.b64``; a pass's loads are independent, so they are in flight together) and drops those
    whose high 32 bits now equal their epoch; it branches back while any is pending. A word seen with its epoch is
    not loaded again: the word returned is the one that load read whole (single-copy atomic). The label and the
    registers are declared inside ``{ }``, so every instance of the asm in a kernel has its own (PTX scopes both
    to their block, as CUTLASS's barrier waits rely on).
    """
    words = range(count)
    lines = ["{", ".reg .pred %llp;", f".reg .b32 %llk<{count}>;", ".reg .b32 %lllo, %llhi, %llany;"]
    lines.append(f".reg .b64 %llw<{count}>;")
    if max_passes:
        lines += [".reg .b32 %llpass;", "mov.b32 %llpass, 0;"]
    lines += [f"mov.b32 %llk{i}, ${2 * count + i};" for i in words]
    lines += [f"mov.b64 %llw{i}, 0;" for i in words]
    lines.append("LL_POLL:")
    for i in words:
        lines.append(f"setp.ne.b32 %llp, %llk{i}, 0;")
        lines.append(f"@%llp ld.relaxed.sys.global.b64 %llw{i}, [${count + i}];")
    for i in words:
        lines.append(f"mov.b64 {{%lllo, %llhi}}, %llw{i};")
        lines.append(f"setp.eq.b32 %llp, %llhi, %llk{i};")
        lines.append(f"selp.b32 %llk{i}, 0, %llk{i}, %llp;")
    lines.append("mov.b32 %llany, %llk0;")
    lines += [f"or.b32 %llany, %llany, %llk{i};" for i in words if i > 0]
    if max_passes:
        lines.append("add.u32 %llpass, %llpass, 1;")
        lines.append(f"setp.lt.u32 %llp, %llpass, {max_passes};")
        lines.append("setp.ne.and.b32 %llp, %llany, 0, %llp;")
    else:
        lines.append("setp.ne.b32 %llp, %llany, 0;")
    lines.append("@%llp bra LL_POLL;")
    lines += [f"mov.b64 ${i}, %llw{i};" for i in words]
    lines.append("}")
    return "\n\t".join(lines), ",".join(["=l"] * count + ["l"] * count + ["r"] * count)


@triton.jit
def _ll_poll(ptrs, wanted, MAX_PASSES: tl.constexpr = 0):
    """Poll the words at ``ptrs`` until each lane's word carries ``wanted`` (int32; 0: a masked lane, skipped) in
    its high 32 bits; returns the words (uint64; 0 for masked lanes). One asm instance per thread covers all of its
    lanes (``pack``), so the spin is a per-thread PTX loop with no barrier, shared memory or shuffle per pass (a
    Triton ``while`` needs a uniform condition: a block-wide reduction per pass). Not pure: never merged with
    another poll, never hoisted. ``MAX_PASSES`` > 0: gives up after that many passes (see ``_ll_poll_asm``)."""
    COUNT: tl.constexpr = _ll_words_per_thread(ptrs.shape[0], tl.extra.cuda.num_warps())
    ASM: tl.constexpr = _ll_poll_asm(COUNT, MAX_PASSES)
    return tl.inline_asm_elementwise(ASM[0], ASM[1], [ptrs, wanted], dtype=tl.uint64, is_pure=False, pack=COUNT)


@triton.jit
def _ll_receive(ptrs, mask, sent, MAX_PASSES: tl.constexpr = 0):
    """Poll the words at ``ptrs`` until every valid lane holds one of the epoch of ``sent`` (this program's own
    packed words, all of this call's epoch): (their uint32 payloads, int32 1 where a lane's word had not
    arrived). ``MAX_PASSES`` > 0 gives up after that many passes, which only the latter tells; 0 polls until all
    arrived (the latter is all 0 and compiles away unused). No barrier either way: a caller that bounds the poll
    reduces the misses once, after every peer."""
    # The epoch comes from `sent` rather than the scalar so that the poll takes the layout of x's load, which the
    # sum has too. From the scalar it got Triton's default layout, and the layout pass, moving the conversion to
    # the sum's layout back through the poll, cloned it (a non-pure asm is kept where it was: two polls per peer).
    epoch, _ = _ll_unpack(sent)
    wanted = tl.where(mask, epoch, 0)
    words = _ll_poll(ptrs, wanted, MAX_PASSES)
    arrived, payload = _ll_unpack(words)
    return payload, (arrived != wanted).to(tl.int32)


@triton.jit
def _ll_receive_late(words_ptr, offs, mask, sent, epoch, MAX_PASSES: tl.constexpr):
    """The payloads of the words at ``words_ptr + offs`` once all have arrived, for a receive whose bounded poll
    missed some: wait with ``dl.wait`` (which the wait watchdog times out, naming the word) on the high half of the
    first word still missing, poll again, repeat. Reached only when a peer is late by the poll's passes or never
    comes."""
    got, missing = _ll_receive(words_ptr + offs, mask, sent, MAX_PASSES)
    late = tl.max(missing, axis=0)
    while late > 0:
        first = tl.min(tl.where(missing > 0, offs, offs.shape[0]), axis=0)
        high_half = (words_ptr + first).to(tl.pointer_type(tl.int32), bitcast=True) + 1  # little-endian
        dl.wait(high_half, 1, "sys", "relaxed", epoch, cmp="eq")
        pending = missing > 0
        again, missing = _ll_receive(words_ptr + offs, mask & pending, sent, MAX_PASSES)
        got = tl.where(pending, again, got)
        late = tl.max(missing, axis=0)
    return got


@triton.jit
def _ll_add(acc_low, acc_high, payload, DTYPE: tl.constexpr, PER_WORD: tl.constexpr):
    """Add each payload's elements (as ``DTYPE``) to the fp32 sums of the low and high elements."""
    low, high = _ll_elements(payload, DTYPE, PER_WORD)
    acc_low += low.to(tl.float32)
    if PER_WORD == 2:
        acc_high += high.to(tl.float32)
    return acc_low, acc_high


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
    tl.store(epochs_ptr + slot, epoch)
