"""Where the device libraries of docs/abi.md are, whether a file there is one, and a digest of their content for
Triton's cache key.

The build (``scripts/build.sh``) writes one LLVM bitcode file per target into ``python/triton_dist/_device/``.
``$TRITON_DIST_DEVICE_LIB_DIR`` points the compiler at another directory holding files of the same names (a
development build, a test's modified copy); it is read on every call, never cached.

:func:`check_library` reads a library's bitcode (no LLVM needed: the GPU machines have none) and rejects what
Triton's LLVM would link into a broken kernel or crash on: a file that is empty or not bitcode, bitcode of the other
target, or bitcode that lacks a function or global of the ABI (``triton_dist.abi``). :func:`linkable_library` is
:func:`require_library` followed by that check.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from triton_dist.abi import (
    LIB_NAME,
    LIBRARY_TRIPLES,
    NVSHMEM_DEVICE_FUNCTIONS,
    NVSHMEM_DEVICE_LIB_NAME,
    NVSHMEM_LIB_NAME,
    NVSHMEM_LIBRARY_FILE,
    SYMBOL_PREFIX,
    WATCHDOG_LIBRARY_VARIANT,
    all_symbols,
    library_globals,
    nvshmem_symbols,
)

__all__ = [
    "DEFAULT_DEVICE_LIB_DIR",
    "DEVICE_LIB_DIR_ENV",
    "LIBRARY_FILES",
    "NVSHMEM_BITCODE_DIR_ENV",
    "NVSHMEM_CONVERTED_GLOB",
    "NVSHMEM_PACKAGES",
    "LIB_NAME",
    "SYMBOL_PREFIX",
    "WATCHDOG_LIBRARY_FILES",
    "BitcodeSummary",
    "DeviceLibraryInvalidError",
    "DeviceLibraryMissingError",
    "DeviceLibraryUnreadableError",
    "ConvertedNvshmem",
    "NvshmemMissingError",
    "NvshmemUnreadableError",
    "check_library",
    "converted_nvshmem",
    "converted_nvshmem_copies",
    "device_lib_dir",
    "installed_nvshmem_version",
    "libraries_digest",
    "library_path",
    "linkable_library",
    "nvshmem_bitcode_dir",
    "nvshmem_device_bitcode",
    "nvshmem_device_code",
    "nvshmem_rebuild_hint",
    "nvshmem_libraries",
    "read_bitcode",
    "require_library",
]

DEVICE_LIB_DIR_ENV = "TRITON_DIST_DEVICE_LIB_DIR"
DEFAULT_DEVICE_LIB_DIR = Path(__file__).resolve().parents[1] / "_device"

LIBRARY_FILES = {
    "cuda": "triton_dist.nvptx64.bc",
    "hip": "triton_dist.amdgcn.bc",
}
"""Triton backend name (``GPUTarget.backend``) -> bitcode file name."""

WATCHDOG_LIBRARY_FILES = {
    backend: name.replace(f"{LIB_NAME}.", f"{LIB_NAME}.{WATCHDOG_LIBRARY_VARIANT}.", 1)
    for backend, name in LIBRARY_FILES.items()
}
"""Triton backend name -> the watchdog variant's bitcode file (``triton_dist.watchdog.<target>.bc``): the same
functions, their waits watched with the timeout the runtime writes (``compiler/watchdog.py``)."""


class DeviceLibraryMissingError(RuntimeError):
    """A kernel calls triton_dist primitives but the device library for its target has not been built."""


class DeviceLibraryUnreadableError(RuntimeError):
    """The device library exists but the LLVM inside Triton cannot parse it."""


class DeviceLibraryInvalidError(DeviceLibraryUnreadableError):
    """The device library is not LLVM bitcode, is bitcode of another target, or lacks symbols of the ABI."""


def device_lib_dir() -> Path:
    """The directory the compiler links from: ``$TRITON_DIST_DEVICE_LIB_DIR`` if set, else the package's ``_device``."""
    override = os.environ.get(DEVICE_LIB_DIR_ENV)
    return Path(override).expanduser().resolve() if override else DEFAULT_DEVICE_LIB_DIR


