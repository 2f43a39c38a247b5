"""Errors a kernel writer meets in the frontend (issue 25, items 3 and F3), each a CompilationError (or, at launch,
an exception) whose ``str()`` names the problem:

- ``dl.wait`` / ``dl.notify`` in a ``tl.reduce`` / ``tl.associative_scan`` combiner or a ``tl.map_elementwise``
  function (they synchronize the whole program; those functions run per element);
- a primitive's error inside ``@triton.jit`` helpers reaches ``str(e)`` of the kernel's error, with the helpers' lines;
- a wait token used as a tensor (``==``, arithmetic, ``tl.where``);
- a kernel launched where no GPU driver is active.

The argument checks of each primitive are in test_language_errors.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import triton
import triton.language as tl
from dl_compile import compile_kernel
from triton.compiler.errors import CompilationError

import triton_dist.language as dl
from triton_dist.compiler import driver_check

REPO = Path(__file__).resolve().parents[2]
FLAGS = {"flag_ptr": "*i32", "out_ptr": "*i32"}


def compile_error(kernel, signature=FLAGS, constexprs=None) -> CompilationError:
    """The CompilationError compiling ``kernel`` for sm_90 raises (fails the test if it compiles)."""
    with pytest.raises(CompilationError) as caught:
        compile_kernel(kernel, signature, "sm_90", constexprs)
    return caught.value


# --- wait / notify in per-element functions -------------------------------------------------------------------


@triton.jit
def _waiting_combiner(a, pa, b, pb):
    dl.wait(pa, 1, "sys", "acquire")
    return a + b, pa


@triton.jit
def wait_in_a_scan_combiner(flag_ptr, out_ptr):
    offs = tl.arange(0, 16)
    total, _ = tl.associative_scan((offs, flag_ptr + offs), 0, _waiting_combiner)
    tl.store(out_ptr + offs, total)


@triton.jit
def _notifying_combiner(a, pa, b, pb):
    dl.notify(pa, 0)
    return a + b, pa


@triton.jit
def notify_in_a_reduce_combiner(flag_ptr, out_ptr):
    offs = tl.arange(0, 16)
    total, _ = tl.reduce((offs, flag_ptr + offs), 0, _notifying_combiner)
    tl.store(out_ptr, total)


@triton.jit
def _wait_helper(p):
    dl.wait(p, 1, "gpu", "relaxed")


@triton.jit
def _combiner_calling_a_helper(a, pa, b, pb):
    _wait_helper(pb)
    return a + b, pa


@triton.jit
def wait_in_a_helper_of_a_combiner(flag_ptr, out_ptr):
    offs = tl.arange(0, 16)
    total, _ = tl.reduce((offs, flag_ptr + offs), 0, _combiner_calling_a_helper)
    tl.store(out_ptr, total)


@triton.jit
def _mapped(x, p):
    dl.notify(p, 0)
    return x


@triton.jit
def notify_in_a_mapped_function(flag_ptr, out_ptr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, tl.map_elementwise(_mapped, offs, flag_ptr + offs))


@triton.jit
def _ranked_sum(a, b):
    return a + b + dl.rank() * 0


@triton.jit
def rank_in_a_combiner(flag_ptr, out_ptr):
    tl.store(out_ptr, tl.reduce(tl.arange(0, 16), 0, _ranked_sum))


@pytest.mark.parametrize(
    ("kernel", "phrase", "call"),
    [
        (wait_in_a_scan_combiner, "dl.wait cannot be called in the combine function of tl.associative_scan", "scan"),
        (notify_in_a_reduce_combiner, "dl.notify cannot be called in the combine function of tl.reduce", "reduce"),
        (wait_in_a_helper_of_a_combiner, "dl.wait cannot be called in the combine function of tl.reduce", "reduce"),
        (notify_in_a_mapped_function, "dl.notify cannot be called in the function of tl.map_elementwise", "map"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_wait_and_notify_in_per_element_functions_are_errors(kernel, phrase, call):
    error = compile_error(kernel)
    text = str(error)
    assert phrase in text, text
    assert text.count(phrase) == 1 and text.count("^") == 1, "one location, one message:\n" + text
    line = kernel.src.splitlines()[error.node.lineno - 1]
    assert f"tl.{'associative_scan' if call == 'scan' else call}" in line, f"the error points at {line!r}"
    primitive = "wait" if "dl.wait" in phrase else "notify"
    assert any(f"dl.{primitive}(" in line for line in text.splitlines()[-2:]), "the primitive's call is shown"


def test_pure_primitives_stay_allowed_in_a_combiner():
    compile_kernel(rank_in_a_combiner, FLAGS, "sm_90")


# --- a primitive's error inside helpers -----------------------------------------------------------------------


@triton.jit
def _inner(p):
    dl.wait(p, 1, "system", "acquire")


@triton.jit
def _outer(p):
    _inner(p + 1)


@triton.jit
def misuse_two_helpers_down(flag_ptr, out_ptr):
    _outer(flag_ptr)


@triton.jit
def _triton_misuse(p):
    tl.store(p + tl.arange(0, 3), 1)


@triton.jit
def triton_error_in_a_helper(flag_ptr, out_ptr):
    _triton_misuse(out_ptr)


def test_a_primitive_error_in_helpers_reaches_str_of_the_kernel_error():
    error = compile_error(misuse_two_helpers_down)
    assert error.error_message.startswith("dl.wait: scope must be one of ['cta', 'gpu', 'sys'], got 'system'")
    lines = str(error).splitlines()
    assert "_outer(flag_ptr)" in lines[error.node.lineno], "located at the kernel's call of the first helper"
    assert lines[-2].startswith("  in _inner() at ") and lines[-2].endswith('dl.wait(p, 1, "system", "acquire")')
    assert lines[-1].startswith("  in _outer() at ") and lines[-1].endswith("_inner(p + 1)")
    file_name, line = lines[-2].split(" at ", 1)[1].split(":")[:2]
    assert (
        Path(file_name) == Path(__file__) and "dl.wait(p, 1" in Path(__file__).read_text().splitlines()[int(line) - 1]
    ), "the line number is the file's"


def test_triton_errors_in_helpers_are_left_as_triton_raises_them():
    error = compile_error(triton_error_in_a_helper)
    assert error.error_message is None, "only primitive errors are carried up"
    assert "arange's range must be a power of 2" in str(error.__cause__)


# --- wait tokens used as tensors ------------------------------------------------------------------------------


@triton.jit
def token_operation(flag_ptr, out_ptr, OP: tl.constexpr):
    token = dl.wait(flag_ptr, 1, "sys", "acquire")
    if OP == "eq":
        tl.store(out_ptr, token == token)
    elif OP == "add":
        tl.store(out_ptr, token + 1)
    elif OP == "tensor_eq":
        tl.store(out_ptr, tl.load(out_ptr) == token)
    else:
        tl.store(out_ptr, tl.where(tl.load(out_ptr) > 0, token, token))


@pytest.mark.parametrize("op", ["eq", "add", "tensor_eq", "where"])
def test_a_token_used_as_a_tensor_is_an_error_naming_the_token(op):
    error = compile_error(token_operation, FLAGS, {"OP": op})
    if op == "tensor_eq":  # Triton's own message, naming the operand by its repr
        assert "cannot convert wait_token (from dl.wait: not a tensor" in error.error_message, error.error_message
    else:
        assert "a wait token (from dl.wait) is not a tensor" in error.error_message, error.error_message
    assert "dl.consume_token" in error.error_message
    assert "tl.store(out_ptr" in token_operation.src.splitlines()[error.node.lineno - 1]


# --- widening stays allowed -----------------------------------------------------------------------------------


@triton.jit
def widening_values(flag_ptr, wide_ptr, small, big):
    dl.wait(wide_ptr, small, "sys", "acquire", small)  # int32 count and value for int64 flags
    dl.wait(flag_ptr, 1, "sys", "acquire", small.to(tl.int8))
    dl.wait(flag_ptr, big.to(tl.int32), "sys", "acquire", big.to(tl.int32))  # explicit narrowing
    dl.notify(wide_ptr, 0, signal=small)


def test_values_that_fit_the_flags_compile():
    compile_kernel(widening_values, {"flag_ptr": "*i32", "wide_ptr": "*i64", "small": "i32", "big": "i64"}, "sm_90")


# --- no GPU driver --------------------------------------------------------------------------------------------


class FakeDriverConfig:
    """Triton's ``DriverConfig`` as driver_check uses it."""

    def __init__(self, default) -> None:
        self._default = default
        self._active = None

    @property
    def default(self):
        if isinstance(self._default, Exception):
            raise self._default
        return self._default

    def set_active(self, driver) -> None:
        self._active = driver


