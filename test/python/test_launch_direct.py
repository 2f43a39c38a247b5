"""The direct launch's parameter packing (ops/common/launch.py) without GPUs: the packed parameters are, in order
and size, the parameters of the compiled entry in its PTX, and hold the values the plan gives them."""

from __future__ import annotations

import ctypes
import re

import torch
import triton
import triton.language as tl

from triton_dist.ops.common import launch
from triton_dist.testing.compile import compile_for


@triton.jit
def _mixed_kernel(flag_ptr, count, offset, scale, out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    value = tl.load(flag_ptr + i).to(tl.float32) * scale + count + offset
    tl.store(out_ptr + i, value)


SIGNATURE = {"flag_ptr": "*i32", "count": "i32", "offset": "i64", "scale": "fp32", "out_ptr": "*fp32"}


def _entry_parameter_bytes(ptx: str, name: str) -> list[int]:
    entry = ptx[ptx.index(f".entry {name}(") :]
    entry = entry[: entry.index(")")]
    sizes = {"u32": 4, "b32": 4, "f32": 4, "s32": 4, "u64": 8, "b64": 8, "f64": 8, "s64": 8, "u8": 1, "b8": 1}
    return [sizes[kind] for kind in re.findall(r"\.param \.(\w+)", entry)]


def test_packed_types_are_the_compiled_entry_parameters() -> None:
    compiled = compile_for(_mixed_kernel, SIGNATURE, constexprs={"BLOCK": 32})
    types = launch.parameter_ctypes({**SIGNATURE, "BLOCK": "constexpr"})
    assert types is not None
    assert [ctypes.sizeof(kind) for kind in types] == _entry_parameter_bytes(compiled.asm["ptx"], "_mixed_kernel")


def test_unpackable_parameters_keep_tritons_launcher() -> None:
    assert launch.parameter_ctypes({"x": "*bf16", "desc": "tensordesc<bf16[64, 64]>"}) is None
    assert launch.parameter_ctypes({"x": "*bf16", "h": "fp16"}) is None
    assert launch.parameter_ctypes({"x": "*bf16", "pair": ("i32", "i32")}) is None


def test_packed_values_are_read_through_the_pointer_array() -> None:
    kinds = ["*i32", "i32", "i64", "fp32", "*fp32"]
    types = launch.parameter_ctypes(dict(zip(SIGNATURE, kinds, strict=True)))
    assert types is not None
    out = torch.empty(4)
    packed = launch.PackedParameters(types, kinds, [-(2**40), 0.5, out], leading=2)
    flag = torch.zeros(4, dtype=torch.int32)
    for leading in ((flag, 7), (0x7F00_0000_1000, -3)):
        packed.set_leading(leading)
        pointers = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
        read = [ctypes.cast(pointers[i], ctypes.POINTER(kind)).contents.value for i, kind in enumerate(types)]
        first = leading[0].data_ptr() if isinstance(leading[0], torch.Tensor) else leading[0]
        assert read == [first, leading[1], -(2**40), 0.5, out.data_ptr(), 0, 0]
