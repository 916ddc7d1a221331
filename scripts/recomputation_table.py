#!/usr/bin/env python3
"""The table of docs/techniques/recomputation.md (a few seconds).

    python scripts/recomputation_table.py

Set-up: ResNet-18 at batch 32 (``configs/runs/default.yaml``) and GPT-2 small at batch 4
(``configs/runs/gpt2_small.yaml``) on the default accelerator, each with every
recomputation policy (``every`` with its default ``keep_every: 2``).  Prints a Markdown
table: the stash against the baseline's, the recomputed MACs (as a share of the forward
pass's), the recomputing step against the baseline step, and that speedup's bound.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "configs" / "runs"
CASES = (
    ("resnet18", RUNS / "default.yaml", ("full", "every")),
    ("gpt2_small", RUNS / "gpt2_small.yaml", ("full", "every", "selective")),
)


def main() -> None:
    from accelsim import load_inputs, parse_sets, simulate_training

    print("| model | policy | stash (MiB): baseline -> recomputing | recomputed MACs |", end="")
    print(" step (bound: binding) |")
    print("|---|---|---|---|---|")
    for model, run, policies in CASES:
        for policy in policies:
            sets = [f"run.techniques={{recomputation: {{policy: {policy}}}}}"]
            result = simulate_training(load_inputs(run, parse_sets(sets)))
            assert result.training is not None
            section = result.training.sections["recomputation"]
            (r,) = section.details["by_kind"].values()
            base = section.details["base_stash_bytes"]
            print(
                f"| {model} | {policy} | {base / 2**20:,.1f} -> {r['stash_bytes'] / 2**20:,.1f}"
                f" ({r['stash_saved_fraction'] * 100:.1f} % saved)"
                f" | {r['extra_macs'] / 1e9:,.2f} G ({r['extra_mac_fraction'] * 100:.1f} %)"
                f" | {r['speedup']:.3f}x ({r['speedup_bound']:.3f}x: {r['binding_bound']}) |"
            )


if __name__ == "__main__":
    main()
