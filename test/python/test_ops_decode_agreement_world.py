"""all_reduce and gemm_ar remember (``AgreedSignatures``) which call signatures the ranks agreed on, per world: after
``finalize()`` and a new ``init()`` the same signature is agreed on again (the new world's ranks may call
differently), and within one world a repeated signature is not."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

from triton_dist.runtime.world.rank_agreement import AgreedSignatures

ar = importlib.import_module("triton_dist.ops.all_reduce")
gar = importlib.import_module("triton_dist.ops.gemm_ar")


def _world() -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cpu"), world_size=2, rank=0, group=None)


@pytest.mark.parametrize("op", ["all_reduce", "gemm_ar"])
def test_a_new_world_agrees_again_on_a_signature_seen_before(monkeypatch, op):
    module = ar if op == "all_reduce" else gar
    current = {"world": _world()}
    monkeypatch.setattr(module.rt, "current_world", lambda: current["world"])
    monkeypatch.setattr(module, "_agreed", AgreedSignatures())
    agreements = []
    monkeypatch.setattr(module, "check_ranks_call_alike", lambda *args, **kwargs: agreements.append(args))
    if op == "all_reduce":
        x = torch.zeros(4096, dtype=torch.bfloat16)
        config = ar.AllReduceConfig("one_shot", 4, 4)

        def call() -> None:
            ar._check_device_and_agreement(x, config)
    else:
        a, b = torch.zeros(8, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
        config = gar.default_config(8, 128, 64)

        def call() -> None:
            gar._check_device_and_agreement(a, b, config)

    call()
    call()
    assert len(agreements) == 1, "a repeated signature in one world is agreed once"
    current["world"] = _world()  # finalize() and init(): a new World object
    call()
    assert len(agreements) == 2, "the new world's ranks agree anew"
    call()
    assert len(agreements) == 2


def test_agreed_signatures_are_per_world():
    agreed = AgreedSignatures()
    first, second = object(), object()
    assert not agreed.known(first, ("x", 1))
    agreed.add(first, ("x", 1))
    assert agreed.known(first, ("x", 1)) and not agreed.known(first, ("x", 2))
    assert not agreed.known(second, ("x", 1)), "another world has agreed on nothing yet"
    assert not agreed.known(first, ("x", 1)), "and back in the first world the memo started over"


def test_gemm_rs_agrees_again_in_a_new_world(monkeypatch):
    grs = importlib.import_module("triton_dist.ops.gemm_rs")
    monkeypatch.setattr(grs, "_agreed", AgreedSignatures())
    agreements = []
    monkeypatch.setattr(grs, "_agree", lambda world, what: agreements.append(world))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)  # a CPU-only torch cannot ask
    a = torch.zeros(64, 32, dtype=torch.bfloat16)
    b = torch.zeros(32, 16, dtype=torch.bfloat16)
    config = grs.GemmRSConfig()
    old, new = _world(), _world()
    for world in (old, old, new, new):
        grs._check_same_on_all_ranks(world, a, b, config)
    assert agreements == [old, new]
