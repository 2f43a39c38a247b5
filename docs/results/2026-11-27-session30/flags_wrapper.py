"""Run a bench script with ops.ag_gemm.op.DOUBLE_BUFFER_FLAGS set from the environment (AG_FLAGS)."""
import importlib
import os
import runpy
import sys

importlib.import_module("triton_dist.ops.ag_gemm.op").DOUBLE_BUFFER_FLAGS = os.environ["AG_FLAGS"]
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
