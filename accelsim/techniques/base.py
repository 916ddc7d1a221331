"""The technique plug-in contract.

A technique is a class with a validated ``Config`` (a frozen pydantic spec, read
from the run file's ``techniques.<name>`` section) and any of these hooks, all
optional, which the driver (:mod:`accelsim.driver`) calls in this order:

* :meth:`Technique.validate`: load-time checks against the hardware, workload
  and run, so ``accelsim check`` rejects a bad configuration before anything is
  simulated;
* :meth:`Technique.add_components`: extra array units per processor;
* :meth:`Technique.defines_kinds` and :meth:`Technique.step_kinds`: the kinds of
  training step the technique splits training into (ADA-GP's BP and GP steps,
  gradient skipping's skip sets); at most one technique defines them;
* :meth:`Technique.rewrite_graph`: a graph-to-graph pass on one replica's step
  graph of each step kind, run in :class:`RewritePhase` order and in run-file
  order within a phase;
* :meth:`Technique.place`: the whole step placed on processors (a pipeline
  schedule over several mini-batches) instead of the run's ``assignment``; at
  most one technique places;
* :meth:`Technique.mask_tiles`: per-fold masks of GEMMs, handed to the
  :class:`~accelsim.mapping.schedule.FoldSchedule`;
* :meth:`Technique.adjust_counters`: a change to a simulated step's result
  (extra unit energy, say);
* :meth:`Technique.step_cost`: what one training step of a placed graph costs
  (the placing technique's: a pipeline's steady state per mini-batch);
* :meth:`Technique.expected_cost`: that cost corrected for what the one
  simulated step does not show (approximate dropout's mean over its drawn
  patterns);
* :meth:`Technique.kind_shares`: the share of each epoch's steps that are of each
  kind (the technique that defines step kinds);
* :meth:`Technique.training`: its section of the training report
  (:class:`~accelsim.report.training.Section`); the shared numbers (totals,
  speedup, bound, reductions) are the driver's, computed once for the composed
  steps (:class:`~accelsim.report.training.TrainingReport`).

Techniques declare the ones they cannot be combined with in ``conflicts``, and
the weight gradients they pack in :meth:`Technique.packed_weight_gradients`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import ClassVar

import numpy as np

from accelsim.config.base import Spec
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.errors import Problem
from accelsim.graph.ops import OpGraph
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.placement import StepGraph
from accelsim.mapping.schedule import FoldSchedule
from accelsim.mapping.units import ArrayUnit
from accelsim.report.result import RunResult
from accelsim.report.training import BASE, Section, StepCost, TrainingPlan
from accelsim.techniques.provenance import Origin
from accelsim.workload.model import Workload

__all__ = [
    "BASE",
    "LoadContext",
    "Rewrite",
    "RewritePhase",
    "Section",
    "SimulatedStep",
    "StepCost",
    "Technique",
    "TechniqueContext",
    "TrainingPlan",
]

Rewrite = Callable[[OpGraph], OpGraph]
"""A graph-to-graph pass in place of a technique's rewrite (``TechniqueContext.cost_of``)."""


class RewritePhase(IntEnum):
    """When a technique's ``rewrite_graph`` runs: work is removed before work is
    added, and fusion comes last."""

    PRUNE = 0
    AUGMENT = 1
    FUSE = 2


@dataclass(frozen=True)
class LoadContext:
    """What a technique's load-time validation may read (``techniques``: every
    technique of the run, this one included)."""

    run: RunSpec
    run_file: Path
    hardware: HardwareSpec
    infos: tuple[LayerInfo, ...]
    techniques: tuple[Technique, ...] = ()


