"""Carries a primitive's error message up through the ``@triton.jit`` helpers that called the primitive.

A primitive misused in a kernel is a ``CompilationError`` whose ``str()`` ends with the primitive's message. Misused
in a helper the kernel calls (or in a combine function of ``tl.reduce`` / ``tl.associative_scan``), Triton 3.6
wraps the helper's error in a ``CompilationError`` of the caller with *no* message (``call_JitFunction``: ``raise
CompilationError(src, node, None) from e``): the user sees the caller's line and nothing else unless they read the
chained exception. :func:`install_helper_error_messages` wraps ``CodeGenerator.call_JitFunction`` so that such an
error, when it comes from a triton_dist primitive (tagged ``PRIMITIVE_ERROR`` by ``language/_primitive.py``), keeps
the message, followed by one line per helper on the way: where in which helper the call was. Errors of Triton's own
builtins are left exactly as Triton raises them.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

PRIMITIVE_ERROR = "triton_dist_primitive"
"""The attribute a primitive sets on the exception it raises (to ``"dl.<name>"``)."""

_WRAPPED = "__triton_dist_helper_errors__"


class PrimitiveErrorInHelper(Exception):
    """A primitive's error in a function that a Triton builtin generated (a ``tl.reduce`` combiner): the code
    generator turns it into the ``CompilationError`` at the builtin's call, with this message."""


def _language_core_file() -> str:
    from triton.language import core

    return core.__file__


def primitive_of(error: BaseException | None) -> str | None:
    """``"dl.<name>"`` if ``error`` (or the exception it was raised from) is a primitive's error, else None."""
    for candidate in (error, getattr(error, "__cause__", None)):
        name = getattr(candidate, PRIMITIVE_ERROR, None)
        if isinstance(name, str):
            return name
    return None


def _where(fn: Any, error: Any) -> str:
    """``in helper() at file.py:12: dl.wait(...)``: where in helper ``fn`` the error ``error`` points."""
    from triton.compiler.code_generator import get_jit_fn_file_line

    name = getattr(fn, "__name__", "a helper")
    line = getattr(error.node, "lineno", None)
    if line is None:
        return f"in {name}()"
    file_name, begin_line = get_jit_fn_file_line(fn)
    source = (error.src or "").splitlines()
    text = source[line - 1].strip() if 0 < line <= len(source) else ""
    return f"in {name}() at {file_name}:{begin_line + line - 1}: {text}"


def install_helper_error_messages() -> None:
    """Wrap Triton's ``CodeGenerator.call_JitFunction`` once (idempotent; see the module docstring)."""
    from triton.compiler.code_generator import CodeGenerator
    from triton.compiler.errors import CompilationError

    original = CodeGenerator.call_JitFunction
    if getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def call_jit_function(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, fn, *args, **kwargs)
        except CompilationError as error:
            inner = error.__cause__
            primitive = primitive_of(inner)
            if error.error_message is not None or not isinstance(inner, CompilationError) or primitive is None:
                raise
            message = f"{inner.error_message}\n  {_where(fn, inner)}"
            if sys._getframe(1).f_code.co_filename == _language_core_file():
                # Called by a builtin (tl.reduce's combiner, tl.map_elementwise): the code generator wraps what the
                # builtin raises in a CompilationError of its own, with str() of it as the message.
                carried: Exception = PrimitiveErrorInHelper(message)
            else:
                carried = CompilationError(error.src, error.node, message)
            setattr(carried, PRIMITIVE_ERROR, primitive)
            raise carried from inner

    setattr(call_jit_function, _WRAPPED, True)
    CodeGenerator.call_JitFunction = call_jit_function
