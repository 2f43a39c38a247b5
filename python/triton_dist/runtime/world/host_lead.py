"""Keeping the GPU behind the host before a device-timed call, so the timed span holds no host time.

A device-timed run records a start event, enqueues the call and records an end event. If the GPU has drained its
queue when the host records the start (a small op, a host path of tens to hundreds of µs, a device barrier that
returns at once), the GPU reaches the start event while the host is still enqueueing the call, and the span then
holds part of the host path, a different part in every run. ``lead_host`` enqueues a GPU spin long enough for the
host to enqueue what follows; put it before the ranks' device barrier, so the barrier still starts them together
whatever their clocks. The benchmarks' timer (``testing.timing``) and the ops' calibration and autotuner
(``ops.tuning.calibration.timed``) both use it.
"""

from __future__ import annotations

import torch

HOST_LEAD_CYCLES = 2_000_000
"""GPU clock cycles of the spin (about 1 ms at Hopper clocks): longer than the slowest host path of an op (a few
hundred µs), so the call is enqueued before the GPU reaches the start event."""


def lead_host(device: torch.device | None = None) -> None:
    """Enqueue a ``HOST_LEAD_CYCLES`` spin on the current stream of ``device`` (a CUDA device; others: nothing)."""
    if device is not None and device.type != "cuda":
        return
    torch.cuda._sleep(HOST_LEAD_CYCLES)
