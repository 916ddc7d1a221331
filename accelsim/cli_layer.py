"""``accelsim layer``: one GEMM or convolution, SCALE-Sim style (part of :mod:`accelsim.cli`).

Loaded only for this command: it needs the hardware and energy specs, the fold
schedule and the closed forms, but no event engine, workload, run driver or
technique (``tests/architecture/test_startup.py``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from accelsim.cli_sweep import printing
from accelsim.config.base import Convention
from accelsim.config.calibrated import timing_flags
from accelsim.config.energy import EnergyTable
from accelsim.config.enums import PsumPolicy
from accelsim.config.files import display_path
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import Override, load_energy, load_hardware, parse_sets
from accelsim.driver.layer import (
    LayerGemm,
    conv_gemm,
    gemm_for,
    gemm_problems,
    simulate_layer,
    topology_gemm,
)
from accelsim.energy.model import check_table
from accelsim.errors import InputError
from accelsim.graph.ops import Phase
from accelsim.workload.topology import read_topology

EXIT_OK = 0


def _hardware_sets(sets: list[Override]) -> list[Override]:
    return [
        Override(o.key.removeprefix("hardware."), o.value, o.source, o.source_path) for o in sets
    ]


def cmd_layer(args: argparse.Namespace) -> int:
    """``accelsim layer``: one GEMM or conv, or every row of a topology file."""
    hw = load_hardware(args.hardware, _hardware_sets(parse_sets(args.sets)))
    table = load_energy(args.energy)
    check_table(table, hw, display_path(args.energy))
    phase = Phase(args.phase)
    convention, psums, overlap = timing_flags(
        hw.calibrated_settings, display_path(args.hardware), args.convention, args.psums,
        args.fold_overlap,
    )  # fmt: skip
    if overlap and convention is Convention.SCALESIM:
        raise InputError.single(
            "--fold-overlap",
            "",
            "needs --convention accelsim (SCALE-Sim 3.0.0 runs every fold's fill and drain)",
        )
    if args.topology:
        return _layer_topology(args, hw, table, phase, convention, psums, overlap)
    if args.gemm:
        m, n, k = args.gemm
        gemm = gemm_for(m, n, k, phase)
    else:
        h, w, r, s, c, k, stride = args.conv
        if r > h or s > w:
            raise InputError.single(
                "--conv", "R S", "filter larger than the padded ifmap", [h, w, r, s]
            )
        gemm = conv_gemm(h, w, r, s, c, k, stride, phase, convention)
    problems = gemm_problems(gemm, "--gemm" if args.gemm else "--conv")
    if problems:
        raise InputError(problems)
    record = simulate_layer(hw, table, gemm, phase, convention, psums, overlap)
    with printing():
        if args.json:
            print(json.dumps(record, indent=2))
        else:
            from accelsim.report.console import layer_table  # not needed for --json

            print(layer_table(record))
    return EXIT_OK


def _layer_topology(
    args: argparse.Namespace,
    hw: HardwareSpec,
    table: EnergyTable,
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy,
    overlap: bool,
) -> int:
    """``accelsim layer --topology``: every row of a SCALE-Sim topology file (its rows'
    MACs checked as it is read), each distinct GEMM simulated once."""
    rows = read_topology(args.topology)
    simulated: dict[LayerGemm, dict[str, Any]] = {}
    records = []
    for row in rows:
        gemm = topology_gemm(row, phase, convention)
        if gemm not in simulated:
            simulated[gemm] = simulate_layer(hw, table, gemm, phase, convention, psums, overlap)
        records.append({"layer": row.name, **simulated[gemm]})
    with printing():
        if args.json:
            print(json.dumps(records, indent=2))
        else:
            from accelsim.report.console import topology_table  # not needed for --json

            print(topology_table(records))
    return EXIT_OK
