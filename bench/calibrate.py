"""Measure this GPU's calibration (the rates the overlapped ops' cost model predicts with) and store it.

    torchrun --nproc-per-node=2 bench/calibrate.py [--write-package-table] [--without-pull] [--out-dir DIR]

Always stores into the user's cache (what the ops read first); ``--write-package-table`` also into the committed
``python/triton_dist/ops/tuning/calibrations.json``. gemm_rs's "pull" producer is timed by default
(``ops.gemm_rs.op.CALIBRATE_PULL``); ``--without-pull`` skips it, and the cost model then never picks it
(``--with-pull``, from when it was off by default, times it even under ``TRITON_DIST_CALIBRATE_PULL=0``). Writes
``calibration_<gpu>.json`` into ``--out-dir`` too, with the date, machine and command, and prints every rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, describe_machine, log0  # noqa: E402

import triton_dist.ops  # noqa: E402, F401 (the ops register their fused kernels' calibration probes)
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops.tuning import calibration as cal  # noqa: E402
from triton_dist.ops.tuning import store  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-package-table", action="store_true")
    parser.add_argument("--without-pull", action="store_true", help='do not time gemm_rs\'s "pull" producer')
    parser.add_argument(
        "--with-pull",
        action="store_true",
        help="time it even under TRITON_DIST_CALIBRATE_PULL=0 (the default otherwise)",
    )
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args()
    if args.without_pull and args.with_pull:
        parser.error("--with-pull and --without-pull contradict each other")
    if args.without_pull or args.with_pull:
        from triton_dist.ops.gemm_rs import op as gemm_rs_op

        gemm_rs_op.CALIBRATE_PULL = args.with_pull
    started = time.time()
    setup_distributed("4G")
    world = rt.current_world()
    gpu = torch.cuda.get_device_name(world.device)
    measured = cal.measure(world, gpu)
    key = cal.calibration_key(gpu, world.world_size)
    log0(f"RESULT calibration {json.dumps(measured.as_dict())}")
    if world.rank == 0:
        store(cal.user_calibrations(), key, measured, {})
        if args.write_package_table:
            store(cal.PACKAGE_CALIBRATIONS, key, measured, {})
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        slug = gpu.replace("NVIDIA ", "").split()[0]
        record = {"calibration": measured.as_dict(), "header": describe_machine(started)}
        (out / f"calibration_{slug}.json").write_text(json.dumps(record, indent=1) + "\n")
    rt.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
