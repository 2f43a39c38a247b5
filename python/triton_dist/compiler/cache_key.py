"""Puts the device libraries and the frontend into the cache key of every kernel that calls a primitive.

Triton keys its on-disk kernel cache on the kernel's ``JITFunction.cache_key``, which ``DependenciesFinder``
(triton/runtime/jit.py) computes from the kernel's source and from everything the source refers to. For a global
it finds, ``record_reference`` recurses into ``hash_attrs`` when the value has ``__triton_aggregate__ = True`` and
folds in the ``cache_key`` of any ``JITCallable``. Each primitive therefore carries
``hash_attrs = (DEVICE_LIBRARY_KEY,)``: a ``JITCallable`` whose ``cache_key`` digests both bitcode files and the
frontend, so rebuilding the library (or editing the frontend) recompiles every kernel that uses it. The code
generator still treats the primitives as builtins (it checks ``__triton_builtin__``).

The key also holds the level of device-side checks (``checks.py``: ``TRITON_DIST_DEBUG``) and whether the wait
watchdog's library is linked (``watchdog.py``: ``TRITON_DIST_WAIT_TIMEOUT_S``, not the timeout itself, which the
runtime writes). Computing it also makes sure a context hook is in Triton's load-hook chain
(``context_hook.ensure_context_hook``): the runtime's, which ``triton_dist.runtime`` registers itself when it is
imported, or else the stand-in that refuses to load the kernel until ``triton_dist.init()``. Hashing registers
nothing; it is the place to check because Triton hashes a kernel before every first launch in a process, whether
the compiled kernel then comes from its cache or is compiled anew.

Triton memoizes a kernel's ``cache_key`` on the ``JITFunction`` object, so a library rebuilt (or
``TRITON_DIST_DEBUG`` changed) while a process runs takes effect for kernels that process has not hashed yet, and
for every kernel in the next process.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from triton.runtime.jit import JITCallable

import triton_dist
from triton_dist.compiler.checks import check_level
from triton_dist.compiler.context_hook import ensure_context_hook
from triton_dist.compiler.device_library import libraries_digest
from triton_dist.compiler.watchdog import watchdog_enabled

_PACKAGE = Path(triton_dist.__file__).resolve().parent


@functools.cache
def frontend_digest() -> str:
    """SHA-256 of the frontend's version and sources (``language/``, ``compiler/``) as imported by this process."""
    digest = hashlib.sha256(f"triton_dist {triton_dist.__version__}".encode())
    for path in sorted([*(_PACKAGE / "language").glob("*.py"), *(_PACKAGE / "compiler").glob("*.py")]):
        digest.update(f"{path.parent.name}/{path.name}:".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class DeviceLibraryKey(JITCallable):
    """A ``JITCallable`` that is never called: its ``cache_key`` stands for the device libraries and the frontend.

    It bypasses ``JITCallable.__init__`` (which wants Python source to parse) and provides what
    ``DependenciesFinder._update_hash`` reads: ``cache_key``, ``used_global_vals`` and ``noinline``.
    """

    def __init__(self) -> None:
        self.used_global_vals: dict[tuple[str, int], tuple[Any, dict[str, Any]]] = {}
        self.noinline = False
        self.__name__ = "triton_dist_device_library"
        self.__qualname__ = self.__name__
        self.__module__ = __name__

    @property
    def cache_key(self) -> str:
        ensure_context_hook()
        watchdog = "on" if watchdog_enabled() else "off"
        key = f"{libraries_digest()}-{frontend_digest()}-checks={check_level().name}-watchdog={watchdog}"
        return hashlib.sha256(key.encode()).hexdigest()

    def __repr__(self) -> str:
        return "<triton_dist device library key>"


DEVICE_LIBRARY_KEY = DeviceLibraryKey()
