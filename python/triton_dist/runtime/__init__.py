"""triton_dist.runtime: the host side of triton-dist.

```python
torch.distributed.init_process_group("nccl")
torch.cuda.set_device(local_rank)
triton_dist.runtime.init()                  # symmetric heap + device context for triton_dist kernels
x = triton_dist.runtime.zeros(1024, dtype=torch.float32)   # same offset on every rank
my_kernel[grid](x, ...)                     # kernels use dl.symm_at(x_ptr, peer), dl.notify, dl.wait
triton_dist.runtime.barrier()
triton_dist.runtime.finalize()
```

Importing this package registers the context installer with the compiler (``compiler.register_context_hook``: the
compiler never imports the runtime), which puts it into Triton's ``kernel_load_end_hook``, so a kernel that uses
triton_dist primitives and is loaded before ``init()`` fails with an error that says so.

Layout, one concern per subpackage:

- ``heap/``: the symmetric heap: mapping every rank's memory (``mapping``, ``symm_mem``, ``shared_file``), the
  offset allocator (``allocator``), heap blocks as torch tensors (``block_tensor``, ``symmetric_heap``) and the
  public constructors (``tensors``).
- ``context/``: the device context of docs/abi.md: its bytes (``payload``), writing a module's global through the
  driver (``module_globals``), and the ``kernel_load_end_hook`` that fills every loaded module (``installer``);
  the wait watchdog's host-mapped records and ``WaitTimeoutError`` (``wait_timeout``).
- ``copy_engine``: chunk copies on a stream, each followed by a flag write a kernel can ``dl.wait`` for
  (``copy_chunks_with_flags``; its Triton flag kernel is ``flag_kernel``).
- ``emulation/``: distributed kernels in Triton's interpreter (``TRITON_INTERPRET=1``) on a ``device="cpu"``
  heap, one process per rank, every program on a thread; registered with the language layer and Triton's
  interpreter when this package is imported.
- ``world/``: the world and its synchronization: ``init``/``finalize`` (``lifecycle``), their knobs
  (``settings``), collective agreement between ranks (``rank_agreement``), host- and device-side barriers
  (``lifecycle.barrier``, ``device_barrier``, ``stream_sync``: also ``synchronize`` and ``check_wait_timeout``,
  which turn a kernel stopped by the wait watchdog into ``WaitTimeoutError``).
"""

from __future__ import annotations

import torch

from triton_dist.compiler.context_hook import register_context_hook
from triton_dist.runtime.context.installer import context_installer, install_context_hook
from triton_dist.runtime.context.wait_timeout import WaitTimeoutError
from triton_dist.runtime.copy_engine import copy_chunks_with_flags
from triton_dist.runtime.emulation import EmulationError
from triton_dist.runtime.emulation import install as install_emulation
from triton_dist.runtime.heap.allocator import HeapExhaustedError
from triton_dist.runtime.heap.tensors import (
    empty,
    empty_like,
    full,
    heap_stats,
    is_symmetric,
    ones,
    peer_tensor,
    rand,
    randn,
    require_symmetric,
    verify_symmetric,
    zeros,
    zeros_like,
)
from triton_dist.runtime.world.lifecycle import (
    World,
    barrier,
    current_world,
    finalize,
    init,
    is_initialized,
    on_finalize,
)
from triton_dist.runtime.world.stream_sync import check_wait_timeout, synchronize


def barrier_on_device(stream: torch.cuda.Stream | None = None) -> None:
    """Enqueue a cross-rank barrier kernel on ``stream`` (default: current); see ``world/device_barrier.py``."""
    from triton_dist.runtime.world.device_barrier import barrier_on_device as launch

    launch(stream)


register_context_hook(install_context_hook, context_installer.adopt)
install_emulation()

__all__ = [
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
]
