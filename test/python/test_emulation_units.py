"""The CPU emulation's parts that need no ranks: how it is registered, which kernels it takes over, its knobs.

The kernels themselves run at 2 and 3 ranks in test_emulation_primitives.py.
"""

from __future__ import annotations

import types

import pytest
import triton
import triton.language as tl
import triton.runtime.interpreter as interpreter

import triton_dist.language as dl
import triton_dist.runtime  # noqa: F401 (registers the emulation)
from triton_dist.language import _primitive
from triton_dist.runtime.emulation import EmulatedGridExecutor, uses_primitives, visibility
from triton_dist.runtime.emulation.backend import run_primitive
from triton_dist.runtime.emulation.executor import jit_helpers


@triton.jit
def _notify_helper(flag_ptr):
    dl.notify(flag_ptr, 0)


@triton.jit
def _calls_a_helper(flag_ptr):
    _notify_helper(flag_ptr)


@triton.jit
def _plain(x_ptr):
    tl.store(x_ptr, 1)


@triton.jit
def _blocks(flag_ptr, n):
    if tl.cdiv(n, 16) > 1:
        _calls_a_helper(flag_ptr)


def test_importing_the_runtime_registers_the_backend_and_the_executor() -> None:
    assert _primitive.interpreter_backend() is run_primitive
    assert interpreter.GridExecutor is EmulatedGridExecutor


def test_register_interpreter_backend_returns_the_one_it_replaces() -> None:
    def other(name, fn, args, kwargs):  # noqa: ANN001, ANN202
        return None

    previous = _primitive.register_interpreter_backend(other)
    try:
        assert previous is run_primitive and _primitive.interpreter_backend() is other
    finally:
        assert _primitive.register_interpreter_backend(previous) is other


def test_kernels_that_call_primitives_are_recognized_through_helpers_and_modules() -> None:
    assert uses_primitives(_notify_helper.fn)
    assert uses_primitives(_calls_a_helper.fn)
    assert not uses_primitives(_plain.fn)
    helpers = types.ModuleType("helpers")
    helpers.push = _notify_helper  # type: ignore[attr-defined]
    helpers.store = _plain  # type: ignore[attr-defined]
    namespace = {"helpers": helpers, "tl": tl}
    exec("def through_module(p):\n    helpers.push(p)\n\ndef plain_module(p):\n    helpers.store(p)\n", namespace)
    assert uses_primitives(namespace["through_module"])
    assert not uses_primitives(namespace["plain_module"])


def test_every_helper_a_kernel_may_call_is_found_before_its_programs_start() -> None:
    """The executor rewrites them up front: Triton's first call of a helper adds names to its module's globals,
    which another program iterating them at the same time fails on ("dictionary changed size during iteration",
    seen in the all-gather examples at 3 ranks)."""
    names = sorted(helper.__name__ for helper in jit_helpers(_blocks.fn))
    assert names == ["_calls_a_helper", "_notify_helper", "cdiv"]
    assert jit_helpers(_plain.fn) == []


def test_a_primitive_outside_a_kernel_still_says_so() -> None:
    with pytest.raises(ValueError, match=r"dl.rank can only be called inside a @triton.jit kernel"):
        dl.rank()


@pytest.mark.parametrize(("value", "expected"), [("", "coherent"), ("happens-before", "happens-before")])
def test_the_visibility_mode_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv(visibility.VISIBILITY_ENV, value)
    assert visibility.mode() == expected


def test_an_unknown_visibility_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(visibility.VISIBILITY_ENV, "sequential")
    with pytest.raises(ValueError, match=r"TRITON_DIST_EMULATE_VISIBILITY must be one of .*got 'sequential'"):
        visibility.mode()


def test_bit_patterns_round_trip() -> None:
    import numpy as np

    for values in (np.array([1.5, -2.0], dtype=np.float32), np.array([-3, 7], dtype=np.int64)):
        assert np.array_equal(visibility.from_bits(visibility.as_bits(values), values.dtype), values)
