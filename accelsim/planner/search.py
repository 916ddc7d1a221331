"""The plan search: the candidates of :mod:`accelsim.planner.candidates` loaded as run
files, refused by the run's own checks or by their memory (no simulation:
:func:`~accelsim.driver.run.step_memory`, as ``accelsim run --memory-only``), the ones
that fit simulated as the points of a sweep (its resumable store, its executors)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.config.overrides import Override
from accelsim.config.parallel import ParallelSpec
from accelsim.driver.copies import refuse_copies
from accelsim.driver.inputs import InputCache, RunInputs
from accelsim.driver.pipeline_memo import NOT_SHARING
from accelsim.driver.run import step_memory
from accelsim.errors import ConfigError
from accelsim.lowering.stats import model_stats
from accelsim.mapping.memory import CLASSES, MemoryBreakdown, memory_problem
from accelsim.planner.candidates import Candidate, Model, enumerate_plans
from accelsim.planner.given import OPTION
from accelsim.planner.grouped import ByRankGraph
from accelsim.planner.result import Fitting, Scale
from accelsim.resources import bundled_path
from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import SweepPlan, plan_sweep
from accelsim.sweep.points import KeepPoints
from accelsim.sweep.processes import can_fork, process_pool
from accelsim.sweep.run import SweepReport, pending_points, run_sweep
from accelsim.workload.model import Attention
from accelsim.workload.moe import Moe

SOURCE = "accelsim plan"
"""Where the search's own overrides say they come from."""

BASE_RUN = "plan_run.yaml"
"""The run file every plan starts from, written in the store's directory."""


@dataclass(frozen=True)
class Request:
    """What to search: a workload on ``chips`` processors of a hardware file, the global
    batch, the sequence length (None: the workload's) and the store's directory."""

    workload: Path
    hardware: Path
    chips: int
    global_batch: int
    seq: int | None
    store: Path


@dataclass(frozen=True)
class Filtered:
    """The candidates enumerated, the ones the run's checks refused (by the key their
    first problem names) and the memory refused (by their largest class), and the ones
    that fit."""

    enumerated: int
    refused_by_checks: Counter[str] = field(default_factory=Counter)
    refused_by_memory: Counter[str] = field(default_factory=Counter)
    fitting: list[Fitting] = field(default_factory=list)
    refusals: dict[str, str] = field(default_factory=dict)
    """Each refused candidate's label and why (its first problem or its memory)."""

    def counts(self, seconds: float) -> dict[str, Any]:
        """The counts ``accelsim plan`` prints, with the ``seconds`` filtering took."""
        return {
            "enumerated": self.enumerated,
            "refused_by_checks": dict(self.refused_by_checks),
            "refused_by_memory": dict(self.refused_by_memory),
            "fitting": len(self.fitting),
            "filter_seconds": round(seconds, 3),
        }


def base_run(request: Request) -> Path:
    """Write the run file every plan starts from (JSON, which YAML reads) in the store's
    directory: the workload, hardware, the global batch, Adam, data parallelism."""
    request.store.mkdir(parents=True, exist_ok=True)
    run = {
        "name": "plan",
        "description": "a plan of accelsim plan",
        "hardware": str(request.hardware.resolve()),
        "workload": str(request.workload.resolve()),
        "energy": str(bundled_path("configs/energy/horowitz45.yaml").resolve()),
        "batch_size": request.global_batch,
        "assignment": "data_parallel",
        "optimizer": {"kind": "adam"},
        "parallel": {},
    }
    path = request.store / BASE_RUN
    text = json.dumps(run, indent=2) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def fixed_sets(request: Request, hw: HardwareSpec) -> dict[str, Any]:
    """The keys every plan sets: the chips (the hardware's processors, and the outermost
    level of its network sized to hold them) and the sequence length.

    Raises:
        ConfigError: when the network's shape cannot hold the chips by its outermost
            level alone.
    """
    sets: dict[str, Any] = {}
    if request.seq is not None:
        sets["workload.input.length"] = request.seq
    if request.chips == hw.processors:
        return sets
    net = hw.interconnect
    sets["hardware.processors"] = request.chips
    levels = [level.model_dump(mode="json") for level in net.levels]
    inner = math.prod(net.dims or (hw.processors,)) * math.prod(
        math.prod(level["dims"]) for level in levels[:-1]
    )
    if levels and len(levels[-1]["dims"]) == 1 and request.chips % inner == 0:
        outer = request.chips // inner
        sets["hardware.interconnect.levels"] = levels[:-1] + (
            [{**levels[-1], "dims": [outer]}] if outer > 1 else []
        )
    elif not levels and len(net.dims or ()) <= 1:
        if net.dims:
            sets["hardware.interconnect.dims"] = [request.chips]
    else:
        raise ConfigError.single(
            "--chips",
            "",
            f"the network of {request.hardware} holds {hw.processors} processors; its"
            " outermost level cannot be resized alone to hold this many: write a hardware"
            " file for them",
            request.chips,
        )
    return sets


