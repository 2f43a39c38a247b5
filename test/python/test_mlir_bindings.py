"""The Python bindings of the dialect (triton_dist.mlir over triton_dist._C._mlir, built from lib/Python).

Without the compiled module (no scripts/build.sh, or a machine without MLIR) the tests that need it skip visibly;
the ones that check the package works without it always run.
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from triton_dist import mlir

REPO = Path(__file__).resolve().parents[2]
RING_STEP = REPO / "examples" / "ir" / "ring_step.mlir"

needs_mlir = pytest.mark.skipif(
    not mlir.is_available(), reason="triton_dist._C._mlir is not built (run scripts/build.sh)"
)

# Every op of the dialect, each attribute value and operand type the ODS allows, in the printer's own spelling
# (so printing the parsed module gives this text back).
EVERY_OP = """\
module {
  func.func @every_op(%arg0: !llvm.ptr<1>, %arg1: !llvm.ptr, %arg2: i32, %arg3: i64, %arg4: f32, %arg5: f64) {
    %0 = distributed.get_rank
    %1 = distributed.get_rank axis(local)
    %2 = distributed.get_num_ranks
    %3 = distributed.get_num_ranks axis(node)
    %4 = distributed.symm_at %arg0, %0 : !llvm.ptr<1>
    %5 = distributed.symm_at %arg1, %2 : !llvm.ptr
    %6 = distributed.wait %arg0, %arg2, %arg2 scope(cta) semantic(acquire) : !llvm.ptr<1>, i32
    %7 = distributed.wait %arg1, %arg2, %arg3 scope(gpu) semantic(relaxed) : !llvm.ptr, i64
    %8 = distributed.wait %arg0, %arg2, %arg2 scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
    %9 = distributed.consume_token %arg0, %8 : !llvm.ptr<1>
    %10 = distributed.consume_token %arg2, %6 : i32
    %11 = distributed.consume_token %arg3, %7 : i64
    %12 = distributed.consume_token %arg4, %8 : f32
    %13 = distributed.consume_token %arg5, %8 : f64
    %14 = distributed.wait %arg0, %arg2, %arg3 scope(sys) semantic(acquire) cmp(ge) : !llvm.ptr<1>, i64
    %15 = distributed.wait %arg1, %arg2, %arg2 scope(gpu) semantic(relaxed) cmp(lt) : !llvm.ptr, i32
    %16 = distributed.heap_offset %arg0 : !llvm.ptr<1>
    %17 = distributed.get_heap_size
    distributed.notify %arg0, %0, %arg2 sig_op(set) comm_scope(gpu) : !llvm.ptr<1>, i32
    distributed.notify %arg1, %1, %arg3 sig_op(add) comm_scope(intra_node) : !llvm.ptr, i64
    distributed.notify %arg0, %2, %arg2 sig_op(add) comm_scope(inter_node) : !llvm.ptr<1>, i32
    return
  }
}
"""

OPS = ["get_rank", "get_num_ranks", "symm_at", "heap_offset", "get_heap_size", "wait", "consume_token", "notify"]


# ----------------------------------------------------------------------------------------------------------------
# Parsing and printing
# ----------------------------------------------------------------------------------------------------------------


@needs_mlir
def test_round_trip_of_every_op():
    module = mlir.parse(EVERY_OP)
    assert str(module) == EVERY_OP
    for op in OPS:
        assert f"distributed.{op}" in str(module)
    # The generic form parses back to the same module.
    generic = module.to_string(generic=True)
    assert '"distributed.wait"' in generic
    assert str(mlir.parse(generic)) == EVERY_OP


@needs_mlir
def test_defaults_are_elided_when_printed():
    module = mlir.parse("func.func @f() -> i32 {\n  %r = distributed.get_rank axis(world)\n  return %r : i32\n}\n")
    assert "distributed.get_rank\n" in str(module)
    assert "axis" not in str(module)


@needs_mlir
def test_debug_info_prints_locations():
    module = mlir.parse("func.func @f() {\n  %r = distributed.get_rank\n  return\n}\n", source_name="f.mlir")
    assert 'loc("f.mlir":2:' in module.to_string(debug_info=True)


@needs_mlir
def test_dialects_include_distributed_and_its_targets():
    names = mlir.dialects()
    for name in ("distributed", "llvm", "nvvm", "rocdl", "func", "arith", "scf", "cf"):
        assert name in names


# ----------------------------------------------------------------------------------------------------------------
# Errors carry their locations
# ----------------------------------------------------------------------------------------------------------------

BAD_WAIT = """\
func.func @bad(%flags: !llvm.ptr<1>) {
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %t = distributed.wait %flags, %zero, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return
}
"""


@needs_mlir
def test_verifier_failure_raises_with_location_and_message():
    with pytest.raises(mlir.MLIRError) as info:
        mlir.parse(BAD_WAIT, source_name="bad.mlir")
    err = info.value
    assert len(err.errors) == 1
    diag = err.errors[0]
    assert (diag.file, diag.line, diag.column) == ("bad.mlir", 4, 8)
    assert diag.location == "bad.mlir:4:8"
    assert "'distributed.wait' op num_barriers must be positive, got 0" in diag.message
    message = str(err)
    assert "bad.mlir:4:8: error: 'distributed.wait' op num_barriers must be positive, got 0" in message
    # The offending line and a caret under the op.
    assert "    " + BAD_WAIT.splitlines()[3] in message
    assert "\n" + " " * (4 + 7) + "^" in message


@needs_mlir
def test_verify_after_an_unverified_parse():
    module = mlir.parse(BAD_WAIT, source_name="bad.mlir", verify=False)
    assert "distributed.wait" in str(module)  # an invalid module still prints (in the generic form)
    with pytest.raises(mlir.MLIRError, match=r"bad\.mlir:4:8: error: .*num_barriers must be positive"):
        module.verify()
    mlir.verify(mlir.parse(EVERY_OP))  # a valid one passes


@needs_mlir
@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        # A missing `semantic(...)` clause.
        (
            "func.func @f(%p: !llvm.ptr<1>, %n: i32) {\n  %t = distributed.wait %p, %n, %n scope(sys) : "
            "!llvm.ptr<1>, i32\n  return\n}\n",
            2,
            47,
            "expected 'semantic'",
        ),
        # An enum value that does not exist.
        (
            "func.func @f(%p: !llvm.ptr<1>, %n: i32) {\n  distributed.notify %p, %n, %n sig_op(xor) "
            "comm_scope(gpu) : !llvm.ptr<1>, i32\n  return\n}\n",
            2,
            40,
            "enum values for attribute 'sig_op' [set, add]",
        ),
        # An op the dialect does not have.
        ("func.func @f() {\n  %r = distributed.get_world\n  return\n}\n", 2, 8, "distributed.get_world"),
        # Plain syntax.
        ("func.func @f( {\n", 1, 14, "expected non-function type"),
    ],
)
def test_malformed_ir_raises_with_location(text, line, column, message):
    with pytest.raises(mlir.MLIRError) as info:
        mlir.parse(text, source_name="malformed.mlir")
    errors = info.value.errors
    assert errors, str(info.value)
    assert (errors[0].file, errors[0].line) == ("malformed.mlir", line), str(info.value)
    assert errors[0].column == column, str(info.value)
    assert message in errors[0].message
    assert str(info.value).startswith("parsing malformed.mlir failed:\nmalformed.mlir:")


@needs_mlir
def test_parse_file_names_the_file(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD_WAIT)
    with pytest.raises(mlir.MLIRError, match=rf"{path}:4:8: error:"):
        mlir.parse_file(path)
    assert "distributed.notify" in str(mlir.parse_file(RING_STEP))


@needs_mlir
def test_wrong_argument_type_is_a_type_error():
    with pytest.raises(TypeError):
        mlir.parse(b"module {}")


# ----------------------------------------------------------------------------------------------------------------
# Pipelines and translation
# ----------------------------------------------------------------------------------------------------------------


@needs_mlir
@pytest.mark.parametrize(("target", "dialect"), [("nvvm", "nvvm"), ("rocdl", "rocdl")])
def test_ring_step_lowers_to_llvm_and_translates(target, dialect):
    module = mlir.parse_file(RING_STEP)
    before = str(module)
    lowered = mlir.run_pipeline(module, mlir.lowering_pipeline(target))
    assert str(module) == before  # the Module is not changed by the pipeline
    assert "distributed." not in lowered
    assert "llvm.func @ring_step" in lowered
    assert "__triton_dist_context" in lowered
    llvm_ir = mlir.translate_to_llvmir(lowered)
    assert "define i32 @ring_step(ptr addrspace(1)" in llvm_ir
    assert "@__triton_dist_context" in llvm_ir
    assert " fence " in llvm_ir or "atomic" in llvm_ir or "atom." in llvm_ir


@needs_mlir
def test_pipeline_spellings():
    module = mlir.parse("func.func @f() -> i32 {\n  %c = arith.constant 7 : i32\n  return %c : i32\n}\n")
    anchored = mlir.run_pipeline(module, "builtin.module(convert-arith-to-llvm,convert-func-to-llvm)")
    bare = mlir.run_pipeline(module, " convert-arith-to-llvm, convert-func-to-llvm ")
    nested = mlir.run_pipeline(
        module, "builtin.module(func.func(canonicalize),convert-arith-to-llvm,convert-func-to-llvm)"
    )
    assert anchored == bare == nested
    assert "llvm.func @f() -> i32" in anchored
    assert "define i32 @f()" in mlir.translate_to_llvmir(anchored)


@needs_mlir
def test_invalid_pipeline_raises():
    with pytest.raises(mlir.MLIRError, match="no-such-pass"):
        mlir.run_pipeline("module {}", "builtin.module(no-such-pass)")
    with pytest.raises(mlir.MLIRError, match="unbalanced"):
        mlir.run_pipeline("module {}", "builtin.module(canonicalize")


@needs_mlir
@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
def test_failing_pass_raises_with_location(target):
    # An op outside any function cannot become instructions: the lowering rejects it, at the op.
    text = "module {\n  %r = distributed.get_rank axis(node)\n}\n"
    with pytest.raises(mlir.MLIRError) as info:
        mlir.run_pipeline(mlir.parse(text, source_name="outside.mlir"), mlir.lowering_pipeline(target))
    assert info.value.errors[0].location == "outside.mlir:2:8"
    assert "is outside any function" in info.value.errors[0].message
    assert "%r = distributed.get_rank axis(node)" in str(info.value)


@needs_mlir
def test_translating_unlowered_ops_raises_with_location():
    with pytest.raises(mlir.MLIRError) as info:
        mlir.translate_to_llvmir(mlir.parse_file(RING_STEP))
    assert info.value.errors[0].file == str(RING_STEP)
    assert info.value.errors[0].line > 0


@needs_mlir
def test_warnings_do_not_raise():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mlir.run_pipeline(EVERY_OP, "canonicalize")


# ----------------------------------------------------------------------------------------------------------------
# What a fuzzer found (issue 9 A11): every case ends in a result or an MLIRError, never a dead process
# ----------------------------------------------------------------------------------------------------------------


def _run_isolated(code: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter, so that a crash fails the test instead of killing pytest."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


@needs_mlir
def test_deep_nesting_parses_or_raises_without_killing_the_process():
    result = _run_isolated(
        r"""
