"""``all_reduce(x)``: sum a tensor over every rank in one kernel launch, for the small messages of decoding.

```python
y = triton_dist.ops.all_reduce(x)              # x: any-shape bf16/fp16/fp32 CUDA tensor, on or off the heap
triton_dist.ops.all_reduce(x, out=x)           # in place
```

Four algorithms, each one launch without host synchronization (so they can be captured in CUDA graphs):

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
  order until each holds the epoch, and sums as the one-shot does. Latency: one one-way NVLink write, the cost 2x
  the traffic.
  Its poll is plain loads, not a ``dl.wait``. With the wait watchdog on, the kernel is compiled with bounded
  polls (``LL_WATCHED_POLL_PASSES``) and one reduction per call of whether any word missed them; only then does
  it wait with ``dl.wait`` on the high half of each missing word in turn (``_ll_receive_late``), so a dead peer
  ends in the watchdog's ``WaitTimeoutError`` naming that word, as in every other kernel.
  The committed 2 x H200 table runs it up to 64 KiB; :func:`tune` offers it, and a config can force it.

Each flag round is one ``dl.notify`` to a tensor of every rank (one program barrier, the writes in parallel) when the
world size is a power of two, a loop of notifies otherwise. A call repeating an earlier call's signature (size,
dtype, 16-byte alignment, config) checks its inputs and relaunches that call's ``LaunchPlan`` (``common/launch.py``):
no config choice, no agreement lookup, none of Triton's per-call argument binding.

Every rank sums the ranks' values in the same order (rank 0, 1, ...), and a two-shot chunk is reduced by one rank
only, so all ranks get bit-identical results.

Synchronization, per program slot (``common/slot_workspace.py``): a device-side epoch counter, flags that only take
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

The algorithm and launch shape come from a table of (message bytes -> algorithm, programs, warps) per GPU and world
size: a cache written by :func:`tune` (``$TRITON_DIST_CACHE_DIR`` or ``~/.cache/triton_dist``), else the committed
table measured on 2 x H200, else a size heuristic.

The op is ``torch.ops.triton_dist.all_reduce`` (and ``all_reduce_out``), so it works under ``torch.compile``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _get_current_dispatch_mode

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.compiler.watchdog import watchdog_enabled
from triton_dist.ops import tuning
from triton_dist.ops.common.slot_workspace import slot_workspace
from triton_dist.ops.common.launch import LaunchPlan, first_launch
from triton_dist.runtime.world.rank_agreement import AgreedSignatures, check_ranks_call_alike
from triton_dist.testing.correctness import tolerances

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SUPPORTED_OPS = ("sum",)
ALGORITHMS = ("one_shot", "one_shot_push", "two_shot", "one_shot_ll")

SLOTS = {"one_shot": 256, "one_shot_push": 256, "two_shot": 128, "one_shot_ll": 128}
"""Program slots per workspace, per algorithm: the most programs one launch uses (one-shot: two per SM, so one
program's loads overlap another's flag wait)."""
ONE_SHOT_REGION_BYTES = 64 << 10
"""Per slot: two staging halves (epoch parity) of 32 KiB; a program moves up to 32 KiB per flag round."""
PUSH_ROUND_BYTES = 16 << 10
"""One-shot push: a program moves up to 16 KiB per flag round; its slot holds 2 parities x W rows of that (64 KiB
per slot at 2 ranks, 256 KiB at 8; x 256 slots: 16 MiB of the symmetric heap at 2 ranks, 64 MiB at 8, allocated on
the first push call)."""
TWO_SHOT_REGION_BYTES = 256 << 10
"""Per slot: an inbox and a gather buffer of W slices each; up to 128 KiB of input per program per flag round."""
CHUNK_ALIGN = 16
"""Two-shot chunks start at multiples of 16 elements, so every chunk's slices stay 16-byte aligned."""
LL_LANES = 1024
"""LL one-shot: the most 8-byte words one program moves per call (one round)."""
LL_PER_THREAD = 16
"""LL one-shot: at most 16 words per thread (one warp at 1024 spills registers on sm_90, outside its loops)."""
LL_EPOCH_MAX = 2**31 - 1
"""LL epochs run 1, 2, ..., LL_EPOCH_MAX, then 2, 3, ... (positive, never 0, parity alternating on the wrap). A
word is mistaken for a new one only if the slot's calls left it untouched for a whole cycle (2^31 - 2
calls of that slot, all with fewer elements per program)."""


