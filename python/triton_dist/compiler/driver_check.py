"""A kernel launched where no GPU driver is active says so in words a user can act on.

Triton picks its driver on first use (``triton.runtime.driver.active``); on a machine without a usable GPU that
raises ``RuntimeError: 0 active drivers ([]). There should only be one.`` from inside ``JITFunction.run``. Importing
``triton_dist.language`` puts :class:`ActiveDriverStandIn` in the driver's place while Triton has not chosen one
yet: its first use picks the driver exactly as Triton would and steps aside (``driver.set_active(real)``), so every
later use reaches the real driver directly. Only when no driver is active does it raise :class:`NoGpuDriverError`,
naming the kernel being launched and what to check. A driver Triton already chose is never replaced.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any


class NoGpuDriverError(RuntimeError):
    """A Triton kernel was launched (or the driver used) in a process that sees no CUDA or ROCm GPU."""


def _launching_kernel() -> str | None:
    """The name of the kernel whose ``JITFunction.run`` is on the stack, if any."""
    from triton.runtime.jit import JITFunction

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "run":
            owner = frame.f_locals.get("self")
            if isinstance(owner, JITFunction):
                return owner.__name__
        frame = frame.f_back
    return None


def no_driver_message(kernel: str | None, triton_error: BaseException) -> str:
    """What :class:`NoGpuDriverError` says (``kernel``: the kernel being launched, if known)."""
    what = f"cannot launch kernel {kernel!r}" if kernel else "cannot use a GPU"
    return (
        f"triton_dist: {what}: no GPU driver is active in this process (Triton: {triton_error}). Kernels that use "
        "triton_dist primitives run on NVIDIA (CUDA) or AMD (ROCm) GPUs: check that one is visible "
        "(nvidia-smi / rocm-smi, CUDA_VISIBLE_DEVICES) and that torch.cuda.is_available() is True. A heap from "
        "triton_dist.init(device='cpu') serves host code only; to compile kernels without a GPU, use "
        "triton_dist.testing.compile_for."
    )


class ActiveDriverStandIn:
    """Stands in for ``triton.runtime.driver.active`` until its first use (see the module docstring).

    ``config`` is Triton's ``DriverConfig`` (``triton.runtime.driver``; tests pass their own).
    """

    def __init__(self, config: Any) -> None:
        self._config = config

    def resolve(self) -> Any:
        """The driver Triton picks (now active in the stand-in's place), or :class:`NoGpuDriverError`."""
        try:
            real = self._config.default
        except RuntimeError as error:
            if not str(error).startswith("0 active drivers"):
                raise
            raise NoGpuDriverError(no_driver_message(_launching_kernel(), error)) from error
        self._config.set_active(real)
        return real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            # Probes such as hasattr(driver.active, "_obj") (torch inductor) must see an AttributeError, never
            # this module's error; they reach the real driver once it is resolved.
            try:
                real = self.resolve()
            except NoGpuDriverError:
                raise AttributeError(name) from None
            return getattr(real, name)
        return getattr(self.resolve(), name)


def install_driver_check(config: Any = None) -> bool:
    """Put the stand-in in place of Triton's active driver if Triton has not chosen one yet (True), else leave the
    driver alone (False). Idempotent."""
    if config is None:
        from triton.runtime import driver

        config = driver
    # DriverConfig keeps the chosen driver in `_active` (None until first use); `active` would choose one now.
    if vars(config).get("_active") is not None:
        return isinstance(vars(config)["_active"], ActiveDriverStandIn)
    config.set_active(ActiveDriverStandIn(config))
    return True
