"""triton_dist.compiler: linking the triton_dist device library into kernels compiled by the stock Triton wheel.

Importing :mod:`triton_dist.language` installs the hook; nothing here needs a GPU or torch.

- :func:`install_stages_hook` / :func:`uninstall_stages_hook`: the ``add_stages_inspection_hook`` that adds the
  library to the ``llir`` stage's ``extern_libs`` (chaining any hook installed before it).
- :func:`library_path`, :func:`device_lib_dir`: where the bitcode is (``$TRITON_DIST_DEVICE_LIB_DIR`` overrides).
- ``DEVICE_LIBRARY_KEY``: the object that puts the libraries' content into every using kernel's cache key.
- :func:`check_level` / :func:`override_checks` / ``Checks``: which device-side checks kernels get
  (``TRITON_DIST_DEBUG``).
- :func:`register_context_hook` (the runtime registers its context hook here: the compiler never imports the
  runtime) and :func:`ensure_context_hook` (puts it, or a stand-in that says to call ``triton_dist.init()``, into
  Triton's load hooks).
- :func:`wait_timeout_ns` / :func:`set_wait_timeout` / :func:`watchdog_enabled`: the wait watchdog
  (``TRITON_DIST_WAIT_TIMEOUT_S``), which selects the watchdog library variant.
"""

from __future__ import annotations

from triton_dist.compiler.cache_key import DEVICE_LIBRARY_KEY, DeviceLibraryKey, frontend_digest
from triton_dist.compiler.checks import DEBUG_ENV, Checks, check_level, override_checks
from triton_dist.compiler.context_hook import ensure_context_hook, register_context_hook
from triton_dist.compiler.device_library import (
    DEFAULT_DEVICE_LIB_DIR,
    DEVICE_LIB_DIR_ENV,
    LIB_NAME,
    LIBRARY_FILES,
    WATCHDOG_LIBRARY_FILES,
    DeviceLibraryMissingError,
    DeviceLibraryUnreadableError,
    device_lib_dir,
    libraries_digest,
    library_path,
    require_library,
)
from triton_dist.compiler.stages_hook import (
    DeviceLibraryLinker,
    install_stages_hook,
    installed_hook,
    uninstall_stages_hook,
)
from triton_dist.compiler.watchdog import (
    DEFAULT_WAIT_TIMEOUT_S,
    WAIT_TIMEOUT_ENV,
    set_wait_timeout,
    wait_timeout_ns,
    watchdog_enabled,
)

__all__ = [
    "DEBUG_ENV",
    "DEFAULT_DEVICE_LIB_DIR",
    "DEVICE_LIBRARY_KEY",
    "DEVICE_LIB_DIR_ENV",
    "DEFAULT_WAIT_TIMEOUT_S",
    "LIBRARY_FILES",
    "LIB_NAME",
    "WAIT_TIMEOUT_ENV",
    "WATCHDOG_LIBRARY_FILES",
    "Checks",
    "DeviceLibraryKey",
    "DeviceLibraryLinker",
    "DeviceLibraryMissingError",
    "DeviceLibraryUnreadableError",
    "check_level",
    "device_lib_dir",
    "ensure_context_hook",
    "frontend_digest",
    "install_stages_hook",
    "installed_hook",
    "libraries_digest",
    "library_path",
    "override_checks",
    "register_context_hook",
    "require_library",
    "set_wait_timeout",
    "uninstall_stages_hook",
    "wait_timeout_ns",
    "watchdog_enabled",
]
