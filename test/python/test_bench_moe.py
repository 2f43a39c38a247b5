"""bench/moe.py's pure-Python parts on the CPU: the arguments, the all-to-all dispatcher the benchmark holds ours
against (its permutation, grouping and weighted combine, every rank a thread exchanging through shared memory)
checked against ``ops/moe/reference.py``, the check itself, and the results writer; the EP MoE layer's NCCL baseline
(the dispatcher with two grouped GEMMs in torch) against the dense fp32 reference, and the layer bar's arithmetic."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from bench_scripts import load_bench

moe = load_bench("moe.py")


class ThreadComm:
    """``A2ADispatcher``'s transport for ranks that are threads of one process: each rank posts its chunks, all
    wait, each takes what was addressed to it, all wait again."""

    def __init__(self, rank: int, world_size: int, board: dict[str, Any]) -> None:
        self.rank, self.world_size, self.board = rank, world_size, board

    def buffer(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.full((rows, cols), -7, dtype=dtype, device=device)  # poisoned: unwritten rows show

    def exchange_counts(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        ones = [1] * self.world_size
        self.all_to_all(out, inp, ones, ones)

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> None:
        self.board["posted"][self.rank] = [chunk.clone() for chunk in inp.split(in_splits)]
        self.board["barrier"].wait()
        received = [self.board["posted"][source][self.rank] for source in range(self.world_size)]
        assert [chunk.shape[0] for chunk in received] == out_splits
        out.copy_(torch.cat(received))
        self.board["barrier"].wait()


def _run_ranks(world: int, tokens: list[int], hidden: int, topk: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Every rank's dispatch and combine through ``A2ADispatcher`` (threads), and the reference's."""
    experts = 4 * world
    xs, idxs, ws = [], [], []
    for rank, count in enumerate(tokens):
        gen = torch.Generator().manual_seed(50 + rank)
        x, idx, w = moe.make_inputs(count, hidden, experts, topk, gen, none_rate=0.2)
        xs.append(x)
        idxs.append(idx)
        ws.append(w)
    refs, exact = moe.reference_results(xs, idxs, ws, experts)
    board = {"posted": [None] * world, "barrier": threading.Barrier(world, timeout=30)}
    results: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            comm = ThreadComm(rank, world, board)
            disp = moe.A2ADispatcher(comm, experts, hidden, topk, max(tokens), torch.bfloat16, torch.device("cpu"))
            results[rank] = moe.run_a2a(disp, xs[rank], idxs[rank], ws[rank])
        except BaseException as error:  # surfaced below
            errors.append(error)
            board["barrier"].abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results, refs, exact


@pytest.mark.parametrize("world,tokens", [(2, [9, 6]), (3, [5, 0, 8])], ids=["2ranks", "3ranks-T0"])
def test_the_all_to_all_dispatcher_matches_the_reference(world: int, tokens: list[int]) -> None:
    results, refs, exact = _run_ranks(world, tokens, hidden=16, topk=3)
    for rank in range(world):
        assert moe.compare(results[rank], refs[rank][0], refs[rank][1], exact[rank], 2e-2) == "", rank
        assert results[rank].combined.shape == (tokens[rank], 16)


def test_compare_names_a_wrong_row_and_a_wrong_combine() -> None:
    results, refs, exact = _run_ranks(2, [7, 7], hidden=8, topk=2)
    got = results[0]
    assert got.rows.shape[0] > 0
    got.rows[0] += 1
    assert "received rows differ" in moe.compare(got, refs[0][0], refs[0][1], exact[0], 2e-2)
    got.rows[0] -= 1
    got.combined[0, 0] += 100
    assert "combine: 1 of" in moe.compare(got, refs[0][0], refs[0][1], exact[0], 2e-2)


