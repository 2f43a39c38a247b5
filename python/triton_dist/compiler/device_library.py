"""Where the device libraries of docs/abi.md are, and a digest of their content for Triton's cache key.

The build (``scripts/build.sh``) writes one LLVM bitcode file per target into ``python/triton_dist/_device/``.
``$TRITON_DIST_DEVICE_LIB_DIR`` points the compiler at another directory holding files of the same names (a
development build, a test's modified copy); it is read on every call, never cached.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from triton_dist.abi import LIB_NAME, SYMBOL_PREFIX, WATCHDOG_LIBRARY_VARIANT

__all__ = [
    "DEFAULT_DEVICE_LIB_DIR",
    "DEVICE_LIB_DIR_ENV",
    "LIBRARY_FILES",
    "LIB_NAME",
    "SYMBOL_PREFIX",
    "WATCHDOG_LIBRARY_FILES",
    "DeviceLibraryMissingError",
    "DeviceLibraryUnreadableError",
    "device_lib_dir",
    "libraries_digest",
    "library_path",
    "require_library",
]

DEVICE_LIB_DIR_ENV = "TRITON_DIST_DEVICE_LIB_DIR"
DEFAULT_DEVICE_LIB_DIR = Path(__file__).resolve().parents[1] / "_device"

LIBRARY_FILES = {
    "cuda": "triton_dist.nvptx64.bc",
    "hip": "triton_dist.amdgcn.bc",
}
"""Triton backend name (``GPUTarget.backend``) -> bitcode file name."""

WATCHDOG_LIBRARY_FILES = {
    backend: name.replace(f"{LIB_NAME}.", f"{LIB_NAME}.{WATCHDOG_LIBRARY_VARIANT}.", 1)
    for backend, name in LIBRARY_FILES.items()
}
"""Triton backend name -> the watchdog variant's bitcode file (``triton_dist.watchdog.<target>.bc``): the same
functions, their waits watched with the timeout the runtime writes (``compiler/watchdog.py``)."""


class DeviceLibraryMissingError(RuntimeError):
    """A kernel calls triton_dist primitives but the device library for its target has not been built."""


class DeviceLibraryUnreadableError(RuntimeError):
    """The device library exists but the LLVM inside Triton cannot parse it."""


def device_lib_dir() -> Path:
    """The directory the compiler links from: ``$TRITON_DIST_DEVICE_LIB_DIR`` if set, else the package's ``_device``."""
    override = os.environ.get(DEVICE_LIB_DIR_ENV)
    return Path(override).expanduser().resolve() if override else DEFAULT_DEVICE_LIB_DIR


def library_path(backend: str, watchdog: bool = False) -> Path:
    """The bitcode file for Triton backend ``backend`` ("cuda" or "hip"), the watchdog variant with ``watchdog``; it
    may not exist (see ``require_library``)."""
    try:
        name = (WATCHDOG_LIBRARY_FILES if watchdog else LIBRARY_FILES)[backend]
    except KeyError:
        raise ValueError(f"triton_dist has device libraries for the cuda and hip backends, not {backend!r}") from None
    return device_lib_dir() / name


def require_library(backend: str, watchdog: bool = False) -> Path:
    """``library_path(backend, watchdog)``, or a ``DeviceLibraryMissingError`` that says how to build it."""
    path = library_path(backend, watchdog)
    if not path.is_file():
        where = f" (${DEVICE_LIB_DIR_ENV} is set)" if os.environ.get(DEVICE_LIB_DIR_ENV) else ""
        which = " (the wait watchdog's variant, asked for by a wait timeout)" if watchdog else ""
        raise DeviceLibraryMissingError(
            f"the triton_dist device library {path}{where}{which} does not exist, so kernels that call triton_dist "
            f"primitives cannot be linked for the {backend} backend: build it with scripts/build.sh"
        )
    return path


def libraries_digest() -> str:
    """SHA-256 over the content of every target's libraries, default and watchdog (or the fact that one is
    missing), and their file names.

    Computed on every call: a rebuilt library changes the digest in a process that started before the rebuild.
    """
    digest = hashlib.sha256()
    directory = device_lib_dir()
    files = [*LIBRARY_FILES.items(), *WATCHDOG_LIBRARY_FILES.items()]
    for backend, name in sorted(files):
        digest.update(f"{backend}:{name}:".encode())
        try:
            digest.update(hashlib.sha256((directory / name).read_bytes()).digest())
        except FileNotFoundError:
            digest.update(b"missing")
        digest.update(b";")
    return digest.hexdigest()
