"""Fills ``__triton_dist_context`` in every loaded Triton module that has it.

Triton calls ``knobs.runtime.kernel_load_end_hook`` right after it loads a compiled kernel's module, before the
first launch. For a module that contains the context global, the installer copies in this process's context (rank,
world size, heap bases). Modules without it (kernels that use no triton_dist primitive) are left alone.

The installer remembers every module it filled, so a later ``init()`` (after ``finalize()``) refills them with the
new heap's bases, and it remembers modules loaded before ``init()`` so that ``init()`` fills them too.

A kernel loaded before ``init()`` makes its first launch fail (the hook raises), but Triton keeps the loaded module
and does not call the hook again, so a second launch would run on the zeroed context. Until ``init()`` fills such
modules, the installer also sits in Triton's ``launch_enter_hook`` chain and refuses, on the host, every launch of
their kernels with the same message (the device-side context check would only trap: in a kernel with ``wgmma`` it
has no message, ``compiler/call_free_checks.py``). It leaves the chain when nothing is left to refuse, so ordinary
launches never pay for it.

A module linked with the watchdog library also has ``__triton_dist_wait_watchdog``: the installer writes the wait
timeout (``triton_dist.compiler.wait_timeout_ns()``) and the device address of a record slot of the module's own
(``wait_timeout.RecordSlots``, host-mapped pinned memory) into it, so ``check_wait_timeout`` can name the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from triton_dist.abi import (
    CONTEXT_BYTES,
    CONTEXT_SYMBOL,
    WAIT_WATCHDOG_BYTES,
    WAIT_WATCHDOG_LAYOUT,
    WAIT_WATCHDOG_SYMBOL,
)
from triton_dist.compiler.context_hook import mentions_context
from triton_dist.compiler.watchdog import wait_timeout_ns
from triton_dist.runtime.context.module_globals import CudaModuleGlobals, HipModuleGlobals, ModuleGlobals
from triton_dist.runtime.context.payload import pack_context
from triton_dist.runtime.context.wait_timeout import RecordSlots


@dataclass
class _LoadedModule:
    kernel: str
    address: int
    watchdog: int | None = None
    """Address of the module's ``__triton_dist_wait_watchdog`` (None: not linked with the watchdog library)."""
    record: int = 0
    """Device address of the module's watchdog record (0: none assigned yet)."""


def _default_module_globals() -> ModuleGlobals:
    from triton.runtime import driver

    backend = driver.active.get_current_target().backend
    if backend == "cuda":
        return CudaModuleGlobals()
    if backend == "hip":
        return HipModuleGlobals()
    raise RuntimeError(f"triton_dist supports the cuda and hip Triton backends, not {backend!r}")


def _current_device_index() -> int:
    import torch

    return torch.cuda.current_device()


