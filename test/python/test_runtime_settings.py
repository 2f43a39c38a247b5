"""Heap size and timeout knobs."""

import pytest

from triton_dist.runtime.world.settings import (
    DEFAULT_HEAP_SIZE,
    HEAP_SIZE_ENV,
    TIMEOUT_ENV,
    parse_size,
    resolve_heap_size,
    resolve_timeout,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4096", 4096), ("512M", 512 << 20), ("2GiB", 2 << 30), ("64kb", 64 << 10), (" 1 G ", 1 << 30), ("3T", 3 << 40)],
)
def test_sizes_parse_with_binary_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "1.5G", "-4", "12 apples", "G"])
def test_unreadable_sizes_say_so(text):
    with pytest.raises(ValueError, match="cannot read"):
        parse_size(text)


def test_heap_size_comes_from_argument_then_environment_then_default(monkeypatch):
    monkeypatch.delenv(HEAP_SIZE_ENV, raising=False)
    assert resolve_heap_size(None) == DEFAULT_HEAP_SIZE
    monkeypatch.setenv(HEAP_SIZE_ENV, "256M")
    assert resolve_heap_size(None) == 256 << 20
    assert resolve_heap_size("1M") == 1 << 20
    assert resolve_heap_size(5000) == 8192, "rounded up to whole pages"
    with pytest.raises(ValueError, match="heap_size must be a positive"):
        resolve_heap_size(0)
    monkeypatch.setenv(HEAP_SIZE_ENV, "0")
    with pytest.raises(ValueError, match=HEAP_SIZE_ENV):
        resolve_heap_size(None)


def test_timeout_comes_from_argument_then_environment(monkeypatch):
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert resolve_timeout(None) == 300.0
    monkeypatch.setenv(TIMEOUT_ENV, "12.5")
    assert resolve_timeout(None) == 12.5
    assert resolve_timeout(3) == 3.0
    with pytest.raises(ValueError, match="positive"):
        resolve_timeout(-1)
