"""Loading a script of bench/ as a module in a CPU test (the scripts are programs, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(script: str) -> ModuleType:
    """bench/``script`` imported as ``bench_<stem>``, with bench/ on ``sys.path`` (the scripts import their
    neighbours, e.g. ``_common``) and the module registered in ``sys.modules`` (dataclasses look it up there)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    path = BENCH / script
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
