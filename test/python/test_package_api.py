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
