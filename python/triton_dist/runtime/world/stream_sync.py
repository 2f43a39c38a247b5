"""Waiting for device work with a deadline, so a kernel stuck waiting for a peer becomes an error, not a hang."""

from __future__ import annotations

import time

import torch


def synchronize_stream(
    device: torch.device, timeout_s: float, what: str, stream: torch.cuda.Stream | None = None
) -> None:
    """Wait until the work queued so far on ``stream`` (default: the current stream) has finished.

    Raises ``TimeoutError`` after ``timeout_s`` seconds, naming ``what`` was being waited for. CPU devices return
    at once.
    """
    if device.type != "cuda":
        return
    stream = stream if stream is not None else torch.cuda.current_stream(device)
    done = torch.cuda.Event()
    done.record(stream)
    deadline = time.monotonic() + timeout_s
    pause = 1e-5
    while not done.query():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{what}: device work on {device} did not finish within {timeout_s:.0f} s; a kernel is probably "
                f"waiting for a flag that a peer never set (mismatched launches or epochs across ranks?). "
                f"Raise TRITON_DIST_TIMEOUT_S if the work is just slow."
            )
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)
