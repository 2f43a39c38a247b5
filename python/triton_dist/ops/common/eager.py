"""Whether a call may skip torch's dispatcher and run an op's implementation directly."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode


def plain_eager(*tensors: Any) -> bool:
    """Whether a call with ``tensors`` may skip the dispatcher: plain tensors, no compiler tracing, no dispatch mode
    (fake tensors, make_fx, functionalization and torch.compile all need the registered custom op).

    A value that is no tensor at all also takes the direct path, whose checks name it (the dispatcher's schema
    error would not say which op's argument is wrong). The dispatcher costs tens of µs per call, which decode-size
    ops and eager models cannot afford; the op and its implementation are the same function, so skipping it changes
    nothing else.
    """
    return (
        all(type(t) is torch.Tensor or not isinstance(t, torch.Tensor) for t in tensors)
        and not torch.compiler.is_compiling()
        and _get_current_dispatch_mode() is None
    )
