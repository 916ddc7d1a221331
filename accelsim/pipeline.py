"""The whole flow: load inputs -> lower -> place -> cost -> simulate -> energy -> result.

Sits on top of the layered core; ``cli.py`` calls it, and so can scripts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import (
    Override,
    RunFile,
    display_path,
    dump_yaml,
    load_energy,
    load_hardware,
    load_run_file,
    load_suite,
    read_yaml,
)
from accelsim.config.run import PsumPolicy, RunSpec, TimingSpec
from accelsim.config.validate import suggest
from accelsim.energy.model import check_table, estimate_energy
from accelsim.errors import ConfigError, InputError, Problem, WorkloadError
from accelsim.mapping.assignment import assign
from accelsim.mapping.residency import keep_stash_on_chip
from accelsim.mapping.units import ArrayUnit
from accelsim.report.result import RunResult, TrainingResult
from accelsim.techniques.base import Technique, TechniqueContext
from accelsim.techniques.registry import load_techniques
from accelsim.timing.costs import op_costs
from accelsim.timing.engine import simulate
from accelsim.workload.loader import load_workload
from accelsim.workload.lowering import GraphBuilder, StepHooks
from accelsim.workload.model import Workload
from accelsim.graph.ops import OpGraph, Phase, TensorKind
from accelsim.workload.shapes import LayerInfo, infer_shapes
from accelsim.workload.topology import TopologyLayer

T = TypeVar("T")


@dataclass(frozen=True)
class RunInputs:
    """Everything a run needs, loaded and validated."""

    run_file: RunFile
    hardware: HardwareSpec
    energy: EnergyTable
    workload: Workload
    infos: tuple[LayerInfo, ...]
    techniques: tuple[Technique, ...] = ()

    @property
    def run(self) -> RunSpec:
        return self.run_file.run

    @property
    def extra_arrays(self) -> tuple[ArrayUnit, ...]:
        """Array units the techniques add to every processor."""
        return tuple(a for t in self.techniques for a in t.add_components(self.hardware))

    def context(self) -> TechniqueContext:
        extra = self.extra_arrays
        return TechniqueContext(
            self.run,
            self.run_file.path,
            self.hardware,
            self.workload,
            self.infos,
            extra,
            lambda graph: simulate_graph(self, graph, extra, "candidate"),
        )


def load_inputs(path: Path, sets: list[Override] | None = None) -> RunInputs:
    """Load a run file and every file it references, reporting all their problems at once.

    Raises:
        ConfigError: for problems in the run, hardware or energy files (with any
            workload problems found too).
        WorkloadError: when only the workload file has problems.
    """
    run_file = load_run_file(path, sets)
    errors: list[InputError] = []

    def attempt(load: Callable[[Path, list[Override]], T], target: Path, section: str) -> T | None:
        try:
            return load(target, run_file.overrides[section])
        except InputError as exc:
            errors.append(exc)
            return None

    hardware = attempt(load_hardware, run_file.hardware_path, "hardware")
    energy = attempt(load_energy, run_file.energy_path, "energy")
    variant = run_file.run.workload_variant
    chosen = (
        None
        if variant is None
        else Override("workload_variant", variant, display_path(run_file.path), "workload_variant")
    )
    workload = attempt(lambda p, o: load_workload(p, o, chosen), run_file.workload_path, "workload")
    if errors or hardware is None or energy is None or workload is None:
        raise type(errors[0])([p for e in errors for p in e.problems])
    infos = infer_shapes(workload, display_path(run_file.workload_path))
    techniques = load_techniques(run_file.run.techniques, display_path(run_file.path))
    inputs = RunInputs(run_file, hardware, energy, workload, tuple(infos), tuple(techniques))
    check_table(energy, hardware, display_path(run_file.energy_path), inputs.extra_arrays)
    return inputs


def resolved_config(inputs: RunInputs) -> str:
    """YAML of every input after overrides: enough to repeat the run."""
    return dump_yaml(
        {
            "run": inputs.run.model_dump(mode="json"),
            "hardware": inputs.hardware.model_dump(mode="json"),
            "energy": inputs.energy.model_dump(mode="json"),
            "workload": inputs.workload.model_dump(mode="json", exclude_none=True),
        }
    )


@dataclass(frozen=True)
class SuiteEntry:
    """One model of a suite and its workload file."""

    name: str
    workload_path: Path


def suite_entries(suite_path: Path, selected: list[str] | None = None) -> list[SuiteEntry]:
    """The models of a suite file, optionally only those named in ``selected`` (in suite order).

    Raises:
        ConfigError: for a bad suite file or an unknown model name.
    """
    suite = load_suite(suite_path)
    entries = [SuiteEntry(m.name, suite_path.parent / m.workload) for m in suite.models]
    if selected is None:
        return entries
    known = [e.name for e in entries]
    unknown = [name for name in selected if name not in known]
    if unknown:
        raise ConfigError(
            [Problem("--models", "", "unknown model; " + suggest(n, known), n) for n in unknown]
        )
    return [e for e in entries if e.name in selected]


def suite_inputs(run_path: Path, entry: SuiteEntry, sets: list[Override]) -> RunInputs:
    """Load the run file with its workload replaced by ``entry``'s.

    A ``workload_variant`` the model does not define (a CIFAR variant for a
    language model, say) is dropped for that model.
    """
    workload = Override("workload", str(entry.workload_path.resolve()), "suite", "workload")
    run = load_run_file(run_path, [*sets, workload]).run
    variants = read_yaml(entry.workload_path, WorkloadError).get("variants")
    extra = [workload]
    if run.workload_variant is not None and not (
        isinstance(variants, dict) and run.workload_variant in variants
    ):
        extra.append(Override("workload_variant", None, "suite", "workload_variant"))
    return load_inputs(run_path, [*sets, *extra])


def simulate_training(inputs: RunInputs) -> TrainingResult:
    """Simulate the baseline step and every step kind the run's techniques define.

    Raises:
        ConfigError: if more than one technique defines step kinds or a placement.
    """
    base = simulate_run(inputs)
    ctx = inputs.context()
    owners: list[tuple[Technique, dict[str, RunResult]]] = []
    for t in inputs.techniques:
        graph = t.assign(ctx, base)
        if graph is not None:
            owners.append((t, {t.name: simulate_graph(inputs, graph, ctx.extra_arrays, t.name)}))
        kinds = t.step_kinds(ctx)
        if kinds:
            steps = {
                kind: simulate_run(inputs, hooks, ctx.extra_arrays, step=kind)
                for kind, hooks in kinds.items()
            }
            owners.append((t, steps))
    if len(owners) > 1:
        names = [t.name for t, _ in owners]
        raise ConfigError.single(
            display_path(inputs.run_file.path),
            "techniques",
            "at most one technique may define its own steps or placement",
            names,
        )
    if not owners:
        return TrainingResult(base, {}, None)
    technique, steps = owners[0]
    return TrainingResult(base, steps, technique.training(ctx, base, steps))


def simulate_run(
    inputs: RunInputs,
    hooks: StepHooks | None = None,
    extra_arrays: Sequence[ArrayUnit] = (),
    step: str = "base",
) -> RunResult:
    """Simulate one training step of the run: the baseline, or a technique's ``hooks``."""
    run = inputs.run
    graph = assign(
        run.assignment,
        inputs.infos,
        inputs.workload,
        inputs.hardware,
        run.batch_size,
        run.lowering.strided_dx,
        run.optimizer.kind,
        display_path(inputs.run_file.path),
        hooks,
    )
    return simulate_graph(inputs, graph, extra_arrays, step)


