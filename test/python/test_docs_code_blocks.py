"""Every code block of the user guides runs, and the README and the results index say what is true.

The pages and how their fenced blocks run:

- ``docs/getting-started.md``: a block preceded by ``<!-- docs-test: file NAME -->`` is the content of file NAME,
  written into a fresh directory first; the other Python blocks then run in order in one interpreter in that
  directory, and the bash blocks run there with ``bash -euo pipefail`` (``torchrun`` included: without GPUs the
  guide's script runs on a CPU heap with gloo). A block preceded by ``<!-- docs-test: ci-commands -->`` holds the
  install commands, which must be exactly what CI runs on a fresh clone (``.ci/run``).
- ``docs/host-api.md`` and ``docs/bindings.md``: the Python blocks run in order in one interpreter, from the
  repository root.

Tracebacks of a failing block name the Markdown file and its line. The README's kernel is compiled with
``compile_for`` for both targets, its two commands are checked against the scripts, and the results index must list
every file of docs/results/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GETTING_STARTED = REPO / "docs" / "getting-started.md"
NOTEBOOK_PAGES = [REPO / "docs" / "host-api.md", REPO / "docs" / "bindings.md"]
RUN_TIMEOUT_S = 600

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(.+?)\s*-->\s*$")

# Runs the blocks given as JSON ([file, first line, code], ...) in one namespace; each block is compiled with its
# Markdown file and line numbers, so a traceback points into the page.
_NOTEBOOK_RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1])):
    exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
"""


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, the docs-test marker before it (or ""), its first line, its code."""

    language: str
    marker: str
    line: int
    code: str


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path}:{index + 1}: code block never closed")
        code = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(Block(fence.group(1), marker.group(1) if marker else "", index + 2, code))
        index = end + 1
    return blocks


def _env() -> dict[str, str]:
    python_path = os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=python_path, PYTHONUNBUFFERED="1")


def _run(command: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, (
        f"{what} failed (exit {result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


def _run_notebook(path: Path, blocks: list[Block], cwd: Path, scratch: Path) -> subprocess.CompletedProcess:
    listing = scratch / f"{path.stem}-blocks.json"
    listing.write_text(json.dumps([[str(path), block.line, block.code] for block in blocks]))
    return _run([sys.executable, "-c", _NOTEBOOK_RUNNER, str(listing)], cwd, f"the Python blocks of {path.name}")


# ------------------------------------------------------------------------------------------ getting-started.md


def _guide_blocks() -> list[Block]:
    return code_blocks(GETTING_STARTED)


def test_every_block_of_the_guide_has_a_way_to_run():
    blocks = _guide_blocks()
    assert blocks, "docs/getting-started.md has no code blocks"
    for block in blocks:
        runnable = block.language == "python" or (block.language == "bash" and block.marker in ("", "ci-commands"))
        assert runnable, f"getting-started.md:{block.line}: no rule runs a {block.language!r} block ({block.marker})"
        assert block.marker in ("", "ci-commands") or block.marker.startswith("file "), block


def test_install_commands_are_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text()
    install = [block for block in _guide_blocks() if block.marker == "ci-commands"]
    assert install, "the guide's install block (<!-- docs-test: ci-commands -->) is missing"
    for block in install:
        for command in filter(None, (line.strip() for line in block.code.splitlines())):
            assert command in ci, f"getting-started.md:{block.line}: `{command}` is not what .ci/run runs"


@pytest.fixture(scope="module")
def guide_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh directory holding the guide's files (``<!-- docs-test: file NAME -->`` blocks)."""
    directory = tmp_path_factory.mktemp("getting_started")
    for block in _guide_blocks():
        if block.marker.startswith("file "):
            (directory / block.marker.removeprefix("file ")).write_text(block.code)
    return directory


def test_the_guide_files_are_used(guide_dir: Path):
    files = [block.marker.removeprefix("file ") for block in _guide_blocks() if block.marker.startswith("file ")]
    assert files, "the guide defines no files"
    others = "".join(block.code for block in _guide_blocks() if not block.marker.startswith("file "))
    for name in files:
        compile((guide_dir / name).read_text(), name, "exec")
        assert Path(name).stem in others, f"no block of the guide runs or imports {name}"


def test_the_guide_python_blocks_run(guide_dir: Path):
    blocks = [block for block in _guide_blocks() if block.language == "python" and not block.marker]
    result = _run_notebook(GETTING_STARTED, blocks, guide_dir, guide_dir)
    assert "triton_dist" in result.stdout and ".version" in result.stdout  # the install check and the PTX


