"""A plan search's inputs made once, and its steps one by one: what ``accelsim plan``
runs (:mod:`accelsim.cli_plan`), and what a script measuring a search calls through
the public API (``accelsim.PlanSearch``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.driver.inputs import InputCache, RunInputs
from accelsim.planner.bound import Bound
from accelsim.planner.candidates import Candidate
from accelsim.planner.pruned import Pruned, bounds_of, simulate_pruned
from accelsim.planner.result import Evaluated, Fitting, evaluated
from accelsim.planner.search import (
    Filtered,
    Request,
    base_run,
    candidates_of,
    filter_in_parallel,
    fixed_sets,
    model_inputs,
    model_of,
    rank_graph_of,
    sweep_of,
)
from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import MAX_POINTS, SweepPlan


@dataclass(frozen=True)
class PlanSearch:
    """A search's ``request``, the process's input ``cache``, the run file every plan
    starts from (``base``), the keys every plan sets (``sets``) and the run without a
    plan (``inputs``: what the search reads of the model and hardware)."""

    request: Request
    cache: InputCache
    base: Path
    sets: dict[str, Any]
    inputs: RunInputs

    @classmethod
    def open(cls, request: Request) -> PlanSearch:
        """The search of ``request``, its base run written in its store's directory.

        Raises:
            ConfigError: for the workload, the hardware or chips it cannot hold.
        """
        cache = InputCache()
        base = base_run(request)
        sets = fixed_sets(request, cache.hardware(request.hardware))
        return cls(request, cache, base, sets, model_inputs(cache, base, sets))

    def candidates(self) -> list[Candidate]:
        """Every candidate plan, those sharing a rank graph next to each other."""
        request = self.request
        return candidates_of(model_of(self.inputs, request.chips, request.global_batch))

    def filtered(self, candidates: Sequence[Candidate], jobs: int) -> Filtered:
        """``candidates`` refused by the run's checks or their memory, on ``jobs``
        worker processes, and the ones that fit."""
        return filter_in_parallel(self.cache, self.base, self.sets, candidates, jobs)

    def sweep(self, fitting: Sequence[Fitting], most: int = MAX_POINTS) -> SweepPlan:
        """The sweep of the fitting plans, one point each (at most ``most``)."""
        return sweep_of(self.request, self.base, self.sets, fitting, most)

    def bounds(self, fitting: Sequence[Fitting]) -> list[Bound]:
        """Each fitting plan's proven least step."""
        return bounds_of(self.cache, self.base, self.sets, self.inputs, fitting, self.request)

    def simulate(
        self,
        plan: SweepPlan,
        executor: Executor,
        fitting: Sequence[Fitting],
        bounds: Sequence[Bound],
        most: int | None = None,
    ) -> Pruned:
        """The pruned search's rounds into the store (stopping once ``most`` plans are
        simulated, if given)."""
        return simulate_pruned(self.request, plan, executor, fitting, bounds, most)

    def evaluated(self, plan: SweepPlan, fitting: Sequence[Fitting]) -> list[Evaluated]:
        """The plans of ``plan`` the store holds finished, in the sweep's order."""
        return evaluated(self.request.store, plan, fitting)

    @staticmethod
    def rank_graph(candidate: Candidate) -> Hashable:
        """What the rank graph of ``candidate``'s pipeline depends on: the plans of one
        share what a worker simulated of it."""
        return rank_graph_of(candidate)
