"""Misusing a primitive is a CompilationError at the kernel line that called it, with a message naming the problem.

These errors come from the code generator (before anything is linked), so the tests run without a device library.
They run ``isolated`` (conftest.py): each in a forked child, so a form that Triton's builder would abort on fails
its own test instead of killing pytest.
"""

from __future__ import annotations

import pytest
import triton
import triton.language as tl
from dl_compile import TARGETS, compile_kernel
from triton.compiler.errors import CompilationError

import triton_dist.language as dl

pytestmark = pytest.mark.isolated


@triton.jit
def bad_wait_scope(flag_ptr):
    dl.wait(flag_ptr, 1, "system", "acquire")


@triton.jit
def bad_wait_semantic(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "release")


@triton.jit
def wait_scope_not_a_string(flag_ptr):
    dl.wait(flag_ptr, 1, 3, "acquire")


@triton.jit
def bad_sig_op(flag_ptr):
    dl.notify(flag_ptr, 0, signal=1, sig_op="xor")


@triton.jit
def bad_comm_scope(flag_ptr, SCOPE: tl.constexpr):
    dl.notify(flag_ptr, 0, comm_scope=SCOPE)


@triton.jit
def symm_at_on_an_integer(flag_ptr, n):
    dl.symm_at(n, 0)


@triton.jit
def symm_at_on_a_constant(flag_ptr):
    dl.symm_at(42, 0)


@triton.jit
def notify_on_an_integer(flag_ptr, n):
    dl.notify(n, 0)


@triton.jit
def wait_on_an_integer(flag_ptr, n):
    dl.wait(n, 1, "sys", "acquire")


@triton.jit
def wait_on_a_tensor_of_pointers(flag_ptr):
    dl.wait(flag_ptr + tl.arange(0, 4), 4, "sys", "acquire")


@triton.jit
def wait_on_float_flags(data_ptr):
    dl.wait(data_ptr, 1, "sys", "acquire")


@triton.jit
def notify_float_flags(data_ptr):
    dl.notify(data_ptr, 0)


@triton.jit
def notify_const_flags(flag_ptr):
    dl.notify(flag_ptr, 0)


@triton.jit
def consume_an_integer_token(flag_ptr, n):
    dl.consume_token(flag_ptr, n)


@triton.jit
def consume_a_pointer_token(flag_ptr):
    dl.consume_token(flag_ptr, flag_ptr)


@triton.jit
def consume_into_a_float(flag_ptr, data_ptr):
    token = dl.wait(flag_ptr, 1, "sys", "acquire")
    dl.consume_token(tl.load(data_ptr), token)


@triton.jit
def float_signal(flag_ptr):
    dl.notify(flag_ptr, 0, signal=1.5)


@triton.jit
def float_tensor_signal(flag_ptr, data_ptr):
    dl.notify(flag_ptr, 0, signal=tl.load(data_ptr))


@triton.jit
def tensor_signal_for_a_scalar_flag(flag_ptr):
    dl.notify(flag_ptr, 0, signal=tl.arange(0, 4))


@triton.jit
def float_wait_value(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=2.0)


@triton.jit
def wait_value_too_large(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=1 << 40)


@triton.jit
def float_num_barriers(flag_ptr):
    dl.wait(flag_ptr, 2.0, "sys", "acquire")


@triton.jit
def pointer_num_barriers(flag_ptr):
    dl.wait(flag_ptr, flag_ptr, "sys", "acquire")


@triton.jit
def tensor_num_barriers(flag_ptr):
    dl.wait(flag_ptr, tl.arange(0, 2), "sys", "acquire")


AXES = "axis must be one of ['world', 'local', 'node']"


@triton.jit
def rank_axis_zero(out_ptr):
    tl.store(out_ptr, dl.rank(axis=0))


@triton.jit
def num_ranks_axis_one(out_ptr):
    tl.store(out_ptr, dl.num_ranks(1))


@triton.jit
def rank_axis_misspelled(out_ptr):
    tl.store(out_ptr, dl.rank(axis="nodes"))


@triton.jit
def num_ranks_axis_float(out_ptr):
    tl.store(out_ptr, dl.num_ranks(axis=-1.0))


@triton.jit
def negative_peer(flag_ptr):
    dl.symm_at(flag_ptr, -1)


