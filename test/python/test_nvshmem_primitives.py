"""The NVSHMEM primitives (dl.put_signal, dl.get, dl.signal_wait): argument checks at the call, the extern calls they
emit, the selection of NVSHMEM's device bitcode, and linking for sm_90 without a GPU.

NVSHMEM's own bitcode is usually not installed on the CPU machine, and the one NVSHMEM 3.8 ships cannot be read by
triton==3.6.0's LLVM (the copy scripts/build.sh converts can: test_nvshmem_device_code.py): these link tests use a
stand-in bitcode (built with llvm-as) that defines the three NVSHMEM
functions as non-inlined calls, so the PTX shows that the kernel calls them. A test of the real bitcode runs when
nvidia.nvshmem is installed (or $TRITON_DIST_NVSHMEM_BITCODE_DIR is set) and says so when it skips.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, need_library
from triton.compiler.errors import CompilationError

import triton_dist.language as dl
from triton_dist import abi
from triton_dist.compiler import device_library
from triton_dist.compiler.device_library import (
    NVSHMEM_BITCODE_DIR_ENV,
    NvshmemMissingError,
    NvshmemUnreadableError,
    nvshmem_device_bitcode,
    read_bitcode,
)

LLVM_AS = shutil.which("llvm-as", path="/usr/lib/llvm-22/bin") or shutil.which("llvm-as")
SIGNATURE = {"dest": "*fp32", "src": "*fp32", "sig": "*u64", "n": "i64", "peer": "i32"}

STAND_IN = """
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
@seen = global [8 x i64] zeroinitializer
define void @nvshmemx_putmem_signal_block(ptr %d, ptr %s, i64 %n, ptr %g, i64 %v, i32 %op, i32 %pe) noinline {
  %o = zext i32 %op to i64
  store volatile i64 %o, ptr @seen
  store volatile i64 %v, ptr %g
  ret void
}
define void @nvshmemx_getmem_block(ptr %d, ptr %s, i64 %n, i32 %pe) noinline {
  %x = load i8, ptr %s
  store i8 %x, ptr %d
  ret void
}
define i64 @nvshmem_signal_wait_until(ptr %g, i32 %cmp, i64 %v) noinline {
  %c = zext i32 %cmp to i64
  store volatile i64 %c, ptr @seen
  %x = load volatile i64, ptr %g
  ret i64 %x
}
"""


@triton.jit
def one_sided(dest, src, sig, n, peer):
    dl.put_signal(dest, src, n, sig, 1, peer, sig_op="add")
    dl.get(dest, src, n, peer)
    token = dl.signal_wait(sig, 2, cmp="ge")
    tl.store(dl.consume_token(dest, token), 1.0)


@triton.jit
def only_rank(dest):
    tl.store(dest, dl.rank().to(tl.float32))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))


@pytest.fixture
def stand_in(tmp_path, monkeypatch, fresh_cache):
    """$TRITON_DIST_NVSHMEM_BITCODE_DIR pointing at a stand-in libnvshmem_device_sm_90.bc."""
    if LLVM_AS is None:
        pytest.skip("llvm-as (LLVM 22) is not installed: the stand-in NVSHMEM bitcode cannot be built")
    need_library("sm_90")
    if not (device_library.device_lib_dir() / abi.NVSHMEM_LIBRARY_FILE).is_file():
        pytest.skip(f"{abi.NVSHMEM_LIBRARY_FILE} is not built: run scripts/build.sh")
    directory = tmp_path / "nvshmem"
    directory.mkdir()
    source = directory / "stand_in.ll"
    source.write_text(STAND_IN)
    subprocess.run([LLVM_AS, str(source), "-o", str(directory / "libnvshmem_device_sm_90.bc")], check=True)
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(directory))
    return directory


def fake_bitcode_dir(root: Path, versions: list[str]) -> Path:
    root.mkdir()
    for version in versions:
        (root / f"libnvshmem_device_{version}.bc").write_bytes(b"BC\xc0\xde" + b"\0" * 12)
    return root


# ----------------------------------------------------------------------------------------------------------------
# Calls and linking
# ----------------------------------------------------------------------------------------------------------------


def test_sm_90_ptx_calls_nvshmem(stand_in):
    """TTIR: one extern call per primitive (sig_op and cmp in the symbol); LLVM IR: the wrappers inlined into calls of
    NVSHMEM's functions with its constants; PTX: those calls."""
    compiled = compile_kernel(one_sided, SIGNATURE, "sm_90")
    ttir, llir, ptx = compiled.asm["ttir"], compiled.asm["llir"], assembly(compiled, "sm_90")
    for symbol in (abi.put_signal_symbol("add"), abi.NVSHMEM_GET, abi.signal_wait_symbol("ge")):
        assert f'symbol = "{symbol}"' in ttir
        assert symbol not in llir  # the wrapper library was linked and inlined
    for function in abi.NVSHMEM_DEVICE_FUNCTIONS:
        assert re.search(rf"call(\.uni)?\s+(\(.*\), )?{function},", ptx), function
    # NVSHMEM_SIGNAL_ADD (10) and NVSHMEM_CMP_GE (5) reach the calls: LLVM propagates the constant arguments into
    # the (internalized) stand-in bodies, which record them.
    assert re.search(r"store volatile i64 10, ptr (addrspace\(\d\) )?@seen", llir)
    assert re.search(r"store volatile i64 5, ptr (addrspace\(\d\) )?@seen", llir)


