"""One GEMM or convolution on its own, as one SCALE-Sim topology row: ``accelsim layer``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim._version import __version__
from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.enums import DEFAULT_CHUNKS_PER_OP, DEFAULT_GROUP_CYCLES, PsumPolicy
from accelsim.config.hardware import HardwareSpec
from accelsim.energy.model import estimate_energy
from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, Problem
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import GemmOp, OpGraph, Phase, TensorKind
from accelsim.lowering.conv_dims import conv_gemm_dims
from accelsim.mapping.dataflow import DATAFLOW_CODE
from accelsim.mapping.schedule import schedule
from accelsim.timing.costs import OpCosts, op_costs
from accelsim.timing.machine import machine_of
from accelsim.timing.single_op import simulate_single_op
from accelsim.workload.topology import TopologyLayer


@dataclass(frozen=True)
class LayerGemm:
    """One GEMM of a single-layer query, with its operands' unique footprints."""

    m: int
    n: int
    k: int
    a_elements: int
    b_elements: int


def gemm_for(m: int, n: int, k: int, phase: Phase) -> LayerGemm:
    """The GEMM of ``phase`` for a forward GEMM ``C[m x n] = A[m x k] . B[k x n]``.

    ``bwd_input`` computes ``dA = dC . B^T`` (m x k, reduction n); ``bwd_weight``
    computes ``dB^T = dC^T . A`` (n x k, reduction m), as for a linear layer.
    """
    shape = {Phase.FWD: (m, n, k), Phase.BWD_INPUT: (m, k, n), Phase.BWD_WEIGHT: (n, k, m)}
    gm, gn, gk = shape[phase]
    return LayerGemm(gm, gn, gk, gm * gk, gk * gn)


