"""Plain-text tables for the terminal (the CLI prints them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelsim.mapping.groups import described
from accelsim.report.means import geometric_mean, saving_mean
from accelsim.report.silicon import silicon_rows
from accelsim.report.summary import StepSummary
from accelsim.report.training import BASE, TrainingReport, TrainingResult
from accelsim.units import bytes_to_gb, pj_to_mj, plural


def _rows(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def summary_table(summary: StepSummary | Mapping[str, Any]) -> str:
    """A short summary of a run: cycles, time, utilization, DRAM traffic, energy.

    ``summary`` is a step's :class:`StepSummary` or its ``summary.json`` record.
    """
    s = summary if isinstance(summary, StepSummary) else StepSummary.from_dict(summary)
    energy, dram, stash, macs = s.energy_pj, s.dram_bytes, s.stash, s.macs
    machine = f"{s.processors} x {s.array}"
    stalls = f"{s.array_stall_cycles:,} cycles"
    if s.processors > 1:
        # Which processors the step uses, and stalls per used processor, not their sum.
        assignment = s.settings.get("assignment", "")
        tensor = s.settings.get("tensor_parallel")
        only = ": processor 0 only" if assignment == "single" and not tensor else ""
        machine += f", {assignment} assignment{only}"
        if tensor:
            machine += f", tensor parallel {tensor}"
            if s.settings.get("sequence_parallel"):
                machine += ", sequence parallel"
        used = sum(1 for busy in s.busy_cycles.get("array", ()) if busy) or 1
        if used > 1:
            stalls = f"{s.array_stall_cycles / used:,.0f} cycles per processor on average"
    # A forward pass alone says so; a training step's line is as it always was.
    mode = ", a forward pass alone" if s.settings.get("mode") == "forward" else ""
    rows = [
        (
            "run",
            f"{s.run}: {s.workload} on {s.hardware} ({machine}), batch {s.batch_size}{mode}",
        ),
        (
            "cycles",
            f"{s.total_cycles:,}  ({s.seconds * 1e3:.3f} ms at {s.clock_mhz:g} MHz)",
        ),
        *_precision_rows(s),
        ("utilization", f"{s.utilization * 100:.1f} % of peak MACs"),
        ("array stalls", f"{stalls} ({s.stall_fraction * 100:.1f} % of the step)"),
        (
            "MACs",
            f"{macs.total:,}  (fwd {macs.fwd:,}, dX {macs.bwd_input:,}, dW {macs.bwd_weight:,})",
        ),
        (
            "DRAM traffic",
            f"{bytes_to_gb(dram.total):.3f} GB  (read "
            f"{bytes_to_gb(dram.read):.3f}, write {bytes_to_gb(dram.write):.3f})",
        ),
        (
            "stash",
            f"{bytes_to_gb(stash.bytes):.3f} GB saved for backward, "
            f"{bytes_to_gb(stash.dram_read_bytes):.3f} GB read back from DRAM",
        ),
        *_communication_rows(s),
        *([("groups", "; ".join(map(described, s.groups)))] if s.groups else []),
        *([("simulated", s.symmetry.described())] if s.symmetry is not None else []),
        *([("mapping", s.mapping.described())] if s.mapping else []),
        ("energy", f"{pj_to_mj(energy.total):.3f} mJ"),
    ]
    if "engine" in s.settings:
        rows.insert(2, ("engine", f"{s.settings['engine']} event engine"))
    rows += [
        (f"  {name}", f"{pj_to_mj(pj):.3f} mJ  ({pj / max(energy.total, 1e-30) * 100:.1f} %)")
        for name, pj in energy.by_component.items()
    ]
    rows += silicon_rows(s.silicon, s.design.other_keys.get("technology_nm"))
    return _rows(rows)


def _communication_rows(s: StepSummary) -> list[tuple[str, str]]:
    """A row per kind of collective that moved bytes (none on one processor)."""
    return [
        (
            kind,
            f"{bytes_to_gb(c.bytes):.3f} GB on the links in {c.cycles:,} cycles,"
            f" {c.exposed_cycles:,} exposed (no compute on its processors),"
            f" {c.overlapped_cycles:,} overlapped",
        )
        for kind, c in s.communication.items()
        if c.bytes
    ]


def layer_table(record: dict[str, Any]) -> str:
    """A human-readable view of one ``accelsim layer`` record."""
    array = record["array"]
    arrays = f"{array['count']} x " if array["count"] > 1 else ""
    rows = [
        (
            "gemm",
            f"m={record['m']} n={record['n']} k={record['k']} ({record['phase']}) on {arrays}"
            f"{array['rows']}x{array['cols']} {array['dataflow']}, {record['convention']}",
        ),
        ("compute cycles", f"{record['compute_cycles']:,}"),
        ("stall cycles", f"{record['stall_cycles']:,}"),
        ("total cycles", f"{record['total_cycles']:,}"),
        ("folds", f"{record['folds']:,}"),
        ("mapping efficiency", f"{record['mapping_efficiency'] * 100:.2f} %"),
        ("utilization", f"{record['utilization'] * 100:.2f} %"),
        (
            "SRAM reads (words)",
            f"ifmap {record['sram_reads']['ifmap']:,}, filter {record['sram_reads']['filter']:,}",
        ),
        ("SRAM writes (words)", f"ofmap {record['sram_writes']['ofmap']:,}"),
        ("DRAM bytes", ", ".join(f"{k} {v:,}" for k, v in record["dram_bytes"].items())),
        ("energy", f"{record['energy_pj'] / 1e6:.3f} uJ"),
    ]
    return _rows(rows)


def workload_notes(source: str, notes: Sequence[str]) -> str:
    """Where a workload comes from and what it assumes, a note per line."""
    lines = [f"workload from {source or 'its file'}, assuming:"]
    lines.extend(f"  - {note}" for note in notes)
    return "\n".join(lines)


def suite_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per model of a suite run, plus the suite total."""
    header = (
        f"{'model':<14} {'cycles':>15} {'ms':>10} {'util %':>7} {'stall %':>8} "
        f"{'DRAM GB':>9} {'energy mJ':>11}"
    )
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['model']:<14} {r['total_cycles']:>15,} {r['seconds'] * 1e3:>10.3f} "
            f"{r['utilization'] * 100:>7.1f} {r['stall_fraction'] * 100:>8.1f} "
            f"{bytes_to_gb(r['dram_bytes']):>9.3f} {pj_to_mj(r['energy_pj']):>11.3f}"
        )
    lines.append(
        f"{'suite total':<14} {sum(r['total_cycles'] for r in rows):>15,} "
        f"{sum(r['seconds'] for r in rows) * 1e3:>10.3f} {'':>7} {'':>8} "
        f"{bytes_to_gb(sum(r['dram_bytes'] for r in rows)):>9.3f} "
        f"{pj_to_mj(sum(r['energy_pj'] for r in rows)):>11.3f}"
    )
    return "\n".join(lines)


