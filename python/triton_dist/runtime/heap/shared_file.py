"""A CPU heap for host-side testing: each rank's heap is a shared-memory file that every rank maps.

It behaves like the GPU heap where the runtime can observe it (one allocation per rank, peers mapped at different
addresses in each process, page-aligned bases), so the heap, the tensor constructors and ``peer_tensor`` can be
exercised on machines without GPUs. Kernels that call dl primitives run on it under ``TRITON_INTERPRET=1``
(``runtime/emulation``).

The files live in /dev/shm (a tmpfs: memory), one of ``heap_size`` bytes per rank of the node. Before any is
created, every rank checks that the directory has room for all of them, and the ranks agree on the outcome; each
file's pages are then reserved when it is created (``posix_fallocate``), so a full /dev/shm is an error at
``init()`` instead of a SIGBUS on first touch. A rank's file is unlinked on every path out of
``map_shared_file_heap``, once every rank has mapped it or as soon as any rank failed: nothing is left behind.
"""

from __future__ import annotations

import errno
import os
import tempfile
import uuid

import torch
import torch.distributed as dist

from triton_dist.runtime.heap.mapping import HeapMapping
from triton_dist.runtime.world.rank_agreement import raise_if_any_rank_failed

WHAT = "triton_dist.init(device='cpu'): the CPU heap"


def shared_dir() -> str:
    """Where the heap files go: /dev/shm, else the temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def available_bytes(directory: str) -> int:
    """Bytes an unprivileged process may still write in ``directory``'s file system."""
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


def space_problems(heap_size: int, world_size: int, directory: str) -> list[str]:
    """What stops ``world_size`` heap files of ``heap_size`` bytes from fitting in ``directory`` (empty: they fit).

    All ranks of a CPU heap are on one node (they map each other's files), so the node needs room for every rank's.
    """
    needed = heap_size * world_size
    available = available_bytes(directory)
    if needed <= available:
        return []
    return [
        f"{world_size} rank(s) x heap_size {heap_size} bytes = {needed} bytes do not fit in {directory}, which has "
        f"{available} bytes free: lower heap_size (or $TRITON_DIST_HEAP_SIZE) or free space there"
    ]


def create_heap_file(path: str, heap_size: int) -> torch.Tensor:
    """Create ``path`` with ``heap_size`` zero bytes, its pages reserved, and map it (``OSError`` if it cannot)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.posix_fallocate(descriptor, 0, heap_size)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            os.ftruncate(descriptor, heap_size)  # a file system without fallocate: sparse, as torch makes it
    finally:
        os.close(descriptor)
    return torch.from_file(path, shared=True, size=heap_size, dtype=torch.uint8)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def map_shared_file_heap(heap_size: int, group: dist.ProcessGroup, directory: str | None = None) -> HeapMapping:
    """Create this rank's heap file in ``directory`` (default :func:`shared_dir`), map every rank's file, then
    unlink them (a collective). Raises ``RuntimeError`` on every rank, naming each rank's problem, if any rank
    cannot: too little space, a file that cannot be created or mapped."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    directory = directory if directory is not None else shared_dir()
    raise_if_any_rank_failed(group, space_problems(heap_size, world_size, directory), WHAT)
    session = [uuid.uuid4().hex if rank == 0 else None]
    dist.broadcast_object_list(session, src=dist.get_global_rank(group, 0), group=group)
    path = os.path.join(directory, f"triton_dist-{session[0]}-{rank}")
    try:
        problems = []
        local = None
        try:
            local = create_heap_file(path, heap_size)
        except (OSError, RuntimeError) as error:
            problems.append(f"cannot create {path} ({heap_size} bytes): {error}")
        raise_if_any_rank_failed(group, problems, WHAT)
        paths: list[str | None] = [None] * world_size
        dist.all_gather_object(paths, path, group=group)
        peers: list[torch.Tensor] = []
        try:
            for peer in range(world_size):
                if peer == rank and local is not None:
                    peers.append(local)
                else:
                    peers.append(torch.from_file(paths[peer], shared=True, size=heap_size, dtype=torch.uint8))
        except (OSError, RuntimeError) as error:
            problems.append(f"cannot map rank {len(peers)}'s heap file {paths[len(peers)]}: {error}")
        # Every rank has mapped every file (or failed): the names can go, in the `finally` below.
        raise_if_any_rank_failed(group, problems, WHAT)
    finally:
        _unlink(path)
    return HeapMapping(
        rank=rank, world_size=world_size, heap_size=heap_size, device=torch.device("cpu"), peers=tuple(peers)
    )
