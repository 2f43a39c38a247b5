"""The symmetric heap on CPU memory: constructors, symmetric offsets, peer views, block lifetime, bad input.

Several ranks are simulated in one process: each gets its own page-aligned buffer, and every rank's mapping sees
all buffers, as the GPU mapping does through peer access.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from triton_dist.runtime.heap.allocator import HeapExhaustedError
from triton_dist.runtime.heap.mapping import HeapMapping
from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def make_heaps(world_size: int, heap_size: int) -> list[SymmetricHeap]:
    buffers = [torch.full((heap_size + 4096,), 0xAB, dtype=torch.uint8) for _ in range(world_size)]
    views = tuple(buffer[(-buffer.data_ptr()) % 4096 :][:heap_size] for buffer in buffers)
    return [
        SymmetricHeap(
            HeapMapping(rank=rank, world_size=world_size, heap_size=heap_size, device=torch.device("cpu"), peers=views)
        )
        for rank in range(world_size)
    ]


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.int64, torch.bool, torch.complex64]
)
def test_empty_has_requested_shape_dtype_and_lives_in_the_heap(dtype):
    (heap,) = make_heaps(1, 1 << 20)
    tensor = heap.empty((3, 5, 7), dtype)
    assert tensor.shape == (3, 5, 7) and tensor.dtype == dtype and tensor.is_contiguous()
    offset = heap.offset_of(tensor)
    assert offset is not None and offset % 256 == 0
    assert tensor.data_ptr() == heap.bases[0] + offset
    # The memory is really the heap's: a write through the tensor shows up in the heap bytes.
    tensor.view(-1)[-1] = 1
    end = offset + tensor.numel() * tensor.element_size()
    assert heap.mapping.local[offset:end].view(dtype)[-1] == 1


def test_shapes_accept_torch_conventions():
    (heap,) = make_heaps(1, 1 << 20)
    assert heap.empty((4,), torch.float32).shape == (4,)
    assert heap.empty(4, torch.float32).shape == (4,)
    assert heap.empty(((2, 3),), torch.float32).shape == (2, 3)
    assert heap.empty(torch.Size([2, 0, 3]), torch.float32).shape == (2, 0, 3)
    assert heap.empty((), torch.float32).shape == ()
    with pytest.raises(ValueError, match="non-negative ints"):
        heap.empty((2, -1), torch.float32)


def test_same_allocation_order_gives_same_offsets_and_peer_views_alias_peers():
    heaps = make_heaps(3, 1 << 20)
    shapes = [((128,), torch.float32), ((7, 9), torch.bfloat16), ((300_000,), torch.uint8), ((5,), torch.int64)]
    per_rank = [[heap.empty(shape, dtype) for shape, dtype in shapes] for heap in heaps]
    for index in range(len(shapes)):
        offsets = {heap.offset_of(tensors[index]) for heap, tensors in zip(heaps, per_rank, strict=True)}
        assert len(offsets) == 1, "a symmetric tensor has the same offset on every rank"

    rng = torch.Generator().manual_seed(0)
    for source in range(3):
        tensor = per_rank[source][1]
        for peer in range(3):
            view = heaps[source].peer_tensor(tensor, peer)
            assert view.shape == tensor.shape and view.stride() == tensor.stride() and view.dtype == tensor.dtype
            data = torch.randn(view.shape, generator=rng).to(view.dtype)
            view.copy_(data)
            assert torch.equal(per_rank[peer][1], data), "a write through peer_tensor lands in the peer's tensor"


def test_peer_tensor_of_a_strided_view_keeps_its_layout():
    heaps = make_heaps(2, 1 << 20)
    base = [heap.empty((8, 16), torch.float32) for heap in heaps]
    base[1].copy_(torch.arange(128, dtype=torch.float32).view(8, 16))
    view = base[0].t()[3:, 1::2]
    remote = heaps[0].peer_tensor(view, 1)
    assert torch.equal(remote, base[1].t()[3:, 1::2])


def test_block_returns_when_last_view_dies():
    (heap,) = make_heaps(1, 1 << 20)
    tensor = heap.empty((1000,), torch.float32)
    offset = heap.offset_of(tensor)
    every_other = tensor[::2]
    as_ints = tensor.view(torch.int32)
    storage = tensor.untyped_storage()
    del tensor
    assert heap.stats()["blocks"] == 1
    del every_other, as_ints
    assert heap.stats()["blocks"] == 1, "the storage object still references the block"
    del storage
    stats = heap.stats()
    assert stats["blocks"] == 0 and stats["used"] == 0 and stats["free"] == heap.heap_size
    # The freed block is the first one handed out again.
    assert heap.offset_of(heap.empty((1000,), torch.float32)) == offset


def test_exhausted_heap_names_sizes_and_knob():
    (heap,) = make_heaps(1, 256 * 1024)
    keep = heap.empty((48 * 1024,), torch.float32)
    with pytest.raises(HeapExhaustedError, match=r"requested 131072 bytes.*heap_size"):
        heap.empty((32 * 1024,), torch.float32)
    del keep
    assert heap.empty((32 * 1024,), torch.float32).numel() == 32 * 1024


def test_non_heap_tensors_are_recognized():
    heaps = make_heaps(2, 1 << 20)
    on_heap = heaps[0].empty((64,), torch.float32)
    assert heaps[0].offset_of(torch.zeros(64)) is None
    assert heaps[0].offset_of(on_heap) is not None
    # Rank 1's memory is not rank 0's heap, even though rank 0 can map it.
    assert heaps[0].offset_of(heaps[1].empty((64,), torch.float32)) is None
    with pytest.raises(ValueError, match="symmetric heap"):
        heaps[0].peer_tensor(torch.zeros(4), 1)
    with pytest.raises(ValueError, match=r"peer must be a rank in \[0, 2\)"):
        heaps[0].peer_tensor(on_heap, 2)


def test_a_tensor_straddling_the_heap_end_is_not_symmetric():
    heap_size = 64 * 1024
    memory = torch.zeros(heap_size + 3 * 4096, dtype=torch.uint8)  # room after the heap, inside one storage
    start = (-memory.data_ptr()) % 4096
    view = memory[start : start + heap_size]
    heap = SymmetricHeap(HeapMapping(0, 1, heap_size, torch.device("cpu"), (view,)))

    def window(offset, size):
        return torch.empty(0, dtype=torch.uint8).set_(memory.untyped_storage(), start + offset, (size,))

    assert heap.offset_of(window(heap_size - 100, 200)) is None
    assert heap.offset_of(window(heap_size, 1)) is None
    assert heap.offset_of(window(100, 64)) == 100
    assert heap.offset_of(window(heap_size - 64, 64)) == heap_size - 64
    assert heap.offset_of(window(heap_size, 0)) is None, "an empty tensor at the end address is outside"


def test_unaligned_mapping_is_rejected():
    buffer = torch.zeros(2 * 4096, dtype=torch.uint8)
    misaligned = buffer[(-buffer.data_ptr()) % 4096 + 64 :][:4096]
    mapping = HeapMapping(rank=0, world_size=1, heap_size=4096, device=torch.device("cpu"), peers=(misaligned,))
    with pytest.raises(ValueError, match="not 4096-byte aligned"):
        SymmetricHeap(mapping)


def test_tensors_alive_at_interpreter_exit_do_not_crash():
    # Heap tensors still referenced when the interpreter shuts down are freed after module globals are gone; the
    # DLPack deleter must survive that.
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        import torch
        from test_helper_heaps import make_heaps
        heap, = make_heaps(1, 1 << 20)
        kept = [heap.empty((100,), torch.float32)[::3] for _ in range(10)]
        cycle = {{"t": heap.empty((5,), torch.bfloat16)}}
        cycle["self"] = cycle
        print("ok")
        """
    )
    helper = textwrap.dedent(
        """
        import torch
        from triton_dist.runtime.heap.mapping import HeapMapping
        from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap

        def make_heaps(world_size, heap_size):
            buffer = torch.zeros(heap_size + 4096, dtype=torch.uint8)
            view = buffer[(-buffer.data_ptr()) % 4096:][:heap_size]
            return [SymmetricHeap(HeapMapping(0, 1, heap_size, torch.device("cpu"), (view,)))]
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "test_helper_heaps.py").write_text(helper)
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=directory, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "Exception ignored" not in result.stderr


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(["a", "b"], False), (["a", "a", "a", "a"], True), (["a", "b", "a"], "share 2 GPUs"), (["a", "b", "a", "b"], "4")],
)
def test_ranks_share_a_gpu_only_when_every_rank_is_on_one(monkeypatch, gpus, expected):
    """Sharing GPUs needs the CUDA IPC heap, which was measured to fault across GPUs (2 x H100, 3 and 4 ranks): ranks
    spread over several GPUs while sharing raise on every rank, naming the fix."""
    from types import SimpleNamespace

    from triton_dist.runtime.heap import mapping

    def gather(out, value, group=None):  # noqa: ANN001
        out[:] = gpus

    monkeypatch.setattr(mapping.dist, "get_world_size", lambda group=None: len(gpus))
    monkeypatch.setattr(mapping.dist, "all_gather_object", gather)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(uuid=gpus[0]))
    if isinstance(expected, bool):
        assert mapping.ranks_share_a_gpu(None, torch.device("cuda", 0)) is expected
    else:
        with pytest.raises(RuntimeError, match=rf"{expected}.*must all share one .*CUDA_VISIBLE_DEVICES=0"):
            mapping.ranks_share_a_gpu(None, torch.device("cuda", 0))
