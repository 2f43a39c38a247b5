"""triton-dist: multi-GPU primitives for plain ``@triton.jit`` kernels.

Kernel authors import :mod:`triton_dist.language` (as ``dl``) inside kernels and use this package's runtime on the
host: ``triton_dist.init()`` after ``torch.distributed.init_process_group``, symmetric tensors from
``triton_dist.empty`` / ``zeros``, ``triton_dist.barrier()``, and ``triton_dist.finalize()``.

The runtime names are loaded on first use, so ``import triton_dist.language`` (what kernels need to compile) does not
import torch or touch a GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

RUNTIME_NAMES = (  # the public names of triton_dist.runtime, importable from the package root
    "EmulationError",
    "HeapExhaustedError",
    "WaitTimeoutError",
    "World",
    "barrier",
    "barrier_on_device",
    "check_wait_timeout",
    "copy_chunks_with_flags",
    "current_world",
    "empty",
    "empty_like",
    "finalize",
    "full",
    "heap_stats",
    "init",
    "is_initialized",
    "is_symmetric",
    "on_finalize",
    "ones",
    "peer_tensor",
    "rand",
    "randn",
    "require_symmetric",
    "synchronize",
    "verify_symmetric",
    "zeros",
    "zeros_like",
)

if TYPE_CHECKING:
    from triton_dist.runtime import (  # noqa: F401
        HeapExhaustedError,
        WaitTimeoutError,
        World,
        barrier,
        barrier_on_device,
        check_wait_timeout,
        copy_chunks_with_flags,
        current_world,
        empty,
        empty_like,
        finalize,
        full,
        heap_stats,
        init,
        is_initialized,
        is_symmetric,
        ones,
        peer_tensor,
        rand,
        randn,
        require_symmetric,
        synchronize,
        verify_symmetric,
        zeros,
        zeros_like,
    )


def __getattr__(name: str) -> Any:
    """``triton_dist.init`` and the other runtime names, imported from :mod:`triton_dist.runtime` on first use."""
    if name in RUNTIME_NAMES:
        from triton_dist import runtime  # the facade may reach every layer; importing it here keeps torch lazy

        return getattr(runtime, name)
    raise AttributeError(f"module 'triton_dist' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *RUNTIME_NAMES])


__all__ = ["__version__", *RUNTIME_NAMES]
