"""triton_dist.language: multi-GPU primitives for plain ``@triton.jit`` kernels (import as ``dl``).

```python
import triton_dist.language as dl

@triton.jit
def kernel(x_ptr, flags_ptr, ...):
    peer = (dl.rank() + 1) % dl.num_ranks()
    tl.store(dl.symm_at(x_ptr + offs, peer), values)                 # write into the peer's copy of x
    dl.notify(flags_ptr + dl.rank(), peer, signal=1, comm_scope="intra_node")   # release
    token = dl.wait(flags_ptr, dl.num_ranks(), "sys", "acquire")    # acquire
    x_ptr = dl.consume_token(x_ptr, token)                           # loads through x_ptr stay after the wait
```

Each primitive is a Triton builtin that calls a function of the triton_dist device library (docs/abi.md);
importing this package installs the compiler hook that links the library into every kernel Triton compiles, and
makes a primitive's error inside a ``@triton.jit`` helper keep its message (``compiler/helper_errors.py``) and a
launch without a GPU driver say so (``compiler/driver_check.py``).
``dl.put_signal`` / ``dl.get`` / ``dl.signal_wait`` move data to and from other nodes through NVSHMEM (NVIDIA only;
docs/multi-node.md). Reference: docs/language.md. Nothing here needs torch or a GPU. ``dir(dl)`` lists the API and
nothing else.
"""

from __future__ import annotations

from triton_dist.compiler.driver_check import install_driver_check
from triton_dist.compiler.helper_errors import install_helper_error_messages
from triton_dist.compiler.stages_hook import install_stages_hook
from triton_dist.language.notify import notify
from triton_dist.language.one_sided import get, put_signal, signal_wait
from triton_dist.language.ranks import num_ranks, rank
from triton_dist.language.symmetric import symm_at
from triton_dist.language.token import wait_token, wait_token_type
from triton_dist.language.wait import consume_token, wait

install_stages_hook()
install_helper_error_messages()
install_driver_check()

__all__ = [
    "consume_token",
    "get",
    "notify",
    "num_ranks",
    "put_signal",
    "rank",
    "signal_wait",
    "symm_at",
    "wait",
    "wait_token",
    "wait_token_type",
]


def __dir__() -> list[str]:
    return list(__all__)
