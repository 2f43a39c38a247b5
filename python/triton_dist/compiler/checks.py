"""Which device-side checks the primitives emit, decided when a kernel is compiled (and part of its cache key).

Two checks exist (docs/language.md, "Guards"):

- the **context check**: every primitive that reads the device context asserts ``num_ranks() > 0``, so a kernel
  launched before ``triton_dist.init()`` (or after the load hook failed once) stops with a message instead of
  running on a zeroed context. Always on.
- the **heap check**: a pointer given to ``dl.symm_at`` / ``dl.notify`` / ``dl.wait`` must lie in this rank's
  symmetric heap (``__triton_dist_heap_offset(p) <u __triton_dist_heap_size()``). On by default for scalar
  pointers; with ``TRITON_DIST_DEBUG=1`` every element of a tensor of pointers is checked too, so masked-off lanes
  must then also point into the heap.

A failed check is Triton's ``tt.assert``: the GPU prints the message with the kernel's file and line, and the
launch fails (the CUDA / HIP context is unusable afterwards, as after any device-side assert). In an NVIDIA kernel
with ``wgmma`` the message is dropped below ``DEBUG`` and the check only traps (``call_free_checks.py``: the call
that prints it would serialize every MMA).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
from collections.abc import Iterator

DEBUG_ENV = "TRITON_DIST_DEBUG"
"""``TRITON_DIST_DEBUG=1`` turns on :attr:`Checks.DEBUG`. Read once per process, when the first kernel that uses a
primitive is hashed: Triton memoizes each kernel's cache key, so a level that changed later would compile code
that the memoized key does not describe."""


class Checks(enum.IntEnum):
    """How much the primitives check on the device; each level includes the ones below it."""

    NONE = 0
    """No checks (only for measuring what the checks cost: ``override_checks``)."""
    CONTEXT = 1
    """The context check alone."""
    DEFAULT = 2
    """The context check and the heap check of scalar pointers (the default)."""
    DEBUG = 3
    """Also the heap check of every element of a tensor of pointers (``TRITON_DIST_DEBUG=1``)."""


_override: Checks | None = None


def check_level() -> Checks:
    """The level kernels compiled now get: an ``override_checks`` in force, else ``$TRITON_DIST_DEBUG``'s."""
    if _override is not None:
        return _override
    return _level_from_environment()


@functools.cache
def _level_from_environment() -> Checks:
    value = os.environ.get(DEBUG_ENV, "").strip().lower()
    if value in ("", "0", "false", "off", "no"):
        return Checks.DEFAULT
    if value in ("1", "true", "on", "yes"):
        return Checks.DEBUG
    raise ValueError(f"${DEBUG_ENV} must be 0 or 1, got {value!r}")


@contextlib.contextmanager
def override_checks(level: Checks) -> Iterator[None]:
    """Compile kernels with ``level`` inside the block (benchmarks and tests of the checks themselves).

    Triton keeps one compiled kernel per ``JITFunction`` and specialization in memory and memoizes its cache key,
    so compare levels on separate ``JITFunction`` objects (``triton.jit(kernel.fn)``) created inside the block.
    """
    global _override
    previous, _override = _override, Checks(level)
    try:
        yield
    finally:
        _override = previous
