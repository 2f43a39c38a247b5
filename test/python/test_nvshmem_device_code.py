"""NVSHMEM's device code in a form triton==3.6.0's LLVM reads: the build step (scripts/nvshmem_device.py), the choice
of what the compiler links (device_library.nvshmem_device_code), and kernels calling dl.put_signal / dl.get /
dl.signal_wait compiled for sm_90 with NVSHMEM's code linked in.

Why a conversion: NVSHMEM 3.8's bitcode (LLVM 22.1.8) declares llvm.umin & co. with the attribute
``nocreateundeforpoison`` (bitcode attribute kind 105, new in LLVM 22.1), which triton's LLVM 22.0.0git refuses. The
regression test builds such bitcode with Debian's llvm-as 22.1 and shows the raw file refused and the converted one
linked.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from dl_compile import assembly, compile_kernel, need_library
from test_nvshmem_primitives import SIGNATURE, one_sided

from triton_dist import abi
from triton_dist.compiler import device_library
from triton_dist.compiler.device_library import (
    DEVICE_LIB_DIR_ENV,
    NVSHMEM_BITCODE_DIR_ENV,
    DeviceLibraryInvalidError,
    NvshmemUnreadableError,
)

REPO = Path(__file__).resolve().parents[2]
LLVM_AS = shutil.which("llvm-as", path="/usr/lib/llvm-22/bin")
OPT = shutil.which("opt", path="/usr/lib/llvm-22/bin")
SYSTEM_CALLS = {"vprintf", "__assertfail"}
"""Functions a PTX module may call without defining: the CUDA driver provides them."""


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nvshmem_device_script", REPO / "scripts/nvshmem_device.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


script = load_script()

# A stand-in for NVSHMEM's bitcode as LLVM 22.1 writes it: llvm.umin's declaration gets nocreateundeforpoison. The
# three functions record their arguments (so the PTX shows they were linked, not inlined away) and reach a private
# string and a helper, which the reduction must keep; `unused` must go.
STAND_IN = """
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
@nvshmemi_device_state_d = addrspace(4) externally_initialized global [4 x i64] zeroinitializer
@.note = private unnamed_addr constant [8 x i8] c"standin\\00"
@seen = global [4 x i64] zeroinitializer
declare i32 @vprintf(ptr, ptr)
define internal i64 @helper(i64 %x) noinline {
  %state = load i64, ptr addrspacecast (ptr addrspace(4) @nvshmemi_device_state_d to ptr)
  %m = call i64 @llvm.umin.i64(i64 %x, i64 %state)
  ret i64 %m
}
define void @nvshmemx_putmem_signal_block(ptr %d, ptr %s, i64 %n, ptr %g, i64 %v, i32 %op, i32 %pe) noinline {
  %m = call i64 @helper(i64 %n)
  store volatile i64 %m, ptr @seen
  store volatile i64 %v, ptr %g
  %r = call i32 @vprintf(ptr @.note, ptr null)
  ret void
}
define void @nvshmemx_getmem_block(ptr %d, ptr %s, i64 %n, i32 %pe) noinline {
  %x = load i8, ptr %s
  store i8 %x, ptr %d
  ret void
}
define i64 @nvshmem_signal_wait_until(ptr %g, i32 %cmp, i64 %v) noinline {
  %x = load volatile i64, ptr %g
  ret i64 %x
}
define void @unused() {
  ret void
}
declare i64 @llvm.umin.i64(i64, i64)
"""


def call_targets(ptx: str) -> set[str]:
    return set(re.findall(r"\bcall(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx))


def unresolved_calls(ptx: str) -> set[str]:
    """Functions the PTX calls but declares only as ``.extern`` or not at all, less those of the CUDA driver. (A
    ``.func`` declared without a body anywhere would already have failed in ptxas.)"""
    declared = set(re.findall(r"\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx))
    extern = set(re.findall(r"\.extern\s+\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx))
    calls = call_targets(ptx)
    return ((calls - declared) | (calls & extern)) - SYSTEM_CALLS


def stand_in_wheel(directory: Path, member: str = "nvidia/nvshmem/lib/libnvshmem_device_sm_90.bc") -> Path:
    """A wheel holding the stand-in bitcode written by llvm-as 22.1; also leaves the bitcode in ``directory/lib``."""
    if LLVM_AS is None or OPT is None:
        pytest.skip("llvm-as / opt (LLVM 22, scripts/setup.sh) are not installed: no stand-in NVSHMEM bitcode")
    source = directory / "stand_in.ll"
    source.write_text(STAND_IN)
    lib = directory / "lib"
    lib.mkdir()
    bitcode = lib / Path(member).name
    subprocess.run([LLVM_AS, str(source), "-o", str(bitcode)], check=True)
    wheel = directory / "nvidia_nvshmem_cu13-9.9.9-py3-none-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(bitcode, member)
    return wheel


def device_dir_copy(target: Path) -> Path:
    """A copy of the built device libraries without any converted NVSHMEM copy (for $TRITON_DIST_DEVICE_LIB_DIR)."""
    need_library("sm_90")
    target.mkdir()
    for path in device_library.device_lib_dir().glob("*.bc"):
        shutil.copy(path, target / path.name)
    if not (target / abi.NVSHMEM_LIBRARY_FILE).is_file():
        pytest.skip(f"{abi.NVSHMEM_LIBRARY_FILE} is not built: run scripts/build.sh")
    return target


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.delenv(NVSHMEM_BITCODE_DIR_ENV, raising=False)


# ----------------------------------------------------------------------------------------------------------------
# The real NVSHMEM, converted by scripts/build.sh
# ----------------------------------------------------------------------------------------------------------------


def test_built_copy_links_put_signal_get_and_signal_wait_for_sm_90(fresh_cache, monkeypatch):
    """The copy scripts/build.sh converted (NVSHMEM 3.4.5 by default, what torch 2.11 pins) links into a kernel using
    all three primitives: the PTX calls nothing it does not define (no nvshmem symbol left unresolved), and holds
    NVSHMEM's device state as a visible global for nvshmemx_cumodule_init."""
    need_library("sm_90")
    copies = device_library.converted_nvshmem_copies()
    if not copies:
        pytest.skip("no converted NVSHMEM copy in the device directory: scripts/build.sh makes one (needs PyPI)")
    copy = copies[-1]
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: copy.version)
    assert device_library.nvshmem_libraries(90)[1][1] == str(copy.path)
    compiled = compile_kernel(one_sided, SIGNATURE, "sm_90")
    ptx = assembly(compiled, "sm_90")
    assert not unresolved_calls(ptx), unresolved_calls(ptx)
    assert not re.search(r"\.extern \.func[^\n]*nvshmem", ptx)
    assert re.search(r"^\.visible \.(const|global) [^\n]*nvshmemi_device_state_d\b", ptx, re.M)
    for symbol in abi.nvshmem_symbols():
        assert symbol not in compiled.asm["llir"]
    # The copy is small and was made from the wheel it names.
    assert copy.path.stat().st_size < 8 << 20
    assert copy.package in device_library.NVSHMEM_PACKAGES


