"""The decode ops' plans (``ops.common.dispatch.PlanCache``) per world and per signature, without GPUs: the first
call of a signature agrees with the ranks (once), a repeated one does not, and after ``finalize()`` and a new
``init()`` the same signature is agreed on again (the new world's ranks may call differently). Also what the ops
say when the world cannot run them (``init(device="cpu")``, or no ``init()``).

``fake_world`` is the helper the other decode-op tests use: one rank of a two-rank world on the CPU, the ranks'
agreement recorded instead of gathered, the first launch replaced by a recording plan.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from test_runtime_world import run_ranks

import triton_dist.ops
from triton_dist import runtime as rt
from triton_dist.ops.all_reduce import AllReduceError
from triton_dist.ops.common import dispatch
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.flash_decode import FlashDecodeError
from triton_dist.ops.gemm_ar import GemmArError

ar_op = importlib.import_module("triton_dist.ops.all_reduce.op")
gar_op = importlib.import_module("triton_dist.ops.gemm_ar.op")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")


@dataclass
class FakeWorld:
    """What ``fake_world`` records: the ``described`` of each agreement, the arguments of each launch."""

    world: Any
    agreements: list[dict] = field(default_factory=list)
    launches: list[tuple] = field(default_factory=list)

    def new_world(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``finalize()`` then ``init()``: another World object."""
        self.world = SimpleNamespace(**vars(self.world))
        monkeypatch.setattr(rt, "current_world", lambda: self.world)


def fake_world(monkeypatch: pytest.MonkeyPatch, op: ModuleType, world_size: int = 2) -> FakeWorld:
    """Make ``op`` (an op's ``op`` module) run its first-call steps on the CPU as rank 0 of ``world_size``: the
    world stands in for a GPU world, the agreement is recorded (every rank said the same), the first launch makes
    a plan that records its launches."""
    fake = FakeWorld(SimpleNamespace(device=torch.device("cpu"), world_size=world_size, rank=0, group=None))
    monkeypatch.setattr(rt, "is_initialized", lambda: True)
    monkeypatch.setattr(rt, "current_world", lambda: fake.world)
    monkeypatch.setattr(op, "gpu_world", lambda name, error: fake.world)
    monkeypatch.setattr(op, "peer_world", lambda name, error: fake.world)  # its first-call check, past the topology
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "device", lambda device: _Nothing())

    def gather(described: dict, group: Any) -> list[dict]:
        fake.agreements.append(described)
        return [described] * world_size

    monkeypatch.setattr(dispatch, "gather_from_ranks", gather)
    plan = SimpleNamespace(launch=lambda *args: fake.launches.append(args))
    monkeypatch.setattr(op, "_plan", lambda *args: plan)
    dispatch.clear_all()
    monkeypatch.setattr(op._plans, "_world", None)
    return fake


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


@pytest.mark.parametrize("op", ["all_reduce", "gemm_ar"])
def test_a_new_world_agrees_again_on_a_signature_seen_before(monkeypatch, op):
    module = ar_op if op == "all_reduce" else gar_op
    fake = fake_world(monkeypatch, module)
    if op == "all_reduce":
        x, out = torch.zeros(4096, dtype=torch.bfloat16), torch.empty(4096, dtype=torch.bfloat16)

        def call() -> None:
            ar_op._run(x, out, "sum", ar_op.AllReduceConfig("one_shot", 4, 4))
    else:
        a, b = torch.zeros(8, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
        out = torch.empty(8, 128, dtype=torch.bfloat16)

        def call() -> None:
            gar_op._run(a, b, out, gar_op.default_config(8, 128, 64))

    call()
    call()
    assert len(fake.agreements) == 1, "a repeated signature in one world is agreed once"
    fake.new_world(monkeypatch)
    call()
    assert len(fake.agreements) == 2, "the new world's ranks agree anew"
    call()
    assert len(fake.agreements) == 2
    # The repeated calls relaunched their plan (all_reduce's first call makes its plan by launching, which the fake
    # plan stands in for; any other plan launches after it is made).
    assert len(fake.launches) == (2 if op == "all_reduce" else 4)


def test_the_agreement_names_the_call_and_its_config(monkeypatch):
    fake = fake_world(monkeypatch, ar_op)
    x = torch.zeros(1000, dtype=torch.float16)
    triton_dist.ops.all_reduce(x)
    (described,) = fake.agreements
    assert described["numel"] == 1000 and described["dtype"] == "torch.float16"
    assert described["config"] == {"algo": "one_shot_push", "programs": 1, "num_warps": 4}  # the heuristic's


def test_ranks_that_disagree_raise_the_ops_error_on_every_rank(monkeypatch):
    fake_world(monkeypatch, gar_op)
    monkeypatch.setattr(
        dispatch, "gather_from_ranks", lambda described, group: [described, {**described, "M": described["M"] + 1}]
    )
    a, b = torch.zeros(8, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
    with pytest.raises(GemmArError, match="ranks called with different inputs.*M: rank 0: 8, rank 1: 9"):
        triton_dist.ops.gemm_ar(a, b)


def _cpu_world_calls() -> dict[str, Any]:
    x = torch.zeros(16, dtype=torch.bfloat16)
    a, b = torch.zeros(2, 32, dtype=torch.bfloat16), torch.zeros(32, 16, dtype=torch.bfloat16)
    q = torch.zeros(1, 8, 128, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 64, 128, dtype=torch.bfloat16)
    lengths = torch.full((1,), 64, dtype=torch.int32)
    return {
        "all_reduce": (AllReduceError, lambda: triton_dist.ops.all_reduce(x)),
        "all_reduce (custom op)": (AllReduceError, lambda: torch.ops.triton_dist.all_reduce(x)),
        "all_reduce, bad dtype": (AllReduceError, lambda: triton_dist.ops.all_reduce(x.int())),
        "gemm_ar": (GemmArError, lambda: triton_dist.ops.gemm_ar(a, b)),
        "gemm_ar, bad dtype": (GemmArError, lambda: triton_dist.ops.gemm_ar(a.float(), b.float())),
        "flash_decode": (FlashDecodeError, lambda: triton_dist.ops.flash_decode(q, k, k, lengths)),
        "flash_decode, bad dtype": (FlashDecodeError, lambda: triton_dist.ops.flash_decode(q.float(), k, k, lengths)),
    }


def _ops_on_a_cpu_world(rank: int, world_size: int) -> None:
    del rank, world_size
    rt.init(heap_size="64M", device="cpu")
    try:
        for name, (error, call) in _cpu_world_calls().items():
            with pytest.raises(error, match="initialized with device='cpu'; the ops run on GPUs") as raised:
                call()
            assert isinstance(raised.value, OpInputError), name
    finally:
        rt.finalize()


def test_an_op_after_init_on_the_cpu_names_the_problem():
    """``init(device="cpu")`` gives a CPU heap (emulation, tests); an op then says the ops need GPUs, whatever else
    is wrong with its input (not "Torch not compiled with CUDA enabled" or a dtype)."""
    run_ranks(_ops_on_a_cpu_world, 1)


def test_an_op_before_init_says_to_call_init():
    for name, (_, call) in _cpu_world_calls().items():
        if "bad dtype" not in name:
            with pytest.raises(RuntimeError, match="triton_dist.init"):
                call()
