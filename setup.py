"""Packaging: `pip install .` builds the C++ side with CMake (scripts/build.sh) and ships python/triton_dist.

The build installs the device libraries (`triton_dist/_device/*.bc`) and the MLIR bindings (`triton_dist/_C/`)
into the source tree's package, and this file packages them with the Python code. On a machine without LLVM/MLIR
(the GPU machines), set `TRITON_DIST_SKIP_CMAKE=1` to package device libraries that were built elsewhere and copied
into python/triton_dist/_device/; the package works without the bindings.
"""

import os
import subprocess
from pathlib import Path

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DEVICE_LIBRARIES = (
    "triton_dist.nvptx64.bc",
    "triton_dist.amdgcn.bc",
    "triton_dist.watchdog.nvptx64.bc",  # the wait watchdog's variants (docs/abi.md)
    "triton_dist.watchdog.amdgcn.bc",
)


class BuildWithCMake(build_py):
    """Runs scripts/build.sh before copying the package, then checks the device libraries are there."""

    def run(self) -> None:
        if os.environ.get("TRITON_DIST_SKIP_CMAKE") != "1":
            subprocess.run(["bash", str(ROOT / "scripts" / "build.sh")], cwd=ROOT, check=True)
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


setup(
    distclass=BinaryDistribution,
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"triton_dist": ["_device/*.bc", "_C/*.so"]},
    cmdclass={"build_py": BuildWithCMake},
    zip_safe=False,
    # Keep setuptools' staging out of build/, which is CMake's build tree.
    options={"build": {"build_base": "build-setuptools"}},
)
