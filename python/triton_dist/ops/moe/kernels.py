"""The MoE dispatch / combine kernels, written for any world size (``dl.num_ranks()`` at run time).

A call moves through six kernels (``op.py`` launches them; ``R`` is the ``ROW`` stride of a counts row):

1. ``_route_count_kernel`` (``PARTS`` programs, local, no primitive): program ``p`` reads the ``topk_idx`` rows of
   its ``ceil(T / PARTS)`` consecutive tokens, skips ids outside ``[-1, E)`` (counting them), and computes in one
   pass over them, in (token, k) order, the *local* positions

   - ``tok_pos[t, d]``: the place of token ``t`` among the program's tokens bound for rank ``d`` (-1: not bound);
   - ``pair_pos[t, k]``: the place of pair ``(t, k)`` among the program's pairs routed to expert ``topk_idx[t, k]``;

   and its counts row ``[N per rank | C per expert | bad ids]`` in the local ``parts`` table (one ``ROW`` each).
2. ``_route_kernel`` (one program): turns ``parts`` into exclusive prefixes over programs, in place (what push
   adds to each program's local positions, so every position is the one a serial pass over all tokens gives), and
   writes this rank's counts row ``[N[me, 0..W) | C[me, 0..E) | bad ids]`` and the summary ``info`` (every word).
   In normal mode it also pushes the row into row ``me`` of every rank's symmetric counts matrix, sets its count
   flag on every rank (release) and waits for every rank's (acquire): every rank then holds the whole matrix and
   writes the summary the host reads in its one synchronization (rows and tokens it receives, the buffer sizes
   every rank needs, the bad ids of the whole world).
3. ``_push_kernel`` (``P`` programs): each token's positions get its count program's prefixes added (``tok_pos`` is
   written back final: combine's reduce reads it); each token goes once to each destination rank ``d`` it is bound for,
   into slot ``base(d) + tok_pos[t, d]`` of ``d``'s symmetric token buffer, with a meta row ``[t | topk_idx[t] | weights
   (fp32 bits) | pair_pos[t]]``. Normal mode: ``base(d) = sum_{s < me} N[s, d]`` (the slots are packed by source);
   low-latency: ``base(d) = me * M``, and program 0 pushes this rank's counts row with the data. Then each program sets
   its data flag ``(me, program)`` on every rank (release: its pushes come first). With fp8 (``SCALES`` > 0) each chunk
   of the row is quantized once (per 128 channels: ``scale = max(amax, 1e-4) / 448``, each value divided by it, IEEE
   division; ``RECIPROCAL``, ``switches.FP8_RECIPROCAL``: times ``448 / max(amax, 1e-4)``, one division per group; cast
   to e4m3 rounding to nearest even) and pushed to every destination, its scales written at the end of the meta row;
   ``PREQUANT`` (``switches.FP8_PREQUANTIZE``): ``_quantize_kernel`` quantized the rows with the same operations beside
   the route kernels, into the plan's staging buffers (``pre_ptr``, ``pre_scales_ptr``), and the push loads those bytes
   and scales as they are. ``SELF`` (one node; 1 and 2 not with fp8: ``op._self_push``): 1 leaves this rank's own
   tokens' payload out (their meta rows still go), 2 is a second launch, beside the first on a side stream, that stores
   only that payload, straight into ``recv_x`` (``self_ptr``: row = slot), and sets no flag; neither writes
   ``tok_pos``'s column ``me`` (both read its local places while they run), which the expand kernel (``SELF_DIRECT``)
   writes from the slots it reads, and its block copy leaves those rows out. 3 (``switches.OWN_ROWS_IN_PUSH``) is one
   launch doing both: the other ranks' rows as with 1, and this rank's own tokens' payload stored into ``recv_x`` from
   the row it loaded for them (fp8: the row it quantized, its scales still in the meta row; ``recv_x`` allocated before
   the launch), leaving ``tok_pos``'s column ``me`` to the expand kernel as 1 does. ``WAVES`` > 0
   (``switches.EXPAND_OVERLAPS_PUSH``, the early push only): the tokens form ``WAVES`` waves of ``PARTS / WAVES`` route
   count programs' ranges each; program 0 first stores into every rank ``d`` this rank's tokens bound for ``d`` before
   each wave's end (its ``parts`` prefix at the next wave's first count program, or ``N[me, d]``: the receiver's slots
   of each wave, consecutive); each program sets its wave flag ``(me, wave, program)`` on every rank (release) once its
   next token lies past the wave, the rest after its loop, before its data flag (in the ``waves`` workspace, two
   parities, epoch values as every flag; laid out for ``WAVE_SLOTS`` waves, ``switches.MAX_EXPAND_WAVES``, whatever
   ``WAVES``, so a call with other waves than the last one's finds no slot count where it waits for a flag).
   ``STARTED`` (``switches.PUSH_RESIDENT_FIRST``, with ``WAVES``): each program first adds 1 to the plan's ``started``
   word; ``_started_kernel``, on the side stream before the expand kernel, waits for all of them.
4. ``_expand_kernel`` (``P`` programs; pipelined ``EXPAND_PER_SM`` per SM, ``SENDERS = P``): waits
   for every ``(source, program)`` data flag of the push (acquire), writes its own lookup table (``table``: per
   source and local expert the rows of the sources before it, the experts' starts and row counts, the home slot
   bases; a program barrier, then gathers), then copies each received token, locally, into one row per local expert
   it was routed to: expert ``l``'s rows start at its offset, then source ``s``'s at
   ``sum_{s' < s} C[s', me * L + l]``, then the pair's ``pair_pos``. A token's meta row is read as vectors and its
   payload before any store, so its loads are in flight together. It writes the per-row meta, and per received
   token the rows combine sums (``comb_rows``, k order) and where its partial goes (``comb_src``: the home rank;
   ``comb_dst``: the slot there). fp8: it copies the e4m3 bytes and the row's scales, or (``DEQUANT``) writes ``e4m3
   value * scale`` in x's dtype. Low-latency: a pair past its expert's ``W * M`` rows is dropped, pid 0 counts the
   dropped pairs in status word 2, and the rows past each expert's count get meta -1 and weight 0. ``GATHER``
   (normal mode's ``layout="gather"``): each received token is copied once, to row ``i`` (its slot), and each of
   its local rows gets ``i`` in ``gather`` instead of a copy of the payload; the per-row meta is the same. With
   ``BULK`` (pipelined, one node, no dequantization) not even that row by row: slots ``[0, N)`` of the token buffer
   are ``recv_x``'s rows, copied as one flat block by ``COPIERS`` programs after the meta programs while those write
   the meta (with ``COPIERS = 0`` by every program after its meta rows), and each token's fp8 scales go with its
   meta. ``META_BLOCK`` > 0 (``MoeConfig.expand_block``, with ``BULK`` only): the meta programs take ``META_BLOCK``
   consecutive slots a step as the rows of one ``[META_BLOCK, KP]`` tile (each slot's source, meta row, table
   lookups and stores as tile operations), so the loads of all of them are in flight together instead of one
   token's chain of dependent loads after another's; every output word is written once, from the same values.
   ``WAVES`` > 0 (``switches.EXPAND_OVERLAPS_PUSH``: ``BULK``, ``SELF_DIRECT``, no ``META_BLOCK``; launched beside the
   early push, after the route kernels): no wait at the start (the counts matrix is complete once the route kernel
   ended); nothing if the summary's sizes do not fit the buffers (as the push); the meta programs, then the copy
   programs, take the units ``(wave, source)`` wave by wave, each after waiting for that unit's ``SENDERS`` wave
   flags (acquire): its slots (from the source's slot counts) get their meta, and their payload is copied (not
   this rank's own, already in ``recv_x``). ``tok_pos[t, me]`` of an own slot is written after its wave's flags, so
   after every push program read it. ``STARTED`` (``switches.EXPAND_RESIDENT_FIRST``, with ``WAVES``): each program
   first adds 1 to the plan's ``started`` word; ``_started_kernel``, on the current stream between this launch (on
   the side stream) and the push's, waits for all of them.
5. ``_combine_push_kernel`` (``P`` programs): per received token, ``sum_k w_k * y[row_k]`` in fp32 over its rows
   here, stored into slot ``comb_dst`` of the home rank's symmetric combine buffer (fp32 words; ``PACK`` = 2:
   ``MoeConfig(combine_partials="input")``, the buffer viewed in y's 16-bit dtype and the partial rounded to it,
   rows of H elements in the first half of each parity's words); then its combine flag on every rank. The slots
   are grouped by source rank (the partial's home); ``SPREAD`` (``MoeConfig.combine_spread``): program ``p`` starts
   at the ``floor((p + 1) n / (P + 1))``-th of its ``n`` grid-stride slots and wraps around, so at every moment the
   programs store to every home, not to one home after the other.
6. ``_combine_reduce_kernel`` (``P`` programs): waits for every combine flag, then per home token adds the
   partials of the ranks it went to, in rank order, in fp32 (``PACK`` = 2: each widened from y's dtype), and stores
   the sum in ``x``'s dtype. The partial of rank ``d`` sits in slot ``cbase(d) + tok_pos[t, d]``: normal ``cbase(d)
   = sum_{d' < d} N[me, d']``; low-latency ``d * M``. ``UNROLL`` > 0 (``combine_spread`` on one node of at most
   ``UNROLL`` = ``pow2(W)`` ranks): the ranks as one unrolled step of masked loads (a rank without the token adds
   +0.0), so a token's partials are loaded together instead of one ``tok_pos`` load, branch and load after another.

With ``WHOLE_ROW`` (the default ``MoeConfig(whole_row=True)``, ``BLOCK_H`` a power of two at least H) each row
moves in one step, loaded before anything is stored: push loads a token's row once for all its destinations,
expand loads a received row once for all its local rows, and combine's push loads its ``k`` rows without branches
(a missing row: masked, adding 0 * 0), so every row's loads can be in flight together. Without it (rows wider
than ``MAX_ROW_BLOCK``, or ``MoeConfig(whole_row=False)``) rows move in ``BLOCK_H``-element chunks (load a chunk,
store it, load the next). Same results, bit for bit.

Synchronization: one int32 epoch counter per rank (``epochs``), advanced by the route kernel and written into the
call's ``epoch`` tensor, which every later kernel of the call (and its combine) reads, so nothing comes from the
host and a CUDA-graph replay advances like an eager call. Flags only take epoch values (``dl.wait`` with ``eq``).
Every symmetric buffer (counts, tokens, meta, combine, flags) has two halves by epoch parity. Ordering argument:
a peer ``q`` writes parity ``p`` at epoch ``e + 2`` only after waiting, at ``e + 1``, for a flag this rank set at
``e + 1`` after it finished reading epoch ``e``'s data (stream order: a dispatch's expand precedes the next
dispatch's route or push; combine ``e``'s reduce precedes dispatch ``e + 2``, the caller's one rule: at most two
dispatch/combine pairs in flight). A single half would let a peer one call ahead overwrite what this rank still
reads. The local workspaces (``parts``, ``table``) have one half: only this rank's kernels touch them, and stream
order puts a call's push and expand before the next call's route count.

Across nodes (normal mode; ``NODES`` nodes of ``LOCAL`` consecutive ranks, torchrun's layout, on the NVSHMEM heap):
the kernels are compiled with ``NODES > 1`` (one node passes none of the trailing arguments, whose defaults compile
the one-node code as it was). A rank of this node is reached as above, by ``dl.symm_at`` stores and flags, which
every wait then covers for this node's ranks only; a rank of another node by ``dl.put_signal``, whose source must be
symmetric memory (network transports read it), so the data is staged in this rank's own buffers first:

- route: this rank's counts row (in row ``me`` of its own counts matrix) is put into every other node's ranks,
  setting count signal ``me`` there (int64 ``[2][WP]``); the route kernel waits for its node's count flags and the
  other nodes' signals, so every rank still waits for every rank once per call (the ordering argument below holds);
- push: a token bound for rank ``d`` on another node is staged in row ``pair = sum_{d' < d} N[me, d'] +
  tok_pos[t, d]`` of the send buffers (payload, and the meta row with its fp8 scales), then put into receive slot
  ``slot`` there as two puts, each setting one of the slot's two signals (int64 ``[2][CAP][2]``: one put orders
  only its own data before its signal);
- expand: a slot whose source is on another node waits for both signals before reading the slot;
- combine push: a partial for a home on another node is staged in row ``i`` (the received slot) of the send buffer
  (fp32 words, viewed as the combine buffer is with ``PACK``) and put into combine slot ``comb_dst`` there (``H * 4 /
  PACK`` bytes), setting that slot's signal (int64 ``[2][combine slots]``);
- combine reduce: a partial from another node is read after its slot's signal.

A put returns once its source may be reused, so the staging buffers have one half. Signals only take epoch values
and are awaited with ``eq``, as the flags. Low-latency mode has no path across nodes (``op.py`` refuses it).

Each flag round notifies every rank with one ``dl.notify`` to a tensor of ranks when ``WORLD`` (the world size, if a
power of two) is set, else with a loop (``ops.common.flags.notify_every_rank``, written out in each kernel). The
kernels call no ``@triton.jit`` helper: in Triton's interpreter, which the CPU emulation runs them in with one
thread per program, each helper call re-patches the interpreter's ``tensor.__index__`` while other programs may be
inside a ``range`` over a run-time value (an intermittent "only 0-dimensional arrays" TypeError there).
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit(do_not_specialize=["T"])  # one compiled kernel for every T
def _route_count_kernel(
    idx_ptr,
    tok_pos_ptr,
    pair_pos_ptr,
    T,
    part_ptr,
    W,
    E,
    L,
    K: tl.constexpr,
    KP: tl.constexpr,
    WP: tl.constexpr,
    EP: tl.constexpr,
    ROW: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    # Local (no primitive): program p takes tokens [p * chunk, (p + 1) * chunk), chunk = ceil(T / programs).
    pid = tl.program_id(0)
    chunk = tl.cdiv(T, tl.num_programs(0))
    first = pid * chunk
    last = tl.minimum(first + chunk, T)
    experts = tl.arange(0, EP)
    dests = tl.arange(0, WP)
    slots = tl.arange(0, KP)
    expert_run = tl.zeros([EP], dtype=tl.int32)
    dest_run = tl.zeros([WP], dtype=tl.int32)
    bad = tl.zeros([BLOCK_T, KP], dtype=tl.int32)
    for t0 in range(first, last, BLOCK_T):
        tokens = t0 + tl.arange(0, BLOCK_T)
        inside = (tokens < last)[:, None] & (slots < K)[None, :]
        idx = tl.load(idx_ptr + tokens[:, None] * K + slots[None, :], mask=inside, other=-1).to(tl.int32)
        wrong = (idx < -1) | (idx >= E)
        bad += wrong.to(tl.int32)
        idx = tl.where(wrong, -1, idx)
        # Pairs in (token, k) order: the place of each among this program's pairs to its expert.
        flat = tl.reshape(idx, [BLOCK_T * KP])
        onehot = (flat[:, None] == experts[None, :]).to(tl.int32)
        before = tl.cumsum(onehot, axis=0) - onehot + expert_run[None, :]
        place = tl.sum(onehot * before, axis=1)
        place = tl.reshape(tl.where(flat >= 0, place, -1), [BLOCK_T, KP])
        tl.store(pair_pos_ptr + tokens[:, None] * K + slots[None, :], place, mask=inside)
        expert_run += tl.sum(onehot, axis=0)
        # Tokens: bound for rank d if any of their experts lives there; their place among this program's to d.
        dest_of = tl.where(idx >= 0, idx // L, -1)
        bound = tl.max((dest_of[:, :, None] == dests[None, None, :]).to(tl.int32), axis=1)
        token_place = tl.where(bound > 0, tl.cumsum(bound, axis=0) - bound + dest_run[None, :], -1)
        in_world = (tokens < last)[:, None] & (dests < W)[None, :]
        tl.store(tok_pos_ptr + tokens[:, None] * W + dests[None, :], token_place, mask=in_world)
        dest_run += tl.sum(bound, axis=0)
    part = part_ptr + pid * ROW
    tl.store(part + dests, dest_run)
    tl.store(part + WP + experts, expert_run)
    tl.store(part + WP + EP, tl.sum(tl.sum(bad, axis=1), axis=0))


@triton.jit
def _route_kernel(
    row_ptr,
    info_ptr,
    epoch_ptr,
    epochs_ptr,
    counts_ptr,
    flags_ptr,
    part_ptr,
    E,
    WP: tl.constexpr,
    EP: tl.constexpr,
    ROW: tl.constexpr,
    FLAGS: tl.constexpr,
    PARTS: tl.constexpr,
    PB: tl.constexpr,
    EXCHANGE: tl.constexpr,
    WORLD: tl.constexpr,
    count_signals_ptr=None,
    NODES: tl.constexpr = 1,
    LOCAL: tl.constexpr = 1,
    host_info_ptr=None,
    HOST_INFO: tl.constexpr = False,
):
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr) + 1
    tl.debug_barrier()  # in place, as push's tok_pos: every warp has loaded the counter before one warp stores it
    tl.store(epochs_ptr, epoch)
    tl.store(epoch_ptr, epoch)
    parity = epoch % 2
    experts = tl.arange(0, EP)
    dests = tl.arange(0, WP)
    expert_run = tl.zeros([EP], dtype=tl.int32)
    dest_run = tl.zeros([WP], dtype=tl.int32)
    bad_ids = tl.sum(tl.zeros([PB], dtype=tl.int32), axis=0)
    # The count programs' rows become exclusive prefixes over programs, in place: what push adds to each program's
    # local positions.
    parts = tl.arange(0, PB)
    for p0 in range(0, PARTS, PB):
        part = part_ptr + (p0 + parts)[:, None] * ROW
        n = tl.load(part + dests[None, :])
        c = tl.load(part + WP + experts[None, :])
        bad_ids += tl.sum(tl.load(part_ptr + (p0 + parts) * ROW + WP + EP), axis=0)
        tl.debug_barrier()  # in place: every warp has loaded these rows before any stores their prefixes
        tl.store(part + dests[None, :], tl.cumsum(n, axis=0) - n + dest_run[None, :])
        tl.store(part + WP + experts[None, :], tl.cumsum(c, axis=0) - c + expert_run[None, :])
        dest_run += tl.sum(n, axis=0)
        expert_run += tl.sum(c, axis=0)
    tl.store(row_ptr + dests, dest_run, mask=dests < ranks)
    tl.store(row_ptr + WP + experts, expert_run, mask=experts < E)
    tl.store(row_ptr + WP + EP, bad_ids)
    words = tl.arange(0, 8)
    info = tl.where(words == 4, bad_ids, 0)  # the status, word 0: this rank's skipped ids; the rest 0
    info = tl.where(words == 6, epoch, info)  # the call's epoch (>= 1, as every word the host polls for)
    if EXCHANGE and NODES > 1:  # across nodes: load/store within mine, my row put to every rank of the others
        matrix = counts_ptr + parity * WP * ROW
        node = me // LOCAL
        for j in range(0, LOCAL):  # (j = my local rank: my own row, the source of the puts below)
            remote = dl.symm_at(matrix + me * ROW, node * LOCAL + j)
            tl.store(remote + dests, dest_run, mask=dests < ranks)
            tl.store(remote + WP + experts, expert_run, mask=experts < E)
            tl.store(remote + WP + EP, bad_ids)
        count_flags = flags_ptr + parity * FLAGS
        for j in range(0, LOCAL):
            dl.notify(count_flags + me, node * LOCAL + j, signal=epoch, sig_op="set", comm_scope="intra_node")
        signals = count_signals_ptr + parity * WP
        for step in range(1, NODES):
            for j in range(0, LOCAL):
                peer = ((node + step) % NODES) * LOCAL + j
                dl.put_signal(matrix + me * ROW, matrix + me * ROW, ROW * 4, signals + me, epoch, peer, sig_op="set")
        token = dl.wait(count_flags + node * LOCAL, LOCAL, "sys", "acquire", waitValue=epoch)
        matrix = dl.consume_token(matrix, token)
        for step in range(1, NODES):
            for j in range(0, LOCAL):
                landed = dl.signal_wait(signals + ((node + step) % NODES) * LOCAL + j, epoch, cmp="eq")
                matrix = dl.consume_token(matrix, landed)
    elif EXCHANGE:
        matrix = counts_ptr + parity * WP * ROW
        for peer in range(0, ranks):
            remote = dl.symm_at(matrix + me * ROW, peer)
            tl.store(remote + dests, dest_run, mask=dests < ranks)
            tl.store(remote + WP + experts, expert_run, mask=experts < E)
            tl.store(remote + WP + EP, bad_ids)
        count_flags = flags_ptr + parity * FLAGS
        if WORLD > 0:  # notify_every_rank, inlined
            dl.notify(count_flags + me, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node")
        else:
            for peer in range(0, ranks):
                dl.notify(count_flags + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
        token = dl.wait(count_flags, ranks, "sys", "acquire", waitValue=epoch)
        matrix = dl.consume_token(matrix, token)
    if EXCHANGE:
        sources = tl.arange(0, WP)
        live = (sources < ranks)[:, None] & (dests < ranks)[None, :]
        n = tl.load(matrix + sources[:, None] * ROW + dests[None, :], mask=live, other=0)  # N[source, dest]
        mine = (sources < ranks)[:, None] & (experts >= me * (E // ranks))[None, :]
        mine = mine & (experts < (me + 1) * (E // ranks))[None, :]
        c = tl.load(matrix + sources[:, None] * ROW + WP + experts[None, :], mask=mine, other=0)
        world_bad = tl.sum(tl.load(matrix + sources * ROW + WP + EP, mask=sources < ranks, other=0), axis=0)
        info = tl.where(words == 0, tl.sum(tl.sum(c, axis=1), axis=0), info)  # rows this rank receives
        info = tl.where(words == 1, tl.sum(tl.sum(tl.where(dests[None, :] == me, n, 0), axis=1), axis=0), info)
        info = tl.where(words == 2, tl.max(tl.sum(n, axis=0), axis=0), info)  # token slots the busiest receiver needs
        info = tl.where(words == 3, tl.max(tl.sum(n, axis=1), axis=0), info)  # combine slots the busiest home needs
        info = tl.where(words == 5, world_bad, info)
    tl.store(info_ptr + words, info)
    if HOST_INFO:  # the same words into host-mapped memory, which the host polls instead of a copy and a sync
        tl.store(host_info_ptr + words, info)


INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") == "1")
"""Whether Triton's interpreter runs these kernels (CPU emulation): read where ``triton.jit`` reads it, at import."""


