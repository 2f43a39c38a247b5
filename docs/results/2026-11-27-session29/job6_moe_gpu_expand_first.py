"""Session 29, job 6: test/python/test_ops_moe_gpu.py as its own script, with switches.EXPAND_RESIDENT_FIRST on."""
import runpy
import sys
from pathlib import Path

from triton_dist.ops.moe import switches

switches.set_expand_resident_first(True)
test = Path(__file__).resolve().parents[1] / "test" / "python" / "test_ops_moe_gpu.py"
sys.path.insert(0, str(test.parent))
sys.argv = [str(test), *sys.argv[1:]]
runpy.run_path(str(test), run_name="__main__")