def test_the_guide_commands_run(guide_dir: Path):
    commands = [block for block in _guide_blocks() if block.language == "bash" and not block.marker]
    assert commands, "the guide has no command to run its program"
    for block in commands:
        result = _run(["bash", "-euo", "pipefail", "-c", block.code], guide_dir, f"getting-started.md:{block.line}")
        assert "torchrun" not in block.code or len(re.findall(r"rank \d+: 3 calls ok", result.stdout)) == 2, (
            result.stdout
        )


# ------------------------------------------------------------------------------------------ host API, bindings


@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda page: page.name)
def test_page_python_blocks_run(page: Path, tmp_path: Path):
    blocks = [block for block in code_blocks(page) if block.language == "python"]
    assert blocks, f"{page.name} has no Python block"
    if page.name == "bindings.md":
        from triton_dist import mlir

        if not mlir.is_available():
            pytest.skip("triton_dist._C._mlir is not built (scripts/build.sh)")
    _run_notebook(page, blocks, REPO, tmp_path)


def test_a_failing_block_names_the_page_and_line(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n```python\nassert x == 2, 'the check'\n```\n")
    with pytest.raises(AssertionError) as failure:
        _run_notebook(page, code_blocks(page), tmp_path, tmp_path)
    assert f'File "{page}", line 8' in str(failure.value) and "the check" in str(failure.value)


# ------------------------------------------------------------------------------------------ README


def test_readme_kernel_compiles_for_both_targets(tmp_path: Path):
    kernels = [block for block in code_blocks(REPO / "README.md") if block.language == "python"]
    assert len(kernels) == 1, "the README has one example"
    (tmp_path / "readme_example.py").write_text(kernels[0].code)
    check = """
import re
from readme_example import push_shard
from triton_dist.testing import assembly, compile_for

signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "sum_ptr": "*fp32", "flags_ptr": "*i32", "n": "i32", "epoch": "i32"}
aligned = ["x_ptr", "out_ptr", "sum_ptr", "flags_ptr", "n"]
for target in ("sm_90", "gfx942"):
    compiled = compile_for(push_shard, signature, target, constexprs={"MAX_RANKS": 8, "BLOCK": 1024}, aligned=aligned)
    text = assembly(compiled)
    if target == "sm_90":
        # the notify to a tensor of ranks: release atomics at system scope; the wait: acquire loads
        assert re.search(r"atom\\.[a-z.]*release[a-z.]*sys|atom\\.[a-z.]*sys[a-z.]*release", text), "no release"
        assert "ld.global.v4.b32" in text and "ld.acquire.sys" in text
print("compiled")
"""
    result = _run([sys.executable, "-c", check], tmp_path, "compiling the README's kernel")
    assert result.stdout.strip().endswith("compiled")


def test_readme_commands_are_exactly_the_scripts():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    test_command = "bash scripts/setup.sh && bash scripts/build.sh && bash scripts/test.sh"
    assert test_command in readme and test_command in ci
    assert "bash scripts/setup.sh && bash scripts/build.sh && bash scripts/demo.sh" in readme
    for script in ("setup.sh", "build.sh", "test.sh", "demo.sh"):
        assert (REPO / "scripts" / script).is_file(), script


def test_readme_notify_signature_has_mask():
    readme = (REPO / "README.md").read_text()
    assert 'dl.notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node", mask=None)' in readme


def test_readme_performance_sources_exist():
    readme = (REPO / "README.md").read_text()
    sources = set(re.findall(r"bench/results/[\w.]+\.(?:md|json)", readme))
    assert sources, "the README's performance tables name no bench/results file"
    missing = sorted(source for source in sources if not (REPO / source).is_file())
    assert not missing, f"the README cites results files that do not exist: {missing}"


def test_docs_cite_only_existing_results_files():
    cited = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        cited |= set(re.findall(r"(?:bench|docs)/results/[\w.-]+\.(?:md|json|png)", page.read_text()))
    missing = sorted(path for path in cited if not (REPO / path).is_file())
    assert not missing, f"cited but missing: {missing}"


# ------------------------------------------------------------------------------------------ docs/results index


def test_results_index_lists_every_results_file():
    results = REPO / "docs" / "results"
    index = (results / "README.md").read_text()
    files = sorted(
        str(path.relative_to(results)) for path in results.rglob("*") if path.is_file() and path.name != "README.md"
    )
    assert files
    missing = [name for name in files if f"]({name})" not in index]
    assert not missing, f"docs/results/README.md does not list {missing}"
    listed = re.findall(r"\]\(([^)#]+)\)", index)
    stale = [name for name in listed if not (results / name).exists()]
    assert not stale, f"docs/results/README.md lists files that do not exist: {stale}"