from triton_dist import mlir
deep_if = "func.func @deep(%c: i1) {\n" + "scf.if %c {\n" * 4000 + "}\n" * 4000 + "return\n}\n"
lowered = mlir.run_pipeline(mlir.parse(deep_if), "convert-scf-to-cf")
assert lowered.count("cf.cond_br") == 4000, lowered.count("cf.cond_br")
brackets = "module attributes {test.a = " + "[" * 9000 + "]" * 9000 + "} {}"
assert "[" * 9000 in str(mlir.parse(brackets))
for text in ("module attributes {test.a = " + "[" * 20000 + "]" * 20000 + "} {}",
             "func.func @deep(%c: i1) {\n" + "scf.if %c {\n" * 20000 + "}\n" * 20000 + "return\n}\n"):
    try:
        mlir.parse(text)
    except mlir.MLIRError as err:
        assert "nesting deeper than 10000 levels" in err.errors[0].message, err
        assert err.errors[0].line >= 1 and err.errors[0].column >= 1
    else:
        raise AssertionError("20,000 levels parsed")
print("survived")
"""
    )
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == "survived"


@needs_mlir
def test_nesting_limit_ignores_brackets_in_strings_and_comments():
    text = "// " + "[" * 20000 + '\nmodule attributes {test.s = "' + "(" * 20000 + '"} {}\n'
    assert "test.s" in str(mlir.parse(text))


@needs_mlir
@pytest.mark.parametrize(
    ("options", "reason"),
    [("tight-polls=abc", "'abc' value invalid for uint argument"), ("no-such-option=1", "no-such-option")],
)
def test_bad_pass_option_raises_with_the_reason(options, reason, capfd):
    with pytest.raises(mlir.MLIRError) as info:
        mlir.run_pipeline("module {}", f"convert-distributed-to-nvvm{{{options}}}")
    assert reason in info.value.errors[0].message
    assert "convert-distributed-to-nvvm" in info.value.errors[0].message
    assert reason not in capfd.readouterr().err  # captured, not printed


@needs_mlir
def test_verify_accepts_text_like_run_pipeline():
    mlir.verify("module {}")
    with pytest.raises(mlir.MLIRError, match="num_barriers must be positive"):
        mlir.verify(
            "func.func @f(%p: !llvm.ptr<1>, %v: i32) {\n  %z = arith.constant 0 : i32\n"
            "  %t = distributed.wait %p, %z, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i32\n  return\n}\n"
        )
    with pytest.raises(TypeError, match="not int"):
        mlir.verify(3)
    with pytest.raises(TypeError, match="not bytes"):
        mlir.run_pipeline(b"module {}", "canonicalize")


@needs_mlir
@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%r = distributed.get_rank\n", "'distributed.get_rank' op is outside any function"),
        (
            "%p = llvm.mlir.zero : !llvm.ptr<1>\n%one = arith.constant 1 : i32\n"
            "%q = distributed.symm_at %p, %one : !llvm.ptr<1>\n",
            "'distributed.symm_at' op is outside any function",
        ),
        ("module attributes {llvm.target_triple = 42 : i32} {}\n", "'llvm.target_triple' must be a string"),
    ],
)
def test_module_level_ops_and_bad_triples_are_rejected_by_the_lowering(target, text, message):
    with pytest.raises(mlir.MLIRError) as info:
        mlir.run_pipeline(text, mlir.lowering_pipeline(target))
    assert message in info.value.errors[0].message
    assert info.value.errors[0].line == (3 if "symm_at" in text else 1)


@needs_mlir
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%p = llvm.mlir.zero : !llvm.ptr<1>\n", "'llvm.mlir.zero' is directly in a module"),
        ("module attributes {llvm.target_triple = 42 : i32} {}\n", "'llvm.target_triple' must be a string"),
    ],
)
def test_translation_rejects_what_llvm_ir_cannot_hold(text, message):
    with pytest.raises(mlir.MLIRError) as info:
        mlir.translate_to_llvmir(text)
    assert message in info.value.errors[0].message
    assert info.value.errors[0].line == 1


@needs_mlir
def test_translation_rejects_llvm_aggregates_of_non_llvm_types():
    """F1 (issue 25): an !llvm.struct or !llvm.array holding index, tuple, f8E4M3FN, a dialect type or a memref
    verifies, and translating it segfaulted (upstream mlir-translate too). It is a located error now, in every op
    and attribute that can carry such a type. In a fresh interpreter: a regression kills that one, not pytest."""
    result = _run_isolated(
        r"""