@dataclass(frozen=True)
class TechniqueContext:
    """What a technique may read about the run it is part of.

    Attributes:
        simulate: Simulates a placed graph on the run's hardware (results are
            cached, so simulating the same graph object again costs nothing).
        cost_of: What one step of a kind costs when some techniques' rewrites are
            replaced (by name) by other passes, everything else as in the run: the
            same other rewrites, placement and cost (a technique's bound on the
            composed step, such as "gradient skipping skips everything").
    """

    run: RunSpec
    run_file: Path
    hardware: HardwareSpec
    workload: Workload
    infos: tuple[LayerInfo, ...]
    extra_arrays: tuple[ArrayUnit, ...]
    simulate: Callable[[OpGraph], RunResult]
    cost_of: Callable[[str, Mapping[str, Rewrite]], StepCost]


@dataclass(frozen=True)
class SimulatedStep:
    """One step kind as simulated: its result and what one step of it costs."""

    result: RunResult
    cost: StepCost


class Technique:
    """Base class: a named plug-in with a config; every hook defaults to no effect.

    Args:
        config: The validated ``Config`` of this technique.
        source: Where the config came from (the run file), for error messages.
    """

    name: ClassVar[str]
    Config: ClassVar[type[Spec]]
    conflicts: ClassVar[frozenset[str]] = frozenset()
    rewrite_phase: ClassVar[RewritePhase] = RewritePhase.AUGMENT

    def __init__(self, config: Spec, source: str) -> None:
        self.config = config
        self.source = source

    def where(self, key: str = "") -> str:
        """The key path of this technique's config (or of ``key`` in it)."""
        return f"techniques.{self.name}" + (f".{key}" if key else "")

    def validate(self, load: LoadContext) -> list[Problem]:
        """Problems of this configuration with this run, hardware and workload."""
        return []

    def defaults(self) -> Mapping[str, Origin]:
        """Where the default of each of its settings comes from, by dotted key (the
        provenance its report states: :mod:`accelsim.techniques.provenance`)."""
        return {}

    def packed_weight_gradients(self, load: LoadContext) -> frozenset[str]:
        """Layers whose weight-gradient GEMM this technique packs (drops rows or
        columns of and moves the kept ones together): a technique that indexes that
        GEMM by the weight's own rows and columns cannot compose with it there."""
        return frozenset()

    def add_components(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        """Array units to add to every processor."""
        return ()

    def defines_kinds(self) -> bool:
        """Whether it splits training into kinds of step of its own (:meth:`step_kinds`);
        at most one technique of a run may."""
        return False

    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        """The kinds of training step to simulate besides the baseline step (for a
        technique that :meth:`defines_kinds`)."""
        raise NotImplementedError

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        """The step graph of ``kind`` with this technique applied."""
        return graph

    def accumulated_micro_batches(self) -> int:
        """Micro-batches whose gradients a step sums before it updates the weights."""
        return 1

    def places(self) -> bool:
        """Whether this technique places the step on processors (:meth:`place`)."""
        return False

    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        """The step graph ``step`` makes, placed on the processors with its updates."""
        raise NotImplementedError

    def mask_tiles(
        self, graph: OpGraph, schedule: FoldSchedule, rng: np.random.Generator
    ) -> Mapping[int, np.ndarray]:
        """What the running folds of the GEMMs whose folds this technique skips or
        compacts use, by op id: each a vector of
        :data:`~accelsim.mapping.schedule.USE_FIELDS` (from a fold mask,
        :func:`~accelsim.mapping.schedule.fold_use`)."""
        return {}

    def adjust_counters(self, result: RunResult) -> RunResult:
        """A simulated step's result with this technique's corrections."""
        return result

    def step_cost(self, result: RunResult) -> StepCost:
        """What one training step of a graph this technique placed costs."""
        return StepCost.of(result)

    def expected_cost(
        self, ctx: TechniqueContext, base: RunResult, kind: str, step: SimulatedStep
    ) -> StepCost:
        """What one step of ``kind`` costs on average, when the simulated step (its cost
        ``step.cost``) stands for many that differ."""
        return step.cost

    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, the share of its steps of each kind this technique defines
        (:meth:`step_kinds`), summing to 1."""
        raise NotImplementedError

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section | None:
        """Its section of the training report, from the baseline, the simulated steps
        (with their expected costs) and the run's training plan."""
        return None
