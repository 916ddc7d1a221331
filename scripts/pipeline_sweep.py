#!/usr/bin/env python3
"""Sweep P = 1..9 processors for GPipe, PipeDream and LayerPipe on the fourteen models.

    python scripts/pipeline_sweep.py [--max-processors 9] [--models a,b] \
        [--workloads A.yaml,...] [--run RUN.yaml] [--schedules a,b] \
        [--dram shared|per_processor] [--set KEY=VALUE ...] [--out results/pipeline]

Schedules: ``gpipe``, ``pipedream``, ``pipedream_replicated`` (PipeDream's
partitioner may replicate stages), ``layerpipe`` (free task placement) and
``layerpipe_stages`` (LayerPipe's options on PipeDream's partition); the
default is all but the last.  ``--workloads`` sweeps workload files outside the
suite (e.g. ``workloads/linear5.yaml`` with ``--run
configs/experiments/linear5.yaml``).

For every model, schedule and processor count it simulates the pipeline
(``configs/experiments/pipeline.yaml``) and records the steady-state speedup
over one processor running the baseline step, with the bound on it (the
period's binding lower bound: DRAM, interconnect or the busiest unit), whether
the period was clamped to that bound, LayerPipe's winning placement and
candidate and the speedup of its task-model optimum, and the fullest DRAM
channel's footprint.
``--dram`` chooses whether the processors share one DRAM channel or each has
its own.  Writes ``sweep.csv`` and ``speedup.png`` (geometric-mean speedup
against P per schedule, and LayerPipe over PipeDream with the paper's +25 %
and +80 % marked) and prints the table docs/techniques/pipelines.md quotes (with the paper-mode
task model's gain of a free task schedule over PipeDream, ``tasks``), then, when both
ran, per model and overall, LayerPipe's gain over PipeDream: the geometric mean over
P = 2..9, at P = 7..9, and the best.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "experiments" / "pipeline.yaml"
SUITE = ROOT / "configs" / "suites" / "default.yaml"
SCHEDULES = {  # name: (technique, its options)
    "gpipe": ("gpipe", []),
    "pipedream": ("pipedream", []),
    "pipedream_replicated": ("pipedream", ["replicate: true"]),
    "layerpipe": ("layerpipe", []),
    "layerpipe_stages": ("layerpipe", ["placement: stages"]),
}
DEFAULT = "gpipe,pipedream,pipedream_replicated,layerpipe"


def main() -> int:
    from accelsim import (
        SuiteEntry,
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
    parser.add_argument("--workloads", default=None, help="comma-separated workload files")
    parser.add_argument("--run", type=Path, default=RUN, help="the run file of every point")
    parser.add_argument("--schedules", default=DEFAULT, help=f"of {', '.join(SCHEDULES)}")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override, as in run"
    )
    parser.add_argument("--dram", choices=("shared", "per_processor"), default="shared")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "pipeline")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",") if args.models else None
    schedules = args.schedules.split(",")
    unknown = sorted(set(schedules) - set(SCHEDULES))
    if unknown:
        parser.error(f"unknown schedules {unknown}; known: {', '.join(SCHEDULES)}")
    if args.workloads:
        entries = [SuiteEntry(Path(w).stem, Path(w)) for w in args.workloads.split(",")]
    else:
        entries = suite_entries(SUITE, models)
    started = time.perf_counter()
    rows = []
    bar = tqdm(
        total=len(entries) * args.max_processors * len(schedules),
        desc="pipeline sweep",
        unit="run",
        file=sys.stderr,
    )
    for entry in entries:
        for processors in range(1, args.max_processors + 1):
            for schedule in schedules:
                bar.set_postfix_str(f"{entry.name}, P={processors}, {schedule}")
                technique, options = SCHEDULES[schedule]
                if processors == 1:  # GPipe's micro-batches would change the step
                    options = ["micro_batches: 1", *options]
                sets = [
                    *args.set,
                    f"processors={processors}",
                    f"dram.sharing={args.dram}",
                    f"run.techniques={{{technique}: {{{', '.join(options)}}}}}",
                ]
                training = simulate_training(
                    suite_inputs(args.run, entry, parse_sets(sets))
                ).training
                assert training is not None
                report = training.sections[technique].details
                rows.append(
                    {
                        "model": entry.name,
                        "processors": processors,
                        "schedule": schedule,
                        "stages": report["stages"],
                        "steady_cycles": report["steady_cycles_per_minibatch"],
                        "single_processor_cycles": report["single_processor_cycles"],
                        "speedup": training.speedup,
                        "speedup_bound": training.speedup_bound,
                        "binding_bound": training.binding_bound,
                        "task_gain": report["task_bounds"]["gain"],
                        "interconnect_bytes": report["interconnect_bytes_per_minibatch"],
                        "placement": report.get("placement", ""),
                        "candidate": report.get("candidate", ""),
                        "task_optimum_speedup": report.get("task_optimum", {}).get("speedup", ""),
                        "clamped": report["clamped"],
                        "footprint_bytes": max(
                            c["footprint_bytes"] for c in report["memory"]["channels"]
                        ),
                    }
                )
                bar.update(1)
            tqdm.write(
                f"{entry.name:14} P={processors}: "
                + ", ".join(
                    f"{r['schedule']} {r['speedup']:.2f}x"
                    + (
                        f" (task model {r['task_optimum_speedup']:.2f}x)"
                        if r["task_optimum_speedup"]
                        else ""
                    )
                    for r in rows[-len(schedules) :]
                ),
                file=sys.stdout,
            )
    bar.close()
    columns = list(rows[0])
    write_csv(args.out / "sweep.csv", columns, rows)
    plot_pipeline_sweep(
        args.out / "sweep.csv",
        args.out / "speedup.png",
        f"pipeline schedules against one processor, DRAM {args.dram.replace('_', ' ')}",
    )
    _table(rows, schedules, args.max_processors, args.dram)
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


def _table(
    rows: list[dict[str, object]], schedules: list[str], max_processors: int, dram: str
) -> None:
    """Print the table docs/techniques/pipelines.md quotes, then LayerPipe's gains over
    PipeDream when both ran."""
    print(f"\nDRAM {dram}: geometric-mean speedup over one processor (with the")
    print("PipeDream and LayerPipe bounds), LayerPipe over PipeDream and over replicated")
    print("PipeDream (geometric mean over models), the task model, and the binding bounds")
    print(
        f"{'P':>3} "
        + " ".join(f"{s[:10]:>10}" for s in schedules)
        + f" {'PD bound':>9} {'LP bound':>9} {'LP/PD':>8} {'LP/PDr':>8} {'tasks':>8}  bounds"
    )
    for processors in range(1, max_processors + 1):
        mean = {s: _gmean(_speedups(rows, processors, s).values()) for s in schedules}
        limits = {
            s: _gmean(
                float(str(r["speedup_bound"]))
                for r in rows
                if r["processors"] == processors and r["schedule"] == s
            )
            if s in schedules
            else math.nan
            for s in ("pipedream", "layerpipe")
        }
        ratio = _gmean(_ratios(rows, processors).values())
        replicated = _gmean(_ratios(rows, processors, "pipedream_replicated").values())
        ideal = _gmean(
            float(str(r["task_gain"]))
            for r in rows
            if r["processors"] == processors and r["schedule"] == "pipedream"
        )
        binding = sorted(
            f"{r['schedule'][:2]}:{r['binding_bound']}"
            for r in rows
            if r["processors"] == processors and r["schedule"] in ("pipedream", "layerpipe")
        )
        counts = ", ".join(f"{b} {binding.count(b)}" for b in dict.fromkeys(binding))
        print(
            f"{processors:>3} "
            + " ".join(f"{mean[s]:>10.3f}" for s in schedules)
            + f" {limits['pipedream']:>9.3f} {limits['layerpipe']:>9.3f}"
            + f" {ratio:>8.3f} {replicated:>8.3f} {ideal:>8.3f}  {counts}"
        )
    if {"pipedream", "layerpipe"} <= set(schedules):
        _gains(rows, max_processors)


def _gmean(values: Iterable[float]) -> float:
    found = list(values)
    if not found:
        return math.nan
    return math.exp(sum(math.log(v) for v in found) / len(found))


def _speedups(rows: list[dict[str, object]], processors: int, schedule: str) -> dict[str, float]:
    return {
        str(r["model"]): float(str(r["speedup"]))
        for r in rows
        if r["processors"] == processors and r["schedule"] == schedule
    }


def _ratios(
    rows: list[dict[str, object]], processors: int, against: str = "pipedream"
) -> dict[str, float]:
    """Per model, LayerPipe's speedup over ``against``'s at ``processors``."""
    lp = _speedups(rows, processors, "layerpipe")
    other = _speedups(rows, processors, against)
    return {m: lp[m] / other[m] for m in lp if m in other}


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