from triton_dist import mlir
forms = {
    "global": "llvm.mlir.global external @g() : {agg}\n",
    "undef": "llvm.func @f() {{\n  %u = llvm.mlir.undef : {agg}\n  llvm.return\n}}\n",
    "alloca": "llvm.func @f() {{\n  %c = llvm.mlir.constant(1 : i32) : i32\n"
              "  %p = llvm.alloca %c x {agg} : (i32) -> !llvm.ptr\n  llvm.return\n}}\n",
}
lines = {"global": 1, "undef": 2, "alloca": 3}
checked = 0
for element in ("index", "tuple<i32>", "f8E4M3FN", "!distributed.token", "memref<4xf32>", "vector<2xindex>"):
    nested = f"!llvm.struct<(i32, array<2 x {element}>)>"
    for agg in (f"!llvm.struct<({element})>", f"!llvm.array<2 x {element}>", nested):
        for form, text in forms.items():
            try:
                mlir.translate_to_llvmir(text.format(agg=agg))
            except mlir.MLIRError as err:
                message = err.errors[0].message
                assert "has no LLVM IR equivalent" in message and element in message, message
                assert err.errors[0].line == lines[form], (form, agg, err.errors[0])
                checked += 1
            else:
                raise AssertionError(f"{form} of {agg} translated")
