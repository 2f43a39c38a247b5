"""Build step: NVSHMEM's device functions that ``dl.put_signal`` / ``dl.get`` / ``dl.signal_wait`` call, in a form
triton==3.6.0's LLVM reads, written to ``python/triton_dist/_device/nvshmem_device.<version>.nvptx64.ll``.

    python3 scripts/nvshmem_device.py [--version 3.4.5] [--wheel FILE] [--sm 90]   # scripts/build.sh runs it

Why: the compiler links NVSHMEM's device bitcode (``libnvshmem_device[_sm_<N>].bc`` of the nvidia-nvshmem wheel)
into kernels that call the three primitives. NVSHMEM 3.8's bitcode was written by LLVM 22.1.8, whose
``llvm.smin/umin/smax/umax/bitreverse/ctpop/usub.sat`` declarations carry the attribute ``nocreateundeforpoison``
(bitcode attribute kind 105, new in LLVM 22.1); triton 3.6's LLVM (22.0.0git) knows kinds up to 104 and refuses the
whole file. The wheel is 30-50 MB, of which the kernels need a few functions.

What it does: takes the nvidia-nvshmem wheel (``pip download`` of ``--package==--version`` into ``build/nvshmem``,
or ``--wheel``), reads its bitcode for ``--sm`` (``libnvshmem_device_sm_<N>.bc`` with the largest N <= sm, else the
unversioned ``libnvshmem_device.bc``), keeps the three functions, what they reach and NVSHMEM's device-state globals
(which the host library's ``nvshmemx_cumodule_init`` looks up by name) with ``opt -passes=internalize,globaldce``,
writes it as textual IR without the attributes triton's LLVM does not know, and puts a header line first that says
which package, version and file it came from (``triton_dist.compiler.device_library`` picks the file whose version
matches the installed wheel). Textual IR because LLVM 22.1's bitcode writer would put the attribute back on the
intrinsic declarations. The result is 50 KB (3.4.5) to 2 MB (3.8).

An up-to-date output (same header) is left alone. Exit status 0 on success, 1 with a message naming the step that
failed (download, a missing LLVM tool, a wheel without device bitcode, a function missing from it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LLVM_BIN = Path("/usr/lib/llvm-22/bin")
DEFAULT_PACKAGE = "nvidia-nvshmem-cu13"
DEFAULT_VERSION = "3.4.5"
"""The NVSHMEM that torch 2.11.0 (+cu130, the GPU machines') pins: its host library initializes the device state,
so the device code must be of the same version."""
VERSION_ENV = "TRITON_DIST_NVSHMEM_VERSION"
PACKAGE_ENV = "TRITON_DIST_NVSHMEM_PACKAGE"
HEADER_PREFIX = "; triton_dist nvshmem device code:"
FORMAT = 2
"""Bumped when the conversion changes, so that an older output is rebuilt."""
STATE_GLOBALS = (
    "nvshmemi_device_state_d",
    "nvshmemi_device_lib_version_d",
    "nvshmemi_ibgda_device_state_d",
    "nvshmemi_gpunetio_device_state_d",
)
"""NVSHMEM's device globals that its host library finds by name in a loaded module (kept external)."""
UNKNOWN_TO_TRITON_LLVM = ("nocreateundeforpoison",)
"""Function attributes of LLVM 22.1 that triton 3.6's LLVM (22.0.0git) cannot parse."""
_BITCODE_MEMBER = re.compile(r"nvidia/nvshmem/lib/libnvshmem_device(?:_sm_(\d+))?\.bc")


class BuildError(RuntimeError):
    """A step of the conversion failed; the message names it."""


def device_functions() -> tuple[str, ...]:
    """The NVSHMEM functions the wrapper library calls (``triton_dist.abi.NVSHMEM_DEVICE_FUNCTIONS``), read from
    ``python/triton_dist/abi.py`` without importing the package (which imports torch)."""
    spec = importlib.util.spec_from_file_location("_triton_dist_abi", REPO / "python/triton_dist/abi.py")
    if spec is None or spec.loader is None:
        raise BuildError("cannot load python/triton_dist/abi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.NVSHMEM_DEVICE_FUNCTIONS)


def output_name(version: str) -> str:
    """The file name of the converted code of NVSHMEM ``version`` in ``_device``."""
    return f"nvshmem_device.{version}.nvptx64.ll"


def header(package: str, version: str, source: str, sm: int) -> str:
    """The first line of the output: where it came from and the compute capability its code needs
    (``device_library.converted_nvshmem_copies`` parses it)."""
    return f"{HEADER_PREFIX} package={package} version={version} source={source} sm={sm} format={FORMAT}"


def find_wheel(package: str, version: str, cache: Path) -> Path:
    """The wheel of ``package==version`` in ``cache``, downloaded with pip when it is not there yet."""
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(cache.glob(pattern))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(cache)]
    command += ["--platform", "manylinux2014_x86_64", f"{package}=={version}"]
    result = subprocess.run(command, capture_output=True, text=True)
    found = sorted(cache.glob(pattern))
    if result.returncode != 0 or not found:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BuildError(f"pip could not download {package}=={version}: {' | '.join(tail)}")
    return found[0]


def pick_member(names: list[str], sm: int) -> tuple[str, int]:
    """(member, N) of the device bitcode for ``sm`` among a wheel's file names: ``..._sm_<N>.bc`` with the largest
    N <= sm, else the unversioned one (N = 0). Raises ``BuildError`` listing what the wheel holds."""
    versioned: list[tuple[int, str]] = []
    generic = None
    for name in names:
        match = _BITCODE_MEMBER.fullmatch(name)
        if match is None:
            continue
        if match.group(1) is None:
            generic = name
        else:
            versioned.append((int(match.group(1)), name))
    fitting = sorted(item for item in versioned if item[0] <= sm)
    if fitting:
        return fitting[-1][1], fitting[-1][0]
    if generic is not None:
        return generic, 0
    held = ", ".join(name for _, name in sorted(versioned)) or "none"
    raise BuildError(f"the wheel has no NVSHMEM device bitcode for sm_{sm} (device bitcode in it: {held})")


def tool(name: str) -> str:
    """The path of LLVM tool ``name`` (Debian's LLVM 22, scripts/setup.sh), or a ``BuildError``."""
    path = LLVM_BIN / name
    if path.is_file():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"{name} (LLVM 22) is not installed: run scripts/setup.sh")
    return found


