# The lit configuration of triton-dist: tools come from the build tree (triton-dist-opt) and from the LLVM 22
# installation (mlir-translate, llc, llvm-as, llvm-dis, FileCheck, not).
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "TRITON_DIST"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".ll"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.triton_dist_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%device_lib_dir", os.path.join(config.triton_dist_obj_root, "device")))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# `not` and `count` are plain commands in RUN lines: find them in LLVM 22, not on the system PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.triton_dist_tools_dir, config.llvm_tools_dir]
tools = [
    "triton-dist-opt",
    ToolSubst("mlir-translate", unresolved="fatal"),
    ToolSubst("llc", unresolved="fatal"),
    ToolSubst("llvm-as", unresolved="fatal"),
    ToolSubst("llvm-dis", unresolved="fatal"),
    ToolSubst("llvm-nm", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
