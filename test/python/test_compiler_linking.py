"""triton_dist.compiler: the stages hook links the device library (chaining a hook installed before it), a missing
library is a clear error only for kernels that need it, and the library's content is part of every using kernel's
cache key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import triton
import triton.language as tl
from dl_compile import TARGETS, compile_kernel, need_library
from triton import knobs
from triton.compiler import ASTSource
from triton.language.extra import libdevice

import triton_dist.language as dl
from triton_dist import abi, compiler
from triton_dist.compiler import device_library


@triton.jit
def uses_rank(out_ptr):
    tl.store(out_ptr, dl.rank())


@triton.jit
def plain(out_ptr):
    tl.store(out_ptr, 7)


def calls_a_helper():
    """A kernel whose primitive is in a ``@triton.jit`` helper (both new: Triton memoizes each one's key)."""

    @triton.jit
    def helper():
        return dl.num_ranks()

    @triton.jit
    def kernel(out_ptr):
        tl.store(out_ptr, helper())

    return kernel


@triton.jit
def uses_libdevice(x_ptr):
    tl.store(x_ptr, libdevice.pow(tl.load(x_ptr), 2.5))


OUT = {"out_ptr": "*i32"}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A private Triton cache, so every compile here runs the stages (a cache hit skips ``add_stages``)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))


@pytest.fixture
def restore_hook():
    saved = knobs.runtime.add_stages_inspection_hook
    yield
    knobs.runtime.add_stages_inspection_hook = saved


def fresh(kernel):
    """A new JITFunction for the same Python function: Triton memoizes ``cache_key`` per JITFunction object."""
    return triton.jit(kernel.fn)


def key(kernel) -> str:
    return ASTSource(fn=kernel() if kernel is calls_a_helper else fresh(kernel), signature=OUT).hash()


def test_the_frontend_imports_without_torch():
    """Kernel modules import triton_dist.language; that must not import torch (or initialize CUDA)."""
    code = "import sys, triton_dist.language, triton_dist.compiler; assert 'torch' not in sys.modules"
    python = str(Path(compiler.__file__).resolve().parents[2])
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": python})


def test_importing_the_language_installs_the_hook_once():
    hook = compiler.installed_hook()
    assert hook is not None and knobs.runtime.add_stages_inspection_hook is hook
    assert compiler.install_stages_hook() is hook


