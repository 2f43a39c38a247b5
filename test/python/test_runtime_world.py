"""init / finalize / barrier / symmetric tensors across real processes, on the host-only (CPU) heap.

Each test starts a small gloo world (``emulated_ranks.run_ranks``: one process per rank); the ranks' heaps are
shared-memory files mapped by every rank, so peer views cross real process boundaries as they do on GPUs.
"""

import os
import re

import emulated_ranks
import pytest
import torch
import torch.distributed as dist

import triton_dist.runtime as rt
from triton_dist.runtime.context.installer import context_installer
from triton_dist.runtime.heap.allocator import HeapExhaustedError

TIMEOUT_S = 120


def run_ranks(worker, world_size, *args):
    """Run ``worker(rank, world_size, *args)`` on ``world_size`` ranks of a gloo group; fail naming the rank on an
    error, or on a hang after ``TIMEOUT_S``. The ranks see this process's ``TRITON_INTERPRET`` (unset: off) and
    wait watchdog (conftest.py's default), not the emulation's."""
    emulated_ranks.run_ranks(_ranked, world_size, worker, *args, env=inherited_settings(), timeout_s=TIMEOUT_S)


def inherited_settings():
    """``TRITON_INTERPRET`` and ``TRITON_DIST_WAIT_TIMEOUT_S`` as this process has them, for ranks that run as
    spawned copies of it rather than as the emulation's ranks."""
    return {
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "0"),
        "TRITON_DIST_WAIT_TIMEOUT_S": os.environ.get("TRITON_DIST_WAIT_TIMEOUT_S", "0"),
    }


def _ranked(worker, *args):
    worker(dist.get_rank(), dist.get_world_size(), *args)


def test_init_without_a_process_group_says_what_to_do():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match=r"init_process_group\(\.\.\.\) first"):
        rt.init(device="cpu")
    with pytest.raises(RuntimeError, match=r"not initialized: call .*triton_dist.init\(\)"):
        rt.empty(4)
    assert not rt.is_symmetric(torch.zeros(4))


def _lifecycle(rank, world_size):
    world = rt.init(heap_size="1M", device="cpu")
    assert (world.rank, world.world_size) == (rank, world_size)
    assert rt.init(heap_size=1 << 20, device="cpu") is world, "init() with the same arguments is idempotent"
    bases = world.heap.bases
    assert len(set(bases)) == world_size and all(base % 4096 == 0 for base in bases)
    assert not context_installer.has_context, "a CPU heap installs no device context"

    ring = rt.zeros(64, dtype=torch.float32)
    grid = rt.full((3, 4), 7, dtype=torch.int16)
    rt.verify_symmetric(ring, grid)
    assert rt.is_symmetric(ring) and rt.is_symmetric(grid[1:, ::2])
    assert torch.equal(grid, torch.full((3, 4), 7, dtype=torch.int16))

    # Every rank writes into its right neighbour's tensor through the peer view, then reads what its left
    # neighbour wrote into its own.
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    rt.peer_tensor(ring, right).copy_(torch.arange(64, dtype=torch.float32) + 1000 * rank)
    rt.barrier()
    assert torch.equal(ring, torch.arange(64, dtype=torch.float32) + 1000 * left)

    with pytest.raises(ValueError, match=r"scratch must be a symmetric tensor.*outside this rank's symmetric heap"):
        rt.require_symmetric(torch.zeros(3), "scratch")
    with pytest.raises(HeapExhaustedError, match=r"requested 2097152 bytes.*heap_size"):
        rt.empty(1 << 21, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="already initialized"):
        rt.init(heap_size="2M", device="cpu")

    used = rt.heap_stats()["used"]
    del grid
    assert rt.heap_stats()["used"] < used, "a dead tensor's block returns to the heap"

    rt.finalize()
    rt.finalize()
    assert not rt.is_initialized()
    with pytest.raises(RuntimeError, match="not initialized"):
        rt.zeros(1)
    assert ring.sum().item() == sum(range(64)) + 64 * 1000 * left, "local memory outlives finalize()"

    again = rt.init(heap_size="64K", device="cpu")
    assert again is not world and again.heap.heap_size == 64 * 1024
    rt.finalize()


@pytest.mark.parametrize("world_size", [2, 3])
def test_lifecycle_across_processes(world_size):
    run_ranks(_lifecycle, world_size)


def _mismatched_allocation_order(rank, world_size):
    rt.init(heap_size="1M", device="cpu")
    if rank == 0:
        extra = rt.empty(1000, dtype=torch.uint8)  # noqa: F841 (only rank 0 allocates it)
    shared = rt.empty(10, dtype=torch.float32)
    with pytest.raises(RuntimeError, match=r"verify_symmetric failed.*tensors\[0\].*on rank 1"):
        rt.verify_symmetric(shared)
    rt.finalize()


