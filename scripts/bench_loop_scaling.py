#!/usr/bin/env python3
"""Events per second of the two event engines against the processor count.

A data-parallel MLP step (``configs/runs/mlp.yaml``, 4 samples a processor) simulated
on every processor (``run.data_parallel.symmetry: full``), with one DRAM shared by
all processors (the default) and with one per processor, timed by
:func:`accelsim.benchmark_engines` (both engines, warm, best of ``--runs``, their
traces compared); the table gives the events and each engine's events per second
(docs/performance.md, "Event engines and scaling").

    python scripts/bench_loop_scaling.py                     # 1, 16, 64, 256 processors
    python scripts/bench_loop_scaling.py --processors 1 64 --runs 5
"""

from __future__ import annotations

import argparse
from pathlib import Path

from accelsim import benchmark_engines, load_inputs, parse_sets

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processors", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each step")
    args = parser.parse_args()
    print(f"{'DRAM':>14} {'processors':>10} {'events':>9} {'SimPy k/s':>9} {'compiled M/s':>12}")
    for sharing in ("shared", "per_processor"):
        for p in args.processors:
            sets = [
                f"processors={p}", "assignment=data_parallel", f"batch_size={4 * p}",
                "run.data_parallel.symmetry=full", f"dram.sharing={sharing}",
            ]  # fmt: skip
            inputs = load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(sets))
            t = benchmark_engines(inputs, args.runs)
            simpy, fast = t.events / t.simpy_seconds / 1e3, t.events / t.compiled_seconds / 1e6
            print(f"{sharing:>14} {p:10d} {t.events:9,} {simpy:9.0f} {fast:12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