class RecordingHook:
    """A hook someone installed before triton_dist: it wraps the llir stage and counts."""

    def __init__(self):
        self.calls = []
        self.llir_runs = 0

    def __call__(self, backend, stages, options, language, capability):
        self.calls.append((backend.target.backend, getattr(stages["llir"], "__triton_dist_llir__", False)))
        inner = stages["llir"]

        def llir(src, metadata):
            self.llir_runs += 1
            return inner(src, metadata)

        stages["llir"] = llir


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_the_hook_chains_the_previous_hook(target_name, restore_hook, fresh_cache):
    compiler.uninstall_stages_hook()
    previous = RecordingHook()
    knobs.runtime.add_stages_inspection_hook = previous
    ours = compiler.install_stages_hook()
    assert ours.previous is previous and knobs.runtime.add_stages_inspection_hook is ours
    assert compiler.install_stages_hook() is ours, "installing again does not stack a second hook"

    compile_kernel(fresh(plain), OUT, target_name)
    backend = TARGETS[target_name][1]
    assert previous.calls == [(backend, True)], "the previous hook runs after ours, on our llir stage"
    assert previous.llir_runs == 1

    need_library(target_name)
    compiled = compile_kernel(fresh(uses_rank), OUT, target_name)
    assert previous.llir_runs == 2 and "__triton_dist_context" in compiled.asm[TARGETS[target_name][2]]

    compiler.uninstall_stages_hook()
    assert knobs.runtime.add_stages_inspection_hook is previous


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_a_missing_library_is_an_error_only_for_kernels_that_need_it(target_name, tmp_path, monkeypatch, fresh_cache):
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(tmp_path / "empty"))
    with pytest.raises(compiler.DeviceLibraryMissingError, match=r"does not exist.*scripts/build\.sh"):
        compile_kernel(fresh(uses_rank), OUT, target_name)
    compile_kernel(fresh(plain), OUT, target_name)  # no primitive: compiles without the library


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", r"the file is empty \(0 bytes\)"),
        (b"not bitcode", r"it is not LLVM bitcode"),
        ("other target", r"it is bitcode for target '(nvptx64|amdgcn)-"),
    ],
)
def test_an_invalid_library_is_an_error_at_compile_time_only_for_kernels_that_need_it(
    target_name, content, reason, tmp_path, monkeypatch, fresh_cache
):
    """F5 (issue 25): the stages hook checks the library before Triton's LLVM links it (it let PTXAS fail, or
    aborted, on a 0-byte or wrong-target file); a kernel without primitives compiles without the library."""
    backend = TARGETS[target_name][1]
    if content == "other target":
        other = compiler.library_path("hip" if backend == "cuda" else "cuda")
        if not other.is_file():
            pytest.skip(f"{other} is not built")
        content = other.read_bytes()
    libs = tmp_path / "libs"
    libs.mkdir()
    path = libs / compiler.LIBRARY_FILES[backend]
    path.write_bytes(content)
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(libs))
    with pytest.raises(device_library.DeviceLibraryInvalidError, match=rf"{path} .*cannot be linked.*: {reason}"):
        compile_kernel(fresh(uses_rank), OUT, target_name)
    compiled = compile_kernel(fresh(plain), OUT, target_name)
    assert "__triton_dist" not in compiled.asm[TARGETS[target_name][2]]


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_the_device_library_links_into_a_kernel(target_name):
    """The library (as built) is bitcode that Triton's own LLVM reads and links: the context global shows up."""
    need_library(target_name)
    compiled = compile_kernel(uses_rank, OUT, target_name)
    assert "__triton_dist_context" in compiled.asm[TARGETS[target_name][2]]


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_kernels_without_primitives_take_nothing_from_the_library(target_name):
    """Linked next to libdevice / ocml, the library contributes nothing (not even the context) to other kernels."""
    need_library(target_name)
    compiled = compile_kernel(uses_libdevice, {"x_ptr": "*fp32"}, target_name)
    assert "__triton_dist" not in compiled.asm[TARGETS[target_name][2]]


def test_library_content_is_in_the_cache_key(tmp_path, monkeypatch):
    libs = tmp_path / "libs"
    libs.mkdir()
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(libs))
    missing = (key(uses_rank), key(calls_a_helper), key(plain))
    for name in compiler.LIBRARY_FILES.values():
        (libs / name).write_bytes(b"version one")
    one = (key(uses_rank), key(calls_a_helper), key(plain))
    (libs / compiler.LIBRARY_FILES["hip"]).write_bytes(b"version two")
    two = (key(uses_rank), key(calls_a_helper), key(plain))
    assert len({missing[0], one[0], two[0]}) == 3, "a kernel calling a primitive is keyed on the library bytes"
    assert len({missing[1], one[1], two[1]}) == 3, "so is a kernel calling a helper that calls one"
    assert missing[2] == one[2] == two[2], "a kernel without primitives is not"


def _llvm_tool(name: str) -> str:
    for candidate in (f"/usr/lib/llvm-22/bin/{name}", shutil.which(f"{name}-22")):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip(f"{name} (LLVM 22) is not installed")


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_a_rebuilt_library_is_recompiled_and_linked(target_name, tmp_path, monkeypatch, fresh_cache):
    """Same kernel, a library with different content: a different cache key, and the new library in the binary."""
    need_library(target_name)
    backend = TARGETS[target_name][1]
    original = compiler.library_path(backend)
    marker = f"triton_dist cache-key marker {tmp_path.name}"
    text = subprocess.run(
        [_llvm_tool("llvm-dis"), str(original), "-o", "-"], check=True, capture_output=True, text=True
    ).stdout
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    for name in compiler.LIBRARY_FILES.values():
        if (original.parent / name).is_file():
            shutil.copy(original.parent / name, rebuilt / name)
    source = tmp_path / "library.ll"
    source.write_text(f'{text}\nmodule asm "// {marker}"\n')  # module asm is linked into every using kernel
    subprocess.run([_llvm_tool("llvm-as"), str(source), "-o", str(rebuilt / original.name)], check=True)

    before = key(uses_rank)
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(rebuilt))
    assert key(uses_rank) != before
    compiled = compile_kernel(fresh(uses_rank), OUT, target_name)
    assert marker in compiled.asm[TARGETS[target_name][2]]


