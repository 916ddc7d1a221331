#!/usr/bin/env python3
"""Time whole accelsim commands and print a table (median of several runs).

Each command runs in a fresh process, exactly as a user would run it, after one
untimed warm-up run that fills Numba's on-disk cache.  Peak RSS is the child's
maximum resident set size.

    python scripts/bench.py            # default set, 5 runs each
    python scripts/bench.py --runs 9
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commands(out: str) -> list[tuple[str, list[str]]]:
    accelsim = [sys.executable, "-m", "accelsim"]
    return [
        (
            "ResNet-18 step, batch 32, 128x128 default",
            [*accelsim, "run", "configs/runs/default.yaml", "--out", out, "--force"],
        ),
        (
            "MLP step, batch 128, 128x128 default",
            [*accelsim, "run", "configs/runs/mlp.yaml", "--out", out, "--force"],
        ),
        (
            "AlexNet conv1 fwd layer, 32x32 OS (scalesim)",
            [
                *accelsim,
                "layer",
                "--hardware",
                "configs/hardware/scalesim.yaml",
                "--conv",
                "227",
                "227",
                "11",
                "11",
                "3",
                "96",
                "4",
                "--convention",
                "scalesim",
                "--json",
            ],
        ),
    ]


def timed(argv: list[str]) -> tuple[float, int]:
    """Run ``argv``; return (wall seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"failed: {' '.join(argv)}\n{proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return elapsed, usage.ru_maxrss // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(f"{'command':48} {'median s':>9} {'min s':>7} {'max s':>7} {'peak RSS MiB':>13}")
    with tempfile.TemporaryDirectory() as out:
        for label, argv in commands(out):
            timed(argv)
            samples = [timed(argv) for _ in range(args.runs)]
            walls = [s[0] for s in samples]
            rss = max(s[1] for s in samples)
            print(
                f"{label:48} {statistics.median(walls):9.3f} {min(walls):7.3f} "
                f"{max(walls):7.3f} {rss:13d}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
