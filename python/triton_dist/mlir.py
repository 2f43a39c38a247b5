"""Parse, verify, lower and translate ``distributed`` dialect IR from Python.

A typed wrapper over the compiled module ``triton_dist._C._mlir`` (``lib/Python``, built by ``scripts/build.sh``
against Debian's libMLIR 22). It knows the same dialects and passes as ``triton-dist-opt``::

    from triton_dist import mlir

    module = mlir.parse(open("examples/ir/ring_step.mlir").read())
    print(module)                                            # the module, pretty-printed
    llvm_dialect = mlir.run_pipeline(module, mlir.lowering_pipeline("nvvm"))
    llvm_ir = mlir.translate_to_llvmir(llvm_dialect)

Bad IR, a failing verifier or a failing pass raises :class:`MLIRError`, which carries every diagnostic with its
location (``file:line:col``). Each :class:`Module` owns its own MLIR context.

Only this module needs the compiled extension, and only when one of its functions is called: ``import triton_dist``
and the kernel-side packages work without it (the GPU machines have no MLIR installation).
:func:`is_available` says whether it is built.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ContextABI",
    "Diagnostic",
    "MLIRError",
    "MLIRWarning",
    "Module",
    "context_abi",
    "dialects",
    "is_available",
    "lowering_pipeline",
    "parse",
    "parse_file",
    "run_pipeline",
    "translate_to_llvmir",
    "verify",
]

_BUILD_HINT = (
    "triton_dist.mlir needs the compiled extension triton_dist._C._mlir, which is not built in this checkout. "
    "Build it with `bash scripts/setup.sh && bash scripts/build.sh` (it needs LLVM/MLIR 22); the rest of "
    "triton_dist (the language, the compiler hook, the runtime) works without it."
)

_native_module: Any = None


def _native() -> Any:
    """The compiled extension, imported on first use."""
    global _native_module
    if _native_module is None:
        try:
            from triton_dist._C import _mlir  # type: ignore[attr-defined]  # built by CMake, no stub
        except ImportError as err:
            raise ImportError(f"{_BUILD_HINT} (import failed: {err})") from err
        _native_module = _mlir
    return _native_module


def is_available() -> bool:
    """Whether the compiled extension is built and loads."""
    try:
        _native()
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------------------------------------------
# Diagnostics and errors
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic MLIR emitted: ``location`` is ``file:line:col`` where the IR has one."""

    severity: str  # "error", "warning", "remark" or "note"
    location: str
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    notes: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def _from_native(cls, raw: tuple) -> Diagnostic:
        severity, location, file, line, column, message, notes = raw
        return cls(severity, location, message, file, line, column, tuple((loc, msg) for loc, msg in notes))

    def __str__(self) -> str:
        lines = [f"{self.location}: {self.severity}: {self.message}"]
        lines += [f"{loc}: note: {msg}" for loc, msg in self.notes]
        return "\n".join(lines)


class MLIRError(Exception):
    """Parsing, verifying, running a pass pipeline or translating failed.

    ``diagnostics`` holds what MLIR reported (errors first in emission order, with their locations); the message
    shows each one, with the offending source line when the IR text is known.
    """

    def __init__(
        self, action: str, diagnostics: list[Diagnostic], source: str | None = None, source_name: str | None = None
    ):
        self.action = action
        self.diagnostics = diagnostics
        self.source = source
        self.source_name = source_name
        super().__init__(self._render())

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def _render(self) -> str:
        lines = [f"{self.action} failed:"]
        source_lines = self.source.splitlines() if self.source is not None else []
        for diag in self.diagnostics or [Diagnostic("error", "<unknown>", "no diagnostic was emitted")]:
            lines.append(str(diag))
            if diag.file == self.source_name and 0 < diag.line <= len(source_lines):
                lines.append("    " + source_lines[diag.line - 1])
                lines.append("    " + " " * max(diag.column - 1, 0) + "^")
        return "\n".join(lines)


class MLIRWarning(UserWarning):
    """A warning or remark MLIR emitted while an operation succeeded."""


def _check(
    action: str, result: Any, raw_diagnostics: list, source: str | None = None, source_name: str | None = None
) -> Any:
    diagnostics = [Diagnostic._from_native(raw) for raw in raw_diagnostics]
    if result is None or result is False or any(d.severity == "error" for d in diagnostics):
        raise MLIRError(action, diagnostics, source, source_name)
    for diag in diagnostics:
        warnings.warn(str(diag), MLIRWarning, stacklevel=3)
    return result


# ----------------------------------------------------------------------------------------------------------------
# Modules
# ----------------------------------------------------------------------------------------------------------------


class Module:
    """A parsed MLIR module (with its own MLIR context). ``str(module)`` prints it."""

    def __init__(self, native: Any, source: str, source_name: str):
        self._native = native
        self.source = source
        self.source_name = source_name

    def to_string(self, generic: bool = False, debug_info: bool = False) -> str:
        """The module's IR: pretty form, or the generic form; with ``debug_info``, locations too."""
        return self._native.to_string(generic=generic, debug_info=debug_info)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<triton_dist.mlir.Module from {self.source_name}>"

    def verify(self) -> None:
        verify(self)

    def run_pipeline(self, pipeline: str) -> str:
        return run_pipeline(self, pipeline)

    def translate_to_llvmir(self) -> str:
        return translate_to_llvmir(self)


