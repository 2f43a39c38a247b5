"""Every op that reaches its peers by load/store refuses, on the host at its first call, a world whose ranks are not
all reachable that way (``ops.common.errors.check_load_store_world``): one that spans nodes (the NVSHMEM heap across
nodes) or where a peer's heap has no mapping here (its base in the device context is 0, where a kernel's
``dl.symm_at`` would fault).

The worlds are built in this process, without other ranks: a CPU heap whose unreachable peers have no view, as the
NVSHMEM heap maps a peer on another node, installed as the current world under the CPU emulation
(``TRITON_INTERPRET=1``). Nothing reaches a kernel or a collective: the check comes first.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

import triton_dist.language as dl
import triton_dist.ops as ops
from triton_dist.ops.common.errors import OpInputError, check_load_store_world, load_store_problem, peer_world
from triton_dist.runtime.emulation.state import EmulationError
from triton_dist.runtime.heap.mapping import HeapMapping
from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap
from triton_dist.runtime.world import lifecycle
from triton_dist.runtime.world.topology import NodeLayout

REPO = Path(__file__).resolve().parents[2]
HEAP_SIZE = 64 * 1024
PAGE = 4096


def _world(rank: int, nodes: tuple[tuple[int, ...], ...], unmapped: set[int]) -> lifecycle.World:
    """Rank ``rank``'s world over ``nodes``, on a CPU heap where the ranks in ``unmapped`` have no view."""
    world_size = sum(len(node) for node in nodes)
    memory = torch.zeros((world_size + 1) * HEAP_SIZE + PAGE, dtype=torch.uint8)
    skip = (-memory.data_ptr()) % PAGE
    views = tuple(
        None if peer in unmapped else memory[skip + peer * HEAP_SIZE : skip + (peer + 1) * HEAP_SIZE]
        for peer in range(world_size)
    )
    mapping = HeapMapping(rank, world_size, HEAP_SIZE, torch.device("cpu"), views, keepalive=memory)
    heap = SymmetricHeap(mapping)
    flags = heap.empty((world_size,), torch.int32)
    return lifecycle.World(
        group=None,  # type: ignore[arg-type]  # nothing here reaches a collective
        heap=heap,
        timeout_s=1.0,
        barrier_flags=flags,
        backend="nvshmem",
        layout=NodeLayout(nodes),
    )


TWO_NODES = ((0, 1), (2, 3))


@pytest.fixture
def two_node_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[lifecycle.World]:
    """Rank 1 of 4 on two nodes of 2 ranks (ranks 2 and 3 unmapped, as the NVSHMEM heap maps them), current under
    the CPU emulation."""
    world = _world(1, TWO_NODES, unmapped={2, 3})
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(lifecycle, "_world", world)
    yield world


