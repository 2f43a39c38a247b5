"""The built device libraries and the C++ lowering agree with ``triton_dist.abi``, the Python home of the ABI.

The libraries are read as shipped (``python/triton_dist/_device/*.bc``) with ``llvm-dis`` from LLVM 22; the C++
constants come from the bindings (``triton_dist.mlir.context_abi``). Without LLVM 22 or the bindings the tests that
need them skip visibly.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from triton_dist import abi, mlir

REPO = Path(__file__).resolve().parents[2]
DEVICE_DIR = REPO / "python" / "triton_dist" / "_device"
LLVM_BIN = Path("/usr/lib/llvm-22/bin")
LLVM_DIS = LLVM_BIN / "llvm-dis" if (LLVM_BIN / "llvm-dis").exists() else shutil.which("llvm-dis-22")
TARGETS = ["nvptx64", "amdgcn"]

needs_llvm_dis = pytest.mark.skipif(LLVM_DIS is None, reason="llvm-dis of LLVM 22 is not installed")
needs_mlir = pytest.mark.skipif(not mlir.is_available(), reason="triton_dist._C._mlir is not built")

# `{ i32, i32, i64, [256 x i64], i32, i32 }` from the struct format "<iiq256qii".
_LLVM_FIELD = {"i": "i32", "q": "i64"}


def _llvm_struct_of(layout_format: str) -> str:
    fields = []
    for count, code in re.findall(r"(\d*)([a-z])", layout_format.lstrip("<")):
        element = _LLVM_FIELD[code]
        fields.append(f"[{count} x {element}]" if count else element)
    return "{ " + ", ".join(fields) + " }"


def _disassemble(target: str) -> str:
    bitcode = DEVICE_DIR / f"triton_dist.{target}.bc"
    if not bitcode.exists():
        pytest.skip(f"{bitcode} is not built (run scripts/build.sh)")
    return subprocess.run([str(LLVM_DIS), str(bitcode), "-o", "-"], check=True, capture_output=True, text=True).stdout


def _defined_functions(ir: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, parameter types) of every `define`."""
    functions = {}
    for ret, name, params in re.findall(r"^define (?:[a-z_]+ )*(\S+) @([\w.]+)\(([^)]*)\)", ir, re.MULTILINE):
        functions[name] = (ret, [p.split()[0] for p in params.split(",") if p.strip()])
    return functions


def test_llvm_struct_of_the_layout():
    assert _llvm_struct_of("<iiq256q") == "{ i32, i32, i64, [256 x i64] }"
    assert _llvm_struct_of(abi.CONTEXT_LAYOUT.format) == "{ i32, i32, i64, [256 x i64], i32, i32 }"


@needs_llvm_dis
@pytest.mark.parametrize("target", TARGETS)
def test_library_defines_exactly_the_abi_functions(target):
    defined = set(_defined_functions(_disassemble(target)))
    assert defined == set(abi.all_symbols())


@needs_llvm_dis
@pytest.mark.parametrize("target", TARGETS)
def test_wait_and_notify_signatures(target):
    functions = _defined_functions(_disassemble(target))
    for s in abi.SCOPES:
        for m in abi.SEMANTICS:
            for c in abi.COMPARISONS:
                for f in abi.FLAG_TYPES:
                    assert functions[abi.wait_symbol(s, m, c, f)] == ("i32", ["i64", "i32", f])
    for o in abi.SIG_OPS:
        for c in abi.COMM_SCOPES:
            for f in abi.FLAG_TYPES:
                assert functions[abi.notify_symbol(o, c, f)] == ("i32", ["i64", "i32", f])
    assert functions[abi.HEAP_OFFSET] == ("i64", ["i64"])
    assert functions[abi.HEAP_SIZE] == ("i64", [])
    assert functions[abi.SYMM_AT] == ("i64", ["i64", "i32"])
    for axis in abi.RANK_AXES:
        for symbol in abi.RANK_SYMBOLS[axis]:
            assert functions[symbol] == ("i32", [])


@needs_llvm_dis
@pytest.mark.parametrize("target", TARGETS)
def test_context_global_matches_the_layout(target):
    ir = _disassemble(target)
    match = re.search(
        rf"^@{abi.CONTEXT_SYMBOL} = addrspace\(1\) externally_initialized global (\{{[^}}]*\}})", ir, re.M
    )
    assert match, f"no externally initialized @{abi.CONTEXT_SYMBOL} in addrspace(1) in the {target} library"
    assert match.group(1) == _llvm_struct_of(abi.CONTEXT_LAYOUT.format)
    # Every symbol the library defines carries the prefix (the AMD backend links only on the library's name).
    assert all(name.startswith(abi.SYMBOL_PREFIX) for name in _defined_functions(ir))
    assert abi.LIB_NAME in abi.SYMBOL_PREFIX