def test_arguments() -> None:
    args = moe.parse_args([])
    assert args.tokens == [1, 128, 512, 2048, 4096, 16384]
    assert (args.hidden, args.experts, args.topk, args.ll_tokens, args.reps) == (7168, 256, 8, 128, 20)
    assert moe.parse_args(["--tokens", "4096,1,4096"]).tokens == [1, 4096]
    assert (args.skip_layer, args.layer_tokens, args.layer_intermediate) == (False, [128, 4096], 2048)
    layer = moe.parse_args(["--skip-layer", "--layer-tokens", "64,8,64", "--layer-intermediate", "512"])
    assert (layer.skip_layer, layer.layer_tokens, layer.layer_intermediate) == (True, [8, 64], 512)
    only = moe.parse_args(["--only-layer", "--layer-tokens", "128"])
    assert only.only_layer and only.tokens == [128] and not args.only_layer  # the NCCL buffers: the layer's sizes
    for bad in (["--reps", "5"], ["--tokens", "0"], ["--tokens", "a"], ["--topk", "300"], ["--layer-tokens", "0"],
                ["--layer-intermediate", "0"], ["--only-layer", "--skip-layer"],
                ["--only-layer", "--only-dispatch"]):  # fmt: skip
        with pytest.raises(SystemExit):
            moe.parse_args(bad)


def _row(path: str, mode: str, tokens: int, dispatch: float, combine: float) -> dict[str, Any]:
    row = {"path": path, "mode": mode, "tokens": tokens, "verified": "ok", "bytes per rank": 1e6}
    row |= {"dispatch device": dispatch, "combine device": combine, "dispatch idle": 2 * dispatch}
    row |= {"combine idle": 2 * combine, "dispatch host": None, "combine host": 5.0}
    row |= {"dispatch GB/s": 1e3 / dispatch, "combine GB/s": 1e3 / combine}
    return row


def test_the_results_writer(tmp_path: Path) -> None:
    rows = [
        _row(moe.OURS, "normal", 128, 50.0, 60.0),
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _row(moe.OURS, "normal", 4096, 400.0, 900.0),
        _row(moe.NCCL, "normal", 4096, 300.0, 4000.0),
        _row(moe.OURS, "low_latency graphed", 128, 30.0, 45.0),
    ]
    extras = {"title": "2 x test GPU", "allgather_gbps": 10.0, "notes": ["a note"], "fp8": "no fp8 option"}
    path = moe.write_results(tmp_path, "2xTEST", rows, extras, ["- date: now"], 0.0)
    text = path.read_text()
    assert "# MoE dispatch / combine (2 x test GPU)" in text and "- a note" in text
    assert "dispatch 30.0 µs (≤ 40), combine 45.0 µs (≤ 50): PASS" in text
    assert "16.7x, 16.7x, 6.7x, 6.7x: PASS" in text  # NCCL / ours, device and from idle
    assert "normal never slower than NCCL (1..16384 tokens): FAIL — slower: dispatch device at 4096" in text
    assert "vs 75% of the push all-gather's 10.0 GB/s = 7.5: FAIL" in text  # 2.5 and 1.1 GB/s
    assert "| ours | normal | 128 | 50.0 / 100.0 / — | 60.0 / 120.0 / 5.0 |" in text
    assert "| 10.00 / 10.00 / 5.00 / 5.00 | ok |" in text
    data = json.loads((tmp_path / "moe_2xTEST.json").read_text())
    assert len(data["rows"]) == 5 and data["extras"]["allgather_gbps"] == 10.0


