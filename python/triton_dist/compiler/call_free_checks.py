"""Keeps the device-side checks from serializing Hopper's asynchronous tensor-core instructions.

ptxas serializes every ``wgmma.mma_async`` of a kernel that contains a function call anywhere ("C7510: wgmma
pipeline crossing function boundary at a function call"): each MMA then waits for the previous one to finish. A
failed check (``_guards.py``) is Triton's ``tt.assert``, which on NVIDIA becomes a call of ``__assertfail`` (to
print the message) followed by a trap. The call sits on a path that runs only when the check fails, yet ptxas
serialized the MMAs of ``ag_gemm``'s and ``gemm_rs``'s persistent GEMMs and of ``gemm_ar``'s tiles for M >= 64:
the kernels measured 17-37% (ag_gemm's, with no communication) and 1.9-2.8x (gemm_ar's GEMM at M = 128) slower
than the GEMMs they are built from (2xH200, before this module existed; ``test_call_free_checks.py`` shows the
serialization on CPU with ptxas).

So in a kernel with ``wgmma``, the ``llir`` stage removes the calls that print *our* checks' messages (those that
start with ``triton_dist:``) and keeps the trap: a failed check still stops the kernel, without the message. With
``TRITON_DIST_DEBUG=1`` nothing is removed (the messages are worth the slower MMAs while debugging). User asserts
(``tl.device_assert``) are never touched. Kernels without ``wgmma`` keep every message.
"""

from __future__ import annotations

import re

from triton_dist.compiler.checks import Checks, check_level

CHECK_MESSAGE_PREFIX = "triton_dist: "
"""Every message of a device-side check starts with this (``_guards.py``)."""

_WGMMA = "wgmma.mma_async"
_CHECK_MESSAGE = re.compile(r'^@(assertMessage_\d+) = [^\n]*c"' + re.escape(CHECK_MESSAGE_PREFIX), re.MULTILINE)
_ASSERT_CALL = re.compile(
    r"^(?P<indent>[ \t]*)(?:tail |notail |musttail )?call void @__assertfail\("
    r"ptr (?:nonnull )?@(?P<message>assertMessage_\d+),[^\n]*?\)(?P<dbg>, !dbg ![0-9]+)?[ \t]*$",
    re.MULTILINE,
)
_TRAP_DECLARATION = "declare void @llvm.trap()"


def has_wgmma(llir: str) -> bool:
    """Whether the LLVM IR of an NVIDIA kernel issues Hopper's asynchronous MMA."""
    return _WGMMA in llir


def drop_check_message_calls(llir: str) -> tuple[str, int]:
    """``llir`` with each ``__assertfail`` call of a triton_dist check replaced by ``llvm.trap``; and how many.

    Only calls whose message starts with ``CHECK_MESSAGE_PREFIX`` are replaced (the ``unreachable`` after each
    stays). Raises RuntimeError if a check's message exists but none of its calls has the expected form, so a
    change in Triton's LLVM IR cannot silently bring the serialization back.
    """
    ours = set(_CHECK_MESSAGE.findall(llir))
    if not ours:
        return llir, 0
    replaced = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal replaced
        if match.group("message") not in ours:
            return match.group(0)
        replaced += 1
        return f"{match.group('indent')}call void @llvm.trap(){match.group('dbg') or ''}"

    result = _ASSERT_CALL.sub(replace, llir)
    left = [name for name in ours if re.search(rf"@__assertfail\(ptr (?:nonnull )?@{name},", result)]
    if left or not replaced:
        raise RuntimeError(
            "triton_dist: could not take the check messages' __assertfail calls out of a wgmma kernel "
            f"({'calls left for ' + ', '.join(sorted(left)) if left else 'no call found'}): Triton's LLVM IR has "
            "changed form; update triton_dist/compiler/call_free_checks.py"
        )
    if _TRAP_DECLARATION not in result:
        result += f"\n{_TRAP_DECLARATION}\n"
    return result, replaced


def make_checks_call_free(llir: str) -> str:
    """The ``llir`` stage's post-processing on NVIDIA: call-free checks in wgmma kernels, below the debug level."""
    if check_level() >= Checks.DEBUG or not has_wgmma(llir):
        return llir
    return drop_check_message_calls(llir)[0]