def test_verify_symmetric_catches_different_allocation_orders():
    run_ranks(_mismatched_allocation_order, 2)


def _disagreeing_heap_sizes(rank, world_size):
    with pytest.raises(RuntimeError, match=r"heap_size differs between ranks \(rank 0: 1048576, rank 1: 2097152\)"):
        rt.init(heap_size=(rank + 1) << 20, device="cpu")
    assert not rt.is_initialized()


def test_ranks_disagreeing_on_heap_size_fail_together():
    run_ranks(_disagreeing_heap_sizes, 2)


def _cpu_barrier_on_device_is_refused(rank, world_size):
    rt.init(heap_size="64K", device="cpu")
    with pytest.raises(RuntimeError, match="needs a GPU heap"):
        rt.barrier_on_device()
    rt.finalize()


def test_barrier_on_device_needs_a_gpu_heap():
    run_ranks(_cpu_barrier_on_device_is_refused, 2)


def _ops_call_agreement(rank, world_size):
    from triton_dist.runtime.world.rank_agreement import check_ranks_call_alike

    group = dist.group.WORLD
    wording = dict(op="my_op", fields="(numel, dtype)", disagreement="ranks disagree on the message")
    wording["capture_message"] = "-"
    check_ranks_call_alike(group, rank, (1024, "torch.bfloat16"), **wording)  # every rank alike: no error
    text = ""  # try/except, not pytest.raises: a kept traceback made a spawned rank abort at exit now and then
    try:
        check_ranks_call_alike(group, rank, (1024 + rank, "torch.bfloat16"), **wording)
    except RuntimeError as error:
        text = str(error)
    assert text.startswith("my_op: ranks disagree on the message failed on 2 rank(s)"), text
    assert f"rank {1 - rank} calls my_op with (numel, dtype)=({1024 + 1 - rank}, 'torch.bfloat16')" in text, text


def test_ops_first_call_agreement_fails_on_every_rank_naming_the_difference():
    run_ranks(_ops_call_agreement, 2)


def _oversized_cpu_heap(rank, world_size):
    text = ""
    try:
        rt.init(heap_size=2**62, device="cpu")
    except RuntimeError as error:
        text = str(error)
    assert re.search(r"the CPU heap failed on 2 rank\(s\): rank 0: 2 rank\(s\) x heap_size 4611686018427387904", text)
    assert "free: lower heap_size (or $TRITON_DIST_HEAP_SIZE)" in text, text
    assert not rt.is_initialized()


def test_a_cpu_heap_larger_than_dev_shm_fails_on_every_rank_before_any_file_is_made():
    """heap_size=2**62 used to leave a 4 EiB sparse file in /dev/shm, and 2**40 filled it and killed the process."""
    run_ranks(_oversized_cpu_heap, 2)


def _mapping_fails_on_rank_1(rank, world_size, directory):
    from triton_dist.runtime.heap import shared_file

    real = torch.from_file

    def from_file(path, *args, **kwargs):
        if rank == 1 and not path.endswith("-1"):
            raise RuntimeError("injected: cannot map")
        return real(path, *args, **kwargs)

    torch.from_file = from_file
    text = ""
    try:
        shared_file.map_shared_file_heap(1 << 16, dist.group.WORLD, directory)
    except RuntimeError as error:
        text = str(error)
    assert re.search(r"failed on 1 rank\(s\): rank 1: cannot map rank 0's heap file .*injected: cannot map", text)
    dist.barrier()  # both ranks are past their cleanup
    assert os.listdir(directory) == [], "a failed init leaves no heap file behind"

    torch.from_file = real
    mapping = shared_file.map_shared_file_heap(1 << 16, dist.group.WORLD, directory)
    mapping.peers[(rank + 1) % world_size][rank] = rank + 1
    dist.barrier()
    assert os.listdir(directory) == [], "a successful init unlinks the files too"
    assert mapping.local[(rank - 1) % world_size].item() == (rank - 1) % world_size + 1
    assert int(mapping.local.sum()) == (rank - 1) % world_size + 1, "a fresh heap is zero elsewhere"


def test_cpu_heap_files_are_unlinked_on_every_path(tmp_path):
    run_ranks(_mapping_fails_on_rank_1, 2, str(tmp_path))


def test_space_for_cpu_heaps_is_checked_against_the_file_system(tmp_path):
    from triton_dist.runtime.heap.shared_file import available_bytes, space_problems

    free = available_bytes(str(tmp_path))
    assert space_problems(4096, 2, str(tmp_path)) == []
    (problem,) = space_problems(free, 2, str(tmp_path))
    assert f"2 rank(s) x heap_size {free} bytes = {2 * free} bytes do not fit in {tmp_path}" in problem
