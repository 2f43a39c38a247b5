"""Torch tensors that own one block of the symmetric heap.

A heap tensor must return its block when the *memory* is no longer referenced, not when the first Python tensor
object dies: ``x = triton_dist.empty(n)[::2]`` keeps only a view alive. So each block is handed to torch through a
DLPack capsule whose deleter torch calls when the storage dies (after the last view, slice or ``.view(dtype)``).
The deleter only queues the block; the heap drains the queue on its next allocation, so no allocator state is
touched from inside a deallocation.

The deleter and its bookkeeping are deliberately immortal (never collected): tensors that are still alive at
interpreter shutdown are freed after module globals are gone, and their deleter must still be callable then.
"""

from __future__ import annotations

import ctypes
from collections import deque
from typing import Any

import torch

_DL_CPU = 1
_DL_CUDA = 2
_DL_ROCM = 10
_DL_UINT = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# The deleter receives the DLManagedTensor's address as a plain integer, so it needs no ctypes call (and no module
# global) to find its entry.
_DELETER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER_TYPE)]


def _make_deleter(live: dict[int, tuple[Any, ...]]) -> Any:
    def deleter(address: int | None) -> None:
        entry = live.pop(address, None) if address is not None else None
        if entry is not None:
            released, token = entry[2], entry[3]
            released.append(token)

    return _DELETER_TYPE(deleter)


# address of a _DLManagedTensor -> (struct, shape array, release queue, token, keepalive)
_LIVE: dict[int, tuple[Any, ...]] = {}
_DELETER = _make_deleter(_LIVE)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_LIVE))
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_DELETER))

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _dlpack_device(device: torch.device) -> _DLDevice:
    if device.type == "cpu":
        return _DLDevice(_DL_CPU, 0)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _DLDevice(_DL_ROCM if torch.version.hip else _DL_CUDA, index)
    raise ValueError(f"symmetric heap tensors live on CUDA/ROCm or CPU devices, not {device}")


class BlockTensorFactory:
    """Wraps heap blocks as uint8 torch tensors whose storage returns the block when it dies.

    ``keepalive`` is referenced by every live block tensor: pass the heap's backing memory, so that the memory
    outlives ``finalize()`` for as long as user tensors still point into it.
    """

    def __init__(self, device: torch.device, keepalive: object) -> None:
        self.device = device
        self._dl_device = _dlpack_device(device)
        self._keepalive = keepalive
        self._released: deque[Any] = deque()

    def wrap(self, address: int, nbytes: int, token: object) -> torch.Tensor:
        """A 1-D uint8 tensor over ``[address, address + nbytes)``; ``token`` is queued when its storage dies."""
        shape = (ctypes.c_int64 * 1)(nbytes)
        managed = _DLManagedTensor()
        managed.dl_tensor.data = address
        managed.dl_tensor.device = self._dl_device
        managed.dl_tensor.ndim = 1
        managed.dl_tensor.dtype = _DLDataType(_DL_UINT, 8, 1)
        managed.dl_tensor.shape = shape
        managed.dl_tensor.byte_offset = 0
        managed.deleter = _DELETER
        key = ctypes.addressof(managed)
        _LIVE[key] = (managed, shape, self._released, token, self._keepalive)
        try:
            return torch.utils.dlpack.from_dlpack(_capsule_new(key, b"dltensor", None))
        except BaseException:
            _LIVE.pop(key, None)
            raise

    def take_released(self) -> list[Any]:
        """The tokens of blocks whose tensors have died since the last call."""
        tokens = []
        while self._released:
            tokens.append(self._released.popleft())
        return tokens
