"""The tuned tables: the package's committed ``tuned_configs.json`` and the user's cache, read with every entry
checked and written atomically.

Keys are ``op|M,N,K|dtype|world_size|gpu name`` (global M, N, K) unless an op keys its own entries otherwise;
each entry is ``{"config": {...}, "measured": {...}}``. The user's cache (``$TRITON_DIST_CACHE_DIR`` or
``~/.cache/triton_dist``, file ``tuning.json``) is read before the package table.

A table is data from disk, so nothing in it is trusted: a file that is not a JSON object, an entry of the wrong
shape or a field of the wrong type (a NaN or 2**70 tile, ``"no"`` for a boolean) is skipped with one warning per
file, never an exception in the op that reads it.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import warnings
from typing import Any, Protocol

PACKAGE_TABLE = pathlib.Path(__file__).resolve().parent.parent / "tuned_configs.json"


def cache_dir() -> pathlib.Path:
    """Where the ops keep the user's tuning results: ``$TRITON_DIST_CACHE_DIR``, else ``~/.cache/triton_dist``."""
    root = os.environ.get("TRITON_DIST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_dist")
    return pathlib.Path(root)


def cache_path() -> pathlib.Path:
    """The user's tuning cache file."""
    return cache_dir() / "tuning.json"


def key(op: str, m: int, n: int, k: int, dtype: Any, world_size: int, gpu: str) -> str:
    """The cache key of one tuned problem (global M, N, K as in the op's documentation)."""
    return f"{op}|{m},{n},{k}|{str(dtype).removeprefix('torch.')}|{world_size}|{gpu}"


_warned: set[str] = set()


def _warn_once(path: pathlib.Path, what: str) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        warnings.warn(f"triton_dist tuning table {path}: {what}; ignored (delete or fix the file)", stacklevel=3)


def read_table(path: pathlib.Path) -> dict[str, Any]:
    """The entries of the table at ``path`` that have the shape of an entry; {} for a missing or unusable file."""
    try:
        text = path.read_bytes().decode("utf-8")
        table = json.loads(text)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        _warn_once(path, f"unreadable ({type(error).__name__}: {error})")
        return {}
    if not isinstance(table, dict):
        _warn_once(path, f"not a JSON object but {type(table).__name__}")
        return {}
    good = {k: v for k, v in table.items() if isinstance(v, dict) and isinstance(v.get("config"), dict)}
    if len(good) != len(table):
        _warn_once(path, f"{len(table) - len(good)} entries without a 'config' object")
    return good


def lookup_entry(entry_key: str) -> dict[str, Any] | None:
    """The stored entry (``{"config": ..., "measured": ...}``) for ``entry_key``: user cache first, then the
    package table; None if neither has it."""
    for path in (cache_path(), PACKAGE_TABLE):
        entry = read_table(path).get(entry_key)
        if entry is not None:
            return entry
    return None


class StoredConfig(Protocol):
    """What ``store`` keeps: any op's config that can say its fields."""

    def as_dict(self) -> dict[str, Any]: ...


def store(path: pathlib.Path, entry_key: str, config: StoredConfig, measured: dict[str, Any]) -> None:
    """Write one tuned entry (config + what was measured) into the JSON table at ``path``, atomically.

    The table is rewritten through a temporary file of a unique name in the same directory, then renamed over
    the old one, so a reader never sees half a file and two writers never share a temporary. The file keeps its
    permissions (a new one is private to the user, except the package's table).
    """
    table = read_table(path)
    table[entry_key] = {"config": config.as_dict(), "measured": measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else (0o644 if path == PACKAGE_TABLE else 0o600)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            file.write(json.dumps(table, indent=1, sort_keys=True) + "\n")
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise
