"""The technique plug-in contract: what every technique is, and the roles it may play.

Every technique is a :class:`Technique` generic in its config, a frozen pydantic spec
read from the run file's ``techniques.<name>`` section (``class
GradientSkipping(GraphRewriter[GradientSkippingConfig])``: ``self.config`` is that
spec).  Every technique checks its settings at load time (:meth:`Technique.validate`,
so ``accelsim check`` rejects a bad configuration before anything is simulated) and
reports its part of the training report (:meth:`Technique.training`, with the
provenance of its defaults, :meth:`Technique.defaults`).  Besides, it plays one or
more roles, each a class it derives from; the driver (:mod:`accelsim.driver`) picks
techniques by role:

* :class:`GraphRewriter`: rewrites one replica's step graph of each step kind (and
  says what that graph needs: array units of its own, and which weight gradients
  it packs, a fact other techniques' checks read);
* :class:`SampledRewriter`: a rewriter whose every training step draws its own
  pattern: the engine simulates the first draw (:meth:`SampledRewriter.fold_uses`)
  and :meth:`SampledRewriter.expected_cost` is the mean over the draws;
* :class:`Placer`: places the whole step on the processors instead of the run's
  ``assignment`` (a pipeline schedule over several mini-batches), and says what
  one training step of what it placed costs; at most one per run;
* :class:`KindDefiner`: splits training into kinds of step of its own (ADA-GP's
  BP and GP steps, gradient skipping's skip sets) and shares each epoch's steps
  among them; at most one per run.

A technique declares the techniques it cannot run with (``conflicts``) and the
ones it must come after or before (``after``, ``before``: name -> reason); a run's
techniques compose in the order those declarations give
(:mod:`accelsim.techniques.order`).
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from accelsim.config.base import Spec
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.errors import Problem
from accelsim.graph.ops import OpGraph
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.units import ArrayUnit
from accelsim.report.training import BASE, Section, StepCost, TrainingPlan
from accelsim.techniques.provenance import Origin

if typing.TYPE_CHECKING:  # what a technique is handed, never built here
    from accelsim.mapping.placement import StepGraph
    from accelsim.mapping.schedule import FoldSchedule
    from accelsim.report.result import RunResult
    from accelsim.timing.machine import Machine
    from accelsim.workload.model import Workload

__all__ = [
    "BASE",
    "GraphRewriter",
    "KindDefiner",
    "LoadContext",
    "Placer",
    "Rewrite",
    "SampledRewriter",
    "Section",
    "SimulatedStep",
    "StepCost",
    "Technique",
    "TechniqueContext",
    "TrainingPlan",
    "kind_definers",
    "placers",
]

C = TypeVar("C", bound=Spec)
"""A technique's config spec."""

Rewrite = Callable[[OpGraph], OpGraph]
"""A graph-to-graph pass in place of a technique's rewrite (``TechniqueContext.cost_of``)."""


@dataclass(frozen=True)
class LoadContext:
    """What a technique's load-time validation may read (``techniques``: every
    technique of the run, this one included, in the order they compose)."""

    run: RunSpec
    run_file: Path
    hardware: HardwareSpec
    infos: tuple[LayerInfo, ...]
    techniques: tuple[Technique[Any], ...] = ()


