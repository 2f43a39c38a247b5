"""Helpers of the triton_dist.language tests: compile a kernel for sm_90 / gfx942 on the CPU, read its assembly.

Compiling and reading assembly are ``triton_dist.testing.compile_for`` / ``assembly``; this module adds what only the
tests need: skipping without a device library, a per-call level of device-side checks, and assembly searches.

Which device library the tests link: ``triton_dist.compiler.library_path`` (the package's ``_device`` directory,
or ``$TRITON_DIST_DEVICE_LIB_DIR``). Tests that need a library skip, saying why, when it is not built. Tests that
assert instruction spellings (which only the real library decides) also skip unless the library is the one built
into the package (``real_library``), so a development stand-in never makes them pass or fail.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
import triton

from triton_dist import abi, compiler, testing
from triton_dist.compiler import Checks, override_checks
from triton_dist.testing.compile import gpu_target

TARGETS = {
    name: (gpu_target(name), vendor, asm)
    for name, vendor, asm in (("sm_90", "cuda", "ptx"), ("gfx942", "hip", "amdgcn"))
}
"""target name -> (GPUTarget, device-library vendor, final assembly key of ``CompiledKernel.asm``)."""
CONTEXT = abi.CONTEXT_SYMBOL


def need_library(target_name: str) -> None:
    """Skip the test unless the device library for ``target_name`` exists."""
    path = compiler.library_path(TARGETS[target_name][1])
    if not path.is_file():
        pytest.skip(f"{path.name} is not built ({path} is missing: run scripts/build.sh)")


def need_real_library(target_name: str) -> None:
    """Skip unless the library is the package's own build (instruction spellings are the real library's)."""
    need_library(target_name)
    if compiler.device_lib_dir() != compiler.DEFAULT_DEVICE_LIB_DIR:
        pytest.skip(
            f"asserts the real library's instructions, but ${compiler.DEVICE_LIB_DIR_ENV} points at "
            f"{compiler.device_lib_dir()}"
        )


def compile_kernel(
    kernel: Any,
    signature: Mapping[str, str],
    target_name: str,
    constexprs: Mapping[str, Any] | None = None,
    aligned: tuple[str, ...] = (),
    num_warps: int = 4,
    checks: Checks | None = None,
    num_stages: int | None = None,
) -> Any:
    """``testing.compile_for`` ``target_name``; only the arguments named in ``aligned`` are specialized 16-divisible
    (``compile_for`` aligns every pointer by default; these tests say which).

    ``checks`` compiles with that level of device-side checks instead of the process's (on a fresh ``JITFunction``
    of the same source: Triton memoizes a kernel's cache key, which holds the level).
    """
    if checks is not None:
        with override_checks(checks):
            fresh = triton.jit(kernel.fn)
            return compile_kernel(fresh, signature, target_name, constexprs, aligned, num_warps, num_stages=num_stages)
    stages = {} if num_stages is None else {"num_stages": num_stages}
    return testing.compile_for(
        kernel, signature, target_name, constexprs=constexprs, aligned=aligned, num_warps=num_warps, **stages
    )


def assembly(compiled: Any, target_name: str) -> str:
    """The final assembly (PTX or AMDGCN) without debug sections, comments and ``.loc``/``.file`` lines."""
    del target_name  # the compiled kernel knows its target
    return testing.assembly(compiled)


def index_of(lines: list[str], pattern: str, last: bool = False) -> int:
    """Index of the first (or last) line matching regex ``pattern``; -1 if none."""
    found = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    if not found:
        return -1
    return found[-1] if last else found[0]


def context_is_defined_and_used(asm: str, target_name: str) -> bool:
    """The context global is defined in the module (so the load hook finds it) and some instruction uses it."""
    lines = asm.splitlines()
    if target_name == "sm_90":
        defined = any(".visible .global" in line and CONTEXT in line for line in lines)
        used = any(CONTEXT in line and ".visible" not in line for line in lines)
    else:
        defined = any(re.match(rf"\s*{CONTEXT}:", line) for line in lines) or any(
            ".globl" in line and CONTEXT in line for line in lines
        )
        used = any(f"{CONTEXT}@" in line for line in lines)
    return defined and used


def load_gpu_check_kernels(script: str, tmp_path: Any) -> Any:
    """The kernels of a GPU check under test/gpu that defines them in its ``PRELUDE`` source (the text its case
    processes run), as a module: written to a file under ``tmp_path`` first, since Triton reads @jit source from one."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "gpu" / script
    spec = importlib.util.spec_from_file_location(path.stem, path)
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    module_path = tmp_path / f"{path.stem}_kernels.py"
    module_path.write_text(checker.PRELUDE)
    spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    return kernels


def sass(compiled: Any) -> str:
    """``cuobjdump -sass`` of the cubin Triton built for an NVIDIA target (its own ptxas run: what a launch loads).
    Skips the test when no cuobjdump is found (Triton's wheel ships one in triton/backends/nvidia/bin)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    cuobjdump = str(tools / "cuobjdump") if (tools / "cuobjdump").is_file() else shutil.which("cuobjdump")
    if cuobjdump is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one in triton/backends/nvidia/bin)")
    with tempfile.TemporaryDirectory() as directory:
        cubin = Path(directory) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        return subprocess.run([cuobjdump, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout


def ptxas_info(ptx: str, tmp_path: Any) -> str:
    """What Triton's ptxas reports (``-v``: registers, spills, info such as C7510) for ``ptx`` on sm_90a."""
    import subprocess
    from pathlib import Path

    from triton import knobs

    ptxas = knobs.nvidia.ptxas.path
    if not ptxas or not Path(ptxas).is_file():
        pytest.skip("Triton's ptxas is not available")
    source = Path(tmp_path) / "kernel.ptx"
    source.write_text(ptx)
    result = subprocess.run(
        [ptxas, "-arch=sm_90a", "-v", str(source), "-o", str(Path(tmp_path) / "kernel.cubin")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def run_in_interpreter(script: str, request: Any) -> Any:
    """Run ``script`` (a test file that, as ``__main__``, reads a JSON request from argv[1] and prints a JSON result
    as its last line) under ``TRITON_INTERPRET=1`` in a process of its own (``emulated_ranks.run_python``: a fork of
    a process that imported torch); returns the decoded result."""
    import json
    import os
    from pathlib import Path

    from emulated_ranks import run_python

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    src = str(Path(__file__).resolve().parents[2] / "python")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    done = run_python(script, [json.dumps(request)], env, timeout_s=900)  # forked from a process that has torch
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