def test_kernel_without_nvshmem_primitives_never_reads_nvshmem(fresh_cache, monkeypatch):
    need_library("sm_90")
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, "/nonexistent/nvshmem")
    ptx = assembly(compile_kernel(only_rank, {"dest": "*fp32"}, "sm_90"), "sm_90")
    assert "nvshmem" not in ptx and "__triton_dist_context" in ptx


def test_missing_package_names_it(fresh_cache, monkeypatch):
    need_library("sm_90")
    monkeypatch.delenv(NVSHMEM_BITCODE_DIR_ENV, raising=False)
    monkeypatch.setattr(device_library, "converted_nvshmem", lambda capability: None)  # no build-converted copy
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("nvidia") else real(name, *a)
    )
    with pytest.raises(NvshmemMissingError, match=r"pip install nvidia-nvshmem-cu13.*nvidia-nvshmem-cu12"):
        compile_kernel(one_sided, SIGNATURE, "sm_90")


def test_real_nvshmem_bitcode(fresh_cache):
    """With NVSHMEM installed: the kernel links, or the error says Triton's LLVM cannot read the bitcode."""
    need_library("sm_90")
    try:
        directory = device_library.nvshmem_bitcode_dir()
    except NvshmemMissingError as missing:
        pytest.skip(f"NVSHMEM is not installed, the real-bitcode link is not tested: {missing}")
    try:
        ptx = compile_kernel(one_sided, SIGNATURE, "sm_90").asm["ptx"]
    except NvshmemUnreadableError as error:
        assert str(directory) in str(error) and "22.0.0git" in str(error)
        pytest.skip(f"Triton's LLVM cannot read {directory}'s bitcode (known for NVSHMEM 3.8)")
    assert "nvshmemi_device_state_d" in ptx


# ----------------------------------------------------------------------------------------------------------------
# Selecting NVSHMEM's bitcode
# ----------------------------------------------------------------------------------------------------------------


def test_bitcode_for_each_capability(tmp_path, monkeypatch):
    directory = fake_bitcode_dir(tmp_path / "lib", ["sm_75", "sm_80", "sm_89", "sm_90", "sm_100"])
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(directory))
    assert nvshmem_device_bitcode(90).name == "libnvshmem_device_sm_90.bc"
    assert nvshmem_device_bitcode(89).name == "libnvshmem_device_sm_89.bc"
    assert nvshmem_device_bitcode(86).name == "libnvshmem_device_sm_80.bc"
    assert nvshmem_device_bitcode(120).name == "libnvshmem_device_sm_100.bc"
    with pytest.raises(NvshmemMissingError, match=r"no NVSHMEM device bitcode for sm_70 .*found: sm_75, sm_80"):
        nvshmem_device_bitcode(70)


def test_unversioned_bitcode_and_bad_files(tmp_path, monkeypatch):
    directory = fake_bitcode_dir(tmp_path / "lib", [])
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(directory))
    (directory / "libnvshmem_device.bc").write_bytes(b"BC\xc0\xde")
    assert nvshmem_device_bitcode(90).name == "libnvshmem_device.bc"
    (directory / "libnvshmem_device_sm_90.bc").write_bytes(b"")
    with pytest.raises(NvshmemMissingError, match="is not LLVM bitcode"):
        nvshmem_device_bitcode(90)
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(NvshmemMissingError, match="which is not a directory"):
        nvshmem_device_bitcode(90)


def test_installed_package_is_found(tmp_path, monkeypatch):
    """Without the environment variable, the lib directory of the nvidia.nvshmem package is used."""
    package = tmp_path / "site" / "nvidia" / "nvshmem"
    package.mkdir(parents=True)
    fake_bitcode_dir(package / "lib", ["sm_90"])
    monkeypatch.delenv(NVSHMEM_BITCODE_DIR_ENV, raising=False)

    class Spec:
        submodule_search_locations = [str(package)]

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: Spec() if name == "nvidia.nvshmem" else real(name, *a)
    )
    assert nvshmem_device_bitcode(90) == package / "lib" / "libnvshmem_device_sm_90.bc"


