"""gemm_ar's split-K kernel code on the CPU, against torch's matmul summed over the emulated ranks.

The split-K kernel (``_gemm_ar_split_k_kernel``) is made of ``@triton.jit`` helpers without ``dl`` calls
(``call_epoch.arrive``, ``_split_k_item``, ``_split_k_partial``, ``_split_k_local_slot``, ``_split_k_exchange_slot``,
``_split_k_rows``, ``_split_k_sum``, ``_split_k_store``); only the pushes through ``dl.symm_at``,
``dl.notify`` and ``dl.wait`` stay in its body. The three kernels below call those helpers in the kernel's order and
run in Triton's interpreter (``TRITON_INTERPRET=1``, in a subprocess, as test_ops_decode_flash_decode_emulation.py
does), one launch each per emulated rank, with the op's grid (``split_k_launch_args`` with a fake SM count, so
programs take several items and tiles):

- ``_emulate_phase1``: every program's arrival (its epoch; the last one hands the call state over), then each
  item's fp32 partial into the local slot (tile, split) of the epoch's parity, the slot's flag set to the epoch (the
  kernel's GPU-scope notify).
- ``_emulate_phase1b``: right after that rank's phase 1 (what the local waits enforce; the emulation keeps one
  buffer for every rank's local area, so the next rank's phase 1 must come after): each program's tiles, the
  splits summed in order, the sum stored into exchange slot (tile, rank) with its flag set (where the kernel pushes
  to and notifies every rank: every rank's copy of the exchange area is the same, so the emulation keeps one), or,
  with the exchange off, the output stored.
- ``_emulate_phase2``: per rank, after every rank's phase 1b (what the waits enforce): each program's tiles, the
  sums added in rank order, the output stored. Phases 1b and 2 read the epoch the arrivals handed over (the kernel's
  programs keep the one their arrival gave them).

What can go wrong shows: the partial buffer starts as NaN (a slot read but never written poisons the output), the
flags of the call's slots must all read the epoch and none beyond them may change, the state must hold the epoch
and no arrivals on every rank afterwards, and the other parity's buffer must be left alone. Two calls of different
shapes in a row check the parity flip and the epoch hand-over.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys

import pytest
import torch
import triton
import triton.language as tl

from triton_dist.ops.common import call_epoch

ga_config = importlib.import_module("triton_dist.ops.gemm_ar.config")
ga_kernels = importlib.import_module("triton_dist.ops.gemm_ar.kernels")
ga_op = importlib.import_module("triton_dist.ops.gemm_ar.op")


@triton.jit
def _handed_over_epoch(state_ptr):
    """The epoch the call's arrivals (in ``_emulate_phase1``) handed over: this call's."""
    return (tl.load(state_ptr) >> 32).to(tl.int32)


@triton.jit
def _emulate_phase1(
    a_ptr, b_ptr, data_ptr, flags_ptr, state_ptr, M, N, K, stride_am, stride_bk, chunk, splits, flags_stride,
    REGION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    _, epoch = call_epoch.arrive(state_ptr, tl.num_programs(0))
    parity = epoch % 2
    local = data_ptr + parity * REGION
    local_flags = flags_ptr + parity * flags_stride
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for item in range(pid, tiles * splits, tl.num_programs(0)):
        tile, split = ga_kernels._split_k_item(item, tiles)
        acc = ga_kernels._split_k_partial(
            a_ptr, b_ptr, M, N, K, stride_am, stride_bk, tile, split, chunk, BLOCK_M, BLOCK_N, BLOCK_K
        )
        slot = ga_kernels._split_k_local_slot(tile, split, splits)
        tl.store(local + slot * TILE + in_tile, acc, mask=ga_kernels._split_k_rows(tile, M, N, BLOCK_M, BLOCK_N))
        tl.store(local_flags + slot, epoch)  # the kernel's GPU-scope notify


@triton.jit
def _emulate_phase1b(
    out_ptr, data_ptr, flags_ptr, state_ptr, M, N, stride_om, splits, flags_stride, me, ranks, REGION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EXCHANGE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    epoch = _handed_over_epoch(state_ptr)
    parity = epoch % 2
    local = data_ptr + parity * REGION
    exchange = local + ga_kernels.SPLIT_K_EXCHANGE_DATA
    exchange_flags = flags_ptr + parity * flags_stride + ga_kernels.SPLIT_K_EXCHANGE_FLAGS
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(pid, tiles, tl.num_programs(0)):
        rows = ga_kernels._split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
        first = ga_kernels._split_k_local_slot(tile, 0, splits)
        total = ga_kernels._split_k_sum(local + first * TILE, splits, rows, BLOCK_M, BLOCK_N)  # after the local wait
        if EXCHANGE:
            slot = ga_kernels._split_k_exchange_slot(tile, me, ranks)
            tl.store(exchange + slot * TILE + in_tile, total, mask=rows)  # the kernel's pushes to every rank
            tl.store(exchange_flags + slot, epoch)  # the kernel's notify of this slot on every rank
        else:
            ga_kernels._split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)


@triton.jit
def _emulate_phase2(
    out_ptr, data_ptr, state_ptr, M, N, stride_om, ranks, REGION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, EXCHANGE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    epoch = _handed_over_epoch(state_ptr)
    exchange = data_ptr + (epoch % 2) * REGION + ga_kernels.SPLIT_K_EXCHANGE_DATA
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    if EXCHANGE:
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in range(pid, tiles, programs):
            first = ga_kernels._split_k_exchange_slot(tile, 0, ranks)
            rows = ga_kernels._split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
            total = ga_kernels._split_k_sum(exchange + first * TILE, ranks, rows, BLOCK_M, BLOCK_N)  # after the wait
            ga_kernels._split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)


def _arguments(kernel, named: dict) -> dict:  # noqa: ANN001
    return {name: named[name] for name in inspect.signature(kernel.fn).parameters if name in named}


def emulate(case: dict) -> dict:
    """Two split-K calls (shapes ``case["shapes"]``) on ``ranks`` emulated ranks; the numbers the test checks."""
    gen = torch.Generator().manual_seed(case["seed"])
    ranks, sms = case["ranks"], case["sms"]
    dtype = getattr(torch, case["dtype"])
    config = ga_config.GemmARConfig(*case["tile"], split_k=case["split_k"], exchange=case.get("exchange", True))
    flags_per_parity, region_bytes = ga_config.split_k_workspace_sizes(ranks)
    data = torch.full((2, region_bytes // 4), float("nan"), dtype=torch.float32).view(torch.uint8)
    flags = torch.zeros(2, flags_per_parity, dtype=torch.int32)
    states = [torch.zeros(2, dtype=torch.int32) for _ in range(ranks)]
    result: dict = {"calls": []}
    for call, (m, n, k) in enumerate(case["shapes"]):
        epoch, parity = call + 1, (call + 1) % 2
        operands = []
        for _ in range(ranks):
            a = torch.randn(m, k, generator=gen).to(dtype)
            b = (torch.randn(k, n, generator=gen) / k**0.5).to(dtype)
            operands.append((a, b))
        other_parity = data.view(torch.float32)[1 - parity].clone()
        outs, grids = [], []
        for rank, (a, b) in enumerate(operands):
            out = torch.full((m, n), float("nan"), dtype=dtype)
            ws = ga_op.SlotWorkspace(epochs=states[rank], flags=flags, data=data)
            grid, named = ga_op.split_k_launch_args(a, b, out, config, ranks, sms, ws)
            # This rank's local area is its own in the real kernel; here one buffer serves every rank, so each
            # rank's phase 1b (which reads it) runs before the next rank's phase 1 (which overwrites it).
            _emulate_phase1[grid](**_arguments(_emulate_phase1, named))
            _emulate_phase1b[grid](**_arguments(_emulate_phase1b, named), me=rank, ranks=ranks)
            outs.append((out, grid, named))
            grids.append(grid[0])
        for _, grid, named in outs:
            _emulate_phase2[grid](**_arguments(_emulate_phase2, named), ranks=ranks)
        want = sum(a.double() @ b.double() for a, b in operands)
        terms = sum(a.double().abs() @ b.double().abs() for a, b in operands)
        tiles, splits, _ = ga_config.split_k_geometry(m, n, k, config)
        exchanged = tiles * ranks if config.exchange else 0
        start = int(ga_kernels.SPLIT_K_EXCHANGE_FLAGS)
        local_flags, exchange_flags = flags[parity, : tiles * splits], flags[parity, start : start + exchanged]
        untouched = torch.cat([flags[parity, tiles * splits : start], flags[parity, start + exchanged :]])
        # One rounding of the fp32 sum: half an ulp for fp16; a whole ulp for bf16, whose conversion from fp32
        # truncates in Triton 3.6's interpreter (the GPU rounds to nearest even).
        half_ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-11
        errors = [((out.double() - want).abs() - half_ulp * want.abs() - 2.0**-20 * terms).max() for out, _, _ in outs]
        result["calls"].append(
            {
                "nan": sum(int(torch.isnan(out).sum()) for out, _, _ in outs),
                "excess_error": float(max(errors)),
                "same_on_all_ranks": all(torch.equal(outs[0][0], out) for out, _, _ in outs),
                "grids": grids,
                "items": tiles * splits,
                "splits": splits,
                "flags_set": bool((local_flags == epoch).all() and (exchange_flags == epoch).all()),
                "flags_beyond_untouched": bool((untouched == 0).all()),
                "states": [s.tolist() for s in states],
                "other_parity_untouched": bool(
                    torch.equal(data.view(torch.float32)[1 - parity].nan_to_num(7.0), other_parity.nan_to_num(7.0))
                ),
            }
        )
    return result


def _main() -> None:
    from test_ops_decode_flash_decode_emulation import _fix_interpreter

    _fix_interpreter()
    request = json.loads(sys.argv[1])
    print(json.dumps([emulate(case) for case in request["cases"]]))


# ---------------------------------------------------------------------------------------------------------------
# The tests (pytest process)

CASES = {
    "bf16, 2 ranks, split 4, 5 programs (several items and tiles each), ragged M, N and K": dict(
        seed=0, dtype="bfloat16", ranks=2, sms=5, tile=(16, 32, 32), split_k=4, shapes=[(20, 70, 200), (7, 96, 64)]
    ),
    "fp16, 3 ranks (no tensor-of-ranks notify), split 2, more programs than items": dict(
        seed=1, dtype="float16", ranks=3, sms=132, tile=(16, 64, 32), split_k=2, shapes=[(5, 64, 96), (33, 40, 33)]
    ),
    "1 rank, split 16 on a K of 3 blocks (3 splits used)": dict(
        seed=2, dtype="bfloat16", ranks=1, sms=4, tile=(32, 16, 16), split_k=16, shapes=[(32, 48, 40), (1, 16, 48)]
    ),
    "bf16, 2 ranks, split 3 (not a power of two), 4 programs": dict(
        seed=4, dtype="bfloat16", ranks=2, sms=4, tile=(16, 32, 32), split_k=3, shapes=[(17, 64, 224), (3, 40, 96)]
    ),
    "GEMM alone (exchange off: this rank's splits only, as one rank)": dict(
        seed=3,
        dtype="bfloat16",
        ranks=1,
        sms=3,
        tile=(16, 32, 64),
        split_k=8,
        exchange=False,
        shapes=[(16, 64, 512), (9, 33, 100)],
    ),  # fmt: skip
}


def test_split_k_helpers_match_matmul_summed_over_ranks():
    from dl_compile import run_in_interpreter

    names = list(CASES)
    results = run_in_interpreter(__file__, {"cases": [CASES[name] for name in names]})
    for name, result in zip(names, results, strict=True):
        case = CASES[name]
        for call, got in enumerate(result["calls"]):
            epoch = call + 1
            where = f"{name}, call {call + 1}"
            assert got["nan"] == 0, f"{where}: {got['nan']} NaN outputs (a partial slot read but never written?)"
            assert got["excess_error"] <= 0, f"{where}: beyond one rounding of the exact sum: {got}"
            assert got["same_on_all_ranks"], f"{where}: ranks differ"
            assert got["grids"] == [min(got["items"], case["sms"])] * case["ranks"], f"{where}: grid {got}"
            assert got["flags_set"], f"{where}: not every slot of parity {epoch % 2} was flagged with epoch {epoch}"
            assert got["flags_beyond_untouched"], f"{where}: a flag beyond the call's slots was written"
            want = [[0, epoch]] * case["ranks"]  # the int64 state as two int32: no arrivals, this call's epoch
            assert got["states"] == want, f"{where}: device state {got['states']}"
            assert got["other_parity_untouched"], f"{where}: the call wrote the other parity's partials"
    # the split count: K = 40 in 16-blocks is 3 blocks -> 3 splits of one block, K = 48 -> 3 as well
    assert [c["splits"] for c in results[2]["calls"]] == [3, 3]


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "split_k", "want"),
    [
        (32, 5120, 4096, (32, 64, 128), 4, (80, 4, 1024)),
        (32, 5120, 4096, (32, 64, 128), 3, (80, 3, 1408)),  # 32 blocks: 11, 11 and the last 10
        (16, 5120, 4096, (16, 64, 128), 8, (80, 8, 512)),
        (1, 64, 200, (16, 64, 64), 4, (1, 4, 64)),  # 4 blocks, the last ragged (8 of 64)
        (1, 64, 300, (16, 64, 64), 4, (1, 3, 128)),  # 5 blocks: 2 per split, 3 splits
        (1, 64, 10, (16, 64, 64), 8, (1, 1, 64)),  # fewer blocks than splits: one split
    ],
)
def test_split_k_geometry(m, n, k, tile, split_k, want):
    config = ga_config.GemmARConfig(*tile, split_k=split_k)
    tiles, splits, chunk = ga_config.split_k_geometry(m, n, k, config)
    assert (tiles, splits, chunk) == want
    assert chunk % tile[2] == 0 and (splits - 1) * chunk < k <= splits * chunk  # no empty split, K covered


if __name__ == "__main__":
    _main()