def parse(text: str, source_name: str = "<string>", verify: bool = True) -> Module:
    """Parses IR text (a ``module`` or bare top-level ops) into a :class:`Module`.

    With ``verify`` (the default) the module is verified too; with ``verify=False`` only syntax is checked, and
    :func:`verify` can run the verifier later. Raises :class:`MLIRError` on bad IR.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes IR text (str), not {type(text).__name__}")
    native, raw = _native().parse(text, source_name, verify)
    return Module(_check(f"parsing {source_name}", native, raw, text, source_name), text, source_name)


def parse_file(path: str | os.PathLike, verify: bool = True) -> Module:
    """Parses the IR in a file; diagnostics name the file. ``path`` is a ``str`` or ``os.PathLike`` (never an
    integer: ``open()`` would take it as a descriptor of this process, read it and close it)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"parse_file: path must be a str or os.PathLike, not {type(path).__name__}")
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), os.fspath(path), verify)


def _as_module(ir: str | Module) -> Module:
    if isinstance(ir, Module):
        return ir
    if isinstance(ir, str):
        return parse(ir)
    raise TypeError(f"expected IR text (str) or a Module, not {type(ir).__name__}")


def verify(ir: str | Module) -> None:
    """Runs the verifier on IR text or a :class:`Module` parsed with ``verify=False``; raises :class:`MLIRError`
    with the failing op's location and message."""
    if isinstance(ir, str):
        module = parse(ir, verify=False)
    elif isinstance(ir, Module):
        module = ir
    else:
        raise TypeError(f"verify() takes IR text (str) or a Module, not {type(ir).__name__}")
    ok, raw = _native().verify(module._native)
    _check(f"verifying {module.source_name}", ok, raw, module.source, module.source_name)


def run_pipeline(ir: str | Module, pipeline: str) -> str:
    """Runs a textual pass pipeline and returns the resulting IR text. A :class:`Module` is left unchanged.

    ``pipeline`` is ``"builtin.module(pass-a,pass-b{option=value})"`` or ``"any(...)"``, which run on the module as
    ``triton-dist-opt --pass-pipeline`` runs them, or the bare ``"pass-a,pass-b"``, anchored on the module (so
    ``"func.func(canonicalize)"`` runs on each function), with the passes of ``triton-dist-opt`` (see
    :func:`lowering_pipeline`; the lowering pipelines run on a whole module, never nested under ``func.func``).
    Raises :class:`MLIRError` when the pipeline does not parse or a pass fails.
    """
    module = _as_module(ir)
    text, raw = _native().run_pipeline(module._native, pipeline)
    return _check(f"running '{pipeline}' on {module.source_name}", text, raw, module.source, module.source_name)


def translate_to_llvmir(ir: str | Module) -> str:
    """Translates a module in the LLVM dialect (NVVM / ROCDL ops included) to LLVM IR text.

    Raises :class:`MLIRError`, at the offending op, for what LLVM IR cannot hold and MLIR's translation would crash
    on or drop silently: an op with values directly in a module, a non-string target triple or data layout, an
    ``!llvm.struct`` / ``!llvm.array`` of a non-LLVM type (``index``, ``tuple``, ``f8E4M3FN``, ``memref``...), or a
    non-empty nested module (only the top-level module is translated: translate each module on its own).
    """
    module = _as_module(ir)
    text, raw = _native().translate_to_llvmir(module._native)
    return _check(f"translating {module.source_name} to LLVM IR", text, raw, module.source, module.source_name)


def dialects() -> list[str]:
    """The dialects IR may use: ``distributed`` and what its lowerings and the device library need."""
    return list(_native().dialects())


@dataclass(frozen=True)
class ContextABI:
    """The runtime context as the C++ lowering is compiled with it (``RuntimeContext.h``); ``triton_dist.abi`` is
    the Python side of the same facts, and a test keeps the two equal."""

    symbol: str  # the global's name, "__triton_dist_context"
    max_ranks: int  # the length of heap_bases
    mlir_type: str  # e.g. "!llvm.struct<(i32, i32, i64, array<256 x i64>, i32, i32)>"
    size_bytes: int


def context_abi() -> ContextABI:
    """The context symbol, table size, type and size the compiled lowering uses."""
    symbol, max_ranks, mlir_type, size_bytes = _native().context_abi()
    return ContextABI(symbol, max_ranks, mlir_type, size_bytes)


_TARGETS = ("nvvm", "rocdl")


def lowering_pipeline(target: str) -> str:
    """The pipeline that lowers a ``distributed`` module (func/arith/scf/cf around it) to the LLVM dialect.

    It names the pipeline registered in C++, ``triton-dist-lower-to-{nvvm,rocdl}`` (structured control flow to
    ``cf`` first, since ``wait`` lowers to a polling loop; the target's lowering; the upstream conversions to LLVM),
    which ``triton-dist-opt`` and the device-library build run too. ``target`` is ``"nvvm"`` (NVIDIA) or
    ``"rocdl"`` (AMD). The result translates with :func:`translate_to_llvmir`.
    """
    if target not in _TARGETS:
        raise ValueError(f"target must be one of {list(_TARGETS)}, not {target!r}")
    return f"builtin.module(triton-dist-lower-to-{target})"
