#!/usr/bin/env python3
"""How a training step's cycles depend on the engine's tile groups, model by model.

For every model of a suite (default: the fourteen, on ``configs/runs/suite.yaml``),
prints the step cycles and engine events

* by the per-op rule (``timing.group_cycles: null``) at several ``chunks_per_op``;
* by the uniform rule (``timing.group_cycles``) at several lengths, with
  ``chunks_per_op: 4096``;

and each one's distance from the model's *converged* step: where only the
granularity changes the answer, with DRAM latency 0 (with latency, groups near it
expose it once per group that waits) and no cap on groups per op, the least step
over groups of 1,024, 512 and 256 cycles (finer, the rounding of every transfer to
whole cycles adds up); plus the latency's own cost, ``T(latency) - T(0)`` at
8,192-cycle groups, where few groups wait for a fetch.  docs/model/engine.md.

    python scripts/granularity.py                   # the suite, about two minutes
    python scripts/granularity.py --models mlp,alexnet --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import accelsim  # noqa: E402

PER_OP = (8, 32, 128, 512, 4096)
UNIFORM = (16384, 8192, 4096, 2048, 1024, 512)
FINE = (1024, 512, 256)
UNCAPPED = 1 << 30


def step(
    inputs: accelsim.RunInputs, group_cycles: int | None, chunks: int, latency: int | None = None
):
    """(cycles, events) of the baseline step with these engine settings; ``chunks``
    may exceed the validated maximum (the reference's uncapped groups)."""
    timing = inputs.run.timing.model_copy(
        update={"group_cycles": group_cycles, "chunks_per_op": chunks}
    )
    run = inputs.run.model_copy(update={"timing": timing})
    hw = inputs.hardware
    if latency is not None:
        hw = hw.model_copy(update={"dram": hw.dram.model_copy(update={"latency_cycles": latency})})
    run_file = dataclasses.replace(inputs.run_file, run=run)
    result = accelsim.simulate_run(dataclasses.replace(inputs, run_file=run_file, hardware=hw))
    return result.trace.total_cycles, result.trace.events


def measure_converged(inputs: accelsim.RunInputs) -> int:
    """The converged step of ``inputs`` (the module docstring says how)."""
    fine = min(step(inputs, g, UNCAPPED, latency=0)[0] for g in FINE)
    latency = step(inputs, 8192, UNCAPPED)[0] - step(inputs, 8192, UNCAPPED, latency=0)[0]
    return fine + latency


def measure(inputs: accelsim.RunInputs) -> dict[str, object]:
    """Every setting's (cycles, events) and the converged step of one model."""
    rows: dict[str, tuple[int, int]] = {}
    for chunks in PER_OP:
        rows[f"per_op {chunks}"] = step(inputs, None, chunks)
    for g in UNIFORM:
        rows[f"group {g}"] = step(inputs, g, 4096)
    return {"settings": rows, "converged": measure_converged(inputs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=ROOT / "configs" / "runs" / "suite.yaml")
    parser.add_argument("--suite", type=Path, default=ROOT / "configs" / "suites" / "default.yaml")
    parser.add_argument("--models", default=None, help="comma-separated model names")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    models = args.models.split(",") if args.models else None
    sets = accelsim.parse_sets(["timing.engine=compiled"])
    results = {}
    columns = [*(f"per_op {c}" for c in PER_OP), *(f"group {g}" for g in UNIFORM)]
    print("| model | converged | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    worst = dict.fromkeys(columns, 0.0)
    events = dict.fromkeys(columns, 0)
    for entry in accelsim.suite_entries(args.suite, models):
        found = measure(accelsim.suite_inputs(args.run, entry, sets))
        results[entry.name] = found
        converged = found["converged"]
        assert isinstance(converged, int)
        cells = []
        for column in columns:
            cycles, n = found["settings"][column]  # type: ignore[index]
            error = cycles / converged - 1
            worst[column] = max(worst[column], abs(error))
            events[column] += n
            cells.append(f"{cycles / 1e6:.2f} M ({100 * error:+.2f} %)")
        print(f"| {entry.name} | {converged / 1e6:.2f} M | " + " | ".join(cells) + " |", flush=True)
    print("| largest distance | | " + " | ".join(f"{100 * w:.2f} %" for w in worst.values()) + " |")
    print("| engine events | | " + " | ".join(f"{n:,}" for n in events.values()) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
