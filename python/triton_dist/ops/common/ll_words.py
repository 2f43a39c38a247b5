"""The LL ("low-latency") word protocol shared by the ops that move small messages without a flag round.

Each 8-byte word carries 32 bits of data (two 16-bit or one 32-bit element) and, in its high 32 bits, the call's
epoch: a reader polls the words themselves until each carries the epoch it expects, so no separate flag is written
or awaited. ``all_reduce``'s LL one-shot and ``all_reduce_residual_rmsnorm``'s LL variant use these device helpers
(packing, the system-scope fence, 8-byte relaxed stores, the poll and its watchdog-bounded variant, the fp32
accumulation) and host facts (elements per word, words per thread, the epoch cycle, whether the build can run it).
The helpers are inline PTX: NVIDIA only (``ll_supported``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import triton_dist.language as dl

LL_PER_THREAD = 16
"""LL one-shot: at most 16 words per thread (one warp at 1024 spills registers on sm_90, outside its loops)."""
LL_EPOCH_MAX = 2**31 - 1
"""LL epochs run 1, 2, ..., LL_EPOCH_MAX, then 2, 3, ... (positive, never 0, parity alternating on the wrap). A
word is mistaken for a new one only if the slot's calls left it untouched for a whole cycle (2^31 - 2
calls of that slot, all with fewer elements per program)."""


def ll_elements_per_word(itemsize: int) -> int:
    """Elements of ``itemsize`` bytes in one LL word's 32 data bits: 2 for bf16 / fp16, 1 for fp32."""
    return 4 // itemsize


def ll_supported() -> bool:
    """Whether this build can run the LL protocol: NVIDIA only (its PTX 8-byte relaxed system-scope accesses)."""
    return torch.version.hip is None


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
