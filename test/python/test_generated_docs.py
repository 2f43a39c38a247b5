"""docs/generated/ (the dialect and pass reference) is what the build generates from ODS, and git has it.

The build (docs/CMakeLists.txt) regenerates the reference with mlir-tblgen and copies it to docs/generated/; these
tests fail when the copy differs from the build's output or from what git has, i.e. when an ODS change was
committed without its regenerated reference. Fix: build, then `git add docs/generated` and commit.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / os.environ.get("TRITON_DIST_BUILD_DIR", "build")
GENERATED = REPO / "docs" / "generated"
DOCS = {
    "DistributedDialect.md": "include/TritonDistributed/Dialect/Distributed/IR/DistributedDialect.md",
    "DistributedToNVVMPasses.md": "third_party/nvidia/include/TritonDistributed/Conversion/DistributedToNVVM/"
    "DistributedToNVVMPasses.md",
    "DistributedToROCDLPasses.md": "third_party/amd/include/TritonDistributed/Conversion/DistributedToROCDL/"
    "DistributedToROCDLPasses.md",
}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_committed_reference_matches_the_build(name):
    built = BUILD / DOCS[name]
    if not built.exists():
        pytest.skip(f"{built} is not built (scripts/build.sh; TRITON_DIST_BUILD_DIR selects the build directory)")
    copy = GENERATED / name
    assert copy.exists(), f"docs/generated/{name} is missing: run scripts/build.sh and commit docs/generated"
    assert copy.read_text() == built.read_text(), (
        f"docs/generated/{name} differs from {built}: run scripts/build.sh (it copies the reference) and commit it"
    )


@pytest.mark.parametrize("name", sorted(DOCS))
def test_git_has_the_reference(name):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    path = f"docs/generated/{name}"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=REPO, capture_output=True)
    assert tracked.returncode == 0, f"{path} is not tracked by git: git add docs/generated"
    diff = subprocess.run(["git", "diff", "--stat", "--", path], cwd=REPO, capture_output=True, text=True)
    assert diff.stdout == "", (
        f"{path} is stale in git: the build regenerated it from ODS; git add docs/generated and commit it\n"
        + diff.stdout
    )


def test_every_op_is_documented():
    text = (GENERATED / "DistributedDialect.md").read_text()
    for op in (
        "get_rank",
        "get_num_ranks",
        "symm_at",
        "heap_offset",
        "get_heap_size",
        "wait",
        "consume_token",
        "notify",
    ):
        assert f"### `distributed.{op}`" in text
    for target, arch in (("NVVM", "nvptx"), ("ROCDL", "amdgcn")):
        passes = (GENERATED / f"DistributedTo{target}Passes.md").read_text()
        for name in (f"convert-distributed-to-{target.lower()}", f"triton-dist-set-{arch}-target"):
            assert f"### `-{name}`" in passes
