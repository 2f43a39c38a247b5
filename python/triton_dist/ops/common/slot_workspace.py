"""Per-program symmetric workspaces for the decode-time collectives (all-reduce, GEMM + all-reduce).

A workspace has ``slots`` independent slots; program ``c`` of a launch owns slot ``c`` on every rank and talks only
to program ``c`` of the other ranks. A slot holds:

- an int32 **epoch counter** (device memory): the program reads it when it starts, uses ``epoch + 1, epoch + 2, ...``
  for its rounds of flag traffic, and writes the last value back when it ends. The next launch (stream-ordered)
  continues from there, so the host never passes an epoch: a CUDA-graph replay advances the flags exactly as an
  eager call does. Every rank launches the same grid for the same call, so slot ``c``'s counter moves in lock
  step on all ranks; a slot no program of a call uses keeps its value everywhere.
- ``flags_per_slot`` int32 **flags** on the symmetric heap, written by peers with ``dl.notify(..., signal=epoch)``
  and waited on with ``dl.wait(..., waitValue=epoch)``.
- ``region_bytes`` bytes of symmetric **data** that peers read or write through ``dl.symm_at``.

A slot is used by one program index only, so the ordering argument of each kernel (see
``ops/all_reduce/kernels.py``) only needs program ``c``'s rounds on all ranks. That argument holds only if a slot's
layout (its halves, and each sender's block in them) is the same in every call: a kernel must place them by the
region's size, never by the call's rows per round, or a call of another size puts one half over the half a slow
peer still reads for the previous call (test/python/test_emulation_all_reduce.py and the ``peer_ahead_by_a_call``
case of test/python/test_emulation_ar_rmsnorm.py run such a late peer).

Workspaces are allocated on the first call (a collective: every rank makes its first call of an op together) and
live until ``triton_dist.finalize()``. They cannot be created while a CUDA graph is being captured (zeroing the
flags would become part of the graph): run the op once eagerly first, as every CUDA-graph user warms up anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_dist import runtime as rt
from triton_dist.ops.common import resources


@dataclass(frozen=True)
class SlotWorkspace:
    """The tensors of one workspace (see the module docstring); all int32 flags and epochs start at 0."""

    epochs: torch.Tensor
    """int32 [slots], this rank's epoch counter per slot (not read by peers)."""
    flags: torch.Tensor
    """int32 [slots, flags_per_slot], symmetric."""
    data: torch.Tensor
    """uint8 [slots, region_bytes], symmetric; kernels view it as the element type they move."""

    @property
    def slots(self) -> int:
        return self.flags.shape[0]

    @property
    def region_bytes(self) -> int:
        return self.data.shape[1]

    def data_as(self, dtype: torch.dtype) -> torch.Tensor:
        """The data region as a flat tensor of ``dtype`` (slot ``c`` starts at ``c * region_bytes / itemsize``)."""
        return self.data.view(-1).view(dtype)


def slot_workspace(name: str, slots: int, flags_per_slot: int, region_bytes: int) -> SlotWorkspace:
    """The workspace ``name`` of the current world, created (collectively, zeroed, then a barrier) on first use."""
    if region_bytes % 16:
        raise ValueError(f"{name}: region_bytes must be a multiple of 16, got {region_bytes}")

    def create(world: rt.World) -> SlotWorkspace:
        made = SlotWorkspace(
            epochs=rt.zeros(slots, dtype=torch.int32),
            flags=rt.zeros(slots, flags_per_slot, dtype=torch.int32),
            data=rt.empty(slots, region_bytes, dtype=torch.uint8),
        )
        rt.barrier()  # every rank's zeroed flags are in place before any rank's kernel notifies them
        return made

    return resources.workspace(("slots", name, slots, flags_per_slot, region_bytes), create, what=name)