def test_wrapper_library_agrees_with_the_abi():
    path = device_library.device_lib_dir() / abi.NVSHMEM_LIBRARY_FILE
    if not path.is_file():
        pytest.skip(f"{path} is not built: run scripts/build.sh")
    summary = read_bitcode(path.read_bytes())
    assert summary.triple.startswith("nvptx64")
    assert sorted(summary.defined) == abi.nvshmem_symbols()
    assert {name for name in summary.declared if not name.startswith("llvm.")} == set(abi.NVSHMEM_DEVICE_FUNCTIONS)


def test_wrapper_library_is_checked(tmp_path, monkeypatch):
    """A wrapper library of the wrong target or short of a symbol is refused before linking."""
    need_library("sm_90")
    for name in [*device_library.LIBRARY_FILES.values(), abi.NVSHMEM_LIBRARY_FILE]:
        if (device_library.device_lib_dir() / name).is_file():
            shutil.copy(device_library.device_lib_dir() / name, tmp_path / name)
    monkeypatch.setenv(device_library.DEVICE_LIB_DIR_ENV, str(tmp_path))
    shutil.copy(tmp_path / device_library.LIBRARY_FILES["hip"], tmp_path / abi.NVSHMEM_LIBRARY_FILE)
    with pytest.raises(device_library.DeviceLibraryInvalidError, match="must be nvptx64 bitcode"):
        device_library.nvshmem_libraries(90)
    os.remove(tmp_path / abi.NVSHMEM_LIBRARY_FILE)
    with pytest.raises(NvshmemMissingError, match="build it with scripts/build.sh"):
        device_library.nvshmem_libraries(90)


# ----------------------------------------------------------------------------------------------------------------
# Misuse: a CompilationError at the call, naming the problem
# ----------------------------------------------------------------------------------------------------------------


@triton.jit
def misuse(dest, src, sig, sig32, n, peer, CASE: tl.constexpr):
    if CASE == 0:
        dl.put_signal(dest, src, n, sig32, 1, peer)
    elif CASE == 1:
        dl.put_signal(dest, src, -8, sig, 1, peer)
    elif CASE == 2:
        dl.put_signal(dest, src, n, sig, 1, 300)
    elif CASE == 3:
        dl.put_signal(dest, src, n, sig, 1, peer, sig_op="xor")
    elif CASE == 4:
        dl.get(dest, src, n, -1)
    elif CASE == 5:
        dl.signal_wait(sig, -1, cmp="gt")
    elif CASE == 6:
        dl.signal_wait(sig, 0, cmp="lt")
    elif CASE == 7:
        dl.signal_wait(sig32, 1)
    elif CASE == 8:
        dl.put_signal(dest, src, n, sig, 2**64, peer)
    elif CASE == 9:
        dl.get(dest + tl.arange(0, 4), src, n, peer)


MISUSE = [
    "dl.put_signal: signal_ptr must point to a 64-bit signal (int64 or uint64: NVSHMEM signals are uint64_t), got a "
    "pointer to int32",
    "dl.put_signal: nbytes must be >= 0, got -8",
    "dl.put_signal: rank=300 is beyond the largest world (256 ranks)",
    "dl.put_signal: sig_op must be one of",
    "dl.get: rank must be >= 0, got -1",
    "dl.signal_wait: no unsigned 64-bit signal is greater than 18446744073709551615: the wait (cmp 'gt') could never "
    "return",
    "dl.signal_wait: no unsigned 64-bit signal is less than 0",
    "dl.signal_wait: signal_ptr must point to a 64-bit signal",
    "dl.put_signal: signal=18446744073709551616 does not fit in a 64-bit signal",
    "dl.get: dest must be a scalar pointer",
]


def test_misuse_is_a_compilation_error_at_the_call():
    need_library("sm_90")
    signature = {"dest": "*fp32", "src": "*fp32", "sig": "*u64", "sig32": "*i32", "n": "i64", "peer": "i32"}
    for case, message in enumerate(MISUSE):
        with pytest.raises(CompilationError) as caught:
            compile_kernel(misuse, signature, "sm_90", constexprs={"CASE": case})
        assert message in str(caught.value), (case, str(caught.value))
        assert "misuse" in str(caught.value) or "dl." in str(caught.value)


def test_amd_is_refused_at_the_call():
    need_library("gfx942")
    with pytest.raises(CompilationError) as caught:
        compile_kernel(one_sided, SIGNATURE, "gfx942")
    assert "exist on NVIDIA GPUs only" in str(caught.value)
    assert "rocSHMEM" in str(caught.value)


def test_exported():
    for name in ("put_signal", "get", "signal_wait"):
        assert name in dir(dl)
