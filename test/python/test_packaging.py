"""Packaging: the declared dependencies, setup.py's build progress, and scripts/build.sh's refusal to build another
checkout's tree (issue 25, item 2). Runs without a pip install: setup.py's functions are imported, build.sh runs
against a stub cmake."""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "triton_dist"
DISTRIBUTIONS = {"cuda": "cuda-python"}
"""Import name -> distribution name, where they differ."""


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    for separator in "=<>!~[; ":
        requirement = requirement.split(separator)[0]
    return requirement.strip().lower()


def _third_party_imports() -> dict[str, tuple[bool, str]]:
    """Top-level module -> (imported where any import of the package reaches it, first place) for every module
    outside the standard library and triton_dist. An import inside a function or a ``try`` is optional."""
    found: dict[str, tuple[bool, str]] = {}

    def visit(node: ast.AST, path: Path, optional: bool) -> None:
        for child in ast.iter_child_nodes(node):
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("triton_dist", "__future__"):
                    continue
                required, where = found.get(top, (False, ""))
                found[top] = (required or not optional, where or f"{path.relative_to(REPO)}:{child.lineno}")
            inner = optional or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            visit(child, path, inner)

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(ast.parse(path.read_text(), str(path)), path, False)
    return found


def test_every_third_party_import_is_a_declared_dependency():
    """torch is declared (the runtime, the ops and triton_dist.testing import it at module level); a module imported
    only on first use (matplotlib, cuda-python) is an optional extra."""
    project = _project()
    required = {_name(r) for r in project["dependencies"]}
    optional = {_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    assert "torch" in required and "triton" in required
    imports = _third_party_imports()
    assert imports["torch"][0], "torch is imported at module level somewhere in the package"
    for module, (needed, where) in imports.items():
        distribution = DISTRIBUTIONS.get(module, module)
        if needed:
            assert distribution in required, f"{module} ({where}) is imported at module level: declare {distribution}"
        else:
            assert distribution in required | optional, f"{module} ({where}): declare {distribution} as an extra"


# ---------------------------------------------------------------------------------------------------------------
# setup.py


def _setup_module() -> ModuleType:
    """setup.py's functions, without running setup() (it runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("triton_dist_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_output_goes_line_by_line_to_the_log_and_the_terminal(tmp_path):
    setup = _setup_module()
    log, terminal = io.StringIO(), io.StringIO()
    script = "echo '[1/2] Building CXX'; echo '[2/2] Linking' >&2"
    setup.run_build(["bash", "-c", script], tmp_path, log, terminal)
    for stream in (log, terminal):
        lines = stream.getvalue().splitlines()
        assert lines[0].startswith("triton-dist: building the C++ side (bash -c")
        assert lines[1:] == ["[1/2] Building CXX", "[2/2] Linking"]  # stderr too, in order


def test_a_failed_build_raises_naming_the_command(tmp_path):
    setup = _setup_module()
    log = io.StringIO()
    with pytest.raises(subprocess.CalledProcessError) as caught:
        setup.run_build(["bash", "-c", "echo 'ninja: build stopped'; exit 3"], tmp_path, log, None)
    assert caught.value.returncode == 3 and caught.value.cmd[:2] == ["bash", "-c"]
    assert log.getvalue().splitlines()[-1] == "ninja: build stopped"


def test_progress_goes_to_the_terminal_only_where_pip_hides_it(tmp_path, monkeypatch):
    setup = _setup_module()
    tty = tmp_path / "tty"
    tty.touch()
    monkeypatch.delenv("TRITON_DIST_BUILD_QUIET", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # captured, as under pip
    terminal = setup.open_terminal(str(tty))
    assert terminal is not None
    terminal.write("x")
    terminal.close()
    assert tty.read_text() == "x"
    assert setup.open_terminal(str(tmp_path / "missing" / "tty")) is None  # no terminal (CI)
    monkeypatch.setenv("TRITON_DIST_BUILD_QUIET", "1")
    assert setup.open_terminal(str(tty)) is None


# ---------------------------------------------------------------------------------------------------------------
# scripts/build.sh and a build directory of another checkout


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of scripts/build.sh in a fake checkout, and a PATH whose cmake only records its arguments."""
    source = tmp_path / "copy"
    (source / "scripts").mkdir(parents=True)
    (source / "scripts" / "build.sh").write_text((REPO / "scripts" / "build.sh").read_text())
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    calls = tmp_path / "cmake-calls"
    cmake = stub_dir / "cmake"
    cmake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    cmake.chmod(cmake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{stub_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("TRITON_DIST_BUILD_DIR", None)
    return source, calls, env


def _configured_build(directory: Path, source: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={source}\n")
    (directory / "build.ninja").write_text("")


def test_a_copied_build_dir_is_configured_afresh_not_rebuilt(checkout, tmp_path):
    source, calls, env = checkout
    _configured_build(source / "build", tmp_path / "original")  # copied along with the checkout
    (source / "build" / "stale-object.o").write_text("")
    done = subprocess.run(["bash", "scripts/build.sh"], cwd=source, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"configured for {tmp_path / 'original'}, not {source.resolve()}" in done.stderr
    assert not (source / "build" / "stale-object.o").exists()
    configure, build = calls.read_text().splitlines()
    assert configure.startswith("-G Ninja -S . -B build ") and build.startswith("--build build -j")


def test_a_build_dir_of_this_checkout_is_reused(checkout):
    source, calls, env = checkout
    _configured_build(source / "build", source)
    done = subprocess.run(["bash", "scripts/build.sh"], cwd=source, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["--build"]  # no configure


def test_another_checkouts_build_dir_outside_this_one_is_an_error_and_kept(checkout, tmp_path):
    source, calls, env = checkout
    elsewhere = tmp_path / "other-build"
    _configured_build(elsewhere, tmp_path / "original")
    env["TRITON_DIST_BUILD_DIR"] = str(elsewhere)
    done = subprocess.run(["bash", "scripts/build.sh"], cwd=source, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "would rebuild that tree. Set TRITON_DIST_BUILD_DIR to a new directory" in done.stderr
    assert (elsewhere / "CMakeCache.txt").exists() and not calls.exists()
