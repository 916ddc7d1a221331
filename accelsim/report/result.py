"""RunResult: the typed, versioned record of one simulated training step.

Built from the graph, the trace and the energy breakdown; serialised by
:mod:`accelsim.report.writer` to ``summary.json``, ``ops.csv`` and
``layers.csv``.  Conversions from cycles and pJ to seconds and mJ happen here.
The whole-step numbers are a typed :class:`~accelsim.report.summary.StepSummary`
(:meth:`RunResult.step_summary`); :meth:`RunResult.summary` is its dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from accelsim.config.design import design_key, design_values
from accelsim.config.hardware import HardwareSpec
from accelsim.counts import exact_total
from accelsim.energy.model import EnergyBreakdown
from accelsim.energy.power import Silicon
from accelsim.graph import queries
from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, GemmOp, OpGraph, Phase, Stage, TensorKey, VectorOp
from accelsim.mapping.groups import ProcessorGroup, processor_groups
from accelsim.provenance import git_commit, version
from accelsim.report import tables, work
from accelsim.report.communication import by_collective
from accelsim.report.headline import StepHeadline
from accelsim.report.mapping_summary import MappingSummary
from accelsim.report.silicon import SiliconSummary
from accelsim.report.simulated import SimulatedProcessors
from accelsim.report.summary import (
    NAMED_DESIGN_KEYS,
    PROVENANCE_KEY,
    SCHEMA_VERSION,
    DesignKnobs,
    DramBytes,
    EnergySummary,
    MacCounts,
    StashSummary,
    StepSummary,
)
from accelsim.report.tables import LAYER_COLUMNS as LAYER_COLUMNS
from accelsim.report.tables import OP_COLUMNS as OP_COLUMNS
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM
from accelsim.timing.machine import Machine
from accelsim.timing.memory import traffic_bound
from accelsim.timing.sends import dram_of, schedule_of
from accelsim.timing.trace import Trace
from accelsim.timing.weights import op_weights, processor_sum, weighted_count, weighted_total
from accelsim.units import cycles_to_seconds


def design_knobs(hw: HardwareSpec, batch_size: int) -> DesignKnobs:
    """``summary.json``'s ``design`` for a step of ``batch_size`` on ``hw``: every design
    key of the hardware (:func:`~accelsim.config.design.design_values`), the DRAM model's
    own keys first among the other keys."""
    dram = hw.dram
    values = design_values(hw)
    own = [design_key(f"dram.{key}") for key in dram.parameters()]
    others = {k: v for k, v in values.items() if k not in NAMED_DESIGN_KEYS}
    return DesignKnobs(
        rows=hw.array.rows,
        cols=hw.array.cols,
        dataflow=hw.array.dataflow.value,
        ifmap_kib=hw.buffers.ifmap_kib,
        filter_kib=hw.buffers.filter_kib,
        ofmap_kib=hw.buffers.ofmap_kib,
        stash_kib=hw.buffers.stash_kib,
        dram_bandwidth_bytes_per_cycle=dram.bandwidth_bytes_per_cycle,
        dram_latency_cycles=dram.latency_cycles,
        processors=hw.processors,
        clock_mhz=hw.clock_mhz,
        batch_size=batch_size,
        dram_model=dram.model,
        dram_channels=dram.channels,
        other_keys={**{k: others[k] for k in own}, **others},
    )


@dataclass(frozen=True)
class OrderedBounds:
    """A step's cycle bounds split where its graph orders it.

    Attributes:
        before: The :meth:`RunResult.cycle_bounds` of the forward ops without a forward
            op after them (the ends of the forward pass: the loss) and every op they
            wait for.
        after: Those of the ops that wait for all those ends.  No op of ``after``
            starts before every op of ``before`` has ended, so the step takes at
            least the sum of the two parts' binding bounds; ops in neither part only
            add to it.  An empty part bounds nothing (0 cycles).
        before_end_cycles: When the last op of ``before`` ended in the simulated step;
            the step takes at least that plus ``after``'s binding bound.
    """

    before: dict[str, float]
    after: dict[str, float]
    before_end_cycles: int


@dataclass(frozen=True)
class RunResult:
    """One simulated training step with everything needed to report it."""

    name: str
    workload: str
    batch_size: int
    settings: dict[str, str]
    machine: Machine
    graph: OpGraph
    trace: Trace
    energy: EnergyBreakdown
    workload_source: str = ""
    workload_notes: tuple[str, ...] = ()
    silicon: Silicon | None = None

    @property
    def hardware(self) -> HardwareSpec:
        """The hardware spec its machine is built from."""
        return self.machine.hardware

    @property
    def total_cycles(self) -> int:
        return self.trace.total_cycles

    @property
    def dram_bytes(self) -> int:
        """DRAM bytes read and written in the whole step."""
        trace, c = self.trace, self.trace.costs
        return weighted_total(trace, c.dram_read_bytes) + weighted_total(
            trace, c.dram_ofmap_write_bytes
        )

    def cycle_bounds(self, repeats: int = 1) -> dict[str, float]:
        """Lower bounds on the cycles of one of ``repeats`` identical parts of the step.

        Whatever the schedule, the step takes at least the busiest DRAM memory's
        bound for the bytes it moves (:meth:`accelsim.timing.memory.Memory.bound`:
        one memory for all processors when they share it, each processor's own
        otherwise), the busiest link's bound for its bytes, and the busiest
        unit's compute cycles.  A pipeline of ``repeats`` mini-batches bounds its
        period by these over ``repeats``.

        Each op's bytes count on its processor's memory and link, except a
        collective's: as the engine charges them, each participant reads and writes
        its own memory (:func:`~accelsim.timing.sends.dram_of`) and sends its
        schedule's transfers from it.
        """
        bounds = self._bounds_of(np.ones(len(self.graph.ops), dtype=bool))
        return {k: v / repeats for k, v in bounds.items()}

    def ordered_cycle_bounds(self) -> OrderedBounds:
        """The :meth:`cycle_bounds` of the two parts of the step that the graph orders,
        and when the first part ended (:class:`OrderedBounds`)."""
        before, after = _ordered_parts(self.graph)
        if self.trace.replicas > 1:  # the other replicas' ends reach it by a collective
            after &= _after_collectives(self.graph)
        end = self.trace.end_cycle[before]
        return OrderedBounds(
            self._bounds_of(before), self._bounds_of(after), int(end.max()) if end.size else 0
        )

    def _bounds_of(self, mask: np.ndarray) -> dict[str, float]:
        """:meth:`cycle_bounds` of the ops ``mask`` selects (a whole step: all ops)."""
        trace, c = self.trace, self.trace.costs
        per_op = np.where(mask, c.dram_read_bytes + c.dram_ofmap_write_bytes, 0)
        write_op = np.where(mask, c.dram_ofmap_write_bytes, 0)
        channels = trace.per_processor(per_op).astype(np.float64)
        # of them, the writes (reads and writes apart)
        written = trace.per_processor(write_op).astype(np.float64)
        links = trace.per_processor(np.where(mask, c.interconnect_bytes, 0)).astype(np.float64)
        for i in np.flatnonzero((c.unit == UNIT_COMM) & mask).tolist():
            op = self.graph.ops[i]
            if not isinstance(op, CommOp):
                continue
            first = int(trace.processor[i])
            channels[first] -= per_op[i]
            written[first] -= write_op[i]
            links[first] -= c.interconnect_bytes[i]
            for p, (read, write) in zip(op.participants, dram_of(op), strict=True):
                channels[p] += read + write
                written[p] += write
            for step in schedule_of(self.machine, op).steps:
                for t in step:
                    links[t.source] += t.bytes
        memories = self.machine.dram  # one object per memory
        moved: dict[int, float] = {}
        wrote: dict[int, float] = {}
        for p, memory in enumerate(memories):
            moved[id(memory)] = moved.get(id(memory), 0.0) + float(channels[p])
            wrote[id(memory)] = wrote.get(id(memory), 0.0) + float(written[p])
        dram = max(traffic_bound(m, moved[id(m)], wrote[id(m)]) for m in memories)
        compute = 0.0
        for unit in range(len(c.unit_names)):
            if unit == UNIT_COMM:
                continue
            mine = (c.unit == unit) & mask
            work = trace.per_processor(np.where(mine, c.compute_cycles, 0))
            compute = max(compute, float(work.max()))
        return {
            "dram": dram,
            "interconnect": self.machine.link_bound(float(links.max())),
            "compute": compute,
        }

    def layer_busy_cycles(self) -> dict[str, int]:
        """Per layer, the time its ops (all but a technique's auxiliary work) kept units busy."""
        return {layer: sum(by.values()) for layer, by in self.layer_phase_cycles().items()}

    def layer_phase_cycles(self) -> dict[str, dict[str, int]]:
        """Per layer, the time its ops of each phase (all but auxiliary work) kept units busy;
        communication counts with the update."""
        trace = self.trace
        durations = (trace.end_cycle - trace.start_cycle) * op_weights(trace)
        busy: dict[str, dict[str, int]] = {}
        for op in self.graph.ops:
            if op.phase is Phase.AUX:
                continue
            phase = Phase.UPDATE if op.phase is Phase.COMM else op.phase
            by = busy.setdefault(op.layer, {})
            by[phase.value] = by.get(phase.value, 0) + int(durations[op.op_id])
        return busy

    def kernels(self) -> int:
        """Kernels the step launches (:func:`~accelsim.graph.queries.kernels`: a tile
        group is one; a collective none, so each kernel is a replica's)."""
        return queries.kernels(self.graph) * self.trace.replicas

    def utilization(self) -> float:
        """Main-array MACs over the peak MACs of every main-array PE (all ``array.count``
        arrays of every processor, at the GEMMs' rate) for the whole run."""
        hw, c = self.hardware, self.trace.costs
        peak = hw.array.peak_macs_per_cycle * hw.processors * max(self.total_cycles, 1)
        return weighted_total(self.trace, c.macs, c.unit == UNIT_ARRAY) / peak

    def stash(self) -> StashSummary:
        """Footprint and DRAM traffic of the activations saved for backward (every
        stashed tensor a replica's own: in a step placed once, each of the ``replicas``
        processors')."""
        c, times = self.trace.costs, self.trace.replicas
        plan = per_graph(self.graph, "stash plan", lambda: _StashPlan.of(self.graph))
        read = (
            plan.vector_read_bytes
            + exact_total(c.dram_ifmap_read_bytes[plan.a_read])
            + exact_total(c.dram_filter_read_bytes[plan.b_read])
        )
        write = plan.vector_write_bytes + exact_total(c.dram_ofmap_write_bytes[plan.c_written])
        return StashSummary(
            tensors=plan.tensors * times,
            bytes=plan.bytes * times,
            on_chip_bytes=plan.on_chip_bytes * times,
            dram_write_bytes=write * times,
            dram_read_bytes=read * times,
        )

    def step_summary(self) -> StepSummary:
        """The whole-step numbers (schema version :data:`SCHEMA_VERSION`).

        Worked out once per result (``summary.json`` and the printed table both
        need them; a big step's stash pass alone takes a tenth of a second).
        """
        return self._step_summary

    @cached_property
    def headline(self) -> StepHeadline:
        """The whole-step scalars (:class:`~accelsim.report.headline.StepHeadline`) the
        step summary holds, without its per-op breakdowns; worked out once per result."""
        hw, trace, c = self.hardware, self.trace, self.trace.costs
        array = c.unit == UNIT_ARRAY
        array_stall = weighted_total(trace, trace.stall_cycles, array)
        # Stalls are a share of each processor's step: their mean over the used ones.
        used = max(1, int((trace.per_processor(array.astype(np.int64)) > 0).sum()))
        return StepHeadline(
            workload=self.workload,
            settings=self.settings,
            batch_size=self.batch_size,
            design=design_knobs(hw, self.batch_size),
            parameters=sum(p.weight.elements for p in self.graph.parameters),
            macs=weighted_total(trace, c.macs),
            total_cycles=self.total_cycles,
            seconds=cycles_to_seconds(self.total_cycles, hw.clock_mhz),
            utilization=self.utilization(),
            array_stall_cycles=array_stall,
            stall_fraction=array_stall / (used * max(self.total_cycles, 1)),
            dram_read_bytes=weighted_total(trace, c.dram_read_bytes),
            dram_write_bytes=weighted_total(trace, c.dram_ofmap_write_bytes),
            interconnect_bytes=weighted_total(trace, c.interconnect_bytes),
            energy_pj=self.energy.total_pj,
            energy_by_component_pj=self.energy.by_component_pj,
            silicon=self._silicon_summary(),
        )

    @cached_property
    def _step_summary(self) -> StepSummary:
        hw, trace, c, head = self.hardware, self.trace, self.trace.costs, self.headline
        codes = {p: i for i, p in enumerate(Phase)}
        ops = self.graph.ops
        phases = per_graph(
            self.graph,
            "phase codes",
            lambda: np.fromiter((codes[op.phase] for op in ops), np.int64, len(ops)),
        )

        def phase_macs(phase: Phase) -> int:
            return weighted_total(trace, c.macs, phases == codes[phase])

        op_pj = self.energy.op_pj
        by_phase = {p.value: processor_sum(trace, op_pj, phases == codes[p]) for p in Phase}
        by_phase["static"] = self.energy.static_pj
        dram_read, dram_write = head.dram_read_bytes, head.dram_write_bytes
        return StepSummary(
            schema_version=SCHEMA_VERSION,
            accelsim_version=version(),
            git_commit=git_commit(),
            run=self.name,
            workload=self.workload,
            hardware=hw.name,
            batch_size=self.batch_size,
            processors=hw.processors,
            array=hw.array.label,
            design=head.design,
            settings=self.settings,
            clock_mhz=hw.clock_mhz,
            total_cycles=self.total_cycles,
            seconds=head.seconds,
            ops=weighted_count(trace),
            macs=MacCounts(
                fwd=phase_macs(Phase.FWD),
                bwd_input=phase_macs(Phase.BWD_INPUT),
                bwd_weight=phase_macs(Phase.BWD_WEIGHT),
                aux=phase_macs(Phase.AUX),
                total=head.macs,
            ),
            vector_ops=weighted_total(trace, c.vector_ops),
            utilization=head.utilization,
            array_stall_cycles=head.array_stall_cycles,
            stall_fraction=head.stall_fraction,
            busy_cycles={
                name: tuple(trace.busy_cycles(u).tolist())
                for u, name in enumerate(c.unit_names)
                if u != UNIT_COMM
            },
            dram_bytes=DramBytes(read=dram_read, write=dram_write, total=dram_read + dram_write),
            interconnect_bytes=head.interconnect_bytes,
            parameters=head.parameters,
            stash=self.stash(),
            energy_pj=EnergySummary(
                total=head.energy_pj,
                by_component=head.energy_by_component_pj,
                by_phase=by_phase,
            ),
            stages=work.by_stage(self.graph, trace, op_pj),
            owners=work.by_owner(self.graph, trace, op_pj),
            communication=by_collective(self.graph, trace),
            groups=self.groups(),
            symmetry=SimulatedProcessors.of(trace.copies, trace.processors, trace.unsymmetric),
            silicon=head.silicon,
            mapping=MappingSummary.of(c, op_weights(trace)),
        )

    def _silicon_summary(self) -> SiliconSummary | None:
        silicon = self.silicon
        if silicon is None:
            return None
        seconds = cycles_to_seconds(self.total_cycles, self.hardware.clock_mhz)
        return SiliconSummary.of(silicon, self.batch_size, seconds, self.energy.total_pj)

    def groups(self) -> tuple[ProcessorGroup, ...]:
        """The placed step's processor groups and their spans on the topology
        (:mod:`accelsim.mapping.groups`)."""
        return processor_groups(self.graph, self.machine.network, self.hardware.interconnect)

    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` record: :meth:`step_summary` as a dict, and, for a
        workload with ``notes`` (an imported one's assumptions), its source and notes
        under ``workload_provenance``."""
        record = self.step_summary().to_dict()
        if self.workload_notes:
            record[PROVENANCE_KEY] = {
                "source": self.workload_source,
                "notes": list(self.workload_notes),
            }
        return record

    def ops_csv(self) -> str:
        """The text of ``ops.csv``: the header, then one row per op."""
        return tables.ops_csv(
            tables.op_columns(self.graph, self.trace, self.energy.op_pj, self.hardware),
            tables.op_header(self.trace),
        )

    def op_rows(self) -> list[dict[str, Any]]:
        """One ``ops.csv`` row per op."""
        rows = tables.op_rows(self.graph, self.trace, self.energy.op_pj, self.hardware)
        header = tables.op_header(self.trace)
        return [dict(zip(header, row, strict=True)) for row in rows]

    def layer_rows(self) -> list[dict[str, Any]]:
        """One ``layers.csv`` row per layer, in order of first appearance."""
        return tables.layer_rows(self.graph, self.trace, self.energy.op_pj)


@dataclass(frozen=True)
class _StashPlan:
    """What the stash summary takes from the graph alone: the stashed tensors' count,
    bytes and bytes kept on chip, the vector ops' stash traffic (their accesses are
    whole tensors), and which GEMMs' DRAM traffic is stash traffic: the backward GEMMs
    reading a stashed operand (``a`` from the ifmap reads, ``b`` from the filter
    reads) and the forward GEMMs writing a stashed result."""

    tensors: int
    bytes: int
    on_chip_bytes: int
    vector_read_bytes: int
    vector_write_bytes: int
    a_read: np.ndarray
    b_read: np.ndarray
    c_written: np.ndarray

    @staticmethod
    def of(graph: OpGraph) -> _StashPlan:
        stashed, on_chip = graph.stashed, graph.on_chip
        sizes: dict[TensorKey, int] = {}
        a_read: list[int] = []
        b_read: list[int] = []
        c_written: list[int] = []
        write = read = 0
        for op in graph.ops:
            backward, forward = op.stage is Stage.BACKWARD, op.stage is Stage.FORWARD
            if isinstance(op, GemmOp):
                for t, reads in ((op.a, a_read), (op.b, b_read)):
                    if t.key in stashed:
                        sizes[t.key] = t.bytes
                        if backward:
                            reads.append(op.op_id)
                if forward and op.c.key in stashed:
                    c_written.append(op.op_id)
            elif isinstance(op, VectorOp):
                for acc in op.reads:
                    key = acc.tensor.key
                    if key in stashed:
                        sizes[key] = acc.tensor.bytes
                        if backward and key not in on_chip:
                            read += acc.bytes
                if forward:
                    for acc in op.writes:
                        key = acc.tensor.key
                        if key in stashed and key not in on_chip:
                            write += acc.bytes
        return _StashPlan(
            tensors=len(sizes),
            bytes=sum(sizes.values()),
            on_chip_bytes=sum(b for key, b in sizes.items() if key in on_chip),
            vector_read_bytes=read,
            vector_write_bytes=write,
            a_read=np.asarray(a_read, np.int64),
            b_read=np.asarray(b_read, np.int64),
            c_written=np.asarray(c_written, np.int64),
        )


def _ordered_parts(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`RunResult.ordered_cycle_bounds`' two parts of ``graph``, as op masks."""
    n = len(graph.ops)
    forward = [op.stage is Stage.FORWARD for op in graph.ops]
    later_forward = [False] * n  # a forward op waits for the op, directly or not
    for op in reversed(graph.ops):
        for d in op.deps:
            later_forward[d] = later_forward[d] or forward[op.op_id] or later_forward[op.op_id]
    ends = [i for i in range(n) if forward[i] and not later_forward[i]]
    every = (1 << len(ends)) - 1
    reached = [0] * n  # per op, the ends it waits for (one bit each), itself included
    for bit, i in enumerate(ends):
        reached[i] = 1 << bit
    for op in graph.ops:
        for d in op.deps:
            reached[op.op_id] |= reached[d]
    before = np.zeros(n, dtype=bool)
    before[ends] = True
    for op in reversed(graph.ops):
        if before[op.op_id]:
            before[list(op.deps)] = True
    after = np.array([bool(ends) and r == every for r in reached], dtype=bool) & ~before
    return before, after


def _after_collectives(graph: OpGraph) -> np.ndarray:
    """Which ops of ``graph`` are collectives or wait for one, directly or not."""
    after = np.zeros(len(graph.ops), dtype=bool)
    for op in graph.ops:
        after[op.op_id] = isinstance(op, CommOp) or any(after[d] for d in op.deps)
    return after