def suite_training_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per model of a suite run with techniques: the whole-training speedup,
    the bound it could reach (and the resource that sets it), the energy and DRAM
    savings; then their geometric means over the models (of the speedups, and of the
    energy and DRAM ratios)."""
    header = (
        f"{'model':<14} {'speedup':>8} {'bound':>8} {'bound set by':<14}"
        f" {'energy saving':>13} {'DRAM saving':>11}"
    )
    lines = [header]

    def line(name: str, speedup: float, bound: float, by: str, energy: float, dram: float) -> str:
        return (
            f"{name:<14} {speedup:>7.3f}x {bound:>7.3f}x {by:<14}"
            f" {100 * energy:>11.1f} % {100 * dram:>9.1f} %"
        )

    for r in rows:
        lines.append(
            line(
                r["model"],
                r["speedup"],
                r["speedup_bound"],
                str(r["binding_bound"]),
                r["energy_reduction"],
                r["dram_reduction"],
            )
        )

    lines.append(
        line(
            "geometric mean",
            geometric_mean([r["speedup"] for r in rows]),
            geometric_mean([r["speedup_bound"] for r in rows]),
            "",
            saving_mean([r["energy_reduction"] for r in rows]),
            saving_mean([r["dram_reduction"] for r in rows]),
        )
    )
    return "\n".join(lines)


def step_groups(result: TrainingResult) -> str:
    """A line per technique step kind placed in processor groups other than the
    baseline step's (a pipeline's stages): the groups it printed for the baseline step
    in :func:`summary_table`; empty when there is none."""
    base = result.base.groups()
    rows = [
        (f"{kind} groups", "; ".join(map(described, placed)))
        for kind, placed in ((kind, step.groups()) for kind, step in result.steps.items())
        if placed and placed != base
    ]
    return _rows(rows) if rows else ""


def step_silicon(result: TrainingResult) -> str:
    """A line per technique step kind whose hardware's area is not the baseline's (a
    technique's own units), and what an iso-area run shrank to pay for them; empty
    when every step runs on the baseline's hardware."""
    base = result.base.silicon
    rows = [
        (f"{kind} area", f"{step.silicon.area.total_mm2:,.1f} mm2 ({added:+,.1f} mm2)")
        for kind, step in result.steps.items()
        if base is not None and step.silicon is not None
        for added in [step.silicon.area.total_mm2 - base.area.total_mm2]
        if added
    ]
    match = result.iso_area
    if match is not None:
        rows.append(
            (
                "iso-area",
                f"{match.shrinks.value} {match.before} -> {match.after} to pay for"
                f" {match.added_mm2:,.2f} mm2 added: {match.matched_mm2:,.2f} mm2 against the"
                f" baseline's {match.baseline_mm2:,.2f} (short by under"
                f" {match.rounding_mm2:,.2g} mm2, the rounding)",
            )
        )
    return _rows(rows) if rows else ""


def training_table(training: TrainingReport) -> str:
    """A run's techniques against the baseline: each step kind's cost, each technique's
    own lines, the whole-training speedup beside its bound, the reductions, the
    notes and the warnings."""
    base = training.steps[BASE].cycles
    rows = [("techniques", " + ".join(training.techniques))]
    rows += [
        (f"  {kind} step", f"{cost.cycles:,.0f} cycles ({cost.cycles / base:.3f} x base)")
        for kind, cost in training.steps.items()
    ]
    epochs, steps = training.plan.epochs, training.plan.batches_per_epoch
    if epochs > 1 or steps > 1:
        rows.append(
            (
                "  training",
                f"{epochs:,} {plural(epochs, 'epoch')} of {steps:,} {plural(steps, 'step')}",
            )
        )
    for section in training.sections.values():
        rows += [(f"  {label}", value) for label, value in section.lines]
        if section.inputs:
            rows.append((f"  {section.technique} inputs", section.provenance()))
    rows += [("  note", note) for note in training.notes]
    rows += [
        (
            "speedup",
            f"{training.speedup:.3f} x  (at most {training.speedup_bound:.3f} x:"
            f" {training.binding_bound} bound)",
        ),
        ("energy reduction", f"{training.energy_reduction * 100:.1f} %"),
        ("DRAM reduction", f"{training.dram_reduction * 100:.1f} %"),
    ]
    rows += [("warning", warning) for warning in training.warnings]
    return _rows(rows)


def topology_table(records: Sequence[dict[str, Any]]) -> str:
    """One line per layer of ``accelsim layer --topology``, plus the totals."""
    lines = [
        f"{'layer':<22} {'m':>8} {'n':>6} {'k':>7} {'compute':>12} {'stall':>10} "
        f"{'folds':>8} {'map eff %':>9} {'util %':>7}"
    ]
    for r in records:
        lines.append(
            f"{r['layer']:<22} {r['m']:>8} {r['n']:>6} {r['k']:>7} {r['compute_cycles']:>12,} "
            f"{r['stall_cycles']:>10,} {r['folds']:>8,} {r['mapping_efficiency'] * 100:>9.2f} "
            f"{r['utilization'] * 100:>7.2f}"
        )
    compute = sum(r["compute_cycles"] for r in records)
    stall = sum(r["stall_cycles"] for r in records)
    lines.append(f"{'total':<22} {'':>8} {'':>6} {'':>7} {compute:>12,} {stall:>10,}")
    return "\n".join(lines)


def _precision_rows(s: StepSummary) -> list[tuple[str, str]]:
    """The GEMMs' precision, rate and its source, and each tensor class's bytes, when
    the summary records them."""
    precision = s.settings.get("precision")
    if precision is None:
        return []
    rate, source = s.settings.get("macs_per_pe_per_cycle"), s.settings.get("rates_source")
    macs = f"{rate} MAC{'' if rate == '1' else 's'}"
    return [
        ("precision", f"GEMMs at {precision}, {macs} per PE per cycle ({source})"),
        ("word bytes", s.settings.get("word_bytes", "")),
    ]
