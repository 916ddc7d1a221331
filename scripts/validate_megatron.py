#!/usr/bin/env python3
"""Per-GPU memory of Megatron-LM's models against accelsim's breakdown, and their
iteration times against accelsim's steps (``scripts/megatron_time.py``): writes
docs/validation-megatron.md (about half a minute: two steps simulated).

    python scripts/validate_megatron.py            # prints the table
    python scripts/validate_megatron.py --write    # writes the page

The reference is ``configs/validation/megatron/megatron_a100_korthikanti2022.csv``
(copied unchanged from calculon-ai/calculon @ 2dd9c5c8, ``calculon/llm/validation.py``,
which quotes Korthikanti et al. 2022, arXiv 2205.05198, Figure 1): per GPU, the GiB of
parameters and optimizer state and of activations of each model with sequence
parallelism and selective recomputation (``seqsel``) and with neither (``none``).  Each
model's plan is the paper's Table 3 (``plans.csv``), its layer table beside it.
accelsim's figures are its memory breakdown (:func:`accelsim.step_memory`, as ``accelsim
run --memory-only``: the step lowered, not simulated) on
``configs/hardware/a100_cluster.yaml`` with the plan's processors, Adam with an fp32
master copy and 4-byte gradients (Megatron-LM's 18 bytes a parameter); the pipelined
plans interleaved as Calculon's validation runs them (``validation/seqsel/fig1``: three
virtual stages for 175B and 530B, plain 1F1B for 1T).  Nothing is fitted to the figures.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from megatron_time import (  # a script beside this one
    MEGATRON,
    MODELS,
    ROOT,
    TIME_HEAD,
    TIME_TAIL,
    Timed,
    error_text,
    plan_text,
    ratio_table,
    reference_rows,
    run_file,
    terms_table,
    time_table,
    timed_rows,
)

PAGE = ROOT / "docs" / "validation-megatron.md"
KEPT = ("weights", "gradients", "optimizer_state", "master_weights")
"""accelsim's classes in the reference's "parameters and optimizer" (the 18 bytes)."""
GIB = 2**30


@dataclass(frozen=True)
class Row:
    """One reference row and accelsim's figures (GiB): the most loaded processor's
    parameters and optimizer state (the first pipeline stage's), a stage of blocks'
    (pipelined plans only, else None), and the most loaded processor's activations."""

    model: str
    plan: str
    mode: str
    params_gib: float
    activations_gib: float
    counted_params_gib: float
    block_stage_params_gib: float | None
    counted_activations_gib: float


def breakdown(plan: dict[str, str], mode: str, tmp: Path) -> Any:
    """The memory breakdown of ``plan`` (a row of plans.csv) under ``mode``."""
    from accelsim import load_inputs, parse_sets, step_memory

    seqsel = mode == "seqsel"
    policy = "selective" if seqsel else ""
    gpus = plan["gpus"]
    sets = [
        f"processors={gpus}",
        f"hardware.interconnect.dims=[{gpus}]",
        "hardware.interconnect.levels=[]",
        "word_bytes.gradients=4",
    ]
    return step_memory(load_inputs(run_file(plan, seqsel, policy, tmp), parse_sets(sets)))


def measured() -> list[Row]:
    """Every reference row with memory figures, accelsim's beside it."""
    plans = {r["model"]: r for r in reference_rows(MEGATRON / "plans.csv")}
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in reference_rows(MEGATRON / "megatron_a100_korthikanti2022.csv"):
            if not r["params_and_optimizer_gib"]:
                continue
            plan, mode = plans[MODELS[r["model"]]], r["recompute_mode"]
            p = int(plan["pipeline_parallel"])
            memory = breakdown(plan, mode, Path(tmp))
            first = memory.stages[0] if p > 1 else memory.bytes_by_class
            block = sum(memory.stages[1][c] for c in KEPT) / GIB if p > 1 else None
            activations = first["activations"] / GIB
            found.append(
                Row(
                    MODELS[r["model"]],
                    plan_text(plan),
                    mode,
                    float(r["params_and_optimizer_gib"]),
                    float(r["activations_gib"]),
                    sum(first[c] for c in KEPT) / GIB,
                    block,
                    activations,
                )
            )
    return found


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, each figure beside the measured with its error."""
    lines = [
        "| model | plan | recomputation | parameters + optimizer: measured | counted"
        " | a stage of blocks | activations: measured | counted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        stage = r.block_stage_params_gib
        block = "" if stage is None else f"{stage:.2f} ({error_text(stage, r.params_gib)})"
        acts = (
            f"{r.counted_activations_gib:.2f}"
            f" ({error_text(r.counted_activations_gib, r.activations_gib)})"
        )
        lines.append(
            f"| {r.model} | {r.plan} | {r.mode} | {r.params_gib:.2f}"
            f" | {r.counted_params_gib:.2f} ({error_text(r.counted_params_gib, r.params_gib)})"
            f" | {block} | {r.activations_gib:.2f} | {acts} |"
        )
    return "\n".join(lines)


def memory_page(rows: list[Row]) -> str:
    """The page's memory section."""
    return PAGE_HEAD + table(rows) + "\n" + PAGE_TAIL


def page(rows: list[Row], timed: list[Timed]) -> str:
    return (
        memory_page(rows)
        + TIME_HEAD
        + time_table(timed)
        + "\n\n"
        + ratio_table(timed)
        + "\n\n"
        + terms_table(timed)
        + "\n"
        + TIME_TAIL
    )


PAGE_HEAD = """# Validation: Megatron-LM's memory per GPU and iteration time

<!-- Written by scripts/validate_megatron.py: edit the script, not this page. -->

accelsim's memory breakdown of one processor against the per-GPU memory Korthikanti et
al. (2022, "Reducing Activation Recomputation in Large Transformer Models", arXiv
2205.05198, Figure 1) measured training their 22B, 175B, 530B and 1T GPT models with
Megatron-LM on A100 80 GB GPUs: the GiB of parameters and optimizer state and the GiB
of activations, with sequence parallelism and selective recomputation (`seqsel`) and
with neither (`none`). The figures are copied unchanged from Calculon
(calculon-ai/calculon @ 2dd9c5c8, `calculon/llm/validation.py`) into
`configs/validation/megatron/megatron_a100_korthikanti2022.csv`; each model's plan is
the paper's Table 3 (`configs/validation/megatron/plans.csv`), its layer table beside
it (built from that table and Megatron-LM's GPT model, with its dropouts, not from these
figures). `scripts/validate_megatron.py` writes this page; nothing is fitted or tuned to
the figures.

Set-up: `configs/hardware/a100_cluster.yaml` with the plan's GPUs as processors on one
switch, the plan in `run.parallel` (`sequence_parallel: true` for `seqsel`, with the
recomputation technique's `selective` policy), a global batch of the plan's, Adam with
`optimizer.master_weights: fp32` and `word_bytes.gradients: 4` (Megatron-LM's 18 bytes
a parameter: the bf16 weight, its fp32 gradient, the fp32 master copy, Adam's two fp32
moments). The pipelined plans are interleaved as Calculon's validation runs them
(`validation/seqsel/fig1`: three virtual stages for 175B and 530B, 1F1B for 1T). The
breakdown is `accelsim run --memory-only`'s; under a pipeline, of the most loaded stage,
the first.

"""

PAGE_TAIL = """
GiB per GPU; in brackets, the error against the measured figure. "Counted" is the most
loaded processor's (a pipeline's first stage); "a stage of blocks" is a pipeline stage
holding blocks alone.

**How the classes map.** The reference's "parameters and optimizer" is accelsim's
`weights + gradients + optimizer_state + master_weights`; its "activations" is
accelsim's `activations` (the stash). `communication` and `workspace` are in neither.

**Parameters and optimizer state.** The reference counts a layer's `12 h^2` weights
alone (45.5625 GiB for 22B is `18 x 48 x 12 h^2 / 8` bytes); accelsim counts every
parameter a rank holds. A stage of blocks holds the measured figure to 0.1 % (the
biases and norms). The 22B GPU, and a pipeline's first stage, hold the token table's
share (`V h / t`) and the whole position table (`s h`) besides their blocks: +2.0 % on
22B, and +3.9 %, +9.2 % and +11.0 % for 175B, 530B and 1T, whose first stages hold 12,
3 and 2 blocks beside tables as wide as theirs. Sequence parallelism and recomputation
leave what a rank holds of them as it is.

**Activations.** A layer of these tables stashes, at 2-byte words and one byte a
dropout mask, Korthikanti et al.'s `s b h (10 + 24/t + 5 a s / (h t))` bytes without
sequence parallelism or recomputation (the norms' inputs, the QKV and MLP inputs whole
on each rank, two dropout masks; Q, K, V, the context and the MLP's two inner
activations split; attention's probabilities, dropout mask and dropped probabilities
split), and `34 s b h / t` with sequence parallelism and selective recomputation (the
rest split along the sequence, the attention core recomputed): their equations to the
byte (`tests/mapping/test_dropout_memory.py`). The counted stash is 0.4 % to 2.4 %
over the measured on every row: the stash outside the layers (the embedding
dropout's mask, the final norm's input and output, the loss's share of the logits,
the tokens), which a per-layer count leaves out, and which weighs most on the first
stages of 530B and 1T, of 3 and 2 layers a chunk. Under a pipeline the schedule's share
agrees: 175B's first stage holds 96 layers' worth (12 a stage, 8 micro-batches in
flight) times Narayanan et al.'s `1 + (p - 1)/(p v) = 1 + 7/24`, with selective
recomputation too: each stage's chunks' stash is counted from the recomputing step.

`tests/scripts/test_validate_megatron.py` asserts each figure with its reason and that
this page is the script's.
"""


def main() -> None:
    rows = measured()
    started = time.process_time()
    timed = timed_rows()
    simulated = sum(r.step_s is not None for r in timed)
    if "--write" in sys.argv[1:]:
        PAGE.write_text(page(rows, timed), "utf-8")
    print(table(rows))
    print(time_table(timed))
    print(ratio_table(timed))
    print(f"{simulated} steps simulated in {time.process_time() - started:.1f} CPU-s")


if __name__ == "__main__":
    main()