def library_path(backend: str, watchdog: bool = False) -> Path:
    """The bitcode file for Triton backend ``backend`` ("cuda" or "hip"), the watchdog variant with ``watchdog``; it
    may not exist (see ``require_library``)."""
    try:
        name = (WATCHDOG_LIBRARY_FILES if watchdog else LIBRARY_FILES)[backend]
    except KeyError:
        raise ValueError(f"triton_dist has device libraries for the cuda and hip backends, not {backend!r}") from None
    return device_lib_dir() / name


def require_library(backend: str, watchdog: bool = False) -> Path:
    """``library_path(backend, watchdog)``, or a ``DeviceLibraryMissingError`` that says how to build it."""
    path = library_path(backend, watchdog)
    if not path.is_file():
        where = f" (${DEVICE_LIB_DIR_ENV} is set)" if os.environ.get(DEVICE_LIB_DIR_ENV) else ""
        which = " (the wait watchdog's variant, asked for by a wait timeout)" if watchdog else ""
        raise DeviceLibraryMissingError(
            f"the triton_dist device library {path}{where}{which} does not exist, so kernels that call triton_dist "
            f"primitives cannot be linked for the {backend} backend: build it with scripts/build.sh"
        )
    return path


def libraries_digest() -> str:
    """SHA-256 over the content of every target's libraries, default, watchdog and NVSHMEM wrapper (or the fact that
    one is missing), the converted copies of NVSHMEM's device code in the same directory, and their file names. The
    wheel's own NVSHMEM bitcode is not covered (see ``nvshmem_libraries``).

    Computed on every call: a rebuilt library changes the digest in a process that started before the rebuild.
    """
    digest = hashlib.sha256()
    directory = device_lib_dir()
    files = [*LIBRARY_FILES.items(), *WATCHDOG_LIBRARY_FILES.items(), ("cuda", NVSHMEM_LIBRARY_FILE)]
    files += [("cuda", path.name) for path in directory.glob(NVSHMEM_CONVERTED_GLOB)]
    for backend, name in sorted(files):
        digest.update(f"{backend}:{name}:".encode())
        try:
            digest.update(hashlib.sha256((directory / name).read_bytes()).digest())
        except FileNotFoundError:
            digest.update(b"missing")
        digest.update(b";")
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# Reading the bitcode (LLVM's bitstream format, docs: llvm.org/docs/BitCodeFormat.html), just far enough to get the
# module's target triple and which functions and globals it defines.
# ----------------------------------------------------------------------------------------------------------------

_BITCODE_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = b"\xde\xc0\x17\x0b"
_BLOCKINFO_BLOCK, _MODULE_BLOCK, _STRTAB_BLOCK = 0, 8, 23
_END_BLOCK, _ENTER_SUBBLOCK, _DEFINE_ABBREV, _UNABBREV_RECORD = 0, 1, 2, 3
_MODULE_CODE_TRIPLE, _MODULE_CODE_GLOBALVAR, _MODULE_CODE_FUNCTION = 2, 7, 8
_CHAR6 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"


class _Malformed(ValueError):
    """The bitstream ends early or holds something this reader does not expect."""


@dataclass(frozen=True)
class BitcodeSummary:
    """What the compiler checks in a device library: its target triple and the symbols it defines."""

    triple: str
    defined: frozenset[str]  # functions with a body and globals with an initializer
    declared: frozenset[str]  # functions and globals without one