# LLVM-compatible elements still translate.
assert "@g = external global { i32, [2 x <2 x float>] }" in mlir.translate_to_llvmir(
    "llvm.mlir.global external @g() : !llvm.struct<(i32, array<2 x vector<2xf32>>)>\n")
print("checked", checked)
"""
    )
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == "checked 54"


@needs_mlir
def test_translating_a_nested_module_raises_instead_of_dropping_it():
    """F7 (issue 25): the lowering handles a nested module, but the translation takes only the top-level module and
    returned an empty LLVM module. It names the nested module now."""
    lowered = mlir.run_pipeline(
        mlir.parse_file(REPO / "test" / "fuzz" / "regressions" / "nested-module.mlir"), mlir.lowering_pipeline("nvvm")
    )
    assert "llvm.func @rank" in lowered
    with pytest.raises(mlir.MLIRError) as info:
        mlir.translate_to_llvmir(lowered)
    assert "a nested module does not translate to LLVM IR" in info.value.errors[0].message
    assert info.value.errors[0].line == 2  # `module @inner {` in the lowered text
    # An empty nested module loses nothing, and a flat module still translates.
    assert "define i32 @f()" in mlir.translate_to_llvmir(
        "module {\n  module {\n  }\n  llvm.func @f() -> i32 {\n"
        "    %c = llvm.mlir.constant(1 : i32) : i32\n    llvm.return %c : i32\n  }\n}\n"
    )


@needs_mlir
def test_lowering_pipeline_nested_under_a_function_is_an_error():
    """F2 (issue 25): the named pipelines hold module passes; nested under func.func they aborted the process."""
    result = _run_isolated(
        r"""