def ll_elements_per_word(itemsize: int) -> int:
    """Elements of ``itemsize`` bytes in one LL word's 32 data bits: 2 for bf16 / fp16, 1 for fp32."""
    return 4 // itemsize


def ll_words_per_program(config: AllReduceConfig) -> int:
    """The most words one LL program moves: min(``LL_LANES``, ``LL_PER_THREAD`` per thread)."""
    return min(LL_LANES, LL_PER_THREAD * 32 * config.num_warps)


def ll_capacity(config: AllReduceConfig, itemsize: int) -> int:
    """The most elements of ``itemsize`` bytes an LL one-shot ``config`` moves: ``programs`` x
    ``ll_words_per_program`` words of ``ll_elements_per_word(itemsize)`` elements."""
    return config.programs * ll_words_per_program(config) * ll_elements_per_word(itemsize)


def ll_max_numel(itemsize: int) -> int:
    """The largest LL one-shot message in elements (every program one round, all slots): 256K elements of bf16 /
    fp16 (512 KiB), 128K of fp32 (512 KiB)."""
    return SLOTS["one_shot_ll"] * LL_LANES * ll_elements_per_word(itemsize)


def ll_region_bytes(world_size: int) -> int:
    """LL one-shot bytes per slot: 2 parities x ``world_size`` senders x ``LL_LANES`` words of 8 bytes (x 128
    slots: 4 MiB of symmetric heap at 2 ranks, 16 MiB at 8, allocated on the first LL call)."""
    return 2 * world_size * LL_LANES * 8


def push_region_bytes(world_size: int) -> int:
    """One-shot push bytes per slot: 2 parities x ``world_size`` rows of ``PUSH_ROUND_BYTES``."""
    return 2 * world_size * PUSH_ROUND_BYTES


def ll_supported() -> bool:
    """Whether this build can run the LL one-shot: NVIDIA only (its PTX 8-byte relaxed system-scope accesses)."""
    return torch.version.hip is None


