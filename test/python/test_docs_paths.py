"""Every file path the guides name exists: the README, examples/README.md and docs/*.md (not the dated pages of
docs/results/, which record the tree of their day).

A path is a word with a ``/`` ending in a source or document extension (``ops/all_reduce/kernels.py``,
``test/gpu/check_litmus.py``). The guides write paths from the repository root, from the package
(``python/triton_dist/``, so ``ops/...``, ``compiler/...``), from the runtime package (``heap/...``) or from the
page's own folder; a path that exists under none of these is stale, as ``ops/all_reduce.py`` was once the ops became
packages.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "examples" / "README.md", *(REPO / "docs").glob("*.md")])
BASES = [REPO, REPO / "python", REPO / "python" / "triton_dist", REPO / "python" / "triton_dist" / "runtime"]
PATH = re.compile(r"(?<![\w./-])([A-Za-z_][\w.-]*(?:/[\w.-]+)+\.(?:py|md|json|sh|cpp|h|td|mlir|toml|txt|bc))\b")


def stale_paths(page: Path) -> list[str]:
    """``page:line: path`` for each path in ``page`` that exists under none of the bases (nor beside the page)."""
    name = page.relative_to(REPO) if page.is_relative_to(REPO) else page.name
    stale = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        for path in PATH.findall(line):
            if not any((base / path).exists() for base in (*BASES, page.parent)):
                stale.append(f"{name}:{number}: {path}")
    return stale


def test_the_guides_name_only_files_that_exist():
    assert REPO / "docs" / "memory-model.md" in PAGES
    stale = [entry for page in PAGES for entry in stale_paths(page)]
    assert stale == []


def test_a_moved_file_is_reported(tmp_path):
    """The check itself: the path of a module the ops packages replaced is reported with its page and line; the
    package's new files, a path from the runtime package and a URL are not."""
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\nThe argument is in `ops/all_reduce.py`; the kernels are in `ops/all_reduce/kernels.py`.\n"
        "See heap/cuda_ipc.py and https://example.org/a/b.py.\n"
    )
    assert stale_paths(page) == ["page.md:2: ops/all_reduce.py"]
