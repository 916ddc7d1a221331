#!/usr/bin/env python3
"""Events per second of the two event engines against the processor count.

A data-parallel MLP step (``configs/runs/mlp.yaml``, 4 samples a processor) simulated
on every processor (``run.data_parallel.symmetry: full``), with one DRAM shared by
all processors (the default) and with one per processor, timed by
:func:`accelsim.benchmark_engines` (both engines, warm, best of ``--runs``, their
traces compared); the table gives the events and each engine's events per second
(docs/performance.md, "Event engines and scaling").

With ``--loop``, one engine's loop alone on one case, as the paired figures of
docs/performance.md were taken: the step's flat arrays made once, then
``event_loop.run`` (``compiled``) or ``engine.simulate`` (``simpy``) run warm on
them until ``--events`` events, in process time; a line of events per CPU-second.

    python scripts/bench_loop_scaling.py                     # 1, 16, 64, 256 processors
    python scripts/bench_loop_scaling.py --processors 1 64 --runs 5
    python scripts/bench_loop_scaling.py --loop compiled --processors 256 --events 6e6
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path

from accelsim import benchmark_engines, load_inputs, parse_sets
from accelsim.driver.inputs import RunInputs
from accelsim.driver.run import simulate_training
from accelsim.graph.ops import OpGraph
from accelsim.timing import engine as simpy_engine
from accelsim.timing import event_loop
from accelsim.timing.costs import OpCosts
from accelsim.timing.engines import recorded_steps
from accelsim.timing.flat import FlatStep, fingerprint, flatten
from accelsim.timing.machine import Machine
from accelsim.timing.streams import Streams

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processors", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each step")
    parser.add_argument("--loop", choices=["compiled", "simpy"], help="one engine's loop alone")
    parser.add_argument("--sharing", default="shared", help="the DRAM sharing under --loop")
    parser.add_argument("--events", type=float, default=6e6, help="events timed under --loop")
    args = parser.parse_args()
    if args.loop:
        for p in args.processors:
            rate = loop_rate(inputs(p, args.sharing), args.loop, args.events)
            print(f"{args.loop} {p} processors, {args.sharing}: {rate / 1e6:.3f} M events/CPU-s")
        return 0
    print(f"{'DRAM':>14} {'processors':>10} {'events':>9} {'SimPy k/s':>9} {'compiled M/s':>12}")
    for sharing in ("shared", "per_processor"):
        for p in args.processors:
            t = benchmark_engines(inputs(p, sharing), args.runs)
            simpy, fast = t.events / t.simpy_seconds / 1e3, t.events / t.compiled_seconds / 1e6
            print(f"{sharing:>14} {p:10d} {t.events:9,} {simpy:9.0f} {fast:12.1f}")
    return 0


def inputs(processors: int, sharing: str) -> RunInputs:
    """The case on ``processors`` processors, its DRAM of ``sharing``."""
    sets = [
        f"processors={processors}", "assignment=data_parallel", f"batch_size={4 * processors}",
        "run.data_parallel.symmetry=full", f"dram.sharing={sharing}",
    ]  # fmt: skip
    return load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets(sets))


def loop_rate(case: RunInputs, engine: str, events: float) -> float:
    """Events per CPU-second of ``engine``'s loop alone on the distinct steps of ``case``."""
    with recorded_steps() as steps:
        simulate_training(case)
    runs: dict[bytes, Callable[[], int]] = {}
    for graph, costs, machine, streams in steps:
        flat = flatten(graph, costs, machine, streams)
        if engine == "compiled":
            runs[fingerprint(flat)] = functools.partial(_compiled_events, flat)
        else:
            runs[fingerprint(flat)] = functools.partial(
                _simpy_events, graph, costs, machine, streams
            )
    for run in runs.values():
        run()  # warm
    done, began = 0, time.process_time()
    while done < events:
        done += sum(run() for run in runs.values())
    return done / (time.process_time() - began)


def _compiled_events(flat: FlatStep) -> int:
    return int(event_loop.run(flat)[2])


def _simpy_events(graph: OpGraph, costs: OpCosts, machine: Machine, streams: Streams | None) -> int:
    return simpy_engine.simulate(graph, costs, machine, streams).events


if __name__ == "__main__":
    raise SystemExit(main())
