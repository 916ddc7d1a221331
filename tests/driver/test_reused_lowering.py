"""A process keeps the lowered steps of its runs for its next runs of the same workload
objects (``driver/run._reused``); the key holds every setting the lowering reads, the
tensor plan's sequence parallelism among them, so that a plan search's worker that ran
a plan with sequence parallelism lowers the next plan without it anew."""

from __future__ import annotations

from pathlib import Path

from accelsim.driver.inputs import InputCache
from accelsim.driver.run import _Reused, rewritten_step
from accelsim.graph.ops import CommOp
from accelsim.planner import search
from tests.conftest import ROOT

TINY = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt.yaml"
HARDWARE = ROOT / "configs" / "hardware" / "a100_cluster.yaml"


def kinds(sequence: bool, cache: InputCache, base: Path, sets: dict[str, object]) -> list[str]:
    plan = {"parallel.tensor": 2, "parallel.sequence_parallel": sequence}
    inputs = cache.load(base, search.overrides_of(sets | plan))
    ops = rewritten_step(inputs, 1).ops
    return sorted(op.collective.value for op in ops if isinstance(op, CommOp))


def test_sequence_parallelism_is_in_the_lowered_key(tmp_path: Path) -> None:
    request = search.Request(TINY, HARDWARE, 8, 4, None, tmp_path / "search")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    _Reused.graphs.clear()
    alone = kinds(False, cache, base, sets)
    _Reused.graphs.clear()
    with_sequence = kinds(True, cache, base, sets)
    after = kinds(False, cache, base, sets)
    assert with_sequence != alone  # reduce-scatters and all-gathers
    assert after == alone