def simulate_graph(
    inputs: RunInputs, graph: OpGraph, extra_arrays: Sequence[ArrayUnit] = (), step: str = "base"
) -> RunResult:
    """Simulate an op graph already placed on processors, on the run's hardware."""
    run, hw = inputs.run, inputs.hardware
    graph = keep_stash_on_chip(graph, hw.buffers.stash_bytes)
    costs = op_costs(
        graph,
        hw,
        run.timing.convention,
        run.timing.psums,
        run.timing.chunks_per_op,
        extra_arrays,
    )
    trace = simulate(graph, costs, hw)
    energy = estimate_energy(trace, hw, inputs.energy)
    settings = {
        "step": step,
        "convention": run.timing.convention.value,
        "assignment": run.assignment.value,
        "optimizer": run.optimizer.kind.value,
        "strided_dx": run.lowering.strided_dx.value,
        "psums": run.timing.psums.value,
        "workload_variant": run.workload_variant or "",
    }
    return RunResult(
        run.name, inputs.workload.name, run.batch_size, settings, hw, graph, trace, energy
    )


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
    if phase is Phase.FWD:
        return LayerGemm(p * q, k, r * s * c, touched, r * s * c * k)
    if phase is Phase.BWD_INPUT:
        return LayerGemm(h * w, c, k * r * s, p * q * k, k * r * s * c)
    return LayerGemm(k, r * s * c, p * q, k * p * q, touched)


def topology_gemm(layer: TopologyLayer, phase: Phase, convention: Convention) -> LayerGemm:
    """The GEMM of ``phase`` for one row of a SCALE-Sim topology."""
    if layer.kind == "gemm":
        m, n, k = layer.dims
        return gemm_for(m, n, k, phase)
    h, w, r, s, c, nf, stride = layer.dims
    return conv_gemm(h, w, r, s, c, nf, stride, phase, convention)


def _touched(size: int, kernel: int, stride: int, windows: int) -> int:
    covered: set[int] = set()
    for e in range(windows):
        covered.update(range(e * stride, min(size, e * stride + kernel)))
    return len(covered)


def simulate_layer(
    hw: HardwareSpec,
    table: EnergyTable,
    gemm: LayerGemm,
    phase: Phase,
    convention: Convention,
    psums: PsumPolicy = PsumPolicy.CHUNK,
) -> dict[str, Any]:
    """Simulate one GEMM at batch 1 and return the ``accelsim layer --json`` record."""
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
    graph = builder.build()
    costs = op_costs(graph, hw, convention, psums, TimingSpec().chunks_per_op)
    trace = simulate(graph, costs, hw)
    energy = estimate_energy(trace, hw, table)
    rows, cols = hw.array.rows, hw.array.cols
    compute = int(costs.compute_cycles[0])
    total = trace.total_cycles
    macs = int(costs.macs[0])
    return {
        "phase": phase.value,
        "convention": convention.value,
        "psums": psums.value,
        "array": {"rows": rows, "cols": cols, "dataflow": hw.array.dataflow.value},
        "m": gemm.m,
        "n": gemm.n,
        "k": gemm.k,
        "macs": macs,
        "compute_cycles": compute,
        "stall_cycles": total - compute,
        "total_cycles": total,
        "folds": int(costs.folds[0]),
        "mapping_efficiency": float(costs.mapping_efficiency[0]),
        "utilization": macs / (rows * cols * max(total, 1)),
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
