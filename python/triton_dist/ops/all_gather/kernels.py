"""The all-gather kernel: load/store within a node, NVSHMEM puts across nodes, one launch, no host synchronization.

The world is ``NODES`` nodes of ``LOCAL`` ranks each, node ``m`` holding ranks ``[m LOCAL, (m + 1) LOCAL)``
(torchrun's layout). Program ``c`` of every rank moves chunk ``c`` of every shard (``chunk`` elements of each rank's
``n``); every rank gathers into its own symmetric buffer, slot ``s`` (``n`` elements at ``s n``) holding rank ``s``'s
shard, and copies the buffer to ``out`` at the end. Program ``c`` of rank ``me = (node, local)``:

1. stages its chunk of ``x`` into slot ``me`` of its own buffer (the source of the puts must be symmetric memory
   for NVSHMEM's network transports);
2. pushes it into slot ``me`` of every other rank of its node (``dl.symm_at`` stores) and sets flag ``me`` there;
3. (``NODES > 1``) puts it into slot ``me`` of its same-local-rank peer on every other node (``dl.put_signal``,
   setting that peer's signal ``node``);
4. (``NODES > 1``) for every other node ``m``: waits for the signal of ``(m, local)``'s put (``dl.signal_wait``),
   then forwards that chunk, now in its own buffer, into the same slot of every other rank of its node and sets
   flag ``(m, local)`` there;
5. waits for the flags of every rank whose local rank is not its own (pushed by its node's ranks, or forwarded by
   them), and copies chunk ``c`` of every slot to ``out``.

Why this scheme: each shard crosses the network once per remote node (``NODES - 1`` puts of ``n`` elements per
rank, every rank's NIC share in parallel, as NCCL's hierarchical rings move it), and everything else moves over
NVLink by load/store; the alternative of one rank per node pair moving the whole node's data funnels ``LOCAL``
times the bytes through one rank and needs an extra gather before the put. Putting straight to every remote rank
(no forwarding) would be simpler still, but sends ``LOCAL`` times the bytes over the network. The dependencies are
one level deep (a put is awaited by its forwarder, a push or forward by its receiver), and program ``c`` only ever
waits for programs ``c`` of other ranks, so there is no cycle.

Synchronization: one epoch per launch (``ops/common/call_epoch.arrive``: a device-side counter, so CUDA-graph
replays advance it as eager calls do), and everything (buffer, flags, signals) is double-buffered by the epoch's
parity. Flags and signals only ever take epoch values, so nothing is reset. The ordering argument: a rank starts
launch ``k`` after its launch ``k - 1`` ended, and every program of ``k - 1`` waited for every rank's chunk of
``k - 1`` (directly, or through a forwarder that waited for it), which that rank sent after its launch ``k - 2``
ended. So when any rank writes parity ``p`` in launch ``k``, every rank is done with launch ``k - 2``, the last one
that used parity ``p``, whatever the sizes or program counts of the calls in between. A flag (signal) of parity ``p``
awaited for epoch ``e`` cannot move past ``e`` before its reader saw it: the next write of it comes from a launch
``>= k + 2``, whose writer finished launch ``k + 1``, which needed the reader's launch ``k + 1`` to have started.
So "eq" tests never miss a value.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.call_epoch import arrive


@triton.jit
def _copy(src, dst, lo, hi, n, peer, REMOTE: tl.constexpr, BLOCK: tl.constexpr):
    """Copy elements ``[lo, min(hi, n))`` of ``src`` to the same offsets of ``dst`` (of ``dst`` on rank ``peer``
    when ``REMOTE``), in blocks of ``BLOCK``. The offsets and both bounds of the mask come straight from ``lo`` (a
    program's first element), ``hi`` and ``n``, so where the host made them multiples of 16 elements the accesses
    vectorize (a mask from ``min(hi, n) - lo`` would hide that)."""
    for s in range(lo, hi, BLOCK):
        offs = s + tl.arange(0, BLOCK)
        mask = (offs < hi) & (offs < n)
        values = tl.load(src + offs, mask=mask)
        if REMOTE:
            tl.store(dl.symm_at(dst + offs, peer), values, mask=mask)
        else:
            tl.store(dst + offs, values, mask=mask)


@triton.jit
def _all_gather_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    signals_ptr,
    state_ptr,
    n,
    chunk,
    half,
    ELEM_BYTES: tl.constexpr,
    NODES: tl.constexpr,
    LOCAL: tl.constexpr,
    MAX_PROGRAMS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Gather every rank's ``n``-element shard ``x`` into ``out`` (see the module docstring). ``data_ptr``: this
    rank's symmetric buffer, two halves of ``half`` elements (one per parity, ``NODES * LOCAL`` slots of ``n`` in
    each); ``flags_ptr``: int32 ``[2][MAX_PROGRAMS][LOCAL * NODES]``, flag of rank ``(m, j)`` at ``j * NODES + m``;
    ``signals_ptr``: int64 ``[2][MAX_PROGRAMS][NODES]``; ``state_ptr``: this rank's int64 call-epoch state."""
    c = tl.program_id(0)
    _, epoch = arrive(state_ptr, tl.num_programs(0))
    parity = epoch % 2
    me = dl.rank()
    node = me // LOCAL
    local = me % LOCAL
    lo = c * chunk
    hi = lo + chunk
    count = tl.maximum(tl.minimum(chunk, n - lo), 0)
    buf = data_ptr + parity * half
    flags = flags_ptr + (parity * MAX_PROGRAMS + c) * (LOCAL * NODES)
    signals = signals_ptr + (parity * MAX_PROGRAMS + c) * NODES
    mine = buf + me * n  # my slot (my shard) in my buffer
    # 1. Stage my chunk in my own slot.
    _copy(x_ptr, mine, lo, hi, n, me, False, BLOCK)
    # 2. Push it into my slot on every other rank of my node, and set my flag there.
    for j in range(0, LOCAL):
        if j != local:
            peer = node * LOCAL + j
            _copy(x_ptr, mine, lo, hi, n, peer, True, BLOCK)
            dl.notify(flags + local * NODES + node, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    if NODES > 1:
        # 3. Put it into my slot on my same-local-rank peer of every other node, setting its signal `node`.
        for step in range(1, NODES):
            remote = ((node + step) % NODES) * LOCAL + local
            dl.put_signal(mine + lo, mine + lo, count * ELEM_BYTES, signals + node, epoch, remote, sig_op="set")
        # 4. Forward each such put's chunk, once it has landed here, to every other rank of my node.
        for step in range(1, NODES):
            m = (node + step) % NODES
            source = m * LOCAL + local
            token = dl.signal_wait(signals + m, epoch, cmp="eq")
            landed = dl.consume_token(buf, token) + source * n
            for j in range(0, LOCAL):
                if j != local:
                    peer = node * LOCAL + j
                    _copy(landed, buf + source * n, lo, hi, n, peer, True, BLOCK)
                    dl.notify(flags + local * NODES + m, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    # 5. Wait for the ranks of the other local ranks (flags [0, local NODES) and [(local + 1) NODES, LOCAL NODES)),
    #    then copy every slot's chunk out.
    before = dl.wait(flags, local * NODES, "sys", "acquire", waitValue=epoch)
    after = dl.wait(flags + (local + 1) * NODES, (LOCAL - 1 - local) * NODES, "sys", "acquire", waitValue=epoch)
    gathered = dl.consume_token(dl.consume_token(buf, before), after)
    for s in range(0, LOCAL * NODES):
        _copy(gathered + s * n, out_ptr + s * n, lo, hi, n, me, False, BLOCK)
