"""scripts/demo.sh, the README's main job, runs every stage and shows what each stage is for.

Runs the demo against the build in $TRITON_DIST_BUILD_DIR (default build); skips visibly when it is not built.
"""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / os.environ.get("TRITON_DIST_BUILD_DIR", "build")


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory):
    if not (BUILD / "bin" / "triton-dist-opt").exists():
        pytest.skip(f"{BUILD}/bin/triton-dist-opt is not built (scripts/build.sh)")
    env = {**os.environ, "TRITON_DIST_BUILD_DIR": str(BUILD), "TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("tc"))}
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout


def stage(output: str, letter: str) -> str:
    """The text of stage (letter), up to the next heading."""
    start = output.index(f"== ({letter})")
    following = output.find("\n== (", start + 1)
    return output[start : following if following != -1 else len(output)]


def test_every_stage_runs(demo_output):
    for letter in "abcdef":
        assert f"== ({letter})" in demo_output
    assert "demo: every stage done" in demo_output


def test_dialect_stages(demo_output):
    assert "distributed.notify" in stage(demo_output, "a")
    for letter in "bd":
        lowered = stage(demo_output, letter)
        assert "distributed." not in lowered.split("\n", 3)[3]  # below the heading, nothing of the dialect is left
        assert "llvm.func @ring_step" in lowered
        assert "@__triton_dist_context" in lowered
    assert "nvvm." in stage(demo_output, "b")
    assert "rocdl." in stage(demo_output, "d")


def test_assembly_stages(demo_output):
    ptx = stage(demo_output, "c")
    assert ".target sm_90" in ptx
    assert "ld.acquire.sys" in ptx
    amdgcn = stage(demo_output, "e")
    assert "amdgcn-amd-amdhsa--gfx942" in amdgcn
    assert "buffer_inv" in amdgcn


def test_triton_stage(demo_output):
    triton_stage = stage(demo_output, "f")
    if "SKIPPED stage (f)" in triton_stage:
        pytest.skip("triton_dist.language is not importable")
    assert "sm_90" in triton_stage and "gfx942" in triton_stage
    assert "<- runtime context" in triton_stage
    assert "<- wait: acquire poll" in triton_stage
    assert "<- wait: acquire (cache invalidate)" in triton_stage
