#!/usr/bin/env python3
"""Time a data-parallel ResNet-50 step of ``accelsim run`` as the chips grow, the
whole command in CPU seconds and peak memory, paired with the same at 16 chips.

Each command runs in a fresh process, as a user runs it: ``accelsim run`` of
``configs/runs/default.yaml`` with ``workload: resnet50``, 32 samples a chip,
``assignment: data_parallel``, ``dram.sharing: per_processor`` (symmetry needs a DRAM
per processor), the default ring of 64 B/cycle links, the compiled engine and
``run.data_parallel.symmetry: auto`` (one replica standing for every chip), its
outputs written.  After one untimed warm-up, each count alternates with 16 chips run
by run, so both see the same load; the table gives the medians of the CPU seconds
(user + system of the child) and the peak RSS, and the step's cycles:

    python scripts/bench_symmetry.py                    # 16, 1,024, 4,096, 8,192 chips
    python scripts/bench_symmetry.py --chips 1024 --runs 5

``--full`` times instead the step simulated on one processor of each role
(``symmetry: auto``) against every processor (``full``), wall seconds, the two
settings alternating:

    python scripts/bench_symmetry.py --full --chips 16 64 256

``--replica`` times instead the step placed, costed and simulated once, one replica
standing for every chip (:func:`accelsim.driver.replica.simulate_replica_step`, the
inputs loaded and the replica lowered as ``accelsim run`` does, no outputs written),
in CPU seconds and peak memory, each measurement in a fresh process, alternating
with the same at 16 chips:

    python scripts/bench_symmetry.py --replica --chips 1024 4096 8192
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(chips: int, setting: str, out: str) -> list[str]:
    """The ``accelsim run`` of ``chips`` under ``symmetry: setting``, into ``out``."""
    return [
        *(sys.executable, "-m", "accelsim", "run", "configs/runs/default.yaml"),
        *("--out", out, "--force", "--set", "workload=workloads/resnet50.yaml"),
        *("--set", f"batch_size={32 * chips}", "--set", f"processors={chips}"),
        *("--set", "assignment=data_parallel", "--set", "dram.sharing=per_processor"),
        *("--set", "timing.engine=compiled", "--set", f"run.data_parallel.symmetry={setting}"),
    ]


def cycles_in(out: str) -> int:
    """The step's cycles in the one run directory under ``out``."""
    (summary,) = Path(out).glob("*/summary.json")
    return int(json.loads(summary.read_text())["total_cycles"])


def run(chips: int, setting: str, out: str) -> tuple[float, int]:
    """Wall seconds of one ``accelsim run`` and the step's cycles."""
    start = time.perf_counter()
    subprocess.run(command(chips, setting, out), cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start, cycles_in(out)


Measured = tuple[float, float, int]
"""A run's CPU seconds, peak MiB and step cycles."""


def whole(chips: int, out: str) -> Measured:
    """CPU seconds and peak MiB of one ``accelsim run`` (``symmetry: auto``), in a fresh
    process, and the step's cycles."""
    argv = command(chips, "auto", out)
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(
            f"{chips} chips failed: {child.stderr.read().decode() if child.stderr else ''}"
        )
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, cycles_in(out)


def replica_once(chips: int) -> None:
    """Print the CPU seconds, peak memory and step cycles of the step of ``chips``
    simulated once (this process's whole life but the interpreter's start)."""
    import resource

    import accelsim

    sets = [
        *("workload=workloads/resnet50.yaml", f"batch_size={32 * chips}"),
        *(f"processors={chips}", "assignment=data_parallel", "dram.sharing=per_processor"),
        "timing.engine=compiled",
    ]
    inputs = accelsim.load_inputs(ROOT / "configs/runs/default.yaml", accelsim.parse_sets(sets))
    step = accelsim.simulate_replica_step(inputs)
    assert isinstance(step, accelsim.ReplicaStep), step
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps([cpu, usage.ru_maxrss / 1024, step.trace.total_cycles]))


def replica(chips: int) -> Measured:
    """CPU seconds, peak MiB and cycles of :func:`replica_once` in a fresh process."""
    argv = [sys.executable, __file__, "--replica-once", str(chips)]
    done = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True)
    cpu, rss, cycles = json.loads(done.stdout)
    return float(cpu), float(rss), int(cycles)


def paired_table(chips: list[int], runs: int, measure: Callable[[int], Measured]) -> int:
    """Each count of ``chips`` alternating with 16 chips, ``runs`` times, each run
    ``measure``d (CPU seconds, peak MiB, step cycles): medians."""
    heads = ("chips", 6), ("step cycles", 14), ("CPU s", 7), ("MiB", 6), ("16 chips CPU s", 15)
    print(" ".join(f"{name:>{width}}" for name, width in (*heads, ("ratio", 6))))
    measure(16)  # the warm-up: Numba's and Python's caches filled
    for n in chips:
        cpu: dict[int, list[float]] = {n: [], 16: []}
        rss: list[float] = []
        cycles: set[int] = set()
        for _ in range(runs):
            for m in (n, 16):
                c, r, step = measure(m)
                cpu[m].append(c)
                if m == n:
                    rss.append(r)
                    cycles.add(step)
        mine, base = statistics.median(cpu[n]), statistics.median(cpu[16])
        print(
            f"{n:6d} {cycles.pop():14,d} {mine:7.2f} {statistics.median(rss):6.0f}"
            f" {base:15.2f} {mine / base:6.2f}"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chips", type=int, nargs="+", default=[16, 1024, 4096, 8192])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each setting")
    parser.add_argument("--replica", action="store_true", help="time the step placed once")
    parser.add_argument("--full", action="store_true", help="symmetry: auto against full")
    parser.add_argument("--replica-once", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replica_once:
        replica_once(args.replica_once)
        return 0
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    if args.replica:
        return paired_table(args.chips, args.runs, replica)
    if not args.full:
        with tempfile.TemporaryDirectory() as out:
            return paired_table(args.chips, args.runs, lambda chips: whole(chips, out))
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