@triton.jit
def round_to_e4m3(v):
    """``v`` (fp32) rounded to float8 e4m3's grid, to nearest even, still in fp32, as a GPU's cast to fp8 rounds (the
    PTX ``cvt.rn.satfinite``; Triton 3.6's interpreter rounds that cast wrongly, so under it the push rounds with this
    first, and its cast is then exact). The normal range by the bits; the subnormal range (|v| < 2^-6, steps of
    2^-9) by adding and removing 1.5 * 2^14, a zero taking v's sign: a tiny negative value rounds to -0, fp8 byte
    0x80, as a GPU and torch's cast give."""
    bits = v.to(tl.int32, bitcast=True)
    normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576).to(tl.float32, bitcast=True)
    subnormal = (v + 24576.0) - 24576.0
    subnormal = tl.where(subnormal == 0.0, v * 0.0, subnormal)  # a zero with v's sign (x - x is +0 for every x)
    return tl.where(tl.abs(v) < 0.015625, subnormal, normal)


@triton.jit(do_not_specialize=["T"])  # one compiled kernel for every T
def _quantize_kernel(
    x_ptr,
    T,
    q_ptr,
    scales_ptr,
    H,
    BLOCK_H: tl.constexpr,
    SCALES: tl.constexpr,
    RECIPROCAL: tl.constexpr = False,
):
    """``switches.FP8_PREQUANTIZE``: rows ``[0, T)`` of ``x`` quantized as the push quantizes them (the same operations,
    so the same bits), into ``q`` ([>= T, H] fp8) and their scales into ``scales`` ([>= T, SCALES] fp32); programs
    stride over the tokens, ``BLOCK_H`` channels a step. Local: no primitive, no flag (the op orders it before the
    push with an event, beside the route kernels)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    h = tl.arange(0, BLOCK_H)
    GB: tl.constexpr = BLOCK_H // 128
    groups = tl.arange(0, GB)
    for t in range(pid, T, programs):
        for h0 in range(0, H, BLOCK_H):
            offs = h0 + h
            values = tl.load(x_ptr + tl.cast(t, tl.int64) * H + offs, mask=offs < H, other=0.0).to(tl.float32)
            grouped = tl.reshape(values, [GB, 128])
            amax = tl.maximum(tl.max(tl.abs(grouped), axis=1), 1e-4)  # config.FP8_AMAX_FLOOR
            scale = tl.div_rn(amax, 448.0)  # config.FP8_MAX
            if RECIPROCAL:
                v = grouped * tl.div_rn(448.0, amax)[:, None]
            else:
                v = tl.div_rn(grouped, scale[:, None])
            if INTERPRETED:  # Triton 3.6's interpreter rounds fp8 casts wrongly; a GPU's cast is exact
                v = round_to_e4m3(v)
            q = tl.reshape(tl.minimum(tl.maximum(v, -448.0), 448.0), [BLOCK_H]).to(q_ptr.dtype.element_ty)
            tl.store(q_ptr + tl.cast(t, tl.int64) * H + offs, q, mask=offs < H)
            group_ids = h0 // 128 + groups
            tl.store(scales_ptr + t * SCALES + group_ids, scale, mask=group_ids < SCALES)


@triton.jit(do_not_specialize=["T"])  # one compiled kernel for every T
def _push_kernel(
    x_ptr,
    idx_ptr,
    w_ptr,
    tok_pos_ptr,
    pair_pos_ptr,
    row_ptr,
    epoch_ptr,
    info_ptr,
    T,
    self_ptr,
    tokens_ptr,
    meta_ptr,
    counts_ptr,
    flags_ptr,
    part_ptr,
    H,
    CAP,
    M,
    E,
    K: tl.constexpr,
    WP: tl.constexpr,
    EP: tl.constexpr,
    MP: tl.constexpr,
    ROW: tl.constexpr,
    FLAGS: tl.constexpr,
    DATA_FLAGS: tl.constexpr,
    PARTS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
    SCALES: tl.constexpr,
    LOW_LATENCY: tl.constexpr,
    WORLD: tl.constexpr,
    send_ptr=None,
    send_meta_ptr=None,
    slot_signals_ptr=None,
    NODES: tl.constexpr = 1,
    LOCAL: tl.constexpr = 1,
    ELEM: tl.constexpr = 1,
    COMBINE_CAP=0,
    CHECK_CAP: tl.constexpr = False,
    SELF: tl.constexpr = 0,
    waves_ptr=None,
    WAVES: tl.constexpr = 0,
    WAVE_SLOTS: tl.constexpr = 16,
    RECIPROCAL: tl.constexpr = False,
    pre_ptr=None,
    pre_scales_ptr=None,
    PREQUANT: tl.constexpr = False,
    started_ptr=None,
    STARTED: tl.constexpr = False,
):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    if STARTED:  # switches.PUSH_RESIDENT_FIRST: this program is resident (_started_kernel counts them all in)
        dl.notify(started_ptr, me, signal=1, sig_op="add", comm_scope="gpu")
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    tokens = T
    if CHECK_CAP:  # launched before the host read the summary: a no-op (no data, no flag) unless the buffers fit
        fits = (tl.load(info_ptr + 2) <= CAP) & (tl.load(info_ptr + 3) <= COMBINE_CAP)
        tokens = tl.where(fits, T, 0)
    META: tl.constexpr = 1 + 3 * K + SCALES
    token_buf = tokens_ptr + tl.cast(parity, tl.int64) * CAP * H
    meta_buf = meta_ptr + parity * CAP * META
    matrix = counts_ptr + parity * WP * ROW
    dests = tl.arange(0, WP)
    if LOW_LATENCY:
        base = me * M + tl.zeros([WP], dtype=tl.int32)
    else:  # packed by source: the slots of the ranks before me (the counts matrix the route kernel gathered)
        base = tl.zeros([WP], dtype=tl.int32)
        for source in range(0, me):
            base += tl.load(matrix + source * ROW + dests, mask=dests < ranks, other=0)
    if NODES > 1:  # a destination on another node: its pairs staged in my send buffers, then put there
        node = me // LOCAL
        sent = tl.load(row_ptr + dests, mask=dests < ranks, other=0)  # N[me, d]
        pair_base = tl.cumsum(sent, axis=0) - sent  # my (token, rank) pairs to the ranks before d
        signals = slot_signals_ptr + tl.cast(parity, tl.int64) * CAP * 2
    cols = tl.arange(0, MP)
    h = tl.arange(0, BLOCK_H)
    chunk = tl.cdiv(T, PARTS)  # the route count programs' token ranges
    if WAVES > 0:  # switches.EXPAND_OVERLAPS_PUSH (one node, CHECK_CAP): a flag per (source, wave, program) as it goes
        tl.static_assert(CHECK_CAP, "the waves are the early push's")
        PPW: tl.constexpr = PARTS // WAVES  # route count programs per wave: wave w is tokens [w, w + 1) * PPW * chunk
        wave_tokens = PPW * chunk
        wave_flags = waves_ptr + parity * (WP * WAVE_SLOTS * (programs + 1))
        wave_bounds = wave_flags + WP * WAVE_SLOTS * programs
        if fits & (pid == 0):  # per destination, my tokens bound there before each wave's end (the receiver's slots)
            ws = tl.arange(0, WAVES)
            part_rows = (ws + 1) * PPW
            inner = part_rows < PARTS
            for dest in range(0, ranks):
                ends = tl.load(part_ptr + part_rows * ROW + dest, mask=inner, other=0)
                ends = tl.where(inner, ends, tl.load(row_ptr + dest))
                tl.store(dl.symm_at(wave_bounds + me * WAVE_SLOTS, dest) + ws, ends)
        wave = pid * 0
    for t in range(pid, tokens, programs):
        if WAVES > 0:  # every token of mine before this one's wave is pushed: those waves' flags (release)
            passed = tl.minimum(t // wave_tokens, WAVES - 1)
            for done in range(wave, passed):
                if WORLD > 0:
                    dl.notify(
                        wave_flags + (me * WAVE_SLOTS + done) * programs + pid,
                        tl.arange(0, WORLD),
                        signal=epoch,
                        sig_op="set",
                        comm_scope="intra_node",
                    )
                else:
                    for peer in range(0, ranks):
                        dl.notify(
                            wave_flags + (me * WAVE_SLOTS + done) * programs + pid,
                            peer,
                            signal=epoch,
                            sig_op="set",
                            comm_scope="intra_node",
                        )
            wave = tl.maximum(wave, passed)
        if WHOLE_ROW and not PREQUANT:  # the row loaded once, before any store, then stored to every destination
            values = tl.load(x_ptr + tl.cast(t, tl.int64) * H + h, mask=h < H, other=0.0)
        if WHOLE_ROW and PREQUANT:  # the row quantized by _quantize_kernel, and its scales
            q = tl.load(pre_ptr + tl.cast(t, tl.int64) * H + h, mask=h < H)
        is_idx = (cols >= 1) & (cols <= K)
        is_w = (cols > K) & (cols <= 2 * K)
        is_pos = (cols > 2 * K) & (cols < 1 + 3 * K)  # (META also counts the fp8 scales)
        row = tl.where(is_idx, tl.load(idx_ptr + t * K + cols - 1, mask=is_idx, other=0).to(tl.int32), t)
        weights = tl.load(w_ptr + t * K + cols - 1 - K, mask=is_w, other=0.0).to(tl.float32)
        row = tl.where(is_w, weights.to(tl.int32, bitcast=True), row)
        # The route count program's local positions plus what the programs before it counted (its prefix row).
        prefix = part_ptr + (t // chunk) * ROW
        local_pos = tl.load(pair_pos_ptr + t * K + cols - 1 - 2 * K, mask=is_pos, other=-1)
        pair_expert = tl.load(idx_ptr + t * K + cols - 1 - 2 * K, mask=is_pos & (local_pos >= 0), other=0).to(tl.int32)
        pos = local_pos + tl.load(prefix + WP + pair_expert, mask=is_pos & (local_pos >= 0), other=0)
        row = tl.where(is_pos, tl.where(local_pos >= 0, pos, -1), row)
        local_places = tl.load(tok_pos_ptr + t * ranks + dests, mask=dests < ranks, other=-1)
        in_prefix = tl.load(prefix + dests, mask=(dests < ranks) & (local_places >= 0), other=0)
        places = tl.where(local_places >= 0, local_places + in_prefix, -1)
        if SELF == 2:  # one node, no fp8: my own tokens only, their payload straight into recv_x's row `slot`
            place = tl.sum(tl.where(dests == me, places, 0), axis=0)
            if place >= 0:
                slot = tl.sum(tl.where(dests == me, base, 0), axis=0) + place
                for h0 in range(0, H, BLOCK_H):
                    offs = h0 + h
                    if WHOLE_ROW:  # loaded at the top (the loop runs once)
                        tl.store(self_ptr + slot.to(tl.int64) * H + offs, values, mask=offs < H)
                    else:
                        chunk_values = tl.load(x_ptr + tl.cast(t, tl.int64) * H + offs, mask=offs < H)
                        tl.store(self_ptr + slot.to(tl.int64) * H + offs, chunk_values, mask=offs < H)
        elif SCALES == 0 and WHOLE_ROW:
            for dest in range(0, ranks):
                place = tl.sum(tl.where(dests == dest, places, 0), axis=0)
                if place >= 0:
                    slot = tl.sum(tl.where(dests == dest, base, 0), axis=0) + place
                    if NODES > 1:  # another node's rank: staged in row `pair` of my send buffers
                        pair = tl.sum(tl.where(dests == dest, pair_base, 0), axis=0) + place
                        if dest // LOCAL == node:
                            remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                        else:
                            remote_meta = send_meta_ptr + pair * META
                    else:
                        remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                    tl.store(remote_meta + cols, row, mask=cols < 1 + 3 * K)
                    if NODES > 1:
                        if dest // LOCAL == node:
                            remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                        else:
                            remote_row = send_ptr + pair.to(tl.int64) * H
                    else:
                        remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                    if SELF == 1:  # my own tokens' payload goes to recv_x from the SELF == 2 launch
                        if dest != me:
                            tl.store(remote_row + h, values, mask=h < H)
                    elif SELF == 3:  # my own tokens' payload straight into recv_x's row `slot`, from this launch
                        if dest == me:
                            tl.store(self_ptr + slot.to(tl.int64) * H + h, values, mask=h < H)
                        else:
                            tl.store(remote_row + h, values, mask=h < H)
                    else:
                        tl.store(remote_row + h, values, mask=h < H)
                    if NODES > 1:
                        if dest // LOCAL != node:  # the staged meta row and payload, each with its slot's signal
                            sig = signals + slot * 2
                            dl.put_signal(meta_buf + slot * META, remote_meta, META * 4, sig, epoch, dest)
                            row_at = token_buf + slot.to(tl.int64) * H
                            dl.put_signal(row_at, remote_row, H * ELEM, sig + 1, epoch, dest)
        elif SCALES == 0:
            for dest in range(0, ranks):
                place = tl.sum(tl.where(dests == dest, places, 0), axis=0)
                if place >= 0:
                    slot = tl.sum(tl.where(dests == dest, base, 0), axis=0) + place
                    if NODES > 1:  # another node's rank: staged in row `pair` of my send buffers
                        pair = tl.sum(tl.where(dests == dest, pair_base, 0), axis=0) + place
                        if dest // LOCAL == node:
                            remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                        else:
                            remote_meta = send_meta_ptr + pair * META
                    else:
                        remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                    tl.store(remote_meta + cols, row, mask=cols < 1 + 3 * K)
                    if NODES > 1:
                        if dest // LOCAL == node:
                            remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                        else:
                            remote_row = send_ptr + pair.to(tl.int64) * H
                    else:
                        remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                    rows_to = H
                    if SELF == 1:  # my own tokens' payload goes to recv_x from the SELF == 2 launch
                        rows_to = tl.where(dest != me, H, 0)
                    if SELF == 3:  # my own tokens' payload straight into recv_x's row `slot`, from this launch
                        if dest == me:
                            remote_row = self_ptr + slot.to(tl.int64) * H
                    for h0 in range(0, rows_to, BLOCK_H):
                        offs = h0 + h
                        values = tl.load(x_ptr + tl.cast(t, tl.int64) * H + offs, mask=offs < H)
                        tl.store(remote_row + offs, values, mask=offs < H)
                    if NODES > 1:
                        if dest // LOCAL != node:  # the staged meta row and payload, each with its slot's signal
                            sig = signals + slot * 2
                            dl.put_signal(meta_buf + slot * META, remote_meta, META * 4, sig, epoch, dest)
                            row_at = token_buf + slot.to(tl.int64) * H
                            dl.put_signal(row_at, remote_row, H * ELEM, sig + 1, epoch, dest)
        else:  # fp8: quantize each chunk once, then push it (and its scales, at the meta row's end) to each rank
            tl.static_assert(SELF == 0 or SELF == 3, "fp8's own rows: the push's one launch (SELF = 3) only")
            for dest in range(0, ranks):
                place = tl.sum(tl.where(dests == dest, places, 0), axis=0)
                if place >= 0:
                    slot = tl.sum(tl.where(dests == dest, base, 0), axis=0) + place
                    if NODES > 1:
                        if dest // LOCAL == node:
                            remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                        else:
                            pair = tl.sum(tl.where(dests == dest, pair_base, 0), axis=0) + place
                            remote_meta = send_meta_ptr + pair * META
                    else:
                        remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                    tl.store(remote_meta + cols, row, mask=cols < 1 + 3 * K)
            GB: tl.constexpr = BLOCK_H // 128
            groups = tl.arange(0, GB)
            for h0 in range(0, H, BLOCK_H):
                offs = h0 + h
                group_ids = h0 // 128 + groups
                if PREQUANT:  # switches.FP8_PREQUANTIZE: quantized beside the route kernels; loaded as they are
                    if not WHOLE_ROW:  # (whole rows: loaded at the top)
                        q = tl.load(pre_ptr + tl.cast(t, tl.int64) * H + offs, mask=offs < H)
                    pre_scales = tl.load(pre_scales_ptr + t * SCALES + group_ids, mask=group_ids < SCALES, other=0.0)
                    scale_bits = pre_scales.to(tl.int32, bitcast=True)
                else:
                    if WHOLE_ROW:  # loaded at the top (the loop runs once)
                        chunk_values = values.to(tl.float32)
                    else:
                        chunk_values = tl.load(x_ptr + tl.cast(t, tl.int64) * H + offs, mask=offs < H, other=0.0)
                        chunk_values = chunk_values.to(tl.float32)
                    grouped = tl.reshape(chunk_values, [GB, 128])
                    amax = tl.maximum(tl.max(tl.abs(grouped), axis=1), 1e-4)  # config.FP8_AMAX_FLOOR
                    scale = tl.div_rn(amax, 448.0)  # config.FP8_MAX
                    if RECIPROCAL:
                        v = grouped * tl.div_rn(448.0, amax)[:, None]
                    else:
                        v = tl.div_rn(grouped, scale[:, None])
                    if INTERPRETED:  # Triton 3.6's interpreter rounds fp8 casts wrongly; a GPU's cast is exact
                        v = round_to_e4m3(v)
                    v = tl.reshape(tl.minimum(tl.maximum(v, -448.0), 448.0), [BLOCK_H])
                    q = v.to(token_buf.dtype.element_ty)
                    scale_bits = scale.to(tl.int32, bitcast=True)
                for dest in range(0, ranks):
                    place = tl.sum(tl.where(dests == dest, places, 0), axis=0)
                    if place >= 0:
                        slot = tl.sum(tl.where(dests == dest, base, 0), axis=0) + place
                        if NODES > 1:  # another node's rank: staged in row `pair` of my send buffers
                            pair = tl.sum(tl.where(dests == dest, pair_base, 0), axis=0) + place
                            if dest // LOCAL == node:
                                remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                            else:
                                remote_row = send_ptr + pair.to(tl.int64) * H
                        else:
                            remote_row = dl.symm_at(token_buf + slot.to(tl.int64) * H, dest)
                        if SELF == 3:  # my own tokens' fp8 row straight into recv_x's row `slot` (its scales: the meta)
                            if dest == me:
                                remote_row = self_ptr + slot.to(tl.int64) * H
                        tl.store(remote_row + offs, q, mask=offs < H)
                        if NODES > 1:
                            if dest // LOCAL == node:
                                remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                            else:
                                remote_meta = send_meta_ptr + pair * META
                        else:
                            remote_meta = dl.symm_at(meta_buf + slot * META, dest)
                        tl.store(remote_meta + 1 + 3 * K + group_ids, scale_bits, mask=group_ids < SCALES)
            if NODES > 1:  # every chunk staged: the meta rows (with the scales) and payloads to the other nodes
                for dest in range(0, ranks):
                    place = tl.sum(tl.where(dests == dest, places, 0), axis=0)
                    if (place >= 0) & (dest // LOCAL != node):
                        slot = tl.sum(tl.where(dests == dest, base, 0), axis=0) + place
                        pair = tl.sum(tl.where(dests == dest, pair_base, 0), axis=0) + place
                        sig = signals + slot * 2
                        dl.put_signal(meta_buf + slot * META, send_meta_ptr + pair * META, META * 4, sig, epoch, dest)
                        row_at = token_buf + slot.to(tl.int64) * H
                        dl.put_signal(row_at, send_ptr + pair.to(tl.int64) * H, H * ELEM, sig + 1, epoch, dest)
        # final: combine's reduce reads it. SELF: both launches read column me's local place while they run side by
        # side, so neither writes it (the expand kernel does, SELF_DIRECT); SELF == 1 writes the other columns, and so
        # does SELF == 3 (one launch, but the same expand kernel follows it).
        # In place: every warp of the program loads tok_pos[t] (its few words are replicated over the warps) and one
        # warp stores it, and nothing else makes the warps wait for each other, so without the barrier a warp that
        # runs ahead (after a few tokens, the first warp: the others stall on their row stores) overwrote tok_pos[t]
        # before a later warp loaded it: that warp added the prefix twice and stored its columns of the row into
        # another slot, or past the token buffer (issue 27's wrong columns [128, H) and meta rows on GPUs).
        if SELF == 1:
            tl.debug_barrier()  # every warp has loaded this token's local places
            tl.store(tok_pos_ptr + t * ranks + dests, places, mask=(dests < ranks) & (dests != me))
        elif SELF == 3:
            tl.debug_barrier()  # every warp has loaded this token's local places
            tl.store(tok_pos_ptr + t * ranks + dests, places, mask=(dests < ranks) & (dests != me))
        elif SELF == 0:
            tl.debug_barrier()  # every warp has loaded this token's local places
            tl.store(tok_pos_ptr + t * ranks + dests, places, mask=dests < ranks)
    if LOW_LATENCY:
        if pid == 0:  # this rank's counts row travels with the data (no exchange before)
            experts = tl.arange(0, EP)
            for peer in range(0, ranks):
                remote = dl.symm_at(matrix + me * ROW, peer)
                tl.store(remote + dests, tl.load(row_ptr + dests, mask=dests < ranks), mask=dests < ranks)
                tl.store(remote + WP + experts, tl.load(row_ptr + WP + experts, mask=experts < E), mask=experts < E)
    if WAVES > 0:  # the waves this program's tokens did not reach (all, if it had none)
        if fits:
            for rest in range(wave, WAVES):
                if WORLD > 0:
                    dl.notify(
                        wave_flags + (me * WAVE_SLOTS + rest) * programs + pid,
                        tl.arange(0, WORLD),
                        signal=epoch,
                        sig_op="set",
                        comm_scope="intra_node",
                    )
                else:
                    for peer in range(0, ranks):
                        dl.notify(
                            wave_flags + (me * WAVE_SLOTS + rest) * programs + pid,
                            peer,
                            signal=epoch,
                            sig_op="set",
                            comm_scope="intra_node",
                        )
    data_flags = flags_ptr + parity * FLAGS + DATA_FLAGS
    if SELF == 2:  # the local copy: no flag (the op orders it before the expand kernel with an event)
        pass
    elif CHECK_CAP:  # one node (op.py launches no other with it): the flags only if the data went
        if fits:
            if WORLD > 0:  # notify_every_rank, inlined
                dl.notify(
                    data_flags + me * programs + pid,
                    tl.arange(0, WORLD),
                    signal=epoch,
                    sig_op="set",
                    comm_scope="intra_node",
                )
            else:
                for peer in range(0, ranks):
                    dl.notify(
                        data_flags + me * programs + pid, peer, signal=epoch, sig_op="set", comm_scope="intra_node"
                    )
    elif NODES > 1:  # the ranks of my node (the others wait for each slot's signals)
        for j in range(0, LOCAL):
            dl.notify(
                data_flags + me * programs + pid, node * LOCAL + j, signal=epoch, sig_op="set", comm_scope="intra_node"
            )
    elif WORLD > 0:  # notify_every_rank, inlined
        dl.notify(
            data_flags + me * programs + pid, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node"
        )
    else:
        for peer in range(0, ranks):
            dl.notify(data_flags + me * programs + pid, peer, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def _started_kernel(started_ptr, PROGRAMS: tl.constexpr):
    """One program that returns once all ``PROGRAMS`` programs of the kernel launched with ``STARTED`` have started
    (each added 1 to ``started`` first thing, so each holds its SM slot), and sets ``started`` back to 0 for the next
    call (no program of this call adds to it any more). The kernel launched after this one on its stream is placed
    into what those programs left free, never before them: which kernel the GPU places first no longer varies.

    - ``switches.PUSH_RESIDENT_FIRST``: the push's programs, this kernel on the side stream before the expand kernel.
      It cannot wait forever: the push waits for nothing, so a push program that found no SM slot starts once another
      ends.
    - ``switches.EXPAND_RESIDENT_FIRST``: the expand kernel's programs (launched first, on the side stream), this
      kernel on the current stream before the push. It needs every expand program resident at once while nothing of
      the push is (they spin on its flags): the switch's docstring gives the arithmetic."""
    token = dl.wait(started_ptr, 1, "gpu", "acquire", waitValue=PROGRAMS, cmp="ge")
    tl.store(dl.consume_token(started_ptr, token), 0)


