"""Finding a named global in a loaded GPU module and writing bytes into it, through the CUDA or HIP driver; and the
host-mapped pinned memory the wait watchdog's records live in (``host_mapped_alloc``).

Both classes take the driver library as an argument so that tests can pass a fake with the same functions. The
write goes through a private non-blocking stream: a plain ``cuMemcpyHtoD`` would wait for every kernel already
running on the legacy default stream, and such a kernel may itself be waiting for a peer that needs this process to
load (and launch) its next kernel first.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

NOT_FOUND = 500
"""``CUDA_ERROR_NOT_FOUND`` and ``hipErrorNotFound``: the module has no global of that name."""

_NON_BLOCKING_STREAM = 1  # CU_STREAM_NON_BLOCKING == hipStreamNonBlocking
_HOST_ALLOC_MAPPED = 3  # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP == hipHostMallocPortable | Mapped


class ModuleGlobals(Protocol):
    """What the context installer needs from a GPU driver."""

    backend: str

    def lookup(self, module: int, name: str) -> tuple[int, int] | None:
        """``(device address, size in bytes)`` of global ``name`` in ``module``, or None if the module lacks it."""
        ...

    def write(self, address: int, payload: bytes) -> None:
        """Copy ``payload`` to device memory at ``address`` and wait until it has landed."""
        ...

    def host_mapped_alloc(self, size: int) -> tuple[int, int]:
        """``size`` zeroed bytes of pinned host memory mapped into the device's address space, never freed:
        ``(host address, device address)``. The wait watchdog's records live there, so the host can read one
        after the trap that wrote it has made the GPU context unusable."""
        ...


def _declare(lib: Any, name: str, restype: Any, argtypes: list[Any]) -> Any:
    function = getattr(lib, name)
    if isinstance(function, ctypes._CFuncPtr):  # type: ignore[attr-defined]  # a real library; a fake keeps its signature
        function.restype = restype
        function.argtypes = argtypes
    return function


class _DriverGlobals:
    backend = ""
    _host_alloc = ""
    _host_device_pointer = ""
    _get_global = ""
    _create_stream = ""
    _copy_async = ""
    _synchronize = ""
    _destroy_stream = ""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        pointer_u64 = ctypes.POINTER(ctypes.c_uint64)
        pointer_size = ctypes.POINTER(ctypes.c_size_t)
        pointer_handle = ctypes.POINTER(ctypes.c_void_p)
        self._get = _declare(
            lib, self._get_global, ctypes.c_int, [pointer_u64, pointer_size, ctypes.c_void_p, ctypes.c_char_p]
        )
        self._stream_create = _declare(lib, self._create_stream, ctypes.c_int, [pointer_handle, ctypes.c_uint])
        self._copy = _declare(
            lib, self._copy_async, ctypes.c_int, [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        )
        self._sync = _declare(lib, self._synchronize, ctypes.c_int, [ctypes.c_void_p])
        self._stream_destroy = _declare(lib, self._destroy_stream, ctypes.c_int, [ctypes.c_void_p])

    def error_string(self, code: int) -> str:
        raise NotImplementedError

    def _check(self, code: int, call: str) -> None:
        if code != 0:
            message = self.error_string(code)
            raise RuntimeError(f"{self.backend} driver call {call} failed with error {code} ({message})")

    def lookup(self, module: int, name: str) -> tuple[int, int] | None:
        address = ctypes.c_uint64(0)
        size = ctypes.c_size_t(0)
        code = self._get(ctypes.pointer(address), ctypes.pointer(size), ctypes.c_void_p(module), name.encode())
        if code == NOT_FOUND:
            return None
        self._check(code, f"{self._get_global}(module={module:#x}, {name!r})")
        return address.value, size.value

    def write(self, address: int, payload: bytes) -> None:
        stream = ctypes.c_void_p(0)
        self._check(self._stream_create(ctypes.pointer(stream), _NON_BLOCKING_STREAM), self._create_stream)
        try:
            host = ctypes.create_string_buffer(payload, len(payload))
            self._check(
                self._copy(ctypes.c_uint64(address), host, ctypes.c_size_t(len(payload)), stream), self._copy_async
            )
            self._check(self._sync(stream), self._synchronize)
        finally:
            self._stream_destroy(stream)

    def host_mapped_alloc(self, size: int) -> tuple[int, int]:
        # Declared on first use: only the watchdog needs them (and the tests' fake drivers may lack them).
        pointer_handle = ctypes.POINTER(ctypes.c_void_p)
        allocate = _declare(self._lib, self._host_alloc, ctypes.c_int, [pointer_handle, ctypes.c_size_t, ctypes.c_uint])
        device_pointer = _declare(
            self._lib, self._host_device_pointer, ctypes.c_int, [pointer_handle, ctypes.c_void_p, ctypes.c_uint]
        )
        host = ctypes.c_void_p(0)
        self._check(allocate(ctypes.pointer(host), ctypes.c_size_t(size), _HOST_ALLOC_MAPPED), self._host_alloc)
        ctypes.memset(host, 0, size)
        device = ctypes.c_void_p(0)
        self._check(device_pointer(ctypes.pointer(device), host, 0), self._host_device_pointer)
        return int(host.value or 0), int(device.value or 0)


class CudaModuleGlobals(_DriverGlobals):
    """Module globals through the CUDA driver API (``libcuda.so.1``)."""

    backend = "cuda"
    _host_alloc = "cuMemHostAlloc"
    _host_device_pointer = "cuMemHostGetDevicePointer_v2"
    _get_global = "cuModuleGetGlobal_v2"
    _create_stream = "cuStreamCreate"
    _copy_async = "cuMemcpyHtoDAsync_v2"
    _synchronize = "cuStreamSynchronize"
    _destroy_stream = "cuStreamDestroy_v2"

    def __init__(self, lib: Any | None = None) -> None:
        super().__init__(lib if lib is not None else ctypes.CDLL("libcuda.so.1"))
        self._error_string = _declare(
            self._lib, "cuGetErrorString", ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        )

    def error_string(self, code: int) -> str:
        message = ctypes.c_char_p()
        if self._error_string(code, ctypes.pointer(message)) != 0 or not message.value:
            return "unknown error"
        return message.value.decode(errors="replace")


def _hip_runtime_path() -> str:
    # Load the very library Triton loaded, so module handles mean the same thing to both.
    try:
        from triton.backends.amd.driver import _get_path_to_hip_runtime_dylib

        return _get_path_to_hip_runtime_dylib()
    except (ImportError, RuntimeError):
        return "libamdhip64.so"


class HipModuleGlobals(_DriverGlobals):
    """Module globals through the HIP runtime (``libamdhip64.so``)."""

    backend = "hip"
    _host_alloc = "hipHostMalloc"
    _host_device_pointer = "hipHostGetDevicePointer"
    _get_global = "hipModuleGetGlobal"
    _create_stream = "hipStreamCreateWithFlags"
    _copy_async = "hipMemcpyHtoDAsync"
    _synchronize = "hipStreamSynchronize"
    _destroy_stream = "hipStreamDestroy"

    def __init__(self, lib: Any | None = None) -> None:
        super().__init__(lib if lib is not None else ctypes.CDLL(_hip_runtime_path()))
        self._error_string = _declare(self._lib, "hipGetErrorString", ctypes.c_char_p, [ctypes.c_int])

    def error_string(self, code: int) -> str:
        message = self._error_string(code)
        if isinstance(message, bytes):
            return message.decode(errors="replace")
        return str(message) if message else "unknown error"
