"""Compiling a kernel for a GPU this machine does not have (``sm_90``, ``gfx942``, ...), e.g. in CI without GPUs.

Triton compiles for any target it has a backend for without touching a device: ``triton.compile`` on an
``ASTSource`` (the kernel plus the argument types a launch would have given) with an explicit ``GPUTarget``. The
device library is linked as at launch time, by the stages hook that ``import triton_dist.language`` installs.

```python
compiled = compile_for(my_kernel, {"x_ptr": "*fp32", "n": "i32"}, target="sm_90", constexprs={"BLOCK": 1024})
ptx = compiled.asm["ptx"]            # also "ttir", "ttgir", "llir"; "amdgcn" / "hsaco" for gfx targets
print(assembly(compiled))            # the PTX / AMDGCN without debug sections and comments
```
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_NVIDIA = re.compile(r"^sm_(\d+)a?$")
_AMD = re.compile(r"^gfx[0-9a-f]+$")


def gpu_target(target: Any) -> Any:
    """A ``triton.backends.compiler.GPUTarget`` from ``"sm_90"``-style or ``"gfx942"``-style names (or itself)."""
    from triton.backends.compiler import GPUTarget

    if isinstance(target, GPUTarget):
        return target
    if isinstance(target, str):
        nvidia = _NVIDIA.match(target)
        if nvidia:
            return GPUTarget("cuda", int(nvidia.group(1)), 32)
        if _AMD.match(target):
            # CDNA (gfx9xx) runs 64-wide wavefronts; RDNA (gfx1xxx) 32-wide.
            return GPUTarget("hip", target, 64 if target.startswith("gfx9") else 32)
    raise ValueError(f"target must be an NVIDIA 'sm_<N>' or AMD 'gfx<ID>' name or a GPUTarget, got {target!r}")


def compile_for(
    kernel: Any,
    signature: Mapping[str, str],
    target: Any = "sm_90",
    *,
    constexprs: Mapping[str, Any] | None = None,
    aligned: Iterable[str] | None = None,
    num_warps: int = 4,
    num_stages: int | None = None,
) -> Any:
    """Compile the ``@triton.jit`` ``kernel`` for ``target`` without a GPU; returns Triton's ``CompiledKernel``.

    Args:
        kernel: the jitted function.
        signature: the type of every runtime argument, as Triton spells them (``"*fp32"``, ``"*bf16"``, ``"i32"``,
            ``"i64"``, ``"fp32"``); arguments in ``constexprs`` are left out, and so may be those with a default
            value (compiled as that constant).
        target: ``"sm_90"`` (any ``sm_<N>``), ``"gfx942"`` (any ``gfx<ID>``), or a ``GPUTarget``.
        constexprs: values of the ``tl.constexpr`` arguments.
        aligned: arguments specialized as 16-divisible, as a launch does for 16-byte aligned tensors and ints
            divisible by 16. Default: every pointer argument (torch allocations are aligned).
        num_warps, num_stages: as at launch.

    The result's ``asm`` maps each stage to its text: ``"ttir"``, ``"ttgir"``, ``"llir"``, then ``"ptx"`` /
    ``"cubin"`` or ``"amdgcn"`` / ``"hsaco"``.
    """
    import triton
    from triton.compiler import ASTSource

    import triton_dist.language  # noqa: F401 (installs the hook that links the device library)

    gpu = gpu_target(target)
    constexprs = dict(constexprs or {})
    for param in kernel.params:  # an argument with a default, given neither a type nor a value: its default
        if param.has_default and param.name not in signature and param.name not in constexprs:
            constexprs[param.name] = param.default
    unknown = [name for name in [*signature, *constexprs] if name not in kernel.arg_names]
    if unknown:
        raise ValueError(f"{kernel.__name__} has no argument(s) {unknown}; its arguments are {kernel.arg_names}")
    missing = [name for name in kernel.arg_names if name not in signature and name not in constexprs]
    if missing:
        raise ValueError(f"give a type in signature (or a value in constexprs) for {missing} of {kernel.__name__}")
    if aligned is None:
        aligned = [name for name, kind in signature.items() if kind.startswith("*")]
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    full_signature = {**signature, **{name: "constexpr" for name in constexprs}}
    source = ASTSource(fn=kernel, signature=full_signature, constexprs=constexprs, attrs=attrs)
    options: dict[str, Any] = {"num_warps": num_warps}
    if num_stages is not None:
        options["num_stages"] = num_stages
    return triton.compile(source, target=gpu, options=options)


def assembly(compiled: Any) -> str:
    """The final PTX or AMDGCN of ``compiled`` without debug sections, comments and ``.loc``/``.file`` lines."""
    nvidia = "ptx" in compiled.asm
    text = compiled.asm["ptx" if nvidia else "amdgcn"]
    comment = "//" if nvidia else ";"
    lines = []
    for line in text.splitlines():
        if line.strip().startswith(".section") and "debug" in line:
            break
        line = line.split(comment, 1)[0].rstrip()
        if not line.strip() or line.strip().startswith((".loc", ".file", ".cfi")):
            continue
        lines.append(line)
    return "\n".join(lines)