# ----------------------------------------------------------------------------------------------------------------
# F5 (issue 25): a library that is empty, not bitcode, the other target's or incomplete is rejected before linking
# (Triton's LLVM let PTXAS fail on it, or aborted the process)
# ----------------------------------------------------------------------------------------------------------------

OTHER = {"cuda": "hip", "hip": "cuda"}


def _invalid_dir(tmp_path: Path, monkeypatch, backend: str, content: bytes) -> Path:
    libs = tmp_path / "invalid"
    libs.mkdir(exist_ok=True)
    path = libs / compiler.LIBRARY_FILES[backend]
    path.write_bytes(content)
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(libs))
    return path


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_the_built_libraries_pass_the_check_and_read_as_llvm_nm_lists_them(backend):
    need_library(next(name for name, spec in TARGETS.items() if spec[1] == backend))
    for watchdog in (False, True):
        path = compiler.library_path(backend, watchdog)
        if not path.is_file():
            continue
        assert device_library.linkable_library(backend, watchdog) == path
        summary = device_library.read_bitcode(path.read_bytes())
        assert summary.triple == abi.LIBRARY_TRIPLES[backend]
        listed = subprocess.run([_llvm_tool("llvm-nm"), str(path)], check=True, capture_output=True, text=True)
        defined = {line.split()[-1] for line in listed.stdout.splitlines() if line.split()[-2] in ("T", "D")}
        undefined = {line.split()[-1] for line in listed.stdout.splitlines() if line.split()[-2] == "U"}
        assert summary.defined == defined
        assert {name for name in summary.declared if not name.startswith("llvm.")} == undefined  # nm omits intrinsics
        assert summary.declared, "the library calls intrinsics of its target"


@pytest.mark.parametrize("backend", ["cuda", "hip"])
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", r"the file is empty \(0 bytes\)"),
        (b"not bitcode", r"it is not LLVM bitcode \(it starts with b'not '"),
        (b"BC\xc0\xde\x35\x14\x00\x00", r"the bitcode is truncated or malformed"),
    ],
)
def test_a_library_that_is_not_bitcode_is_rejected_with_the_reason(backend, content, reason, tmp_path, monkeypatch):
    path = _invalid_dir(tmp_path, monkeypatch, backend, content)
    with pytest.raises(compiler.DeviceLibraryUnreadableError, match=rf"{path}.*cannot be linked.*: {reason}"):
        device_library.linkable_library(backend)


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_the_other_targets_library_is_rejected(backend, tmp_path, monkeypatch):
    other = compiler.library_path(OTHER[backend])
    if not other.is_file():
        pytest.skip(f"{other} is not built")
    _invalid_dir(tmp_path, monkeypatch, backend, other.read_bytes())
    with pytest.raises(
        device_library.DeviceLibraryInvalidError,
        match=rf"bitcode for target '{abi.LIBRARY_TRIPLES[OTHER[backend]]}', but the {backend} backend",
    ):
        device_library.linkable_library(backend)


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_a_library_without_an_abi_function_is_rejected_and_a_rewrite_is_rechecked(backend, tmp_path, monkeypatch):
    original = compiler.library_path(backend)
    if not original.is_file():
        pytest.skip(f"{original} is not built")
    text = subprocess.run(
        [_llvm_tool("llvm-dis"), str(original), "-o", "-"], check=True, capture_output=True, text=True
    ).stdout
    source = tmp_path / "renamed.ll"
    source.write_text(text.replace(f"@{abi.HEAP_SIZE}(", f"@{abi.HEAP_SIZE}_renamed("))
    path = _invalid_dir(tmp_path, monkeypatch, backend, b"")
    subprocess.run([_llvm_tool("llvm-as"), str(source), "-o", str(path)], check=True)
    with pytest.raises(device_library.DeviceLibraryInvalidError, match=rf"does not define 1 symbol.*: {abi.HEAP_SIZE}"):
        device_library.linkable_library(backend)
    # The check is remembered per file only while the file is unchanged: the built library passes in its place.
    shutil.copy(original, path)
    os.utime(path, ns=(0, 1))
    assert device_library.linkable_library(backend) == path
