"""The pruned plan search (:mod:`accelsim.planner.pruned`) finds the fastest plan and
the Pareto front of ``--exhaustive``: with the search's own bounds (on the tiny GPT
they prune nothing: its arrays idle most of a step) and with every plan's simulated
step as its bound (the tightest valid bound, which prunes a third of the plans),
a search stopped part-way and resumed, and the order of the search and the pruning
rule by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.driver.inputs import InputCache
from accelsim.mapping.memory import MemoryBreakdown
from accelsim.planner import pruned, search
from accelsim.planner.bound import Bound
from accelsim.planner.candidates import Model
from accelsim.planner.result import Evaluated, Fitting, evaluated, fastest, front
from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import MAX_POINTS, SweepPlan
from accelsim.sweep.points import KeepPoints
from accelsim.sweep.run import run_sweep
from tests.planner.test_plan_command import HARDWARE, WORKLOAD, plan, run_json


def _no_counts(chosen: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in chosen.items() if k != "search"}


def test_pruned_equals_exhaustive_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    every = run_json(capsys, plan(tmp_path / "every", "--json", "--exhaustive"))
    some = run_json(capsys, plan(tmp_path / "some", "--json"))
    assert _no_counts(some) == _no_counts(every)
    assert every["search"]["pruned_by_bound"] == some["search"]["pruned_by_bound"] == 0
    assert some["search"]["chosen_bound_seconds"] == every["search"]["chosen_bound_seconds"]
    assert 0 < some["search"]["chosen_bound_seconds"] < some["step_seconds"]
    assert main(plan(tmp_path / "some")) == 0  # resumed: every plan stored
    out = capsys.readouterr().out
    assert "simulated       40 (40 already stored), 0 pruned by their bound;" in out
    assert "  bound         0.0000 s at least (its tensor-parallel chains:" in out


def _search(store: Path) -> tuple[search.Request, SweepPlan, list[Fitting]]:
    request = search.Request(WORKLOAD, HARDWARE, 8, 4, None, store)
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    model = search.model_of(search.model_inputs(cache, base, sets), 8, 4)
    fitting = search.filter_plans(cache, base, sets, search.candidates_of(model)).fitting
    return request, search.sweep_of(request, base, sets, fitting, MAX_POINTS), fitting


def _answer(plans: list[Evaluated]) -> tuple[str, list[str]]:
    return fastest(plans).candidate.label, sorted(plans[i].candidate.label for i in front(plans))


def test_tight_bounds_prune_and_keep_the_answer(tmp_path: Path) -> None:
    request, sweep, fitting = _search(tmp_path / "every")
    search.simulate(request, sweep, Executor(), fitting)
    every = evaluated(request.store, sweep, fitting)
    step = {e.candidate: e.step_cycles for e in every}
    # The tightest valid bounds: each plan's own step.
    bounds = [Bound(step[f.candidate], 0, 1, 0) for f in fitting]
    # Stopped after its 5 slowest plans (as if killed), then resumed.
    request, sweep, fitting = _search(tmp_path / "some")
    slowest = sorted(range(len(fitting)), key=lambda i: -step[fitting[i].candidate])[:5]
    part = SweepPlan(sweep.spec, sweep.path, tuple(sweep.points[i] for i in slowest))
    run_sweep(part, request.store.parent, Executor(), keep_points=KeepPoints.ALL)
    done = pruned.simulate_pruned(request, sweep, Executor(), fitting, bounds)
    some = evaluated(request.store, sweep, fitting)
    assert _answer(some) == _answer(every)
    assert (done.already_stored, done.failed) == (5, 0)
    assert done.ran + 5 == len(some) and len(some) + len(done.pruned) == 40
    assert len(done.pruned) == 10
    # Each pruned plan is slower than a simulated plan of no more memory.
    for i in done.pruned:
        memory = fitting[i].memory.total_bytes
        assert any(
            e.step_cycles < step[fitting[i].candidate] and e.memory_bytes <= memory for e in some
        )
    again = pruned.simulate_pruned(request, sweep, Executor(), fitting, bounds)
    assert (again.already_stored, again.ran, again.pruned) == (len(some), 0, done.pruned)


def _plan(step_cycles: int, memory_bytes: int) -> Evaluated:
    candidate = search.candidates_of(Model(8, 4, (4,), (), 2))[0]
    memory = MemoryBreakdown({"weights": memory_bytes}, 10**9, 1)
    return Evaluated(candidate, memory, {"total_cycles": step_cycles})


def test_the_search_order_and_the_rule() -> None:
    # Groups by their least bound (group y's 5 before x's 7), plans by bound in them.
    bounds = [Bound(c, 0, 1, c) for c in (9, 7, 5, 8, 6)]
    groups = [("x",), ("x",), ("y",), ("x",), ("y",)]
    assert pruned.search_order(bounds, groups) == [2, 4, 1, 3, 0]
    # Simulated: 100 cycles in 50 bytes, 80 in 70.  Pruned only below a strictly
    # shorter step of no more memory: a tie of steps, or less memory, is simulated.
    beaten = pruned.Beaten([_plan(100, 50), _plan(80, 70)])
    assert beaten.beats(Bound(101, 0, 1, 101), 50)
    assert not beaten.beats(Bound(100, 0, 1, 100), 50)  # it may tie: simulated
    assert not beaten.beats(Bound(500, 0, 1, 500), 49)  # it may be smaller: simulated
    assert not beaten.beats(Bound(90, 0, 1, 90), 69)
    assert beaten.beats(Bound(81, 0, 1, 81), 70)
