"""Makes sure something fills the device context of every kernel that uses a primitive, however it is launched.

The runtime fills a kernel's device context from Triton's ``kernel_load_end_hook``. The compiler does not import
the runtime (dependencies point one way: abi -> compiler -> language -> runtime -> ops): ``triton_dist.runtime``
*registers* its hook here when it is imported (:func:`register_context_hook`). Whenever a kernel that calls a
primitive is hashed (on every cache lookup, hit or miss: see ``cache_key.py``) or linked (``stages_hook.py``),
:func:`ensure_context_hook` makes sure a hook is in Triton's chain:

- the runtime's, once the runtime registered it;
- before that (a script that imports only ``triton_dist.language``), a stand-in (:class:`MissingRuntimeGuard`)
  that refuses to load a kernel whose module holds the context, with a message that says to call
  ``triton_dist.init()``: without it the kernel would run on the zeroed context. The modules it refused are handed
  to the runtime when it registers, so a later ``triton_dist.init()`` fills them as if the runtime had seen them
  load.

A second launch of a kernel whose load hook raised (Triton 3.6 keeps the loaded module and skips the hook the second
time) is refused from Triton's ``launch_enter_hook``: by the stand-in until the runtime registers, then by the
runtime's (``runtime/context/installer.py``), which adopts the refused modules. The device-side context check
(``checks.py``) covers what no host hook sees: launchers that bypass Triton's hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from triton_dist.abi import CONTEXT_SYMBOL

_ASM_SUFFIXES = (".ptx", ".amdgcn", ".llir")

LoadedModule = tuple[Any, Any, str, Mapping[str, str], str]
"""What Triton passes a ``kernel_load_end_hook``: module handle, function handle, kernel name, metadata group (file
name -> path of the compiled kernel's files) and the kernel's hash."""


class HookChain(Protocol):
    """The part of Triton's ``knobs.HookChain`` used here (tests pass a stand-in)."""

    def add(self, func: Callable[..., None]) -> None: ...

    def remove(self, func: Callable[..., None]) -> None: ...


def assembly_mentions(
    metadata_group: Mapping[str, str], symbol: str, suffixes: tuple[str, ...] = _ASM_SUFFIXES
) -> bool:
    """Whether a compiled kernel's assembly files (those of ``metadata_group`` ending in ``suffixes``) name
    ``symbol``. Unreadable files count as not naming it."""
    needle = symbol.encode()
    for file_name, path in metadata_group.items():
        if file_name.endswith(suffixes):
            try:
                if needle in Path(path).read_bytes():
                    return True
            except OSError:
                continue
    return False


def mentions_context(metadata_group: Mapping[str, str]) -> bool:
    """Whether a compiled kernel's assembly (``.ptx`` / ``.amdgcn`` / ``.llir`` in its metadata group) refers to the
    context global, i.e. whether the kernel needs a filled context. Unreadable files count as not mentioning it."""
    return assembly_mentions(metadata_group, CONTEXT_SYMBOL)


class MissingRuntimeGuard:
    """The ``kernel_load_end_hook`` in Triton's chain while no runtime has registered: refuses to load a kernel that
    needs a device context, remembers it for the runtime (:meth:`ContextHookRegistry.register`), and refuses its
    later launches too (from Triton's ``launch_enter_hook``: Triton skips the load hook once a module is loaded)."""

    def __init__(self, launch_hooks: Callable[[], HookChain] | None = None) -> None:
        self.refused: list[LoadedModule] = []
        self._launch_hooks = launch_hooks if launch_hooks is not None else _triton_launch_hooks
        self._refused_functions: dict[Any, str] = {}

    def __call__(self, module: Any, function: Any, name: str, metadata_group: Mapping[str, str], hash: str) -> None:
        if not mentions_context(metadata_group):
            return
        self.refused.append((module, function, name, metadata_group, hash))
        message = (
            f"kernel {name!r} uses triton_dist primitives but was loaded before triton_dist.init() (triton_dist."
            "runtime is not even imported), so nothing fills its device context (rank, world size, heap bases): call "
            "torch.distributed.init_process_group(...) and then triton_dist.init() before launching it"
        )
        self._refused_functions[function] = message
        self._launch_hooks().add(self.refuse_launch)
        raise RuntimeError(message)

    def refuse_launch(self, launch_metadata: object) -> None:
        """Triton's ``launch_enter_hook``: raise for a later launch of a kernel this guard refused to load."""
        data = getattr(launch_metadata, "data", None)  # Triton's LazyDict; its extras are not evaluated here
        message = self._refused_functions.get(data.get("function")) if isinstance(data, dict) else None
        if message is not None:
            raise RuntimeError(message)

    def stop_refusing_launches(self) -> None:
        """Leave Triton's ``launch_enter_hook`` chain (the runtime refuses the adopted modules' launches itself)."""
        self._refused_functions.clear()
        self._launch_hooks().remove(self.refuse_launch)


class ContextHookRegistry:
    """Who installs the load hook that fills kernels' contexts: the runtime once it registered, else the stand-in.

    ``hooks`` returns Triton's ``knobs.runtime.kernel_load_end_hook`` (a callable so that tests can substitute a
    chain of their own).
    """

    def __init__(
        self, hooks: Callable[[], HookChain] | None = None, launch_hooks: Callable[[], HookChain] | None = None
    ) -> None:
        self._hooks = hooks if hooks is not None else _triton_load_hooks
        self._lock = threading.Lock()
        self.install: Callable[[], None] | None = None
        self.adopt: Callable[..., None] | None = None
        self.guard = MissingRuntimeGuard(launch_hooks)

    @property
    def runtime_registered(self) -> bool:
        """Whether a runtime has registered its hook."""
        return self.install is not None

    def register(self, install: Callable[[], None], adopt: Callable[..., None]) -> None:
        """Called by the runtime when it is imported.

        ``install()`` puts the runtime's load hook into Triton's chain (idempotent); it is called now and from then
        on by :meth:`ensure`. ``adopt(module, function, name, metadata_group, hash)`` takes over a module that was
        loaded (and refused) before the runtime registered. The stand-in leaves Triton's chain.
        """
        with self._lock:
            self.install, self.adopt = install, adopt
            self._hooks().remove(self.guard)
            self.guard.stop_refusing_launches()
            refused, self.guard.refused = self.guard.refused, []
        install()
        for loaded in refused:
            adopt(*loaded)

    def ensure(self) -> bool:
        """Put a context hook into Triton's chain: the runtime's (True) or, with no runtime registered, the
        stand-in (False). Idempotent and cheap: it runs whenever a kernel that uses a primitive is hashed."""
        install = self.install
        if install is not None:
            install()
            return True
        with self._lock:
            if self.install is None:
                self._hooks().add(self.guard)
                return False
        return self.ensure()


def _triton_load_hooks() -> HookChain:
    from triton import knobs

    return knobs.runtime.kernel_load_end_hook


def _triton_launch_hooks() -> HookChain:
    from triton import knobs

    return knobs.runtime.launch_enter_hook


context_hooks = ContextHookRegistry()
"""The process's registry (``triton_dist.runtime`` registers with it when imported)."""


def register_context_hook(install: Callable[[], None], adopt: Callable[..., None]) -> None:
    """Register the runtime's load hook: see :meth:`ContextHookRegistry.register`."""
    context_hooks.register(install, adopt)


def ensure_context_hook() -> bool:
    """Put the runtime's context hook into Triton's chain (True), or, where no runtime registered one, the stand-in
    that refuses to load kernels needing a context (False). See :meth:`ContextHookRegistry.ensure`."""
    return context_hooks.ensure()
