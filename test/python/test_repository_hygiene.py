"""The repository's hygiene files (issue 25, item 6): the license, CONTRIBUTING's rules, the pre-commit hooks (each
run here on a file that breaks its rule), and the type checker's configuration."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLANG_FORMAT = Path("/usr/lib/llvm-22/bin/clang-format")


def test_license_is_mit_and_the_package_says_so():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the triton-dist authors\n")
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]


def test_contributing_states_the_commit_rule_the_commands_and_the_layering():
    from test_package_api import LAYERS

    text = (REPO / "CONTRIBUTING.md").read_text()
    assert "at most 72 characters" in text and "body" in text
    for command in ("bash scripts/setup.sh", "bash scripts/build.sh", "bash scripts/test.sh"):
        assert command in text
    order = LAYERS if LAYERS[-1] == "layers" else (*LAYERS, "layers")
    assert " -> ".join(order) in text  # the order test_package_api enforces


def _hooks() -> dict[str, dict]:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    assert "commit-msg" in config["default_install_hook_types"]
    return {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}


def _run_hook(hook: dict, *files: Path) -> subprocess.CompletedProcess:
    """The hook as pre-commit runs it: its entry split like a shell command, then the file names."""
    return subprocess.run([*shlex.split(hook["entry"]), *map(str, files)], capture_output=True, text=True, cwd=REPO)


def test_pre_commit_ruff_hooks_find_and_fix_what_ci_rejects(tmp_path):
    hooks = _hooks()
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = {'a':1}\n")
    assert _run_hook(hooks["ruff-check"], bad).returncode != 0  # F401: os unused
    assert _run_hook(hooks["ruff-format"], bad).returncode == 0
    assert bad.read_text() == 'import os\n\nx = {"a": 1}\n'  # rewritten in the repository's style


def test_pre_commit_clang_format_hook_formats_cpp(tmp_path):
    if not CLANG_FORMAT.exists():
        pytest.skip(f"{CLANG_FORMAT} is not installed (scripts/setup.sh)")
    hook = _hooks()["clang-format"]
    source = tmp_path / "bad.cpp"
    source.write_text("int  f( int x ){return x;}\n")
    shutil.copy(REPO / ".clang-format", tmp_path / ".clang-format")
    assert _run_hook(hook, source).returncode == 0
    assert source.read_text() == "int f(int x) { return x; }\n"
    assert set(hook["types_or"]) >= {"c", "c++"}


@pytest.mark.parametrize("subject", ["Fold the LL grid into one test", "x" * 72])
def test_commit_msg_hook_accepts_subjects_up_to_72_characters(tmp_path, subject):
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text(f"{subject}\n\n{'A long body line is fine. ' * 20}\n")
    done = _run_hook(_hooks()["commit-subject"], message)
    assert done.returncode == 0, done.stderr


def test_commit_msg_hook_rejects_a_long_subject_naming_its_length(tmp_path):
    hook = _hooks()["commit-subject"]
    assert hook["stages"] == ["commit-msg"]
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("x" * 73 + "\n")
    done = _run_hook(hook, message)
    assert done.returncode == 1 and "commit subject of 73 characters (at most 72" in done.stderr
    message.write_text("\n")
    assert _run_hook(hook, message).returncode == 1  # an empty subject


def test_type_checker_covers_the_package_and_ci_runs_it():
    """mypy (pinned in requirements.txt) over the whole of python/triton_dist, ops included, from scripts/test.sh."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["python/triton_dist"]
    silenced = [o for o in config.get("overrides", []) if o.get("ignore_errors") and "triton_dist" in str(o["module"])]
    assert not silenced, f"no part of the package may ignore its type errors: {silenced}"
    assert any(line.startswith("mypy==") for line in (REPO / "requirements.txt").read_text().splitlines())
    assert "python3 -m mypy" in (REPO / "scripts" / "test.sh").read_text()