class _Bits:
    """Reads a bitstream: fields of any width, least significant bit first."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data) * 8

    def read(self, width: int) -> int:
        if width == 0:
            return 0
        if self.pos + width > self.end:
            raise _Malformed(f"the bitstream ends at bit {self.end}, inside a {width}-bit field at bit {self.pos}")
        first = self.pos >> 3
        chunk = int.from_bytes(self.data[first : (self.pos + width + 7) >> 3], "little")
        value = (chunk >> (self.pos & 7)) & ((1 << width) - 1)
        self.pos += width
        return value

    def vbr(self, width: int) -> int:
        high = 1 << (width - 1)
        value = shift = 0
        while True:
            piece = self.read(width)
            value |= (piece & (high - 1)) << shift
            if not piece & high:
                return value
            shift += width - 1
            if shift > 64:
                raise _Malformed(f"a variable-width field at bit {self.pos} runs past 64 bits")

    def align32(self) -> None:
        self.pos = (self.pos + 31) & ~31
        if self.pos > self.end:
            raise _Malformed("the bitstream ends inside a block")


# An abbreviation operand: ("literal", value), ("fixed", width), ("vbr", width), ("array", None), ("char6", None),
# ("blob", None).
_Abbrev = list[tuple[str, int | None]]
_ENCODINGS = {1: "fixed", 2: "vbr", 3: "array", 4: "char6", 5: "blob"}


def _define_abbrev(bits: _Bits) -> _Abbrev:
    ops: _Abbrev = []
    for _ in range(bits.vbr(5)):
        if bits.read(1):
            ops.append(("literal", bits.vbr(8)))
            continue
        encoding = _ENCODINGS.get(bits.read(3))
        if encoding is None:
            raise _Malformed(f"unknown abbreviation encoding at bit {bits.pos}")
        ops.append((encoding, bits.vbr(5) if encoding in ("fixed", "vbr") else None))
    return ops


def _scalar(bits: _Bits, kind: str, width: int | None) -> int:
    if kind == "literal":
        return width or 0
    if kind == "fixed":
        return bits.read(width or 0)
    if kind == "vbr":
        return bits.vbr(width or 1)
    if kind == "char6":
        return ord(_CHAR6[bits.read(6)])
    raise _Malformed(f"'{kind}' cannot be an array element")


def _record(bits: _Bits, abbrev_id: int, abbrevs: list[_Abbrev]) -> tuple[int, list[int], bytes]:
    """(code, operands, blob) of the record that `abbrev_id` starts."""
    if abbrev_id == _UNABBREV_RECORD:
        code = bits.vbr(6)
        return code, [bits.vbr(6) for _ in range(bits.vbr(6))], b""
    try:
        abbrev = abbrevs[abbrev_id - 4]
    except IndexError:
        raise _Malformed(f"abbreviation {abbrev_id} is not defined (bit {bits.pos})") from None
    values: list[int] = []
    blob = b""
    k = 0
    while k < len(abbrev):
        kind, width = abbrev[k]
        if kind == "array":
            element_kind, element_width = abbrev[k + 1]
            values += [_scalar(bits, element_kind, element_width) for _ in range(bits.vbr(6))]
            k += 2
            continue
        if kind == "blob":
            size = bits.vbr(6)
            bits.align32()
            start = bits.pos >> 3
            blob = bits.data[start : start + size]
            if len(blob) != size:
                raise _Malformed("a blob runs past the end of the file")
            bits.pos += size * 8
            bits.align32()
        else:
            values.append(_scalar(bits, kind, width))
        k += 1
    if not values:
        raise _Malformed(f"a record without a code at bit {bits.pos}")
    return values[0], values[1:], blob


def _read_block(bits: _Bits, block_id: int, width: int, blockinfo: dict[int, list[_Abbrev]], out: dict) -> None:
    """Reads the block whose header was just read, descending only into the blocks this reader needs."""
    abbrevs = list(blockinfo.get(block_id, []))
    info_target: int | None = None
    while True:
        abbrev_id = bits.read(width)
        if abbrev_id == _END_BLOCK:
            bits.align32()
            return
        if abbrev_id == _ENTER_SUBBLOCK:
            inner, inner_width = bits.vbr(8), bits.vbr(4)
            bits.align32()
            words = bits.read(32)
            body_end = bits.pos + words * 32
            if body_end > bits.end:
                raise _Malformed(f"block {inner} runs past the end of the file")
            if inner in (_BLOCKINFO_BLOCK, _MODULE_BLOCK, _STRTAB_BLOCK):
                _read_block(bits, inner, inner_width, blockinfo, out)
            bits.pos = body_end
            continue
        if abbrev_id == _DEFINE_ABBREV:
            abbrev = _define_abbrev(bits)
            if block_id == _BLOCKINFO_BLOCK:
                if info_target is None:
                    raise _Malformed("an abbreviation in the block-info block before SETBID")
                blockinfo.setdefault(info_target, []).append(abbrev)
            else:
                abbrevs.append(abbrev)
            continue
        code, ops, blob = _record(bits, abbrev_id, abbrevs)
        if block_id == _BLOCKINFO_BLOCK and code == 1 and ops:  # SETBID
            info_target = ops[0]
        elif block_id == _MODULE_BLOCK and code == _MODULE_CODE_TRIPLE:
            out["triple"] = "".join(chr(c) for c in ops)
        elif block_id == _MODULE_BLOCK and code in (_MODULE_CODE_FUNCTION, _MODULE_CODE_GLOBALVAR) and len(ops) > 4:
            # [strtab offset, strtab size, type, ...]: a function's op 4 is isproto (a declaration), a global
            # variable's op 4 is its initializer's value id + 1 (0: none).
            defined = ops[4] == 0 if code == _MODULE_CODE_FUNCTION else ops[4] != 0
            out["symbols"].append((ops[0], ops[1], defined))
        elif block_id == _STRTAB_BLOCK and code == 1:  # STRTAB_BLOB
            out["strtab"] = blob


def read_bitcode(data: bytes) -> BitcodeSummary:
    """The target triple and the defined and declared symbols of an LLVM bitcode module (version 2 or later: the
    names live in the string table, as LLVM 5 and newer write them). Raises ``ValueError`` naming what is wrong."""
    if not data:
        raise ValueError("the file is empty (0 bytes)")
    if data[:4] == _WRAPPER_MAGIC and len(data) >= 20:
        offset, size = int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")
        data = data[offset : offset + size]
    if data[:4] != _BITCODE_MAGIC:
        raise ValueError(f"it is not LLVM bitcode (it starts with {data[:4]!r}, not {_BITCODE_MAGIC!r})")
    bits = _Bits(data)
    bits.pos = 32
    out: dict = {"triple": None, "symbols": [], "strtab": b""}
    try:
        while bits.pos + 32 <= bits.end:
            if bits.read(2) != _ENTER_SUBBLOCK:
                raise _Malformed(f"expected a block at the top level (bit {bits.pos - 2})")
            block_id, width = bits.vbr(8), bits.vbr(4)
            bits.align32()
            words = bits.read(32)
            body_end = bits.pos + words * 32
            if body_end > bits.end:
                raise _Malformed(f"block {block_id} runs past the end of the file")
            if block_id in (_MODULE_BLOCK, _STRTAB_BLOCK):
                _read_block(bits, block_id, width, {}, out)
            bits.pos = body_end
    except _Malformed as err:
        raise ValueError(f"the bitcode is truncated or malformed: {err}") from None
    if out["triple"] is None:
        raise ValueError("the bitcode has no module, or its module has no target triple")
    names: dict[bool, set[str]] = {True: set(), False: set()}
    for offset, size, defined in out["symbols"]:
        name = out["strtab"][offset : offset + size]
        if len(name) != size:
            raise ValueError("the bitcode's symbol names point past its string table")
        names[defined].add(name.decode("utf-8", "replace"))
    return BitcodeSummary(out["triple"], frozenset(names[True]), frozenset(names[False] - names[True]))


_checked: dict[tuple[str, str, bool], tuple[tuple[int, int], str | None]] = {}


def _problem(path: Path, backend: str, watchdog: bool) -> str | None:
    """What is wrong with the library at `path` for `backend`, or None."""
    try:
        summary = read_bitcode(path.read_bytes())
    except ValueError as err:
        return str(err)
    arch = LIBRARY_TRIPLES[backend].split("-", 1)[0]
    if summary.triple.split("-", 1)[0] != arch:
        return (
            f"it is bitcode for target '{summary.triple}', but the {backend} backend links {arch} bitcode "
            f"('{LIBRARY_TRIPLES[backend]}')"
        )
    missing = [name for name in (*library_globals(watchdog), *all_symbols()) if name not in summary.defined]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return f"it does not define {len(missing)} symbol(s) of the ABI (triton_dist.abi): {shown}"
    return None


def check_library(path: Path | str, backend: str, watchdog: bool = False) -> None:
    """Raises ``DeviceLibraryInvalidError`` unless `path` is LLVM bitcode for `backend`'s target ("cuda": nvptx64,
    "hip": amdgcn) that defines every function and global of the ABI (with ``watchdog``, the watchdog variant's
    too). The result is remembered per file until its size or modification time changes."""
    if backend not in LIBRARY_TRIPLES:
        raise ValueError(f"triton_dist has device libraries for the cuda and hip backends, not {backend!r}")
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), backend, watchdog)
    stamp = (stat.st_size, stat.st_mtime_ns)
    cached = _checked.get(key)
    if cached is not None and cached[0] == stamp:
        problem = cached[1]
    else:
        problem = _problem(path, backend, watchdog)
        _checked[key] = (stamp, problem)
    if problem is not None:
        where = f" (${DEVICE_LIB_DIR_ENV} is set)" if os.environ.get(DEVICE_LIB_DIR_ENV) else ""
        raise DeviceLibraryInvalidError(
            f"the triton_dist device library {path}{where} cannot be linked for the {backend} backend: {problem}. "
            "Rebuild it with scripts/build.sh, or point $TRITON_DIST_DEVICE_LIB_DIR at a directory of built libraries."
        )


def linkable_library(backend: str, watchdog: bool = False) -> Path:
    """``require_library(backend, watchdog)`` that also passed ``check_library``: the file the compiler may link."""
    path = require_library(backend, watchdog)
    check_library(path, backend, watchdog)
    return path


# ----------------------------------------------------------------------------------------------------------------
# NVSHMEM (NVIDIA only): the wrapper library built from lib/DeviceLibrary/triton_dist_nvshmem.mlir, and NVSHMEM's own
# device code linked after it: the build's converted copy (scripts/nvshmem_device.py) of the installed version, else
# the nvidia-nvshmem wheel's bitcode.
# ----------------------------------------------------------------------------------------------------------------

NVSHMEM_BITCODE_DIR_ENV = "TRITON_DIST_NVSHMEM_BITCODE_DIR"
NVSHMEM_PACKAGES = ("nvidia-nvshmem-cu13", "nvidia-nvshmem-cu12")
"""The pip packages that ship NVSHMEM's device bitcode (``nvidia/nvshmem/lib/libnvshmem_device*.bc``)."""

