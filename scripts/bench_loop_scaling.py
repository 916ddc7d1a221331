#!/usr/bin/env python3
"""Events per second of the compiled event loop against the processor count.

A data-parallel MLP step (``configs/runs/mlp.yaml``, 4 samples a processor) simulated
on every processor (``run.data_parallel.symmetry: full``), with one DRAM shared by
all processors (the default) and with one per processor: each step is flattened
once and its loop run ``--runs`` times in this process, warm; the table gives the
events and the best events per second, and the heap's mean size (events pending),
which grows with the processors (docs/performance.md, "Event engines and scaling").

    python scripts/bench_loop_scaling.py                     # 1, 16, 64, 256 processors
    python scripts/bench_loop_scaling.py --processors 1 64 --runs 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from accelsim import load_inputs, parse_sets
from accelsim.driver.run import simulate_training
from accelsim.timing import event_loop
from accelsim.timing.engines import recorded_steps
from accelsim.timing.flat import FlatStep, fingerprint, flatten

ROOT = Path(__file__).resolve().parent.parent


def steps(processors: int, sharing: str) -> list[FlatStep]:
    """The distinct flat steps of the data-parallel MLP run on ``processors``."""
    sets = [
        f"processors={processors}", "assignment=data_parallel",
        f"batch_size={4 * processors}", "run.data_parallel.symmetry=full",
        f"dram.sharing={sharing}", "timing.engine=simpy",
    ]  # fmt: skip
    with recorded_steps() as recorded:
        simulate_training(load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(sets)))
    flats = (flatten(*step) for step in recorded)
    return list({fingerprint(flat): flat for flat in flats}.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processors", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each step")
    args = parser.parse_args()
    print(f"{'DRAM':>14} {'processors':>10} {'events':>9} {'M events/s':>10}")
    for sharing in ("shared", "per_processor"):
        for p in args.processors:
            events, seconds = 0, 0.0
            for flat in steps(p, sharing):
                event_loop.run(flat)  # loads (or compiles) the loop
                best = float("inf")
                for _ in range(args.runs):
                    began = time.perf_counter()
                    _, _, n, _ = event_loop.run(flat)
                    best = min(best, time.perf_counter() - began)
                events, seconds = events + n, seconds + best
            print(f"{sharing:>14} {p:10d} {events:9,} {events / seconds / 1e6:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
