"""The runtime's knobs: heap size, heap backend and host-side timeout, from arguments or environment variables."""

from __future__ import annotations

import math
import operator
import os
import re
from typing import SupportsIndex, cast

from triton_dist.abi import HEAP_BASE_ALIGNMENT

DEFAULT_HEAP_SIZE = 1 << 30
HEAP_SIZE_ENV = "TRITON_DIST_HEAP_SIZE"
DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "TRITON_DIST_TIMEOUT_S"
BACKEND_ENV = "TRITON_DIST_BACKEND"
BACKENDS = ("cuda_ipc", "nvshmem")
"""The heap backends ``init(backend=...)`` accepts: ``cuda_ipc`` (the default: torch symmetric memory's CUDA
backend, or CUDA IPC handles when ranks share a GPU; one node) and ``nvshmem`` (torch symmetric memory's NVSHMEM
backend, ``heap/nvshmem.py``; nodes reach each other through NVSHMEM)."""
DEFAULT_BACKEND = "cuda_ipc"

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``"1073741824"``, ``"512M"``, ``"2GiB"``, ``"64kb"`` (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"cannot read {text!r} as a size in bytes (examples: 1073741824, 512M, 2GiB)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


MAX_HEAP_SIZE = (2**63 - 1) // HEAP_BASE_ALIGNMENT * HEAP_BASE_ALIGNMENT
"""The largest heap the device context can describe (it holds the size as an int64, docs/abi.md); the memory
actually available (GPU memory, or /dev/shm for ``device="cpu"``) is checked when the heap is created."""


def _whole_bytes(value: object, source: str) -> int:
    """``value`` as a whole number of bytes: an integer (anything with ``__index__``, such as a numpy integer) or an
    integral float; never a bool."""
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        return operator.index(cast(SupportsIndex, value))
    if isinstance(value, bool) or not isinstance(value, float):
        raise TypeError(
            f"{source} must be a number of bytes (an int, or a string such as '4G'), got {value!r} "
            f"({type(value).__name__})"
        )
    if not value.is_integer():  # NaN and infinity included
        raise ValueError(f"{source} must be a whole number of bytes, got {value!r}")
    return int(value)


def resolve_heap_size(heap_size: int | str | None) -> int:
    """The heap size in bytes: the argument, else ``$TRITON_DIST_HEAP_SIZE``, else 1 GiB; rounded up to a whole
    number of ``HEAP_BASE_ALIGNMENT`` pages.

    Raises ``TypeError`` / ``ValueError`` naming the argument (or the variable) for anything else: a bool, a
    fraction, an unreadable string, a size <= 0 or above ``MAX_HEAP_SIZE``.
    """
    source = "heap_size"
    if heap_size is None:
        env = os.environ.get(HEAP_SIZE_ENV)
        heap_size, source = (env, f"${HEAP_SIZE_ENV}") if env else (DEFAULT_HEAP_SIZE, "default")
    if isinstance(heap_size, str):
        try:
            size = parse_size(heap_size)
        except ValueError as error:
            raise ValueError(f"{source}: {error}") from None
    else:
        size = _whole_bytes(heap_size, source)
    if size <= 0:
        raise ValueError(f"{source} must be a positive number of bytes, got {heap_size!r}")
    if size > MAX_HEAP_SIZE:
        raise ValueError(
            f"{source}={heap_size!r} is too large: the device context holds the heap size as an int64 "
            f"(at most {MAX_HEAP_SIZE} bytes)"
        )
    return -(-size // HEAP_BASE_ALIGNMENT) * HEAP_BASE_ALIGNMENT


def _seconds(value: object, source: str) -> float:
    """``value`` as a finite, positive number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{source} must be a number of seconds, got {value!r} ({type(value).__name__})")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{source} must be a finite, positive number of seconds, got {value!r}")
    return seconds


def resolve_timeout(timeout_s: float | None) -> float:
    """Seconds a host-side wait may take: the argument, else ``$TRITON_DIST_TIMEOUT_S``, else 300.

    Raises ``TypeError`` / ``ValueError`` naming the argument (or the variable) unless it is a finite, positive
    number: NaN or infinity would never fire.
    """
    if timeout_s is not None:
        return _seconds(timeout_s, "timeout_s")
    env = os.environ.get(TIMEOUT_ENV, "").strip()
    if not env:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(env)
    except ValueError:
        raise ValueError(f"${TIMEOUT_ENV} must be a number of seconds, got {env!r}") from None
    return _seconds(seconds, f"${TIMEOUT_ENV}")


def resolve_backend(backend: str | None) -> str:
    """The heap backend: the argument, else ``$TRITON_DIST_BACKEND``, else ``cuda_ipc``; case and surrounding blanks
    do not matter.

    Raises ``TypeError`` for a non-string and ``ValueError`` for a name not in ``BACKENDS``, naming the argument (or
    the variable) and the accepted names.
    """
    source = "backend"
    if backend is None:
        env = os.environ.get(BACKEND_ENV, "").strip()
        backend, source = (env, f"${BACKEND_ENV}") if env else (DEFAULT_BACKEND, "default")
    if not isinstance(backend, str):
        raise TypeError(f"{source} must be a string naming a heap backend {BACKENDS}, got {backend!r}")
    name = backend.strip().lower()
    if name not in BACKENDS:
        raise ValueError(f"{source}={backend!r} is not a heap backend: use one of {', '.join(BACKENDS)}")
    return name
