"""triton_dist.testing: what tests, examples and benchmarks of multi-GPU kernels share.

```python
from triton_dist import testing

world = testing.setup_distributed(heap_size="1G")     # under torchrun: GPU per rank, NCCL, triton_dist.init()
out = testing.poison_(torch.empty_like(ref))          # NaN / sentinel: unwritten elements cannot pass
my_kernel[grid](x, out, ...)
testing.assert_close(out, ref)                        # per-dtype tolerances, names the worst element
ms = testing.bench(lambda: my_kernel[grid](x, out))   # median of >= 20 runs, max over ranks
testing.write_markdown("bench/results/mine.md", "My kernel", ["size", "ms"], rows)
compiled = testing.compile_for(my_kernel, {"x_ptr": "*fp32", "n": "i32"}, target="gfx942")   # no GPU needed
testing.teardown()
```

- ``distributed``: torchrun glue (``setup_distributed``, ``shared_gpus`` for more ranks than GPUs, ``teardown``,
  ``rank_print``/``rank0_print``, ``Checks`` for pass/fail tallies (``check``, ``run``, ``run_each``,
  ``expect_error``), ``finish``, ``main_guard``, ``env_without_launcher`` for child processes, ``sync``,
  ``max_over_ranks``, ``all_ranks_true``).
- ``timing``: ``bench`` (CUDA events, warm-up, median of >= 20 runs, ranks started together, max over ranks,
  optionally CUDA-graph replays) and ``bench_samples``; what the benchmarks report per call: ``time_ms`` (median
  ms, max over ranks), ``eager_us`` (µs of one call from an idle GPU, launch included), ``graphed_us`` (µs per
  call under CUDA-graph replay: device time only), ``host_us`` (host µs to enqueue a call while the GPU is busy)
  and ``idle_ms_samples`` (ms per call from an idle GPU, every sample; ``idle_ms_interleaved`` for several
  functions compared, in turns).
- ``correctness``: ``poison_``, ``tolerances``, ``assert_close`` against a torch reference,
  ``allclose_across_ranks``, ``eager_replay_calls`` (an op's eager calls over two address sets, replayed from its
  graphs), ``mixed_replay_calls`` (one rank busy per call, its peers idle: replays beside eager calls).
- ``reporting``: markdown tables and PNG charts (matplotlib, imported on first use) for bench/results/.
- ``compile``: ``compile_for`` a kernel for sm_90 / gfx942 on a machine without GPUs.

Importing this package imports torch but touches no GPU.
"""

from __future__ import annotations

from triton_dist.testing.compile import assembly, compile_for
from triton_dist.testing.correctness import (
    EAGER_GRAPH_KEYS,
    allclose_across_ranks,
    assert_close,
    eager_replay_calls,
    mixed_replay_calls,
    poison_,
    tolerances,
)
from triton_dist.testing.distributed import (
    Checks,
    all_ranks_true,
    env_without_launcher,
    finish,
    main_guard,
    max_over_ranks,
    rank0_print,
    rank_print,
    setup_distributed,
    shared_gpus,
    sync,
    teardown,
)
from triton_dist.testing.reporting import markdown_table, write_chart, write_markdown
from triton_dist.testing.timing import (
    MIN_TIMED_RUNS,
    bench,
    bench_samples,
    eager_us,
    graphed_us,
    host_us,
    idle_ms_interleaved,
    idle_ms_samples,
    time_ms,
)

__all__ = [
    "EAGER_GRAPH_KEYS",
    "MIN_TIMED_RUNS",
    "Checks",
    "all_ranks_true",
    "allclose_across_ranks",
    "assembly",
    "assert_close",
    "bench",
    "bench_samples",
    "compile_for",
    "eager_replay_calls",
    "mixed_replay_calls",
    "eager_us",
    "env_without_launcher",
    "finish",
    "graphed_us",
    "host_us",
    "idle_ms_interleaved",
    "idle_ms_samples",
    "main_guard",
    "markdown_table",
    "max_over_ranks",
    "poison_",
    "rank0_print",
    "rank_print",
    "setup_distributed",
    "shared_gpus",
    "sync",
    "teardown",
    "time_ms",
    "tolerances",
    "write_chart",
    "write_markdown",
]
