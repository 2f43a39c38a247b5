"""flash_decode's host side across real ranks (gloo, the CPU heap): everything a call does before its launch.

The first call of a shape is a collective: every rank must pass the same shapes, dtype, config, split count and
scale, else every rank raises naming the first difference (a rank that raised alone would leave the others waiting
in the kernel). It then picks the workspace for the shape, allocating one collectively when none fits, so every
rank's records and flags sit at the same heap offset (what ``dl.symm_at`` and ``dl.notify`` rely on).
"""

from __future__ import annotations

import importlib

import torch
import torch.distributed as dist
from test_runtime_world import run_ranks

import triton_dist.runtime as rt
from triton_dist.ops.common import gpu, resources

fd_config = importlib.import_module("triton_dist.ops.flash_decode.config")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")


def _cpu_heap_as_gpu() -> None:
    """In this rank's process: the ops take the CPU heap's world for a GPU world (they refuse a CPU world), and a
    CPU device has 132 SMs (the automatic split and combiner counts ask)."""
    fd_op.gpu_world = lambda op, error: rt.current_world()
    fd_op.peer_world = lambda op, error: rt.current_world()
    gpu._sms[None] = 132


def _inputs(batch=2, q_heads=8, kv_heads=2, local_len=256, dtype=torch.bfloat16):  # noqa: ANN001, ANN202
    q = torch.zeros(batch, q_heads, 128, dtype=dtype)
    k = torch.zeros(batch, kv_heads, local_len, 128, dtype=dtype)
    return q, k, k.clone(), torch.zeros(batch, dtype=torch.int32)


def _error_of(call) -> str:  # noqa: ANN001
    """The message of the exception ``call()`` raises ("" if none): try/except, not pytest.raises (a traceback
    kept alive made a spawned rank abort at exit now and then, see test_runtime_world)."""
    try:
        call()
    except (RuntimeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return ""


def _offsets(world: rt.World, workspace) -> list[tuple[int, int, int]]:  # noqa: ANN001
    """Every rank's heap offsets of the workspace's records, flags and state."""
    mine = tuple(world.heap.offset_of(t) for t in (workspace.records, workspace.flags, workspace.state))
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone


def _agreement_and_workspaces(rank: int, world_size: int) -> None:
    world = rt.init(heap_size="64M", device="cpu")
    _cpu_heap_as_gpu()
    first = fd_op._prepare(*_inputs(), None, None)
    assert first.splits == fd_config.choose_splits(
        2, 2, 4, 256, world_size, 132, fd_config.default_config("cuda").block_n
    )
    assert abs(first.sm_scale - 128**-0.5) < 1e-12
    offsets = _offsets(world, first.workspace)
    assert len(set(offsets)) == 1 and None not in offsets[0], f"workspaces at different heap offsets: {offsets}"
    assert first.workspace.records.shape == (2, fd_config.MIN_RECORD_BYTES // 4)
    assert first.workspace.flags.shape == (2, fd_config.MIN_FLAGS) and not first.workspace.flags.any()
    assert fd_op._prepare(*_inputs(), None, None).workspace is first.workspace  # agreed once, remembered

    smaller = fd_op._prepare(*_inputs(batch=1), None, fd_config.FlashDecodeConfig(splits=2))
    assert smaller.workspace is first.workspace, "a shape that fits the existing workspace shares it"

    bigger = fd_op._prepare(*_inputs(batch=8, q_heads=64, kv_heads=8), 0.25, fd_config.FlashDecodeConfig(splits=4))
    floats, flags = fd_config.workspace_need(8, 8, 8, 4, world_size)
    assert bigger.workspace is not first.workspace and bigger.workspace.fits(floats, flags)
    assert bigger.workspace.records.shape[1] == 1 << (floats - 1).bit_length()  # the next power of two
    assert bigger.sm_scale == 0.25
    offsets = _offsets(world, bigger.workspace)
    assert len(set(offsets)) == 1, f"the second workspace lands at different heap offsets: {offsets}"
    assert resources.workspaces("flash_decode") == [
        first.workspace,
        bigger.workspace,
    ]  # the first stays (graphs may use it)

    # Each difference between the ranks raises on every rank, naming the field. Every rank's call is the first of
    # its shape (a batch no earlier call used): a rank repeating an agreed shape takes no part in the check.
    differences = {
        "cache length": lambda: fd_op._prepare(*_inputs(batch=3, local_len=256 + rank), None, None),
        "dtype": lambda: fd_op._prepare(*_inputs(batch=4, dtype=(torch.bfloat16, torch.float16)[rank]), None, None),
        "scale": lambda: fd_op._prepare(*_inputs(batch=5), 0.5 + rank, None),
        "config": lambda: fd_op._prepare(*_inputs(batch=6), None, fd_config.FlashDecodeConfig(block_n=(64, 32)[rank])),
        "batch": lambda: fd_op._prepare(*_inputs(batch=7 + rank), None, None),
        "split count": lambda: fd_op._prepare(*_inputs(batch=9), None, fd_config.FlashDecodeConfig(splits=1 + rank)),
    }
    fields = {"cache length": "k/v shape", "dtype": "dtype", "scale": "scale", "config": "config", "batch": "q shape"}
    for what, call in differences.items():
        text = _error_of(call)
        assert text.startswith("FlashDecodeError: flash_decode: ranks called with different inputs ("), (what, text)
        assert f"{fields.get(what, 'splits')}: rank 0: " in text and ", rank 1: " in text, (what, text)

    # Too big for any workspace: refused on every rank after the agreement (so no rank is left waiting).
    text = _error_of(lambda: fd_op._prepare(*_inputs(64, 512, 32, 4), None, fd_config.FlashDecodeConfig(splits=2)))
    assert text.startswith("FlashDecodeError: flash_decode: batch 64 x 32 KV heads x 2 splits") and "workspace" in text
    assert len(resources.workspaces("flash_decode")) == 2

    text = _error_of(lambda: fd_op._prepare(*(t.to("meta") for t in _inputs()), None, None))
    assert "q is on meta, but this rank's triton_dist device is cpu" in text, text

    rt.finalize()
    again = rt.init(heap_size="64M", device="cpu")
    fresh = fd_op._prepare(*_inputs(), None, None)
    assert rt.current_world() is again
    assert resources.workspaces("flash_decode") == [fresh.workspace], "a new world starts afresh"
    rt.finalize()


def test_first_call_agrees_across_ranks_and_places_workspaces_alike():
    run_ranks(_agreement_and_workspaces, 2)


def _three_ranks(rank: int, world_size: int) -> None:
    world = rt.init(heap_size="16M", device="cpu")
    _cpu_heap_as_gpu()
    prepared = fd_op._prepare(*_inputs(batch=1, q_heads=16, kv_heads=1), None, fd_config.FlashDecodeConfig(splits=3))
    assert len(set(_offsets(world, prepared.workspace))) == 1
    text = _error_of(lambda: fd_op._prepare(*_inputs(local_len=64 * (rank == 2) + 64), None, None))
    assert "ranks called with different inputs (k/v shape: " in text and "rank 2: [2, 2, 128, 128]" in text, text
    rt.finalize()


def test_a_world_of_three_names_the_odd_rank():
    run_ranks(_three_ranks, 3)
