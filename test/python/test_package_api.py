"""The package root: ``triton_dist.init`` and friends are the runtime's, loaded lazily (no torch for kernels)."""

import subprocess
import sys
from pathlib import Path

import pytest

import triton_dist
from triton_dist import runtime

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


@pytest.mark.parametrize("name", triton_dist.RUNTIME_NAMES)
def test_runtime_names_are_reexported(name):
    assert getattr(triton_dist, name) is getattr(runtime, name)
    assert name in dir(triton_dist)


def test_runtime_all_is_the_same_list():
    assert sorted(runtime.__all__) == sorted(triton_dist.RUNTIME_NAMES)


def test_unknown_name_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'initialise'"):
        triton_dist.initialise  # noqa: B018


def test_importing_the_package_does_not_import_torch():
    code = "import sys, triton_dist; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(PYTHON_DIR), "PATH": ""})


def test_init_without_a_process_group_names_the_fix():
    with pytest.raises(RuntimeError, match="init_process_group"):
        triton_dist.init()


def test_testing_api_is_public_and_documented():
    import inspect

    from triton_dist import testing

    for name in testing.__all__:
        value = getattr(testing, name)
        if callable(value):
            assert inspect.getdoc(value), f"triton_dist.testing.{name} has no docstring"
    # The pinned contract other code is written against.
    assert {"warmup", "rep"} <= set(inspect.signature(testing.bench).parameters)
    assert list(inspect.signature(testing.assert_close).parameters)[:3] == ["out", "ref", "dtype"]
    assert list(inspect.signature(testing.compile_for).parameters)[:3] == ["kernel", "signature", "target"]
    assert list(inspect.signature(runtime.copy_chunks_with_flags).parameters) == [
        "copies",
        "flags",
        "values",
        "stream",
        "flag_writer",
    ]


def test_importing_testing_touches_no_gpu():
    code = "import torch, triton_dist.testing; assert not torch.cuda.is_initialized(), 'CUDA was initialized'"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(PYTHON_DIR), "PATH": ""})
