"""Every GPU check and benchmark script imports on a machine without GPUs.

The scripts only run on the device machine, where a module-level error (a stale index into a variant list, a
renamed config field) costs a whole device job before anything is checked. Importing them here, without running
their main, catches that class of error in CI.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "test" / "gpu").glob("check_*.py")) + sorted((ROOT / "bench").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_imports_without_running(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(path.parent))
    name = f"_script_under_test_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses defined in the script look their module up in sys.modules.
    monkeypatch.setitem(sys.modules, name, module)
    environment = dict(os.environ)
    spec.loader.exec_module(module)
    assert module.__name__ == name
    # The import runs in the pytest worker: an environment variable it set (TRITON_INTERPRET above all) would change
    # every later test in that worker and the processes they start.
    assert dict(os.environ) == environment, f"importing {path.name} changed os.environ"