_NVSHMEM_BITCODE = re.compile(r"libnvshmem_device_sm_(\d+)\.bc")
NVSHMEM_CONVERTED_GLOB = "nvshmem_device.*.nvptx64.ll"
"""The converted copies of NVSHMEM's device code that ``scripts/nvshmem_device.py`` (run by ``scripts/build.sh``)
writes into the device-library directory, one per NVSHMEM version: ``nvshmem_device.<version>.nvptx64.ll``."""
_CONVERTED_HEADER = re.compile(
    r"; triton_dist nvshmem device code: package=(?P<package>\S+) version=(?P<version>\S+) source=(?P<source>\S+) "
    r"sm=(?P<sm>\d+) format=\d+"
)


class NvshmemMissingError(DeviceLibraryMissingError):
    """A kernel calls an NVSHMEM primitive (dl.put_signal, dl.get, dl.signal_wait), but NVSHMEM's device bitcode (or
    the triton_dist wrapper library) cannot be found or does not fit the target."""


class NvshmemUnreadableError(DeviceLibraryUnreadableError):
    """NVSHMEM's device bitcode exists, but the LLVM inside Triton cannot parse it (a newer LLVM wrote it)."""


def nvshmem_bitcode_dir() -> Path:
    """The directory that holds NVSHMEM's device bitcode: ``$TRITON_DIST_NVSHMEM_BITCODE_DIR`` if set, else the
    ``lib`` directory of the installed ``nvidia.nvshmem`` package. Raises ``NvshmemMissingError`` naming the package
    to install when neither exists."""
    override = os.environ.get(NVSHMEM_BITCODE_DIR_ENV)
    if override:
        directory = Path(override).expanduser().resolve()
        if not directory.is_dir():
            raise NvshmemMissingError(f"${NVSHMEM_BITCODE_DIR_ENV} names {directory}, which is not a directory")
        return directory
    try:
        spec = importlib.util.find_spec("nvidia.nvshmem")
    except ModuleNotFoundError:  # no `nvidia` namespace package at all
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        directory = Path(location) / "lib"
        if directory.is_dir():
            return directory
    raise NvshmemMissingError(
        "NVSHMEM's device bitcode is needed to link a kernel that calls dl.put_signal / dl.get / dl.signal_wait, but "
        f"the Python package nvidia.nvshmem is not installed: pip install {NVSHMEM_PACKAGES[0]} (CUDA 13) or "
        f"{NVSHMEM_PACKAGES[1]} (CUDA 12), or point ${NVSHMEM_BITCODE_DIR_ENV} at a directory holding "
        "libnvshmem_device_sm_<N>.bc"
    )


