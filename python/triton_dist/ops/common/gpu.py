"""What the ops ask of a GPU once per process: its SM count (grids, split counts)."""

from __future__ import annotations

import torch

EMULATED_SMS = 2
"""The SM count the ops assume for the CPU emulation's host device: grids of a few programs, each one a thread of
Triton's interpreter."""

_sms: dict[int | None, int] = {}
"""The SM count per device index, asked once (tests without GPUs set an entry)."""


def sm_count(device: torch.device) -> int:
    """The streaming multiprocessors of ``device`` (a CUDA device; asked of the driver once per process);
    ``EMULATED_SMS`` for the CPU emulation's host device (unless a test set an entry)."""
    found = _sms.get(device.index)
    if found is None and device.type == "cpu":
        return EMULATED_SMS
    if found is None:
        found = _sms[device.index] = torch.cuda.get_device_properties(device.index).multi_processor_count
    return found