def overrides_of(sets: dict[str, Any], source: str = SOURCE) -> list[Override]:
    """``sets`` as overrides written by ``source``."""
    return [Override(key, value, source, key) for key, value in sets.items()]


def model_inputs(cache: InputCache, base: Path, sets: dict[str, Any]) -> RunInputs:
    """The run without a plan, on one processor of the chips (whatever the batch), for
    what the search reads of the model and hardware."""
    return cache.load(base, overrides_of(sets | {"assignment": "single"}))


def model_of(inputs: RunInputs, chips: int, global_batch: int) -> Model:
    """What the rules of the candidates read from a run's layer table."""
    layers = inputs.workload.layers
    heads = [
        n
        for layer in layers
        if isinstance(layer, Attention)
        for n in (layer.heads, layer.key_value_heads)
    ]
    experts = tuple(sorted({layer.experts for layer in layers if isinstance(layer, Moe)}))
    blocks = {(layer.block.repeat, layer.block.index) for layer in layers if layer.block}
    return Model(chips, global_batch, tuple(sorted(set(heads))), experts, len(blocks))


def candidates_of(model: Model) -> list[Candidate]:
    """Every candidate over the fields the parallel plan has, those that share a rank
    graph next to each other (:func:`sharing_first`)."""
    return sorted(enumerate_plans(model, ParallelSpec.model_fields), key=sharing_first)


def sharing_first(candidate: Candidate) -> tuple[Any, ...]:
    """The order of the search: by the fields a pipeline plan's rank graph depends on
    (the plan's but :data:`~accelsim.driver.pipeline_memo.NOT_SHARING`, and the
    recomputation policy), then by those it does not, so that a sweep worker
    simulating the candidates in turn reuses each rank graph's passes
    (:mod:`accelsim.driver.pipeline_memo`) while it keeps them."""
    fields = dict(candidate.parallel)
    rest = [str(fields[k]) for k in NOT_SHARING if k in fields]
    return (*rank_graph_of(candidate), *rest, candidate.data)


def rank_graph_of(candidate: Candidate) -> tuple[str, ...]:
    """What a pipeline plan's rank graph depends on (:func:`sharing_first`): the plan's
    fields but :data:`~accelsim.driver.pipeline_memo.NOT_SHARING`, and the
    recomputation policy."""
    shared = [str(v) for k, v in candidate.parallel if k not in NOT_SHARING]
    return (*shared, candidate.recompute)


def filter_plans(
    cache: InputCache,
    base: Path,
    sets: dict[str, Any],
    candidates: Sequence[Candidate],
    source: str = SOURCE,
) -> Filtered:
    """Load each candidate as a run and count what its memory needs, without simulating
    (the candidates' keys written by ``source``)."""
    result = Filtered(len(candidates))
    for candidate in candidates:
        try:
            memory = memory_of(cache, base, sets, candidate, source)
        except ConfigError as exc:
            key = exc.problems[0].path if exc.problems else "run"
            result.refused_by_checks[key] += 1
            result.refusals[candidate.label] = str(exc).splitlines()[0]
            continue
        if memory.fits:
            result.fitting.append(Fitting(candidate, memory))
        else:
            largest = max(CLASSES, key=lambda name: memory.bytes_by_class[name])
            result.refused_by_memory[largest] += 1
            why = f"{memory.total_bytes:,} bytes per chip, {memory.capacity_bytes:,} fit"
            result.refusals[candidate.label] = why
    return result


FILTERED_APART = 64
"""The fewest candidates a search filters in worker processes (fewer: in its own)."""

_filtering: list[tuple[InputCache, Path, dict[str, Any], Sequence[Candidate]]] = []
"""The filter a forked worker runs a share of (set before the workers fork)."""