def nvshmem_device_bitcode(capability: int) -> Path:
    """NVSHMEM's device bitcode for compute capability ``capability`` (90 for sm_90): the
    ``libnvshmem_device_sm_<N>.bc`` with the largest N not above it, else an unversioned ``libnvshmem_device.bc``.
    The file must start like LLVM bitcode (it is 30-50 MB: its symbols are not read)."""
    directory = nvshmem_bitcode_dir()
    versions = sorted(
        (int(match.group(1)), path)
        for path in directory.glob("libnvshmem_device_sm_*.bc")
        if (match := _NVSHMEM_BITCODE.fullmatch(path.name))
    )
    fitting = [path for version, path in versions if version <= capability]
    if fitting:
        path = fitting[-1]
    elif (directory / "libnvshmem_device.bc").is_file():
        path = directory / "libnvshmem_device.bc"
    else:
        found = ", ".join(f"sm_{version}" for version, _ in versions) or "none"
        raise NvshmemMissingError(
            f"{directory} holds no NVSHMEM device bitcode for sm_{capability} (libnvshmem_device_sm_<N>.bc with N <= "
            f"{capability}; found: {found})"
        )
    with path.open("rb") as file:
        head = file.read(4)
    if head not in (_BITCODE_MAGIC, _WRAPPER_MAGIC):
        raise NvshmemMissingError(f"{path} is not LLVM bitcode (it starts with {head!r})")
    return path


