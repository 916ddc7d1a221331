"""Sweep throughput and short commands, for ``scripts/bench.py --sweep`` and ``--short``.

``sweep_speed``: points per second per core in this process and through the process
pool, planning 10,000 and 100,000 points, the CPU cost of a point in one process
(:func:`block_cost`), and the 1,000-, 10,000- and 100,000-point
ResNet-18 sweeps end to end as ``accelsim sweep --jobs <cores>`` in a fresh process
(CPU seconds of it and its workers, and wall seconds).

``short_commands``: ``accelsim check``, ``plot``, ``models`` and ``run --help`` against
the start-up floor (``scripts/startup_floor.py``), paired: each command and the floor
run in turn, and the median of the ratios of their CPU times is printed beside the
medians (the target: within 1.5x the floor).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import FLOOR, ROOT, timed, timed_cpu

# (label, base run file, grid of the timed sweep); each sweep is a fresh store.
SWEEP_CASES = (
    ("ResNet-18 points (batch 32)", "configs/runs/default.yaml",
     {"array.rows": [32, 64, 96, 128], "array.cols": [32, 64, 96, 128],
      "array.dataflow": ["os", "ws"]}),
    ("BERT-base points (batch 32)", "configs/runs/default.yaml",
     {"workload": ["../../workloads/bert_base.yaml"], "array.rows": [64, 128],
      "array.cols": [64, 128], "array.dataflow": ["os", "ws"]}),
)  # fmt: skip


def sweep_speed(runs: int) -> int:
    """Points per second per core (in-process and pool) and the 1,000-point sweep's wall time."""
    import yaml

    from accelsim import Executor, PoolExecutor, plan_sweep, run_sweep

    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {cores} cores, Python {platform.python_version()}; "
        f"load average {load:.1f} at the start; median of {runs} runs"
    )
    print(f"{'sweep':34} {'points':>6} {'executor':>16} {'s':>7} {'points/s/core':>14}")
    with tempfile.TemporaryDirectory(prefix="accelsim-bench-") as tmp:
        sweeps = ROOT / "configs" / "sweeps"
        for label, base, grid in SWEEP_CASES:
            path = sweeps / f".bench-{os.getpid()}.yaml"
            relative = os.path.relpath(ROOT / base, sweeps)
            path.write_text(yaml.safe_dump({"name": "bench", "base": relative, "grid": grid}))
            try:
                plan = plan_sweep(path)
            finally:
                path.unlink()
            run_sweep(plan, Path(tmp) / "warm", Executor())  # imports, Numba, parsed files
            for name, workers, make in (
                ("in-process", 1, Executor),
                (f"pool, {cores} jobs", cores, lambda: PoolExecutor(cores)),
            ):
                walls = []
                for i in range(runs):
                    with make() as executor:
                        start = time.perf_counter()
                        run_sweep(plan, Path(tmp) / f"{name}-{i}-{label[:4]}", executor)
                        walls.append(time.perf_counter() - start)
                wall = statistics.median(walls)
                rate = len(plan.points) / wall / workers
                print(f"{label:34} {len(plan.points):6d} {name:>16} {wall:7.2f} {rate:14.1f}")
        plan_speed(tmp)
        block_cost(tmp)
        one = [sys.executable, "-m", "accelsim", "run", "configs/runs/default.yaml", "--out",
               str(Path(tmp) / "one"), "--force"]  # fmt: skip
        for points in (1000, 10000):
            argv = [sys.executable, "-m", "accelsim", "sweep",
                    f"configs/sweeps/resnet18_{points}.yaml", "--jobs", str(cores)]  # fmt: skip
            walls, cpus, singles = [], [], []
            for i in range(runs):  # interleaved with the single run it is compared with
                wall, cpu = timed_cpu([*argv, "--out", str(Path(tmp) / f"big{points}-{i}")])
                walls.append(wall)
                cpus.append(cpu)
                singles.append(timed(one, {})[0])
            wall, single = statistics.median(walls), statistics.median(singles)
            print(
                f"{f'ResNet-18 {points:,}-point sweep, end to end':34} {points:6d} "
                f"{f'accelsim sweep -j{cores}':>16} {wall:7.2f} {points / wall / cores:14.1f}"
                f"   {wall / single:.0f}x one run ({single:.2f} s);"
                f" {statistics.median(cpus):.1f} CPU-s (target at 10,000: 20)"
            )
        sweep_100k(tmp, cores)
    return 0


def sweep_100k(tmp: str, cores: int) -> None:
    """One run of 100,000 ResNet-18 points planned and simulated end to end (target:
    under 3 minutes): the 10,000-point sweep over ten DRAM latencies."""
    import yaml

    grid = yaml.safe_load((ROOT / "configs" / "sweeps" / "resnet18_10000.yaml").read_text())
    grid["grid"]["dram.latency_cycles"] = list(range(50, 150, 10))
    path = ROOT / "configs" / "sweeps" / f".bench-100k-{os.getpid()}.yaml"
    path.write_text(yaml.safe_dump({**grid, "name": "resnet18_100000"}))
    try:
        argv = [sys.executable, "-m", "accelsim", "sweep", str(path), "--jobs", str(cores),
                "--max-points", "100000", "--out", str(Path(tmp) / "big100000")]  # fmt: skip
        wall, cpu = timed_cpu(argv)
    finally:
        path.unlink()
    print(
        f"{'ResNet-18 100,000 points, end to end':34} {100_000:6d} "
        f"{f'accelsim sweep -j{cores}':>16} {wall:7.2f} {100_000 / wall / cores:14.1f}"
        f"   one run; {cpu:.1f} CPU-s (target: under 180 s wall)"
    )


