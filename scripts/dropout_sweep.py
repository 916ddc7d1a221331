#!/usr/bin/env python3
"""Sweep approximate random dropout: rate 0.3-0.7, pattern, batch, on the MLP and LSTM.

    python scripts/dropout_sweep.py [--rates 0.3,0.4,0.5,0.6,0.7] \
        [--patterns element,row,tile,tile32] [--batches 128,1024] [--steps 100] \
        [--out results/dropout]

For every model (``mlp_dropout``: 784-2048-2048-10 with dropout after each hidden
ReLU; ``lstm_ptb``: the two-layer 650-unit PTB LSTM, dropout on its three
non-recurrent connections), pattern, batch size and rate, it simulates
``configs/runs/mlp_dropout.yaml`` with the technique's ``rate`` set for every
dropout layer (``tileN``: tile patterns with N x N tiles; ``tile``: tiles of the
array's size) and records the speedup over conventional (element-wise) dropout
at the same rate, its bound, the per-step spread of cycles, and the energy and
DRAM reductions.  Writes ``sweep.csv`` and ``sweep.png`` and prints the table the
docs/techniques/approximate-dropout.md quotes.  The LSTM runs batch 64 sequences (of
35 tokens) where the MLP runs 1024 samples, unless ``--lstm-batches`` says otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "mlp_dropout.yaml"
MODELS = {"mlp": "mlp_dropout", "lstm": "lstm_ptb"}


def main() -> int:
    from accelsim import load_inputs, parse_sets, plot_dropout_sweep, simulate_training, write_csv

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="0.3,0.4,0.5,0.6,0.7")
    parser.add_argument("--patterns", default="element,row,tile,tile32")
    parser.add_argument("--batches", default="128,1024", help="MLP batch sizes")
    parser.add_argument("--lstm-batches", default="16,64", help="LSTM batch sizes (sequences)")
    parser.add_argument("--models", default="mlp,lstm")
    parser.add_argument("--steps", type=int, default=100, help="the fewest steps drawn")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "dropout")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    print(
        f"{'model':6} {'pattern':8} {'batch':>6} {'rate':>5} {'speedup':>8} {'bound':>8}"
        f" {'cyc std %':>9} {'energy -%':>9} {'DRAM -%':>8} {'MACs -%':>8} {'s':>6}"
    )
    models, patterns = args.models.split(","), args.patterns.split(",")
    rates = [float(r) for r in args.rates.split(",")]
    batch_lists = {
        m: [int(b) for b in (args.batches if m == "mlp" else args.lstm_batches).split(",")]
        for m in models
    }
    runs = sum(len(b) for b in batch_lists.values()) * len(patterns) * len(rates)
    bar = tqdm(total=runs, desc="dropout sweep", unit="run", file=sys.stderr)
    for model in models:
        for pattern in patterns:
            for batch in batch_lists[model]:
                for rate in rates:
                    bar.set_postfix_str(f"{model}, {pattern}, batch {batch}, rate {rate}")
                    start = time.perf_counter()
                    size = pattern.removeprefix("tile") if pattern.startswith("tile") else ""
                    tile = f", tile: {{rows: {size}, cols: {size}}}" if size else ""
                    sets = [
                        f"workload=workloads/{MODELS[model]}.yaml",
                        f"batch_size={batch}",
                        f"run.techniques.approximate_dropout={{rate: {rate},"
                        f" pattern: {'tile' if size else pattern}, steps: {args.steps}{tile}}}",
                    ]
                    result = simulate_training(load_inputs(RUN, parse_sets(sets)))
                    report = result.training
                    assert report is not None
                    section = report.sections["approximate_dropout"].details
                    cycles = next(iter(section["by_kind"].values()))["per_step"]["cycles"]
                    row = {
                        "model": model,
                        "pattern": pattern,
                        "batch": batch,
                        "rate": rate,
                        "speedup": report.speedup,
                        "speedup_bound": report.speedup_bound,
                        "binding_bound": report.binding_bound,
                        "cycles_std_fraction": cycles["std"] / cycles["mean"],
                        "energy_reduction": report.energy_reduction,
                        "dram_reduction": report.dram_reduction,
                        "skipped_mac_fraction": section["skipped_mac_fraction"],
                        "steps_drawn": section["steps_drawn"],
                    }
                    rows.append(row)
                    bar.update(1)
                    tqdm.write(
                        f"{model:6} {pattern:8} {batch:>6} {rate:>5.1f} {row['speedup']:>7.3f}x"
                        f" {row['speedup_bound']:>7.3f}x"
                        f" {100 * cycles['std'] / cycles['mean']:>9.2f}"
                        f" {100 * row['energy_reduction']:>9.1f}"
                        f" {100 * row['dram_reduction']:>8.1f}"
                        f" {100 * row['skipped_mac_fraction']:>8.1f}"
                        f" {time.perf_counter() - start:>6.1f}",
                        file=sys.stdout,
                    )
    bar.close()
    csv_path = args.out / "sweep.csv"
    write_csv(csv_path, list(rows[0]), rows)
    plot_dropout_sweep(csv_path, args.out / "sweep.png", "Approximate random dropout")
    print(f"wrote {csv_path} and {args.out / 'sweep.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