@dataclass(frozen=True)
class ConvertedNvshmem:
    """A converted copy of NVSHMEM's device code (``scripts/nvshmem_device.py``): the functions ``dl.*`` calls and
    NVSHMEM's device-state globals, as textual IR triton's LLVM reads."""

    path: Path
    package: str  # the wheel it came from, e.g. nvidia-nvshmem-cu13
    version: str  # NVSHMEM's version, e.g. 3.4.5
    source: str  # the bitcode file of the wheel, e.g. libnvshmem_device_sm_90.bc
    sm: int  # the compute capability of that file's variant; 0 for the unversioned libnvshmem_device.bc


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in re.split(r"[.+-]", version))


def converted_nvshmem_copies() -> list[ConvertedNvshmem]:
    """The converted copies in the device-library directory, oldest NVSHMEM version first. Raises
    ``DeviceLibraryInvalidError`` for a file whose first line is not the converter's header (a damaged or foreign
    file: rebuild with scripts/build.sh)."""
    copies = []
    for path in sorted(device_lib_dir().glob(NVSHMEM_CONVERTED_GLOB)):
        with path.open("r", errors="replace") as file:
            first = file.readline().rstrip("\n")
        match = _CONVERTED_HEADER.fullmatch(first)
        if match is None:
            raise DeviceLibraryInvalidError(
                f"{path} does not start with the header scripts/nvshmem_device.py writes (it starts with "
                f"{first[:80]!r}): remove it and rebuild with scripts/build.sh"
            )
        copies.append(ConvertedNvshmem(path, match["package"], match["version"], match["source"], int(match["sm"])))
    return sorted(copies, key=lambda copy: _version_key(copy.version))


def installed_nvshmem_version() -> str | None:
    """The version of the installed nvidia-nvshmem wheel (``NVSHMEM_PACKAGES``, CUDA 13 first), None without one.
    Its host library initializes the device state of loaded kernels, so their device code must be of this version."""
    for package in NVSHMEM_PACKAGES:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def converted_nvshmem(capability: int) -> ConvertedNvshmem | None:
    """The converted copy to link for compute capability ``capability``: with an nvidia-nvshmem wheel installed, the
    copy of exactly its version (None if there is none: the wheel's own bitcode must do); without one (compiling on a
    machine without NVSHMEM), the newest copy. Copies of a variant above ``capability`` are never picked."""
    fitting = [copy for copy in converted_nvshmem_copies() if copy.sm <= capability]
    installed = installed_nvshmem_version()
    if installed is not None:
        fitting = [copy for copy in fitting if copy.version == installed]
    return fitting[-1] if fitting else None


