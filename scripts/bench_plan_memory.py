#!/usr/bin/env python3
"""The resident memory of one plan-search worker on GPT-3 175B: the fitting plans of
the search of ``scripts/bench_llm.py --search`` (1,024 A100-like chips, global batch
1,536, 2,048 tokens) of one tensor degree, simulated in this process one after the
other in the search's order, as a sweep worker runs them (its pipeline memo,
:mod:`accelsim.driver.pipeline_memo`, kept from plan to plan).  Prints, for each rank
graph, its plans, the resident set after its last plan and the peak so far, then the
CPU seconds; the target is a worker that does not grow with its plans (at most 2 GiB
on the plans of tensor 32).

    python scripts/bench_plan_memory.py                        # tensor 32, 86 plans
    python scripts/bench_plan_memory.py --tensor 32 --plans 200
    python scripts/bench_plan_memory.py --per-graph 3 --plans 40   # many graphs

The filter runs first, in this process (about a minute for tensor 32).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Hashable
from pathlib import Path

import accelsim

ROOT = Path(__file__).resolve().parent.parent
CHIPS, GLOBAL_BATCH, SEQ = 1024, 1536, 2048
RSS_TARGET_MIB = 2048


def resident_mib() -> float:
    """This process's resident set now (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensor", type=int, default=32, help="the plans' tensor degree")
    parser.add_argument("--plans", type=int, default=86, help="how many plans to simulate")
    parser.add_argument(
        "--per-graph", type=int, default=0, help="at most this many plans a rank graph (0: all)"
    )
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "plan"
    request = accelsim.PlanRequest(
        ROOT / "workloads/gpt3_175b.yaml",
        ROOT / "configs/hardware/a100_cluster.yaml",
        CHIPS,
        GLOBAL_BATCH,
        SEQ,
        store,
    )
    session = accelsim.PlanSearch.open(request)
    chosen = [c for c in session.candidates() if dict(c.parallel).get("tensor") == args.tensor]
    fitting = session.filtered(chosen, 1).fitting
    taken: Counter[Hashable] = Counter()
    kept = []
    for plan in fitting:
        graph = session.rank_graph(plan.candidate)
        taken[graph] += 1
        if not args.per_graph or taken[graph] <= args.per_graph:
            kept.append(plan)
    kept = kept[: args.plans]
    sweep = session.sweep(kept, len(kept))
    print(f"{len(fitting)} plans of tensor {args.tensor} fit; simulating {len(kept)}")
    print("| rank graph | plans | RSS after, MiB | peak so far, MiB |")
    print("|---|---|---|---|")
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    peak = 0.0
    groups: dict[Hashable, list[int]] = {}
    for i, plan in enumerate(kept):
        groups.setdefault(session.rank_graph(plan.candidate), []).append(i)
    with accelsim.Executor() as executor:
        for graph, members in groups.items():
            points = tuple(sweep.points[i] for i in members)
            report = accelsim.run_sweep(
                dataclasses.replace(sweep, points=points), store.parent, executor
            )
            if report.failed:
                raise SystemExit(f"{graph}: {report.failed} plans failed ({store}/store.sqlite)")
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            label = ",".join(map(str, graph)) if isinstance(graph, tuple) else str(graph)
            print(f"| {label} | {len(members)} | {resident_mib():,.0f} | {peak:,.0f} |")
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    wall = time.perf_counter() - started
    verdict = "meets" if peak <= RSS_TARGET_MIB else "MISSES"
    print(f"{cpu:,.1f} CPU-s, {wall:,.0f} s wall; peak {peak:,.0f} MiB {verdict} the target")


if __name__ == "__main__":
    main()