@triton.jit
def _expand_kernel(
    recv_ptr,
    src_rank_ptr,
    src_token_ptr,
    expert_ptr,
    weight_ptr,
    slot_ptr,
    comb_rows_ptr,
    comb_src_ptr,
    comb_dst_ptr,
    counts_out_ptr,
    offsets_out_ptr,
    src_offsets_ptr,
    recv_tokens_ptr,
    scales_ptr,
    gather_ptr,
    status_ptr,
    epoch_ptr,
    tok_pos_ptr,
    tokens_ptr,
    meta_ptr,
    counts_ptr,
    flags_ptr,
    table_ptr,
    H,
    CAP,
    M,
    L,
    K: tl.constexpr,
    KP: tl.constexpr,
    WP: tl.constexpr,
    LP: tl.constexpr,
    EP: tl.constexpr,
    ROW: tl.constexpr,
    FLAGS: tl.constexpr,
    DATA_FLAGS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
    SCALES: tl.constexpr,
    SP: tl.constexpr,
    DEQUANT: tl.constexpr,
    LOW_LATENCY: tl.constexpr,
    GATHER: tl.constexpr,
    slot_signals_ptr=None,
    NODES: tl.constexpr = 1,
    LOCAL: tl.constexpr = 1,
    BULK: tl.constexpr = False,
    SENDERS: tl.constexpr = 0,
    COPIERS: tl.constexpr = 0,
    COPY_BLOCK: tl.constexpr = 4096,
    SELF_DIRECT: tl.constexpr = False,
    META_BLOCK: tl.constexpr = 0,
    waves_ptr=None,
    WAVES: tl.constexpr = 0,
    COMBINE_CAP=0,
    WAVE_SLOTS: tl.constexpr = 16,
    started_ptr=None,
    STARTED: tl.constexpr = False,
):
    if STARTED:  # switches.EXPAND_RESIDENT_FIRST: this program is resident (_started_kernel counts them all in; one
        # thread's relaxed add: it orders no data, and the push's waves are what the expand then waits for)
        tl.atomic_add(started_ptr, 1, sem="relaxed", scope="gpu")
    pid = tl.program_id(0)
    programs = tl.num_programs(0) - COPIERS  # the meta programs; BULK's copy programs come after them
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    META: tl.constexpr = 1 + 3 * K + SCALES
    if WAVES > 0:  # beside the early push (one node, BULK, no META_BLOCK): each wave's flags awaited where it is read
        # The counts matrix is complete (the route kernel, which the op orders before this launch, waited for every
        # rank's row). Like the push, nothing if the buffers must grow: the summary's sizes (info words 2 and 3,
        # just before the status words) against this launch's.
        fits = (tl.load(status_ptr - 2) <= CAP) & (tl.load(status_ptr - 1) <= COMBINE_CAP)
        wave_flags = waves_ptr + parity * (WP * WAVE_SLOTS * (SENDERS + 1))
        wave_bounds = wave_flags + WP * WAVE_SLOTS * SENDERS
        token_buf = tokens_ptr + tl.cast(parity, tl.int64) * CAP * H
        meta_buf = meta_ptr + parity * CAP * META
        matrix = counts_ptr + parity * WP * ROW
    elif NODES > 1:  # the data flags of my node's ranks; each slot put from another node has signals of its own
        mine_first = flags_ptr + parity * FLAGS + DATA_FLAGS + (me // LOCAL) * LOCAL * programs
        token = dl.wait(mine_first, LOCAL * programs, "sys", "acquire", waitValue=epoch)
    else:  # SENDERS: the push's programs per rank, where this grid is larger (0: the same)
        senders = programs  # (without BULK's copy programs)
        if SENDERS > 0:
            senders = SENDERS
        token = dl.wait(flags_ptr + parity * FLAGS + DATA_FLAGS, ranks * senders, "sys", "acquire", waitValue=epoch)
    if WAVES == 0:
        token_buf = dl.consume_token(tokens_ptr + tl.cast(parity, tl.int64) * CAP * H, token)
        meta_buf = dl.consume_token(meta_ptr + parity * CAP * META, token)
        matrix = dl.consume_token(counts_ptr + parity * WP * ROW, token)
    sources = tl.arange(0, WP)
    locals_ = tl.arange(0, LP)
    live = (sources < ranks)[:, None] & (locals_ < L)[None, :]
    received = tl.load(matrix + sources * ROW + me, mask=sources < ranks, other=0)  # N[s, me]
    c = tl.load(matrix + sources[:, None] * ROW + WP + me * L + locals_[None, :], mask=live, other=0)  # C[s, me, l]
    per_expert = tl.sum(c, axis=0)
    before_source = tl.cumsum(c, axis=0) - c  # [s, l]: rows of the sources before s within expert l
    if LOW_LATENCY:
        expert_start = locals_ * (ranks * M)
        slot_start = sources * M
        slots = ranks * M
        # An expert's rows beyond its W * M (a token naming it twice) are dropped and counted, never written.
        if pid == 0:
            tl.store(status_ptr + 2, tl.sum(tl.maximum(per_expert - ranks * M, 0), axis=0))  # STATUS_OVERFLOW
        per_expert = tl.minimum(per_expert, ranks * M)
    else:
        expert_start = tl.cumsum(per_expert, axis=0) - per_expert
        slot_start = tl.cumsum(received, axis=0) - received
        slots = tl.sum(received, axis=0)
    if pid == 0:
        tl.store(counts_out_ptr + locals_, per_expert, mask=locals_ < L)
        tl.store(offsets_out_ptr + locals_, expert_start, mask=locals_ < L)
        tl.store(src_offsets_ptr + locals_[None, :] * ranks + sources[:, None], before_source, mask=live)
        tl.store(recv_tokens_ptr, tl.sum(received, axis=0))
    if BULK:  # the gather layout's payload, slots [0, slots) of the token buffer, into recv_x as one flat block
        # (recv_x's row i is slot i): the COPIERS programs after the meta programs, while those write the meta;
        # without COPIERS every program, after its meta rows (below). 16-byte vectors, int64 offsets.
        # Block b: elements [b * COPY_BLOCK, + COPY_BLOCK) of the flat payload (an int64 base, int32 offsets).
        # SELF_DIRECT: my own tokens' rows, elements [own_first, own_end), were stored into recv_x by the push's
        # SELF == 2 launch, not into the token buffer: the copy leaves them out.
        flat = tl.arange(0, COPY_BLOCK)
        total = slots.to(tl.int64) * H
        blocks = ((total + COPY_BLOCK - 1) // COPY_BLOCK).to(tl.int32)
        own_first = tl.sum(tl.where(sources == me, slot_start, 0), axis=0).to(tl.int64) * H
        own_end = own_first + tl.sum(tl.where(sources == me, received, 0), axis=0).to(tl.int64) * H
        if COPIERS > 0 and WAVES == 0:
            for b in range(tl.maximum(pid - programs, 0), tl.where(pid >= programs, blocks, 0), COPIERS):
                first = tl.cast(b, tl.int64) * COPY_BLOCK
                inside = flat < tl.minimum(total - first, COPY_BLOCK).to(tl.int32)
                if SELF_DIRECT:
                    own_lo = tl.minimum(tl.maximum(own_first - first, 0), COPY_BLOCK).to(tl.int32)
                    own_hi = tl.minimum(tl.maximum(own_end - first, 0), COPY_BLOCK).to(tl.int32)
                    inside = inside & ((flat < own_lo) | (flat >= own_hi))
                block = tl.load(token_buf + first + flat, mask=inside)
                tl.store(recv_ptr + first + flat, block, mask=inside)
    # This program's lookup table (global memory, read back after a program barrier): a pair's row is a gather,
    # [before_source (WP x LP) | expert_start (LP) | rows per expert (LP) | home slot base per source (WP)].
    # (BULK's copy programs write theirs too, one row each, and read none: they take no slot.)
    TABLE: tl.constexpr = WP * LP + 2 * LP + WP
    table = table_ptr + pid * TABLE
    tl.store(table + sources[:, None] * LP + locals_[None, :], before_source)
    tl.store(table + WP * LP + locals_, expert_start)
    tl.store(table + WP * LP + LP + locals_, per_expert)
    if not LOW_LATENCY:  # home rank s packs its partials by the rank they come from: sum_{d < me} N[s, d] first
        dests = tl.arange(0, WP)
        before_me = (sources < ranks)[:, None] & (dests < me)[None, :]
        n = tl.load(matrix + sources[:, None] * ROW + dests[None, :], mask=before_me, other=0)
        tl.store(table + WP * LP + 2 * LP + sources, tl.sum(n, axis=1))
    tl.debug_barrier()  # the table's stores are visible to every thread of the program
    h = tl.arange(0, BLOCK_H)
    GB: tl.constexpr = BLOCK_H // 128
    ks = tl.arange(0, KP)
    in_k = ks < K
    meta_slots = slots
    if COPIERS > 0:  # a copy program takes no slot
        meta_slots = tl.where(pid < programs, slots, 0)
    if META_BLOCK > 0:  # BULK (normal mode, one node): META_BLOCK slots' meta rows at once, each a row of a tile
        tb = tl.arange(0, META_BLOCK)
        for i0 in range(pid * META_BLOCK, meta_slots, programs * META_BLOCK):
            i = i0 + tb
            filled = i < meta_slots
            # Per slot, the last source whose slots start at or before it (sources with no slots skipped).
            starts_here = (slot_start[None, :] <= i[:, None]) & (received > 0)[None, :] & (sources < ranks)[None, :]
            source = tl.max(tl.where(starts_here, sources[None, :], -1), axis=1)
            of_source = sources[None, :] == source[:, None]
            j = i - tl.sum(tl.where(of_source, slot_start[None, :], 0), axis=1)
            meta_row = meta_buf + i * META
            pairs = filled[:, None] & in_k[None, :]
            home_token = tl.load(meta_row, mask=filled, other=0)
            ids = tl.load(meta_row[:, None] + 1 + ks[None, :], mask=pairs, other=-1)
            weight_bits = tl.load(meta_row[:, None] + 1 + K + ks[None, :], mask=pairs, other=0)
            places = tl.load(meta_row[:, None] + 1 + 2 * K + ks[None, :], mask=pairs, other=0)
            home_base = tl.load(table + WP * LP + 2 * LP + source, mask=filled, other=0)
            if SCALES > 0:
                groups = tl.arange(0, SP)
                scaled = filled[:, None] & (groups < SCALES)[None, :]
                bulk_scales = tl.load(meta_row[:, None] + 1 + 3 * K + groups[None, :], mask=scaled)
            local = ids - me * L
            mine = pairs & (ids >= 0) & (local >= 0) & (local < L)
            at = tl.where(mine, local, 0)
            within = tl.load(table + source[:, None] * LP + at, mask=mine, other=0) + places
            start = tl.load(table + WP * LP + at, mask=mine, other=0)
            rows = tl.where(mine, within + start, -1)
            tl.store(comb_src_ptr + i, source, mask=filled)
            tl.store(comb_dst_ptr + i, j + home_base, mask=filled)
            if SELF_DIRECT:  # my own tokens: their final places among my tokens to me, which the pushes left local
                tl.store(tok_pos_ptr + home_token * ranks + me, j, mask=filled & (source == me))
            got = rows >= 0
            row_at = tl.where(got, rows, 0)
            tl.store(src_rank_ptr + row_at, tl.zeros([META_BLOCK, KP], dtype=tl.int32) + source[:, None], mask=got)
            tl.store(src_token_ptr + row_at, tl.zeros([META_BLOCK, KP], dtype=tl.int32) + home_token[:, None], mask=got)
            tl.store(expert_ptr + row_at, ids, mask=got)
            tl.store(weight_ptr + row_at, weight_bits.to(tl.float32, bitcast=True), mask=got)
            tl.store(slot_ptr + row_at, tl.zeros([META_BLOCK, KP], dtype=tl.int32) + ks[None, :], mask=got)
            tl.store(comb_rows_ptr + i[:, None] * K + ks[None, :], rows, mask=pairs)
            tl.store(gather_ptr + row_at, tl.zeros([META_BLOCK, KP], dtype=tl.int32) + i[:, None], mask=got)
            if SCALES > 0:  # fp8 kept: row i's scales, from the end of its meta row
                scale_at = scales_ptr + tl.cast(i, tl.int64)[:, None] * SCALES + groups[None, :]
                tl.store(scale_at, bulk_scales.to(tl.float32, bitcast=True), mask=scaled)
    else:
        units = 1  # one unit, every slot of mine
        if WAVES > 0:  # a unit per (wave, source), wave by wave: slots [first, last) of the source once it landed
            units = tl.where(fits & (pid < programs), WAVES * ranks, 0)
        for unit in range(0, units):
            first = pid
            last = meta_slots
            if WAVES > 0:
                source_of = unit % ranks
                token = dl.wait(
                    wave_flags + (source_of * WAVE_SLOTS + unit // ranks) * SENDERS,
                    SENDERS,
                    "sys",
                    "acquire",
                    waitValue=epoch,
                )
                ends = dl.consume_token(wave_bounds + source_of * WAVE_SLOTS, token)
                begin = tl.sum(tl.where(sources == source_of, slot_start, 0), axis=0)
                last = begin + tl.load(ends + unit // ranks)
                if unit >= ranks:
                    begin += tl.load(ends + unit // ranks - 1)
                first = begin + pid
                meta_buf = dl.consume_token(meta_buf, token)
            for i in range(first, last, programs):
                if LOW_LATENCY:
                    source = i // M
                    j = i % M
                else:  # the last source whose slots start at or before i (sources with no slots skipped)
                    source = tl.max(
                        tl.where((slot_start <= i) & (received > 0) & (sources < ranks), sources, -1), axis=0
                    )
                    j = i - tl.sum(tl.where(sources == source, slot_start, 0), axis=0)
                n_source = tl.sum(tl.where(sources == source, received, 0), axis=0)
                valid = j < n_source
                if valid:
                    # Every load of the received token first (its meta row as vectors, its payload), then the table's.
                    meta_row = meta_buf + i * META
                    row_buf = token_buf
                    if NODES > 1:
                        if (
                            source // LOCAL != me // LOCAL
                        ):  # put from another node: its meta row's and payload's signals
                            sig = slot_signals_ptr + (tl.cast(parity, tl.int64) * CAP + i) * 2
                            meta_row = dl.consume_token(meta_row, dl.signal_wait(sig, epoch, cmp="eq"))
                            row_buf = dl.consume_token(row_buf, dl.signal_wait(sig + 1, epoch, cmp="eq"))
                    home_token = tl.load(meta_row)
                    ids = tl.load(meta_row + 1 + ks, mask=in_k, other=-1)
                    weight_bits = tl.load(meta_row + 1 + K + ks, mask=in_k, other=0)
                    places = tl.load(meta_row + 1 + 2 * K + ks, mask=in_k, other=0)
                    if (
                        BULK
                    ):  # the gather layout's payload is copied as one block (above, or below): only the fp8 scales
                        if SCALES > 0:
                            groups = tl.arange(0, SP)
                            bulk_scales = tl.load(meta_row + 1 + 3 * K + groups, mask=groups < SCALES)
                    elif WHOLE_ROW:  # the received row (and its scales), loaded once for every local row it fills
                        if DEQUANT:
                            group_ids = tl.arange(0, GB)
                            scale_bits = tl.load(meta_row + 1 + 3 * K + group_ids, mask=group_ids < SCALES)
                            scale = scale_bits.to(tl.float32, bitcast=True)
                            values = tl.load(row_buf + tl.cast(i, tl.int64) * H + h, mask=h < H, other=0.0)
                            grouped = tl.reshape(values.to(tl.float32), [GB, 128]) * scale[:, None]
                            whole = tl.reshape(grouped, [BLOCK_H]).to(recv_ptr.dtype.element_ty)
                        else:
                            whole = tl.load(row_buf + tl.cast(i, tl.int64) * H + h, mask=h < H)
                            if SCALES > 0:
                                groups = tl.arange(0, SP)
                                scale_bits = tl.load(meta_row + 1 + 3 * K + groups, mask=groups < SCALES)
                                whole_scales = scale_bits.to(tl.float32, bitcast=True)
                    local = ids - me * L
                    mine = in_k & (ids >= 0) & (local >= 0) & (local < L)
                    at = tl.where(mine, local, 0)
                    within = tl.load(table + source * LP + at, mask=mine, other=0) + places  # row within expert `local`
                    start = tl.load(table + WP * LP + at, mask=mine, other=0)
                    if LOW_LATENCY:  # past the expert's capacity: dropped (counted in the status)
                        rows = tl.where(mine & (within < ranks * M), within + start, -1)
                        home_slot = me * M + j
                    else:
                        rows = tl.where(mine, within + start, -1)
                        home_slot = j + tl.load(table + WP * LP + 2 * LP + source)
                    tl.store(comb_src_ptr + i, source)
                    tl.store(comb_dst_ptr + i, home_slot)
                    if SELF_DIRECT:  # my own token: its final place among my tokens to me, which the pushes left local
                        if source == me:
                            tl.store(tok_pos_ptr + home_token * ranks + me, j)
                    got = rows >= 0
                    row_at = tl.where(got, rows, 0)
                    tl.store(src_rank_ptr + row_at, tl.zeros([KP], dtype=tl.int32) + source, mask=got)
                    tl.store(src_token_ptr + row_at, tl.zeros([KP], dtype=tl.int32) + home_token, mask=got)
                    tl.store(expert_ptr + row_at, ids, mask=got)
                    tl.store(weight_ptr + row_at, weight_bits.to(tl.float32, bitcast=True), mask=got)
                    tl.store(slot_ptr + row_at, ks, mask=got)
                    tl.store(comb_rows_ptr + i * K + ks, rows, mask=in_k)
                    if GATHER:  # the token's local rows read it from row i of recv_x, which holds it once
                        tl.store(gather_ptr + row_at, tl.zeros([KP], dtype=tl.int32) + i, mask=got)
                    if BULK:
                        if SCALES > 0:  # fp8 kept: row i's scales, from the end of its meta row
                            groups = tl.arange(0, SP)
                            scale_at = scales_ptr + tl.cast(i, tl.int64) * SCALES + groups
                            tl.store(scale_at, bulk_scales.to(tl.float32, bitcast=True), mask=groups < SCALES)
                    if not BULK:  # the payload into its local rows (gather: once, to row i)
                        COPIES: tl.constexpr = 1 if GATHER else K
                        for k in range(0, COPIES):
                            if GATHER:
                                row = tl.cast(i, tl.int32)
                            else:
                                row = tl.sum(tl.where(ks == k, rows, 0), axis=0)
                            if row >= 0:
                                if WHOLE_ROW:
                                    tl.store(recv_ptr + row.to(tl.int64) * H + h, whole, mask=h < H)
                                    if SCALES > 0:
                                        if not DEQUANT:  # fp8 kept: the row's scales go with it
                                            groups = tl.arange(0, SP)
                                            tl.store(
                                                scales_ptr + row.to(tl.int64) * SCALES + groups,
                                                whole_scales,
                                                mask=groups < SCALES,
                                            )
                                elif DEQUANT:  # fp8 in, x's dtype out: each group of 128 channels times its scale
                                    for h0 in range(0, H, BLOCK_H):
                                        offs = h0 + h
                                        values = tl.load(
                                            row_buf + tl.cast(i, tl.int64) * H + offs, mask=offs < H, other=0.0
                                        )
                                        group_ids = h0 // 128 + tl.arange(0, GB)
                                        scale_bits = tl.load(meta_row + 1 + 3 * K + group_ids, mask=group_ids < SCALES)
                                        scale = scale_bits.to(tl.float32, bitcast=True)
                                        grouped = tl.reshape(values.to(tl.float32), [GB, 128]) * scale[:, None]
                                        out = tl.reshape(grouped, [BLOCK_H]).to(recv_ptr.dtype.element_ty)
                                        tl.store(recv_ptr + row.to(tl.int64) * H + offs, out, mask=offs < H)
                                else:
                                    for h0 in range(0, H, BLOCK_H):
                                        offs = h0 + h
                                        values = tl.load(row_buf + tl.cast(i, tl.int64) * H + offs, mask=offs < H)
                                        tl.store(recv_ptr + row.to(tl.int64) * H + offs, values, mask=offs < H)
                                    if SCALES > 0:  # fp8 kept: the row's scales go with it
                                        groups = tl.arange(0, SP)
                                        scale_bits = tl.load(meta_row + 1 + 3 * K + groups, mask=groups < SCALES)
                                        scale = scale_bits.to(tl.float32, bitcast=True)
                                        tl.store(
                                            scales_ptr + row.to(tl.int64) * SCALES + groups, scale, mask=groups < SCALES
                                        )
                else:  # a low-latency slot nobody filled this call
                    tl.store(comb_src_ptr + i, -1)
    if BULK:
        if WAVES > 0:  # the block copy wave by wave: each (wave, source) unit's slots once its flags landed
            copier = pid  # no copy programs (the CPU emulation): every program, after its meta rows
            copying = programs
            copy_units = tl.where(fits, WAVES * ranks, 0)
            if COPIERS > 0:  # the copy programs after the meta programs
                copier = tl.maximum(pid - programs, 0)
                copying = COPIERS
                copy_units = tl.where(pid >= programs, copy_units, 0)
            for unit in range(0, copy_units):
                source_of = unit % ranks
                wanted = source_of >= 0
                if SELF_DIRECT:  # my own rows are in recv_x already
                    wanted = source_of != me
                if wanted:
                    token = dl.wait(
                        wave_flags + (source_of * WAVE_SLOTS + unit // ranks) * SENDERS,
                        SENDERS,
                        "sys",
                        "acquire",
                        waitValue=epoch,
                    )
                    ends = dl.consume_token(wave_bounds + source_of * WAVE_SLOTS, token)
                    begin = tl.sum(tl.where(sources == source_of, slot_start, 0), axis=0)
                    last = begin + tl.load(ends + unit // ranks)
                    if unit >= ranks:
                        begin += tl.load(ends + unit // ranks - 1)
                    start = begin.to(tl.int64) * H
                    size = (last - begin).to(tl.int64) * H
                    landed = dl.consume_token(token_buf, token)
                    for b in range(copier, ((size + COPY_BLOCK - 1) // COPY_BLOCK).to(tl.int32), copying):
                        first = start + tl.cast(b, tl.int64) * COPY_BLOCK
                        inside = flat < tl.minimum(start + size - first, COPY_BLOCK).to(tl.int32)
                        block = tl.load(landed + first + flat, mask=inside)
                        tl.store(recv_ptr + first + flat, block, mask=inside)
        elif COPIERS == 0:  # no copy programs (the CPU emulation): every program copies its share of the block
            for b in range(pid, blocks, programs):
                first = tl.cast(b, tl.int64) * COPY_BLOCK
                inside = flat < tl.minimum(total - first, COPY_BLOCK).to(tl.int32)
                if SELF_DIRECT:
                    own_lo = tl.minimum(tl.maximum(own_first - first, 0), COPY_BLOCK).to(tl.int32)
                    own_hi = tl.minimum(tl.maximum(own_end - first, 0), COPY_BLOCK).to(tl.int32)
                    inside = inside & ((flat < own_lo) | (flat >= own_hi))
                block = tl.load(token_buf + first + flat, mask=inside)
                tl.store(recv_ptr + first + flat, block, mask=inside)
    if LOW_LATENCY:  # the rows past each expert's count read as "no row": meta -1, weight 0 (recv_x left as it is)
        FILL: tl.constexpr = 256
        fill = tl.arange(0, FILL)
        per_expert_rows = ranks * M
        for r0 in range(pid * FILL, L * per_expert_rows, programs * FILL):
            r = r0 + fill
            expert_of = r // per_expert_rows
            inside = r < L * per_expert_rows
            count = tl.load(table + WP * LP + LP + expert_of, mask=inside, other=0)
            empty = inside & (r - expert_of * per_expert_rows >= count)
            none = tl.full([FILL], -1, tl.int32)
            tl.store(src_rank_ptr + r, none, mask=empty)
            tl.store(src_token_ptr + r, none, mask=empty)
            tl.store(expert_ptr + r, none, mask=empty)
            tl.store(slot_ptr + r, none, mask=empty)
            tl.store(weight_ptr + r, tl.zeros([FILL], dtype=tl.float32), mask=empty)


@triton.jit
def _combine_slot(
    i,
    y_ptr,
    weight_ptr,
    comb_rows_ptr,
    comb_src_ptr,
    comb_dst_ptr,
    partials,
    send_ptr,
    combine_signals_ptr,
    parity,
    epoch,
    me,
    h,
    H,
    CAP,
    K: tl.constexpr,
    BLOCK_H: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
    NODES: tl.constexpr,
    LOCAL: tl.constexpr,
    PACK: tl.constexpr,
):
    """The combine push of received token slot ``i``: ``sum_k w_k * y[row_k]`` in fp32 over its rows here, stored
    into slot ``comb_dst[i]`` of its home's ``partials`` (in the partials' dtype; across nodes staged, then put)."""
    home = tl.load(comb_src_ptr + i)
    if home >= 0:
        if NODES > 1:  # a home on another node: the partial staged in row i of my send buffer, then put
            dst = tl.load(comb_dst_ptr + i)
            if home // LOCAL == me // LOCAL:
                remote = dl.symm_at(partials + dst.to(tl.int64) * H, home)
            else:
                remote = send_ptr + tl.cast(i, tl.int64) * H
        else:
            remote = dl.symm_at(partials + tl.load(comb_dst_ptr + i).to(tl.int64) * H, home)
        if WHOLE_ROW:  # every k's row index, weight and row loaded without a branch: all in flight together
            acc = tl.zeros([BLOCK_H], dtype=tl.float32)
            for k in tl.static_range(K):  # k order, as the reference adds; a missing row adds 0 * 0
                row = tl.load(comb_rows_ptr + i * K + k)
                present = row >= 0
                at = tl.maximum(row, 0).to(tl.int64)
                weight = tl.load(weight_ptr + at, mask=present, other=0.0)
                values = tl.load(y_ptr + at * H + h, mask=(h < H) & present, other=0.0)
                acc += weight * values.to(tl.float32)
            tl.store(remote + h, acc.to(remote.dtype.element_ty), mask=h < H)
        else:
            for h0 in range(0, H, BLOCK_H):
                offs = h0 + h
                acc = tl.zeros([BLOCK_H], dtype=tl.float32)
                for k in range(0, K):  # k order, as the reference adds
                    row = tl.load(comb_rows_ptr + i * K + k)
                    if row >= 0:
                        weight = tl.load(weight_ptr + row)
                        values = tl.load(y_ptr + row.to(tl.int64) * H + offs, mask=offs < H, other=0.0)
                        acc += weight * values.to(tl.float32)
                tl.store(remote + offs, acc.to(remote.dtype.element_ty), mask=offs < H)
        if NODES > 1:
            if home // LOCAL != me // LOCAL:
                signal = combine_signals_ptr + tl.cast(parity, tl.int64) * CAP + dst
                dl.put_signal(
                    partials + dst.to(tl.int64) * H, remote, H * (4 // PACK), signal, epoch, home, sig_op="set"
                )


@triton.jit(do_not_specialize=["slots"])  # one compiled kernel for every slots
def _combine_push_kernel(
    y_ptr,
    weight_ptr,
    comb_rows_ptr,
    comb_src_ptr,
    comb_dst_ptr,
    epoch_ptr,
    slots,
    combine_ptr,
    flags_ptr,
    H,
    CAP,
    K: tl.constexpr,
    FLAGS: tl.constexpr,
    COMBINE_FLAGS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    WHOLE_ROW: tl.constexpr,
    WORLD: tl.constexpr,
    send_ptr=None,
    combine_signals_ptr=None,
    NODES: tl.constexpr = 1,
    LOCAL: tl.constexpr = 1,
    PACK: tl.constexpr = 1,
    SPREAD: tl.constexpr = False,
    waves_ptr=None,
    WAVES: tl.constexpr = 0,
    WAVE_SLOTS: tl.constexpr = 16,
    WP: tl.constexpr = 2,
    SCAN: tl.constexpr = 1024,
    OWN: tl.constexpr = False,
    WAVE_MIN: tl.constexpr = 0,
    WAVE_MAX: tl.constexpr = 0,
):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    # PACK partials per fp32 word of the buffer (2: bf16 / fp16 partials, combine_ptr viewed in that dtype): each
    # parity's half is CAP * H fp32 words, a partial's row H elements.
    partials = combine_ptr + tl.cast(parity, tl.int64) * CAP * H * PACK
    h = tl.arange(0, BLOCK_H)
    if WAVES > 0:  # switches.REDUCE_OVERLAPS_PUSH (one node): each home's partials in WAVES waves, a flag per wave
        tl.static_assert(NODES == 1, "the waves are one node's")
        # The slots are grouped by home in rank order: where each home's start, and how many it has (N[home, me]).
        sources = tl.arange(0, WP)
        starts = tl.zeros([WP], dtype=tl.int32)
        counts = tl.zeros([WP], dtype=tl.int32)
        scan = tl.arange(0, SCAN)
        for s0 in range(0, slots, SCAN):
            homes = tl.load(comb_src_ptr + s0 + scan, mask=s0 + scan < slots, other=WP)
            starts += tl.sum((homes[None, :] < sources[:, None]).to(tl.int32), axis=1)
            counts += tl.sum((homes[None, :] == sources[:, None]).to(tl.int32), axis=1)
        # switches.OWN_PARTIALS_IN_REDUCE: my own tokens' partials are the reduce's (none stored, flags still set)
        if OWN:
            counts = tl.where(sources == me, 0, counts)
        # Home s's waves: WAVES, or (WAVE_MIN > 0, switches.COMBINE_WAVE_MIN_SLOTS) one per WAVE_MIN of its n_s slots,
        # at least 1 and at most WAVES: the home computes the same from N[s, me] (its row), so nothing is exchanged, and
        # a small push sets fewer flag rounds (each a barrier and a system-scope release to every rank).
        # Or (WAVE_MAX > 0, switches.COMBINE_WAVES_BY_PROGRAMS: the programs) the fewest waves of at most WAVE_MAX slots
        # (the last wave, reduced after the push ends, then gives each reduce program at most one token).
        per = tl.full([WP], WAVES, tl.int32)
        if WAVE_MAX > 0:
            per = tl.minimum(tl.maximum((counts + WAVE_MAX - 1) // WAVE_MAX, 1), WAVES)
        elif WAVE_MIN > 0:
            per = tl.minimum(tl.maximum(counts // WAVE_MIN, 1), WAVES)
        wave_flags = waves_ptr + parity * (WP * WAVE_SLOTS * programs)
        done = tl.sum(tl.zeros([WP], dtype=tl.int32), axis=0)  # the slots of the waves before this one
        for wave in range(0, tl.max(per, axis=0)):
            # Wave w of home s: its positions [w n_s / W_s, (w + 1) n_s / W_s) (none from w = W_s on), the home's
            # tok_pos[t, me] of them (what the reduce there computes back from tok_pos), concatenated over the homes
            # in rank order.
            lo = wave * counts // per
            size = tl.where(wave < per, (wave + 1) * counts // per - lo, 0)
            before = tl.cumsum(size, axis=0) - size
            total = tl.sum(size, axis=0)
            # The wave's slots dealt round the programs from where the last wave's ended (lane 0: the program after
            # the one with the last wave's last slot): a wave of fewer slots than programs goes to other programs
            # than the wave before, not each wave to the first programs (which would push one slot a wave, each
            # behind its own release, while the others push none).
            lane = (pid - done % programs + programs) % programs
            count = (total - lane + programs - 1) // programs  # this program's slots of the wave: lane, lane +
            first = 0  # programs, ...
            if SPREAD:  # as below, within the wave
                first = (lane + 1) * count // (programs + 1)
            for j in range(0, count):
                step = j + first
                if SPREAD:
                    step = step % count
                v = lane + step * programs
                home = tl.sum(((before + size <= v) & (sources < ranks)).to(tl.int32), axis=0)
                i = tl.sum(tl.where(sources == home, starts + lo - before, 0), axis=0) + v
                _combine_slot(
                    i, y_ptr, weight_ptr, comb_rows_ptr, comb_src_ptr, comb_dst_ptr, partials, send_ptr,
                    combine_signals_ptr, parity, epoch, me, h, H, CAP, K, BLOCK_H, WHOLE_ROW, NODES, LOCAL, PACK,
                )  # fmt: skip
            flag = wave_flags + (me * WAVE_SLOTS + wave) * programs + pid  # (source me, wave, program) on every rank
            if WORLD > 0:
                dl.notify(flag, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node")
            else:
                for peer in range(0, ranks):
                    dl.notify(flag, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
            done += total
    else:
        tl.static_assert(not OWN, "the own partials in the reduce: with the waves only")
        count = (slots - pid + programs - 1) // programs  # this program's slots: pid, pid + programs, ...
        first = 0
        if SPREAD:  # start at the floor((pid + 1) * count / (programs + 1))-th of them, wrapping around
            first = (pid + 1) * count // (programs + 1)
        for j in range(0, count):
            step = j + first
            if SPREAD:
                step = step % count
            i = pid + step * programs
            _combine_slot(
                i, y_ptr, weight_ptr, comb_rows_ptr, comb_src_ptr, comb_dst_ptr, partials, send_ptr,
                combine_signals_ptr, parity, epoch, me, h, H, CAP, K, BLOCK_H, WHOLE_ROW, NODES, LOCAL, PACK,
            )  # fmt: skip
        combine_flags = flags_ptr + parity * FLAGS + COMBINE_FLAGS
        if NODES > 1:  # the ranks of my node (the homes on other nodes wait for each partial's signal)
            for j in range(0, LOCAL):
                peer = (me // LOCAL) * LOCAL + j
                dl.notify(
                    combine_flags + me * programs + pid, peer, signal=epoch, sig_op="set", comm_scope="intra_node"
                )
        elif WORLD > 0:  # notify_every_rank, inlined
            dl.notify(
                combine_flags + me * programs + pid,
                tl.arange(0, WORLD),
                signal=epoch,
                sig_op="set",
                comm_scope="intra_node",
            )
        else:
            for peer in range(0, ranks):
                dl.notify(
                    combine_flags + me * programs + pid, peer, signal=epoch, sig_op="set", comm_scope="intra_node"
                )


@triton.jit(do_not_specialize=["T"])  # one compiled kernel for every T
def _combine_reduce_kernel(
    out_ptr,
    tok_pos_ptr,
    row_ptr,
    epoch_ptr,
    T,
    y_ptr,
    weight_ptr,
    comb_rows_ptr,
    comb_src_ptr,
    slots,
    combine_ptr,
    flags_ptr,
    H,
    CAP,
    M,
    FLAGS: tl.constexpr,
    COMBINE_FLAGS: tl.constexpr,
    PROGRAMS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    LOW_LATENCY: tl.constexpr,
    combine_signals_ptr=None,
    NODES: tl.constexpr = 1,
    LOCAL: tl.constexpr = 1,
    PACK: tl.constexpr = 1,
    UNROLL: tl.constexpr = 0,
    waves_ptr=None,
    WAVES: tl.constexpr = 0,
    WAVE_SLOTS: tl.constexpr = 16,
    SENDERS: tl.constexpr = 1,
    WP: tl.constexpr = 2,
    OWN: tl.constexpr = False,
    K: tl.constexpr = 1,
    SCAN: tl.constexpr = 1024,
    SPLIT: tl.constexpr = 1,
    WAVE_MIN: tl.constexpr = 0,
    WAVE_MAX: tl.constexpr = 0,
):
    pid = tl.program_id(0)
    ranks = dl.num_ranks()
    me = dl.rank()
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    # switches.OWN_PARTIALS_IN_REDUCE: where my own tokens' slots start among those I received (grouped by source)
    if OWN:
        tl.static_assert(WAVES > 0, "the own partials in the reduce: with the waves only")
        scan = tl.arange(0, SCAN)
        own_start = tl.sum(tl.zeros([SCAN], dtype=tl.int32), axis=0)
        for s0 in range(0, slots, SCAN):
            homes = tl.load(comb_src_ptr + s0 + scan, mask=s0 + scan < slots, other=WP)
            own_start += tl.sum((homes < me).to(tl.int32), axis=0)
    # switches.REDUCE_OVERLAPS_PUSH (one node): no wait here; per token, for the waves its partials are in
    if WAVES > 0:
        tl.static_assert(NODES == 1, "the waves are one node's")
        dests = tl.arange(0, WP)
        sent = tl.load(row_ptr + dests, mask=dests < ranks, other=0)  # N[me, d]: my tokens' partials on rank d
        wave_flags = waves_ptr + parity * (WP * WAVE_SLOTS * SENDERS)
        awaited = tl.full([WP], -1, tl.int32)  # per rank, the last wave whose flags this program waited for
        partials = combine_ptr + tl.cast(parity, tl.int64) * CAP * H * PACK
    elif NODES > 1:  # the combine flags of my node's ranks; each partial put from another node has its own signal
        node = dl.rank() // LOCAL
        mine_first = flags_ptr + parity * FLAGS + COMBINE_FLAGS + node * LOCAL * PROGRAMS
        token = dl.wait(mine_first, LOCAL * PROGRAMS, "sys", "acquire", waitValue=epoch)
        signals = combine_signals_ptr + tl.cast(parity, tl.int64) * CAP
        partials = dl.consume_token(combine_ptr + tl.cast(parity, tl.int64) * CAP * H * PACK, token)
    else:
        token = dl.wait(flags_ptr + parity * FLAGS + COMBINE_FLAGS, ranks * PROGRAMS, "sys", "acquire", waitValue=epoch)
        partials = dl.consume_token(combine_ptr + tl.cast(parity, tl.int64) * CAP * H * PACK, token)
    HB: tl.constexpr = BLOCK_H // SPLIT  # the row's elements a step (OWN: part of a row, the k rows' loads fit)
    h = tl.arange(0, HB)
    for t in range(pid, T, tl.num_programs(0)):
        ready = partials
        if WAVES > 0:  # rank d pushes its partial of token t (place p = tok_pos[t, d] of N[me, d]) in wave
            # ((p + 1) W_d - 1) // N[me, d] (kernels' combine push: positions [w n / W_d, (w + 1) n / W_d), W_d its
            # waves of my partials); the waves of each rank come in order, so each wave's flags are awaited once per
            # program.
            places = tl.load(tok_pos_ptr + t * ranks + dests, mask=dests < ranks, other=-1)
            per = tl.full([WP], WAVES, tl.int32)  # rank d's waves of my partials, as its push counts them; N[me, d]
            if WAVE_MAX > 0:  # as the push counts them (sent loaded again here, as below)
                sent = tl.load(row_ptr + dests, mask=dests < ranks, other=0)
                per = tl.minimum(tl.maximum((sent + WAVE_MAX - 1) // WAVE_MAX, 1), WAVES)
            elif WAVE_MIN > 0:  # loaded again here (the OWN reduce spilled with a second vector kept across tokens)
                sent = tl.load(row_ptr + dests, mask=dests < ranks, other=0)
                per = tl.minimum(tl.maximum(sent // WAVE_MIN, 1), WAVES)
            need = tl.where(places >= 0, ((places + 1) * per - 1) // tl.maximum(sent, 1), -1)
            if OWN:  # my own partials: summed here, awaited from nobody
                need = tl.where(dests == me, -1, need)
            if tl.max(need - awaited, axis=0) > 0:
                for d in range(0, ranks):
                    wave = tl.max(tl.where(dests == d, need, -1), axis=0)
                    if wave > tl.max(tl.where(dests == d, awaited, -1), axis=0):
                        flags = wave_flags + (d * WAVE_SLOTS + wave) * SENDERS
                        token = dl.wait(flags, SENDERS, "sys", "acquire", waitValue=epoch)
                        ready = dl.consume_token(ready, token)
                awaited = tl.maximum(awaited, need)
        for h0 in range(0, H, HB):
            offs = h0 + h
            acc = tl.zeros([HB], dtype=tl.float32)
            start = 0
            own = tl.zeros([HB], dtype=tl.float32)
            if OWN:  # my own partial of token t, as the push computes one (k order, fp32, rounded as stored)
                mine = tl.load(tok_pos_ptr + t * ranks + me)
                i = own_start + tl.maximum(mine, 0)
                for k in tl.static_range(K):  # a missing row (or token) adds 0 * 0
                    row = tl.load(comb_rows_ptr + i * K + k, mask=mine >= 0, other=-1)
                    present = row >= 0
                    at = tl.maximum(row, 0).to(tl.int64)
                    weight = tl.load(weight_ptr + at, mask=present, other=0.0)
                    rows = tl.load(y_ptr + at * H + offs, mask=(offs < H) & present, other=0.0)
                    own += weight * rows.to(tl.float32)
                own = own.to(combine_ptr.dtype.element_ty).to(tl.float32)
            if UNROLL > 0:  # one node, at most UNROLL ranks: every rank's partial loaded without a branch
                for d in tl.static_range(UNROLL):  # rank order, as the reference adds; a missing one adds +0.0
                    there = d < ranks
                    place = tl.load(tok_pos_ptr + t * ranks + d, mask=there, other=-1)
                    if LOW_LATENCY:
                        start = d * M
                    at = (start + tl.maximum(place, 0)).to(tl.int64) * H
                    wanted = place >= 0
                    if OWN:
                        wanted = wanted & (d != me)
                    values = tl.load(ready + at + offs, mask=(offs < H) & wanted, other=0.0)
                    if OWN:
                        acc += tl.where(d == me, own, values.to(tl.float32))
                    else:
                        acc += values.to(tl.float32)
                    if not LOW_LATENCY:
                        start += tl.load(row_ptr + d, mask=there, other=0)
            else:
                for d in range(0, ranks):  # rank order, as the reference adds
                    place = tl.load(tok_pos_ptr + t * ranks + d)
                    if LOW_LATENCY:
                        start = d * M
                    if place >= 0:
                        landed = ready
                        if NODES > 1:
                            if d // LOCAL != node:
                                landed = dl.consume_token(partials, dl.signal_wait(signals + start + place, epoch))
                        if OWN:
                            if d == me:
                                values = own
                            else:
                                values = tl.load(landed + (start + place).to(tl.int64) * H + offs, mask=offs < H)
                                values = values.to(tl.float32)
                        else:
                            values = tl.load(landed + (start + place).to(tl.int64) * H + offs, mask=offs < H, other=0.0)
                        acc += values.to(tl.float32)
                    if not LOW_LATENCY:
                        start += tl.load(row_ptr + d)  # this rank's tokens sent to d: d's partials come next
            tl.store(out_ptr + tl.cast(t, tl.int64) * H + offs, acc.to(out_ptr.dtype.element_ty), mask=offs < H)
