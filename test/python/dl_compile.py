"""Helpers of the triton_dist.language tests: compile a kernel for sm_90 / gfx942 on the CPU, read its assembly.

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
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from triton_dist import abi, compiler
from triton_dist.compiler import Checks, override_checks

TARGETS = {
    "sm_90": (GPUTarget("cuda", 90, 32), "cuda", "ptx"),
    "gfx942": (GPUTarget("hip", "gfx942", 64), "hip", "amdgcn"),
}
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
) -> Any:
    """``triton.compile`` for ``target_name``; the arguments named in ``aligned`` are specialized 16-divisible.

    ``checks`` compiles with that level of device-side checks instead of the process's (on a fresh ``JITFunction``
    of the same source: Triton memoizes a kernel's cache key, which holds the level).
    """
    if checks is not None:
        with override_checks(checks):
            fresh = triton.jit(kernel.fn)
            return compile_kernel(fresh, signature, target_name, constexprs, aligned, num_warps)
    constexprs = dict(constexprs or {})
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    full_signature = {**signature, **{name: "constexpr" for name in constexprs}}
    source = ASTSource(fn=kernel, signature=full_signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=TARGETS[target_name][0], options={"num_warps": num_warps})


def assembly(compiled: Any, target_name: str) -> str:
    """The final assembly (PTX or AMDGCN) without debug sections, comments and ``.loc``/``.file`` lines."""
    text = compiled.asm[TARGETS[target_name][2]]
    comment = "//" if target_name == "sm_90" else ";"
    lines = []
    for line in text.splitlines():
        if line.strip().startswith(".section") and "debug" in line:
            break
        line = line.split(comment, 1)[0].rstrip()
        if not line.strip() or line.strip().startswith((".loc", ".file", ".cfi")):
            continue
        lines.append(line)
    return "\n".join(lines)


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