def filter_in_parallel(
    cache: InputCache,
    base: Path,
    sets: dict[str, Any],
    candidates: Sequence[Candidate],
    jobs: int,
) -> Filtered:
    """:func:`filter_plans` on ``jobs`` forked worker processes, each a contiguous share
    of the candidates (those sharing a rank graph mostly together), the shares' counts
    added in order: the same :class:`Filtered`.

    Raises:
        WorkerError: when a worker process died (nothing of the search is stored yet).
    """
    if jobs < 2 or len(candidates) < FILTERED_APART or not can_fork():
        return filter_plans(cache, base, sets, candidates)
    n = len(candidates)
    bounds = [(i * n // jobs, (i + 1) * n // jobs) for i in range(jobs)]
    _filtering[:] = [(cache, base, sets, candidates)]
    try:
        with process_pool(jobs, f"filtering the plans ({jobs} worker processes)") as pool:
            parts = pool.map(_filter_share, bounds)
    finally:
        _filtering.clear()
    result = Filtered(n)
    for part in parts:
        result.refused_by_checks.update(part.refused_by_checks)
        result.refused_by_memory.update(part.refused_by_memory)
        result.fitting.extend(part.fitting)
        result.refusals.update(part.refusals)
    return result


def _filter_share(bounds: tuple[int, int]) -> Filtered:
    cache, base, sets, candidates = _filtering[0]
    return filter_plans(cache, base, sets, candidates[bounds[0] : bounds[1]])


def memory_of(
    cache: InputCache, base: Path, sets: dict[str, Any], candidate: Candidate, source: str
) -> MemoryBreakdown:
    """What one chip of ``candidate`` holds, from its step graph, without simulating.

    Raises:
        ConfigError: for a candidate the run's checks refuse, or that fits but, without
            a pipeline, would place too many copies of its step
            (:func:`~accelsim.driver.copies.refuse_copies`).
    """
    fixed = overrides_of(sets)
    inputs = cache.load(base, fixed + overrides_of(candidate.overrides(), source))
    memory = step_memory(inputs)
    if memory.fits:
        refuse_copies(inputs)
    return memory


def given_plan(
    cache: InputCache, base: Path, sets: dict[str, Any], candidate: Candidate, text: str
) -> Filtered:
    """One plan written by ``--plan`` (``text``), filtered as a search's candidates.

    Raises:
        ConfigError: the run's problems with it, or its memory when it does not fit.
    """
    memory = memory_of(cache, base, sets, candidate, OPTION)
    if not memory.fits:
        raise ConfigError.single(OPTION, "", memory_problem(memory), text)
    return Filtered(1, fitting=[Fitting(candidate, memory)])


def scale_of(inputs: RunInputs, request: Request) -> Scale:
    """The model's parameters and tokens per step on the request's chips (``inputs``:
    the run without a plan)."""
    parameters = model_stats(inputs.workload, inputs.infos).params
    length = getattr(inputs.workload.input, "length", 1)
    return Scale.of(parameters, request.global_batch * length, inputs.hardware)


def pending(request: Request, plan: SweepPlan) -> int:
    """How many of the plans are not in the store yet."""
    return pending_points(plan, request.store.parent)


def sweep_of(
    request: Request, base: Path, sets: dict[str, Any], fitting: Sequence[Fitting], most: int
) -> SweepPlan:
    """The sweep of the fitting plans: one point each, in their order (a zip of every
    key a plan sets)."""
    keys = list(fitting[0].candidate.overrides())
    columns = {key: [f.candidate.overrides()[key] for f in fitting] for key in keys}
    sweep = {
        "name": request.store.name,
        "description": f"accelsim plan: {request.workload.name} on {request.chips} chips",
        "base": str(base),
        "set": sets,
        "zip": [columns],
    }
    return plan_sweep(sweep, max_points=most)


def simulate(
    request: Request, plan: SweepPlan, executor: Executor, fitting: Sequence[Fitting]
) -> SweepReport:
    """Simulate the points not in the store yet (a killed search resumes), each keeping
    its directory (the breakdown of the fastest is read from its ``summary.json``), the
    plans of one rank graph on one worker together (``fitting``: the plans, in the
    sweep's order)."""
    grouped = ByRankGraph(executor, [rank_graph_of(f.candidate) for f in fitting])
    return run_sweep(plan, request.store.parent, grouped, keep_points=KeepPoints.ALL)
