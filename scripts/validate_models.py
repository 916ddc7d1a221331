"""accelsim's whole-model forward passes against measured TPU v4 device times:
docs/validation-models.md.

Every row of ``configs/validation/models/tpu_v4_forward_truth.csv`` (Hugging Face
causal language models' forward passes on one TPU v4 chip, published by the SCALE-Sim
project; its README gives the source) is predicted with the calibrated preset
``configs/hardware/tpu_v4_calibrated.yaml`` (fitted on lone GEMMs only), ``run.mode:
forward`` at the row's batch and sequence length, three ways (:data:`MODES`):
``eager`` (one kernel per op), ``fused`` (a compiled program: vector chains fused into
their producer, fixed costs per kernel and per program, attention's operations as
kernels of their own, as the measured runs' eager attention compiles) and ``flash``
(the same with flash-attention kernels).  Nothing is fitted or tuned to these
measurements: they check the model.

Prints and writes the page: each row's measured and predicted time and signed error,
per model and overall MAPE and mean signed error per mode, each model's forward ops
and kernels, beside the lone-GEMM held-out error of docs/validation-silicon.md.

    python scripts/validate_models.py [--out docs/validation-models.md]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRUTH = ROOT / "configs" / "validation" / "models" / "tpu_v4_forward_truth.csv"
RUN = ROOT / "configs" / "runs" / "default.yaml"
HARDWARE = ROOT / "configs" / "hardware" / "tpu_v4_calibrated.yaml"
SILICON = ROOT / "docs" / "validation-silicon.md"
WORKLOADS = {
    "gpt2": ("GPT-2 (124 M)", "gpt2_small.yaml"),
    "smollm2-135m": ("SmolLM2-135M", "smollm2_135m.yaml"),
    "qwen2.5-0.5b": ("Qwen2.5-0.5B", "qwen2_5_0_5b.yaml"),
}
"""The measured file's model names, the name shown and the bundled layer table (each
built from the model's published configuration; see its header)."""
MODES = {
    "eager": ["lowering.compile=eager"],
    "fused": ["lowering.compile=fused", "lowering.attention=separate"],
    "flash": ["lowering.compile=fused", "lowering.attention=flash"],
}
"""Each prediction's settings: one kernel per op; a compiled program with attention's
operations as kernels of their own (as XLA compiles the measured eager attention);
the same with flash-attention kernels (what the measured runs did not use)."""


@dataclass(frozen=True)
class Row:
    """One measured forward pass and accelsim's predictions of it."""

    model: str
    seq: int
    batch: int
    measured_us: float
    predicted_us: dict[str, float]
    ops: int
    kernels: dict[str, int]

    def error(self, mode: str) -> float:
        """Signed relative error of ``mode``'s prediction (positive: too slow)."""
        return self.predicted_us[mode] / self.measured_us - 1.0


def measured() -> list[tuple[str, int, int, float]]:
    """The rows with a device time: model, sequence length, batch, microseconds."""
    with TRUTH.open(newline="") as f:
        return [
            (r["model"], int(r["seq"]), int(r["batch"]), 1000.0 * float(r["device_ms"]))
            for r in csv.DictReader(f)
            if r["status"] == "ok"
        ]


def predict(model: str, seq: int, batch: int, measured_us: float) -> Row:
    """The forward pass of ``model`` at ``seq`` tokens and ``batch``, measured in
    ``measured_us``, predicted in each mode."""
    from accelsim import simulate

    table = ROOT / "workloads" / WORKLOADS[model][1]
    times: dict[str, float] = {}
    kernels: dict[str, int] = {}
    ops = 0
    for mode, compile_sets in MODES.items():
        sets = [
            f"hardware={HARDWARE}",
            f"workload={table}",
            f"batch_size={batch}",
            f"workload.input.length={seq}",
            "mode=forward",
            *compile_sets,
        ]
        result = simulate(RUN, sets).base
        times[mode] = 1e6 * result.total_cycles / (result.hardware.clock_mhz * 1e6)
        kernels[mode] = result.kernels()
        if mode == "eager":
            ops = len(result.graph.ops)
    return Row(model, seq, batch, measured_us, times, ops, kernels)


def mape(rows: list[Row], mode: str) -> tuple[float, float]:
    """Mean absolute and mean signed percentage error of ``mode`` over ``rows``."""
    errors = [r.error(mode) for r in rows]
    return (
        100.0 * sum(abs(e) for e in errors) / len(errors),
        100.0 * sum(errors) / len(errors),
    )


def gemm_figure() -> str:
    """The lone-GEMM held-out (10-fold) MAPE on TPU v4, as docs/validation-silicon.md
    states it."""
    found = re.search(r"\| TPU v4 held out \(10-fold\) \| ([0-9.]+) \|", SILICON.read_text())
    return f"{found.group(1)} %" if found else "(see the silicon page)"