def _bf16(device: torch.device, *shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(device, torch.bfloat16)


def _flash_decode(d: torch.device) -> Any:
    kv = _bf16(d, 1, 1, 8, 128)
    return ops.flash_decode(_bf16(d, 1, 2, 128), kv, kv.clone(), torch.full((1,), 8, dtype=torch.int32, device=d))


CALLS: dict[str, Callable[[torch.device], Any]] = {
    "ag_gemm": lambda d: ops.ag_gemm(_bf16(d, 16, 32), _bf16(d, 32, 16)),
    "gemm_rs": lambda d: ops.gemm_rs(_bf16(d, 16, 16), _bf16(d, 16, 32)),
    "gemm_ar": lambda d: ops.gemm_ar(_bf16(d, 4, 16), _bf16(d, 16, 32)),
    "flash_decode": _flash_decode,
    "all_reduce_residual_rmsnorm": lambda d: ops.all_reduce_residual_rmsnorm(
        _bf16(d, 2, 32), _bf16(d, 2, 32), _bf16(d, 32)
    ),
    "all_reduce_residual_rmsnorm_fp8": lambda d: ops.all_reduce_residual_rmsnorm_fp8(
        _bf16(d, 2, 32), _bf16(d, 2, 32), _bf16(d, 32)
    ),
}
"""Each op with small inputs it accepts, on a device (the name is what its error starts with). ``all_reduce``,
``all_gather`` and normal-mode ``moe_dispatch`` / ``moe_combine`` serve a world across nodes
(test_ops_all_reduce_nodes.py, test_ops_all_gather.py, test_ops_moe_nodes.py)."""


@pytest.mark.parametrize("op", sorted(CALLS))
def test_each_op_refuses_a_world_that_spans_nodes(op: str, two_node_world: lifecycle.World) -> None:
    with pytest.raises(OpInputError) as raised:
        CALLS[op](torch.device("cpu"))
    message = str(raised.value)
    # ar_rmsnorm's fp8 variant shares the op's name; every other op names itself.
    name = "all_reduce_residual_rmsnorm" if op.startswith("all_reduce_residual_rmsnorm") else op
    assert message.startswith(f"{name}: the world spans 2 nodes (ranks by node: [[0, 1], [2, 3]])"), message
    assert "rank 1 is on node 0 and reaches ranks [2, 3] only through NVSHMEM's puts" in message
    assert f"{name} reaches every peer by load/store" in message
    assert "new_subgroups()" in message and "hierarchical" in message


def test_a_peer_without_a_mapping_is_refused_on_one_node(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _world(0, ((0, 1, 2),), unmapped={2})
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(lifecycle, "_world", world)
    unmapped = r"^all_reduce: rank 0 has no load/store mapping of the heaps of ranks \[2\] "
    with pytest.raises(OpInputError, match=unmapped):
        ops.all_reduce(torch.randn(24))
    with pytest.raises(OpInputError, match=r"^flash: rank 0 has no load/store mapping"):
        check_load_store_world("flash", world)


def test_a_world_of_one_node_passes_and_stays_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    single = _world(2, ((0, 1, 2, 3),), unmapped=set())
    assert load_store_problem(single) is None
    assert check_load_store_world("all_reduce", single) is single
    assert check_load_store_world("all_reduce", single) is single, "the second call takes the cached answer"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(lifecycle, "_world", single)
    assert peer_world("all_reduce") is single
    # A later world that spans nodes is checked afresh, not taken from the cache.
    spanning = _world(2, ((0, 1), (2, 3)), unmapped={0, 1})
    monkeypatch.setattr(lifecycle, "_world", spanning)
    with pytest.raises(OpInputError, match=r"rank 2 is on node 1 and reaches ranks \[0, 1\]"):
        peer_world("all_reduce")


def test_an_uneven_layout_is_named_as_it_is() -> None:
    world = _world(3, ((0, 1, 2), (3,)), unmapped={0, 1, 2})
    problem = load_store_problem(world)
    assert problem is not None and "the world spans 2 nodes (ranks by node: [[0, 1, 2], [3]])" in problem
    assert "rank 3 is on node 1 and reaches ranks [0, 1, 2]" in problem


def test_peer_tensor_refuses_a_peer_on_another_node(two_node_world: lifecycle.World) -> None:
    x = two_node_world.heap.empty((8,), torch.float32)
    x.fill_(float("nan"))  # poison
    values = torch.randn(8)
    two_node_world.heap.peer_tensor(x, 0).copy_(values)
    assert torch.equal(two_node_world.heap.peer_tensor(x, 0), values), "a peer of this node is reachable"
    with pytest.raises(ValueError, match=r"rank 3's heap is not mapped in this process \(another node"):
        two_node_world.heap.peer_tensor(x, 3)


# --- the CPU emulation: dl.symm_at / dl.notify to a rank without a mapping ----------------------------------------


def test_the_emulation_stops_symm_at_and_notify_to_a_rank_on_another_node(two_node_world: lifecycle.World) -> None:
    """Rank 1 of [[0, 1], [2, 3]] reads rank 0's copy through ``dl.symm_at``; rank 3 (no mapping, base 0) is an
    ``EmulationError`` naming it, for a scalar rank and for a kept lane of ``dl.notify``'s tensor of ranks."""

    @triton.jit  # decorated here, under the fixture's TRITON_INTERPRET=1: the interpreter runs it
    def pull(x_ptr, out_ptr, peer):  # noqa: ANN001, ANN202
        offs = tl.arange(0, 4)
        tl.store(out_ptr + offs, tl.load(dl.symm_at(x_ptr, peer) + offs))

    @triton.jit
    def notify_ranks(flag_ptr, last):  # noqa: ANN001, ANN202
        ranks = tl.arange(0, 4)
        dl.notify(flag_ptr, ranks, signal=1, mask=ranks <= last)

    heap = two_node_world.heap
    x = heap.empty((4,), torch.float32)
    x.fill_(float("nan"))  # poison
    values = torch.randn(4)
    heap.peer_tensor(x, 0).copy_(values)
    out = torch.full((4,), float("nan"))
    pull[(1,)](x, out, 0)
    assert torch.equal(out, values), "rank 0, on this node, is reached by load/store"
    with pytest.raises(
        EmulationError, match=r"dl.symm_at on rank 1, kernel 'pull', program 0: rank 3 is not reachable"
    ):
        pull[(1,)](x, out, 3)
    flags = heap.empty((4,), torch.int32)
    flags.zero_()
    heap.peer_tensor(flags, 0).zero_()
    notify_ranks[(1,)](flags, 1)  # ranks 0 and 1 only: flags[0] set on both
    assert heap.peer_tensor(flags, 0).tolist() == [1, 0, 0, 0] and flags.tolist() == [1, 0, 0, 0]
    with pytest.raises(EmulationError, match=r"a rank of the tensor of ranks: 2 is not reachable by load/store"):
        notify_ranks[(1,)](flags, 3)


# --- on GPUs: two torchrun agents on one host are two nodes of an NVSHMEM world ------------------------------------


def _free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (two torchrun agents, one GPU each)")
def test_on_gpus_every_op_refuses_a_two_node_nvshmem_world(tmp_path: Path) -> None:
    """``torchrun --nnodes=2 --node-rank=<0|1> --nproc-per-node=1`` twice on this host: ``init(backend="nvshmem")``
    sees two nodes (docs/multi-node.md), and every op raises its error at its first call, on both ranks."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "python"), os.environ.get("PYTHONPATH", "")) if p),
    }
    env.pop("TRITON_INTERPRET", None)
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                f"--node-rank={node}",
                "--nproc-per-node=1",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                __file__,
                str(tmp_path),
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
        )
        for node in range(2)
    ]
    outputs = [agent.communicate(timeout=300)[0] for agent in agents]
    assert all(agent.returncode == 0 for agent in agents), "\n".join(output[-4000:] for output in outputs)
    for rank in range(2):
        refused = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert sorted(refused) == sorted(CALLS), refused
        for op, message in refused.items():
            name = "all_reduce_residual_rmsnorm" if op.startswith("all_reduce_residual_rmsnorm") else op
            assert message.startswith(f"{name}: the world spans 2 nodes (ranks by node: [[0], [1]])"), message


def _gpu_worker(out: Path) -> None:
    """One rank of the GPU test: every op's error message, by op, into ``out/rank<r>.json``."""
    import torch.distributed as dist

    import triton_dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl")
    world = triton_dist.init(heap_size="256M", backend="nvshmem")
    assert world.num_nodes == 2 and world.node == rank, (world.num_nodes, world.node)
    refused = {}
    for op, call in CALLS.items():
        try:
            call(world.device)
        except OpInputError as error:
            refused[op] = str(error)
    (out / f"rank{rank}.json").write_text(json.dumps(refused, indent=1))
    triton_dist.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    _gpu_worker(Path(sys.argv[1]))
