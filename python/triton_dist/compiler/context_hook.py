"""Makes sure the runtime's context installer runs for every kernel that uses a primitive, however it is launched.

The runtime fills a kernel's device context from Triton's ``kernel_load_end_hook``, registered when
``triton_dist.runtime`` is imported. A script that imports only ``triton_dist.language`` would load its kernels
without that hook and run them on the zeroed context. So whenever a kernel that calls a primitive is hashed (on
every cache lookup, hit or miss: see ``cache_key.py``) or linked (``stages_hook.py``), the hook is registered here
first. A second launch of a kernel whose load hook raised (Triton 3.6 keeps the loaded module and skips the hook
the second time) is refused by the installer's ``launch_enter_hook`` (``runtime/context/installer.py``); the
device-side context check (``checks.py``) covers what no host hook sees: launchers that bypass Triton's hooks.
"""

from __future__ import annotations

import importlib
import sys


def ensure_context_hook() -> bool:
    """Register ``triton_dist.runtime.install_context_hook`` with Triton (idempotent); False where torch is not
    imported.

    The runtime is built on torch: a process that launches kernels on symmetric tensors has imported torch before
    it launches (and so before Triton hashes the kernel). A process without torch (a compile-only tool) gets no
    hook and pays no torch import; were it to launch a kernel anyway, the device-side context check stops it.
    """
    if "torch" not in sys.modules:
        return False
    runtime = importlib.import_module("triton_dist.runtime")
    runtime.install_context_hook()
    return True