def test_combine_option_rows_get_their_bars_and_tolerance() -> None:
    """``combine_bars``: ours and each combine option with rows, at 4096 tokens against 75% of the all-gather and in
    low-latency mode graphed (<= 50 µs, >= 5x NCCL's combine device and from idle); a path without rows gets none.
    The bf16 partials (the default's) are checked with the NCCL dispatcher's 2e-2, fp32 partials with 8e-3."""
    from triton_dist.ops.moe import MoeConfig

    rows = [
        _row(moe.OURS, "normal", 4096, 400.0, 900.0),
        _row(moe.COMBINE_FP32, "normal", 4096, 400.0, 100.0),  # 10 GB/s of the 1e6 bytes
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _row(moe.COMBINE_FP32, "low_latency graphed", 128, 30.0, 29.0),  # 300 / 29 = 10.3x, idle 600 / 58
        _row(moe.OURS, "low_latency graphed", 128, 30.0, 38.0) | {"combine idle": 150.0},  # 7.9x device, 4.0x idle
    ]
    lines = moe.combine_bars(rows, {"allgather_gbps": 12.0}, 128)
    assert lines == [
        f"{moe.OURS} combine normal T=4096: 900.0 µs device, 1.1 GB/s per rank vs 75% of the push all-gather's "
        "12.0 GB/s = 9.0: FAIL",
        f"{moe.OURS} combine low-latency T=128 graphed: 38.0 µs device (≤ 50), 7.9x, 4.0x the NCCL dispatcher's "
        "combine (device, idle; ≥ 5x): FAIL",
        f"{moe.COMBINE_FP32} combine normal T=4096: 100.0 µs device, 10.0 GB/s per rank vs 75% of the push "
        "all-gather's 12.0 GB/s = 9.0: PASS",
        f"{moe.COMBINE_FP32} combine low-latency T=128 graphed: 29.0 µs device (≤ 50), 10.3x, 10.3x the NCCL "
        "dispatcher's combine (device, idle; ≥ 5x): PASS",
    ]
    assert moe.combine_bars(rows[:1], {}, 128) == [], "no all-gather, no low-latency rows: no bars"
    assert [moe.combine_rtol(o) for o in (None, {}, {"config": MoeConfig(combine_spread=False)})] == [2e-2] * 3
    fp32 = [MoeConfig(combine_partials="fp32"), MoeConfig(combine_partials="fp32", combine_spread=False)]
    assert [moe.combine_rtol({"config": config}) for config in fp32] == [8e-3] * 2
    assert [moe.COMBINE_FP32, moe.COMBINE_FP32_NO_SPREAD] == ["ours combine-partials=fp32",
                                                              "ours combine-partials=fp32, no spread"]  # fmt: skip
    args = moe.parse_args(["--skip-combine-options"])
    assert args.skip_combine_options and not moe.parse_args([]).skip_combine_options


def test_the_identity_expert_check() -> None:
    x, idx, w = moe.make_inputs(6, 32, 8, 2, torch.Generator().manual_seed(3), none_rate=0.3)
    out = (x.float() * (w * (idx >= 0)).sum(1, keepdim=True)).to(x.dtype)
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == ""
    out[2, 5] = out[2, 5] * 1.5 + 1
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == "identity-expert combine: 1 of 192 elements off"


def _grouped_gemm(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``ops.grouped_gemm``'s normal layout in torch (fp32 accumulation, x's dtype out); rows outside every
    expert's range stay poisoned."""
    assert counts.dtype == offsets.dtype == torch.int32 and counts.shape == offsets.shape == (w.shape[0],)
    y = torch.full((x.shape[0], w.shape[2]), float("nan"), dtype=x.dtype)
    for e, (count, offset) in enumerate(zip(counts.tolist(), offsets.tolist(), strict=True)):
        y[offset : offset + count] = (x[offset : offset + count].float() @ w[e].float()).to(x.dtype)
    return y


def test_the_nccl_layer_path_matches_the_dense_reference() -> None:
    """The layer's NCCL baseline (A2ADispatcher, two grouped GEMMs, combine) on 2 thread ranks against the dense
    fp32 reference of every rank's experts, summed over the ranks, with some ids -1."""
    world, tokens, hidden, inter, experts, topk = 2, [6, 9], 16, 8, 8, 3
    local = experts // world
    inputs = [moe.make_inputs(t, hidden, experts, topk, torch.Generator().manual_seed(70 + r), none_rate=0.2)
              for r, t in enumerate(tokens)]  # fmt: skip
    gen = torch.Generator().manual_seed(7)
    gate_up = [(torch.randn(local, hidden, 2 * inter, generator=gen) / 4).bfloat16() for _ in range(world)]
    down = [(torch.randn(local, inter, hidden, generator=gen) / 3).bfloat16() for _ in range(world)]
    board = {"posted": [None] * world, "barrier": threading.Barrier(world, timeout=30)}
    outs: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            comm = ThreadComm(rank, world, board)
            disp = moe.A2ADispatcher(comm, experts, hidden, topk, max(tokens), torch.bfloat16, torch.device("cpu"))
            outs[rank] = moe.nccl_layer_forward(disp, gate_up[rank], down[rank], *inputs[rank], _grouped_gemm)
        except BaseException as error:  # surfaced below
            errors.append(error)
            board["barrier"].abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    every = [torch.cat([inp[i] for inp in inputs]) for i in range(3)]
    want = sum(moe.dense_moe_partial(*every, gate_up[r], down[r], r * local) for r in range(world))
    assert isinstance(want, torch.Tensor) and float(want.abs().max()) > 0.1
    for rank, mine in enumerate(want.split(tokens)):
        assert outs[rank].shape == (tokens[rank], hidden) and outs[rank].dtype == torch.bfloat16
        assert moe.layer_problem(outs[rank], mine, "nccl") == "", rank
    wrong = [down[1], down[0]]  # the other rank's experts: the check must see it
    assert moe.layer_problem(sum(moe.dense_moe_partial(*every, gate_up[r], wrong[r], r * local) for r in range(2)),
                             want, "swapped") != ""  # fmt: skip