def block_cost(tmp: str) -> None:
    """CPU milliseconds a point of 1,000 of the 10,000 ResNet-18 points run one after
    another in this process (the in-process executor, their rows stored, no point
    files): each tenth block of ten consecutive points, so that every array shape is
    there and the ifmap buffer varies fastest; once, in this process's state (a
    second pass would find the first's steps memoised)."""
    import dataclasses

    from accelsim import Executor, plan_sweep, run_sweep

    plan = plan_sweep(ROOT / "configs" / "sweeps" / "resnet18_10000.yaml")
    block = tuple(p for i, p in enumerate(plan.points) if (i // 10) % 10 == 0)
    start = time.process_time()
    run_sweep(dataclasses.replace(plan, points=block), Path(tmp) / "block", Executor())
    cost = (time.process_time() - start) / len(block) * 1e3
    print(
        f"{'1,000 of the 10,000 points, one process':34} {len(block):6d} {'in-process':>16}"
        f" {cost:7.2f} CPU-ms a point (target: 2 all in)"
    )


def plan_speed(tmp: str) -> None:
    """Seconds to plan (expand, validate and name) 10,000 and 100,000 ResNet-18 points
    with ``jobs`` the core count (``plan_sweep`` forks planning processes from 20,000
    points: the 100,000 use them, the 10,000 this process alone), each in a fresh
    process's state for the files it reads."""
    cores = os.cpu_count() or 1
    import yaml

    from accelsim import plan_sweep

    grid = yaml.safe_load((ROOT / "configs" / "sweeps" / "resnet18_10000.yaml").read_text())
    for points, extra in (
        (10_000, {}),
        (100_000, {"dram.latency_cycles": list(range(50, 150, 10))}),
    ):
        path = ROOT / "configs" / "sweeps" / f".bench-plan-{os.getpid()}.yaml"
        path.write_text(yaml.safe_dump({**grid, "grid": {**grid["grid"], **extra}}))
        try:
            start = time.perf_counter()
            plan = plan_sweep(path, max_points=points, jobs=cores)
            wall = time.perf_counter() - start
        finally:
            path.unlink()
        print(
            f"{f'plan {points:,} ResNet-18 points':34} {len(plan.points):6d} "
            f"{f'jobs={cores}':>16} {wall:7.2f} {len(plan.points) / wall:14.0f} (points/s)"
        )


def short_commands(runs: int) -> int:
    """Each short command's CPU time against the start-up floor's, in pairs."""
    accelsim = [sys.executable, "-m", "accelsim"]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the start;"
        f" {runs} pairs (command, floor) after one warm-up each, medians"
    )
    print(f"{'command':58} {'CPU s':>7} {'floor s':>8} {'ratio':>7}")
    with tempfile.TemporaryDirectory(prefix="accelsim-bench-") as tmp:
        cores = str(os.cpu_count() or 1)
        timed_cpu([*accelsim, "sweep", "configs/sweeps/resnet18_1000.yaml", "--jobs", cores,
                   "--out", tmp])  # fmt: skip
        heatmap = ["--kind", "heatmap", "--where", "array.dataflow=os",
                   "--where", "dram.bandwidth_bytes_per_cycle=32"]  # fmt: skip
        cases = (
            ("accelsim check configs/hardware/default.yaml",
             [*accelsim, "check", "configs/hardware/default.yaml"]),
            ("accelsim check configs/runs/default.yaml (its files too)",
             [*accelsim, "check", "configs/runs/default.yaml"]),
            ("accelsim models", [*accelsim, "models"]),
            ("accelsim run --help", [*accelsim, "run", "--help"]),
            ("accelsim plot of a 1,000-point sweep, a heatmap",
             [*accelsim, "plot", str(Path(tmp) / "resnet18_1000"), *heatmap]),
            ("  importing what drawing needs (matplotlib, its Agg canvas)",
             [sys.executable, "-c", "import matplotlib.figure, matplotlib.backends.backend_agg"]),
        )  # fmt: skip
        for label, argv in cases:
            timed(argv, {})
            timed(FLOOR, {})
            pairs = [(timed_cpu(argv)[1], timed_cpu(FLOOR)[1]) for _ in range(runs)]
            cpu = statistics.median(a for a, _ in pairs)
            floor = statistics.median(b for _, b in pairs)
            ratio = statistics.median(a / b for a, b in pairs)
            print(f"{label:58} {cpu:7.3f} {floor:8.3f} {ratio:6.2f}x")
    return 0
