"""ag_gemm's cuBLAS path (``OverlapConfig(backend="cublas")``) on CPU ranks under the emulation, against torch.

Per world size (2 and 4 ranks, one process each, ``emulated_ranks.run_ranks``) every rank draws every rank's A and
the shared B from one seed, fresh per call, and runs the path: the copy-engine producer as host copies into the
peers' mapped receive slots each followed by its flag write, the own shard's ``torch.mm``, then per chunk of each
peer's shard its wait kernel (interpreted) and ``torch.mm`` of its rows. Four configurations, each on a shard
height of its own (so each has its own plan and buffers): one chunk per shard; two chunks (24 rows: 16 + 8);
three chunks (20 rows: 8 + 8 + 4, the last one shorter); three chunks on the begin barrier's path (no double
buffers, as captured calls run: 36 rows, 16 + 16 + 4). Before each call the receive buffer the call will fill is
poisoned where no peer can be writing it (NaN: a GEMM that read a chunk before it landed fails), and so is every
new tensor the call allocates (its output: a row block left unwritten fails). Three calls per configuration with
different data reuse the plan and the receive slots (both double buffers); the second returns the gathered A too.
The double-buffered configurations flag by ``"memop_parity"`` (the host writes the 1 where the GPU's memory
operation would; each wait resets its flag, so every flag is 0 after a rank's last call) and by ``"kernels"`` (each
peer chunk's flag then holds the call count). ``clear_workspaces()`` then returns every block the calls took to the
symmetric heap. A second run holds one rank's wait until its peer, a call ahead, has set the next call's flag, and
starts each rank late once: ``"memop_parity"``'s reset must keep both from reading a chunk early.

Four more configurations build their plans with ``CUBLAS_WAIT_BESIDE`` (the waits on a waiter stream beside the own
GEMM, which the emulation runs in host order: every wait before the own GEMM): one, two (``"kernels"``) and three
chunks on double buffers, and the barrier path (which keeps its waits in place); the one-call-ahead run is repeated
with it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from emulated_ranks import run_ranks

HEAP = "8M"
CASES = (  # (cuBLAS chunks asked for, rows per shard, the double buffers' flag scheme or None, the chunks' rows,
    # CUBLAS_WAIT_BESIDE when the plan is built)
    (1, 5, "memop_parity", [5], False),
    (2, 24, "kernels", [16, 8], False),
    (3, 20, "memop_parity", [8, 8, 4], False),
    (3, 36, None, [16, 16, 4], False),
    (1, 13, "memop_parity", [13], True),
    (2, 28, "kernels", [16, 12], True),
    (3, 44, "memop_parity", [16, 16, 12], True),
    (2, 40, None, [24, 16], True),
)


def _worker() -> list[str]:
    """This rank's problems (empty: every call matched torch) on the world ``run_ranks`` set up."""
    import triton_dist
    from triton_dist.ops.ag_gemm import op
    from triton_dist.ops.common import resources
    from triton_dist.ops.tuning import OverlapConfig

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    used_before = world.heap.stats()["used"]
    gen = torch.Generator().manual_seed(4321)  # every rank draws every rank's inputs alike
    n, k = 12, 16
    problems: list[str] = []
    real_empty = torch.empty

    def poisoned_empty(*args: object, **kwargs: object) -> torch.Tensor:
        tensor = real_empty(*args, **kwargs)  # type: ignore[call-overload]
        return tensor.fill_(float("nan")) if tensor.is_floating_point() else tensor

    for chunks, m_local, scheme, chunk_rows, beside in CASES:
        double_buffers = scheme is not None
        case = f"{chunks} chunks, {m_local} rows, {scheme or 'begin barrier'}{', waits beside' if beside else ''}"
        config = OverlapConfig(backend="cublas", cublas_chunks=chunks)
        op.CUBLAS_DOUBLE_BUFFER = double_buffers  # read when the plan is built (this shape's first call)
        op.DOUBLE_BUFFER_FLAGS = scheme or "auto"  # read when the double buffers are made (the same)
        op.CUBLAS_WAIT_BESIDE = beside  # read when the plan is built
        try:
            for call in range(3):
                a_s = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
                b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
                if call:  # the first call built the plan
                    plan = op.plan_for(a_s[rank], b, config)
                    assert isinstance(plan, op.CublasPlan)
                    if plan.double is None:  # this rank's slots are free until it passes the next barrier
                        plan.workspace.recv.fill_(float("nan"))
                    else:  # the buffer after this call's: no peer writes it before this call's flags are set
                        plan.double.recv[(plan.double.calls + 1) % 2].fill_(float("nan"))
                torch.empty = poisoned_empty  # type: ignore[assignment]
                try:
                    c, gathered = op.ag_gemm_impl(a_s[rank], b, return_gathered=call == 1, config=config)
                finally:
                    torch.empty = real_empty  # type: ignore[assignment]
                want = torch.cat(a_s)
                if c.shape != (size * m_local, n) or c.dtype != torch.bfloat16:
                    problems.append(f"{case}, call {call}: C is {list(c.shape)} {c.dtype}")
                elif torch.isnan(c.float()).any():
                    bad = int(torch.isnan(c.float()).sum())
                    problems.append(f"{case}, call {call}: {bad} NaN elements of C (rows read early or unwritten?)")
                elif not torch.allclose(c.float(), want.float() @ b.float(), atol=0.1, rtol=2e-2):
                    error = (c.float() - want.float() @ b.float()).abs().max()
                    problems.append(f"{case}, call {call}: max error {error:.3g}")
                if call == 1 and (gathered is None or not torch.equal(gathered, want)):
                    problems.append(f"{case}: the gathered A differs from torch.cat of every rank's A")
                if call != 1 and gathered is not None:
                    problems.append(f"{case}: a gathered A returned without return_gathered")
        finally:
            op.CUBLAS_DOUBLE_BUFFER, op.DOUBLE_BUFFER_FLAGS, op.CUBLAS_WAIT_BESIDE = True, "auto", False
        plan = op.plan_for(a_s[rank], b, config)
        arrival = [(rank + s) % size for s in range(1, size)]
        bounds = [(sum(chunk_rows[:i]), sum(chunk_rows[: i + 1])) for i in range(len(chunk_rows))]
        expected = [(peer, lo, hi) for lo, hi in bounds for peer in arrival]  # chunk by chunk, arrival order
        if not isinstance(plan, op.CublasPlan):
            problems.append(f"{case}: the plan is a {type(plan).__name__}")
        elif [(chunk.segment, chunk.lo, chunk.hi) for chunk in plan.peer_chunks] != expected:
            problems.append(f"{case}: chunks waited for {plan.peer_chunks}, expected {expected}")
        elif plan.chunks != len(chunk_rows) or op.path_name(plan) != ("cublas" if chunks == 1 else f"cublas/{chunks}"):
            problems.append(f"{case}: the plan has {plan.chunks} chunks per shard, path {op.path_name(plan)}")
        elif (plan.double is None) == double_buffers:
            problems.append(f"{case}: the plan's double receive buffers are {plan.double}")
        elif plan.wait_beside != beside:
            problems.append(f"{case}: the plan's wait_beside is {plan.wait_beside}")
        elif plan.double is not None:
            problems += _flag_problems(case, plan, scheme)
        del plan
    op.clear_workspaces()  # every ag_gemm buffer goes, the double receive buffers too
    left = resources.workspaces("ag_gemm") + resources.workspaces("ag_gemm.double")
    if left or world.heap.stats()["used"] != used_before:
        problems.append(f"clear_workspaces() left {len(left)} workspaces, {world.heap.stats()['used'] - used_before} B")
    return problems


