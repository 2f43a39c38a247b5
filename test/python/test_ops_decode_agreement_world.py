"""all_reduce and gemm_ar remember which call signatures the ranks agreed on, per world: after ``finalize()`` and a
new ``init()`` the same signature is agreed on again (the new world's ranks may call differently), and within one
world a repeated signature is not."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

ar = importlib.import_module("triton_dist.ops.all_reduce")
gar = importlib.import_module("triton_dist.ops.gemm_ar")


def _world() -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cpu"), world_size=2, rank=0, group=None)


@pytest.mark.parametrize("op", ["all_reduce", "gemm_ar"])
def test_a_new_world_agrees_again_on_a_signature_seen_before(monkeypatch, op):
    module = ar if op == "all_reduce" else gar
    current = {"world": _world()}
    monkeypatch.setattr(module.rt, "current_world", lambda: current["world"])
    monkeypatch.setattr(module, "_agreed", set())
    monkeypatch.setattr(module, "_agreed_world", None)
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
