"""The copy-engine producer: chunk copies on a stream, each followed by a flag write that a kernel can wait for.

Overlap kernels leave every SM to their math and let the GPU's copy engines move the data: a side stream copies
chunk after chunk (``cudaMemcpyAsync`` through ``Tensor.copy_``) and, stream-ordered after each copy, writes a flag
that the consuming kernel awaits with ``dl.wait(flags + i, 1, "sys", "acquire", value)``.

Two ways to write the flag, chosen by ``flag_writer``:

- ``"stream_memop"`` (CUDA): ``cuStreamWriteValue32`` through ``cuda.bindings.driver``. The driver fences the
  stream's earlier writes (like ``__threadfence_system``, scoped to the stream) before the write, uses no SM, and
  is recorded as a memory-operation node under CUDA-graph capture.
- ``"kernel"`` (CUDA and HIP): a one-thread Triton kernel that stores the value with a system-scope release
  (``atom.exch.release.sys``). Stream order puts it after the copy; the release makes the copy's writes visible
  before the flag to every observer.

``"auto"`` picks the stream memory operation where it exists (CUDA with cuda-bindings installed) and the kernel
otherwise: it occupies no SM (the point of a copy-engine producer), costs the host one driver call instead of a
Triton launch, and needs no compilation. ``GPU_CHECK_ONLY=copy_engine GPU_CHECK_MEASURE=1 scripts/gpu_check.sh``
(test/gpu/check_copy_engine.py --measure) compares the two: per-chunk GPU time eager and graph-replayed, host
enqueue time, capturability; its results are in the runs docs/results/README.md lists.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch

FLAG_WRITERS = ("auto", "stream_memop", "kernel")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

_WriteFlag = Callable[[torch.cuda.Stream, torch.Tensor, int, int], None]
"""``(stream, flags, index, value)``: enqueue the write of ``value`` into ``flags[index]`` on ``stream``."""


def _cuda_driver() -> Any:
    """``cuda.bindings.driver`` (``cuda.cuda`` in older releases), or None where cuda-bindings is not installed."""
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # cuda-python < 12.6
        except ImportError:
            return None
    return driver


def stream_memop_available() -> bool:
    """Whether ``flag_writer="stream_memop"`` can work here: a CUDA (not ROCm) torch and cuda-bindings."""
    return torch.version.hip is None and _cuda_driver() is not None


class _StreamMemopWriter:
    """Flag writes as ``cuStreamWriteValue32(stream, address, value, CU_STREAM_WRITE_VALUE_DEFAULT)``."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self._write = driver.cuStreamWriteValue32
        self._success = driver.CUresult.CUDA_SUCCESS
        self._default = int(driver.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT)

    def __call__(self, stream: torch.cuda.Stream, flags: torch.Tensor, index: int, value: int) -> None:
        address = flags.data_ptr() + index * flags.stride(0) * flags.element_size()
        (error,) = self._write(stream.cuda_stream, address, value & 0xFFFFFFFF, self._default)
        if error != self._success:
            _, text = self._driver.cuGetErrorString(error)
            reason = text.decode() if isinstance(text, bytes) else str(text)
            raise RuntimeError(
                f"cuStreamWriteValue32(address={address:#x}, value={value}) failed: {error} ({reason}); the flag "
                f"must be device memory this GPU can write (a symmetric tensor or a peer's view of one)"
            )


_kernel_writer_cache: list[_WriteFlag] = []


def _kernel_writer() -> _WriteFlag:
    if _kernel_writer_cache:
        return _kernel_writer_cache[0]
    from triton_dist.runtime.flag_kernel import write_flag_kernel

    def write(stream: torch.cuda.Stream, flags: torch.Tensor, index: int, value: int) -> None:
        with torch.cuda.device(flags.device), torch.cuda.stream(stream):
            write_flag_kernel[(1,)](flags, index * flags.stride(0), value, num_warps=1)

    _kernel_writer_cache.append(write)
    return write


_memop_writer_cache: list[_WriteFlag] = []


def flag_writer_for(name: str) -> _WriteFlag:
    """The ``(stream, flags, index, value) -> None`` function that enqueues one flag write of kind ``name``."""
    if name not in FLAG_WRITERS:
        raise ValueError(f"flag_writer must be one of {', '.join(map(repr, FLAG_WRITERS))}, got {name!r}")
    if name == "auto":
        name = "stream_memop" if stream_memop_available() else "kernel"
    if name == "kernel":
        return _kernel_writer()
    if torch.version.hip is not None:
        raise RuntimeError("flag_writer='stream_memop' is CUDA-only; use flag_writer='kernel' on ROCm")
    if not _memop_writer_cache:
        driver = _cuda_driver()
        if driver is None:
            raise RuntimeError(
                "flag_writer='stream_memop' needs cuda-bindings (pip install cuda-bindings); flag_writer='kernel' "
                "needs nothing extra"
            )
        _memop_writer_cache.append(_StreamMemopWriter(driver))
    return _memop_writer_cache[0]