class FakeDriver:
    def get_current_device(self) -> int:
        return 3


def test_the_driver_stand_in_steps_aside_for_the_real_driver():
    real = FakeDriver()
    config = FakeDriverConfig(real)
    assert driver_check.install_driver_check(config) is True
    stand_in = config._active
    assert isinstance(stand_in, driver_check.ActiveDriverStandIn)
    assert stand_in.get_current_device() == 3
    assert config._active is real, "later uses reach the real driver directly"
    assert driver_check.install_driver_check(config) is False, "a chosen driver is never replaced"


def test_without_a_driver_the_stand_in_says_what_to_do():
    config = FakeDriverConfig(RuntimeError("0 active drivers ([]). There should only be one."))
    driver_check.install_driver_check(config)
    with pytest.raises(driver_check.NoGpuDriverError, match=r"no GPU driver is active.*CUDA_VISIBLE_DEVICES"):
        config._active.get_current_target()
    assert not hasattr(config._active, "_obj"), "private probes see an AttributeError"
    two = FakeDriverConfig(RuntimeError("2 active drivers ([a, b]). There should only be one."))
    driver_check.install_driver_check(two)
    with pytest.raises(RuntimeError, match="^2 active drivers"):
        two._active.get_current_target()


LAUNCH_SCRIPT = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    import triton_dist.language as dl

    @triton.jit
    def ranked(out_ptr):
        tl.store(out_ptr, dl.rank())

    try:
        ranked[(1,)](torch.zeros(1, dtype=torch.int32))
    except RuntimeError as error:
        print(type(error).__name__, error)
    """
)


def test_a_launch_without_a_gpu_driver_names_the_kernel_and_the_fix(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: Triton has a driver")
    script = tmp_path / "launch.py"  # Triton reads @jit source from a file
    script.write_text(LAUNCH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("NoGpuDriverError triton_dist: cannot launch kernel 'ranked': no GPU driver"), (
        result.stdout + result.stderr
    )
    assert "init(device='cpu') serves host code only" in result.stdout