@dataclass(frozen=True)
class TechniqueContext:
    """What a technique may read about the run it is part of.

    Attributes:
        machine: The run's hardware built once: its arrays, DRAM memories and links,
            whose bounds the techniques' estimates use.
        extra_arrays: The array units the run's rewriters add to every processor.
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
    machine: Machine
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


class Technique(ABC, Generic[C]):
    """What every technique is: a named plug-in with a typed config, checked at load
    time, with its section of the training report.

    ``Config`` is the spec the class is generic in (set when the class is defined).

    Args:
        config: The validated config of this technique.
        source: Where the config came from (the run file), for error messages.
    """

    name: ClassVar[str]
    Config: ClassVar[type[Spec]]
    conflicts: ClassVar[frozenset[str]] = frozenset()
    after: ClassVar[Mapping[str, str]] = {}
    """Techniques this one composes after when the run has them: name -> why."""
    before: ClassVar[Mapping[str, str]] = {}
    """Techniques this one composes before when the run has them: name -> why."""
    trains: ClassVar[str] = "it rewrites a training step"
    """What of a training step it works on, in words: why ``run.mode: forward`` (a
    forward pass alone, with no backward pass, update or stash) refuses it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            for arg in typing.get_args(base):
                if isinstance(arg, type) and issubclass(arg, Spec):
                    cls.Config = arg

    def __init__(self, config: C, source: str) -> None:
        self.config = config
        self.source = source

    def where(self, key: str = "") -> str:
        """The key path of this technique's config (or of ``key`` in it)."""
        return f"techniques.{self.name}" + (f".{key}" if key else "")

    def tensor_parallel_problem(self) -> str | None:
        """Why this configuration cannot run under tensor parallelism
        (``run.parallel.tensor`` above 1), or None when its rewrite keeps the group's
        all-reduces right; by default it cannot: its rewrites and placements do not
        know them."""
        return (
            "not with parallel.tensor above 1: its rewrites and placements do not yet"
            " know the tensor-parallel group's all-reduces"
        )

    def sequence_parallel_problem(self) -> str | None:
        """Why this configuration, which runs under tensor parallelism, cannot under
        sequence parallelism (``run.parallel.sequence_parallel``), or None."""
        return None

    def pipeline_problem(
        self, infos: Sequence[LayerInfo], chunk_of_layer: Mapping[str, int]
    ) -> str | None:
        """Why this configuration cannot run with a pipeline plan
        (``run.parallel.pipeline`` above 1) whose model chunks hold the layers of
        ``infos`` as ``chunk_of_layer`` says, or None when the plan's passes can be cut
        from its rewritten step graph; by default it cannot."""
        return (
            "not with parallel.pipeline above 1: a pipeline plan's passes are cut from"
            " the step without a technique's rewrites"
        )

    def zero_problem(self) -> str | None:
        """Why this configuration cannot run with a sharded optimizer
        (``run.parallel.zero`` above 0), or None when its rewrite leaves the updates,
        the gradients' collectives and the placement to data parallelism; by default it
        cannot: its rewrites or placements do not know the shards."""
        return (
            "not with parallel.zero above 0: its rewrites or placements do not know the"
            " sharded optimizer state, gradients and weights"
        )

    @abstractmethod
    def validate(self, load: LoadContext) -> list[Problem]:
        """Problems of this configuration with this run, hardware and workload."""

    @abstractmethod
    def defaults(self) -> Mapping[str, Origin]:
        """Where the default of each of its settings comes from, by dotted key (the
        provenance its report states: :mod:`accelsim.techniques.provenance`)."""

    @abstractmethod
    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        """Its section of the training report, from the baseline, the simulated steps
        (with their expected costs) and the run's training plan."""


class GraphRewriter(Technique[C]):
    """A technique that rewrites one replica's step graph of every step kind, each
    rewrite reading the graph as the earlier techniques left it."""

    @abstractmethod
    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        """The step graph of ``kind`` with this technique applied."""

    def extra_arrays(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        """Array units its rewritten graphs run ops on, added to every processor
        (none unless it brings its own)."""
        return ()

    def extra_sram_kib(self, hw: HardwareSpec) -> float:
        """KiB of SRAM it adds to every processor beside its array units' operand
        buffers, which the area model counts as its own (none unless it brings some)."""
        return 0.0

    def packed_weight_gradients(self, load: LoadContext) -> frozenset[str]:
        """Layers whose weight-gradient GEMM its rewrite packs (drops rows or columns of
        and moves the kept ones together): a technique that indexes that GEMM by the
        weight's own rows and columns cannot compose with it there (none unless it
        packs some)."""
        return frozenset()


class SampledRewriter(GraphRewriter[C]):
    """A rewriter whose every training step draws its own pattern: the step graph it
    rewrites, and the engine simulates, is the first draw's; the others are counted."""

    @abstractmethod
    def fold_uses(self, graph: OpGraph, schedule: FoldSchedule) -> Mapping[int, np.ndarray]:
        """What the running folds of the GEMMs of ``graph`` whose folds the simulated
        draw skips or compacts use, by op id: each a vector of
        :data:`~accelsim.mapping.schedule.USE_FIELDS`."""

    @abstractmethod
    def expected_cost(
        self, ctx: TechniqueContext, base: RunResult, kind: str, step: SimulatedStep
    ) -> StepCost:
        """What one step of ``kind`` costs on average over the draws, the simulated one
        costing ``step.cost``."""


class Placer(Technique[C]):
    """A technique that places the whole step on the processors instead of the run's
    ``assignment``."""

    @abstractmethod
    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        """The step graph ``step`` makes, placed on the processors with its updates."""

    @abstractmethod
    def step_cost(self, result: RunResult) -> StepCost:
        """What one training step of a graph this technique placed costs."""

    @abstractmethod
    def accumulated_micro_batches(self) -> int:
        """Micro-batches whose gradients a step sums before it updates the weights (read
        by other techniques' checks)."""


class KindDefiner(Technique[C]):
    """A technique that splits training into kinds of step of its own."""

    def defines_kinds(self) -> bool:
        """Whether this configuration defines step kinds (a technique may in some
        configurations only)."""
        return True

    @abstractmethod
    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        """The kinds of training step to simulate besides the baseline step."""

    @abstractmethod
    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, the share of its steps of each kind, summing to 1."""


def placers(techniques: Iterable[Technique[Any]]) -> list[Placer[Any]]:
    """The techniques that place the step."""
    return [t for t in techniques if isinstance(t, Placer)]


def kind_definers(techniques: Iterable[Technique[Any]]) -> list[KindDefiner[Any]]:
    """The techniques whose configuration defines step kinds."""
    return [t for t in techniques if isinstance(t, KindDefiner) and t.defines_kinds()]
