"""finalize() calls the hooks registered with on_finalize (once each), after its barrier: the ops drop their plans and
workspaces there, which refer to the world and its process group (a group kept alive past the end of the script
can abort the process at exit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def test_finalize_runs_each_hook_once_and_the_ops_forget_the_world() -> None:
    script = textwrap.dedent(
        """
        import triton_dist.ops  # registers the ops' hooks
        from triton_dist import runtime as rt
        from triton_dist.ops.common import dispatch, resources
        from triton_dist.testing import setup_distributed, teardown

        calls = []
        hook = lambda: calls.append(rt.is_initialized())
        rt.on_finalize(hook)
        rt.on_finalize(hook)  # registered once
        world = setup_distributed("16M", device="cpu")
        cache = dispatch.PlanCache("probe")
        cache.build(("s",), {"a": 1}, lambda: "plan")
        made = resources.workspace(("probe", 1), lambda w: rt.zeros(4), what="probe")
        assert cache.get(("s",)) == "plan" and resources.workspaces("probe") == [made]
        teardown()
        assert calls == [True], calls  # once, while the world was still there
        assert cache._world is None and len(cache) == 0, "the plan cache let go of the world"
        assert resources._world is None and resources._workspaces == {}, "the registry let go of the world"
        print("OK")
        """
    )
    env = {"PYTHONPATH": str(PYTHON_DIR), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout + done.stderr
