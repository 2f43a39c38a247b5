"""The process-wide runtime state: ``init()``, ``finalize()``, the host-side ``barrier()``.

``init(heap_size=...)`` reads, in order: the knobs (``settings.resolve_heap_size`` / ``resolve_timeout`` /
``resolve_backend``), a collective check that every rank asked for the same thing (``rank_agreement``), the nodes
the ranks are on (``topology``), the heap's memory (``heap.backends.map_heap``; ``heap.nvshmem`` for
``backend="nvshmem"``) wrapped in a ``heap.symmetric_heap.SymmetricHeap``, and the device context written into every
Triton module (``context.installer.publish_context``). There is at most one initialized world per process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from triton_dist.abi import MAX_RANKS
from triton_dist.compiler.watchdog import set_wait_timeout
from triton_dist.runtime.context.installer import (
    context_installer,
    install_context_hook,
    publish_context,
    remove_context_hook,
    withdraw_context,
)
from triton_dist.runtime.heap.backends import map_heap
from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap
from triton_dist.runtime.world.rank_agreement import check_same_setup, gather_from_ranks, raise_if_any_rank_failed
from triton_dist.runtime.world.settings import resolve_backend, resolve_heap_size, resolve_timeout
from triton_dist.runtime.world.stream_sync import synchronize_stream
from triton_dist.runtime.world.topology import (
    NodeLayout,
    launcher_problems,
    launcher_view,
    layout_from_node_keys,
    node_key,
)


@dataclass
class World:
    """An initialized triton_dist runtime: the process group, this rank's symmetric heap, and runtime flags."""

    group: dist.ProcessGroup
    heap: SymmetricHeap
    timeout_s: float
    barrier_flags: torch.Tensor
    """One int32 flag per rank, on the heap: ``barrier_on_device`` sets peers' flags to the current epoch."""
    barrier_epoch: int = 0
    backend: str = "cuda_ipc"
    """The heap's backend (``settings.BACKENDS``): ``cuda_ipc`` or ``nvshmem``."""
    layout: NodeLayout | None = None
    """Which ranks share a node (``topology``); None: every rank on one node."""

    @property
    def rank(self) -> int:
        """This process's rank in the group (``dl.rank()`` in kernels)."""
        return self.heap.rank

    @property
    def world_size(self) -> int:
        """The number of ranks in the group (``dl.num_ranks()`` in kernels)."""
        return self.heap.world_size

    @property
    def device(self) -> torch.device:
        """The device the heap lives on."""
        return self.heap.device

    @property
    def nodes(self) -> NodeLayout:
        """The group's ranks by node (one node when the world was built without a layout)."""
        return self.layout if self.layout is not None else NodeLayout.single_node(self.world_size)

    @property
    def node(self) -> int:
        """This rank's node, in ``[0, num_nodes)``; nodes are numbered by their first rank."""
        return self.nodes.node_of(self.rank)

    @property
    def num_nodes(self) -> int:
        """How many nodes the group spans."""
        return self.nodes.num_nodes

    @property
    def local_rank(self) -> int:
        """This rank's position among the ranks of its node (torchrun's ``LOCAL_RANK`` for the whole world)."""
        return self.nodes.local_rank_of(self.rank)

    @property
    def local_world_size(self) -> int:
        """How many ranks share this rank's node (torchrun's ``LOCAL_WORLD_SIZE`` for the whole world)."""
        return self.nodes.local_world_size_of(self.rank)

    @property
    def ranks_per_node(self) -> int | None:
        """``L`` when node ``n`` holds ranks ``[n L, (n + 1) L)`` (kernels then compute the node as
        ``dl.rank() // L`` with ``L`` a ``tl.constexpr``), else None."""
        return self.nodes.ranks_per_node


_world: World | None = None


def is_initialized() -> bool:
    """Whether ``init()`` has run (and ``finalize()`` has not)."""
    return _world is not None


def current_world() -> World:
    """The initialized world; raises a RuntimeError that says to call ``triton_dist.init()`` otherwise."""
    if _world is None:
        raise RuntimeError(
            "triton_dist is not initialized: call torch.distributed.init_process_group(...) and then "
            "triton_dist.init() first"
        )
    return _world


def _resolve_device(device: torch.device | str | int | None) -> torch.device:
    if device is None:
        if not torch.cuda.is_available():
            raise RuntimeError(
                "triton_dist.init() found no GPU; the symmetric heap needs CUDA or ROCm devices "
                "(device='cpu' gives a host-only heap for testing)"
            )
        return torch.device("cuda", torch.cuda.current_device())
    resolved = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    if resolved.type not in ("cuda", "cpu"):
        raise ValueError(f"the symmetric heap lives on a cuda (or, for testing, cpu) device, not {resolved}")
    return resolved