# ----------------------------------------------------------------------------------------------------------------
# The conversion, on bitcode LLVM 22.1 wrote (the regression)
# ----------------------------------------------------------------------------------------------------------------


def test_llvm_22_1_bitcode_is_refused_raw_and_linked_converted(tmp_path, fresh_cache, monkeypatch):
    devices = device_dir_copy(tmp_path / "device")
    monkeypatch.setenv(DEVICE_LIB_DIR_ENV, str(devices))
    wheel = stand_in_wheel(tmp_path)
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: "9.9.9")

    # Raw: triton's LLVM refuses it; the error names the file, the cause and the command that converts it.
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(tmp_path / "lib"))
    with pytest.raises(NvshmemUnreadableError) as refused:
        compile_kernel(one_sided, SIGNATURE, "sm_90")
    message = str(refused.value)
    assert "libnvshmem_device_sm_90.bc" in message and "nocreateundeforpoison" in message
    assert "TRITON_DIST_NVSHMEM_VERSION=9.9.9 bash scripts/build.sh" in message and "copies there now: none" in message

    # Converted: the build step's copy links.
    monkeypatch.delenv(NVSHMEM_BITCODE_DIR_ENV)
    out = script.convert("nvidia-nvshmem-cu13", "9.9.9", 90, devices, tmp_path / "cache", wheel=wheel)
    assert out == devices / "nvshmem_device.9.9.9.nvptx64.ll"
    text = out.read_text()
    assert "nocreateundeforpoison" not in text and "@unused" not in text and "@.note" in text
    [copy] = device_library.converted_nvshmem_copies()
    assert (copy.package, copy.version, copy.source, copy.sm) == (
        "nvidia-nvshmem-cu13",
        "9.9.9",
        "libnvshmem_device_sm_90.bc",
        90,
    )
    compiled = compile_kernel(one_sided, SIGNATURE, "sm_90")
    ptx = assembly(compiled, "sm_90")
    calls = call_targets(ptx)
    assert {"nvshmemx_putmem_signal_block", "nvshmemx_getmem_block", "nvshmem_signal_wait_until"} <= calls
    assert not unresolved_calls(ptx), unresolved_calls(ptx)
    assert "nvshmemi_device_state_d" in ptx

    # Up to date: a second run leaves the file alone.
    stamp = out.stat().st_mtime_ns
    script.convert("nvidia-nvshmem-cu13", "9.9.9", 90, devices, tmp_path / "cache", wheel=wheel)
    assert out.stat().st_mtime_ns == stamp


