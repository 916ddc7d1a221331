#!/usr/bin/env python3
"""The mapper table of docs/guides/hardware.md: each model's step with ``mapping.search``
none and per_layer, on the default accelerator offering every dataflow.

    python scripts/mapper_table.py [--models mlp,resnet18,...] [--objective time]

Set-up: ``configs/runs/default.yaml`` (default accelerator, batch 32, SGD with
momentum) with the workload replaced by each model of the fourteen-model suite
(``configs/suites/default.yaml``), ``array.dataflows: [ws, os, is]`` in both runs
(``array.dataflow`` stays ws: without a search every GEMM runs weight stationary);
one baseline step each.  Prints one Markdown row per model: the step's cycles without
and with the search, the speedup beside the largest the searched step's own bounds
allow (the unsearched cycles over the binding one of its busiest DRAM memory's bytes
over bandwidth, its busiest unit's compute cycles and its busiest link), the GEMMs the
search moved (of those it mapped; how many to the vector unit) and the step's energy
both ways; then the wall time the table took.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "default.yaml"
SUITE = ROOT / "configs" / "suites" / "default.yaml"
OFFERED = "array.dataflows=[ws, os, is]"


def suite_models() -> list[str]:
    """The fourteen models' names, in the suite file's order."""
    from accelsim import read_yaml

    return [str(m["name"]) for m in read_yaml(SUITE)["models"]]


def main() -> int:
    from accelsim import load_inputs, parse_sets, simulate_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(suite_models()))
    parser.add_argument("--objective", default="time", choices=("time", "energy", "edp"))
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        "| model | cycles, search none | cycles, per_layer | speedup (bound: binding)"
        " | GEMMs moved (to vector unit) | energy none → per_layer |"
    )
    print("|---|---|---|---|---|---|")
    for model in args.models.split(","):
        sets = [f"run.workload=workloads/{model}.yaml", OFFERED]
        plain = simulate_run(load_inputs(RUN, parse_sets(sets))).step_summary()
        search = [*sets, "mapping.search=per_layer", f"mapping.objective={args.objective}"]
        result = simulate_run(load_inputs(RUN, parse_sets(search)))
        s = result.step_summary()
        assert s.mapping is not None
        bounds = result.cycle_bounds()
        binding = max(bounds, key=bounds.__getitem__)
        speedup, bound = plain.total_cycles / s.total_cycles, plain.total_cycles / bounds[binding]
        if speedup > bound:
            raise SystemExit(f"{model}: the speedup beats its {binding} bound")
        print(
            f"| {model} | {plain.total_cycles / 1e6:.2f} M | {s.total_cycles / 1e6:.2f} M"
            f" | {speedup:.3f}x ({bound:.3f}x: {binding})"
            f" | {s.mapping.moved} of {s.mapping.gemms} ({s.mapping.vector_unit})"
            f" | {plain.energy_pj.total / 1e9:.1f} → {s.energy_pj.total / 1e9:.1f} mJ |"
        )
    print(f"\n{time.perf_counter() - started:.0f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