def _flag_problems(case: str, plan: Any, scheme: str | None) -> list[str]:
    """What is wrong with this rank's double-buffer flags once its calls are done (their waits ran here, in order):
    ``"memop_parity"``, every flag reset to 0 (each call's wait resets what the peer's write of that call set);
    ``"kernels"``, each peer chunk's flag in row 0 holds the last call's send epoch (the call count), row 1 unused."""
    from triton_dist.ops.ag_gemm import op

    flags, calls, world = plan.double.flags, plan.double.calls, plan.rows // plan.m_local
    if plan.double.flags_by != scheme:
        return [f"{case}: the double buffers flag by {plan.double.flags_by}, asked {scheme}"]
    if scheme == "memop_parity":
        left = flags.nonzero().tolist()
        return [f"{case}: flags left set after the last call (parity, index): {left}"] if left else []
    expected = torch.zeros_like(flags)
    for chunk in plan.peer_chunks:
        expected[0, op.cublas_flag_index(chunk.segment, chunk.lo // op.cublas_chunk_rows(plan.m_local, plan.chunks),
                                         world)] = calls  # fmt: skip
    return [] if torch.equal(flags, expected) else [f"{case}: flags {flags.tolist()}, expected {expected.tolist()}"]


@pytest.mark.parametrize("ranks", [2, 4])
def test_cublas_path_matches_torch_on_emulated_ranks(ranks: int) -> None:
    results = run_ranks(_worker, ranks, heap_size=HEAP).results
    failed = {rank: problems for rank, problems in enumerate(results) if problems}
    assert not failed, failed


