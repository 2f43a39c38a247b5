"""Distributed kernels on CPUs: ``TRITON_INTERPRET=1``, one process per rank on gloo, ``init(device="cpu")``.

On N ranks (``emulated_ranks.run_ranks``; the tests below run it at 2 and 3 ranks), ``_worker`` runs the kernels
here through the emulation (``triton_dist.runtime.emulation``) and returns what it saw, then runs the examples
(``run_examples``); the tests check each rank's record and the output. One run per world size covers every case, so
the processes start once (starting torch and Triton is most of the time, and CI has 2 cores).

Cases (each a kernel written only against the documented API, docs/language.md):

- ``ring``: a ring all-gather, one flag per step: rank r forwards at step s the chunk it received at step s-1
  (waiting for that step's flag, then ``consume_token``). Right at 2 and 3 ranks, over two epochs.
- ``identity``: ``dl.rank()`` / ``dl.num_ranks()`` stored by every program of a 2-D grid.
- ``axes``: ``dl.rank(axis=...)`` / ``dl.num_ranks(axis=...)`` for ``"world"``, ``-1``, ``"local"``, ``"node"`` on
  the world's layout (one node), then on a fake layout of one rank per node set on the world after ``init`` (the
  emulation reads the layout at each launch, as the runtime writes it into the device context).
- ``tensors``: one ``notify`` to a tensor of ranks (``tl.arange`` rounded up to a power of two, ``mask`` cutting
  the extra lanes) with ``sig_op="add"``, a ``wait`` on ``num_ranks()`` flags with ``cmp="ge"``, an integer
  ``consume_token``; then a ``notify`` of a tensor of flags on one rank with a tensor ``signal``.
- ``intra_rank``: program 0 waits for a flag that program 1 of the same rank sets (Triton's interpreter, one
  program after the other, would never get to program 1).
- ``timeout``: a wait on a flag no peer sets, with a 0.3 s watchdog: ``triton_dist.WaitTimeoutError`` naming the
  rank, the kernel and the flag.
- ``symm_at_outside`` / ``lanes_outside`` / ``notify_outside`` / ``wait_outside``: pointers outside the heap (an
  ordinary tensor): an error naming the primitive, the rank and the offset; a tensor of pointers whose lanes
  outside the heap (before its start) are masked off works.
- ``before_init``: a launch before ``triton_dist.init(device="cpu")``: an error that says to call it.
- ``plain``: a kernel without primitives runs as Triton's interpreter runs it.
- the examples (ping-pong, push and pull all-gathers) with their CPU branch: their checks pass.
- ``hb_ring`` / ``hb_racy_ring``: with ``TRITON_DIST_EMULATE_VISIBILITY=happens-before``, the ring is still right;
  the ring with its flag set before its stores and no wait reads stale data at 3 ranks, the same in every call.
"""

from __future__ import annotations

import gc
import os
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from emulated_ranks import run_ranks

import triton_dist.language as dl

