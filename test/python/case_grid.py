"""Folding a parametrized grid into one test: every combination runs in a loop, and a failure names its cases.

A grid of pure-Python checks (launch shapes, split counts) costs microseconds a case but about a millisecond a
pytest item; as items, three such grids were 61% of the suite's items. Here they are one test each:

```python
def _check(world_size: int, numel: int) -> None:
    assert ...

def test_launch_shapes():
    assert check_each(_check, grid(world_size=[1, 2, 8], numel=[1, 4097])) == 6
```

Every case runs even after a failure; the test then fails with an ``AssertionError`` listing each failing case as
``name=value, ...`` with its error (pytest's rewritten assertion text included, indented), chained to the first failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest

MAX_LISTED = 10
"""Failing cases listed in full; the message counts the rest."""


def grid(**axes: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Every combination of the axes' values, as keyword arguments, the last axis varying fastest."""
    names = list(axes)
    for values in itertools.product(*axes.values()):
        yield dict(zip(names, values, strict=True))


def case_name(case: Mapping[str, Any]) -> str:
    """``world_size=2, numel=4097``: how a failing case names itself."""
    return ", ".join(f"{name}={value!r}" for name, value in case.items())


def check_each(check: Callable[..., object], cases: Iterable[Mapping[str, Any]]) -> int:
    """Run ``check(**case)`` for every case; return how many ran, or raise naming every case that failed.

    A failure is any exception, or ``pytest.fail`` (which ``pytest.raises`` uses for "DID NOT RAISE"); a skip
    inside a case is not caught.
    """
    failures: list[tuple[Mapping[str, Any], BaseException]] = []
    count = 0
    for case in cases:
        count += 1
        try:
            check(**case)
        except (Exception, pytest.fail.Exception) as error:
            failures.append((case, error))
    if failures:
        lines = [
            f"{case_name(case)}: {type(error).__name__}: " + str(error).replace("\n", "\n    ")
            for case, error in failures[:MAX_LISTED]
        ]
        if len(failures) > MAX_LISTED:
            lines.append(f"... and {len(failures) - MAX_LISTED} more")
        listing = "\n".join(lines)
        raise AssertionError(f"{len(failures)} of {count} cases failed:\n{listing}") from failures[0][1]
    return count