def _node_layout(group: dist.ProcessGroup) -> NodeLayout:
    """Which ranks of ``group`` share a node (a collective); raises RuntimeError on every rank if torchrun's
    ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` contradict the node keys (``topology``)."""
    whole_world = dist.get_world_size(group) == dist.get_world_size()
    views = gather_from_ranks((node_key(), launcher_view() if whole_world else None), group)
    layout = layout_from_node_keys([key for key, _ in views])
    problems = launcher_problems(layout, [view for _, view in views])
    if problems:
        raise RuntimeError("triton_dist.init(): the ranks' nodes disagree with torchrun's: " + "; ".join(problems))
    return layout


def init(
    group: dist.ProcessGroup | None = None,
    heap_size: int | str | None = None,
    *,
    device: torch.device | str | int | None = None,
    timeout_s: float | None = None,
    wait_timeout_s: float | None = None,
    backend: str | None = None,
) -> World:
    """Set up triton_dist on every rank of ``group`` (a collective; call it on all ranks, in the same order).

    Args:
        group: the process group whose ranks share the heap (default: the world). ``dl.rank()`` and
            ``dl.num_ranks()`` in kernels are the rank and size in this group. All ranks must be on one node.
        heap_size: bytes of symmetric memory per rank (int, or a string such as ``"4G"``); default
            ``$TRITON_DIST_HEAP_SIZE`` or 1 GiB. Every symmetric tensor comes out of this heap.
        device: the heap's device; default the current CUDA device (set it with ``torch.cuda.set_device`` first).
            ``"cpu"`` builds a host-only heap from shared-memory files, for testing without GPUs (kernels that call
            ``dl`` primitives run on it under ``TRITON_INTERPRET=1``).
        timeout_s: how long host-side waits (``barrier()``) may take before raising; default
            ``$TRITON_DIST_TIMEOUT_S`` or 300.
        wait_timeout_s: the wait watchdog (docs/language.md): seconds a ``dl.wait`` may spin before its kernel
            records it and stops, so that ``triton_dist.synchronize()`` / ``check_wait_timeout()`` raise
            ``WaitTimeoutError``; 0 turns it off; default ``$TRITON_DIST_WAIT_TIMEOUT_S``, else on with 600 s.
            Kernels compiled afterwards link the watchdog library (turning it on or off recompiles; changing the
            value does not).
        backend: where the heap's memory comes from: ``"cuda_ipc"`` (torch symmetric memory's CUDA backend, or CUDA
            IPC handles when ranks share a GPU; every rank on one node) or ``"nvshmem"`` (torch symmetric memory's
            NVSHMEM backend, ``heap/nvshmem.py``: the group must be the whole world, one rank per NVIDIA GPU;
            ranks on other nodes are reached by NVSHMEM's puts, ranks on this node by ``dl.symm_at`` as before);
            default ``$TRITON_DIST_BACKEND``, else ``"cuda_ipc"``. ``device="cpu"`` takes ``"cuda_ipc"`` (its
            shared-file heap).

    Calling ``init()`` again with the same arguments returns the existing world.

    Raises:
        TypeError, ValueError: before anything is allocated or any rank is contacted, naming the argument (or its
            environment variable): a ``backend`` that names no backend; a ``heap_size`` that is a bool, a fraction,
            an unreadable string, not positive, or larger than the device context's int64 holds
            (``settings.MAX_HEAP_SIZE``); a ``timeout_s`` (or ``$TRITON_DIST_TIMEOUT_S``) that is not a number, or is
            NaN, infinite or not positive; a ``wait_timeout_s`` that is NaN, infinite or negative; a ``device`` that
            is neither CUDA nor CPU.
        RuntimeError: no initialized process group; ``device=None`` without a GPU; already initialized with
            other arguments; more than ``MAX_RANKS`` ranks; the ranks disagree on world size, heap size, device
            type or backend; torchrun's ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` contradict the ranks' nodes; a
            ``cuda_ipc`` group that spans nodes; ``backend="nvshmem"`` where NVSHMEM is missing (no NVSHMEM in torch,
            no ``nvidia-nvshmem`` wheel), on a CPU or AMD device, on a group smaller than the world, with ranks
            sharing a GPU, or after torch symmetric memory's NVSHMEM backend was used on another device (an
            allocation with ``device="cuda"`` and no index counts as one: torch binds NVSHMEM to the first device);
            mapping the heap failed on some rank. With ``device="cpu"`` that includes heap files (one per
            rank of the node, ``heap_size`` bytes each) that do not fit in the free space of /dev/shm, checked
            before any file is created, and a file whose pages cannot be reserved; no heap file is left behind.
            These are raised on every rank, naming each failing rank.
    """
    global _world
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "triton_dist.init() needs an initialized torch.distributed process group: call "
            "torch.distributed.init_process_group(...) first (for example under torchrun)"
        )
    group = group if group is not None else dist.group.WORLD
    backend = resolve_backend(backend)
    heap_size = resolve_heap_size(heap_size)
    timeout_s = resolve_timeout(timeout_s)
    heap_device = _resolve_device(device)
    if wait_timeout_s is not None:
        set_wait_timeout(wait_timeout_s)
    if _world is not None:
        same_heap = _world.heap.heap_size == heap_size and _world.device == heap_device
        if _world.group is group and same_heap and _world.backend == backend:
            context_installer.refresh_wait_timeout()
            return _world
        raise RuntimeError(
            f"triton_dist is already initialized (heap_size={_world.heap.heap_size}, device={_world.device}, "
            f"backend={_world.backend}); call triton_dist.finalize() before initializing with heap_size={heap_size}, "
            f"device={heap_device}, backend={backend}"
        )
    world_size = dist.get_world_size(group)
    if world_size > MAX_RANKS:
        raise RuntimeError(f"triton_dist supports at most {MAX_RANKS} ranks, the group has {world_size}")
    check_same_setup(group, world_size=world_size, heap_size=heap_size, device_type=heap_device.type, backend=backend)
    layout = _node_layout(group)
    if backend == "cuda_ipc" and layout.num_nodes > 1:
        raise RuntimeError(
            f"triton_dist.init(): the group spans {layout.num_nodes} nodes (ranks by node: "
            f"{[list(node) for node in layout.nodes]}), and the cuda_ipc heap reaches one node: use "
            "backend='nvshmem' (docs/multi-node.md)"
        )

    mapping = map_heap(heap_size, group, heap_device, backend)
    problems = mapping.problems()
    if mapping.rank != dist.get_rank(group):
        problems.append(f"symmetric memory reports rank {mapping.rank}, the process group {dist.get_rank(group)}")
    raise_if_any_rank_failed(group, problems, "mapping the symmetric heap")
    heap = SymmetricHeap(mapping)

    if heap_device.type == "cuda":
        publish_context(
            heap.rank,
            heap.world_size,
            heap.heap_size,
            heap.bases,
            heap_device.index,
            local_rank=layout.local_rank_of(heap.rank),
            local_num_ranks=layout.local_world_size_of(heap.rank),
        )
        context_installer.refresh_wait_timeout()
        from triton_dist.runtime.heap.nvshmem import install_nvshmem_module_hook

        install_nvshmem_module_hook(enabled=backend == "nvshmem")
    install_context_hook()
    flags = heap.empty((heap.world_size,), torch.int32)
    flags.zero_()
    _world = World(group=group, heap=heap, timeout_s=timeout_s, barrier_flags=flags, backend=backend, layout=layout)
    barrier()
    return _world


