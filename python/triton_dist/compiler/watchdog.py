"""Whether kernels compiled now get the wait watchdog, and the timeout the runtime gives it.

The watchdog (docs/language.md, "The wait watchdog"; docs/abi.md) is on by default, with a timeout of
``DEFAULT_WAIT_TIMEOUT_S``; ``TRITON_DIST_WAIT_TIMEOUT_S`` (seconds; 0: off) or
``triton_dist.init(wait_timeout_s=...)`` sets it. While it is on, kernels compiled link the watchdog device library
(``triton_dist.watchdog.<target>.bc``) instead of the plain one (the choice is part of their cache key), and the
runtime writes the timeout, in nanoseconds, into every module it loads. The timeout is a runtime value: changing it
does not recompile anything; turning the watchdog on or off selects other kernels.

Like ``TRITON_DIST_DEBUG``, the choice is read when Triton first hashes a kernel in a process (it memoizes the
key): set it before the first launch of a kernel, or give that kernel a fresh ``JITFunction``.
"""

from __future__ import annotations

import functools
import math
import os

WAIT_TIMEOUT_ENV = "TRITON_DIST_WAIT_TIMEOUT_S"
"""Seconds a ``dl.wait`` may spin before the kernel records it and traps; 0: no watchdog; unset or empty:
``DEFAULT_WAIT_TIMEOUT_S``."""

DEFAULT_WAIT_TIMEOUT_S = 600
"""The timeout when nothing sets one: NCCL's default collective timeout (10 minutes), so a peer that is merely slow
(compiling its kernels, loading data) never trips it, and a dead one still ends in an error instead of a hang. Its
cost on GPUs, on and off, is in docs/language.md ("The wait watchdog") and the runs docs/results/README.md lists."""

_override_ns: int | None = None  # set_wait_timeout's value; None: none in force


def seconds_to_ns(seconds: float, what: str) -> int:
    """``seconds`` as whole nanoseconds (at least 1); 0 stays 0 (off). Rejects negative, NaN and infinite values."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0 (0: no watchdog), got {seconds!r}")
    if seconds == 0:
        return 0
    ns = round(seconds * 1e9)
    if ns >= 2**63:
        raise ValueError(f"{what}={seconds!r} s does not fit the watchdog's 64-bit nanosecond timeout")
    return max(ns, 1)


@functools.cache
def _timeout_ns_from_environment() -> int:
    value = os.environ.get(WAIT_TIMEOUT_ENV, "").strip()
    if value == "":
        return seconds_to_ns(DEFAULT_WAIT_TIMEOUT_S, "DEFAULT_WAIT_TIMEOUT_S")
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"${WAIT_TIMEOUT_ENV} must be a number of seconds (0: no watchdog), got {value!r}") from None
    return seconds_to_ns(seconds, f"${WAIT_TIMEOUT_ENV}")


def wait_timeout_ns() -> int:
    """The watchdog timeout in nanoseconds for kernels compiled and loaded now (0: off): ``set_wait_timeout``'s
    value if one is in force, else ``$TRITON_DIST_WAIT_TIMEOUT_S``'s (read once per process)."""
    if _override_ns is not None:
        return _override_ns
    return _timeout_ns_from_environment()


def watchdog_enabled() -> bool:
    """Whether kernels compiled now link the watchdog device library."""
    return wait_timeout_ns() > 0


def set_wait_timeout(seconds: float | None) -> None:
    """Use ``seconds`` (0: off) from now on, overriding the environment; None goes back to the environment's value.

    ``triton_dist.init(wait_timeout_s=...)`` calls it. Kernels Triton has already hashed keep their library.
    """
    global _override_ns
    _override_ns = None if seconds is None else seconds_to_ns(seconds, "wait_timeout_s")
