#!/usr/bin/env python3
"""The tables of docs/techniques/gradient-skipping.md and optimizer-fusion.md (a few seconds).

    python scripts/skipping_fusion_tables.py

Set-up: ``configs/runs/default.yaml`` (default accelerator, batch 32) with the
workload replaced by each of four models.  Skipping: momentum, 90 epochs, the
closed-loop monitor's decisions on the bundled measured statistics with each
grouping and on our synthetic curve (filter groups), plus a fixed skip fraction of
0.5; then the speedup (and the share of groups skipped) against the monitor's
threshold.
Fusion: SGD, momentum and Adam, each fused mode against the unfused step (its speedup
beside its hand band and its phase-ordered bound), with the parameters' DRAM bytes per
parameter simulated and derived; then fp32 master weights.
Prints Markdown tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "default.yaml"
MODELS = ("resnet18", "vgg16", "alexnet", "mlp")


def report(model: str, *sets: str) -> Any:
    """The training report of the default run on ``model`` with ``sets``."""
    from accelsim import load_inputs, parse_sets, simulate_training

    sets = (f"run.workload=workloads/{model}.yaml", *sets)
    training = simulate_training(load_inputs(RUN, parse_sets(list(sets)))).training
    assert training is not None
    return training


def train(model: str, *sets: str) -> dict[str, Any]:
    flat: dict[str, Any] = report(model, *sets).flat()
    return flat


def skipping() -> None:
    print(
        "| model | grouping | mean skip | speedup (bound) | energy | DRAM"
        " | nothing trains | dX kept |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for section in (
            "grouping: filter",
            "grouping: row",
            "grouping: layer",
            "grouping: filter, statistics: synthetic",
            "skip_fraction: 0.5",
        ):
            t = train(
                model,
                "run.training={epochs: 90, batches_per_epoch: 1000}",
                f"run.techniques={{gradient_skipping: {{{section}}}}}",
            )
            label = section.replace("grouping: ", "").replace(", statistics: ", ", ")
            label = label if "grouping" in section else "fixed 0.5"
            print(
                f"| {model} | {label} | {t['skip_fraction']:.2f} | {t['speedup']:.2f}x"
                f" ({t['speedup_bound']:.2f}x) | {t['energy_reduction'] * 100:.1f} %"
                f" | {t['dram_reduction'] * 100:.1f} % | {t['upper_bound_speedup']:.2f}x"
                f" | {t['upper_bound_dx_kept_speedup']:.2f}x |"
            )


def thresholds() -> None:
    """Speedup against the monitor's threshold, per grouping, on ResNet-18 and the MLP."""
    print("| model | grouping | " + " | ".join(f"threshold {t}" for t in THRESHOLDS) + " |")
    print("|---|---|" + "---|" * len(THRESHOLDS))
    for model in ("resnet18", "mlp"):
        for grouping in ("filter", "row", "layer"):
            cells = []
            for threshold in THRESHOLDS:
                t = train(
                    model,
                    "run.training={epochs: 90, batches_per_epoch: 1000}",
                    f"run.techniques={{gradient_skipping: {{grouping: {grouping},"
                    f" threshold: {threshold}}}}}",
                )
                cells.append(f"{t['speedup']:.2f}x ({t['skip_fraction']:.2f})")
            print(f"| {model} | {grouping} | {' | '.join(cells)} |")


THRESHOLDS = (0.1, 0.2, 0.3, 0.5, 0.7)


def fusion() -> None:
    print(
        "| model | optimizer | exposed update | backward: speedup [hand band] (bound) | energy"
        " | B/param (derived) | backward, every W tile from dX: speedup (bound) | energy"
        " | B/param (derived) | forward: speedup [hand band] (bound) | energy"
        " | B/param (derived) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for optimizer in ("sgd", "momentum", "adam"):
            cells, exposed = fused_cells(model, f"run.optimizer.kind={optimizer}")
            print(f"| {model} | {optimizer} | {exposed * 100:.1f} % | {' | '.join(cells)} |")


def masters() -> None:
    """The tested pairs with fp32 master weights: the update reads the master, not W
    (so ``weight_tiles`` changes nothing)."""
    print(
        "| model | optimizer | backward: speedup [hand band] (bound) | energy"
        " | B/param (derived) | forward: speedup [hand band] (bound) | energy"
        " | B/param (derived) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model, optimizer in (("alexnet", "momentum"), ("mlp", "adam")):
        master = f"run.optimizer={{kind: {optimizer}, master_weights: fp32}}"
        cells, _ = fused_cells(model, master, ("backward", "forward"))
        print(f"| {model} | {optimizer} | {' | '.join(cells)} |")


def fused_cells(
    model: str,
    optimizer: str,
    settings: tuple[str, ...] = ("backward", "backward, weight_tiles: dx", "forward"),
) -> tuple[list[str], float]:
    """Per fused setting (backward with each layer's loop order, backward with every
    update taking W's tiles from dX, forward): the fused step's speedup [its hand band]
    (its bound), energy saved, simulated bytes per parameter (derived); and the
    baseline's exposed update share."""
    cells = []
    exposed = 0.0
    for setting in settings:
        r = report(model, optimizer, f"run.techniques={{optimizer_fusion: {{mode: {setting}}}}}")
        details = r.sections["optimizer_fusion"].details
        exposed = details["base_exposed_update_share"]
        kind = details["by_kind"]["optimizer_fusion"]
        band = kind["hand_band"]
        within = f" [{band[0]:.3f}-{band[1]:.3f}]" if "dx" not in setting else ""
        cells += [
            f"{kind['speedup']:.3f}x{within} ({kind['speedup_bound']:.3f}x)",
            f"{r.energy_reduction * 100:.1f} %",
            f"{kind['bytes_per_parameter']:.2f} ({kind['derived_bytes_per_parameter']:.2f})",
        ]
    return cells, exposed


if __name__ == "__main__":
    skipping()
    print()
    thresholds()
    print()
    fusion()
    print()
    masters()