from triton_dist import mlir
text = "func.func @f() -> i32 {\n  %r = distributed.get_rank\n  return %r : i32\n}\n"
for target in ("nvvm", "rocdl"):
    for pipeline in (f"func.func(triton-dist-lower-to-{target})",
                     f"builtin.module(func.func(triton-dist-lower-to-{target}{{tight-polls=3}}))"):
        try:
            mlir.run_pipeline(text, pipeline)
        except mlir.MLIRError as err:
            assert f"'triton-dist-lower-to-{target}' lowers a whole module" in err.errors[0].message, err
        else:
            raise AssertionError(pipeline)
print("survived")
"""
    )
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == "survived"


@needs_mlir
@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
def test_an_any_anchored_pipeline_runs_on_the_module_as_in_the_tool(target):
    """F11 (issue 25): "any(...)" was nested under builtin.module, ran on the functions only (where the module
    passes cannot run) and lowered nothing; triton-dist-opt --pass-pipeline runs it on the module."""
    text = "func.func @f() -> i32 {\n  %r = distributed.get_rank\n  return %r : i32\n}\n"
    anchored = mlir.run_pipeline(text, mlir.lowering_pipeline(target))
    assert "distributed." not in anchored and "llvm.func @f()" in anchored
    assert mlir.run_pipeline(text, f"any(triton-dist-lower-to-{target})") == anchored
    assert mlir.run_pipeline(text, f" any ( triton-dist-lower-to-{target} ) ") == anchored
    opt = REPO / "build" / "bin" / "triton-dist-opt"
    if opt.exists():
        tool = subprocess.run(
            [str(opt), f"--pass-pipeline=any(triton-dist-lower-to-{target})", "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        )
        assert tool.stdout.strip() == anchored.strip()
    # A bare list stays anchored on the module: func.func(...) in it runs on each function.
    assert "func.func @f" in mlir.run_pipeline(text, "func.func(canonicalize)")


@needs_mlir
def test_translating_an_unverified_malformed_module_raises():
    # A module region without a block parses with verify=False; translation verifies first instead of crashing.
    module = mlir.parse('"builtin.module"() ({}) : () -> ()', verify=False)
    with pytest.raises(mlir.MLIRError, match="region"):
        mlir.translate_to_llvmir(module)


@needs_mlir
def test_foreign_triple_is_rejected_by_each_lowering():
    nvptx = 'module attributes {llvm.target_triple = "nvptx64-nvidia-cuda"} {}\n'
    amdgcn = 'module attributes {llvm.target_triple = "amdgcn-amd-amdhsa"} {}\n'
    mlir.run_pipeline(nvptx, mlir.lowering_pipeline("nvvm"))
    mlir.run_pipeline(amdgcn, mlir.lowering_pipeline("rocdl"))
    with pytest.raises(mlir.MLIRError, match="targets 'amdgcn-amd-amdhsa'"):
        mlir.run_pipeline(amdgcn, mlir.lowering_pipeline("nvvm"))
    with pytest.raises(mlir.MLIRError, match="targets 'nvptx64-nvidia-cuda'"):
        mlir.run_pipeline(nvptx, mlir.lowering_pipeline("rocdl"))


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_lowering_pipeline_names(target):
    name = {"cuda": "nvvm", "hip": "rocdl"}[target]
    assert mlir.lowering_pipeline(name) == f"builtin.module(triton-dist-lower-to-{name})"
    with pytest.raises(ValueError):
        mlir.lowering_pipeline(target)


@needs_mlir
@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
def test_named_pipeline_is_the_pass_sequence_it_stands_for(target):
    # The named pipeline (registered in C++) is the one home of the sequence; it equals the passes spelled out.
    spelled = (
        f"builtin.module(convert-scf-to-cf,convert-distributed-to-{target},convert-arith-to-llvm,"
        "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts)"
    )
    module = mlir.parse_file(RING_STEP)
    assert mlir.run_pipeline(module, mlir.lowering_pipeline(target)) == mlir.run_pipeline(module, spelled)


# ----------------------------------------------------------------------------------------------------------------
# One process with Triton (Triton bundles its own LLVM; ours is Debian's libLLVM/libMLIR)
# ----------------------------------------------------------------------------------------------------------------

SAME_PROCESS = """
import sys
order = sys.argv[1]
if order == "triton-first":
    import triton
    from triton_dist._C import _mlir  # noqa: F401
