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


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (True, TypeError, r"heap_size must be a number of bytes .* got True \(bool\)"),
        (1.5, ValueError, "heap_size must be a whole number of bytes, got 1.5"),
        (float("nan"), ValueError, "heap_size must be a whole number of bytes, got nan"),
        (2**63, ValueError, r"heap_size=9223372036854775808 is too large: .*int64"),
        ([4096], TypeError, r"heap_size must be a number of bytes .* got \[4096\] \(list\)"),
        ("1.5G", ValueError, r"^heap_size: cannot read '1.5G'"),
    ],
)
def test_bad_heap_sizes_name_the_argument(value, error, text):
    with pytest.raises(error, match=text):
        resolve_heap_size(value)


def test_heap_sizes_accept_integers_of_any_kind(monkeypatch):
    import numpy as np

    assert resolve_heap_size(np.int64(4096)) == 4096
    assert resolve_heap_size(8192.0) == 8192, "an integral float is a whole number of bytes"
    assert resolve_heap_size(2**62) == 2**62, "large but describable: the space is checked when the heap is made"
    monkeypatch.setenv(HEAP_SIZE_ENV, "lots")
    with pytest.raises(ValueError, match=rf"^\${HEAP_SIZE_ENV}: cannot read 'lots'"):
        resolve_heap_size(None)


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (float("nan"), ValueError, "timeout_s must be a finite, positive number of seconds, got nan"),
        (float("inf"), ValueError, "timeout_s must be a finite, positive number of seconds, got inf"),
        (0, ValueError, "got 0"),
        ("abc", TypeError, r"timeout_s must be a number of seconds, got 'abc' \(str\)"),
        (True, TypeError, r"got True \(bool\)"),
    ],
)
def test_bad_timeouts_name_the_argument(value, error, text):
    with pytest.raises(error, match=text):
        resolve_timeout(value)


@pytest.mark.parametrize(("env", "text"), [("nan", "finite"), ("inf", "finite"), ("-3", "positive"), ("abc", "number")])
def test_bad_timeout_variables_name_the_variable(monkeypatch, env, text):
    monkeypatch.setenv(TIMEOUT_ENV, env)
    with pytest.raises(ValueError, match=rf"^\${TIMEOUT_ENV} must be a .*{text}.*got '?{env}"):
        resolve_timeout(None)
