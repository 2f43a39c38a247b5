"""Fills ``__triton_dist_context`` in every loaded Triton module that has it.

Triton calls ``knobs.runtime.kernel_load_end_hook`` right after it loads a compiled kernel's module, before the
first launch. For a module that contains the context global, the installer copies in this process's context (rank,
world size, heap bases). Modules without it (kernels that use no triton_dist primitive) are left alone.

The installer remembers every module it filled, so a later ``init()`` (after ``finalize()``) refills them with the
new heap's bases, and it remembers modules loaded before ``init()`` so that ``init()`` fills them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from triton_dist.abi import CONTEXT_BYTES, CONTEXT_SYMBOL
from triton_dist.runtime.context.module_globals import CudaModuleGlobals, HipModuleGlobals, ModuleGlobals
from triton_dist.runtime.context.payload import pack_context

_ASM_SUFFIXES = (".ptx", ".amdgcn", ".llir")


@dataclass
class _LoadedModule:
    kernel: str
    address: int


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


def _kernel_mentions_context(metadata_group: Mapping[str, str]) -> bool:
    """Whether the kernel's compiled assembly refers to the context global (read only when the driver says no)."""
    needle = CONTEXT_SYMBOL.encode()
    for file_name, path in metadata_group.items():
        if file_name.endswith(_ASM_SUFFIXES):
            try:
                if needle in Path(path).read_bytes():
                    return True
            except OSError:
                continue
    return False


class ContextInstaller:
    """The ``kernel_load_end_hook`` that writes the triton_dist context into each module that declares it.

    ``module_globals`` makes the driver access (a ``ModuleGlobals``); ``current_device`` returns the device index
    Triton is loading on. Both default to the real thing and exist so tests can substitute fakes.
    """

    def __init__(
        self,
        module_globals: Callable[[], ModuleGlobals] = _default_module_globals,
        current_device: Callable[[], int] = _current_device_index,
    ) -> None:
        self._make_module_globals = module_globals
        self._current_device = current_device
        self._globals: ModuleGlobals | None = None
        self._context: bytes | None = None
        self._device_index: int | None = None
        self.filled: dict[int, _LoadedModule] = {}
        """Modules that hold the current context (module handle -> kernel name and context address)."""
        self.pending: dict[int, _LoadedModule] = {}
        """Modules that were loaded while no context was set; ``set_context`` fills them."""

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
        for module, loaded in known.items():
            self._driver().write(loaded.address, payload)
            self.filled[module] = loaded

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
            if _kernel_mentions_context(metadata_group):
                raise RuntimeError(f"kernel {name!r}: cannot look up {CONTEXT_SYMBOL}: {error}") from error
            return
        if found is None:
            if _kernel_mentions_context(metadata_group):
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
            raise RuntimeError(
                f"kernel {name!r} uses triton_dist primitives but was loaded before triton_dist.init(): call "
                f"torch.distributed.init_process_group(...) and then triton_dist.init() before launching it"
            )
        device = self._current_device()
        if device != self._device_index:
            raise RuntimeError(
                f"kernel {name!r} was loaded on cuda:{device} but the symmetric heap lives on "
                f"cuda:{self._device_index}; launch triton_dist kernels on the device that was current at init()"
            )
        driver.write(address, self._context)
        self.filled[module] = loaded


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


def publish_context(rank: int, num_ranks: int, heap_size: int, heap_bases: Sequence[int], device_index: int) -> None:
    """Write this process's context into every module loaded so far and every module loaded from now on."""
    context_installer.set_context(pack_context(rank, num_ranks, heap_size, heap_bases), device_index)
    install_context_hook()


def withdraw_context() -> None:
    """Stop filling modules (at ``finalize()``); see ``ContextInstaller.clear_context``."""
    context_installer.clear_context()