@dataclass(frozen=True)
class AllReduceConfig:
    """How one all-reduce runs: ``algo`` ("one_shot" / "one_shot_push" / "two_shot" / "one_shot_ll"), at most
    ``programs`` programs (each moving up to its slot's capacity per flag round, in as many rounds as needed;
    "one_shot_ll": one round only, so at most ``ll_capacity(config, itemsize)`` elements), ``num_warps`` warps
    each."""

    algo: str
    programs: int
    num_warps: int = 4

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ValueError(f"all_reduce: algo must be one of {list(ALGORITHMS)}, got {self.algo!r}")
        if not 1 <= self.programs <= SLOTS[self.algo]:
            most = SLOTS[self.algo]
            raise ValueError(f"all_reduce: {self.algo} programs must be in [1, {most}], got {self.programs}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"all_reduce: num_warps must be a power of two <= 16, got {self.num_warps}")


# ---------------------------------------------------------------------------------------------------------------
# Kernels


@triton.jit
def _notify_every_rank(flag_ptr, epoch, ranks, WORLD: tl.constexpr):
    """Set ``flag_ptr`` to ``epoch`` on every rank (release). ``WORLD`` = the world size when it is a power of two:
    one ``dl.notify`` to a tensor of ranks (one barrier, the ranks' writes in parallel); else 0: one per rank."""
    if WORLD > 0:
        dl.notify(flag_ptr, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node")
    else:
        for peer in range(0, ranks):
            dl.notify(flag_ptr, peer, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def _flag_round(flags, me, epoch, ranks, data, WORLD: tl.constexpr):
    """One flag round over ``flags`` (one int32 per rank): set ``flags[me]`` to ``epoch`` on every rank (release:
    this program's earlier accesses come first), wait until every rank's flag here holds ``epoch`` (acquire), and
    return ``data`` ordered after the wait (``dl.consume_token``), for the loads that read what the peers wrote."""
    _notify_every_rank(flags + me, epoch, ranks, WORLD)
    token = dl.wait(flags, ranks, "sys", "acquire", waitValue=epoch)
    return dl.consume_token(data, token)


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
        staged = _flag_round(slot_flags + parity * ranks, me, epoch, ranks, staged, WORLD)
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
        arrived = _flag_round(slot_flags + parity * ranks, me, epoch, ranks, inbox, WORLD)
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
        arrived = _flag_round(scatter_flags, me, epoch, ranks, inbox, WORLD)
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
        landed = _flag_round(gather_flags, me, epoch, ranks, gathered, WORLD)
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


# ---------------------------------------------------------------------------------------------------------------
# Launch shapes


@dataclass(frozen=True)
class LaunchShape:
    """What a config means for one message: elements per program per flag round, block, grid, workspace."""

    round: int
    block: int
    programs: int
    region_elems: int
    chunk: int


def _pow2_floor(value: int) -> int:
    return 1 << (max(1, value).bit_length() - 1)


def launch_shape(numel: int, itemsize: int, world_size: int, config: AllReduceConfig) -> LaunchShape:
    """The grid and per-program sizes ``config`` gives a message of ``numel`` elements of ``itemsize`` bytes.

    Raises ValueError for a "one_shot_ll" config that cannot move the message in one round (more than
    ``ll_capacity(config, itemsize)`` elements) or on a build without NVIDIA support (``ll_supported``).
    """
    if config.algo == "one_shot_ll":
        return _ll_launch_shape(numel, itemsize, world_size, config)
    if config.algo == "one_shot":
        region_bytes = ONE_SHOT_REGION_BYTES
        capacity = region_bytes // (2 * itemsize)
        chunk = numel
        length = numel
    elif config.algo == "one_shot_push":
        region_bytes = push_region_bytes(world_size)
        capacity = PUSH_ROUND_BYTES // itemsize
        chunk = numel
        length = numel
    else:
        region_bytes = TWO_SHOT_REGION_BYTES
        capacity = _pow2_floor(region_bytes // (2 * world_size * itemsize))
        chunk = triton.cdiv(triton.cdiv(numel, world_size), CHUNK_ALIGN) * CHUNK_ALIGN
        length = chunk
    block = min(config.num_warps * 32 * (32 // itemsize), capacity)  # two 16-byte vectors per thread
    round_ = min(max(triton.next_power_of_2(triton.cdiv(length, config.programs)), block), capacity)
    programs = max(1, min(triton.cdiv(length, round_), config.programs))  # the rest in more flag rounds
    return LaunchShape(round_, block, programs, region_bytes // itemsize, chunk)


def _ll_launch_shape(numel: int, itemsize: int, world_size: int, config: AllReduceConfig) -> LaunchShape:
    """LL one-shot: one block of ``round`` words per program, a power of two from one word per thread (fewer would
    make threads store the same word twice) to ``ll_capacity / programs`` elements' worth; one round, so a grid of
    ``cdiv(words, round)`` <= ``config.programs`` programs. ``round`` and ``block`` count words (of
    ``ll_elements_per_word(itemsize)`` elements)."""
    if not ll_supported():
        raise ValueError(
            "all_reduce: one_shot_ll needs an NVIDIA GPU (8-byte relaxed system-scope PTX loads and stores); "
            "this is a ROCm build: use one_shot or two_shot"
        )
    capacity = ll_capacity(config, itemsize)
    if numel > capacity:
        raise ValueError(
            f"all_reduce: one_shot_ll with {config.programs} programs of {config.num_warps} warps moves at most "
            f"{capacity} elements of {itemsize} bytes (one round of min({LL_LANES}, {LL_PER_THREAD} per thread) "
            f"words of {ll_elements_per_word(itemsize)} per program), got {numel}: use more programs (up to "
            f"{SLOTS['one_shot_ll']}: {ll_max_numel(itemsize)} elements at >= 2 warps) or one_shot / two_shot"
        )
    words = triton.cdiv(max(numel, 1), ll_elements_per_word(itemsize))
    threads = config.num_warps * 32
    most = ll_words_per_program(config)
    round_ = min(max(triton.next_power_of_2(triton.cdiv(words, config.programs)), threads), most)
    programs = max(1, triton.cdiv(words, round_))
    return LaunchShape(round_, round_, programs, ll_region_bytes(world_size) // 8, numel)


def fits(config: AllReduceConfig, numel: int, itemsize: int) -> bool:
    """Whether ``config`` can run a message of ``numel`` elements of ``itemsize`` bytes here (only "one_shot_ll"
    has limits)."""
    if config.algo != "one_shot_ll":
        return True
    return ll_supported() and numel <= ll_capacity(config, itemsize)


def notify_world(world_size: int) -> int:
    """The kernels' ``WORLD``: the world size if it is a power of two (one tensor-of-ranks notify), else 0."""
    return world_size if world_size & (world_size - 1) == 0 else 0


_plans: dict[tuple, LaunchPlan] = {}


def _launch(x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig, stage: bool = True) -> LaunchPlan:
    """Enqueue the kernel on the current stream (x, out: contiguous, same dtype and size; no checks); returns the
    plan that launched it."""
    watched = watchdog_enabled()  # the LL kernel is compiled for it (bounded polls)
    key = (x.numel(), x.dtype, x.device, x.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0, config, stage, watched)
    plan = _plans.get(key)
    world = rt.current_world()
    if plan is not None and plan.world is world:
        plan.launch(x.device, x, out)
        return plan
    world_size = world.world_size
    shape = launch_shape(x.numel(), x.element_size(), world_size, config)
    if config.algo == "one_shot_ll":
        ws = slot_workspace("all_reduce.one_shot_ll", SLOTS["one_shot_ll"], 1, ll_region_bytes(world_size))
        named = {
            "x_ptr": x,
            "out_ptr": out,
            "data_ptr": ws.data_as(torch.int64),
            "epochs_ptr": ws.epochs,
            "n": x.numel(),
            "REGION": shape.region_elems,
            "LANES": LL_LANES,
            "BLOCK": shape.block,
            "PER_WORD": ll_elements_per_word(x.element_size()),
            "WATCHED": watched,
        }
        plan = first_launch(_one_shot_ll_kernel, (shape.programs, 1, 1), named, 2, num_warps=config.num_warps)
        _plans[key] = plan
        return plan
    region_bytes = shape.region_elems * x.element_size()  # launch_shape sized it for the algorithm
    ws = slot_workspace(f"all_reduce.{config.algo}", SLOTS[config.algo], 2 * world_size, region_bytes)
    kernel = {"one_shot": _one_shot_kernel, "one_shot_push": _one_shot_push_kernel, "two_shot": _two_shot_kernel}[
        config.algo
    ]
    named = {
        "x_ptr": x,
        "out_ptr": out,
        "data_ptr": ws.data_as(x.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "n": x.numel(),
        "chunk": shape.chunk,
        "flags_stride": ws.flags.shape[1],
        "REGION": shape.region_elems,
        "ROUND": shape.round,
        "BLOCK": shape.block,
        "STAGE": stage,
        "WORLD": notify_world(world_size),
    }
    plan = first_launch(kernel, (shape.programs, 1, 1), named, 2, num_warps=config.num_warps)
    _plans[key] = plan
    return plan


# ---------------------------------------------------------------------------------------------------------------
# Choosing a config: tuned cache -> committed table -> heuristic

Table = list[tuple[int, AllReduceConfig]]
"""(largest message in bytes, config) rows, ascending; the first row whose bound covers the message applies."""

_C = AllReduceConfig
DEFAULT_TABLES: dict[tuple[str, int], Table] = {
    # 2 x H200 (NV18), bench/all_reduce.py --tune, graphed, bf16, with the wait watchdog on (the default):
    # 2026-11-24 00:42 UTC at c0d34ba (bench/results/all_reduce.md is that run). Since the wait's whole first warp
    # polls (c0d34ba), the LL kernel wins up to 64 KiB (4.3 / 4.9 µs at 32 / 64 KiB, one-shot 5.3 / 5.4); before,
    # one-shot took over from 32 KiB.
    ("NVIDIA H200", 2): [
        (8 << 10, _C("one_shot_ll", 32, 1)),
        (16 << 10, _C("one_shot_ll", 32, 4)),
        (32 << 10, _C("one_shot_ll", 64, 4)),
        (64 << 10, _C("one_shot_ll", 128, 4)),
        (128 << 10, _C("one_shot", 32, 4)),
        (256 << 10, _C("one_shot", 64, 4)),
        (512 << 10, _C("one_shot", 64, 8)),
        (1 << 20, _C("one_shot", 128, 8)),
        (8 << 20, _C("one_shot", 256, 8)),
        (64 << 20, _C("two_shot", 128, 8)),
    ],
    # 2 x H100 80GB HBM3 (NV18), the same command, 2026-11-25 23:06 UTC at 419b135 (bench/results/all_reduce_2xH100.md
    # is that run): the one-shot push beats the pull one-shot by 10-14% from 128 KiB to 1 MiB (5.9 / 7.2 / 8.9 µs at
    # 128 KiB / 512 KiB / 1 MiB, pull 6.5 / 8.1 / 10.2, same launch shape, same run); the LL one-shot with two
    # 16-bit elements per word wins up to 64 KiB (5.3 µs there; push 5.8 in the run before it).
    ("NVIDIA H100 80GB HBM3", 2): [
        (8 << 10, _C("one_shot_ll", 32, 1)),
        (16 << 10, _C("one_shot_ll", 64, 1)),
        (32 << 10, _C("one_shot_ll", 32, 4)),
        (64 << 10, _C("one_shot_ll", 32, 8)),
        (128 << 10, _C("one_shot_push", 32, 4)),
        (256 << 10, _C("one_shot_push", 32, 8)),
        (512 << 10, _C("one_shot_push", 64, 8)),
        (2 << 20, _C("one_shot_push", 128, 8)),
        (8 << 20, _C("one_shot_push", 256, 8)),
        (64 << 20, _C("two_shot", 128, 8)),
    ],
}
"""Committed tables measured by ``bench/all_reduce.py --tune``, keyed by (GPU name, world size)."""


def heuristic_config(nbytes: int, world_size: int) -> AllReduceConfig:
    """A config without measurements for this GPU and world size: the one-shot push up to 256 KiB (less for many
    ranks; on 2 x H100 it beat the pull one-shot at every size from 64 KiB to 8 MiB), else two-shot."""
    if nbytes <= (512 << 10) // max(1, world_size):
        return AllReduceConfig("one_shot_push", max(1, min(32, nbytes // (8 << 10))), 4)
    return AllReduceConfig("two_shot", max(8, min(SLOTS["two_shot"], nbytes // (64 << 10))), 8)


def _cache_path() -> Path:
    return tuning.cache_dir() / "all_reduce_tuning.json"


def _table_key(device: torch.device, world_size: int) -> tuple[str, int]:
    return (torch.cuda.get_device_name(device), world_size)


_tables: dict[tuple[str, int], Table] = {}


def _load_cached_tables() -> None:
    path = _cache_path()
    if not path.is_file():
        return
    try:
        raw = json.loads(path.read_text())
        for key, rows in raw.items():
            name, size = key.rsplit("|", 1)
            _tables[(name, int(size))] = [(int(b), AllReduceConfig(**c)) for b, c in rows]
    except (ValueError, TypeError, KeyError) as error:
        raise RuntimeError(f"all_reduce: the tuning cache {path} is unreadable ({error}); delete it") from error


_cache_loaded = False
_selected: dict[tuple[int, torch.device, int, int], AllReduceConfig] = {}


def select_config(nbytes: int, device: torch.device, world_size: int, itemsize: int = 2) -> AllReduceConfig:
    """The config for a message of ``nbytes`` (elements of ``itemsize`` bytes): tuned cache, else the committed
    table, else the heuristic. A table's "one_shot_ll" row that cannot move the message (past the last row, or
    on a build without it) gives way to the heuristic."""
    memo = (nbytes, device, world_size, itemsize)
    found = _selected.get(memo)
    if found is None:
        found = _select_config(nbytes, device, world_size)
        if not fits(found, nbytes // itemsize, itemsize):
            found = heuristic_config(nbytes, world_size)
        _selected[memo] = found
    return found


def _select_config(nbytes: int, device: torch.device, world_size: int) -> AllReduceConfig:
    global _cache_loaded
    if not _cache_loaded:
        _load_cached_tables()
        _cache_loaded = True
    key = _table_key(device, world_size)
    table = _tables.get(key) or DEFAULT_TABLES.get(key)
    if table:
        for bound, config in table:
            if nbytes <= bound:
                return config
        return table[-1][1]
    return heuristic_config(nbytes, world_size)


# ---------------------------------------------------------------------------------------------------------------
# Checks, the custom op, the public function


def check_inputs(x: torch.Tensor, op: str, out: torch.Tensor | None = None) -> None:
    """Raise a TypeError/ValueError naming the problem (shapes and dtypes only; fake tensors pass through)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"all_reduce: x must be a torch.Tensor, got {type(x).__name__}")
    if op not in SUPPORTED_OPS:
        raise ValueError(f"all_reduce: op must be one of {list(SUPPORTED_OPS)}, got {op!r}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"all_reduce: x must be bfloat16, float16 or float32, got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"all_reduce: x must be contiguous, got shape {list(x.shape)} with strides {x.stride()}")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"all_reduce: out must be a torch.Tensor, got {type(out).__name__}")
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device or not out.is_contiguous():
            raise ValueError(
                f"all_reduce: out must be a contiguous {x.dtype} tensor of shape {list(x.shape)} on {x.device}, "
                f"got {out.dtype} {list(out.shape)} on {out.device} (contiguous={out.is_contiguous()})"
            )


_agreed = AgreedSignatures()
"""The (numel, dtype, config) signatures the current world's ranks agreed on."""


def _check_device_and_agreement(x: torch.Tensor, config: AllReduceConfig) -> None:
    """x is on this rank's heap device; the first call of each (size, dtype) checks all ranks agree (collective).

    A rank that launched with another size would read past its peers' data or wait forever for flags; the check
    makes that a RuntimeError on every rank instead. Later calls of the same signature cost a set lookup. A config
    that cannot run here raises ValueError first: "one_shot_ll" past its size or on ROCm.
    """
    world = rt.current_world()
    if x.device != world.device:
        raise ValueError(f"all_reduce: x is on {x.device}, but this rank's symmetric heap is on {world.device}")
    signature = (x.numel(), x.dtype, config)
    if _agreed.known(world, signature):
        return
    launch_shape(x.numel(), x.element_size(), world.world_size, config)  # a config that cannot run raises here
    check_ranks_call_alike(
        world.group,
        world.rank,
        (x.numel(), str(x.dtype), asdict(config)),
        op="all_reduce",
        fields="(numel, dtype, config)",
        disagreement="ranks disagree on the message",
        capture_message=f"all_reduce: first call with {x.numel()} x {x.dtype} during CUDA-graph capture; the ranks' "
        "agreement on the size is checked (a collective) on the first call of each size: call it once before capturing",
    )
    _agreed.add(world, signature)


_ready: dict[tuple, LaunchPlan] = {}
"""The plan each call signature launched after passing the steps that depend on the signature alone (x on the
heap's device, the config choice, the ranks' agreement), so a repeated signature goes straight to its launch. The
key is everything those steps and ``_launch``'s key read: x's element count, dtype and device, the 16-byte alignment
of x and out, the config argument and whether the wait watchdog is on (it changes the LL kernel). An entry counts only
while its plan's world is the current one; ``tune`` clears them all (it changes the table)."""


def _run(x: torch.Tensor, out: torch.Tensor, op: str, config: AllReduceConfig | None = None) -> None:
    check_inputs(x, op, out)
    _run_checked(x, out, config)


def _run_checked(x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig | None) -> None:
    """``_run`` after ``check_inputs(x, op, out)`` passed."""
    world = rt.current_world()
    device = x.device
    signature = (
        x.numel(),
        x.dtype,
        device,
        x.data_ptr() % 16 == 0,
        out.data_ptr() % 16 == 0,
        config,
        watchdog_enabled(),
    )
    plan = _ready.get(signature)
    if plan is not None and plan.world is world:
        plan.launch(device, x, out)
        return
    plan = _first_call_of_signature(x, out, config, world)
    if plan is not None:
        _ready[signature] = plan


def _first_call_of_signature(
    x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig | None, world: rt.World
) -> LaunchPlan | None:
    """The steps a repeated signature skips, then the launch; returns the plan (None for an empty x: no launch)."""
    if x.device != world.device:  # before anything asks the device for its properties
        raise ValueError(f"all_reduce: x is on {x.device}, but this rank's symmetric heap is on {world.device}")
    if config is None:
        config = select_config(x.numel() * x.element_size(), x.device, world.world_size, x.element_size())
    _check_device_and_agreement(x, config)
    if x.numel() == 0:
        return None
    if x.device.index == torch.cuda.current_device():
        return _launch(x, out, config)
    with torch.cuda.device(x.device):
        return _launch(x, out, config)


@torch.library.custom_op("triton_dist::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, op: str) -> torch.Tensor:
    check_inputs(x, op)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _run_checked(x, out, None)  # out is fresh: like x by construction
    return out


@_all_reduce_op.register_fake
def _all_reduce_fake(x: torch.Tensor, op: str) -> torch.Tensor:
    check_inputs(x, op)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("triton_dist::all_reduce_out", mutates_args=("out",))
def _all_reduce_out_op(x: torch.Tensor, out: torch.Tensor, op: str) -> None:
    _run(x, out, op)


@_all_reduce_out_op.register_fake
def _all_reduce_out_fake(x: torch.Tensor, out: torch.Tensor, op: str) -> None:
    check_inputs(x, op, out)


def plain_eager(x: torch.Tensor) -> bool:
    """Whether a call with ``x`` may skip the dispatcher: a plain tensor, no compiler tracing, no dispatch mode
    (fake tensors, make_fx, functionalization and torch.compile all need the registered op)."""
    return type(x) is torch.Tensor and not torch.compiler.is_compiling() and _get_current_dispatch_mode() is None


def all_reduce(x: torch.Tensor, op: str = "sum", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """The sum of ``x`` over every rank of the triton_dist world, on every rank (``torch.ops.triton_dist``).

    ``x``: a contiguous bf16 / fp16 / fp32 tensor on this rank's GPU, anywhere in memory (on the symmetric heap
    or not: the kernel stages what it needs). Every rank must call it with the same shape and dtype, in the
    same order (checked collectively the first time a size is seen). Sums in fp32; the result, in ``x``'s dtype,
    is bit-identical on all ranks. ``out`` (same shape and dtype, contiguous; may be ``x``) receives it.

    Needs ``triton_dist.init()``. Enqueued on the current stream without host synchronization; CUDA-graph capture
    works once the size has been called eagerly (the first call allocates the workspace and checks the ranks
    agree). Under ``torch.compile`` this is the custom op; eager calls run its implementation directly (the same
    function), skipping the dispatcher's few tens of µs, which would dominate a decode-size all-reduce.
    """
    if not plain_eager(x):
        if out is None:
            return torch.ops.triton_dist.all_reduce(x, op)
        torch.ops.triton_dist.all_reduce_out(x, out, op)
        return out
    if out is None:
        check_inputs(x, op)
        out = torch.empty_like(x)  # x is contiguous (checked): so is out (same strides), without a layout argument
        _run_checked(x, out, None)  # out is fresh: like x by construction
        return out
    _run(x, out, op)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tuning


def graphed_us(fn: object, calls: int = 10, replays: int = 20, warmup: int = 3) -> float:
    """Median microseconds per call of ``fn`` under CUDA-graph replay (``calls`` per graph), max over ranks."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()  # type: ignore[operator]
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # NCCL's watchdog may query events meanwhile
        for _ in range(calls):
            fn()  # type: ignore[operator]
    for _ in range(warmup):
        graph.replay()
    rt.barrier()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    rt.barrier()
    median = statistics.median(start.elapsed_time(end) * 1000.0 / calls for start, end in events)
    worst = torch.tensor([median], dtype=torch.float64, device="cuda")
    torch.distributed.all_reduce(worst, op=torch.distributed.ReduceOp.MAX, group=rt.current_world().group)
    return float(worst.item())


def _agreed_correct(out: torch.Tensor, reference: torch.Tensor, world: rt.World, what: str) -> bool:
    """Whether ``out`` matches ``reference`` within ``tolerances(out.dtype)`` on every rank (a collective; a rank
    that sees a mismatch prints it)."""
    rtol, atol = tolerances(out.dtype)
    got, want = out.double(), reference.double()
    bad = ~((got - want).abs() <= atol + rtol * want.abs())  # NaN (an element never written) is bad too
    mismatches = int(bad.sum().item())
    if mismatches:
        first = int(bad.nonzero()[0, 0].item())
        print(
            f"{what}: rank {world.rank} skips it: wrong result, {mismatches} of {out.numel()} elements out of "
            f"tolerance (element {first}: {got[first].item()!r}, dist.all_reduce gives {want[first].item()!r})",
            flush=True,
        )
    everyone = torch.tensor([mismatches], dtype=torch.int64, device=out.device)
    torch.distributed.all_reduce(everyone, op=torch.distributed.ReduceOp.MAX, group=world.group)
    return int(everyone.item()) == 0


def candidate_configs(nbytes: int, itemsize: int, world_size: int) -> list[AllReduceConfig]:
    """The configs :func:`tune` tries for one message size (distinct launch shapes only): one-shot up to 8 MiB,
    two-shot always, LL one-shot on NVIDIA up to ``ll_max_numel`` elements with enough programs for one round."""
    numel = nbytes // itemsize
    found: dict[tuple[str, LaunchShape, int], AllReduceConfig] = {}
    for algo in ALGORITHMS:
        if algo in ("one_shot", "one_shot_push") and nbytes > (8 << 20):
            continue  # many flag rounds per program; two-shot wins by far
        if algo == "one_shot_ll" and not (ll_supported() and numel <= ll_max_numel(itemsize)):
            continue  # NVIDIA only; one round per program
        for num_warps in (1, 2, 4, 8) if algo == "one_shot_ll" else (4, 8):
            for programs in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                if programs > SLOTS[algo]:
                    continue
                config = AllReduceConfig(algo, programs, num_warps)
                if not fits(config, numel, itemsize):
                    continue
                shape = launch_shape(numel, itemsize, world_size, config)
                found.setdefault((algo, shape, num_warps), config)
    return list(found.values())


def tune(
    sizes: list[int], dtype: torch.dtype = torch.bfloat16, *, write_cache: bool = True
) -> list[tuple[int, AllReduceConfig, float]]:
    """Measure every candidate config per message size (graphed, max over ranks) and keep the fastest.

    Each candidate first runs once on the message and its result is compared with ``dist.all_reduce`` of the
    same input (fp32, rounded to ``dtype``; ``triton_dist.testing.tolerances``): a candidate wrong on any rank is
    skipped on every rank (and printed), so a broken algorithm can never be chosen by its speed.

    A collective: call it on every rank with the same arguments. Returns (bytes, best config, µs) rows, makes
    them this process's table and (rank 0, ``write_cache``) stores them in the tuning cache for this GPU and
    world size.
    """
    world = rt.current_world()
    itemsize = torch.empty((), dtype=dtype).element_size()
    rows: list[tuple[int, AllReduceConfig, float]] = []
    for nbytes in sorted(sizes):
        x = torch.randn(nbytes // itemsize, device=world.device).to(dtype)
        out = torch.empty_like(x)
        reference = x.float()
        torch.distributed.all_reduce(reference, group=world.group)
        reference = reference.to(dtype)
        best: tuple[float, AllReduceConfig] | None = None
        for config in candidate_configs(nbytes, itemsize, world.world_size):
            _check_device_and_agreement(x, config)
            out.fill_(float("nan"))
            _launch(x, out, config)
            if not _agreed_correct(out, reference, world, f"all_reduce.tune: {config} at {nbytes} bytes"):
                continue
            us = graphed_us(lambda x=x, out=out, config=config: _launch(x, out, config))
            if best is None or us < best[0]:
                best = (us, config)
        if best is None:
            raise RuntimeError(f"all_reduce.tune: no candidate config gave the right sum at {nbytes} bytes")
        rows.append((nbytes, best[1], best[0]))
    key = _table_key(world.device, world.world_size)
    _tables[key] = [(nbytes, config) for nbytes, config, _ in rows]
    _selected.clear()
    _ready.clear()
    if write_cache and world.rank == 0:
        path = _cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = json.loads(path.read_text()) if path.is_file() else {}
        existing[f"{key[0]}|{key[1]}"] = [[nbytes, asdict(config)] for nbytes, config in _tables[key]]
        path.write_text(json.dumps(existing, indent=1))
    return rows