def test_cublas_chunks_are_whole_rows_multiples_of_8_and_never_empty() -> None:
    from triton_dist.ops.ag_gemm import op
    from triton_dist.ops.tuning import OverlapConfig
    from triton_dist.ops.tuning.overlap import MAX_CUBLAS_CHUNKS

    for m_local in (1, 5, 8, 20, 24, 64, 100, 512, 1000):
        for chunks in range(1, MAX_CUBLAS_CHUNKS + 1):
            rows = op.cublas_chunk_rows(m_local, chunks)
            count = -(-m_local // rows)
            last = m_local - (count - 1) * rows
            assert rows % 8 == 0 and 1 <= count <= chunks and 0 < last <= rows, (m_local, chunks, rows)
            assert chunks > 1 or count == 1, "one chunk asked: the whole shard"
    assert [op.cublas_flag_index(s, c, 4) for c in range(2) for s in range(4)] == list(range(8))
    assert OverlapConfig(backend="cublas", cublas_chunks=2).short() == "cublas-ce/2"
    with pytest.raises(ValueError, match="backend='cublas' only"):
        OverlapConfig(cublas_chunks=2)
    with pytest.raises(ValueError, match=r"cublas_chunks must be in \[1, 16\]"):
        OverlapConfig(backend="cublas", cublas_chunks=0)


AHEAD_CALLS = 7
"""Calls of the one-call-ahead run: each parity's flags are set and reset three times or more."""
HELD_CALL = {0: 2, 1: 3}
"""Per rank, the call whose first wait it holds until the peer has set its flag of the next call."""
LATE_CALL = {0: 5, 1: 4}
"""Per rank, the call it starts late (a host sleep first): the peer then waits on flags its previous call of that
parity set and reset, and reads the buffer it poisoned, unless the reset works."""


class _HeldWait:
    """A wait kernel's launch that, in call ``held_call``, first waits on the host until the peer has set this rank's
    ``flag`` of the next call (the other parity's row), appending the call to ``held`` once it has."""

    def __init__(self, launch: Any, double: Any, flag: int, held_call: int, held: list[int]) -> None:
        self.launch, self.double, self.flag, self.held_call, self.held = launch, double, flag, held_call, held

    def launch_on(self, stream: int, *leading: Any) -> None:
        import time

        current = self.double.calls - 1  # the host counted this call at its start
        if current == self.held_call:
            deadline = time.monotonic() + 60.0
            while int(self.double.flags[(current + 1) % 2, self.flag]) != 1 and time.monotonic() < deadline:
                time.sleep(0.001)
            if int(self.double.flags[(current + 1) % 2, self.flag]) == 1:
                self.held.append(current)
        self.launch.launch_on(stream, *leading)


def _ahead_worker(wait_beside: bool = False) -> list[str]:
    """This rank's problems (empty: all as it should be) with ``"memop_parity"`` flags, two chunks per shard, over
    ``AHEAD_CALLS`` calls: in ``HELD_CALL`` this rank holds its first wait (on the host) until its peer, one call
    ahead, has set this rank's flag of the next call (the other parity's), then waits for this call's flag, resets
    it and reads this call's buffer; in ``LATE_CALL`` it starts late. Every call matches torch, and once this rank's
    calls are done every flag on it is 0 again. ``wait_beside``: the plan built with ``CUBLAS_WAIT_BESIDE`` (every
    wait, the held one included, before the own GEMM)."""
    import time

    import triton_dist
    from triton_dist.ops.ag_gemm import op
    from triton_dist.ops.tuning import OverlapConfig

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    peer = 1 - rank
    gen = torch.Generator().manual_seed(99)
    m_local, n, k = 24, 12, 16
    config = OverlapConfig(backend="cublas", cublas_chunks=2)
    op.DOUBLE_BUFFER_FLAGS = "memop_parity"
    op.CUBLAS_WAIT_BESIDE = wait_beside
    problems: list[str] = []
    held: list[int] = []
    plan: Any = None
    try:
        for call in range(AHEAD_CALLS):
            a_s = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
            b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
            if call == 1:  # the first call built the plan: hold its first wait in HELD_CALL
                plan = op.plan_for(a_s[rank], b, config)
                assert isinstance(plan, op.CublasPlan) and plan.double is not None
                first = plan.double_waits[0]
                held_wait = _HeldWait(first[2], plan.double, first[1], HELD_CALL[rank], held)
                plan.double_waits = ((first[0], first[1], held_wait, first[3]), *plan.double_waits[1:])
            if plan is not None:  # the buffer after this call's: no peer writes it before this call's flags
                plan.double.recv[(plan.double.calls + 1) % 2].fill_(float("nan"))
            if call == LATE_CALL[rank]:
                time.sleep(0.3)
            c, _ = op.ag_gemm_impl(a_s[rank], b, config=config)
            want = torch.cat(a_s).float() @ b.float()
            if torch.isnan(c.float()).any() or not torch.allclose(c.float(), want, atol=0.1, rtol=2e-2):
                problems.append(f"call {call}: C differs from torch (NaN: {int(torch.isnan(c.float()).sum())})")
    finally:
        op.DOUBLE_BUFFER_FLAGS, op.CUBLAS_WAIT_BESIDE = "auto", False
    if plan.wait_beside != wait_beside:
        problems.append(f"the plan's wait_beside is {plan.wait_beside}, asked {wait_beside}")
    assert plan.double_waits[0][1] == op.cublas_flag_index(peer, 0, size), "the first wait is on the peer's chunk 0"
    if held != [HELD_CALL[rank]]:
        problems.append(f"held calls {held}, expected [{HELD_CALL[rank]}]")
    problems += _flag_problems("one call ahead", plan, "memop_parity")
    op.clear_workspaces()
    return problems


@pytest.mark.parametrize("wait_beside", [False, True])
def test_parity_flags_let_a_peer_run_one_call_ahead_on_emulated_ranks(wait_beside: bool) -> None:
    """``"memop_parity"`` (``DoubleBuffer``): a peer's writes of the next call's flags while this rank still waits in
    this call, and a peer that starts late, change nothing; each call's wait resets the flag it saw. The same with
    the waits beside the own GEMM (``CUBLAS_WAIT_BESIDE``)."""
    results = run_ranks(_ahead_worker, 2, wait_beside, heap_size=HEAP).results
    failed = {rank: problems for rank, problems in enumerate(results) if problems}
    assert not failed, failed
