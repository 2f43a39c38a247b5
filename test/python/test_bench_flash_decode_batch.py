"""bench/flash_decode_batch.py's host-side helpers without GPUs: the config grid, the ``--configs`` text, the
fixed-cost / rate line."""

from __future__ import annotations

import importlib

import pytest
from bench_scripts import load_bench

from triton_dist.ops.flash_decode import FlashDecodeError

fd_config = importlib.import_module("triton_dist.ops.flash_decode.config")


@pytest.fixture(scope="module")
def bench():  # noqa: ANN201
    return load_bench("flash_decode_batch.py")


def test_the_default_grid_is_every_split_and_block_config_once(bench):
    grid = bench.parse_configs("")
    assert len(set(grid)) == len(grid) == len(bench.GRID_SPLITS) * len(bench.GRID_BLOCKS)
    default = fd_config.default_config("cuda")
    assert (default.block_n, default.num_warps, default.num_stages) == bench.GRID_BLOCKS[0]
    assert fd_config.MANY_GROUPS_CONFIG in {fd_config.FlashDecodeConfig(block_n=c.block_n, num_warps=c.num_warps,
        num_stages=c.num_stages) for c in grid}  # fmt: skip
    assert {c.splits for c in grid} == set(bench.GRID_SPLITS)


def test_configs_text(bench):
    got = bench.parse_configs("splits=2,block_n=64; block_n=128,num_warps=8 ;")
    assert got == [
        fd_config.FlashDecodeConfig(splits=2, block_n=64),
        fd_config.FlashDecodeConfig(block_n=128, num_warps=8),
    ]
    assert bench.label(got[0]) == "s2/b64/w4/n3" and bench.label(fd_config.FlashDecodeConfig()) == "sauto/b64/w4/n3"
    with pytest.raises(FlashDecodeError, match="name=value"):
        bench.parse_configs("splits:2")


def test_fit_recovers_a_line(bench):
    # 10 µs fixed, 4000 GB/s: bytes / (4000 GB/s) = bytes / 4e3 ns = bytes / 4e6 µs
    points = [(t, 10.0 + (t * 1000) / 4e6, t * 1000) for t in (1040, 2080, 4160)]
    fixed, gbps = bench.fit(points)
    assert fixed == pytest.approx(10.0) and gbps == pytest.approx(4000.0)


def test_write_results_tables(bench, tmp_path, monkeypatch):
    """The writer runs last on the GPU machine: a crash there loses the whole run's numbers."""
    monkeypatch.setattr(bench.rt, "current_world", lambda: type("World", (), {"world_size": 2, "rank": 0})())
    monkeypatch.setattr(bench.torch.cuda, "get_device_name", lambda *args: "GPU")
    kernel = {"per SM": 1, "rounds": 3.88, "producers": 512, "combiners": 1, "registers": 113, "shared": 139264}
    rows = [
        {"config": "default (s1/b128/w4/n3)", "us": 148.7, **kernel, "spills": 0, "ok": True},
        {"config": "s1/b64/w4/n4", "us": 135.0, **kernel, "per SM": 2, "spills": 0, "ok": False},
        {"config": "SDPA cuDNN grouped", "us": 131.6},
    ]
    for row in rows:
        row.update({"GB/s": 546e3 / row["us"], "% copy": 1.0, "% read": 1.0})
    hbm = {"copy_gbps": 4231.0, "read_gbps": 4400.0, "method": "a copy"}
    results = {
        "hbm": hbm,
        "cases": [{"batch": 64, "group": 4, "bytes": 546e6, "rows": rows}],
        "fits": [{"config": "default", "points": [(1040, 80.0, 1), (2080, 148.7, 2), (4160, 280.0, 4)],
            "fixed us": 16.0, "GB/s": 4580.0}],
    }  # fmt: skip
    bench.write_results(tmp_path, results, 0.0, 2080)
    text = (tmp_path / "flash_decode_batch.md").read_text()
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("| ") and "µs" not in line and "config" not in line]
    assert [line.split(" | ")[0] for line in table[:3]] == [
        "| SDPA cuDNN grouped",
        "| s1/b64/w4/n4",
        "| default (s1/b128/w4/n3)",
    ]
    assert "| WRONG |" in text and "| 16.0 | 4580 |" in text and "## batch 64, group 4 (546.0 MB)" in text
    assert (tmp_path / "flash_decode_batch.json").is_file()