@triton.jit
def float_peer(flag_ptr):
    dl.notify(flag_ptr, 1.0)


@triton.jit
def consume_a_block_pointer(flag_ptr):
    token = dl.wait(flag_ptr, 1, "sys", "acquire")
    dl.consume_token(tl.make_block_ptr(flag_ptr, (16,), (1,), (0,), (16,), (0,)), token)


@triton.jit
def block_pointer(data_ptr):
    block = tl.make_block_ptr(data_ptr, (16,), (1,), (0,), (16,), (0,))
    dl.symm_at(block, 0)


@triton.jit
def wait_value_wraps(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=3000000000)


@triton.jit
def num_barriers_wraps(flag_ptr):
    dl.wait(flag_ptr, 3000000000, "sys", "acquire")


@triton.jit
def signal_wraps(flag_ptr):
    dl.notify(flag_ptr, 0, signal=3000000000)


@triton.jit
def negative_signal_for_unsigned_flags(flag_ptr):
    dl.notify(flag_ptr, 0, signal=-1)


@triton.jit
def rank_wraps(flag_ptr):
    dl.symm_at(flag_ptr, 3000000000)


@triton.jit
def rank_far_too_large(flag_ptr):
    dl.symm_at(flag_ptr, 1 << 40)


@triton.jit
def rank_beyond_the_heap_table(flag_ptr):
    dl.notify(flag_ptr, 300)


@triton.jit
def symm_at_shared_memory(flag_ptr):
    dl.symm_at(flag_ptr.to(tl.pointer_type(tl.int32, 3), bitcast=True), 0)


