#!/usr/bin/env python3
"""Sweep P = 1..9 processors for GPipe, PipeDream and LayerPipe on the fourteen models.

    python scripts/pipeline_sweep.py [--max-processors 9] [--models a,b] \
        [--dram shared|per_processor] [--out results/pipeline]

For every model, schedule and processor count it simulates the pipeline
(``configs/experiments/pipeline.yaml``) and records the steady-state speedup
over one processor running the baseline step, with the bound on it (the
period's binding lower bound: DRAM, interconnect or the busiest unit).
``--dram`` chooses whether the processors share one DRAM channel or each has
its own.  Writes ``sweep.csv`` and ``speedup.png`` (geometric-mean speedup
against P per schedule, and LayerPipe over PipeDream with the paper's +25 %
and +80 % marked) and prints the table the README quotes (with the paper-mode
task model's gain of a free task schedule over PipeDream, ``tasks``), then, per model and
overall, LayerPipe's gain over PipeDream: the geometric mean over P = 2..9, at
P = 7..9, and the best.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterable
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
    parser.add_argument("--dram", choices=("shared", "per_processor"), default="shared")
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
                sets = [
                    f"processors={processors}",
                    f"dram.sharing={args.dram}",
                    f"run.techniques={{{schedule}: {options}}}",
                ]
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
                        "speedup_bound": report["speedup_bound"],
                        "binding_bound": report["binding_bound"],
                        "task_gain": report["task_bounds"]["gain"],
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
        f"pipeline schedules, batch 32, default processor, DRAM {args.dram}",
    )
    print(f"\nDRAM {args.dram}: suite geometric-mean speedup over one processor,")
    print("LayerPipe over PipeDream (geometric mean over models), and the binding bounds")
    print(
        f"{'P':>3} "
        + " ".join(f"{s:>10}" for s in SCHEDULES)
        + f" {'LP/PD':>8} {'tasks':>8}  bounds"
    )
    for processors in range(1, args.max_processors + 1):
        mean = {s: _gmean(_speedups(rows, processors, s).values()) for s in SCHEDULES}
        ratio = _gmean(_ratios(rows, processors).values())
        ideal = _gmean(
            float(str(r["task_gain"]))
            for r in rows
            if r["processors"] == processors and r["schedule"] == "pipedream"
        )
        binding = sorted(str(r["binding_bound"]) for r in rows if r["processors"] == processors)
        counts = ", ".join(f"{b} {binding.count(b)}" for b in dict.fromkeys(binding))
        print(
            f"{processors:>3} "
            + " ".join(f"{mean[s]:>10.3f}" for s in SCHEDULES)
            + f" {ratio:>8.3f} {ideal:>8.3f}  {counts}"
        )
    _gains(rows, args.max_processors)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


def _gmean(values: Iterable[float]) -> float:
    found = list(values)
    return math.exp(sum(math.log(v) for v in found) / len(found))


def _speedups(rows: list[dict[str, object]], processors: int, schedule: str) -> dict[str, float]:
    return {
        str(r["model"]): float(str(r["speedup"]))
        for r in rows
        if r["processors"] == processors and r["schedule"] == schedule
    }


def _ratios(rows: list[dict[str, object]], processors: int) -> dict[str, float]:
    """Per model, LayerPipe's speedup over PipeDream's at ``processors``."""
    lp = _speedups(rows, processors, "layerpipe")
    pd = _speedups(rows, processors, "pipedream")
    return {m: lp[m] / pd[m] for m in lp}


def _gains(rows: list[dict[str, object]], max_processors: int) -> None:
    """LayerPipe over PipeDream per model and overall: mean over P = 2..9, at 7..9, best."""
    spans = {"P=2..9": range(2, max_processors + 1), "P=7..9": range(7, max_processors + 1)}
    by_p = {p: _ratios(rows, p) for p in range(2, max_processors + 1)}
    models = sorted(by_p[2]) if 2 in by_p else []
    print(f"\n{'LayerPipe / PipeDream':22} {'P=2..9':>8} {'P=7..9':>8} {'best':>14}")
    for model in [*models, "overall"]:
        cells = []
        for span in spans.values():
            values = [v for p in span for m, v in by_p[p].items() if model in ("overall", m)]
            cells.append(f"{(_gmean(values) - 1) * 100:>+7.1f}%" if values else f"{'-':>8}")
        best_p, best_m, best = max(
            ((p, m, v) for p, r in by_p.items() for m, v in r.items() if model in ("overall", m)),
            key=lambda t: t[2],
        )
        where = f"P={best_p}" if model != "overall" else f"{best_m} P={best_p}"
        print(f"{model:22} {' '.join(cells)} {(best - 1) * 100:>+6.1f}% {where}")


if __name__ == "__main__":
    sys.exit(main())
