"""The all-reduce kernel of a world across nodes: reduce-scatter within the node by load/store, an all-reduce of each
owned part across nodes with NVSHMEM puts, an all-gather within the node by load/store; one launch, no host
synchronization.

The world is ``NODES`` nodes of ``LOCAL`` ranks each, node ``m`` holding ranks ``[m LOCAL, (m + 1) LOCAL)``
(torchrun's layout). The message's ``n`` elements are cut into ``LOCAL`` parts of ``part`` elements (the last one
shorter or empty): local rank ``j`` of every node owns part ``j``. Program ``c`` handles elements ``[c chunk, (c + 1)
chunk)`` of every part. Program ``c`` of rank ``me = (node, local)``:

1. stores its ``x``'s chunk of part ``j`` into row ``local`` of local rank ``j``'s inbox for every ``j != local``
   (``dl.symm_at`` stores straight from ``x``) and sets its flag there (``dl.notify``);
2. waits for the other local ranks' flags and sums its own part's chunk over its node's ranks, in local-rank order
   (its own values from ``x``), in fp32: the node's partial sum, which it stores (fp32) in row ``node`` of its
   symmetric partials buffer;
3. (``NODES > 1``) puts that row's chunk into the same row of its same-local-rank peer on every other node
   (``dl.put_signal``, setting that peer's signal ``node``), waits for the signal of every other node
   (``dl.signal_wait``) and sums the partials in node order, in fp32: every rank that owns part ``local`` (one per
   node) adds the same fp32 values in the same order, so all get the same bits;
4. rounds the sum to ``x``'s dtype, stores it into ``out`` and into row ``local`` of every other local rank's
   gather buffer, sets its flag there, waits for the other local ranks' flags and copies their rows into ``out``.

The partials cross the network in fp32, so the result is rounded once, as the one-node kernels round it (for 16-bit
inputs this puts twice the bytes of the input's dtype on the network; a rounded partial would add a second rounding).
Each rank sends ``(NODES - 1) / LOCAL`` of the message (in fp32) over the network, every rank's NIC share in
parallel, and ``2 (LOCAL - 1) / LOCAL`` of it over NVLink, as NCCL's hierarchical algorithms move it.

Synchronization, as ``ops/all_gather/kernels.py``: one epoch per launch (``ops/common/call_epoch.arrive``), and every
buffer, flag and signal double-buffered by the epoch's parity; flags and signals only ever take epoch values, so
nothing is reset. The ordering argument: a rank writes only to the ranks of its node and to its same-local-rank peers
on other nodes, and in every launch every program of it waits for a message of each of those (a flag of step 1 from
every local rank, a signal of step 3 from every such peer), which that rank sent in the same launch, so after its
previous launch ended. So when a rank writes parity ``p`` in launch ``k``, each rank it writes to finished launch
``k - 2`` (the last one that used parity ``p``: its reads of those buffers and its waits for those flags), whatever
the sizes or program counts of the calls in between. A flag or signal awaited for epoch ``e`` is rewritten only by a
launch ``>= e + 2`` of its writer, which started after the writer's launch ``e + 1`` waited for the reader's launch
``e + 1``; so "eq" tests never miss a value. Program ``c`` only ever waits for programs ``c`` of other ranks, and the
dependencies are one level deep (no program waits on a rank that waits on it for something later), so there is no
cycle; the grid is at most ``MAX_PROGRAMS`` programs, all resident.

The layout is fixed per workspace, never per call: rows are ``ROW`` bytes apart whatever the call's size and dtype
(``ROW`` elements of the call's dtype / of fp32), so a slow reader's row of one parity is never another call's row of
the other parity.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.call_epoch import arrive


@triton.jit
def _all_reduce_nodes_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    partials_ptr,
    flags_ptr,
    signals_ptr,
    state_ptr,
    n,
    part,
    chunk,
    row,
    row_f32,
    NODES: tl.constexpr,
    LOCAL: tl.constexpr,
    MAX_PROGRAMS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Sum ``x`` (``n`` elements) over every rank into ``out`` (see the module docstring). ``data_ptr``: this rank's
    symmetric buffer in ``x``'s dtype, ``[2 parities][inbox, gather][LOCAL rows][row]``; ``partials_ptr``: fp32
    ``[2 parities][NODES rows][row_f32]``; ``flags_ptr``: int32 ``[2 parities][2 steps][MAX_PROGRAMS][LOCAL]``;
    ``signals_ptr``: int64 ``[2 parities][MAX_PROGRAMS][NODES]``; ``state_ptr``: this rank's int64 call-epoch
    state. ``part``, ``chunk``: the elements of each owned part and of each program's share of a part."""
    c = tl.program_id(0)
    _, epoch = arrive(state_ptr, tl.num_programs(0))
    parity = epoch % 2
    me = dl.rank()
    node = me // LOCAL
    local = me % LOCAL
    lo = c * chunk
    hi = lo + chunk
    inbox = data_ptr + (parity * 2) * LOCAL * row
    gather = inbox + LOCAL * row
    partials = partials_ptr + parity * NODES * row_f32
    scatter_flags = flags_ptr + ((parity * 2) * MAX_PROGRAMS + c) * LOCAL
    gather_flags = flags_ptr + ((parity * 2 + 1) * MAX_PROGRAMS + c) * LOCAL
    signals = signals_ptr + (parity * MAX_PROGRAMS + c) * NODES
    owned = local * part  # the first element of my part
    # 1. Reduce-scatter: my chunk of part j into row `local` of local rank j's inbox, then my flag there.
    for j in range(0, LOCAL):
        if j != local:
            peer = node * LOCAL + j
            for s in range(lo, hi, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = (offs < hi) & (offs < part) & (j * part + offs < n)
                values = tl.load(x_ptr + j * part + offs, mask=mask)
                tl.store(dl.symm_at(inbox + local * row + offs, peer), values, mask=mask)
            dl.notify(scatter_flags + local, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    # 2. My node's partial sum of my part's chunk, in local-rank order, in fp32, into row `node` of my partials.
    before = dl.wait(scatter_flags, local, "sys", "acquire", waitValue=epoch)
    after = dl.wait(scatter_flags + local + 1, LOCAL - 1 - local, "sys", "acquire", waitValue=epoch)
    arrived = dl.consume_token(dl.consume_token(inbox, before), after)
    mine = partials + node * row_f32
    for s in range(lo, hi, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        mask = (offs < hi) & (offs < part) & (owned + offs < n)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, LOCAL):
            if j == local:
                acc += tl.load(x_ptr + owned + offs, mask=mask).to(tl.float32)
            else:
                acc += tl.load(arrived + j * row + offs, mask=mask).to(tl.float32)
        tl.store(mine + offs, acc, mask=mask)
    if NODES > 1:
        # 3. My partial to my same-local-rank peer on every other node (its signal `node`), then theirs here.
        count = tl.maximum(tl.minimum(tl.minimum(hi, part), n - owned) - lo, 0)
        for step in range(1, NODES):
            remote = ((node + step) % NODES) * LOCAL + local
            dl.put_signal(mine + lo, mine + lo, count * 4, signals + node, epoch, remote, sig_op="set")
        for step in range(1, NODES):
            m = (node + step) % NODES
            token = dl.signal_wait(signals + m, epoch, cmp="eq")
            partials = dl.consume_token(partials, token)
    else:  # (one node: only in compile tests; the op runs the one-node kernels) my row, from every thread
        tl.debug_barrier()
    # 4. The sum over nodes in node order (the same bits on every owner of this part), into out and every other local
    #    rank's gather buffer, row `local`.
    for s in range(lo, hi, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        mask = (offs < hi) & (offs < part) & (owned + offs < n)
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for m in range(0, NODES):
            total += tl.load(partials + m * row_f32 + offs, mask=mask)
        reduced = total.to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + owned + offs, reduced, mask=mask)
        for j in range(0, LOCAL):
            if j != local:
                tl.store(dl.symm_at(gather + local * row + offs, node * LOCAL + j), reduced, mask=mask)
    for j in range(0, LOCAL):
        if j != local:
            dl.notify(gather_flags + local, node * LOCAL + j, signal=epoch, sig_op="set", comm_scope="intra_node")
    # 5. The other local ranks' reduced parts into out.
    before = dl.wait(gather_flags, local, "sys", "acquire", waitValue=epoch)
    after = dl.wait(gather_flags + local + 1, LOCAL - 1 - local, "sys", "acquire", waitValue=epoch)
    gathered = dl.consume_token(dl.consume_token(gather, before), after)
    for j in range(0, LOCAL):
        if j != local:
            for s in range(lo, hi, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = (offs < hi) & (offs < part) & (j * part + offs < n)
                tl.store(out_ptr + j * part + offs, tl.load(gathered + j * row + offs, mask=mask), mask=mask)
