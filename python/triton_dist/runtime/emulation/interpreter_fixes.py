"""Two bugs of Triton 3.6's interpreter that distributed kernels reach, fixed through its Python surfaces.

- ``range(n)`` over a runtime scalar (``for step in range(dl.num_ranks() - 1)``, or a kernel argument): the
  interpreter's ``tensor.__index__`` calls ``int()`` on the scalar's one-element array, which numpy 2 refuses.
  :func:`install` wraps the interpreter's ``_patch_lang_tensor`` so that the ``__index__`` it installs for a launch
  takes the array's single element. The wrapper installs only the fixed one: Triton patches again at every
  ``@triton.jit`` helper call, while the emulation's other program threads run, so briefly installing Triton's own
  (as replacing it afterwards would) fails another program's ``range`` at random.
- ``tl.dot`` on bfloat16 multiplies the raw 16-bit patterns as integers: :func:`dot_operands` widens them to
  float32 first (``builder.EmulationBuilder.create_dot`` applies it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton.language as tl
import triton.runtime.interpreter as interpreter
from triton.runtime.interpreter import TensorHandle


def _index(tensor: tl.tensor) -> int:
    data = np.asarray(tensor.handle.data)
    return int(data.reshape(-1)[0]) if data.size == 1 else int(data)


_original_patch_lang_tensor = interpreter._patch_lang_tensor


class _FixedIndexScope:
    """A ``_LangPatchScope`` that sets ``__index__`` to :func:`_index` whatever it is asked to set it to."""

    def __init__(self, scope: Any) -> None:
        self._scope = scope

    def set_attr(self, obj: object, name: str, value: object) -> None:
        self._scope.set_attr(obj, name, _index if name == "__index__" else value)


def _patch_lang_tensor(tensor: Any, scope: Any) -> None:
    _original_patch_lang_tensor(tensor, _FixedIndexScope(scope))


def install() -> None:
    """Fix ``__index__`` in every launch of Triton's interpreter from now on (idempotent)."""
    interpreter._patch_lang_tensor = _patch_lang_tensor


def dot_operands(a: TensorHandle, b: TensorHandle) -> tuple[TensorHandle, TensorHandle]:
    """``a`` and ``b`` with bfloat16 operands widened to float32 (exactly: a bfloat16 is a float32's top half)."""

    def widen(handle: TensorHandle) -> TensorHandle:
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        return TensorHandle((handle.data.astype(np.uint32) << 16).view(np.float32), tl.float32)

    return widen(a), widen(b)
