#!/usr/bin/env python3
"""The composition table of docs/techniques/combining.md: every combination of four
techniques, in both orders.

    python scripts/composition_table.py [--models mlp_dropout,resnet18]

For each model, each technique alone and every pair, triple and the four together
(ADA-GP; approximate dropout: row patterns on the dropout MLP, feature maps on
ResNet-18; gradient skipping with a fixed share of filter groups; backward optimizer
fusion) run over 90 epochs, listed in the file's order and reversed.  It checks that
the two orders give the same ``summary.json`` and prints one Markdown row per
combination: the whole-training speedup with its bound and binding resource, the
energy and DRAM reductions.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "configs" / "runs"
TRAINING = "run.training={epochs: 90, batches_per_epoch: 100}"
MODELS = {
    "mlp_dropout": (RUNS / "mlp_dropout.yaml", "approximate_dropout: {rate: 0.5, pattern: row}"),
    "resnet18": (
        RUNS / "default.yaml",
        "approximate_dropout: {pattern: element, feature_maps: {rate: 0.5}}",
    ),
}
OTHERS = {
    "ADA-GP": "gradient_prediction: {}",
    "skipping": "gradient_skipping: {grouping: filter, skip_fraction: 0.5}",
    "fusion": "optimizer_fusion: {mode: backward}",
}


def main() -> int:
    from accelsim import load_inputs, parse_sets, simulate_training

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    print("| model | techniques | speedup (bound: binding) | energy reduction | DRAM reduction |")
    print("|---|---|---|---|---|")
    for model in args.models.split(","):
        run_file, dropout = MODELS[model]
        techniques = {"dropout": dropout, **OTHERS}
        for size in range(1, len(techniques) + 1):
            for names in itertools.combinations(techniques, size):
                sections = [techniques[n] for n in names]
                started = time.perf_counter()
                results = [
                    simulate_training(
                        load_inputs(
                            run_file,
                            parse_sets([TRAINING, f"run.techniques={{{', '.join(order)}}}"]),
                        )
                    )
                    for order in (sections, sections[::-1])
                ]
                if results[0].summary() != results[1].summary():
                    print(f"{model} {names}: the two orders differ", file=sys.stderr)
                    return 1
                t = results[0].training
                assert t is not None
                print(
                    f"| {model} | {' + '.join(names)} | {t.speedup:.3f}x ({t.speedup_bound:.3f}x:"
                    f" {t.binding_bound}) | {t.energy_reduction * 100:.1f} %"
                    f" | {t.dram_reduction * 100:.1f} % |",
                    flush=True,
                )
                print(f"  {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
