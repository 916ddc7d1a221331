"""The training report: a run's techniques against its baseline step, over training.

Every run with techniques reports the same typed record, :class:`TrainingReport`:
what one step of each step kind costs (:class:`StepCost`, with its lower bound and
the resource that sets it), how the epochs share out among the kinds, and the
whole-training totals, speedup, bound and reductions those give.  These are the
composed run's numbers, computed once from the composed steps, whichever
techniques the run has; each technique adds its own part as a :class:`Section`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the steps' results and what they add, built by the driver
    from accelsim.energy.iso_area import IsoAreaMatch
    from accelsim.mapping.memory import MemoryBreakdown
    from accelsim.report.result import RunResult
    from accelsim.timing.pipeline_step import PipelineStep

BASE = "base"
"""The step kind of the baseline step: the lowered step, no technique applied."""

METRICS = ("cycles", "energy_pj", "dram_bytes", "bound_cycles")


@dataclass(frozen=True)
class StepCost:
    """What one training step of a kind costs: cycles, energy and DRAM bytes, and the
    lower bound on its cycles with the resource that sets it."""

    cycles: float
    energy_pj: float
    dram_bytes: float
    bound_cycles: float
    binding_bound: str

    @classmethod
    def of(cls, result: RunResult) -> StepCost:
        """A step simulated on its own: its totals."""
        bounds = result.cycle_bounds()
        binding = max(bounds, key=lambda k: bounds[k])
        return cls(
            result.total_cycles,
            result.energy.total_pj,
            result.dram_bytes,
            bounds[binding],
            binding,
        )

    @classmethod
    def per(
        cls, result: RunResult, cycles: float, bounds: Mapping[str, float], repeats: int
    ) -> StepCost:
        """One of ``repeats`` identical parts of ``result`` (a pipeline's mini-batch)
        taking ``cycles``, with the cycle ``bounds`` of one part."""
        binding = max(bounds, key=lambda k: bounds[k])
        return cls(
            cycles,
            result.energy.total_pj / repeats,
            result.dram_bytes / repeats,
            bounds[binding],
            binding,
        )


@dataclass(frozen=True)
class Totals:
    """A whole-training total: the baseline's and the run's with its techniques."""

    baseline: float
    technique: float


@dataclass(frozen=True)
class TrainingPlan:
    """How training is shared out among the step kinds.

    Attributes:
        epochs: Epochs trained.
        batches_per_epoch: Training steps per epoch.
        shares: Per epoch, the share of its steps that are of each kind (summing
            to 1): the kind-defining technique's schedule, or every step of the
            one kind.
    """

    epochs: int
    batches_per_epoch: int
    shares: tuple[Mapping[str, float], ...]

    def totals(self, costs: Mapping[str, StepCost]) -> dict[str, Totals]:
        """Whole-training totals per metric (:data:`METRICS`) for what one step of each
        kind costs (``costs``, the baseline's under :data:`BASE`).

        ``bound_cycles`` sums each step's lower bound on its cycles, so the
        baseline's total cycles over the technique's ``bound_cycles`` is the most
        the run can speed training up by.
        """
        totals = {}
        for metric in METRICS:
            per_step = {kind: getattr(cost, metric) for kind, cost in costs.items()}
            technique = self.batches_per_epoch * sum(
                sum(share * per_step[kind] for kind, share in epoch.items())
                for epoch in self.shares
            )
            baseline = self.epochs * self.batches_per_epoch * per_step[BASE]
            totals[metric] = Totals(baseline, technique)
        return totals


class Source(str, Enum):
    """Where an input of a technique's model comes from."""

    PAPER = "paper"  # stated in the technique's paper (as far as we could read it)
    REIMPLEMENTATION = "reimplementation"  # a third-party re-implementation's report
    RECALLED = "recalled"  # recalled from the paper, not verified: kept configurable
    OURS = "ours"  # accelsim's own choice, documented as such
    TRACE = "trace"  # read from a trace of a real training run the run names
    RUN = "run"  # set in the run file (or with --set, or in the workload)


@dataclass(frozen=True)
class Input:
    """One input of a technique's model: its key, its value in this run, where it
    comes from and on what basis."""

    key: str
    value: Any
    source: Source
    basis: str


@dataclass(frozen=True)
class Section:
    """One technique's own part of a training report.

    Attributes:
        technique: The technique's registered name.
        details: What it reports beyond the shared numbers (plain JSON values).
        lines: What ``accelsim run`` prints of it, as (label, value) pairs.
        notes: Remarks on how to read its numbers.
        warnings: What a reader must not miss (a figure clamped to a bound, say).
        inputs: Every input of its model with where it comes from (its provenance).
        internal: Keys of ``details`` that say how a number was measured rather than
            what it is (``summary.json`` keeps them; CSV rows leave them out).
    """

    technique: str
    details: Mapping[str, Any]
    lines: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    inputs: tuple[Input, ...] = ()
    internal: tuple[str, ...] = ()

    def provenance(self) -> str:
        """Its inputs' keys by source, in one line: what comes from the paper, from a
        trace, what is our choice and what the run set (keys of one group written
        once: ``array.{rows, cols}``)."""
        parts = []
        for source in Source:
            keys = [i.key for i in self.inputs if i.source is source]
            if keys:
                parts.append(f"{source.value}: {_grouped(keys)}")
        return "; ".join(parts)


def _grouped(keys: Sequence[str]) -> str:
    """``keys`` joined, those under one group (``a.b``, ``a.c``) as ``a.{b, c}``."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        head, dot, tail = key.partition(".")
        groups.setdefault(head if dot else key, []).append(tail if dot else "")
    words = []
    for head, tails in groups.items():
        if tails == [""]:
            words.append(head)
        elif len(tails) == 1:
            words.append(f"{head}.{tails[0]}")
        else:
            words.append(f"{head}.{{{', '.join(tails)}}}")
    return ", ".join(words)


@dataclass(frozen=True)
class TrainingReport:
    """A run's techniques against its baseline step, over the whole training run.

    Attributes:
        techniques: The run's techniques, in the order they compose.
        plan: The epochs, steps per epoch and each epoch's shares of step kinds.
        steps: What one step costs, the baseline's (:data:`BASE`) and each kind's
            (after every technique's correction, e.g. approximate dropout's mean over
            its drawn patterns; a pipeline's steady period per mini-batch).
        totals: Whole-training totals per metric (:data:`METRICS`).
        sections: Each technique's own part, in the order they compose.
    """

    techniques: tuple[str, ...]
    plan: TrainingPlan
    steps: Mapping[str, StepCost]
    totals: Mapping[str, Totals]
    sections: Mapping[str, Section]

    @classmethod
    def of(
        cls,
        techniques: Sequence[str],
        plan: TrainingPlan,
        steps: Mapping[str, StepCost],
        sections: Sequence[Section],
    ) -> TrainingReport:
        """The report of steps costing ``steps`` shared out by ``plan``."""
        return cls(
            tuple(techniques),
            plan,
            dict(steps),
            plan.totals(steps),
            {s.technique: s for s in sections},
        )

    @property
    def speedup(self) -> float:
        """Whole-training cycles of the baseline over the run's."""
        cycles = self.totals["cycles"]
        return cycles.baseline / cycles.technique

    @property
    def speedup_bound(self) -> float:
        """The most the run's steps allow: the baseline's cycles over the run's bound."""
        return self.totals["cycles"].baseline / self.totals["bound_cycles"].technique

    @property
    def binding_bound(self) -> str:
        """The resource that bounds every step kind, or each kind's when they differ."""
        kinds = {kind: cost for kind, cost in self.steps.items() if kind != BASE}
        binding = {cost.binding_bound for cost in kinds.values()}
        if len(binding) == 1:
            return binding.pop()
        return ", ".join(f"{kind} {cost.binding_bound}" for kind, cost in kinds.items())

    @property
    def energy_reduction(self) -> float:
        """The share of the baseline's whole-training energy the run saves."""
        energy = self.totals["energy_pj"]
        return 1 - energy.technique / energy.baseline

    @property
    def dram_reduction(self) -> float:
        """The share of the baseline's whole-training DRAM traffic the run saves."""
        dram = self.totals["dram_bytes"]
        return 1 - dram.technique / dram.baseline

    @property
    def notes(self) -> tuple[str, ...]:
        """Every section's notes, each after its technique's name."""
        return tuple(f"{s.technique}: {n}" for s in self.sections.values() for n in s.notes)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every section's warnings, each after its technique's name."""
        return tuple(f"{s.technique}: {w}" for s in self.sections.values() for w in s.warnings)

    def to_dict(self) -> dict[str, Any]:
        """The ``training`` section of ``summary.json``."""
        return {
            "techniques": list(self.techniques),
            "epochs": self.plan.epochs,
            "batches_per_epoch": self.plan.batches_per_epoch,
            "steps": {kind: dataclasses.asdict(cost) for kind, cost in self.steps.items()},
            "kinds_by_epoch": [dict(epoch) for epoch in self.plan.shares],
            **{metric: dataclasses.asdict(t) for metric, t in self.totals.items()},
            "speedup": self.speedup,
            "speedup_bound": self.speedup_bound,
            "binding_bound": self.binding_bound,
            "energy_reduction": self.energy_reduction,
            "dram_reduction": self.dram_reduction,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "sections": {
                name: {
                    **s.details,
                    **({"notes": list(s.notes)} if s.notes else {}),
                    **({"warnings": list(s.warnings)} if s.warnings else {}),
                    **(
                        {
                            "inputs": [
                                {
                                    "key": i.key,
                                    "value": i.value,
                                    "source": i.source.value,
                                    "basis": i.basis,
                                }
                                for i in s.inputs
                            ]
                        }
                        if s.inputs
                        else {}
                    ),
                }
                for name, s in self.sections.items()
            },
        }

    def flat(self) -> dict[str, Any]:
        """The report's scalars for a CSV row (``suite.csv``, a sweep's records).

        The shared numbers under their own names, the cycles of one step of each
        kind as ``<kind>_step_cycles``, then each section's top-level numbers and
        words under their own names, or ``<technique>.<name>`` where two sections
        (or a section and a shared number) use the same name; not a section's
        ``internal`` keys.  Cycles (a name with ``cycles`` in it) are whole numbers,
        rounded to the nearest: a mean period of 686,647.5 cycles is 686,648.
        """
        row: dict[str, Any] = {
            "techniques": "+".join(self.techniques),
            "speedup": self.speedup,
            "speedup_bound": self.speedup_bound,
            "binding_bound": self.binding_bound,
            "energy_reduction": self.energy_reduction,
            "dram_reduction": self.dram_reduction,
            **{f"{kind}_step_cycles": _whole(cost.cycles) for kind, cost in self.steps.items()},
        }
        scalars = {
            name: {
                key: _whole(value) if "cycles" in key else value
                for key, value in s.details.items()
                if isinstance(value, int | float | str) and key not in s.internal
            }
            for name, s in self.sections.items()
        }
        seen: dict[str, int] = {}
        for values in scalars.values():
            for key in values:
                seen[key] = seen.get(key, 0) + 1
        for name, values in scalars.items():
            for key, value in values.items():
                row[key if seen[key] == 1 and key not in row else f"{name}.{key}"] = value
        return row


def _whole(cycles: Any) -> Any:
    """A finite float count of cycles rounded to the nearest whole number (half up);
    anything else as it is."""
    if isinstance(cycles, float) and math.isfinite(cycles):
        return math.floor(cycles + 0.5)
    return cycles


@dataclass(frozen=True)
class TrainingResult:
    """The baseline step, each step kind the run's techniques simulate, and their
    training report (:class:`TrainingReport`; None for a
    run without techniques)."""

    base: RunResult
    steps: dict[str, RunResult]
    training: TrainingReport | None
    memory: MemoryBreakdown | None = None
    iso_area: IsoAreaMatch | None = None
    pipeline: PipelineStep | None = None
    """A pipeline plan's step (``base`` is then one micro-batch of every chunk)."""

    def summary(self) -> dict[str, Any]:
        """The baseline step's summary, with the training report when there is one
        (under ``training``, after the keys of
        :meth:`accelsim.report.summary.StepSummary.to_dict`), a processor's memory
        by class when the run has a parallel plan (under ``memory``), what an
        iso-area run shrank (under ``iso_area``), and a pipeline plan's step (its
        cycles and seconds, and its ``pipeline`` section)."""
        summary = self.step_record()
        if self.pipeline is not None:  # its report loads with the plan's step
            from accelsim.report.pipeline import pipeline_dict
            from accelsim.report.summary import PIPELINE_KEY

            summary[PIPELINE_KEY] = pipeline_dict(self.pipeline)
        if self.training is not None:
            summary["training"] = self.training.to_dict()
        if self.memory is not None:
            summary["memory"] = self.memory.to_dict()
        if self.iso_area is not None:
            summary["iso_area"] = self.iso_area.to_dict()
        return summary

    def step_record(self) -> dict[str, Any]:
        """The baseline step's summary; under a pipeline plan, with the step's cycles
        and seconds and the plan's processor groups in place of its micro-batch's."""
        record = self.base.summary()
        if self.pipeline is None:
            return record
        from accelsim.report.pipeline import pipeline_groups, with_pipeline

        base = self.base
        groups = pipeline_groups(self.pipeline, base.machine.network, base.hardware.interconnect)
        record = with_pipeline(record, self.pipeline, base.hardware.clock_mhz)
        return record | {"groups": [group.to_dict() for group in groups]}

    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` record: the same dict as :meth:`summary`."""
        return self.summary()

    def to_records(self) -> list[dict[str, Any]]:
        """One flat record per simulated step kind, ``"base"`` first, then each of ``steps``.

        Each record has ``step``, ``total_cycles``, ``seconds``, ``energy_pj``
        (total), ``dram_bytes`` (total), ``macs`` (total), ``utilization`` and
        ``interconnect_bytes``, taken from that step's :meth:`RunResult.step_summary`.
        """
        records = []
        for step, result in [("base", self.base), *self.steps.items()]:
            s = result.step_summary()
            records.append(
                {
                    "step": step,
                    "total_cycles": s.total_cycles,
                    "seconds": s.seconds,
                    "energy_pj": s.energy_pj.total,
                    "dram_bytes": s.dram_bytes.total,
                    "macs": s.macs.total,
                    "utilization": s.utilization,
                    "interconnect_bytes": s.interconnect_bytes,
                }
            )
        if self.pipeline is not None:
            from accelsim.report.pipeline import with_pipeline

            records[0] = with_pipeline(records[0], self.pipeline, self.base.hardware.clock_mhz)
        return records
