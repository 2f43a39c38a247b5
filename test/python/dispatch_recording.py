"""A ``TorchDispatchMode`` that records the name of every ATen / c10d op dispatched inside it.

The fallback tests pin an op's per-call work to the hand-written baseline's with it:

```python
with DispatchRecording() as ours:
    op(a, b)
assert ours.ops == ["aten.mm.out", ...]
```
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class DispatchRecording(TorchDispatchMode):
    """Records ``str(func)`` of each dispatched op in ``ops``, in order, and runs it unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))
