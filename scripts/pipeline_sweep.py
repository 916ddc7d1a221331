#!/usr/bin/env python3
"""Sweep P = 1..9 processors for GPipe, PipeDream and LayerPipe on the fourteen models.

    python scripts/pipeline_sweep.py [--max-processors 9] [--models a,b] [--out results/pipeline]

For every model, schedule and processor count it simulates the pipeline
(``configs/experiments/pipeline.yaml``) and records the steady-state speedup
over one processor running the baseline step.  Writes ``sweep.csv`` and
``speedup.png`` (suite-mean speedup against P per schedule, and LayerPipe over
PipeDream) and prints the table the README quotes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "experiments" / "pipeline.yaml"
SUITE = ROOT / "configs" / "suites" / "default.yaml"
SCHEDULES = ("gpipe", "pipedream", "layerpipe")


def main() -> int:
    from accelsim import (
        parse_sets,
        plot_pipeline_sweep,
        simulate_training,
        suite_entries,
        suite_inputs,
        write_csv,
    )

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-processors", type=int, default=9)
    parser.add_argument("--models", default=None, help="comma-separated subset of the suite")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "pipeline")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",") if args.models else None
    started = time.perf_counter()
    rows = []
    for entry in suite_entries(SUITE, models):
        for processors in range(1, args.max_processors + 1):
            for schedule in SCHEDULES:
                options = "{micro_batches: 1}" if processors == 1 else "{}"
                sets = [f"processors={processors}", f"run.techniques={{{schedule}: {options}}}"]
                report = simulate_training(suite_inputs(RUN, entry, parse_sets(sets))).training
                assert report is not None
                rows.append(
                    {
                        "model": entry.name,
                        "processors": processors,
                        "schedule": schedule,
                        "stages": report["stages"],
                        "steady_cycles": report["steady_cycles_per_minibatch"],
                        "single_processor_cycles": report["single_processor_cycles"],
                        "speedup": report["speedup"],
                        "interconnect_bytes": report["interconnect_bytes_per_minibatch"],
                    }
                )
            print(
                f"{entry.name:14} P={processors}: "
                + ", ".join(f"{r['schedule']} {r['speedup']:.2f}x" for r in rows[-3:]),
                flush=True,
            )
    columns = list(rows[0])
    write_csv(args.out / "sweep.csv", columns, rows)
    plot_pipeline_sweep(
        args.out / "sweep.csv",
        args.out / "speedup.png",
        "pipeline schedules, batch 32, default processor",
    )
    print("\nsuite mean speedup over one processor, and LayerPipe over PipeDream")
    print(f"{'P':>3} " + " ".join(f"{s:>10}" for s in SCHEDULES) + f" {'LP/PD':>8}")
    for processors in range(1, args.max_processors + 1):
        mean = {s: _mean(rows, processors, s) for s in SCHEDULES}
        ratio = _mean_ratio(rows, processors)
        print(
            f"{processors:>3} "
            + " ".join(f"{mean[s]:>10.3f}" for s in SCHEDULES)
            + f" {ratio:>8.3f}"
        )
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


def _mean(rows: list[dict[str, object]], processors: int, schedule: str) -> float:
    found = [
        float(str(r["speedup"]))
        for r in rows
        if r["processors"] == processors and r["schedule"] == schedule
    ]
    return sum(found) / len(found)


def _mean_ratio(rows: list[dict[str, object]], processors: int) -> float:
    """Mean over models of LayerPipe's speedup over PipeDream's at ``processors``."""
    by = {
        (r["model"], r["schedule"]): float(str(r["speedup"]))
        for r in rows
        if r["processors"] == processors
    }
    models = {m for m, _ in by}
    return sum(by[(m, "layerpipe")] / by[(m, "pipedream")] for m in models) / len(models)


if __name__ == "__main__":
    sys.exit(main())
