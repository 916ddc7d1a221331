#!/usr/bin/env python3
"""The Megatron-LM memory table of docs/validation-megatron.md (a few seconds).

    python scripts/megatron_memory.py          # prints the table
    python scripts/megatron_memory.py --write  # writes it into the page

Set-up: the 175B, 530B and 1T models of Korthikanti et al. (2022)
(``configs/validation/megatron/``) on their plans of that paper's Table 3
(``plans.csv``: tensor 8, pipeline 8 / 35 / 64, micro-batch 1, a global batch of one
sample per GPU), each counted by ``accelsim run --memory-only`` on the A100 cluster
preset with Megatron-LM's 18 bytes a parameter (Adam, fp32 master weights, fp32
gradients) and no recomputation.  The interleaving, three virtual stages for 175B
and 530B and none for 1T, is Calculon's (calculon-ai/calculon,
``validation/seqsel/fig1/*_none.json``, ``pipeline_interleaving``): the paper's
Figure 1 figures are of those schedules.  The measured figures are
``megatron_a100_korthikanti2022.csv`` (the paper's Figure 1, as Calculon quotes it):
parameters and optimizer state, and activations, per GPU, in GiB.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = ROOT / "configs" / "validation" / "megatron"
PAGE = ROOT / "docs" / "validation-megatron.md"
BEGIN, END = "<!-- megatron-memory:begin -->", "<!-- megatron-memory:end -->"
CASES = (("175B", "gpt3-175B", 3), ("530B", "turing-530B", 3), ("1T", "megatron-1T", 1))
"""Each model: its row in plans.csv, in the measurements, and its virtual stages."""
KEPT = ("weights", "gradients", "optimizer_state", "master_weights")


@dataclass(frozen=True)
class Check:
    """One model's measured and counted GiB per GPU: parameters and optimizer state of
    the most loaded stage (the first: it holds the embeddings too) and of a stage of
    blocks alone, and the first stage's activations."""

    model: str
    plan: str
    measured_params_gib: float
    first_stage_params_gib: float
    block_stage_params_gib: float
    measured_activations_gib: float
    activations_gib: float


def checks() -> list[Check]:
    """Every model's check, counted."""
    from accelsim import load_inputs, parse_sets, step_memory

    plans = {r["model"]: r for r in _rows(MEGATRON / "plans.csv")}
    measured = {
        r["model"]: r
        for r in _rows(MEGATRON / "megatron_a100_korthikanti2022.csv")
        if r["recompute_mode"] == "none"
    }
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, row, v in CASES:
            plan = plans[name]
            t, p, gpus = plan["tensor_parallel"], plan["pipeline_parallel"], plan["gpus"]
            schedule = "interleaved" if v > 1 else "1f1b"
            run = Path(tmp) / "run.yaml"
            run.write_text(
                f"name: megatron_{name}\n"
                f"hardware: {ROOT / 'configs/hardware/a100_cluster.yaml'}\n"
                f"workload: {MEGATRON / plan['workload']}\n"
                f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
                f"batch_size: {plan['global_batch']}\n"
                "optimizer: {kind: adam, master_weights: fp32}\n"
                f"parallel: {{tensor: {t}, pipeline: {p}, schedule: {schedule},"
                f" virtual_stages: {v}, micro_batch: {plan['micro_batch']}}}\n",
                "utf-8",
            )
            sets = [
                f"processors={gpus}",
                f"hardware.interconnect.dims=[{gpus}]",
                "hardware.interconnect.levels=[]",
                "word_bytes.gradients=4",
            ]
            memory = step_memory(load_inputs(run, parse_sets(sets)))
            first, block = memory.stages[0], memory.stages[1]
            found.append(
                Check(
                    name,
                    f"t {t}, p {p}, v {v}, micro-batch {plan['micro_batch']}",
                    float(measured[row]["params_and_optimizer_gib"]),
                    sum(first[c] for c in KEPT) / 2**30,
                    sum(block[c] for c in KEPT) / 2**30,
                    float(measured[row]["activations_gib"]),
                    first["activations"] / 2**30,
                )
            )
    return found


def table(found: list[Check]) -> str:
    """The checks as a Markdown table, each figure beside the measured with its error."""
    lines = [
        "| model | plan | parameters + optimizer: measured | first stage | a stage of"
        " blocks | activations (first stage): measured | counted |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in found:
        m, a = c.measured_params_gib, c.measured_activations_gib
        lines.append(
            f"| {c.model} | {c.plan} | {m:.2f} | {c.first_stage_params_gib:.2f}"
            f" ({_error(c.first_stage_params_gib, m)}) | {c.block_stage_params_gib:.2f}"
            f" ({_error(c.block_stage_params_gib, m)}) | {a:.2f} | {c.activations_gib:.2f}"
            f" ({_error(c.activations_gib, a)}) |"
        )
    return "\n".join(lines)


def _error(counted: float, measured: float) -> str:
    return f"{100 * (counted / measured - 1):+.1f} %"


def _rows(path: Path) -> list[dict[str, str]]:
    lines = [x for x in path.read_text("utf-8").splitlines() if not x.startswith("#")]
    return list(csv.DictReader(lines))


def main() -> None:
    text = table(checks())
    if "--write" not in sys.argv[1:]:
        print(text)
        return
    page = PAGE.read_text("utf-8")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    PAGE.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", "utf-8")


if __name__ == "__main__":
    main()
