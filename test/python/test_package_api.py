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


def test_testing_exports_the_timing_helpers():
    """The benchmarks' per-call timings are package-level names (they were reachable only as testing.timing.*)."""
    from triton_dist import testing
    from triton_dist.testing import timing

    for name in (
        "time_ms",
        "eager_us",
        "graphed_us",
        "host_us",
        "idle_ms_samples",
        "idle_ms_interleaved",
        "bench",
        "bench_samples",
    ):
        assert name in testing.__all__, name
        assert getattr(testing, name) is getattr(timing, name), name


def test_importing_testing_touches_no_gpu():
    code = "import torch, triton_dist.testing; assert not torch.cuda.is_initialized(), 'CUDA was initialized'"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(PYTHON_DIR), "PATH": ""})


LAYERS = ("abi", "compiler", "language", "runtime", "ops", "layers")
"""The package's layers, each allowed to import only the ones before it (issue 24: no import cycle)."""


def _layer_of(module: str) -> int | None:
    """The index in LAYERS of a ``triton_dist.<layer>...`` module name (None: the package root or outside)."""
    parts = module.split(".")
    if parts[0] != "triton_dist" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else len(LAYERS)  # testing, mlir, ...: after every layer


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, at any depth (lazy imports in functions count), including
    ``importlib.import_module("...")`` with a constant name."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "triton_dist":  # from triton_dist import runtime
                found += [(node.lineno, f"triton_dist.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def test_layers_import_only_the_layers_before_them():
    """abi -> compiler -> language -> runtime -> ops -> layers: the compiler reaches the runtime only through the
    hook the runtime registers (compiler/context_hook.py), never by importing it, lazily or through importlib."""
    package = PYTHON_DIR / "triton_dist"
    violations = []
    for layer in LAYERS[:-1]:  # layers, the last, may import everything before it
        files = [package / "abi.py"] if layer == "abi" else sorted((package / layer).rglob("*.py"))
        for path in files:
            for line, module in _imported_modules(path):
                target = _layer_of(module)
                if target is not None and target > LAYERS.index(layer):
                    violations.append(f"{path.relative_to(PYTHON_DIR)}:{line} imports {module}")
    assert not violations, "imports against the layering:\n" + "\n".join(violations)


def test_ops_import_no_testing_and_no_other_ops_private_names():
    """The ops never import triton_dist.testing (issue 24), and an op takes from another op (``ops/<op>/``) only the
    public names of its package, never a private name or one of its modules (kernels, config, op)."""
    import ast

    ops_dir = PYTHON_DIR / "triton_dist" / "ops"
    ops = {path.parent.name for path in ops_dir.glob("*/__init__.py")} - {"common", "tuning"}
    violations = []
    for path in sorted(ops_dir.rglob("*.py")):
        rel = path.relative_to(ops_dir).parts
        home = rel[0] if len(rel) > 1 else None
        for line, module in _imported_modules(path):
            if module.startswith("triton_dist.testing"):
                violations.append(f"{path.relative_to(PYTHON_DIR)}:{line} imports {module}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("triton_dist.ops.")):
                continue
            parts = node.module.split(".")
            if parts[2] == home or parts[2] not in ops:
                continue
            private = [alias.name for alias in node.names if alias.name.startswith("_")]
            if len(parts) > 3 or private:
                violations.append(f"{path.relative_to(PYTHON_DIR)}:{node.lineno} takes {private or node.module}")
    assert not violations, "ops reaching past another op's public names, or into testing:\n" + "\n".join(violations)


def test_the_layer_check_sees_lazy_and_importlib_imports(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "import importlib\n"
        "def f():\n"
        "    from triton_dist import runtime\n"
        "    return importlib.import_module('triton_dist.ops.matmul')\n"
    )
    modules = [module for _, module in _imported_modules(source)]
    assert "triton_dist.runtime" in modules and "triton_dist.ops.matmul" in modules
    assert _layer_of("triton_dist.runtime.heap") == 3 and _layer_of("triton_dist") is None


def test_importing_a_layer_imports_no_later_layer():
    code = (
        "import sys\n"
        "import triton_dist.compiler\n"
        "assert not any(m.startswith(('triton_dist.language', 'triton_dist.runtime')) for m in sys.modules)\n"
        "import triton_dist.language\n"
        "assert not any(m.startswith('triton_dist.runtime') for m in sys.modules), 'language imported the runtime'\n"
        "import triton_dist.runtime, triton_dist.compiler.context_hook as hooks\n"
        "assert hooks.context_hooks.runtime_registered, 'importing the runtime registers its context hook'\n"
        "import triton_dist.ops\n"
        "assert not any(m.startswith('triton_dist.layers') for m in sys.modules), 'the ops imported the layers'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(PYTHON_DIR), "PATH": ""})
