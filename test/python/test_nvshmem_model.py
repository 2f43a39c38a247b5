"""bench/multinode_model.py: the multi-node model's report and the properties its predictions must have."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "bench" / "multinode_model.py"


@pytest.fixture(scope="module")
def model():
    spec = importlib.util.spec_from_file_location("multinode_model", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["multinode_model"] = module
    spec.loader.exec_module(module)
    return module


def test_report_cites_every_parameter(model, tmp_path):
    out = tmp_path / "model.md"
    assert model.main(["--out", str(out), "--nodes", "2", "16"]) == 0
    text = out.read_text()
    assert "predicted, not measured" in text
    for field in model.Parameters.__dataclass_fields__:
        assert f"| {field} |" in text
        assert model.SOURCES[field]
    assert "| 16 | 128 | 128 MiB |" in text
    assert "118 us" in text  # DeepEP's published EP16 low-latency dispatch


def test_predictions_behave(model):
    p = model.Parameters()
    mib = 1 << 20
    for fn in (model.hierarchical_all_gather_us, model.nccl_all_gather_us, model.hierarchical_all_reduce_us):
        assert fn(p, 2, mib) < fn(p, 2, 16 * mib) < fn(p, 2, 128 * mib)
        assert fn(p, 2, 16 * mib) < fn(p, 16, 16 * mib)
    # Latency-bound sizes: one NIC hop beats a ring of 127 hops.
    assert model.hierarchical_all_reduce_us(p, 16, 64 * 1024) < model.nccl_all_reduce_us(p, 16, 64 * 1024) / 10
    # A slower NIC can only slow the inter-node stage down.
    slow = model.Parameters(nic_gbps=12.5)
    assert model.hierarchical_all_gather_us(slow, 4, mib) > model.hierarchical_all_gather_us(p, 4, mib)
    hierarchical, flat = model.moe_dispatch_us(p, 2, 4096, 7224, 8)
    assert 0 < hierarchical < flat


def test_pipelining_shares_a_link(model):
    p = model.Parameters(chunks=4)
    same = model.pipelined_us(p, [("nvlink", 0.0, 100.0), ("nvlink", 0.0, 100.0)])
    apart = model.pipelined_us(p, [("nvlink", 0.0, 100.0), ("nic", 0.0, 100.0)])
    assert same == pytest.approx(200.0)
    assert apart == pytest.approx(125.0)


def test_bad_parameters_are_refused(model, capsys):
    assert model.main(["--nic-gbps", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
    assert model.main(["--nodes", "0"]) == 2
