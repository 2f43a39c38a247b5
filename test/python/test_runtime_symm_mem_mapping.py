"""How the GPU heap is carved out of a torch symmetric-memory allocation, against a stand-in for torch's API.

The stand-in keeps the contract of ``torch.distributed._symmetric_memory`` that the mapping relies on (``empty``,
``rendezvous``, the handle's ``rank``/``world_size``/``buffer_ptrs``/``buffer_size``/``get_buffer``) and models
torch 2.13's layout, where the backend puts a signal pad in front of the data, so the tensor it returns is not
page aligned. Every rank's block lives in this process, as peer mappings do on a GPU.
"""

import os

import pytest
import torch
from torch.distributed import _symmetric_memory as symm_mem

from triton_dist.runtime.heap.symm_mem import map_symmetric_memory_heap

SIGNAL_PAD = 1024


class FakeHandle:
    def __init__(self, rank, blocks, buffer_size):
        self.rank = rank
        self.world_size = len(blocks)
        self.blocks = blocks
        self.buffer_size = buffer_size
        self.buffer_ptrs = [block.data_ptr() + SIGNAL_PAD for block in blocks]
        self.requests = []

    def get_buffer(self, rank, sizes, dtype, storage_offset=0):
        self.requests.append((rank, tuple(sizes), dtype, storage_offset))
        itemsize = torch.empty((), dtype=dtype).element_size()
        numel = 1
        for size in sizes:
            numel *= size
        if (storage_offset + numel) * itemsize > self.buffer_size:
            raise RuntimeError("SymmetricMemory::get_buffer: the requested size exceeds the allocated size")
        data = self.blocks[rank][SIGNAL_PAD:].view(dtype)
        return data[storage_offset : storage_offset + numel].view(sizes)


class FakeSymmetricMemory:
    """Page-aligned blocks of [signal pad | data] for every rank; this process is ``rank``."""

    def __init__(
        self,
        monkeypatch,
        rank=0,
        world_size=3,
        backend="CUDA",
        peer_unmapped=None,
        refuse_switch=False,
        needs_group_registration=False,
    ):
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self.registered = not needs_group_registration
        self.peer_unmapped = peer_unmapped
        self.refuse_switch = refuse_switch
        self.calls = []
        self.handle = None
        for name in ("empty", "rendezvous", "get_backend", "set_backend", "enable_symm_mem_for_group"):
            monkeypatch.setattr(symm_mem, name, getattr(self, name))

    def empty(self, size, dtype, device):
        self.calls.append(("empty", size, dtype, device))
        storage = [torch.zeros(SIGNAL_PAD + size + 8192, dtype=torch.uint8) for _ in range(self.world_size)]
        self.blocks = [buffer[(-buffer.data_ptr()) % 4096 :][: SIGNAL_PAD + size] for buffer in storage]
        self.keep = storage
        self.size = size
        return self.blocks[self.rank][SIGNAL_PAD:]

    def rendezvous(self, tensor, group):
        self.calls.append(("rendezvous", group))
        if not self.registered:
            raise RuntimeError(f"get_group_info: no group info associated with the group name {group}")
        self.handle = FakeHandle(self.rank, self.blocks, self.size)
        if self.peer_unmapped is not None:
            self.handle.buffer_ptrs[self.peer_unmapped] = 0
        return self.handle

    def enable_symm_mem_for_group(self, group_name):
        self.calls.append(("enable_symm_mem_for_group", group_name))
        self.registered = True

    def get_backend(self, device):
        return self.backend

    def set_backend(self, name):
        self.calls.append(("set_backend", name))
        if self.refuse_switch:
            raise RuntimeError("Backend can not be changed after use.")
        self.backend = name


class Group:
    group_name = "7"


def test_heap_starts_on_the_same_page_aligned_offset_in_every_block(monkeypatch):
    monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    fake = FakeSymmetricMemory(monkeypatch, rank=1, world_size=3)
    heap_size = 64 * 1024
    mapping = map_symmetric_memory_heap(heap_size, Group(), torch.device("cpu"))

    assert fake.calls[0] == ("empty", heap_size + 4096, torch.uint8, torch.device("cpu"))
    assert ("rendezvous", "7") in fake.calls
    assert mapping.rank == 1 and mapping.world_size == 3 and mapping.problems() == []
    offsets = {base - block.data_ptr() for base, block in zip(mapping.bases, fake.blocks, strict=True)}
    assert offsets == {4096}, "the signal pad pushes the heap to the next page, identically in every block"
    assert mapping.local.data_ptr() == mapping.bases[1]
    # The peer views are the peers' memory: writing through one lands in that rank's block.
    mapping.peers[2][:4].copy_(torch.tensor([1, 2, 3, 4], dtype=torch.uint8))
    assert fake.blocks[2][4096:4100].tolist() == [1, 2, 3, 4]
    assert all(request[3] == 4096 - SIGNAL_PAD for request in fake.handle.requests), fake.handle.requests
    assert os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1", "triton_dist never needs multicast objects"


def test_a_user_choice_for_multicast_is_left_alone(monkeypatch):
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0")
    FakeSymmetricMemory(monkeypatch)
    map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))
    assert os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "0"


def test_another_backend_is_switched_to_the_ipc_backend(monkeypatch):
    fake = FakeSymmetricMemory(monkeypatch, backend="NVSHMEM")
    map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))
    assert ("set_backend", "CUDA") in fake.calls


def test_a_backend_that_cannot_be_switched_says_how_to_fix_it(monkeypatch):
    FakeSymmetricMemory(monkeypatch, backend="NVSHMEM", refuse_switch=True)
    with pytest.raises(RuntimeError, match=r"NVSHMEM backend.*TORCH_SYMMMEM=CUDA"):
        map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))


def test_a_peer_without_a_mapping_is_reported(monkeypatch):
    FakeSymmetricMemory(monkeypatch, rank=0, world_size=3, peer_unmapped=2)
    with pytest.raises(RuntimeError, match=r"cannot map rank 2's heap.*one node"):
        map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))


def test_a_group_is_registered_where_torch_still_requires_it(monkeypatch):
    fake = FakeSymmetricMemory(monkeypatch, needs_group_registration=True)
    mapping = map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))
    assert fake.calls[1:] == [("rendezvous", "7"), ("enable_symm_mem_for_group", "7"), ("rendezvous", "7")]
    assert mapping.problems() == []


def test_other_rendezvous_errors_propagate(monkeypatch):
    fake = FakeSymmetricMemory(monkeypatch)

    def broken(tensor, group):
        raise RuntimeError("CUDASymmetricMemory::rendezvous: detected allocations from overlapping devices")

    monkeypatch.setattr(symm_mem, "rendezvous", broken)
    with pytest.raises(RuntimeError, match="overlapping devices"):
        map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))
    assert ("enable_symm_mem_for_group", "7") not in fake.calls
