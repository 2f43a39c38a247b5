"""Multi-rank CPU emulation of distributed kernels under ``TRITON_INTERPRET=1`` (docs/getting-started.md,
"Develop and test without GPUs").

Under torchrun on gloo, after ``triton_dist.init(device="cpu")``, each rank is a process whose heap is a shared
memory file every rank maps; a ``@triton.jit`` kernel that calls ``dl.*`` runs in Triton's interpreter with every
program on a thread of its own (``executor``), its primitives running unchanged over an emulated device library
(``backend``, ``builder``, ``device_library``): ``dl.rank`` / ``dl.num_ranks`` from the world, ``dl.symm_at`` into the
peer's mapping with every access checked against the heap (``heap_check``), ``dl.notify`` an atomic release,
``dl.wait`` acquire polls under the watchdog's timeout (``WaitTimeoutError``), ``dl.consume_token`` the identity.

``triton_dist.runtime`` calls :func:`install` when it is imported: it registers the backend with the language layer
(which never imports the runtime) and the executor with Triton's interpreter.
"""

from __future__ import annotations

from triton_dist.language._primitive import register_interpreter_backend
from triton_dist.runtime.emulation import interpreter_fixes
from triton_dist.runtime.emulation.backend import run_primitive
from triton_dist.runtime.emulation.executor import EmulatedGridExecutor, uses_primitives
from triton_dist.runtime.emulation.executor import install as _install_executor
from triton_dist.runtime.emulation.state import EmulatedWaitTimeoutRecord, EmulationError


def install() -> None:
    """Register the emulation with ``triton_dist.language`` and Triton's interpreter (idempotent)."""
    register_interpreter_backend(run_primitive)
    interpreter_fixes.install()
    _install_executor()


__all__ = ["EmulatedGridExecutor", "EmulatedWaitTimeoutRecord", "EmulationError", "install", "uses_primitives"]