def test_the_dense_reference_and_the_layer_check() -> None:
    x = torch.randn(3, 4)
    idx = torch.tensor([[0, 2], [1, -1], [2, 3]], dtype=torch.int32)
    w = torch.rand(3, 2)
    gate_up, down = torch.randn(2, 4, 6), torch.randn(2, 3, 4)  # this rank: experts 2 and 3
    got = moe.dense_moe_partial(x, idx, w, gate_up, down, 2)

    def expert(e: int, row: torch.Tensor) -> torch.Tensor:
        h = row @ gate_up[e]
        return (torch.nn.functional.silu(h[:3]) * h[3:]) @ down[e]

    want = torch.stack(
        [w[0, 1] * expert(0, x[0]), torch.zeros(4), w[2, 0] * expert(0, x[2]) + w[2, 1] * expert(1, x[2])]
    )
    torch.testing.assert_close(got, want)
    assert moe.layer_problem(got, want, "same") == ""
    off = got.clone()
    off[2, 1] += float(want.abs().max())
    assert moe.layer_problem(off, want, "off").startswith("off: 1 of 12 elements off (at (2, 1)")
    off[2, 1] = float("nan")
    assert moe.layer_problem(off, want, "nan").startswith("nan: 1 of 12")
    assert moe.layer_problem(got[:2], want, "short") == "short: shape [2, 4] != [3, 4]"


def _layer(path: str, tokens: int, device: float, idle: float, verified: str = "ok") -> dict[str, Any]:
    return {"path": path, "mode": "layer", "tokens": tokens, "forward device": device, "forward idle": idle,
            "forward host": None, "verified": verified}  # fmt: skip