REPO = Path(__file__).resolve().parents[2]
HEAP = "8M"
"""Each rank's CPU heap in the worker: room for the examples' 1 MiB all-gathers."""
EXAMPLES = ("ping_pong.py", "allgather_push.py", "allgather_pull.py")


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}ranks")
def records(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    ranks = request.param
    examples = [str(REPO / "examples" / name) for name in EXAMPLES]
    run = run_ranks(_worker, ranks, examples, process_group=False)  # the worker starts its group after a case
    return [{**record, "output": run.output} for record in run.results]


def test_the_examples_pass(records: list[dict[str, Any]]) -> None:
    """``TRITON_INTERPRET=1 torchrun --nproc-per-node=N examples/<each>.py``, N = 2 and 3 (see ``run_examples``)."""
    output, ranks = records[0]["output"], len(records)
    for name in EXAMPLES:
        assert output.count(f"EXAMPLE {name} exit 0") == ranks, output[-4000:]
    assert re.search(r"PASS every round trip completed: flags \[(\d+), (\d+)\], expected \[\1, \2\]", output)
    for variant in ("allgather_push", "allgather_pull"):
        assert output.count(f"PASS {variant} 1 MiB matches gloo (3 rounds, poisoned output)") == ranks, output[-4000:]
    assert " FAIL " not in output


def test_a_ring_all_gather_with_per_step_flags_gathers_every_shard(records: list[dict[str, Any]]) -> None:
    for rank, record in enumerate(records):
        assert record["ring"] == record["ring_expected"], f"rank {rank}"


def test_the_ring_gathers_in_the_stale_read_mode(records: list[dict[str, Any]]) -> None:
    world = len(records)
    for rank, record in enumerate(records):
        assert record["hb_ring"] == [[100.0 * r + epoch for r in range(world)] for epoch in (3, 4)], f"rank {rank}"


def test_the_racy_ring_reads_stale_data_in_the_stale_read_mode(records: list[dict[str, Any]]) -> None:
    """Flag before the stores, no wait: at 3 ranks, rank r forwards chunk r-1 at step 1 without having received it,
    so every rank ends with chunk r+1 as it was before the launch (-1), in every call. At 2 ranks nothing is
    forwarded, and the racy ring is right."""
    world = len(records)
    for rank, record in enumerate(records):
        expected = [[100.0 * r + epoch for r in range(world)] for epoch in (3, 4)]
        if world == 3:
            for row in expected:
                row[(rank + 1) % world] = -1.0
        assert record["hb_racy_ring"] == expected, f"rank {rank}"


def test_rank_and_num_ranks_come_from_the_world(records: list[dict[str, Any]]) -> None:
    world = len(records)
    for rank, record in enumerate(records):
        assert record["identity"] == [[rank, world]] * 6, f"rank {rank}"


def _axes(rank: int, world: int, local_rank: int, per_node: int) -> list[int]:
    return [rank, world, rank, world, local_rank, per_node, rank // per_node, world // per_node]


def test_every_rank_axis_reads_the_world_layout(records: list[dict[str, Any]]) -> None:
    world = len(records)
    for rank, record in enumerate(records):
        assert record["axes"]["one_node"] == _axes(rank, world, rank, world), f"rank {rank}"
        assert record["axes"]["node_per_rank"] == _axes(rank, world, 0, 1), f"rank {rank}"


def test_tensors_of_ranks_masks_counters_and_flag_tensors(records: list[dict[str, Any]]) -> None:
    world = len(records)
    for rank, record in enumerate(records):
        # Every rank added 1 to flag [r] of every rank: each flag counts the ranks; the masked lanes wrote nothing.
        assert record["tensors"]["counters"] == [1] * world + [0] * (4 - world), f"rank {rank}"
        assert record["tensors"]["consumed"] == 7 + rank
        # The previous rank set this rank's flags 4..7 to (its rank + 1) * 10 + lane.
        previous = (rank - 1) % world
        assert record["tensors"]["flags"] == [(previous + 1) * 10 + lane for lane in range(4)], f"rank {rank}"


def test_programs_of_one_launch_run_concurrently(records: list[dict[str, Any]]) -> None:
    for record in records:
        assert record["intra_rank"] == [41, 41]


def test_a_wait_no_peer_satisfies_raises_wait_timeout_error_naming_rank_and_flag(
    records: list[dict[str, Any]],
) -> None:
    for rank, record in enumerate(records):
        kind, message, fields = record["timeout"]
        assert kind == "WaitTimeoutError"
        assert f"dl.wait timed out on rank {rank} in kernel 'stuck'" in message
        assert "flag 2 of the awaited flags (i32 at heap offset" in message
        assert "never satisfied flag == 5" in message and "the last value seen was 0" in message
        assert fields == {"rank": rank, "flag_index": 2, "expected": 5, "last_seen": 0, "program_id": 0}


def test_pointers_outside_the_heap_name_the_primitive_rank_and_offset(records: list[dict[str, Any]]) -> None:
    for rank, record in enumerate(records):
        for case, primitive in (
            ("symm_at_outside", "dl.symm_at"),
            ("notify_outside", "dl.notify"),
            ("wait_outside", "dl.wait"),
            ("lanes_outside", "dl.symm_at"),
        ):
            kind, message = record[case]
            assert kind == "EmulationError", (case, kind, message)
            assert f"{primitive} on rank {rank}, kernel" in message, (case, message)
            assert "heap offset" in message and "outside" in message, (case, message)
        assert record["lanes_masked_off"] == record["lanes_expected"], f"rank {rank}"


def test_a_launch_before_init_says_to_call_init_cpu(records: list[dict[str, Any]]) -> None:
    kind, message = records[0]["before_init"]
    assert kind == "EmulationError"
    assert "kernel 'identity' calls triton_dist primitives" in message
    assert "triton_dist.init(device='cpu')" in message


def test_kernels_without_primitives_run_as_in_triton(records: list[dict[str, Any]]) -> None:
    for record in records:
        assert record["plain"] == [0, 2, 4, 6]


# --- the worker (run on every rank) ----------------------------------------------------------------------------------


@triton.jit
def identity(out_ptr):
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    tl.store(out_ptr + 2 * pid, dl.rank())
    tl.store(out_ptr + 2 * pid + 1, dl.num_ranks())


@triton.jit
def rank_axes(out_ptr):
    tl.store(out_ptr + 0, dl.rank())
    tl.store(out_ptr + 1, dl.num_ranks())
    tl.store(out_ptr + 2, dl.rank(-1))
    tl.store(out_ptr + 3, dl.num_ranks(axis=-1))
    tl.store(out_ptr + 4, dl.rank(axis="local"))
    tl.store(out_ptr + 5, dl.num_ranks(axis="local"))
    tl.store(out_ptr + 6, dl.rank(axis="node"))
    tl.store(out_ptr + 7, dl.num_ranks("node"))


@triton.jit(do_not_specialize=["epoch"])
def ring(out_ptr, flags_ptr, epoch, N: tl.constexpr):
    me = dl.rank()
    world = dl.num_ranks()
    successor = (me + 1) % world
    offsets = tl.arange(0, N)
    for step in range(0, world - 1):
        chunk = (me - step + world) % world
        src = out_ptr
        if step > 0:  # the chunk forwarded now arrived at the previous step
            token = dl.wait(flags_ptr + step - 1, 1, "sys", "acquire", waitValue=epoch)
            src = dl.consume_token(out_ptr, token)
        values = tl.load(src + chunk * N + offsets)
        tl.store(dl.symm_at(out_ptr + chunk * N + offsets, successor), values)
        dl.notify(flags_ptr + step, successor, signal=epoch, comm_scope="intra_node")
    dl.wait(flags_ptr + world - 2, 1, "sys", "acquire", waitValue=epoch)


@triton.jit(do_not_specialize=["epoch"])
def racy_ring(out_ptr, flags_ptr, epoch, N: tl.constexpr):
    """``ring`` with its flag set before its stores and no wait: it forwards chunks it may not have received."""
    me = dl.rank()
    world = dl.num_ranks()
    successor = (me + 1) % world
    offsets = tl.arange(0, N)
    for step in range(0, world - 1):
        chunk = (me - step + world) % world
        dl.notify(flags_ptr + step, successor, signal=epoch, comm_scope="intra_node")
        values = tl.load(out_ptr + chunk * N + offsets)
        tl.store(dl.symm_at(out_ptr + chunk * N + offsets, successor), values)


@triton.jit
def tensors(counters_ptr, flags_ptr, out_ptr, WORLD_POW2: tl.constexpr):
    ranks = tl.arange(0, WORLD_POW2)
    dl.notify(counters_ptr + dl.rank(), ranks, signal=1, sig_op="add", mask=ranks < dl.num_ranks())
    token = dl.wait(counters_ptr, dl.num_ranks(), "sys", "acquire", waitValue=1, cmp="ge")
    tl.store(out_ptr, dl.consume_token(7 + dl.rank(), token))
    lanes = tl.arange(0, 4)
    successor = (dl.rank() + 1) % dl.num_ranks()
    dl.notify(flags_ptr + 4 + lanes, successor, signal=(dl.rank() + 1) * 10 + lanes)
    dl.wait(flags_ptr + 4, 4, "sys", "acquire", waitValue=10, cmp="ge")


@triton.jit
def intra_rank(flags_ptr, out_ptr):
    if tl.program_id(0) == 0:
        token = dl.wait(flags_ptr, 1, "gpu", "acquire", waitValue=1)
        tl.store(out_ptr, tl.load(dl.consume_token(out_ptr + 1, token)))
    else:
        tl.store(out_ptr + 1, 41)
        dl.notify(flags_ptr, dl.rank(), signal=1, comm_scope="gpu")


@triton.jit
def stuck(flags_ptr):
    dl.wait(flags_ptr, 4, "sys", "acquire", waitValue=5)


@triton.jit
def pull(x_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(dl.symm_at(x_ptr + offsets, 0)))


@triton.jit
def pull_masked(x_ptr, out_ptr, shift, N: tl.constexpr):
    offsets = tl.arange(0, N)
    mask = offsets >= 8  # lanes 0..7 point before the heap
    tl.store(out_ptr + offsets, tl.load(dl.symm_at(x_ptr + offsets - shift, 0), mask=mask, other=-1))


@triton.jit
def symm_scalar(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(dl.symm_at(x_ptr, 0)))


@triton.jit
def notify_outside(flag_ptr):
    dl.notify(flag_ptr, 0)


@triton.jit
def wait_outside(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire")


@triton.jit
def plain(x_ptr):
    offsets = tl.arange(0, 4)
    tl.store(x_ptr + offsets, offsets * 2)


def _worker(examples: list[str]) -> dict[str, Any]:  # noqa: PLR0915 (one case after the other, in one process)
    """One rank's record of every case (it sets up its own world: ``before_init`` comes first), after which it runs
    the examples."""
    import torch.distributed as dist

    import triton_dist
    import triton_dist.runtime  # noqa: F401 (registers the emulation, as triton_dist.init would)

    record: dict[str, Any] = {}

    def outcome(launch: Any) -> list[Any]:
        try:
            launch()
        except Exception as error:  # noqa: BLE001 (recorded for the test)
            return [type(error).__name__, str(error)]
        return ["no error", ""]

    record["before_init"] = outcome(lambda: identity[(1,)](torch.zeros(2, dtype=torch.int32)))

    dist.init_process_group("gloo")
    world = triton_dist.init(heap_size=HEAP, device="cpu")
    rank, size = world.rank, world.world_size

    out = triton_dist.zeros(12, dtype=torch.int32)
    identity[(3, 2)](out)
    record["identity"] = out.view(6, 2).tolist()

    from triton_dist.runtime.world.topology import NodeLayout

    axes: dict[str, list[int]] = {}
    own_layout = world.layout
    for name, layout in (("one_node", own_layout), ("node_per_rank", NodeLayout(tuple((r,) for r in range(size))))):
        world.layout = layout
        axes_out = torch.full((8,), -7, dtype=torch.int32)  # poisoned: every slot must be written
        rank_axes[(1,)](axes_out)
        axes[name] = axes_out.tolist()
    world.layout = own_layout  # back to the world's one node for the other cases
    record["axes"] = axes

    n = 16
    gathered = triton_dist.zeros(size * n, dtype=torch.float32)
    flags = triton_dist.zeros(size, dtype=torch.int32)
    for epoch in (1, 2):
        gathered.zero_()
        gathered[rank * n : (rank + 1) * n] = torch.arange(n, dtype=torch.float32) + 100 * rank + epoch
        triton_dist.barrier()
        ring[(1,)](gathered, flags, epoch, N=n)
        triton_dist.barrier()
    record["ring"] = gathered.tolist()
    record["ring_expected"] = [float(i + 100 * r + 2) for r in range(size) for i in range(n)]

    counters = triton_dist.zeros(4, dtype=torch.int32)
    tensor_flags = triton_dist.zeros(8, dtype=torch.int32)
    consumed = torch.zeros(1, dtype=torch.int32)
    triton_dist.barrier()
    tensors[(1,)](counters, tensor_flags, consumed, WORLD_POW2=4)
    triton_dist.barrier()
    record["tensors"] = {
        "counters": counters.tolist(),
        "consumed": int(consumed.item()),
        "flags": tensor_flags[4:].tolist(),
    }

    local_flags = triton_dist.zeros(1, dtype=torch.int32)
    local_out = torch.zeros(2, dtype=torch.int32)
    intra_rank[(2,)](local_flags, local_out)
    record["intra_rank"] = local_out.tolist()

    stuck_flags = triton_dist.zeros(4, dtype=torch.int32)
    stuck_flags[:2] = 5
    triton_dist.init(heap_size=HEAP, device="cpu", wait_timeout_s=0.3)
    try:
        stuck[(1,)](stuck_flags)
        record["timeout"] = ["no error", "", {}]
    except triton_dist.WaitTimeoutError as error:
        fields = {name: getattr(error.record, name) for name in ("rank", "flag_index", "expected", "last_seen")}
        record["timeout"] = [type(error).__name__, str(error), {**fields, "program_id": error.record.program_id}]
    triton_dist.init(heap_size=HEAP, device="cpu", wait_timeout_s=120)
    triton_dist.barrier()

    outside = torch.arange(8, dtype=torch.float32)  # an ordinary tensor: not on the heap
    result = torch.zeros(8, dtype=torch.float32)
    record["symm_at_outside"] = outcome(lambda: symm_scalar[(1,)](outside, result))
    record["lanes_outside"] = outcome(lambda: pull[(1,)](outside, result, N=8))
    record["notify_outside"] = outcome(lambda: notify_outside[(1,)](torch.zeros(1, dtype=torch.int32)))
    record["wait_outside"] = outcome(lambda: wait_outside[(1,)](torch.zeros(1, dtype=torch.int32)))
    # A 16-lane block whose first 8 lanes lie before the heap's start: masked off, they are never touched.
    shift = world.heap.offset_of(out) // 4 + 8
    masked = torch.full((16,), -7, dtype=torch.int32)
    pull_masked[(1,)](out, masked, shift, N=16)
    record["lanes_masked_off"] = masked.tolist()
    record["lanes_expected"] = [-1] * 8 + world.heap.mapping.peers[0][:32].view(torch.int32).tolist()

    # The stale-read mode: the ring still gathers; the racy ring forwards what its slot held before the launch.
    os.environ["TRITON_DIST_EMULATE_VISIBILITY"] = "happens-before"
    for kernel, name in ((ring, "hb_ring"), (racy_ring, "hb_racy_ring")):
        results = []
        for epoch in (3, 4):
            gathered.fill_(-1.0)
            gathered[rank * n : (rank + 1) * n] = torch.arange(n, dtype=torch.float32) + 100 * rank + epoch
            triton_dist.barrier()
            kernel[(1,)](gathered, flags, epoch, N=n)
            triton_dist.barrier()
            results.append(gathered.view(size, n)[:, 0].tolist())
        record[name] = results
    del os.environ["TRITON_DIST_EMULATE_VISIBILITY"]

    plain_out = torch.zeros(4, dtype=torch.int32)
    plain[(1,)](plain_out)
    record["plain"] = plain_out.tolist()

    run_examples(examples)
    triton_dist.finalize()  # ends with a barrier: every rank is done with every heap
    return record


def run_examples(scripts: list[str]) -> None:
    """Run each example as ``__main__``, in this process, on the world initialized already.

    Equivalent to ``TRITON_INTERPRET=1 torchrun --nproc-per-node=N examples/<each>.py``, with the processes started
    once for all the cases of this file: ``triton_dist.testing.setup_distributed`` / ``teardown`` are made to keep
    this run's process group and CPU heap (a gloo group cannot be created again in a process under torchrun's
    store; teardown collects garbage, so that every rank's heap is in the same state for the next example).
    Everything else is the example's own code (its ``EMULATED`` branch); a failed check is a non-zero exit."""
    import triton_dist
    import triton_dist.testing as testing

    def setup_once(heap_size: int | str = "1G", timeout_s: float | None = None, *, device: str = "cuda") -> Any:
        assert device == "cpu", f"an example asked for {device} under TRITON_INTERPRET=1"
        return triton_dist.current_world()

    def barrier_only() -> None:
        gc.collect()
        triton_dist.barrier()

    setup, teardown = testing.setup_distributed, testing.teardown
    testing.setup_distributed, testing.teardown = setup_once, barrier_only  # type: ignore[assignment]
    try:
        barrier_only()
        if scripts:
            sys.path.insert(0, str(Path(scripts[0]).parent))  # the examples import allgather_driver
        for script in scripts:
            sys.argv = [script]
            code: Any = 0
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exit_:
                code = exit_.code
            print(f"EXAMPLE {Path(script).name} exit {code}", flush=True)
            if code:
                sys.exit(code)
    finally:
        testing.setup_distributed, testing.teardown = setup, teardown