def nvshmem_rebuild_hint(capability: int) -> str:
    """What to do when the wheel's NVSHMEM bitcode cannot be read: the sentence names the installed version and the
    converted copies there are, and the build command that converts the installed version."""
    installed = installed_nvshmem_version()
    copies = ", ".join(copy.version for copy in converted_nvshmem_copies()) or "none"
    version = installed or "<version>"
    return (
        f"scripts/build.sh converts NVSHMEM's device code into a copy triton's LLVM reads ({device_lib_dir()}/"
        f"nvshmem_device.<version>.nvptx64.ll; copies there now: {copies}); the installed NVSHMEM is "
        f"{installed or 'unknown'}, so build one for it on a machine with LLVM 22: TRITON_DIST_NVSHMEM_VERSION="
        f"{version} bash scripts/build.sh (or python3 scripts/nvshmem_device.py --version {version}), then copy it "
        "along with the other device libraries"
    )


def nvshmem_device_code(capability: int) -> Path:
    """NVSHMEM's device code to link for compute capability ``capability``: the wheel's bitcode in
    ``$TRITON_DIST_NVSHMEM_BITCODE_DIR`` when that is set (an explicit choice), else the converted copy that
    ``converted_nvshmem`` picks, else the installed wheel's bitcode (``nvshmem_device_bitcode``). Raises
    ``NvshmemMissingError`` when there is none."""
    if not os.environ.get(NVSHMEM_BITCODE_DIR_ENV):
        copy = converted_nvshmem(capability)
        if copy is not None:
            return copy.path
    return nvshmem_device_bitcode(capability)


def nvshmem_libraries(capability: int) -> list[tuple[str, str]]:
    """The ``extern_libs`` entries a kernel that calls an NVSHMEM primitive needs, in link order: the triton_dist
    wrapper library (checked: nvptx64 bitcode defining ``abi.nvshmem_symbols()``), then NVSHMEM's device bitcode,
    which defines the functions the wrappers call (``nvshmem_device_code``: the converted copy of the installed
    version, else the wheel's bitcode). Triton links extern libraries one after the other, each only for the symbols
    still undefined, so the order matters.

    Neither file enters Triton's cache key through the options (the stages hook adds them after the key is made):
    the wrapper and the converted copies are covered by ``libraries_digest``, the wheel's bitcode by its path (clear
    the cache after upgrading the wheel in place)."""
    wrapper = device_lib_dir() / NVSHMEM_LIBRARY_FILE
    if not wrapper.is_file():
        raise NvshmemMissingError(
            f"the triton_dist NVSHMEM library {wrapper} does not exist: build it with scripts/build.sh"
        )
    try:
        summary = read_bitcode(wrapper.read_bytes())
    except ValueError as error:
        raise DeviceLibraryInvalidError(
            f"the triton_dist NVSHMEM library {wrapper} cannot be linked: {error}"
        ) from None
    missing = [name for name in nvshmem_symbols() if name not in summary.defined]
    if not summary.triple.startswith("nvptx64") or missing:
        raise DeviceLibraryInvalidError(
            f"the triton_dist NVSHMEM library {wrapper} cannot be linked: it must be nvptx64 bitcode defining "
            f"{len(nvshmem_symbols())} functions, got target '{summary.triple}' missing {missing[:3]}; rebuild it "
            "with scripts/build.sh"
        )
    unexpected = sorted(
        name for name in summary.declared - set(NVSHMEM_DEVICE_FUNCTIONS) if not name.startswith("llvm.")
    )
    if unexpected:
        raise DeviceLibraryInvalidError(
            f"the triton_dist NVSHMEM library {wrapper} calls functions NVSHMEM does not provide: {unexpected[:3]}"
        )
    return [(NVSHMEM_LIB_NAME, str(wrapper)), (NVSHMEM_DEVICE_LIB_NAME, str(nvshmem_device_code(capability)))]
