#!/usr/bin/env python3
"""Time a data-parallel ResNet-50 step simulated on one processor of each role
(``run.data_parallel.symmetry: auto``) and on every processor (``full``), paired.

Each command runs in a fresh process, as a user runs it: ``accelsim run`` of
``configs/runs/default.yaml`` with ``workload: resnet50``, 32 samples a chip,
``assignment: data_parallel``, ``dram.sharing: per_processor`` (symmetry needs a DRAM
per processor), the default ring of 64 B/cycle links and the compiled engine.  After
one untimed warm-up of each, the two settings alternate run by run, so both see the
same load; the table gives the median wall time of each and the step's cycles (the
same both ways).

    python scripts/bench_symmetry.py                    # 16, 64, 256 chips, 3 runs
    python scripts/bench_symmetry.py --chips 16 1024 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(chips: int, setting: str, out: str) -> tuple[float, int]:
    """Wall seconds of one ``accelsim run`` and the step's cycles."""
    argv = [
        *(sys.executable, "-m", "accelsim", "run", "configs/runs/default.yaml"),
        *("--out", out, "--force", "--set", "workload=workloads/resnet50.yaml"),
        *("--set", f"batch_size={32 * chips}", "--set", f"processors={chips}"),
        *("--set", "assignment=data_parallel", "--set", "dram.sharing=per_processor"),
        *("--set", "timing.engine=compiled", "--set", f"run.data_parallel.symmetry={setting}"),
    ]
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - start
    (summary,) = Path(out).glob("*/summary.json")
    return wall, int(json.loads(summary.read_text())["total_cycles"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chips", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each setting")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(f"{'chips':>6} {'step cycles':>14} {'auto median s':>14} {'full median s':>14}")
    with tempfile.TemporaryDirectory() as out:
        for chips in args.chips:
            walls: dict[str, list[float]] = {"auto": [], "full": []}
            cycles = {run(chips, s, out)[1] for s in walls}  # the warm-ups
            for _ in range(args.runs):
                for setting, samples in walls.items():
                    wall, step = run(chips, setting, out)
                    samples.append(wall)
                    cycles.add(step)
            if len(cycles) != 1:
                print(f"{chips} chips: the settings disagree: {sorted(cycles)}")
                return 1
            print(
                f"{chips:6d} {cycles.pop():14,d} {statistics.median(walls['auto']):14.2f}"
                f" {statistics.median(walls['full']):14.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