def barrier() -> None:
    """Host-side barrier: wait for this rank's queued device work, then for every rank to get here.

    After it returns, all work queued on every rank's current stream before the call has finished, so host code
    may read or reset symmetric tensors. Raises ``TimeoutError`` instead of hanging when device work never ends.
    """
    world = current_world()
    what = f"triton_dist.barrier() on rank {world.rank}"
    synchronize_stream(world.device, world.timeout_s, what)
    on_gpu = world.device.type == "cuda" and "nccl" in str(dist.get_backend(world.group))
    token = torch.zeros(1, device=world.device if on_gpu else "cpu")
    dist.all_reduce(token, group=world.group)
    if on_gpu:
        synchronize_stream(world.device, world.timeout_s, what)


_finalize_hooks: list[Callable[[], None]] = []


def on_finalize(hook: Callable[[], None]) -> None:
    """Call ``hook()`` at every ``finalize()``, after the barrier (registered once; the ops use it to drop their
    plans and workspaces, which refer to the world and its process group)."""
    if hook not in _finalize_hooks:
        _finalize_hooks.append(hook)


def finalize() -> None:
    """Tear down: barrier (if the process group still exists), drop what the ops keep of this world (their plans
    and workspaces), drop the heap, unregister the hook. Idempotent.

    Symmetric tensors still referenced afterwards keep their local memory alive, but peers may have freed theirs:
    views of other ranks (``peer_tensor``) and kernels using ``dl.symm_at`` must not be used after ``finalize()``.
    """
    global _world
    if _world is None:
        return
    try:
        if dist.is_initialized():
            barrier()
    finally:
        for hook in list(_finalize_hooks):
            hook()
        withdraw_context()
        remove_context_hook()
        # The World a caller may still hold stops referring to the process group, so destroying the group frees it
        # and joins its threads while the interpreter runs: a gloo worker still alive at interpreter exit (because a
        # leftover World kept its group) can abort the process ("terminate called without an active exception").
        _world.group = None  # type: ignore[assignment]
        _world = None