def test_conversion_errors_name_the_step(tmp_path):
    if OPT is None:
        pytest.skip("opt (LLVM 22) is not installed")
    empty = tmp_path / "empty.whl"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("nvidia/nvshmem/lib/libnvshmem_host.so.3", b"")
        archive.writestr("nvidia/nvshmem/lib/libnvshmem_device_sm_100.bc", b"")
    with pytest.raises(script.BuildError, match=r"no NVSHMEM device bitcode for sm_90 .*sm_100"):
        script.convert("nvidia-nvshmem-cu13", "1.0", 90, tmp_path / "out", tmp_path, wheel=empty)
    bitcode = tmp_path / "lacking.bc"
    subprocess.run(
        [LLVM_AS or "llvm-as", "-o", str(bitcode)],
        input='target triple = "nvptx64-nvidia-cuda"\ndefine void @nvshmemx_getmem_block() { ret void }\n',
        text=True,
        check=True,
    )
    with pytest.raises(script.BuildError, match="does not define nvshmem_signal_wait_until, nvshmemx_putmem_signal"):
        script.reduce_bitcode(bitcode, script.device_functions(), OPT)


def test_member_choice_and_attribute_stripping():
    lib = "nvidia/nvshmem/lib/"
    names = [f"{lib}libnvshmem_device_sm_{n}.bc" for n in (75, 80, 90, 100)] + [f"{lib}libnvshmem_host.so.3"]
    assert script.pick_member(names, 90) == (f"{lib}libnvshmem_device_sm_90.bc", 90)
    assert script.pick_member(names, 89) == (f"{lib}libnvshmem_device_sm_80.bc", 80)
    assert script.pick_member([f"{lib}libnvshmem_device.bc"], 90) == (f"{lib}libnvshmem_device.bc", 0)
    text = (
        'attributes #3 = { nocallback nocreateundeforpoison nofree }\n@s = constant [22 x i8] c"nocreateundeforpoisonX"'
    )
    assert script.strip_unknown_attributes(text) == (
        'attributes #3 = { nocallback nofree }\n@s = constant [22 x i8] c"nocreateundeforpoisonX"'
    )
    assert script.device_functions() == abi.NVSHMEM_DEVICE_FUNCTIONS


# ----------------------------------------------------------------------------------------------------------------
# Which NVSHMEM code the compiler links
# ----------------------------------------------------------------------------------------------------------------


def fake_copy(directory: Path, version: str, sm: int) -> Path:
    path = directory / f"nvshmem_device.{version}.nvptx64.ll"
    path.write_text(script.header("nvidia-nvshmem-cu13", version, "libnvshmem_device.bc", sm) + "\n")
    return path


def test_copy_of_the_installed_version_is_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv(DEVICE_LIB_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(NVSHMEM_BITCODE_DIR_ENV, raising=False)
    v345, v380, v3100 = (
        fake_copy(tmp_path, "3.4.5", 0),
        fake_copy(tmp_path, "3.8.0", 90),
        fake_copy(tmp_path, "3.10.0", 0),
    )
    installed: list[str | None] = [None]
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: installed[0])
    assert device_library.nvshmem_device_code(90) == v3100  # nothing installed: the newest (10 > 8)
    installed[0] = "3.4.5"
    assert device_library.nvshmem_device_code(90) == v345
    installed[0] = "3.8.0"
    assert device_library.nvshmem_device_code(90) == v380
    assert device_library.converted_nvshmem(80) is None  # the sm_90 variant does not fit sm_80
    # Another installed version: the wheel's own bitcode, never a copy of another version.
    installed[0] = "3.9.1"
    wheel_lib = tmp_path / "wheel"
    wheel_lib.mkdir()
    (wheel_lib / "libnvshmem_device.bc").write_bytes(b"BC\xc0\xde" + b"\0" * 12)
    real_bitcode_dir = device_library.nvshmem_bitcode_dir
    monkeypatch.setattr(device_library, "nvshmem_bitcode_dir", lambda: wheel_lib)
    assert device_library.nvshmem_device_code(90) == wheel_lib / "libnvshmem_device.bc"
    assert "the installed NVSHMEM is 3.9.1" in device_library.nvshmem_rebuild_hint(90)
    assert "copies there now: 3.4.5, 3.8.0, 3.10.0" in device_library.nvshmem_rebuild_hint(90)
    # $TRITON_DIST_NVSHMEM_BITCODE_DIR is an explicit choice: it wins over a matching copy.
    installed[0] = "3.4.5"
    monkeypatch.setattr(device_library, "nvshmem_bitcode_dir", real_bitcode_dir)
    explicit = tmp_path / "explicit"
    explicit.mkdir()
    (explicit / "libnvshmem_device_sm_90.bc").write_bytes(b"BC\xc0\xde")
    monkeypatch.setenv(NVSHMEM_BITCODE_DIR_ENV, str(explicit))
    assert device_library.nvshmem_device_code(90) == explicit / "libnvshmem_device_sm_90.bc"


def test_copies_enter_the_cache_digest_and_bad_headers_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(DEVICE_LIB_DIR_ENV, str(tmp_path))
    before = device_library.libraries_digest()
    path = fake_copy(tmp_path, "3.4.5", 0)
    with_copy = device_library.libraries_digest()
    assert with_copy != before
    path.write_text(path.read_text() + "; changed\n")
    assert device_library.libraries_digest() != with_copy
    path.write_text("; ModuleID = 'something else'\n")
    with pytest.raises(DeviceLibraryInvalidError, match=r"nvshmem_device\.3\.4\.5\.nvptx64\.ll does not start with"):
        device_library.converted_nvshmem_copies()
