"""The check of a caller's ``out=`` tensor, for ops that write their result into it instead of allocating one."""

from __future__ import annotations

from typing import Any

import torch

from triton_dist.ops.common.errors import OpInputError


def _byte_span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes ``[first, end)`` that ``tensor``'s elements occupy (``(0, 0)`` for an empty one, which shares no
    byte with anything wherever its pointer lies: ``PlanCache.eager_plan`` agrees)."""
    if tensor.numel() == 0:
        return 0, 0
    first = tensor.data_ptr()
    if tensor.is_contiguous():
        return first, first + tensor.nbytes
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return first, first + (last + 1) * tensor.element_size()


def check_out(
    op: str,
    out: Any,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    inputs: tuple[tuple[str, torch.Tensor], ...],
    error: type[OpInputError],
    *,
    addresses: bool = True,
) -> None:
    """Raise ``error`` naming ``out`` and what is wrong with it unless ``op`` can write its result into it.

    ``out`` must be a torch.Tensor of exactly ``shape``, ``dtype`` and ``device``, contiguous; with ``addresses``
    (a call that writes into ``out`` itself), also start on a 16-byte boundary (as torch's allocator gives: the
    kernels were compiled for an aligned output) and share no byte with any of ``inputs`` ((name, tensor) pairs),
    which the op still reads while it writes. Without ``addresses`` (the dispatcher's path, which copies a result
    into ``out`` and may see tensors without storage) those two are not checked. A good ``out`` costs 1-2 µs of
    host time on a loaded 2-core CPU (an eager op's fast path runs this on every call with ``out``), about what
    ``torch.empty`` of a CPU tensor costs there.
    """
    if not (
        isinstance(out, torch.Tensor)
        and out.shape == shape
        and out.dtype == dtype
        and out.device == device
        and out.is_contiguous()
    ):
        _refuse(op, out, shape, dtype, device, error)
    if not addresses:
        return
    first = out.data_ptr()
    if first % 16:
        raise error(
            f"{op}: out starts {first % 16} bytes past a 16-byte boundary; it must start on one (as a tensor from "
            "torch.empty does)"
        )
    end = first + out.nbytes
    if end == first:
        return  # nothing written
    for name, tensor in inputs:
        other_first, other_end = _byte_span(tensor)
        if first < other_end and other_first < end:
            raise error(f"{op}: out overlaps the input {name} in memory; pass an out that shares no memory with it")


def _refuse(
    op: str, out: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, error: type[OpInputError]
) -> None:
    """Raise ``error`` naming each way ``out`` is not a contiguous ``dtype`` tensor of ``shape`` on ``device``."""
    if not isinstance(out, torch.Tensor):
        raise error(f"{op}: out must be a torch.Tensor, got {type(out).__name__}")
    problems = []
    if out.shape != shape:
        problems.append(f"shape {list(out.shape)} (the result's is {list(shape)})")
    if out.dtype != dtype:
        problems.append(f"dtype {out.dtype} (the result's is {dtype})")
    if out.device != device:
        problems.append(f"device {out.device} (the result's is {device})")
    if not out.is_contiguous():
        problems.append(f"strides {list(out.stride())} (it must be contiguous)")
    raise error(f"{op}: out has {', '.join(problems)}")
