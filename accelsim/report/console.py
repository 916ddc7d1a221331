"""Plain-text tables for the terminal (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from accelsim.units import bytes_to_gb, pj_to_mj


def _rows(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def summary_table(summary: dict[str, Any]) -> str:
    """A short summary of a run: cycles, time, utilization, DRAM traffic, energy."""
    energy = summary["energy_pj"]
    dram = summary["dram_bytes"]
    stash = summary["stash"]
    rows = [
        (
            "run",
            f"{summary['run']}: {summary['workload']} on {summary['hardware']} "
            f"({summary['processors']} x {summary['array']}), batch {summary['batch_size']}",
        ),
        (
            "cycles",
            f"{summary['total_cycles']:,}  ({summary['seconds'] * 1e3:.3f} ms at "
            f"{summary['clock_mhz']:g} MHz)",
        ),
        ("utilization", f"{summary['utilization'] * 100:.1f} % of peak MACs"),
        (
            "array stalls",
            f"{summary['array_stall_cycles']:,} cycles "
            f"({summary['stall_fraction'] * 100:.1f} % of the step)",
        ),
        (
            "MACs",
            f"{summary['macs']['total']:,}  (fwd {summary['macs']['fwd']:,}, dX "
            f"{summary['macs']['bwd_input']:,}, dW {summary['macs']['bwd_weight']:,})",
        ),
        (
            "DRAM traffic",
            f"{bytes_to_gb(dram['total']):.3f} GB  (read "
            f"{bytes_to_gb(dram['read']):.3f}, write {bytes_to_gb(dram['write']):.3f})",
        ),
        (
            "stash",
            f"{bytes_to_gb(stash['bytes']):.3f} GB saved for backward, "
            f"{bytes_to_gb(stash['dram_read_bytes']):.3f} GB read back from DRAM",
        ),
        ("energy", f"{pj_to_mj(energy['total']):.3f} mJ"),
    ]
    rows += [
        (f"  {name}", f"{pj_to_mj(pj):.3f} mJ  ({pj / max(energy['total'], 1e-30) * 100:.1f} %)")
        for name, pj in energy["by_component"].items()
    ]
    return _rows(rows)


def layer_table(record: dict[str, Any]) -> str:
    """A human-readable view of one ``accelsim layer`` record."""
    array = record["array"]
    rows = [
        (
            "gemm",
            f"m={record['m']} n={record['n']} k={record['k']} ({record['phase']}) on "
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
