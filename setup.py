"""Packaging: `pip install .` builds the C++ side with CMake (scripts/build.sh) and ships python/triton_dist.

The build installs the device libraries (`triton_dist/_device/*.bc`) and the MLIR bindings (`triton_dist/_C/`)
into the source tree's package, and this file packages them with the Python code. On a machine without LLVM/MLIR
(the GPU machines), set `TRITON_DIST_SKIP_CMAKE=1` to package device libraries that were built elsewhere and copied
into python/triton_dist/_device/; the package works without the bindings.

pip shows a build backend's output only with ``pip install -v .`` (or when it fails), so the build's progress (CMake,
then ninja's ``[N/M]`` steps: minutes on a small machine) is also written to the terminal (/dev/tty) when there is
one; ``TRITON_DIST_BUILD_QUIET=1`` turns that off. A ``build/`` configured for another source directory (a copied
checkout) is configured afresh by scripts/build.sh rather than rebuilding that other tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DEVICE_LIBRARIES = (
    "triton_dist.nvptx64.bc",
    "triton_dist.amdgcn.bc",
    "triton_dist.watchdog.nvptx64.bc",  # the wait watchdog's variants (docs/abi.md)
    "triton_dist.watchdog.amdgcn.bc",
)


def open_terminal(tty_path: str = "/dev/tty") -> TextIO | None:
    """The terminal to show build progress on, when pip hides the backend's output: None where stderr is a terminal
    already (it shows everything), where there is no terminal (CI) or where ``TRITON_DIST_BUILD_QUIET=1``."""
    if os.environ.get("TRITON_DIST_BUILD_QUIET") == "1" or sys.stderr.isatty():
        return None
    try:
        return open(tty_path, "w", encoding="utf-8")
    except OSError:
        return None


def run_build(command: Sequence[str], cwd: Path, log: TextIO, terminal: TextIO | None) -> None:
    """Run ``command`` with its output line by line to ``log`` (what pip keeps) and to ``terminal`` if given.

    Raises ``subprocess.CalledProcessError`` naming the command when it fails.
    """
    streams = [log] if terminal is None else [log, terminal]
    for stream in streams:
        stream.write(f"triton-dist: building the C++ side ({' '.join(command)}; minutes on a small machine)\n")
        stream.flush()
    with subprocess.Popen(
        list(command), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            for stream in streams:
                stream.write(line)
                stream.flush()
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, list(command))


class BuildWithCMake(build_py):
    """Runs scripts/build.sh before copying the package, then checks the device libraries are there."""

    def run(self) -> None:
        if os.environ.get("TRITON_DIST_SKIP_CMAKE") != "1":
            terminal = open_terminal()
            try:
                run_build(["bash", str(ROOT / "scripts" / "build.sh")], ROOT, sys.stderr, terminal)
            finally:
                if terminal is not None:
                    terminal.close()
        missing = [name for name in DEVICE_LIBRARIES if not (ROOT / "python/triton_dist/_device" / name).is_file()]
        if missing:
            raise RuntimeError(
                f"device libraries missing from python/triton_dist/_device: {', '.join(missing)}; run "
                "scripts/setup.sh and scripts/build.sh (or unset TRITON_DIST_SKIP_CMAKE)"
            )
        super().run()


class BinaryDistribution(Distribution):
    """The wheel carries a compiled module (the MLIR bindings): tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


if __name__ == "__main__":  # setuptools runs this file as __main__; the tests import it for the functions above
    setup(
        distclass=BinaryDistribution,
        package_dir={"": "python"},
        packages=find_packages("python"),
        package_data={
            "triton_dist": [
                "_device/*.bc",
                "_device/*.ll",
                "_C/*.so",
                "ops/tuned_configs.json",
                "ops/tuning/calibrations.json",
            ]
        },
        cmdclass={"build_py": BuildWithCMake},
        zip_safe=False,
        # Keep setuptools' staging out of build/, which is CMake's build tree.
        options={"build": {"build_base": "build-setuptools"}},
    )
