"""bench/decoder.py's prefill variants on the CPU: ``--prefill-variants`` times ours with each variant's layer
options set (and only while it runs), reports a speedup per variant, refuses unknown names, and puts the layers
back as they were (the timing and the rank-wide ``difference`` are stubbed: they need GPUs and a world)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import torch
from bench_scripts import load_bench

from triton_dist.layers import DecoderConfig, TensorParallelDecoderLayer, random_weights

TINY = DecoderConfig("tiny", 32, 4, 2, 16, 64, 10000.0, 1e-6)
OPTIONS = ("fused_silu_mul", "prefill_gqa", "prefill_fused_rope")


decoder = load_bench("decoder.py")


def _layers() -> list[TensorParallelDecoderLayer]:
    gen = torch.Generator().manual_seed(0)
    return [TensorParallelDecoderLayer(TINY, random_weights(TINY, generator=gen), rank=0, world_size=2) for _ in "ab"]


def _options(layers: list[TensorParallelDecoderLayer]) -> set[tuple[bool, ...]]:
    """(fused_silu_mul, prefill_gqa, prefill_fused_rope) of each layer."""
    return {
        (layer.mlp.fused_silu_mul, layer.attention.prefill_gqa, layer.attention.prefill_fused_rope) for layer in layers
    }


def test_each_prefill_variant_is_timed_with_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = _layers()
    default = _options(layers)
    assert default == {(True, True, True)}  # the defaults: fused SiLU * up, SDPA with enable_gqa, the fused RoPE
    assert default == {tuple(decoder.OURS_OPTIONS[name] for name in OPTIONS)}
    times = {(True, True, True): 4.0, (False, False, False): 5.0, (True, False, True): 3.0}  # ms, by options

    def ours() -> torch.Tensor:
        (options,) = _options(layers)  # every layer alike
        return torch.tensor([times[options]])

    def base(fn: object = None) -> torch.Tensor:
        return torch.tensor([8.0, 8.0])

    monkeypatch.setattr(decoder, "prefill_steps", lambda *_: (ours, base, slice(0, 1)))
    monkeypatch.setattr(decoder, "time_ms", lambda fn, warmup, reps: float(fn()[0]))
    monkeypatch.setattr(decoder, "difference", lambda got, want: float((got - want).abs().max()) / 100)
    args = argparse.Namespace(iters=20, layers=2, compile=False, prefill_variants=["unfused", "no-gqa"])
    row = decoder.prefill_case(TINY, layers, 64, None, args)
    assert _options(layers) == default
    assert (row["ours ms"], row["ours unfused ms"], row["ours no-gqa ms"], row["torch ms"]) == (2.0, 2.5, 1.5, 4.0)
    assert (row["speedup"], row["speedup unfused"], row["speedup no-gqa"]) == (2.0, 1.6, 4.0 / 1.5)
    assert (row["difference unfused"], row["difference no-gqa"], row["difference"]) == (0.03, 0.05, 0.05)


def test_layer_options_restore_the_layers_and_refuse_unknown_names() -> None:
    layers = _layers()
    with pytest.raises(RuntimeError, match="inside"), decoder.layer_options(layers, prefill_gqa=False):
        assert _options(layers) == {(True, False, True)}
        raise RuntimeError("inside")
    assert _options(layers) == {(True, True, True)}
    with pytest.raises(ValueError, match=r"layer_options: no layer module has the options \['fused_rope'\]"):
        with decoder.layer_options(layers, fused_rope=True):
            pass
    variants = {
        name: tuple(options[option] for option in OPTIONS) for name, options in decoder.PREFILL_VARIANTS.items()
    }
    # unfused: all three off; no-gqa and no-rope: one option off each, the other two the defaults
    assert variants == {"unfused": (False, False, False), "no-gqa": (True, False, True), "no-rope": (True, True, False)}
    for options in variants.values():
        with decoder.layer_options(layers, **dict(zip(OPTIONS, options, strict=True))):
            assert _options(layers) == {options}
        assert _options(layers) == {(True, True, True)}


def test_unknown_prefill_variants_are_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "argv", ["decoder.py", "--prefill-variants", "unfused,fastest"])
    with pytest.raises(SystemExit):
        decoder.main()
    known = "['unfused', 'no-gqa', 'no-rope']"
    assert f"unknown prefill variants ['fastest']; known: {known}" in capsys.readouterr().err


def test_the_prefill_table_has_a_column_per_variant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    row = {"phase": "prefill", "model": "tiny", "tokens": 64, "batch": 1, "context": 0, "ours ms": 2.0}
    row |= {"ours no-rope ms": 1.5, "torch ms": 4.0, "difference": 0.01, "difference no-rope": 0.01}
    decoder.finish_row(row, TINY)
    decode = {"phase": "decode", "model": "tiny", "tokens": 1, "batch": 1, "context": 4096, "ours ms": 1.0}
    decode |= {"ours head-KV ms": 1.0, "torch ms": 1.5, "difference": 0.0, "speedup head-KV": 1.5}
    decoder.finish_row(decode, TINY)
    monkeypatch.setattr(decoder.rt, "current_world", lambda: argparse.Namespace(world_size=2))
    monkeypatch.setattr(decoder.torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(decoder, "describe_machine", lambda started: [])
    monkeypatch.setattr(decoder, "bar_chart", lambda *args, **kwargs: None)
    args = argparse.Namespace(layers=2, models=["Llama-3-8B"], compile=False)
    decoder.write_results(tmp_path, [row, decode], args, 0.0)
    table = (tmp_path / "decoder_2xH100.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| model | tokens"))
    assert "| ours ms/layer | ours no-rope ms/layer | torch ms/layer |" in header and "| speedup no-rope |" in header
    assert "| unfused" not in header  # not timed in this run: no column
    assert "| tiny | 64 | 2.000 | 1.500 | 4.000 |" in table and "| 2.67x |" in table, table
    assert "speedup unfused" not in row
    assert "no-rope: {'fused_silu_mul': True, 'prefill_gqa': True, 'prefill_fused_rope': False}" in table
    assert "ours: fused_silu_mul=True, prefill_gqa=True, prefill_fused_rope=True (the layers' defaults)." in table


def test_the_kernel_rows_time_each_fused_kernel_against_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--kernels``' rows at TINY's per-rank shapes (the kernels stood in for by the torch ops, which this process
    cannot launch Triton for; timing and the rank-wide difference stubbed)."""
    from torch.nn import functional

    from triton_dist.layers.attention import rms_norm, rotate

    layers = _layers()
    shapes: dict[str, tuple[int, ...]] = {}

    def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
        shapes["silu_mul"] = tuple(gate_up.shape)
        gate, up = gate_up.chunk(2, dim=1)
        return functional.silu(gate) * up

    def rope_rows(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, seq: int, heads: tuple, norm: object):
        shapes["rope_rows"] = (*qkv.shape, seq, *heads)
        hq, hkv = heads
        qk = qkv[:, : (hq + hkv) * 16].unflatten(-1, (hq + hkv, 16))
        return rotate(rms_norm(qk, None, 1e-6) if norm else qk, cos, sin)

    monkeypatch.setattr(decoder, "silu_mul", silu_mul)
    monkeypatch.setattr(decoder, "rope_rows", rope_rows)
    monkeypatch.setattr(decoder.rt, "current_world", lambda: argparse.Namespace(world_size=2))
    monkeypatch.setattr(decoder, "time_ms", lambda fn, warmup, reps: (fn(), 0.002)[1])  # 2 µs each
    monkeypatch.setattr(decoder, "difference", lambda got, want: float((got.float() - want.float()).abs().max()))
    rows = decoder.kernel_rows(TINY, layers, 64, torch.Generator().manual_seed(1), 20)
    assert [row["kernel"] for row in rows] == ["silu_mul", "rope_rows"]
    assert shapes == {"silu_mul": (64, 64), "rope_rows": (64, 4 * 16, 64, 2, 1)}  # I/W 32; 2 q heads, 1 KV head
    assert [row["difference"] for row in rows] == [0.0, 0.0]
    assert rows[0]["ours GB/s"] == 3 * 64 * 32 * 2 / 2 / 1e3 and rows[1]["ours GB/s"] == 2 * 64 * 3 * 16 * 2 / 2 / 1e3
    assert all(row["speedup"] == 1.0 and row["ours us"] == 2.0 for row in rows)
    monkeypatch.setattr(decoder.torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    monkeypatch.setattr(decoder, "describe_machine", lambda started: [])
    monkeypatch.setattr(decoder, "bar_chart", lambda *args, **kwargs: None)
    args = argparse.Namespace(layers=2, models=["Llama-3-8B"], compile=False)
    decoder.write_results(tmp_path, rows, args, 0.0)
    table = (tmp_path / "decoder_2xH200.md").read_text()
    assert "## Prefill kernels" in table and "| tiny | 64 | rope_rows | 2.0 | 2.0 | 6 | 6 | 1.00x | 0.0000 |" in table


def _decode_options(layers: list[TensorParallelDecoderLayer]) -> set[tuple[object, ...]]:
    """(decode_cublas_o, decode_prefetch_bytes, decode_gather, decode_sdpa_backend, decode_rope_tiles) of each
    layer."""
    return {
        (layer.decode_cublas_o, layer.decode_prefetch_bytes, layer.attention.decode_gather,
         layer.attention.decode_sdpa_backend, layer.attention.decode_rope_tiles)
        for layer in layers
    }  # fmt: skip


def test_each_decode_variant_is_timed_with_its_options_and_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = _layers()
    default = _decode_options(layers)
    assert default == {(False, 0, "all_reduce", None, False)}
    seen: list[tuple[str, tuple[object, ...]]] = []

    def ours(layout: str, same_position: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        (options,) = _decode_options(layers)  # every layer alike
        seen.append((layout, options))
        if same_position:
            layout = "heads, same position"
        # a time in ms x 1000 per layout and options (the stack of 2 layers: per layer it halves)
        ms = (
            {"sequence": 4.0, "heads": 6.0, "heads, same position": 4.5}[layout]
            - options[0]
            - (options[1] > 0)
            - (options[2] == "all_gather")
        )
        ms -= 2.0 * (options[3] == "cudnn") + 0.5 * options[4]
        return torch.zeros(1), torch.tensor([ms])

    def base(fn: object = None) -> torch.Tensor:
        return torch.tensor([8.0])

    monkeypatch.setattr(decoder, "decode_steps", lambda *_: (ours, base))
    monkeypatch.setattr(decoder, "all_reduce", lambda x: x)
    timed = lambda out: out[-1] if isinstance(out, tuple) else out  # noqa: E731 (ours' residual, or base's)
    monkeypatch.setattr(decoder, "graphed_us", lambda fn, replays: 1000 * float(timed(fn())[0]))
    monkeypatch.setattr(decoder, "difference", lambda got, want: float((got - want).abs().max()) / 100)
    variants = ["cublas-o", "all-gather", "combined", "head-cudnn", "head-combined", "head-same-pos"]
    variants += ["head-same-pos-cublas-o-tiles"]
    args = argparse.Namespace(iters=20, layers=2, compile=False, decode_variants=variants)
    row = decoder.decode_case(TINY, layers, 64, 4096, None, args)
    assert _decode_options(layers) == default  # restored
    want_ms = {"cublas-o": 1.5, "all-gather": 1.5, "combined": 0.5, "head-cudnn": 2.0, "head-combined": 1.0}
    want_ms |= {"head-same-pos": 2.25, "head-same-pos-cublas-o-tiles": 1.5}
    assert {name: row[f"ours {name} ms"] for name in variants} == want_ms
    assert (row["ours ms"], row["ours head-KV ms"], row["torch ms"]) == (2.0, 3.0, 4.0)
    assert row["speedup combined"] == 8.0 and row["difference head-cudnn"] == 0.04 and row["difference"] == 0.07
    prefetch = decoder.DECODE_PREFETCH_BYTES
    assert ("sequence", (True, prefetch, "all_gather", None, False)) in seen  # combined
    assert ("heads", (True, prefetch, "all_reduce", "cudnn", False)) in seen  # head-combined
    assert ("heads", (False, 0, "all_reduce", "cudnn", False)) in seen  # head-cudnn
    assert ("heads", (True, 0, "all_reduce", None, True)) in seen  # head-same-pos-cublas-o-tiles


def test_decode_variants_parse_all_and_refuse_unknown_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys, "argv", ["decoder.py", "--decode-variants", "cublas-o,fastest"])
    with pytest.raises(SystemExit):
        decoder.main()
    assert "unknown decode variants ['fastest']; known: ['cublas-o', 'all-gather'" in capsys.readouterr().err
    anatomy = load_bench("decoder_anatomy.py")
    assert anatomy.parse_args(["--decode-variants", "all"]).decode_variants == list(decoder.DECODE_VARIANTS)
    with pytest.raises(SystemExit):
        anatomy.parse_args(["--decode-variants", "prefetch,nope"])
    assert "unknown decode variants ['nope']" in capsys.readouterr().err
    layers = _layers()
    for variant in decoder.DECODE_VARIANTS.values():  # every variant's options exist on the layers
        assert variant.layout in ("sequence", "heads") and (variant.layout == "heads" or not variant.same_position)
        with decoder.layer_options(layers, **variant.options):
            pass


def test_the_decode_table_has_a_column_per_variant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    decode = {"phase": "decode", "model": "tiny", "tokens": 64, "batch": 64, "context": 4096, "ours ms": 0.25}
    decode |= {"ours head-KV ms": 0.3, "ours cublas-o ms": 0.2, "torch ms": 0.3, "difference": 0.01}
    decoder.finish_row(decode, TINY)
    monkeypatch.setattr(decoder.rt, "current_world", lambda: argparse.Namespace(world_size=2))
    monkeypatch.setattr(decoder.torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    monkeypatch.setattr(decoder, "describe_machine", lambda started: [])
    monkeypatch.setattr(decoder, "bar_chart", lambda *args, **kwargs: None)
    decoder.write_results(tmp_path, [decode], argparse.Namespace(layers=2, models=["Llama-3-8B"], compile=False), 0.0)
    table = (tmp_path / "decoder_2xH200.md").read_text()
    assert "| ours head-KV ms/layer | ours cublas-o ms/layer | torch ms/layer |" in table
    assert "| tiny | 64 | 4096 | 0.250 | 0.300 | 0.200 | 0.300 |" in table and "| 1.20x | 1.00x | 1.50x |" in table
    assert "all-gather" not in table and "cublas-o: sequence-split KV, {'decode_cublas_o': True}" in table
