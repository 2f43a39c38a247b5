"""Waiting for device work with a deadline, so a kernel stuck waiting for a peer becomes an error, not a hang; a
kernel the wait watchdog stopped becomes ``WaitTimeoutError`` (``runtime/context/wait_timeout.py``)."""

from __future__ import annotations

import time

import torch

from triton_dist.runtime.context.installer import context_installer


def synchronize_stream(
    device: torch.device, timeout_s: float, what: str, stream: torch.cuda.Stream | None = None
) -> None:
    """Wait until the work queued so far on ``stream`` (default: the current stream) has finished.

    Raises ``TimeoutError`` after ``timeout_s`` seconds, naming ``what`` was being waited for, or
    ``WaitTimeoutError`` when a kernel failed because the wait watchdog stopped it. CPU devices return at once.
    """
    if device.type != "cuda":
        return
    stream = stream if stream is not None else torch.cuda.current_stream(device)
    done = torch.cuda.Event()
    done.record(stream)
    deadline = time.monotonic() + timeout_s
    pause = 1e-5
    while not _query(done):
        if time.monotonic() > deadline:
            context_installer.raise_if_wait_timed_out()
            raise TimeoutError(
                f"{what}: device work on {device} did not finish within {timeout_s:.0f} s; a kernel is probably "
                f"waiting for a flag that a peer never set (mismatched launches or epochs across ranks?). "
                f"Raise TRITON_DIST_TIMEOUT_S if the work is just slow."
            )
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


def _query(event: torch.cuda.Event) -> bool:
    try:
        return event.query()
    except Exception as error:
        context_installer.raise_if_wait_timed_out(error)
        raise


def check_wait_timeout() -> None:
    """Raise ``triton_dist.WaitTimeoutError`` if a ``dl.wait`` in a kernel this process loaded outlived the wait
    watchdog's timeout; return otherwise.

    Only kernels compiled with the watchdog on (``TRITON_DIST_WAIT_TIMEOUT_S`` or ``init(wait_timeout_s=...)``)
    record timeouts. The record lives in host memory, so this works after the trap has made the GPU context
    unusable (any CUDA call, ``torch.cuda.synchronize()`` included, then fails with an unnamed launch error).
    """
    context_installer.raise_if_wait_timed_out()


def synchronize(device: torch.device | int | None = None) -> None:
    """``torch.cuda.synchronize(device)``, but a failure caused by the wait watchdog raises
    ``triton_dist.WaitTimeoutError`` naming the stuck wait (rank, kernel, program, flag, expected value, comparison,
    last value seen, timeout) instead of the driver's bare error; other failures propagate unchanged."""
    try:
        torch.cuda.synchronize(device)
    except Exception as error:
        context_installer.raise_if_wait_timed_out(error)
        raise
