"""Whether a call may skip torch's dispatcher and run an op's implementation directly."""

from __future__ import annotations

from typing import Any

import torch
from torch._C import _len_torch_dispatch_stack


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
    return not torch.compiler.is_compiling() and _len_torch_dispatch_stack() == 0
