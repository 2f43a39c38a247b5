"""The direct launch's parameter packing (ops/common/launch.py) without GPUs: the packed parameters are, in order
and size, the parameters of the compiled entry in its PTX, and hold the values the plan gives them."""

from __future__ import annotations

import ctypes
import re

import pytest
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


class _FakeDriver:
    """cuda.bindings.driver as DriverLaunch uses it: records each cuLaunchKernel with the parameter values it would
    pass (read through the packed pointer array at the time of the call)."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self, types: list[type]) -> None:
        self.types = types
        self.launches: list[tuple] = []

    @staticmethod
    def CUfunction(handle: int) -> tuple[str, int]:  # noqa: N802 (the driver's name)
        return ("function", handle)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802, ANN001, ANN201
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        values = [ctypes.cast(pointers[i], ctypes.POINTER(kind)).contents.value for i, kind in enumerate(self.types)]
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), shared, stream, values, extra))
        return (0,)


class _Metadata:
    num_ctas, launch_cooperative_grid, launch_pdl = 1, False, False
    global_scratch_size = profile_scratch_size = 0
    tensordesc_meta: list = []
    num_warps, shared = 2, 1024


class _Compiled:
    def __init__(self, signature: dict[str, str], **metadata: object) -> None:
        self.src = type("Src", (), {"signature": signature})()
        self.metadata = _Metadata()
        for name, value in metadata.items():
            setattr(self.metadata, name, value)
        self.function = 0xF00


def _with_fake_driver(monkeypatch, types: list[type]) -> _FakeDriver:  # noqa: ANN001
    import sys
    import types as pytypes

    fake = _FakeDriver(types)
    bindings = pytypes.ModuleType("cuda.bindings")
    bindings.driver = fake  # type: ignore[attr-defined]
    cuda = pytypes.ModuleType("cuda")
    cuda.bindings = bindings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    monkeypatch.setattr(torch.version, "hip", None)
    return fake


def test_a_direct_launch_passes_the_leading_then_the_fixed_values(monkeypatch) -> None:  # noqa: ANN001
    signature = {"value": "i32", "flags_ptr": "*i32", "BLOCK": "constexpr", "segment": "i32"}
    types = launch.parameter_ctypes(signature)
    assert types is not None
    fake = _with_fake_driver(monkeypatch, types)
    flags = torch.zeros(4, dtype=torch.int32)
    direct = launch.DriverLaunch.of(_Compiled(signature), (3, 1, 1), (flags.data_ptr(), 128, 1))
    assert direct is not None
    direct.launch(77, (5,))
    direct.launch(78, (6,))
    assert fake.launches == [
        (("function", 0xF00), (3, 1, 1), (64, 1, 1), 1024, 77, [5, flags.data_ptr(), 1, 0, 0], 0),
        (("function", 0xF00), (3, 1, 1), (64, 1, 1), 1024, 78, [6, flags.data_ptr(), 1, 0, 0], 0),
    ], "the constexpr BLOCK is left out; Triton's two scratch pointers are null"


def test_kernels_a_direct_launch_cannot_pass_keep_tritons_launcher(monkeypatch) -> None:  # noqa: ANN001
    signature = {"value": "i32", "flags_ptr": "*i32"}
    fake = _with_fake_driver(monkeypatch, launch.parameter_ctypes(signature) or [])
    fixed = (0x1000,)
    assert launch.DriverLaunch.of(_Compiled(signature), (1, 1, 1), fixed) is not None
    for metadata in ({"num_ctas": 2}, {"launch_pdl": True}, {"global_scratch_size": 8}, {"tensordesc_meta": [{}]}):
        assert launch.DriverLaunch.of(_Compiled(signature, **metadata), (1, 1, 1), fixed) is None, metadata
    # A per-call value compiled in as a constant (a leading argument Triton specialized to 1) cannot vary per call.
    assert launch.DriverLaunch.of(_Compiled({"value": "constexpr", "flags_ptr": "*i32"}), (1, 1, 1), fixed) is None
    assert launch.DriverLaunch.of(_Compiled({"value": "fp16", "flags_ptr": "*i32"}), (1, 1, 1), fixed) is None
    empty = launch.DriverLaunch.of(_Compiled(signature), (0, 1, 1), fixed)
    assert empty is not None
    empty.launch(1, (2,))
    assert fake.launches == [], "an empty grid launches nothing (as Triton's launcher)"


def test_a_failed_launch_makes_the_context_current_and_retries_once(monkeypatch) -> None:  # noqa: ANN001
    signature = {"flags_ptr": "*i32"}
    fake = _with_fake_driver(monkeypatch, launch.parameter_ctypes(signature) or [])
    results = iter([(201,), (0,)])  # CUDA_ERROR_INVALID_CONTEXT (a thread without a current context), then success
    recorded = fake.cuLaunchKernel
    fake.cuLaunchKernel = lambda *args: (recorded(*args), next(results))[1]  # type: ignore[method-assign]
    made_current: list[object] = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    fake.cuDeviceGet = lambda ordinal: (0, ("device", ordinal))  # type: ignore[attr-defined]
    fake.cuDevicePrimaryCtxRetain = lambda device: (0, ("primary context of", device))  # type: ignore[attr-defined]
    fake.cuCtxSetCurrent = made_current.append  # type: ignore[attr-defined]
    direct = launch.DriverLaunch.of(_Compiled(signature), (1, 1, 1), (0x1000,))
    assert direct is not None
    direct.launch(5, ())
    assert made_current == [("primary context of", ("device", 3))] and len(fake.launches) == 2
    fake.cuLaunchKernel = lambda *args: (999,)  # type: ignore[method-assign]
    failing = launch.DriverLaunch.of(_Compiled(signature), (1, 1, 1), (0x1000,))
    assert failing is not None
    with pytest.raises(RuntimeError, match="cuLaunchKernel failed: 999"):
        failing.launch(5, ())
