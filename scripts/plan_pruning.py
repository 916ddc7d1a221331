#!/usr/bin/env python3
"""How many of a plan search's fitting plans the proven bound prunes
(:mod:`accelsim.planner.pruned`), from the first rounds of the pruned search alone:
GPT-3 175B on 1,024 chips of the A100 cluster preset by default (global batch 1,536,
2,048 tokens), whose whole search takes half an hour.

It filters the candidates (``--jobs`` forked workers, as ``accelsim plan``), computes
every fitting plan's bound, then runs the pruned search's rounds, in its order, into a
fresh store until ``--plans`` plans are simulated, and prints: the bounds (least,
median, most, in seconds), the plans simulated and the best step among them, how many
plans those simulated plans prune (the rule of the search: a plan whose bound is above
the step of a simulated plan of no more memory), how many of the rest have less memory
than any simulated plan, and the CPU seconds of each part (the workers' included).

    python scripts/plan_pruning.py                     # GPT-3 on 1,024 chips
    python scripts/plan_pruning.py --plans 64 --jobs 2   # the probe round alone
    python scripts/plan_pruning.py --plans 0 --above 15.46 --bounds-out b.tsv  # bounds alone
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import accelsim

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds() -> float:
    """This process's and its finished children's user and system seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", type=Path, default=ROOT / "workloads" / "gpt3_175b.yaml")
    parser.add_argument(
        "--hardware", type=Path, default=ROOT / "configs" / "hardware" / "a100_cluster.yaml"
    )
    parser.add_argument("--chips", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1536)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--plans", type=int, default=40, help="simulate at least this many")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--above",
        type=float,
        action="append",
        default=[],
        help="count the plans whose bound is above this step, in seconds (repeatable)",
    )
    parser.add_argument(
        "--bounds-out", type=Path, help="write each fitting plan and its bound here (TSV)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        store = Path(out) / "search"
        request = accelsim.PlanRequest(
            args.workload, args.hardware, args.chips, args.global_batch, args.seq, store
        )
        started, cpu = time.perf_counter(), cpu_seconds()
        session = accelsim.PlanSearch.open(request)
        candidates = session.candidates()
        fitting = session.filtered(candidates, args.jobs).fitting
        filtered_at, filter_cpu = time.perf_counter(), cpu_seconds()
        bounds = session.bounds(fitting)
        bound_cpu = cpu_seconds() - filter_cpu
        seconds = 1e-6 / session.inputs.hardware.clock_mhz
        print(
            f"{len(candidates):,} plans, {len(fitting):,} fit: filter {filter_cpu - cpu:.0f}"
            f" CPU-s ({filtered_at - started:.0f} s wall), bounds {bound_cpu:.1f} CPU-s"
        )
        steps = sorted(b.cycles * seconds for b in bounds)
        print(
            f"bounds: least {steps[0]:.3f} s, median {statistics.median(steps):.3f} s,"
            f" most {steps[-1]:.3f} s"
        )
        for step in args.above:
            above = sum(b.cycles * seconds > step for b in bounds)
            print(f"  bounds above {step} s: {above:,} of {len(bounds):,}")
        if args.bounds_out is not None:
            rows = [
                f"{f.candidate.label}\t{b.cycles * seconds:.4f}"
                for f, b in zip(fitting, bounds, strict=True)
            ]
            args.bounds_out.write_text("plan\tbound_s\n" + "\n".join(rows) + "\n")
        if args.plans == 0:
            return
        plan = session.sweep(fitting)
        sim_cpu = cpu_seconds()
        with accelsim.PoolExecutor(args.jobs) as pool:
            session.simulate(plan, pool, fitting, bounds, most=args.plans)
        plans = session.evaluated(plan, fitting)
        best = min(plans, key=lambda e: e.step_seconds)
        by = {f.candidate: b for f, b in zip(fitting, bounds, strict=True)}
        least = min(e.memory_bytes for e in plans)
        smaller = sum(f.memory.total_bytes < least for f in fitting)
        simulated = {e.candidate for e in plans}
        cut = sum(
            f.candidate not in simulated
            and any(
                e.memory_bytes <= f.memory.total_bytes and e.step_cycles < b.cycles for e in plans
            )
            for f, b in zip(fitting, bounds, strict=True)
        )
        print(
            f"simulated {len(plans)} plans in {cpu_seconds() - sim_cpu:.0f} CPU-s; the fastest"
            f" {best.candidate.label}, {best.step_seconds:.3f} s (its bound"
            f" {by[best.candidate].cycles * seconds:.3f} s)"
        )
        print(
            f"pruned by them: {cut:,} of the {len(fitting) - len(plans):,} others;"
            f" {smaller:,} plans need less memory than any simulated one"
        )
        for factor in (1.0, 1.1, 1.25, 1.5):
            above = sum(b.cycles * seconds > factor * best.step_seconds for b in bounds)
            print(f"  bounds above {factor} x the fastest simulated: {above:,}")
        ratios = sorted(by[e.candidate].cycles / e.step_cycles for e in plans)
        print(
            f"bound / step of the simulated: least {ratios[0]:.3f}, median"
            f" {statistics.median(ratios):.3f}, most {ratios[-1]:.3f}"
        )


if __name__ == "__main__":
    main()