def test_the_layer_bar_and_its_table(tmp_path: Path) -> None:
    rows = [
        _row(moe.OURS, "normal", 128, 50.0, 60.0),
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _layer(moe.LAYER_OURS, 128, 100.0, 200.0),
        _layer(moe.LAYER_GATHER, 128, 80.0, 160.0),
        _layer(moe.LAYER_NCCL, 128, 200.0, 300.0),
        _layer(moe.LAYER_OURS, 4096, 1000.0, 1100.0),
        _layer(moe.LAYER_GATHER, 4096, 900.0, 1000.0, "FAILED: vs layer: ours: 3 of 9 elements off"),
        _layer(moe.LAYER_NCCL, 4096, 1200.0, 1300.0),
        _layer(moe.LAYER_OURS, 16, 10.0, 20.0),
    ]
    assert moe.layer_bar(rows, 128) == (
        "layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS) at 128 tokens/rank "
        "(device 100.0 vs 200.0 µs; from idle 1.50x; gather layout 2.50x)"
    )
    assert moe.layer_bar(rows, 4096).startswith("layer: ours / NCCL dispatcher + same GEMM: 1.20x (>= 1.5: FAIL)")
    assert moe.layer_bar(rows, 4096).endswith("gather layout 1.33x; a row failed its check)")
    slow = [dict(r, verified="FAILED: vs the dense fp32 reference") if r["tokens"] == 128 else r for r in rows]
    assert "2.00x (>= 1.5: FAIL)" in moe.layer_bar(slow, 128)  # fast but wrong is no pass
    assert moe.layer_bar(rows, 16).endswith("at 16 tokens/rank: not measured")
    assert moe.layer_bound(rows, 128) is None  # no GEMMs-only row yet
    # the GEMMs-only rows (the bound: NCCL's µs / theirs) and a low-latency layer row
    rows += [
        dict(_layer(moe.LAYER_GEMMS, 128, 80.0, 90.0), **{"forward host": 12.0}),
        _layer(moe.LAYER_LL, 128, 50.0, 60.0),
        _layer(moe.LAYER_GEMMS, 4096, 900.0, 1000.0),
    ]
    assert moe.layer_bound(rows, 128) == 2.5 and moe.layer_bound(rows, 16) is None
    assert moe.layer_bar(rows, 128) == (
        "layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x: the grouped GEMMs take 80 of "
        "100 µs) at 128 tokens/rank (device 100.0 vs 200.0 µs; from idle 1.50x; gather layout 2.50x; low-latency "
        "graphed 4.00x)"
    )
    assert moe.layer_bar(rows, 4096).startswith(
        "layer: ours / NCCL dispatcher + same GEMM: 1.20x (>= 1.5: FAIL; bound 1.33x, below the bar: the grouped "
        "GEMMs take 900 of 1000 µs) at 4096 tokens/rank"
    )
    wrong_ll = [dict(r, verified="FAILED: replayed vs layer: ours") if r["path"] == moe.LAYER_LL else r for r in rows]
    assert moe.layer_bar(wrong_ll, 128).endswith("low-latency graphed 4.00x; layer: ours low-latency (graphed) "
                                                 "failed its check)")  # fmt: skip
    extras = {"title": "2 x test GPU", "notes": [], "layer_intermediate": 256, "ll_tokens": 64}
    text = moe.write_results(tmp_path, "2xTEST", rows, extras, [], 0.0).read_text()
    assert "- layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x" in text
    assert "intermediate size 256 per expert" in text
    assert "| layer: ours | 128 | 100.0 / 200.0 / — | 2.00 / 1.50 | ok |" in text
    assert "| layer: ours gather | 4096 | 900.0 / 1000.0 / — | 1.33 / 1.30 | FAILED: vs layer: ours" in text
    assert "| layer: NCCL dispatcher + same GEMM | 128 | 200.0 / 300.0 / — | — | ok |" in text
    assert "| ours | normal | 128 |" in text and "| layer: ours | layer |" not in text  # not in the main table
    assert "| layer: grouped GEMMs only | 128 | 80.0 / 90.0 / 12.0 | 2.50 / 3.33 | ok |" in text
    assert "| layer: ours low-latency (graphed) | 128 | 50.0 / 60.0 / — | 4.00 / 5.00 | ok |" in text
    assert "(max_tokens_per_rank 64)" in text
    assert "1.20x (>= 1.5: FAIL; bound 1.33x, below the bar: the grouped GEMMs take 900 of 1000 µs)" in text
    data = json.loads((tmp_path / "moe_2xTEST.json").read_text())
    assert sum(r["mode"] == "layer" for r in data["rows"]) == 10
    alone = [r for r in rows if r["mode"] == "layer"]  # --only-layer: no dispatch rows
    text = moe.write_results(tmp_path, "2xONLY", alone, extras, [], 0.0).read_text()
    assert "- layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x" in text
    assert "| layer: grouped GEMMs only | 4096 | 900.0 / 1000.0 / — | 1.33 / 1.30 | ok |" in text
    assert "| dispatch µs device" not in text  # no empty dispatch table


def test_the_expert_gemms_are_the_layers_expert_compute() -> None:
    """``expert_gemms`` (the GEMMs-only row's compute) on rows grouped by expert, one expert with none, against each
    row through its expert's weights in fp32."""
    gen = torch.Generator().manual_seed(11)
    hidden, inter, counts = 8, 4, [2, 0, 3]
    rows = torch.randn(sum(counts), hidden, generator=gen).bfloat16()
    gate_up = (torch.randn(len(counts), hidden, 2 * inter, generator=gen) / 3).bfloat16()
    down = (torch.randn(len(counts), inter, hidden, generator=gen) / 2).bfloat16()
    count = torch.tensor(counts, dtype=torch.int32)
    offsets = (torch.cumsum(count, 0) - count).to(torch.int32)
    got = moe.expert_gemms(rows, gate_up, down, count, offsets, _grouped_gemm)
    expert = torch.repeat_interleave(torch.arange(len(counts)), count)
    h = torch.einsum("rh,rhn->rn", rows.float(), gate_up[expert].float())
    want = torch.einsum("ri,rih->rh", torch.nn.functional.silu(h[:, :inter]) * h[:, inter:], down[expert].float())
    assert got.shape == want.shape and got.dtype == torch.bfloat16
    assert moe.layer_problem(got, want, "gemms") == ""
    swapped = moe.expert_gemms(rows, gate_up.flip(0), down, count, offsets, _grouped_gemm)  # the check must see it
    assert moe.layer_problem(swapped, want, "swapped") != ""
