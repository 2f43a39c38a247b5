"""``copy_chunks_with_flags`` without a GPU: argument checks, writer selection, the ``cuStreamWriteValue32`` call
(through a fake ``cuda.bindings.driver``) and the flag kernel's code for sm_90 and gfx942.

The GPU behaviour (the flag is never visible before its chunk, eager and graph-captured) is
test/gpu/check_copy_engine.py.
"""

import enum
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from triton_dist.runtime import copy_engine
from triton_dist.runtime.copy_engine import copy_chunks_with_flags, flag_writer_for

DEVICE_LIBS = Path(__file__).resolve().parents[2] / "python" / "triton_dist" / "_device"


def pair(n=4):
    return (torch.zeros(n, dtype=torch.int32), torch.arange(n, dtype=torch.int32))


@pytest.mark.parametrize(
    ("copies", "flags", "values", "message"),
    [
        ([pair()], torch.zeros(2, dtype=torch.int64), [1], "1-D int32"),
        ([pair()], torch.zeros(2, 2, dtype=torch.int32), [1], "1-D int32"),
        ([pair(), pair()], torch.zeros(2, dtype=torch.int32), [1], "2 copies but 1 flag values"),
        ([pair(), pair()], torch.zeros(1, dtype=torch.int32), [1, 2], "only 1 flags"),
        ([pair()], torch.zeros(1, dtype=torch.int32), [2**31], r"values\[0\] must be an int32"),
        ([pair()], torch.zeros(1, dtype=torch.int32), [True], r"values\[0\] must be an int32"),
        ([pair()], torch.zeros(1, dtype=torch.int32), [1.0], r"values\[0\] must be an int32"),
        ([(torch.zeros(4),)], torch.zeros(1, dtype=torch.int32), [1], r"copies\[0\] must be a \(destination, source\)"),
        ([(torch.zeros(4), "x")], torch.zeros(1, dtype=torch.int32), [1], "two tensors, got Tensor and str"),
        ([(torch.zeros(4), torch.zeros(5))], torch.zeros(1, dtype=torch.int32), [1], r"shape \[4\] != source shape"),
        ([pair()], torch.zeros(1, dtype=torch.int32), [1], "flags must be on a GPU"),
        ([pair()], torch.zeros(1, dtype=torch.int32), [np.int32(-5)], "flags must be on a GPU"),  # values accepted
    ],
)
def test_bad_arguments_name_the_problem(copies, flags, values, message):
    with pytest.raises(ValueError, match=message):
        copy_chunks_with_flags(copies, flags, values)


def test_unknown_writer_is_rejected():
    with pytest.raises(ValueError, match="flag_writer must be one of 'auto', 'stream_memop', 'kernel'"):
        flag_writer_for("dma")


def test_auto_falls_back_to_the_kernel_without_cuda_bindings(monkeypatch):
    monkeypatch.setattr(copy_engine, "_cuda_driver", lambda: None)
    monkeypatch.setattr(copy_engine, "_memop_writer_cache", [])
    assert not copy_engine.stream_memop_available()
    assert flag_writer_for("auto") is flag_writer_for("kernel")
    with pytest.raises(RuntimeError, match="needs cuda-bindings"):
        flag_writer_for("stream_memop")


class FakeDriver:
    """The parts of ``cuda.bindings.driver`` the stream-memop writer uses."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1

    class CUstreamWriteValue_flags(enum.IntEnum):  # noqa: N801 (the binding's name)
        CU_STREAM_WRITE_VALUE_DEFAULT = 0
        CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 1

    def __init__(self, fail=False):
        self.calls = []
        self.fail = fail

    def cuStreamWriteValue32(self, stream, address, value, flags):  # noqa: N802
        self.calls.append((stream, address, value, flags))
        return (self.CUresult.CUDA_ERROR_INVALID_VALUE if self.fail else self.CUresult.CUDA_SUCCESS,)

    def cuGetErrorString(self, error):  # noqa: N802
        return self.CUresult.CUDA_SUCCESS, b"invalid argument"


class FakeStream:
    cuda_stream = 0x5000


def test_stream_memop_writes_flag_i_with_the_fencing_default():
    driver = FakeDriver()
    write = copy_engine._StreamMemopWriter(driver)
    flags = torch.zeros(8, dtype=torch.int32)[::2]  # strided: flag i is 8 bytes after flag i - 1
    write(FakeStream(), flags, 3, 7)
    write(FakeStream(), flags, 0, -1)
    assert driver.calls == [
        (0x5000, flags.data_ptr() + 3 * 8, 7, 0),
        (0x5000, flags.data_ptr(), 0xFFFFFFFF, 0),  # int32 -1 as the uint32 the driver takes
    ]


def test_stream_memop_failure_names_the_address_and_reason():
    write = copy_engine._StreamMemopWriter(FakeDriver(fail=True))
    flags = torch.zeros(2, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"cuStreamWriteValue32\(address=0x[0-9a-f]+, value=5\).*invalid argument"):
        write(FakeStream(), flags, 1, 5)


@pytest.mark.parametrize(
    ("target", "fmt", "needles"),
    [
        (GPUTarget("cuda", 90, 32), "ptx", ["atom.global.sys.release.exch.b32"]),
        (GPUTarget("hip", "gfx942", 64), "amdgcn", ["buffer_wbl2 sc0 sc1", "global_atomic_swap"]),
    ],
    ids=["sm_90", "gfx942"],
)
def test_flag_kernel_is_a_system_scope_release_store(target, fmt, needles):
    from triton_dist.runtime.flag_kernel import write_flag_kernel

    source = ASTSource(
        fn=write_flag_kernel,
        signature={"flags_ptr": "*i32", "offset": "i32", "value": "i32"},
        attrs={(0,): [["tt.divisibility", 16]]},
    )
    assembly = triton.compile(source, target=target).asm[fmt]
    for needle in needles:
        assert needle in assembly, f"{needle!r} not in the {fmt}"
