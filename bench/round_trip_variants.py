"""Which half of the flag round trip costs what: the release write and the poll, each ours or Triton's atomic.

    torchrun --nproc-per-node=2 bench/round_trip_variants.py [--rounds 10000] [--iters 20] \
        [--results bench/results/round_trip_variants]

Issue 12, item 6: across two H200s the ping-pong (``examples/ping_pong.py``: ``dl.notify`` set, then ``dl.wait``
acquire) took 2.573 µs per round trip and the Triton-atomics loop beside it 2.535 µs (1.015x;
docs/results/2026-11-23-2xH200-ops.md). In SASS the two differ in the release write (``STG.E.STRONG.SYS`` against
``ATOMG.E.EXCH.STRONG.SYS``) and in the poll (our lowering's loop against a Triton ``while`` around an atomic add of
0). This benchmark crosses the two halves, each variant a kernel with the ping-pong's arguments, in one run:

- ``notify+wait``: the example's kernel (the default wait library, whatever ``TRITON_DIST_WAIT_TIMEOUT_S`` selects);
- ``xchg+wait``: the release write as ``tl.atomic_xchg(dl.symm_at(flag, peer), value, sem="release", scope="sys")``;
- ``notify+atomic poll``: the poll as ``while tl.atomic_add(flag, 0, sem="acquire", scope="sys") != value``;
- ``xchg+atomic poll``: both Triton's atomics, the example's baseline (its peer pointer from ``dl.symm_at``);
- ``barrier+xchg+atomic poll`` / ``xchg+atomic poll+barrier``: the baseline with one CTA barrier
  (``tl.debug_barrier``) added where ``dl.notify`` (before its release write) or ``dl.wait`` (after its poll) holds
  one: the barriers full release/acquire semantics need for a whole program, which the atomics loop omits.
- ``store+atomic poll`` / ``xchg+load poll``: the baseline with one half replaced by the bare instruction of ours
  in inline PTX: ``st.release.sys`` for the exchange (every lane storing), ``ld.acquire.sys`` for the atomic poll
  (every lane polling, no broadcast through shared memory): which instruction, not which lowering, holds the gap.

What it found (docs/results/2026-11-24-2xH200-session14.md): ``xchg+load poll`` was the fastest, and our wait's
loop was the cost: with one flag, lane 0 alone polled while the warp's other lanes skipped ahead (a divergent loop
with ``YIELD``). Since every lane of the first warp polls, ``notify+wait`` runs at 0.95-0.996x the atomics loop.

Each is timed twice (in order, then in reverse), the median of ``--iters`` launches of ``--rounds`` round trips
after warm-up, every launch started by a device barrier, maximum over ranks (``_variant_cost.py``, shared with
``guard_cost.py`` and ``watchdog_cost.py``). The cost column is relative to ``notify+wait``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import triton
import triton.language as tl
from _variant_cost import Launch, Study, add_arguments, fresh_jit, run

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist import testing


@triton.jit
def _release(flag_ptr, peer_flag, peer, value, RELEASE: tl.constexpr):
    """Write ``value`` into the peer's flag with release semantics: ``dl.notify`` (``"notify"``), Triton's atomic
    exchange (``"xchg"``), or a bare ``st.release.sys`` in inline PTX (``"store"``: notify's instruction without its
    barrier and lane predicate, every lane storing the same word)."""
    if RELEASE == "xchg":
        tl.atomic_xchg(peer_flag, value, sem="release", scope="sys")
    elif RELEASE == "store":
        tl.inline_asm_elementwise(
            "st.release.sys.global.b32 [$1], $2;\n\tmov.u32 $0, 0;",
            "=r,l,r",
            [peer_flag, value],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )
    else:
        dl.notify(flag_ptr, peer, signal=value, sig_op="set", comm_scope="intra_node")


@triton.jit
def _acquire(flag_ptr, value, POLL: tl.constexpr):
    """Wait until this rank's flag holds ``value``, with acquire semantics: ``dl.wait`` (``"wait"``), Triton's loop
    around an atomic add of 0 (``"atomic"``: one lane polls, the value is broadcast through shared memory), or a loop
    around an ``ld.acquire.sys`` in inline PTX (``"load"``: every lane polls, nothing is broadcast)."""
    if POLL == "atomic":
        while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys") != value:
            pass
    elif POLL == "load":
        seen = value - 1
        while seen != value:
            seen = tl.inline_asm_elementwise(
                "ld.acquire.sys.global.b32 $0, [$1];", "=r,l", [flag_ptr], dtype=tl.int32, is_pure=False, pack=1
            )
    else:
        dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=value)


@triton.jit(do_not_specialize=["first"])
def ping_pong_variant(
    flag_ptr,
    rounds,
    first,
    SERVE: tl.constexpr,
    RELEASE: tl.constexpr,
    POLL: tl.constexpr,
    BARRIER_BEFORE_RELEASE: tl.constexpr,
    BARRIER_AFTER_POLL: tl.constexpr,
):
    """The ping-pong's loop, with its arguments, the release write and the poll chosen by ``RELEASE`` and ``POLL``;
    the ``BARRIER_*`` flags add a CTA barrier (``tl.debug_barrier``) where ``dl.notify`` and ``dl.wait`` hold
    theirs."""
    peer = 1 - dl.rank()
    peer_flag = dl.symm_at(flag_ptr, peer)  # only the exchange and the store use it (computed once, before the loop)
    for i in range(rounds):
        value = first + i
        if SERVE:
            if BARRIER_BEFORE_RELEASE:
                tl.debug_barrier()
            _release(flag_ptr, peer_flag, peer, value, RELEASE)
            _acquire(flag_ptr, value, POLL)
            if BARRIER_AFTER_POLL:
                tl.debug_barrier()
        else:
            _acquire(flag_ptr, value, POLL)
            if BARRIER_AFTER_POLL:
                tl.debug_barrier()
            if BARRIER_BEFORE_RELEASE:
                tl.debug_barrier()
            _release(flag_ptr, peer_flag, peer, value, RELEASE)


VARIANTS = (
    "notify+wait",
    "xchg+wait",
    "notify+atomic poll",
    "xchg+atomic poll",
    "barrier+xchg+atomic poll",
    "xchg+atomic poll+barrier",
    "store+atomic poll",
    "xchg+load poll",
)


def _constexprs(
    release: str, poll: str, barrier_before_release: bool = False, barrier_after_poll: bool = False
) -> dict[str, object]:
    """``ping_pong_variant``'s constexprs: every one named, as Triton's compile wants them."""
    return {
        "RELEASE": release,
        "POLL": poll,
        "BARRIER_BEFORE_RELEASE": barrier_before_release,
        "BARRIER_AFTER_POLL": barrier_after_poll,
    }


CONSTEXPRS = {
    "xchg+wait": _constexprs("xchg", "wait"),
    "notify+atomic poll": _constexprs("notify", "atomic"),
    "xchg+atomic poll": _constexprs("xchg", "atomic"),
    "barrier+xchg+atomic poll": _constexprs("xchg", "atomic", barrier_before_release=True),
    "xchg+atomic poll+barrier": _constexprs("xchg", "atomic", barrier_after_poll=True),
    "store+atomic poll": _constexprs("store", "atomic"),
    "xchg+load poll": _constexprs("xchg", "load"),
}
"""``ping_pong_variant``'s constexprs for each variant but the first, which is the example's own ``ping_pong``."""


class _WithConstexprs:
    """``kernel`` launched as ``kernel[grid](*args, **kwargs)`` with ``constexprs`` added: what the harness's
    ping-pong launch (the example's arguments) needs to run a variant of ``ping_pong_variant``."""

    def __init__(self, kernel: triton.JITFunction, constexprs: dict) -> None:
        self.kernel = kernel
        self.constexprs = constexprs

    def __getitem__(self, grid: tuple) -> Callable[..., object]:
        launch = self.kernel[grid]
        return lambda *args, **kwargs: launch(*args, **kwargs, **self.constexprs)


def compile_variant(variant: str, kernel: triton.JITFunction, first_launch: Launch) -> object:
    """A fresh ``JITFunction`` of the variant's kernel (``kernel``, the example's, for ``notify+wait``; else
    ``ping_pong_variant`` with the variant's constexprs), compiled and loaded by its first launch."""
    if variant in CONSTEXPRS:
        fresh: object = _WithConstexprs(fresh_jit(ping_pong_variant), CONSTEXPRS[variant])
    else:
        fresh = fresh_jit(kernel)
    first_launch(fresh)
    rt.synchronize()
    return fresh


STUDY = Study(
    script="round_trip_variants",
    title="The flag round trip, release write x poll",
    column="variant",
    noun="variant",
    variants=VARIANTS,
    label=str,
    compile=compile_variant,
    passes="in the order listed, then reversed",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, "variant")
    args = parser.parse_args()
    args.sizes_mib = []  # the ping-pong only
    return run(STUDY, args)


if __name__ == "__main__":
    testing.main_guard(main)