@needs_mlir
def test_lowering_constants_match_abi():
    native = mlir.context_abi()
    assert native.symbol == abi.CONTEXT_SYMBOL
    assert native.max_ranks == abi.MAX_RANKS
    assert native.size_bytes == abi.CONTEXT_BYTES == 2072
    assert native.mlir_type == f"!llvm.struct<(i32, i32, i64, array<{abi.MAX_RANKS} x i64>, i32, i32)>"
    # The heap bases follow rank, num_ranks and heap_size (byte 16); local_rank and local_num_ranks follow them.
    assert struct.calcsize("<iiq") == abi.CONTEXT_HEAP_SIZE_OFFSET + 8 == abi.CONTEXT_HEAP_BASES_OFFSET
    assert abi.CONTEXT_HEAP_BASES_OFFSET + 8 * abi.MAX_RANKS == abi.CONTEXT_LOCAL_RANK_OFFSET == 2064
    assert abi.CONTEXT_LOCAL_NUM_RANKS_OFFSET + 4 == abi.CONTEXT_BYTES


@needs_mlir
def test_watchdog_record_matches_the_layout():
    # A watched wait makes the lowering define the record; its type is WAIT_TIMEOUT_LAYOUT's.
    text = (
        "func.func @f(%p: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {\n"
        "  %t = distributed.wait %p, %n, %v scope(sys) semantic(acquire) {timeout_ns = 1000 : i64}"
        " : !llvm.ptr<1>, i32\n  return %t : !distributed.token\n}\n"
    )
    for target in ("nvvm", "rocdl"):
        ir = mlir.translate_to_llvmir(mlir.run_pipeline(text, mlir.lowering_pipeline(target)))
        match = re.search(
            rf"^@{abi.WAIT_TIMEOUT_SYMBOL} = addrspace\(1\) externally_initialized global (\{{[^}}]*\}})", ir, re.M
        )
        assert match, ir
        assert match.group(1) == _llvm_struct_of(abi.WAIT_TIMEOUT_LAYOUT.format)
    assert abi.WAIT_TIMEOUT_BYTES == 56
    assert abi.COMPARISONS.index("ge") == 2  # the record's cmp field is the WaitComparison enum value


def _disassemble_watchdog(target: str) -> str:
    bitcode = DEVICE_DIR / f"triton_dist.{abi.WATCHDOG_LIBRARY_VARIANT}.{target}.bc"
    if not bitcode.exists():
        pytest.skip(f"{bitcode} is not built (run scripts/build.sh)")
    return subprocess.run([str(LLVM_DIS), str(bitcode), "-o", "-"], check=True, capture_output=True, text=True).stdout


@needs_llvm_dis
@pytest.mark.parametrize("target", TARGETS)
def test_watchdog_library_matches_the_layout(target):
    # The watchdog library defines the default library's functions plus the settings global, and no module record.
    ir = _disassemble_watchdog(target)
    assert set(_defined_functions(ir)) == set(_defined_functions(_disassemble(target)))
    match = re.search(
        rf"^@{abi.WAIT_WATCHDOG_SYMBOL} = addrspace\(1\) externally_initialized global (\{{[^}}]*\}})", ir, re.M
    )
    assert match, f"no externally initialized @{abi.WAIT_WATCHDOG_SYMBOL} in addrspace(1) in the {target} library"
    assert match.group(1) == _llvm_struct_of(abi.WAIT_WATCHDOG_LAYOUT.format)
    assert abi.WAIT_WATCHDOG_BYTES == 16
    assert f"@{abi.WAIT_TIMEOUT_SYMBOL} " not in ir
    assert "llvm.readsteadycounter" in ir
    # The default library has no watchdog at all.
    default = _disassemble(target)
    assert abi.WAIT_WATCHDOG_SYMBOL not in default and "readsteadycounter" not in default


@needs_mlir
def test_runtime_watchdog_settings_match_the_layout():
    text = (
        "func.func @f(%p: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {\n"
        "  %t = distributed.wait %p, %n, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i64\n"
        "  return %t : !distributed.token\n}\n"
    )
    for target in ("nvvm", "rocdl"):
        pipeline = mlir.lowering_pipeline(target).replace(
            f"triton-dist-lower-to-{target}", f"triton-dist-lower-to-{target}{{wait-timeout-from-runtime=true}}"
        )
        ir = mlir.translate_to_llvmir(mlir.run_pipeline(text, pipeline))
        match = re.search(
            rf"^@{abi.WAIT_WATCHDOG_SYMBOL} = addrspace\(1\) externally_initialized global (\{{[^}}]*\}})", ir, re.M
        )
        assert match, ir
        assert match.group(1) == _llvm_struct_of(abi.WAIT_WATCHDOG_LAYOUT.format)
