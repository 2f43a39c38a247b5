"""Links the triton_dist device library into every kernel Triton compiles, through a stages inspection hook.

Triton's backends call ``knobs.runtime.add_stages_inspection_hook(backend, stages, options, language, capability)``
at the end of ``add_stages``. The hook installed here replaces the ``llir`` stage by one that runs the backend's own
``make_llir`` with options whose ``extern_libs`` also hold ``("triton_dist", <bitcode>)``, so the library is linked
exactly like libdevice / ocml: after TTGIR -> LLVM IR, with LinkOnlyNeeded, then internalized and inlined at O3. A
kernel that calls no primitive pulls nothing from the library.

The library is checked before it is linked (``device_library.linkable_library``): a missing file, or one that is
empty, not bitcode, the other target's bitcode or short of an ABI symbol, is a ``DeviceLibraryMissingError`` /
``DeviceLibraryInvalidError`` naming the file and the reason, raised when a kernel that calls a primitive is
compiled. A kernel that calls no primitive needs nothing from the library: it compiles without it, as stock Triton
would, whatever state the library is in.

A hook installed before this one is chained: it runs after ours, on the stages we have already set, so it can wrap
our ``llir`` stage. Linking a kernel that calls a primitive also makes sure a context hook is in Triton's chain
(``context_hook.ensure_context_hook``; the runtime registers its own when imported), for kernels compiled from IR.
With a wait timeout configured (``watchdog.py``) the watchdog variant of the library is linked instead. On NVIDIA
the stage then makes the checks of a kernel with ``wgmma`` call-free (``call_free_checks.py``).

A CUDA kernel that calls an NVSHMEM primitive (``dl.put_signal``, ``dl.get``, ``dl.signal_wait``: symbols
``__triton_dist_nvshmem_*``) also gets, after our library, the NVSHMEM wrapper library and NVSHMEM's device code for
its compute capability (``device_library.nvshmem_libraries``: the build's converted copy of the installed NVSHMEM,
a few functions as textual IR, else the wheel's 30-50 MB bitcode); other kernels never read either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from triton import knobs

from triton_dist.abi import LIB_NAME, NVSHMEM_SYMBOL_PREFIX, SYMBOL_PREFIX
from triton_dist.compiler.call_free_checks import make_checks_call_free
from triton_dist.compiler.context_hook import ensure_context_hook
from triton_dist.compiler.device_library import (
    LIBRARY_FILES,
    DeviceLibraryInvalidError,
    DeviceLibraryMissingError,
    DeviceLibraryUnreadableError,
    NvshmemUnreadableError,
    linkable_library,
    nvshmem_libraries,
    nvshmem_rebuild_hint,
)
from triton_dist.compiler.watchdog import watchdog_enabled

_OUR_STAGE = "__triton_dist_llir__"


def _with_library(options: Any, path: str | None, extra: Sequence[tuple[str, str]] = ()) -> Any:
    """``options`` whose ``extern_libs`` end with our library (when ``path``) and then ``extra``, in that order."""
    ours = ({LIB_NAME} if path is not None else set()) | {name for name, _ in extra}
    libs = tuple((name, lib) for name, lib in (options.extern_libs or ()) if name not in ours)
    added = (((LIB_NAME, path),) if path is not None else ()) + tuple(extra)
    return dataclasses.replace(options, extern_libs=libs + added)


def _make_llir(backend: Any, options: Any, capability: int | None) -> Callable[[Any, dict], str]:
    """The ``llir`` stage with the library added to ``options`` (each backend's ``make_llir`` signature)."""
    target = backend.target.backend

    def llir(src: Any, metadata: dict) -> str:
        uses_library = SYMBOL_PREFIX in str(src)
        if uses_library:
            ensure_context_hook()
        try:
            path = str(linkable_library(target, watchdog=watchdog_enabled()))
        except (DeviceLibraryMissingError, DeviceLibraryInvalidError):
            if uses_library:
                raise
            # This kernel calls no primitive: compile it as Triton would, without the (unbuilt or invalid) library.
            path = None
        # A kernel that calls an NVSHMEM primitive also links the NVSHMEM wrapper library, then NVSHMEM's device
        # bitcode (NvshmemMissingError, naming the package, when it is not installed).
        extra = nvshmem_libraries(capability or 0) if target == "cuda" and NVSHMEM_SYMBOL_PREFIX in str(src) else []
        linked = _with_library(options, path, extra) if path is not None or extra else options
        try:
            if target == "cuda":
                return make_checks_call_free(backend.make_llir(src, metadata, linked, capability))
            return backend.make_llir(src, metadata, linked)
        except ValueError as error:
            nvshmem = [lib for _, lib in extra if lib in str(error)]
            if nvshmem:
                raise NvshmemUnreadableError(
                    f"Triton's LLVM cannot read NVSHMEM's device code {nvshmem[0]} ({error}), most likely because a "
                    "newer LLVM wrote it: triton==3.6.0 bundles LLVM 22.0.0git, and NVSHMEM 3.8's wheels ship bitcode "
                    "from LLVM 22.1.8, whose intrinsic declarations carry the attribute 'nocreateundeforpoison' "
                    f"(kind 105) that the older reader refuses. {nvshmem_rebuild_hint(capability or 0)} "
                    "(docs/multi-node.md)."
                ) from error
            if path is None or path not in str(error):
                raise
            raise DeviceLibraryUnreadableError(
                f"Triton's LLVM cannot read the triton_dist device library {path} ({error}). It must be bitcode "
                "that the LLVM bundled with triton==3.6.0 can parse: a newer LLVM can write attributes the older "
                "reader does not know (LLVM 22 tags llvm.umin/umax/... with 'nocreateundeforpoison'). Rebuild it "
                "with scripts/build.sh from a device library that avoids them (docs/abi.md)."
            ) from error

    setattr(llir, _OUR_STAGE, True)
    return llir


class DeviceLibraryLinker:
    """The stages inspection hook; ``previous`` is the hook that was installed before it (or None)."""

    def __init__(self, previous: Callable[..., Any] | None = None) -> None:
        self.previous = previous

    def __call__(self, backend: Any, stages: dict, options: Any, language: Any, capability: Any = None) -> None:
        if (
            backend.target.backend in LIBRARY_FILES
            and "llir" in stages
            and not getattr(stages["llir"], _OUR_STAGE, False)
        ):
            stages["llir"] = _make_llir(backend, options, capability)
        if self.previous is not None:
            self.previous(backend, stages, options, language, capability)


def installed_hook() -> DeviceLibraryLinker | None:
    """Our hook if it is the one Triton calls now, else None."""
    hook = knobs.runtime.add_stages_inspection_hook
    return hook if isinstance(hook, DeviceLibraryLinker) else None


def install_stages_hook() -> DeviceLibraryLinker:
    """Install the linking hook (idempotent); a different hook already installed is chained, not replaced."""
    hook = installed_hook()
    if hook is None:
        hook = DeviceLibraryLinker(previous=knobs.runtime.add_stages_inspection_hook)
        knobs.runtime.add_stages_inspection_hook = hook
    return hook


def uninstall_stages_hook() -> None:
    """Put back the hook that was installed before ours (no-op when ours is not the current hook)."""
    hook = installed_hook()
    if hook is not None:
        knobs.runtime.add_stages_inspection_hook = hook.previous