def conv_gemm(
    h: int,
    w: int,
    r: int,
    s: int,
    c: int,
    k: int,
    stride: int,
    phase: Phase,
    convention: Convention,
) -> LayerGemm:
    """The GEMM of ``phase`` for a conv given in SCALE-Sim topology order.

    Inputs are already padded.  The scalesim convention sizes the output as
    SCALE-Sim 3.0.0 does, ``ceil((H - R + stride) / stride)``, counting windows
    that run off the edge; accelsim uses the exact ``(H - R) // stride + 1``.
    The ifmap footprint is the set of input pixels some window touches.
    """
    if convention is Convention.SCALESIM:
        p, q = -(-(h - r + stride) // stride), -(-(w - s + stride) // stride)
    else:
        p, q = (h - r) // stride + 1, (w - s) // stride + 1
    touched = _touched(h, r, stride, p) * _touched(w, s, stride, q) * c
    gm, gn, gk = conv_gemm_dims(phase, 1, (c, k), (h, w, p, q), (r, s))
    footprints = {
        Phase.FWD: (touched, r * s * c * k),
        Phase.BWD_INPUT: (p * q * k, k * r * s * c),
        Phase.BWD_WEIGHT: (k * p * q, touched),
    }[phase]
    return LayerGemm(gm, gn, gk, *footprints)


def topology_gemm(layer: TopologyLayer, phase: Phase, convention: Convention) -> LayerGemm:
    """The GEMM of ``phase`` for one row of a SCALE-Sim topology."""
    if layer.kind == "gemm":
        m, n, k = layer.dims
        return gemm_for(m, n, k, phase)
    h, w, r, s, c, nf, stride = layer.dims
    return conv_gemm(h, w, r, s, c, nf, stride, phase, convention)


def _touched(size: int, kernel: int, stride: int, windows: int) -> int:
    """Input positions of ``size`` that ``windows`` windows of ``kernel`` at ``stride`` cover.

    Window ``e`` covers ``[e * stride, min(size, e * stride + kernel))``; a
    window that starts past the input (the scalesim convention counts some)
    covers nothing.  Overlapping or touching windows (``stride <= kernel``)
    cover one interval; otherwise every window but the last covers ``kernel``
    positions and the last is cut at ``size``.
    """
    windows = min(windows, (size - 1) // stride + 1)
    last = (windows - 1) * stride
    if stride <= kernel:
        return min(size, last + kernel)
    return (windows - 1) * kernel + min(kernel, size - last)


def gemm_problems(gemm: LayerGemm, source: str) -> list[Problem]:
    """A problem if the GEMM's MACs exceed :data:`~accelsim.errors.MAX_COUNT`."""
    macs = gemm.m * gemm.n * gemm.k
    if macs <= MAX_COUNT:
        return []
    return [
        Problem(
            source,
            "",
            f"{macs:.3g} MACs exceed the limit of {MAX_COUNT_TEXT} ({MAX_COUNT:.3g})",
            [gemm.m, gemm.n, gemm.k],
        )
    ]


def layer_graph(hw: HardwareSpec, gemm: LayerGemm, phase: Phase) -> OpGraph:
    """The step of one layer query: the GEMM alone, its operands typed by ``phase``."""
    builder = GraphBuilder(hw.word_bytes)
    kinds = {
        Phase.FWD: (TensorKind.ACTIVATION, TensorKind.WEIGHT, TensorKind.ACTIVATION),
        Phase.BWD_INPUT: (TensorKind.GRADIENT, TensorKind.WEIGHT, TensorKind.GRADIENT),
        Phase.BWD_WEIGHT: (TensorKind.GRADIENT, TensorKind.ACTIVATION, TensorKind.GRADIENT),
    }[phase]
    a = builder.tensor("A", kinds[0], gemm.a_elements)
    b = builder.tensor("B", kinds[1], gemm.b_elements)
    c = builder.tensor("C", kinds[2], gemm.m * gemm.n)
    builder.gemm(
        "layer",
        "layer",
        phase,
        gemm.m,
        gemm.n,
        gemm.k,
        1,
        a,
        b,
        c,
        a_elements=gemm.a_elements,
        b_elements=gemm.b_elements,
    )
    return builder.build()


def simulate_layer(
    hw: HardwareSpec,
    table: EnergyTable,
    gemm: LayerGemm,
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy = PsumPolicy.CHUNK,
    fold_overlap: bool = False,
) -> dict[str, Any]:
    """Simulate one GEMM at batch 1 and return the ``accelsim layer --json`` record.

    Raises:
        ValueError: if ``fold_overlap`` is asked of the scalesim convention.
    """
    graph = layer_graph(hw, gemm, phase)
    machine = machine_of(hw)
    fold_schedule = schedule(graph, (machine.array,))
    costs = op_costs(
        graph,
        fold_schedule,
        machine,
        convention,
        psums,
        DEFAULT_CHUNKS_PER_OP,
        fold_overlap=fold_overlap,
        group_cycles=DEFAULT_GROUP_CYCLES,
        energy=table,
    )
    trace = simulate_single_op(graph, costs, machine)
    energy = estimate_energy(trace, hw, table)
    op = graph.ops[0]
    assert isinstance(op, GemmOp)
    a, b, c = op.a, op.b, op.c
    compute = int(costs.compute_cycles[0])
    total = trace.total_cycles
    macs = int(costs.macs[0])
    return {
        "accelsim_version": __version__,
        "phase": phase.value,
        "convention": convention.value,
        "psums": psums.value,
        "fold_overlap": fold_overlap,
        "array": {
            "rows": hw.array.rows,
            "cols": hw.array.cols,
            "count": hw.array.count,
            "dataflow": _dataflow_run(hw, costs),
        },
        "m": gemm.m,
        "n": gemm.n,
        "k": gemm.k,
        "macs": macs,
        "compute_cycles": compute,
        "stall_cycles": total - compute,
        "total_cycles": total,
        "folds": int(costs.folds[0]),
        "mapping_efficiency": float(costs.mapping_efficiency[0]),
        "utilization": macs / (hw.array.peak_macs_per_cycle * max(total, 1)),
        "sram_reads": {
            "ifmap": int(costs.sram_ifmap_read_bytes[0]) // a.word_bytes,
            "filter": int(costs.sram_filter_read_bytes[0]) // b.word_bytes,
        },
        "sram_writes": {"ofmap": int(costs.sram_ofmap_write_bytes[0]) // c.word_bytes},
        "dram_bytes": {
            "ifmap": int(costs.dram_ifmap_read_bytes[0]),
            "filter": int(costs.dram_filter_read_bytes[0]),
            "ofmap": int(costs.dram_ofmap_write_bytes[0]),
            "psum_read": int(costs.dram_ofmap_read_bytes[0]),
        },
        "seconds": total / (hw.clock_mhz * 1e6),
        "energy_pj": energy.total_pj,
        "energy_by_component_pj": energy.by_component_pj,
    }


def _dataflow_run(hw: HardwareSpec, costs: OpCosts) -> str:
    """The dataflow the query's GEMM ran in: ``array.dataflow``, or under
    ``mapping.search`` the one the mapper chose."""
    if costs.mapping is None:
        return hw.array.dataflow.value
    names = {code: d.value for d, code in DATAFLOW_CODE.items()}
    return names[int(costs.mapping.dataflow[0])]