def _check_arguments(
    copies: Sequence[tuple[torch.Tensor, torch.Tensor]], flags: torch.Tensor, values: Sequence[int]
) -> None:
    if not isinstance(flags, torch.Tensor) or flags.dtype != torch.int32 or flags.dim() != 1:
        described = f"{flags.dtype} tensor of shape {list(flags.shape)}" if isinstance(flags, torch.Tensor) else flags
        raise ValueError(f"flags must be a 1-D int32 tensor (symmetric, or a peer's view of one), got {described}")
    if len(values) != len(copies):
        raise ValueError(f"got {len(copies)} copies but {len(values)} flag values; give one value per copy")
    if len(copies) > flags.numel():
        raise ValueError(f"got {len(copies)} copies but only {flags.numel()} flags; flag i follows copy i")
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not _INT32_MIN <= value <= _INT32_MAX:
            raise ValueError(f"values[{index}] must be an int32 (an integer in [-2**31, 2**31)), got {value!r}")
    for index, pair in enumerate(copies):
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ValueError(f"copies[{index}] must be a (destination, source) pair of tensors, got {pair!r}")
        destination, source = pair
        if not isinstance(destination, torch.Tensor) or not isinstance(source, torch.Tensor):
            raise ValueError(
                f"copies[{index}] must hold two tensors, got {type(destination).__name__} and {type(source).__name__}"
            )
        if destination.shape != source.shape:
            raise ValueError(
                f"copies[{index}]: destination shape {list(destination.shape)} != source shape {list(source.shape)}"
            )
    if flags.device.type != "cuda":
        raise ValueError(f"flags must be on a GPU, got a tensor on {flags.device}")
    for index, (destination, source) in enumerate(copies):
        if destination.device != flags.device or source.device.type != "cuda":
            raise ValueError(
                f"copies[{index}]: the destination must be on the flags' device {flags.device} (a peer's memory is "
                f"reached through a view on this device: triton_dist.runtime.peer_tensor) and the source on a GPU; "
                f"got destination on {destination.device}, source on {source.device}"
            )


def copy_chunks_with_flags(
    copies: Sequence[tuple[torch.Tensor, torch.Tensor]],
    flags: torch.Tensor,
    values: Sequence[int],
    *,
    stream: torch.cuda.Stream | None = None,
    flag_writer: str = "auto",
) -> None:
    """For each ``i``: enqueue ``copies[i][0].copy_(copies[i][1])`` on ``stream``, then write ``values[i]`` to
    ``flags[i]``, stream-ordered after that copy.

    A kernel that waits for the flag, ``dl.wait(flags_ptr + i, 1, "sys", "acquire", values[i])``, then sees the
    whole chunk: the flag is never visible before the data it guards (test/gpu/check_copy_engine.py checks this on
    GPUs, eager and CUDA-graph-captured). The host does not wait.

    Args:
        copies: ``(destination, source)`` tensor pairs of equal shape; a destination on a peer is that peer's view
            of a symmetric tensor (``triton_dist.runtime.peer_tensor``).
        flags: a 1-D int32 tensor with at least ``len(copies)`` flags: a symmetric tensor, or a peer's view of one
            (the consumer's flags live in the consumer's memory).
        values: one int32 per copy. Use values that only grow (epochs) so that flags never need resetting.
        stream: where to enqueue (default: the current stream). A side stream leaves the current one free for
            kernels; order it against them with events as usual. Works inside CUDA-graph capture (capture
            ``stream``, or leave it None inside ``torch.cuda.graph``).
        flag_writer: ``"auto"``, ``"stream_memop"`` or ``"kernel"`` (see the module docstring).
    """
    _check_arguments(copies, flags, values)
    write_flag = flag_writer_for(flag_writer)
    stream = stream if stream is not None else torch.cuda.current_stream(flags.device)
    with torch.cuda.device(flags.device), torch.cuda.stream(stream):
        for index, ((destination, source), value) in enumerate(zip(copies, values, strict=True)):
            destination.copy_(source, non_blocking=True)
            write_flag(stream, flags, index, int(value))
