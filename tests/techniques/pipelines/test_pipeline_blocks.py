"""A schedule's steady mini-batches are copies of the first steady one; the graph
must equal the one built mini-batch by mini-batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run
from accelsim.techniques.base import BASE
from accelsim.techniques.pipelines import graph as pipeline_graph
from accelsim.techniques.pipelines import schedule as pipelining
from tests.conftest import ROOT

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
RESNET = ROOT / "configs" / "runs" / "default.yaml"


@pytest.mark.parametrize(
    ("run_file", "sets", "kind", "counts"),
    [
        (
            MLP,
            ["processors=4", "run.techniques={pipedream: {mini_batches: 9}}"],
            "pipedream",
            (9, 10, 31),
        ),
        (
            MLP,
            ["processors=2", "run.techniques={pipedream: {mini_batches: 5}}"],
            "pipedream",
            (5, 6, 7),
        ),
        (  # tensors kept on chip, and updates that wait for their readers
            MLP,
            [
                "processors=4",
                "run.techniques={pipedream: {mini_batches: 9}, optimizer_fusion: {mode: backward}}",
            ],
            "pipedream",
            (12,),
        ),
        (
            RESNET,
            ["processors=4", "batch_size=16", "run.techniques={gpipe: {micro_batches: 2}}"],
            "gpipe",
            (3, 9),
        ),
        (
            RESNET,
            ["processors=3", "run.techniques={pipedream: {mini_batches: 8}}"],
            "pipedream",
            (8,),
        ),
        (RESNET, ["processors=3", "run.techniques={layerpipe: {}}"], "layerpipe", (11,)),
    ],
)
def test_copied_blocks_equal_the_blocks_built_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
    run_file: Path,
    sets: list[str],
    kind: str,
    counts: tuple[int, ...],
) -> None:
    run = _Run(load_inputs(run_file, parse_sets(sets)))
    base = run.simulate(run.placed(BASE, None), BASE)
    schedule = run.placer
    assert isinstance(schedule, pipelining.Schedule)
    plan = schedule.plan(run.ctx, base)
    step = run.step_graph(kind)
    copied = []
    calls: list[bool] = []
    repeat = pipeline_graph.repeat_last_block

    def spy(graph: object, count: int) -> object:
        made = repeat(graph, count)  # type: ignore[arg-type]
        calls.append(made is not None)
        return made

    monkeypatch.setattr(pipelining, "repeat_last_block", spy)
    for count in counts:
        copied.append(schedule.build(run.ctx, step, plan, None, True, True, count))
    assert calls and all(calls)  # every graph past the steady block was copied
    for count, graph in zip(counts, copied, strict=True):
        built = schedule._build(run.ctx, step, plan, None, True, True, count)
        assert len(graph.ops) == len(built.ops)
        for mine, theirs in zip(graph.ops, built.ops, strict=True):
            assert mine == theirs
        assert graph == built