def page(rows: list[Row], seconds: float) -> str:
    """docs/validation-models.md."""
    error_heads = " | ".join(f"{m} MAPE | {m} signed" for m in MODES)
    lines = [
        "# Validation: whole models on TPU v4",
        "",
        "accelsim's forward pass of three causal language models against device times"
        " measured on one TPU v4 chip (Hugging Face `AutoModelForCausalLM`, bf16, eager"
        " attention, no KV cache, the LM head on every token, compiled by XLA through"
        ' `torch.compile(backend="openxla")`; `device_ms`, published by the SCALE-Sim'
        " project: `configs/validation/models/README.md` gives the source). Each row is"
        " predicted with `configs/hardware/tpu_v4_calibrated.yaml`, whose parameters were"
        " fitted on lone GEMMs only (held out: "
        f"{gemm_figure()} MAPE, [silicon validation](validation-silicon.md)), and"
        " `run.mode: forward` at the row's batch and sequence length, three ways"
        " ([compiled programs](model/compiled.md)): **eager**, one kernel per op, each"
        " paying the fixed cost; **fused**, a compiled program (`lowering.compile:"
        " fused`, `lowering.attention: separate`): vector chains fused into their"
        " producer, fixed costs once per kernel and once per program, attention's"
        " `QK^T`, softmax and `AV` as kernels of their own with the scores through DRAM,"
        " as XLA compiles the measured eager attention; **flash**, the same with"
        " flash-attention kernels (`lowering.attention: flash`), which the measured runs"
        " did not use. Nothing is fitted or tuned to these measurements.",
        "",
        "## Error per model",
        "",
        f"| model | rows | forward ops | kernels (fused) | {error_heads} |",
        "|---|---|---|---|" + "---|---|" * len(MODES),
    ]
    for model, (shown, _) in WORKLOADS.items():
        mine = [r for r in rows if r.model == model]
        if not mine:
            continue
        first = min(mine, key=lambda r: (r.seq, r.batch))
        errors = " | ".join(_errors(mine, m) for m in MODES)
        lines.append(
            f"| {shown} | {len(mine)} | {first.ops:,} | {first.kernels['fused']:,} | {errors} |"
        )
    lines += [
        f"| **all** | {len(rows)} | | | {' | '.join(_errors(rows, m) for m in MODES)} |",
        "",
        "Forward ops and kernels are those of batch 1 at the shortest sequence (eager runs"
        " one kernel per op). Signed: the mean of predicted over measured less one"
        " (positive: accelsim too slow). `fused` is the set-up the measurements ran: a"
        " compiled program whose attention keeps its scores in DRAM. `eager` pays a fixed"
        " cost and a DRAM round trip for every op, which a compiled program does not;"
        " `flash` keeps the scores on chip, which the measured programs did not. The"
        " preset's vector unit (its fixed cost per op class and its stream rate) was"
        " fitted on lone vector ops ([silicon validation](validation-silicon.md)), its"
        " GEMM timing on lone GEMMs; the layer tables come from each model's published"
        " configuration (`workloads/`). A vector op fused into its producer's kernel pays"
        " no fixed cost of its own (the kernel pays one), so its class's cost weighs on"
        " `eager`, where every vector op is a kernel of its own, more than on `fused` and"
        " `flash`.",
        "",
        "## Every row",
        "",
        "| model | seq | batch | measured (µs) | "
        + " | ".join(f"{m} (µs) | error" for m in MODES)
        + " |",
        "|---|---|---|---|" + "---|---|" * len(MODES),
    ]
    for r in rows:
        cells = " | ".join(f"{r.predicted_us[m]:,.0f} | {100 * r.error(m):+.1f} %" for m in MODES)
        lines.append(
            f"| {WORKLOADS[r.model][0]} | {r.seq} | {r.batch} | {r.measured_us:,.0f} | {cells} |"
        )
    lines += ["", f"Generated by `python scripts/validate_models.py` in {seconds:.0f} s.", ""]
    return "\n".join(lines)


def _errors(rows: list[Row], mode: str) -> str:
    """``mode``'s MAPE and mean signed error over ``rows``, as two table cells."""
    absolute, signed = mape(rows, mode)
    return f"{absolute:.1f} % | {signed:+.1f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "validation-models.md")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for model, seq, batch, device_us in measured():
        row = predict(model, seq, batch, device_us)
        rows.append(row)
        print(
            f"{model} seq {seq} batch {batch}: measured {device_us:,.0f} us;",
            ", ".join(f"{m} {row.predicted_us[m]:,.0f}" for m in MODES),
            file=sys.stderr,
        )
    text = page(rows, time.perf_counter() - start)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
