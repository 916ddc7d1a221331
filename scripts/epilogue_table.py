#!/usr/bin/env python3
"""The epilogue-fusion table of docs/model/memory.md: each ``lowering.fuse_epilogues``
setting, per model.

    python scripts/epilogue_table.py [--models resnet18,vgg16,...]

Set-up: ``configs/runs/default.yaml`` (default accelerator, batch 32, SGD with
momentum) with the workload replaced by each model, one training step (the
baseline step: no technique).  Prints one Markdown row per model and setting:
cycles, share of peak MACs, DRAM bytes, energy and DRAM's share of it, and the speedup
over ``none`` beside the largest the fused step's own bounds allow (the baseline's
cycles over the binding one of its busiest DRAM memory's bytes over bandwidth, its
busiest unit's compute cycles and its busiest link).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "default.yaml"
MODES = ("none", "elementwise", "all")


def main() -> int:
    from accelsim import load_inputs, parse_sets, simulate_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18")
    args = parser.parse_args()
    print(
        "| model | fuse_epilogues | cycles | utilization | DRAM | energy | DRAM share"
        " | vs none (bound: binding) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        base = 0
        for mode in MODES:
            sets = [f"run.workload=workloads/{model}.yaml", f"lowering.fuse_epilogues={mode}"]
            result = simulate_run(load_inputs(RUN, parse_sets(sets)))
            s = result.step_summary()
            base = base or s.total_cycles
            bounds = result.cycle_bounds()
            binding = max(bounds, key=bounds.__getitem__)
            if base / s.total_cycles > base / bounds[binding]:
                raise SystemExit(f"{model} {mode}: the speedup beats its {binding} bound")
            energy = s.energy_pj.total
            print(
                f"| {model} | `{mode}` | {s.total_cycles / 1e6:.2f} M | {s.utilization * 100:.1f} %"
                f" | {s.dram_bytes.total / 1e9:.3f} GB | {energy / 1e9:.1f} mJ"
                f" | {s.energy_pj.by_component['dram'] / energy * 100:.1f} %"
                f" | {base / s.total_cycles:.3f}x ({base / bounds[binding]:.3f}x: {binding}) |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