class ContextInstaller:
    """The ``kernel_load_end_hook`` that writes the triton_dist context into each module that declares it.

    ``module_globals`` makes the driver access (a ``ModuleGlobals``); ``current_device`` returns the device index
    Triton is loading on; ``timeout_ns`` the watchdog timeout to write. They default to the real thing and exist so
    tests can substitute fakes.
    """

    def __init__(
        self,
        module_globals: Callable[[], ModuleGlobals] = _default_module_globals,
        current_device: Callable[[], int] = _current_device_index,
        timeout_ns: Callable[[], int] = wait_timeout_ns,
    ) -> None:
        self._make_module_globals = module_globals
        self._current_device = current_device
        self._timeout_ns = timeout_ns
        self._globals: ModuleGlobals | None = None
        self.records: RecordSlots | None = None
        """The watchdog records of the modules loaded so far (created with the first watchdog module)."""
        self._context: bytes | None = None
        self._device_index: int | None = None
        self.filled: dict[int, _LoadedModule] = {}
        """Modules that hold the current context (module handle -> kernel name and context address)."""
        self.pending: dict[int, _LoadedModule] = {}
        """Modules that were loaded while no context was set; ``set_context`` fills them."""
        self.refused: dict[object, str] = {}
        """Kernel function handles of the pending modules -> the message their launches are refused with."""

    @property
    def has_context(self) -> bool:
        return self._context is not None

    def _driver(self) -> ModuleGlobals:
        if self._globals is None:
            self._globals = self._make_module_globals()
        return self._globals

    def set_context(self, payload: bytes, device_index: int) -> None:
        """Use ``payload`` for modules loaded on device ``device_index`` from now on, and refill known modules."""
        if len(payload) != CONTEXT_BYTES:
            raise ValueError(f"a context is {CONTEXT_BYTES} bytes, got {len(payload)}")
        self._context = payload
        self._device_index = device_index
        known = {**self.filled, **self.pending}
        self.pending.clear()
        self._stop_refusing()
        for module, loaded in known.items():
            self._driver().write(loaded.address, payload)
            self._install_watchdog(module, loaded)
            self.filled[module] = loaded

    def refuse_unfilled_launch(self, launch_metadata: object) -> None:
        """Triton's ``launch_enter_hook``: raise for a kernel whose module still waits for ``init()``."""
        data = getattr(launch_metadata, "data", None)  # Triton's LazyDict; its extras are not evaluated here
        message = self.refused.get(data.get("function")) if isinstance(data, dict) else None
        if message is not None:
            raise RuntimeError(message)

    def _refuse_launches_of(self, function: object, message: str) -> None:
        from triton import knobs

        self.refused[function] = message
        knobs.runtime.launch_enter_hook.add(self.refuse_unfilled_launch)

    def _stop_refusing(self) -> None:
        from triton import knobs

        self.refused.clear()
        knobs.runtime.launch_enter_hook.remove(self.refuse_unfilled_launch)

    def _install_watchdog(self, module: int, loaded: _LoadedModule) -> None:
        """Write the timeout and the module's record address into its ``__triton_dist_wait_watchdog``, if any."""
        driver = self._driver()
        if loaded.watchdog is None:
            found = driver.lookup(module, WAIT_WATCHDOG_SYMBOL)
            if found is None:
                return
            address, size = found
            if size != WAIT_WATCHDOG_BYTES:
                raise RuntimeError(
                    f"kernel {loaded.kernel!r}: {WAIT_WATCHDOG_SYMBOL} is {size} bytes in the loaded module but the "
                    f"runtime writes {WAIT_WATCHDOG_BYTES} (docs/abi.md); the watchdog device library is stale: "
                    f"rebuild it (scripts/build.sh)"
                )
            loaded.watchdog = address
        if not loaded.record:
            if self.records is None:
                self.records = RecordSlots(driver.host_mapped_alloc)
            loaded.record = self.records.assign(loaded.kernel)
        driver.write(loaded.watchdog, WAIT_WATCHDOG_LAYOUT.pack(self._timeout_ns(), loaded.record))

    def refresh_wait_timeout(self) -> None:
        """Write the current timeout into every filled module linked with the watchdog library."""
        for module, loaded in self.filled.items():
            if loaded.watchdog is not None:
                self._install_watchdog(module, loaded)

    def raise_if_wait_timed_out(self, cause: BaseException | None = None) -> None:
        """Raise ``WaitTimeoutError`` for the first written watchdog record; return if none is written."""
        if self.records is not None:
            self.records.raise_if_written(cause)

    def clear_context(self) -> None:
        """Forget the context (at ``finalize``); modules keep their old bytes until the next ``set_context``."""
        self._context = None
        self._device_index = None

    def __call__(
        self, module: object, function: object, name: str, metadata_group: Mapping[str, str], hash: str
    ) -> None:
        """The hook: Triton passes the loaded module handle, the kernel function handle and the kernel's name."""
        if not isinstance(module, int) or module == 0:
            return
        driver = self._driver()
        try:
            found = driver.lookup(module, CONTEXT_SYMBOL)
        except RuntimeError as error:
            if mentions_context(metadata_group):
                raise RuntimeError(f"kernel {name!r}: cannot look up {CONTEXT_SYMBOL}: {error}") from error
            return
        if found is None:
            if mentions_context(metadata_group):
                raise RuntimeError(
                    f"kernel {name!r} refers to {CONTEXT_SYMBOL} but the {driver.backend} driver cannot find it in the "
                    f"loaded module: the device library's context global must keep external linkage (docs/abi.md)"
                )
            return
        address, size = found
        if size != CONTEXT_BYTES:
            raise RuntimeError(
                f"kernel {name!r}: {CONTEXT_SYMBOL} is {size} bytes in the loaded module but the runtime writes "
                f"{CONTEXT_BYTES} (docs/abi.md); the device library is stale: rebuild it (scripts/build.sh)"
            )
        loaded = _LoadedModule(name, address)
        if self._context is None:
            self.pending[module] = loaded
            message = (
                f"kernel {name!r} uses triton_dist primitives but was loaded before triton_dist.init(): call "
                f"torch.distributed.init_process_group(...) and then triton_dist.init() before launching it"
            )
            self._refuse_launches_of(function, message)
            raise RuntimeError(message)
        device = self._current_device()
        if device != self._device_index:
            raise RuntimeError(
                f"kernel {name!r} was loaded on cuda:{device} but the symmetric heap lives on "
                f"cuda:{self._device_index}; launch triton_dist kernels on the device that was current at init()"
            )
        driver.write(address, self._context)
        self._install_watchdog(module, loaded)
        self.filled[module] = loaded

    def adopt(self, module: object, function: object, name: str, metadata_group: Mapping[str, str], hash: str) -> None:
        """Take over a module Triton loaded before the runtime registered this hook (the compiler's stand-in refused
        it: ``compiler/context_hook.py``): as if it loaded now, except that a missing context is not an error
        here: its launches stay refused until ``init()`` fills it."""
        try:
            self(module, function, name, metadata_group, hash)
        except RuntimeError:
            if module not in self.pending:
                raise


context_installer = ContextInstaller()
"""The process's ``kernel_load_end_hook`` (one per process: Triton's hook chain calls it for every loaded kernel)."""


def install_context_hook() -> None:
    """Register the context installer with Triton's ``kernel_load_end_hook`` (idempotent)."""
    from triton import knobs

    knobs.runtime.kernel_load_end_hook.add(context_installer)


def remove_context_hook() -> None:
    """Unregister the context installer from Triton (idempotent)."""
    from triton import knobs

    knobs.runtime.kernel_load_end_hook.remove(context_installer)


def publish_context(
    rank: int,
    num_ranks: int,
    heap_size: int,
    heap_bases: Sequence[int],
    device_index: int,
    local_rank: int | None = None,
    local_num_ranks: int | None = None,
) -> None:
    """Write this process's context into every module loaded so far and every module loaded from now on;
    ``local_rank`` / ``local_num_ranks`` default to one node (``pack_context``)."""
    payload = pack_context(rank, num_ranks, heap_size, heap_bases, local_rank, local_num_ranks)
    context_installer.set_context(payload, device_index)
    install_context_hook()


def withdraw_context() -> None:
    """Stop filling modules (at ``finalize()``); see ``ContextInstaller.clear_context``."""
    context_installer.clear_context()
