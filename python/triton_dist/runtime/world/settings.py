"""The runtime's knobs: heap size and host-side timeout, from arguments or environment variables."""

from __future__ import annotations

import os
import re

from triton_dist.abi import HEAP_BASE_ALIGNMENT

DEFAULT_HEAP_SIZE = 1 << 30
HEAP_SIZE_ENV = "TRITON_DIST_HEAP_SIZE"
DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "TRITON_DIST_TIMEOUT_S"

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``"1073741824"``, ``"512M"``, ``"2GiB"``, ``"64kb"`` (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"cannot read {text!r} as a size in bytes (examples: 1073741824, 512M, 2GiB)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def resolve_heap_size(heap_size: int | str | None) -> int:
    """The heap size in bytes: the argument, else ``$TRITON_DIST_HEAP_SIZE``, else 1 GiB; rounded up to a whole
    number of ``HEAP_BASE_ALIGNMENT`` pages."""
    source = "heap_size"
    if heap_size is None:
        env = os.environ.get(HEAP_SIZE_ENV)
        heap_size, source = (env, HEAP_SIZE_ENV) if env else (DEFAULT_HEAP_SIZE, "default")
    size = parse_size(heap_size) if isinstance(heap_size, str) else int(heap_size)
    if size <= 0:
        raise ValueError(f"{source} must be a positive number of bytes, got {heap_size!r}")
    return -(-size // HEAP_BASE_ALIGNMENT) * HEAP_BASE_ALIGNMENT


def resolve_timeout(timeout_s: float | None) -> float:
    """Seconds a host-side wait may take: the argument, else ``$TRITON_DIST_TIMEOUT_S``, else 300."""
    if timeout_s is None:
        env = os.environ.get(TIMEOUT_ENV)
        timeout_s = float(env) if env else DEFAULT_TIMEOUT_S
    if timeout_s <= 0:
        raise ValueError(f"a timeout must be positive, got {timeout_s}")
    return float(timeout_s)
