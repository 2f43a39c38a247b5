"""Keeps the device-side checks from serializing Hopper's asynchronous tensor-core instructions.

ptxas serializes every ``wgmma.mma_async`` of a kernel that contains a function call anywhere ("C7510: wgmma
pipeline crossing function boundary at a function call"): each MMA then waits for the previous one to finish. A
failed check (``_guards.py``) is Triton's ``tt.assert``, which on NVIDIA becomes a call of ``__assertfail`` (to
print the message) followed by a trap. The call sits on a path that runs only when the check fails, yet ptxas
serialized the MMAs of ``ag_gemm``'s and ``gemm_rs``'s persistent GEMMs and of ``gemm_ar``'s tiles for M >= 64,
which made those kernels much slower than the GEMMs they are built from (the measurement:
docs/results/2026-11-23-wgmma-serialization.md; ``test_call_free_checks.py`` shows the serialization on CPU with
ptxas).

So in a kernel with ``wgmma``, the ``llir`` stage removes the calls that print *our* checks' messages (those that
start with ``triton_dist:``) and keeps the trap: a failed check still stops the kernel, without the message. With
``TRITON_DIST_DEBUG=1`` nothing is removed (the messages are worth the slower MMAs while debugging). User asserts
(``tl.device_assert``) are never touched. Kernels without ``wgmma`` keep every message.
"""

from __future__ import annotations

import re
import warnings

from triton_dist.compiler.checks import Checks, check_level

CHECK_MESSAGE_PREFIX = "triton_dist: "
"""Every message of a device-side check starts with this (``_guards.py``)."""

_WGMMA = "wgmma.mma_async"
_MESSAGE_GLOBAL = re.compile(
    rf'^@(assertMessage_\d+) = [^\n]*c"(.{{0,{len(CHECK_MESSAGE_PREFIX)}}})', re.MULTILINE
)  # -> (global name, the message's first characters)
_ASSERT_CALL = re.compile(
    r"^(?P<indent>[ \t]*)(?:tail |notail |musttail )?call void @__assertfail\("
    r"ptr (?:nonnull )?(?P<message>[@%][\w.]+),[^\n]*?\)(?P<dbg>, !dbg ![0-9]+)?[ \t]*$",
    re.MULTILINE,
)
_TRAP_DECLARATION = "declare void @llvm.trap()"


class SerializedWgmmaWarning(UserWarning):
    """A kernel with wgmma keeps a call that ptxas will answer by serializing every wgmma (slow, not wrong)."""


def has_wgmma(llir: str) -> bool:
    """Whether the LLVM IR of an NVIDIA kernel issues Hopper's asynchronous MMA."""
    return _WGMMA in llir


def drop_check_message_calls(llir: str) -> tuple[str, int, int]:
    """``llir`` with each ``__assertfail`` call of a triton_dist check replaced by ``llvm.trap``; with how many calls
    were replaced, and how many calls that may be a check's were left (a form this function does not know).

    A call whose message is a global starting with ``CHECK_MESSAGE_PREFIX`` is replaced (the ``unreachable`` after
    it stays); a user's message is kept. A call whose message is not a global (LLVM merged several asserts into one
    call that takes its message through a phi) is replaced only when the module has no user message, else left.
    """
    messages = dict(_MESSAGE_GLOBAL.findall(llir))
    ours = {name for name, text in messages.items() if text.startswith(CHECK_MESSAGE_PREFIX)}
    if not ours:
        return llir, 0, 0
    has_user_messages = len(messages) > len(ours)
    replaced = left = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal replaced, left
        message = match.group("message")
        merged = message.startswith("%")
        if message[1:] in ours or (merged and not has_user_messages):
            replaced += 1
            return f"{match.group('indent')}call void @llvm.trap(){match.group('dbg') or ''}"
        left += merged
        return match.group(0)

    result = _ASSERT_CALL.sub(replace, llir)
    left += len(re.findall(r"@__assertfail\([^\n]*@(?:" + "|".join(sorted(ours)) + r"),", result))
    if replaced and _TRAP_DECLARATION not in result:
        result += f"\n{_TRAP_DECLARATION}\n"
    return result, replaced, left


def make_checks_call_free(llir: str) -> str:
    """The ``llir`` stage's post-processing on NVIDIA: call-free checks in wgmma kernels, below the debug level.

    Never fails a compilation: a check's call it cannot take out is left (the kernel is right, its wgmma are
    serialized) with a ``SerializedWgmmaWarning``; ``test_call_free_checks.py`` keeps the ops' kernels free of it.
    """
    if check_level() >= Checks.DEBUG or not has_wgmma(llir):
        return llir
    result, _, left = drop_check_message_calls(llir)
    if left:
        warnings.warn(
            f"triton_dist: {left} device-side check call(s) stay in a kernel with wgmma, so ptxas serializes its "
            "wgmma (slower, still correct): Triton's LLVM IR has a form triton_dist/compiler/call_free_checks.py "
            "does not know",
            SerializedWgmmaWarning,
            stacklevel=2,
        )
    return result
