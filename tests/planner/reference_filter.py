"""The plan search's memory filter as it was before it counted a pipeline's stages
from its layers (:mod:`accelsim.mapping.stage_layers`): each candidate loaded as a
run and its memory counted from the ops of its step graph, cut by cut.  Kept here
only to hold the library's filter to the same answers
(``tests/planner/test_filter_reference.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import OptimizerSpec
from accelsim.driver import pipeline, pipeline_memo
from accelsim.driver.inputs import InputCache
from accelsim.driver.run import step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import Op, OpGraph
from accelsim.graph.queries import reads_of, stashed_tensors
from accelsim.mapping.memory import CLASSES, memory_classes
from accelsim.mapping.pipeline_memory import StageParts
from accelsim.mapping.pipeline_stages import PipelineCut
from accelsim.planner.candidates import Candidate
from accelsim.planner.result import Fitting
from accelsim.planner.search import Filtered, overrides_of


def stage_parts(
    step: OpGraph,
    cut: PipelineCut,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    bucket_bytes: int | None,
) -> StageParts:
    """Each stage's parts counted from its ops (the cut's chunks' ops gathered)."""
    chunk_of = cut.chunk_of_layer()
    chunk_ops: list[list[Op]] = [[] for _ in cut.chunks]
    for op in step.ops:
        chunk_ops[chunk_of[op.layer]].append(op)
    stash_of_chunk = tuple(sum(t.bytes for t in stashed_tensors(ops)) for ops in chunk_ops)
    classes, kept_of = [], []
    for stage in range(cut.stages):
        ops = [op for g in cut.chunks_of_stage(stage) for op in chunk_ops[g]]
        read = {a.tensor.key for op in ops for a in reads_of(op)}
        layers = {name for g in cut.chunks_of_stage(stage) for name in cut.chunks[g]}
        kept = tuple(p for p in step.parameters if p.layer in layers or p.weight.key in read)
        classes.append(memory_classes(ops, kept, 0, optimizer, hw, bucket_bytes))
        kept_of.append(kept)
    return StageParts(tuple(classes), tuple(kept_of), stash_of_chunk)


@contextmanager
def counted_from_ops(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pipeline memories counted by :func:`stage_parts`, with nothing kept from before."""
    pipeline_memo.forget()
    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "stage_parts", stage_parts)
        yield
    pipeline_memo.forget()


def reference_filter(
    base: Path, sets: dict[str, Any], candidates: Sequence[Candidate], source: str
) -> Filtered:
    """Each candidate loaded as a run (through one cache of its own) and its memory
    counted by :func:`~accelsim.driver.run.step_memory`, refused as the filter
    refuses."""
    cache = InputCache()
    result = Filtered(len(candidates))
    for candidate in candidates:
        try:
            sets_of = overrides_of(sets) + overrides_of(candidate.overrides(), source)
            memory = step_memory(cache.load(base, sets_of))
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
