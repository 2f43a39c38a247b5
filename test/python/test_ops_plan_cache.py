"""ops.common.dispatch.PlanCache: plans per signature and world, agreement once per world and description, a
rank-local variant (alignment) planned without another collective, refusal during capture, errors on every rank."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from triton_dist.ops.common import dispatch
from triton_dist.ops.common.errors import OpInputError


class _Error(OpInputError):
    pass


@pytest.fixture
def world(monkeypatch):
    current = {"world": SimpleNamespace(world_size=2, rank=0, group=None)}
    monkeypatch.setattr(dispatch.rt, "current_world", lambda: current["world"])
    monkeypatch.setattr(dispatch.rt, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    gathered: list[dict] = []
    peer_view: dict = {}

    def gather(value, group):  # noqa: ANN001, ANN202
        gathered.append(value)
        return [value, {**value, **peer_view}]

    monkeypatch.setattr(dispatch, "gather_from_ranks", gather)
    return SimpleNamespace(current=current, gathered=gathered, peer_view=peer_view)


def test_plans_are_built_once_per_signature_and_world(world) -> None:
    cache: dispatch.PlanCache[str] = dispatch.PlanCache("op", _Error)
    built = []
    described = {"a": [4, 8], "dtype": "bf16"}
    for signature in ("aligned", "aligned", "unaligned", "aligned"):
        plan = cache.get(signature) or cache.build(signature, described, lambda s=signature: built.append(s) or s)
        assert plan == signature
    assert built == ["aligned", "unaligned"], "one build per signature"
    assert len(world.gathered) == 1, "the unaligned variant of an agreed call plans without another collective"
    world.current["world"] = SimpleNamespace(world_size=2, rank=0, group=None)  # finalize() and init()
    assert cache.get("aligned") is None, "a new world starts without plans"
    cache.build("aligned", described, lambda: "aligned")
    assert len(world.gathered) == 2, "and agrees anew"
    cache.agree(described, again=True)
    assert len(world.gathered) == 3, "again=True agrees even on a known description"


def test_disagreeing_ranks_raise_the_ops_error_naming_the_field(world) -> None:
    cache: dispatch.PlanCache[str] = dispatch.PlanCache("op", _Error)
    world.peer_view["a"] = [4, 16]
    with pytest.raises(
        _Error, match=r"op: ranks called with different inputs \(a: rank 0: \[4, 8\], rank 1: \[4, 16\]"
    ):
        cache.build("s", {"a": [4, 8], "dtype": "bf16"}, lambda: "plan")
    assert cache.get("s") is None, "nothing is kept after a failed agreement"


def test_building_during_capture_is_refused(world, monkeypatch) -> None:
    cache: dispatch.PlanCache[str] = dispatch.PlanCache("op", _Error)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match="run it once eagerly first"):
        cache.build("s", {"a": 1}, lambda: "plan")
