"""Whether a call may skip torch's dispatcher and run an op's implementation directly."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from torch._C import _len_torch_dispatch_stack

torch_compiler: Any = torch.compiler
"""With ``torch_compiler``: ``torch_compiler._is_compiling_flag or is_dynamo_compiling()`` is
``torch.compiler.is_compiling()`` one Python frame cheaper, for the eager fast paths. In eager Python,
``is_compiling()`` returns that flag (set by export and compile sessions) behind a ``torch.jit.is_scripting()`` frame,
and ``is_dynamo_compiling()`` returns False; while Dynamo traces, it folds both functions to True (by identity, so
binding them here changes nothing). The frame is 1.3 µs of the type, compile and dispatch-mode test's 4.8 after
a 1 ms sleep (bench/host_cold.py's method)."""
is_dynamo_compiling: Callable[[], bool] = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)
if not hasattr(torch_compiler, "_is_compiling_flag"):  # a torch without the flag: the public test, a frame slower
    torch_compiler, is_dynamo_compiling = SimpleNamespace(_is_compiling_flag=False), torch.compiler.is_compiling


def plain_eager(*tensors: Any) -> bool:
    """Whether a call with ``tensors`` may skip the dispatcher: plain tensors, no compiler tracing, no dispatch mode
    (fake tensors, make_fx, functionalization and torch.compile all need the registered custom op).

    A value that is no tensor at all also takes the direct path, whose checks name it (the dispatcher's schema
    error would not say which op's argument is wrong). The dispatcher costs tens of µs per call, which decode-size
    ops and eager models cannot afford; the op and its implementation are the same function, so skipping it changes
    nothing else.
    """
    for tensor in tensors:  # a loop: all() over a generator took twice as long, on every eager call
        if type(tensor) is not torch.Tensor and isinstance(tensor, torch.Tensor):
            return False
    # No dispatch mode on the stack (what ``_get_current_dispatch_mode() is None`` tests, one call cheaper).
    return not (torch_compiler._is_compiling_flag or is_dynamo_compiling()) and _len_torch_dispatch_stack() == 0