def strip_unknown_attributes(text: str) -> str:
    """``text`` (textual IR) without the attributes triton's LLVM cannot parse (``UNKNOWN_TO_TRITON_LLVM``)."""
    for name in UNKNOWN_TO_TRITON_LLVM:
        text = re.sub(rf"(?<![\w.$\"]){name}(?![\w.$\"])[ ]?", "", text)
    return text


def reduce_bitcode(bitcode: Path, functions: tuple[str, ...], opt: str) -> str:
    """Textual IR of ``bitcode`` cut down to ``functions`` and what they reach, plus ``STATE_GLOBALS``: every other
    symbol internalized, then the unreachable ones dropped. Raises ``BuildError`` when a function is missing."""
    keep = ",".join((*functions, *STATE_GLOBALS))
    result = subprocess.run(
        [opt, "-passes=internalize,globaldce", f"-internalize-public-api-list={keep}", str(bitcode), "-S", "-o", "-"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BuildError(f"opt failed on {bitcode}: {result.stderr.strip()[-500:]}")
    text = result.stdout
    missing = [name for name in functions if not re.search(rf"^define [^\n]*@{re.escape(name)}\(", text, re.M)]
    if missing:
        raise BuildError(f"{bitcode} does not define {', '.join(missing)}: an NVSHMEM without the functions dl.* calls")
    return text


def convert(package: str, version: str, sm: int, out_dir: Path, cache: Path, wheel: Path | None = None) -> Path:
    """Writes ``out_dir / output_name(version)`` from the wheel (downloaded into ``cache`` unless ``wheel``) and
    returns its path; an up-to-date file is left alone. Raises ``BuildError`` naming the failed step."""
    out = out_dir / output_name(version)
    opt = tool("opt")
    wheel = wheel if wheel is not None else find_wheel(package, version, cache)
    with zipfile.ZipFile(wheel) as archive:
        member, member_sm = pick_member(archive.namelist(), sm)
        if out.is_file():
            with out.open(errors="replace") as file:
                first = file.readline().rstrip("\n")
            made = header(package, version, Path(member).name, 0).rsplit(" sm=", 1)[0]
            if first.startswith(made + " sm=") and first.endswith(f" format={FORMAT}"):
                return out
        with tempfile.TemporaryDirectory() as scratch:
            bitcode = Path(archive.extract(member, scratch))
            text = reduce_bitcode(bitcode, device_functions(), opt)
    # The variant's real target: NVSHMEM 3.4's unversioned file is compiled for sm_90, say.
    targets = [int(found) for found in re.findall(r'"target-cpu"="sm_(\d+)a?"', text)]
    first = header(package, version, Path(member).name, max([member_sm, *targets]))
    text = strip_unknown_attributes(re.sub(r"\A; ModuleID = [^\n]*\n", "", text))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    partial.write_text(f"{first}\n; from {wheel.name}, reduced by scripts/nvshmem_device.py (sha256 {digest})\n{text}")
    os.replace(partial, out)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default=os.environ.get(PACKAGE_ENV, DEFAULT_PACKAGE))
    parser.add_argument("--version", default=os.environ.get(VERSION_ENV, DEFAULT_VERSION))
    parser.add_argument("--wheel", type=Path, help="use this wheel file instead of downloading one")
    parser.add_argument("--sm", type=int, default=90, help="compute capability of the bitcode variant (default 90)")
    parser.add_argument("--out-dir", type=Path, default=REPO / "python/triton_dist/_device")
    parser.add_argument(
        "--cache", type=Path, default=REPO / os.environ.get("TRITON_DIST_BUILD_DIR", "build") / "nvshmem"
    )
    args = parser.parse_args(argv)
    try:
        out = convert(args.package, args.version, args.sm, args.out_dir, args.cache, args.wheel)
    except (BuildError, OSError, zipfile.BadZipFile) as error:
        print(f"nvshmem_device: {args.package}=={args.version}: {error}", file=sys.stderr)
        return 1
    print(f"nvshmem_device: {out.relative_to(REPO) if out.is_relative_to(REPO) else out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