@triton.jit
def bad_cmp(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", cmp="geq")


@triton.jit
def ordered_cmp_on_unsigned_flags(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", 4, cmp="ge")


@triton.jit
def two_dimensional_ranks(flag_ptr):
    dl.notify(flag_ptr, tl.arange(0, 2)[:, None] + tl.arange(0, 2)[None, :])


@triton.jit
def ranks_and_flags_of_other_shapes(flag_ptr):
    dl.notify(flag_ptr + tl.arange(0, 8), tl.arange(0, 4))


@triton.jit
def float_ranks(data_ptr, flag_ptr):
    dl.notify(flag_ptr, tl.load(data_ptr + tl.arange(0, 4)))


@triton.jit
def mask_for_a_scalar_notify(flag_ptr):
    dl.notify(flag_ptr, 1, mask=dl.rank() > 0)


@triton.jit
def integer_mask(flag_ptr):
    dl.notify(flag_ptr, tl.arange(0, 4), mask=tl.arange(0, 4))


@triton.jit
def int64_wait_value_for_int32_flags(flag_ptr, v):
    dl.wait(flag_ptr, 1, "sys", "acquire", v)


@triton.jit
def int64_num_barriers(flag_ptr, v):
    dl.wait(flag_ptr, v, "sys", "acquire")


@triton.jit
def int64_signal_for_int32_flags(flag_ptr, v):
    dl.notify(flag_ptr, 0, signal=v)


@triton.jit
def mask_of_another_shape(flag_ptr):
    dl.notify(flag_ptr + tl.arange(0, 4), 0, mask=tl.arange(0, 8) < 3)


@triton.jit
def two_dimensional_signal(flag_ptr):
    dl.notify(flag_ptr + tl.arange(0, 4), 0, signal=tl.zeros((4, 4), tl.int32))


@triton.jit
def mask_of_another_shape_than_the_ranks(flag_ptr):
    dl.notify(flag_ptr, tl.arange(0, 4), mask=tl.arange(0, 2) < 1)


@triton.jit
def seven_positional_notify_arguments(flag_ptr):
    dl.notify(flag_ptr, 0, 1, "set", "gpu", None, 7)


@triton.jit
def seven_positional_wait_arguments(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", 1, "eq", 7)


@triton.jit
def unknown_keyword(flag_ptr):
    dl.notify(flag_ptr, 0, value=1)


I32 = {"flag_ptr": "*i32"}
FP32_I32 = {"data_ptr": "*fp32", "flag_ptr": "*i32"}
I32_N = {"flag_ptr": "*i32", "n": "i32"}
FP32 = {"data_ptr": "*fp32"}

# kernel, signature, constexprs, (phrases the message must contain)
CASES = [
    (bad_wait_scope, I32, {}, ("dl.wait", "scope must be one of ['cta', 'gpu', 'sys']", "'system'")),
    (bad_wait_semantic, I32, {}, ("dl.wait", "semantic must be one of ['acquire', 'relaxed']", "'release'")),
    (wait_scope_not_a_string, I32, {}, ("dl.wait", "scope must be a string")),
    (bad_sig_op, I32, {}, ("dl.notify", "sig_op must be one of ['set', 'add']", "'xor'")),
    (bad_comm_scope, I32, {"SCOPE": "node"}, ("dl.notify", "comm_scope must be one of", "'node'")),
    (symm_at_on_an_integer, I32_N, {}, ("dl.symm_at", "ptr must be a pointer or a tensor of pointers", "int32")),
    (symm_at_on_a_constant, I32, {}, ("dl.symm_at", "ptr must be a pointer", "42")),
    (notify_on_an_integer, I32_N, {}, ("dl.notify", "ptr must be a pointer")),
    (wait_on_an_integer, I32_N, {}, ("dl.wait", "barrierPtrs must be a scalar pointer")),
    (wait_on_a_tensor_of_pointers, I32, {}, ("dl.wait", "barrierPtrs must be a scalar pointer", "shape [4]")),
    (wait_on_float_flags, FP32, {}, ("dl.wait", "must point to int32 or int64 flags", "fp32")),
    (notify_float_flags, FP32, {}, ("dl.notify", "must point to int32 or int64 flags", "fp32")),
    (notify_const_flags, {"flag_ptr": "*ki32"}, {}, ("dl.notify", "ptr points to const data")),
    (consume_an_integer_token, I32_N, {}, ("dl.consume_token", "token must be the value returned by dl.wait")),
    (consume_a_pointer_token, I32, {}, ("dl.consume_token", "token must be the value returned by dl.wait")),
    (consume_into_a_float, {"flag_ptr": "*i32", "data_ptr": "*fp32"}, {}, ("value must be a pointer or an integer",)),
    (float_signal, I32, {}, ("dl.notify", "signal must be an integer", "1.5")),
    (float_tensor_signal, {"flag_ptr": "*i32", "data_ptr": "*fp32"}, {}, ("dl.notify", "signal must be an integer")),
    (tensor_signal_for_a_scalar_flag, I32, {}, ("dl.notify", "signal must be a scalar integer")),
    (float_wait_value, I32, {}, ("dl.wait", "waitValue must be an integer", "2.0")),
    (wait_value_too_large, I32, {}, ("dl.wait", "waitValue=1099511627776 does not fit in the int32 flags")),
    (wait_value_wraps, I32, {}, ("dl.wait", "waitValue=3000000000 does not fit in the int32 flags")),
    (num_barriers_wraps, I32, {}, ("dl.wait", "numBarriers=3000000000 does not fit in the ABI's numBarriers type")),
    (signal_wraps, I32, {}, ("dl.notify", "signal=3000000000 does not fit in the int32 flags")),
    (negative_signal_for_unsigned_flags, {"flag_ptr": "*u32"}, {}, ("dl.notify", "signal=-1 does not fit")),
    (rank_wraps, I32, {}, ("dl.symm_at", "rank=3000000000 does not fit in the ABI's rank type (int32")),
    (rank_far_too_large, I32, {}, ("dl.symm_at", "rank=1099511627776 does not fit in the ABI's rank type (int32")),
    (rank_beyond_the_heap_table, I32, {}, ("dl.notify", "rank=300 is beyond the largest world (256 ranks)")),
    (symm_at_shared_memory, I32, {}, ("dl.symm_at", "address space 3,", "shared memory")),
    (bad_cmp, I32, {}, ("dl.wait", "cmp must be one of ['eq', 'ne', 'ge', 'gt', 'le', 'lt']", "'geq'")),
    (ordered_cmp_on_unsigned_flags, {"flag_ptr": "*u32"}, {}, ("dl.wait", "cmp='ge' compares signed", "uint32")),
    (two_dimensional_ranks, I32, {}, ("dl.notify", "a tensor of ranks must be 1-D")),
    (ranks_and_flags_of_other_shapes, I32, {}, ("dl.notify", "a tensor of the ranks' shape [4]")),
    (float_ranks, FP32_I32, {}, ("dl.notify", "rank must be an integer or a 1-D tensor of integers")),
    (mask_for_a_scalar_notify, I32, {}, ("dl.notify", "mask applies to the tensor forms only")),
    (integer_mask, I32, {}, ("dl.notify", "mask must be a boolean tensor", "int32")),
    (float_num_barriers, I32, {}, ("dl.wait", "numBarriers must be an integer", "2.0")),
    (pointer_num_barriers, I32, {}, ("dl.wait", "numBarriers must be an integer", "pointer")),
    (tensor_num_barriers, I32, {}, ("dl.wait", "numBarriers must be a scalar integer")),
    (rank_axis_zero, {"out_ptr": "*i32"}, {}, ("dl.rank", AXES, "got axis=0")),
    (num_ranks_axis_one, {"out_ptr": "*i32"}, {}, ("dl.num_ranks", AXES, "got axis=1")),
    (rank_axis_misspelled, {"out_ptr": "*i32"}, {}, ("dl.rank", AXES, "got axis='nodes'")),
    (num_ranks_axis_float, {"out_ptr": "*i32"}, {}, ("dl.num_ranks", AXES, "-1.0")),
    (negative_peer, I32, {}, ("dl.symm_at", "rank must be >= 0", "-1")),
    (float_peer, I32, {}, ("dl.notify", "rank must be an integer")),
    (block_pointer, FP32, {}, ("dl.symm_at", "block pointer")),
    (consume_a_block_pointer, I32, {}, ("dl.consume_token", "block pointer")),
    # Runtime values wider than what they are converted to: refused, never truncated.
    (
        int64_wait_value_for_int32_flags,
        {"flag_ptr": "*i32", "v": "i64"},
        {},
        ("dl.wait", "waitValue is a scalar int64, wider than the int32"),
    ),
    (
        int64_num_barriers,
        {"flag_ptr": "*i32", "v": "i64"},
        {},
        ("dl.wait", "numBarriers is a scalar int64", "(int32)", ".to(tl.int32)"),
    ),
    (
        int64_signal_for_int32_flags,
        {"flag_ptr": "*i32", "v": "i64"},
        {},
        ("dl.notify", "signal is a scalar int64, wider than the int32 flags"),
    ),
    (mask_of_another_shape, I32, {}, ("dl.notify", "mask must be a scalar or a tensor of ptr's shape [4]", "[8]")),
    (two_dimensional_signal, I32, {}, ("dl.notify", "signal must be a scalar or a tensor of ptr's shape [4]")),
    (mask_of_another_shape_than_the_ranks, I32, {}, ("dl.notify", "mask must be", "rank's shape [4]", "[2]")),
    (seven_positional_notify_arguments, I32, {}, ("dl.notify: too many positional", "mask=None)")),
    (seven_positional_wait_arguments, I32, {}, ("dl.wait: too many positional", "waitValue=1, cmp='eq')")),
    (unknown_keyword, I32, {}, ("dl.notify", "unexpected keyword argument 'value'", "signal=1")),
]


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(("kernel", "signature", "constexprs", "phrases"), CASES, ids=[c[0].__name__ for c in CASES])
def test_misuse_is_a_compilation_error_at_the_call(kernel, signature, constexprs, phrases, target_name):
    with pytest.raises(CompilationError) as caught:
        compile_kernel(kernel, signature, target_name, constexprs)
    error = caught.value
    for phrase in phrases:
        assert phrase in error.error_message, f"{phrase!r} not in {error.error_message!r}"
    # The error points at the kernel line that called the primitive (line numbers count from the `def`).
    assert error.src == kernel.src
    line = kernel.src.splitlines()[error.node.lineno - 1]
    assert "dl." in line, f"the error points at {line!r}"
    assert f"at {error.node.lineno}:" in str(error) and line.strip() in str(error)


def test_primitives_outside_a_kernel_say_so():
    with pytest.raises(ValueError, match="triton.jit"):
        dl.rank()


@triton.jit
def misuse(flag_ptr, data_ptr, CALL: tl.constexpr, FORM: tl.constexpr):
    """``CALL`` passes the value ``FORM`` where a primitive expects something else (each a static branch)."""
    if FORM == "block_pointer":
        bad = tl.make_block_ptr(flag_ptr, (16,), (1,), (0,), (16,), (0,))
    elif FORM == "tensor_descriptor":
        bad = tl.make_tensor_descriptor(data_ptr, [16], [1], [16])
    elif FORM == "tuple":
        bad = (flag_ptr, 1)
    elif FORM == "token":
        bad = dl.wait(flag_ptr, 1, "sys", "acquire")
    elif FORM == "string":
        bad: tl.constexpr = "sys"
    elif FORM == "none":
        bad = None
    elif FORM == "float":
        bad = 1.5
    else:
        bad = tl.int32
    if CALL == "symm_at.ptr":
        dl.symm_at(bad, 0)
    elif CALL == "symm_at.rank":
        dl.symm_at(flag_ptr, bad)
    elif CALL == "notify.ptr":
        dl.notify(bad, 0)
    elif CALL == "notify.rank":
        dl.notify(flag_ptr, bad)
    elif CALL == "notify.signal":
        dl.notify(flag_ptr, 0, signal=bad)
    elif CALL == "notify.mask":
        dl.notify(flag_ptr + tl.arange(0, 4), 0, mask=bad)
    elif CALL == "notify.sig_op":
        dl.notify(flag_ptr, 0, sig_op=bad)
    elif CALL == "wait.barrierPtrs":
        dl.wait(bad, 1, "sys", "acquire")
    elif CALL == "wait.numBarriers":
        dl.wait(flag_ptr, bad, "sys", "acquire")
    elif CALL == "wait.waitValue":
        dl.wait(flag_ptr, 1, "sys", "acquire", bad)
    elif CALL == "wait.cmp":
        dl.wait(flag_ptr, 1, "sys", "acquire", cmp=bad)
    elif CALL == "consume_token.value":
        dl.consume_token(bad, dl.wait(flag_ptr, 1, "sys", "acquire"))
    elif CALL == "consume_token.token":
        dl.consume_token(flag_ptr, bad)
    elif CALL == "rank.axis":
        dl.rank(bad)
    else:
        dl.num_ranks(bad)


MISUSE_CALLS = [
    "symm_at.ptr",
    "symm_at.rank",
    "notify.ptr",
    "notify.rank",
    "notify.signal",
    "notify.sig_op",
    "notify.mask",
    "wait.barrierPtrs",
    "wait.numBarriers",
    "wait.waitValue",
    "wait.cmp",
    "consume_token.value",
    "consume_token.token",
    "rank.axis",
    "num_ranks.axis",
]
MISUSE_FORMS = ["block_pointer", "tensor_descriptor", "tuple", "token", "string", "none", "float", "dtype"]
VALID = {("consume_token.token", "token"), ("notify.sig_op", "string"), ("wait.cmp", "string"), ("notify.mask", "none")}
MISUSES = [(call, form) for call in MISUSE_CALLS for form in MISUSE_FORMS if (call, form) not in VALID]


@pytest.mark.parametrize(("call", "form"), MISUSES, ids=[f"{call}-{form}" for call, form in MISUSES])
def test_every_argument_form_the_builder_cannot_take_is_a_compilation_error(call, form):
    """No form Triton's builder cannot take reaches it (it would abort the process): each is a CompilationError at
    the primitive's line, naming the primitive and the argument."""
    primitive, argument = call.split(".")
    with pytest.raises(CompilationError) as caught:
        compile_kernel(misuse, {"flag_ptr": "*i32", "data_ptr": "*fp32"}, "sm_90", {"CALL": call, "FORM": form})
    error = caught.value
    message = error.error_message
    assert message.startswith(f"dl.{primitive}: "), message
    assert argument in message or (argument == "signal" and "sig" in message), message
    line = misuse.src.splitlines()[error.node.lineno - 1]
    assert f"dl.{primitive}(" in line, f"the error points at {line!r}"


def test_an_abort_in_an_isolated_test_fails_only_that_test(tmp_path):
    """The conftest's ``isolated`` marker: a test whose process aborts fails, and pytest goes on to the next."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    shutil.copy(here / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(here / "dl_compile.py", tmp_path / "dl_compile.py")
    (tmp_path / "test_abort.py").write_text(
        "import os\nimport pytest\n\n\n@pytest.mark.isolated\ndef test_aborts():\n    os.abort()\n\n\n"
        "@pytest.mark.isolated\ndef test_passes():\n    assert 1 + 1 == 2\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_abort.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "killed by SIGABRT" in result.stdout, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout, result.stdout + result.stderr