else:
    from triton_dist._C import _mlir  # noqa: F401
    import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from triton_dist import mlir

@triton.jit
def add_one(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)

def compile_triton(target):
    src = ASTSource(fn=add_one, signature={"x_ptr": "*fp32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 64})
    return triton.compile(src, target=target).asm

def use_mlir():
    text = "func.func @f() -> i32 {\\n  %c = arith.constant 5 : i32\\n  return %c : i32\\n}\\n"
    ir = mlir.run_pipeline(text, "convert-arith-to-llvm,convert-func-to-llvm")
    assert "ret i32 5" in mlir.translate_to_llvmir(ir)
    try:
        mlir.parse("func.func @f( {", source_name="x.mlir")
    except mlir.MLIRError as err:
        assert "x.mlir:1:" in str(err)
    else:
        raise AssertionError("no MLIRError")

use_mlir()
assert ".version" in compile_triton(GPUTarget("cuda", 90, 32))["ptx"]
assert "amdgcn" in compile_triton(GPUTarget("hip", "gfx942", 64))["amdgcn"]
use_mlir()
print("OK", order)
"""


@needs_mlir
@pytest.mark.parametrize("order", ["triton-first", "mlir-first"])
def test_same_process_as_triton(order, tmp_path):
    script = tmp_path / "same_process.py"  # @triton.jit needs its source in a file
    script.write_text(SAME_PROCESS)
    env_path = str(REPO / "python")
    result = subprocess.run(
        [sys.executable, str(script), order],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": env_path, "TRITON_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"OK {order}" in result.stdout


# ----------------------------------------------------------------------------------------------------------------
# Without the compiled module (the GPU machines)
# ----------------------------------------------------------------------------------------------------------------

WITHOUT_EXTENSION = """
import sys
sys.modules["triton_dist._C._mlir"] = None  # as if it were never built
import triton_dist
from triton_dist import mlir
assert not mlir.is_available()
try:
    mlir.parse("module {}")
except ImportError as err:
    assert "scripts/build.sh" in str(err), err
    print("OK")
"""


def test_package_works_without_the_extension():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTENSION],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "OK"


def test_parse_file_refuses_a_descriptor_number_without_touching_it(tmp_path):
    # Fuzz finding F6: open(3) would read and close this process's descriptor 3 before the TypeError.
    path = tmp_path / "kept_open.txt"
    path.write_text("still open")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(TypeError, match="path must be a str or os.PathLike, not int"):
            mlir.parse_file(fd)
        assert os.read(fd, 100) == b"still open"  # neither read nor closed
    finally:
        os.close(fd)
