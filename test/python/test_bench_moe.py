"""bench/moe.py's pure-Python parts on the CPU: the arguments, the all-to-all dispatcher the benchmark holds ours
against (its permutation, grouping and weighted combine, every rank a thread exchanging through shared memory)
checked against ``ops/moe/reference.py``, the check itself, and the results writer."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_moe", REPO / "bench" / "moe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


moe = _load()


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
    for bad in (["--reps", "5"], ["--tokens", "0"], ["--tokens", "a"], ["--topk", "300"]):
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


def test_the_identity_expert_check() -> None:
    x, idx, w = moe.make_inputs(6, 32, 8, 2, torch.Generator().manual_seed(3), none_rate=0.3)
    out = (x.float() * (w * (idx >= 0)).sum(1, keepdim=True)).to(x.dtype)
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == ""
    out[2, 5] = out[2, 5] * 1.5 + 1
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == "identity-expert combine: 1 of 192 elements off"
