#!/usr/bin/env python3
"""Per-GPU memory of Megatron-LM's models against accelsim's breakdown (a few seconds).

    python scripts/validate_megatron_memory.py [--out docs/validation-megatron.md]

The reference is ``configs/validation/megatron/megatron_a100_korthikanti2022.csv``
(copied unchanged from calculon-ai/calculon @ 2dd9c5c8, ``calculon/llm/validation.py``,
which quotes Korthikanti et al. 2022, arXiv 2205.05198): per GPU, the GiB of parameters
and optimizer state and the GiB of activations of each model with sequence parallelism
and selective recomputation (``seqsel``) and with neither (``none``).  Each model's
plan is the paper's Table 3 (``plans.csv`` beside it).  accelsim's figures are its
memory breakdown (:func:`accelsim.step_memory`: the step lowered, not
simulated) on ``configs/hardware/a100_cluster.yaml`` with the plan's processors, Adam
with an fp32 master copy and 4-byte gradients (Megatron-LM's 18 bytes a parameter:
2 for the bf16 weight, 4 for its fp32 gradient, 4 for the master copy, 8 for Adam's
two moments).  A row whose plan needs what accelsim does not model yet is listed with
what it needs, not estimated.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = ROOT / "configs" / "validation" / "megatron"
TRUTH = MEGATRON / "megatron_a100_korthikanti2022.csv"
PLANS = MEGATRON / "plans.csv"
HARDWARE = ROOT / "configs" / "hardware" / "a100_cluster.yaml"
ENERGY = ROOT / "configs" / "energy" / "horowitz45.yaml"
MODELS = {"megatron-22B": "22B", "gpt3-175B": "175B", "turing-530B": "530B", "megatron-1T": "1T"}
"""The reference's model names, by the names of plans.csv."""
PARAMETER_CLASSES = ("weights", "gradients", "optimizer_state", "master_weights")
"""accelsim's classes in the reference's "parameters and optimizer" (the 18 bytes)."""
GIB = 2**30


@dataclass(frozen=True)
class Plan:
    """One model's plan in Korthikanti et al.'s Table 3."""

    workload: Path
    tensor: int
    pipeline: int
    data: int
    micro_batch: int


@dataclass(frozen=True)
class Row:
    """One reference row, accelsim's figures (GiB) or what accelsim needs to count them."""

    model: str
    mode: str
    params_gib: float
    activations_gib: float
    accelsim_params_gib: float | None
    accelsim_activations_gib: float | None
    dropout_gib: float | None
    params_missing: str
    activations_missing: str


def plans() -> dict[str, Plan]:
    rows = csv.DictReader(line for line in PLANS.open() if not line.startswith("#"))
    return {
        r["model"]: Plan(
            MEGATRON / r["workload"],
            int(r["tensor_parallel"]),
            int(r["pipeline_parallel"]),
            int(r["data_parallel"]),
            int(r["micro_batch"]),
        )
        for r in rows
    }


def missing(plan: Plan, mode: str) -> tuple[str, str]:
    """What accelsim lacks to count a row's parameters and its activations ("" when
    nothing): sequence parallelism for ``seqsel``'s activations only (it leaves a
    rank's parameters and optimizer state as they are, and so does recomputation)."""
    return "", "sequence parallelism" if mode == "seqsel" else ""


def inputs_of(plan: Plan, tmp: Path) -> Any:
    from accelsim import load_inputs, parse_sets

    run = tmp / "megatron.yaml"
    run.write_text(
        f"name: megatron\nhardware: {HARDWARE}\nworkload: {plan.workload}\nenergy: {ENERGY}\n"
        f"batch_size: {plan.micro_batch * plan.data}\n"
        "optimizer: {kind: adam, master_weights: fp32}\n"
        f"parallel: {{tensor: {plan.tensor}}}\n"
        "on_capacity: report\n"
    )
    processors = plan.tensor * plan.data
    sets = [f"processors={processors}", "word_bytes.gradients=4"]
    if processors <= 8:
        sets += [f"interconnect.dims=[{processors}]", "interconnect.levels=[]"]
    return load_inputs(run, parse_sets(sets))


