"""The old home of the examples' torchrun glue, now ``triton_dist.testing``; kept so scripts that still say
``from common import ...`` run. New code imports ``triton_dist.testing`` directly."""

from triton_dist.testing import Checks, main_guard, max_over_ranks, sync, teardown
from triton_dist.testing import rank0_print as log0
from triton_dist.testing import rank_print as log
from triton_dist.testing import setup_distributed as setup

__all__ = ["Checks", "log", "log0", "main_guard", "max_over_ranks", "setup", "sync", "teardown"]
