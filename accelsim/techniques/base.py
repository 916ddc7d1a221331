"""The technique plug-in contract.

A technique is a class with a validated ``Config`` (a frozen pydantic spec, read
from the run file's ``techniques.<name>`` section) and any of these hooks, all
optional, which :mod:`accelsim.pipeline` calls in this order:

* :meth:`Technique.add_components`: extra array units per processor;
* :meth:`Technique.step_kinds`: the kinds of training step the technique runs
  (each lowered with its own :class:`~accelsim.workload.lowering.StepHooks`,
  which add, remove or re-wire ops of every replica), simulated next to the
  baseline step;
* :meth:`Technique.assign`: a whole op graph placed on the processors (a
  pipeline schedule over several mini-batches), given the simulated baseline
  step; at most one technique may own it;
* :meth:`Technique.training`: the whole-training estimate from the simulated
  steps, for techniques whose effect changes over training.

Techniques declare the ones they cannot be combined with in ``conflicts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from accelsim.config.base import Spec
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.mapping.units import ArrayUnit
from accelsim.report.result import RunResult
from accelsim.workload.lowering import StepHooks
from accelsim.workload.model import Workload
from accelsim.graph.ops import OpGraph
from accelsim.workload.shapes import LayerInfo


@dataclass(frozen=True)
class TechniqueContext:
    """What a technique may read about the run it is part of."""

    run: RunSpec
    run_file: Path
    hardware: HardwareSpec
    workload: Workload
    infos: tuple[LayerInfo, ...]
    extra_arrays: tuple[ArrayUnit, ...]
    simulate: Callable[[OpGraph], RunResult]


class Technique:
    """Base class: a named plug-in with a config; every hook defaults to no effect.

    Args:
        config: The validated ``Config`` of this technique.
        source: Where the config came from (the run file), for error messages.
    """

    name: ClassVar[str]
    Config: ClassVar[type[Spec]]
    conflicts: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, config: Spec, source: str) -> None:
        self.config = config
        self.source = source

    def add_components(self, hw: HardwareSpec) -> Sequence[ArrayUnit]:
        """Array units to add to every processor."""
        return ()

    def step_kinds(self, ctx: TechniqueContext) -> Mapping[str, StepHooks]:
        """Named kinds of training step to simulate besides the baseline step."""
        return {}

    def assign(self, ctx: TechniqueContext, base: RunResult) -> OpGraph | None:
        """An op graph of its own, placed on processors, to simulate as one step kind."""
        return None

    def training(
        self, ctx: TechniqueContext, base: RunResult, steps: Mapping[str, RunResult]
    ) -> dict[str, Any] | None:
        """The whole-training report, from the baseline and the technique's steps."""
        return None