def dropout_bytes(inputs: Any, plan: Plan) -> int:
    """Korthikanti et al.'s dropout terms, which the layer tables lack, at the plan's
    micro-batch: per layer the two masks after attention and after the MLP (``s b h``
    bytes, one a word) and attention's dropout (its mask and its 2-byte output,
    ``3 a s^2 b / t``), neither sequence parallel nor recomputed."""
    total = 0
    for info in (i for i in inputs.infos if i.layer.kind == "attention"):
        *_, s, h = info.in_shapes[0].dims
        a = info.layer.heads
        total += 2 * s * plan.micro_batch * h + 3 * a * s * s * plan.micro_batch // plan.tensor
    return total


def row(model: str, mode: str, params: float, activations: float, plan: Plan, tmp: Path) -> Row:
    from accelsim import step_memory

    no_params, no_activations = missing(plan, mode)
    if no_params:
        return Row(model, mode, params, activations, None, None, None, no_params, no_activations)
    inputs = inputs_of(plan, tmp)
    memory = step_memory(inputs).bytes_by_class
    ours = sum(memory[c] for c in PARAMETER_CLASSES) / GIB
    if no_activations:
        return Row(model, mode, params, activations, ours, None, None, "", no_activations)
    stash, dropout = memory["activations"] / GIB, dropout_bytes(inputs, plan) / GIB
    return Row(model, mode, params, activations, ours, stash, dropout, "", "")


def measured(tmp: Path) -> list[Row]:
    """Every reference row with memory figures of a model trained without a pipeline
    (the pipelined ones are ``scripts/megatron_memory.py``'s), accelsim's beside it
    where it can."""
    by_model = plans()
    rows = []
    for r in csv.DictReader(TRUTH.open()):
        if not r["params_and_optimizer_gib"]:
            continue
        plan = by_model[MODELS[r["model"]]]
        if plan.pipeline > 1:
            continue
        params, acts = float(r["params_and_optimizer_gib"]), float(r["activations_gib"])
        rows.append(row(r["model"], r["recompute_mode"], params, acts, plan, tmp))
    return rows


def _error(ours: float, theirs: float) -> str:
    return f"{(ours / theirs - 1) * 100:+.1f} %"


def table(rows: list[Row]) -> str:
    head = (
        "| model | recomputation | params + optimizer: Megatron | accelsim | error"
        " | activations: Megatron | accelsim | error | accelsim + dropout | error |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        line = f"| {r.model} | {r.mode} | {r.params_gib:.2f} "
        if r.accelsim_params_gib is None:
            line += f"| needs {r.params_missing} |"
        else:
            line += f"| {r.accelsim_params_gib:.2f} | {_error(r.accelsim_params_gib, r.params_gib)}"
        line += f" | {r.activations_gib:.2f} "
        if r.accelsim_activations_gib is None or r.dropout_gib is None:
            lines.append(f"{line}| needs {r.activations_missing} | | | |")
            continue
        with_dropout = r.accelsim_activations_gib + r.dropout_gib
        lines.append(
            f"{line}| {r.accelsim_activations_gib:.2f}"
            f" | {_error(r.accelsim_activations_gib, r.activations_gib)}"
            f" | {with_dropout:.2f} | {_error(with_dropout, r.activations_gib)} |"
        )
    return head + "\n".join(lines) + "\n"


def page(rows: list[Row]) -> str:
    intro = (ROOT / "docs" / "validation-megatron.md").read_text().split("<!-- table -->")
    return intro[0] + "<!-- table -->\n\n" + table(rows) + "\n<!-- table -->" + intro[2]


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "validation-megatron.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = measured(Path(tmp))
    args.out.write_text(page(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
