"""Data-parallel placement builds each local batch's replica once and copies it; the
graph must equal the plain composition of passes it replaces, op for op."""

from __future__ import annotations

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.limits import step_totals
from accelsim.driver.run import _Run
from accelsim.graph import copies, passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import GemmOp, OpGraph, Tag, VectorOp, replaced
from accelsim.graph.queries import reads_of, writes_of
from accelsim.lowering.optimizer import add_updates
from accelsim.lowering.step import backward_sinks
from accelsim.mapping import placement
from accelsim.techniques.base import BASE
from tests.conftest import ROOT

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
RESNET = ROOT / "configs" / "runs" / "default.yaml"


def composed(step: placement.StepGraph, batch: int, processors: int, run: _Run) -> OpGraph:
    """Every replica instantiated and appended, an all-reduce per gradient, each
    replica's updates, placed by replica, transfers inserted: one pass at a time."""
    optimizer, words = run.inputs.run.optimizer, run.inputs.hardware.word_bytes
    builder = GraphBuilder(words)
    replicas, params, offsets = [], [], []
    for p, local in enumerate(placement.split_batch(batch, processors)):
        replica = copies.instantiate(
            step(local), Tag(replica=p), f"p{p}/" if processors > 1 else ""
        )
        offset = builder.append_graph(replica)
        replicas.append(replica)
        offsets.append(offset)
        params.append(
            [
                replaced(q, grad_op=q.grad_op + offset) if q.grad_op >= 0 else q
                for q in replica.parameters
            ]
        )
    ready: dict[str, int] = {}
    for j, param in enumerate(params[0] if processors > 1 else ()):
        if param.grad_op < 0:
            continue
        name = param.weight.step_name
        tensor = builder.tensor(
            f"{name}.allreduce", param.gradient.kind, param.update_elements, name
        )
        after = [replica[j].grad_op for replica in params]
        op = builder.allreduce(
            f"{name}.allreduce",
            param.layer,
            tensor,
            tuple(range(processors)),
            after,
            [param.gradient],
        )
        ready.update({replica[j].weight.name: op for replica in params})
    for p, (replica, offset) in enumerate(zip(replicas, offsets, strict=True)):
        sinks = [s + offset for s in backward_sinks(replica)]
        add_updates(builder, params[p], optimizer, sinks, ready, Tag(replica=p))
    placed = passes.place(builder.build(params[0]), lambda op: op.tag.replica)
    return passes.insert_transfers(placement.trained(placed))


@pytest.mark.parametrize(
    ("run_file", "sets", "kind"),
    [
        (MLP, ["processors=3", "batch_size=7"], BASE),  # local batches 3, 2, 2
        (MLP, ["processors=1"], BASE),
        (MLP, ["processors=4", "optimizer={kind: adam, clip_global_norm: 1.0}"], BASE),
        (
            MLP,
            ["processors=2", "run.techniques={optimizer_fusion: {mode: backward}}"],
            "optimizer_fusion",
        ),
        (
            MLP,
            ["processors=3", "batch_size=8", "run.techniques={optimizer_fusion: {mode: forward}}"],
            "optimizer_fusion",
        ),
        (
            MLP,
            ["processors=2", "run.techniques={gradient_skipping: {skip_fraction: 0.25}}"],
            "gradient_skipping",
        ),
        (RESNET, ["processors=5", "batch_size=12", "optimizer={kind: sgd}"], BASE),
    ],
)
def test_data_parallel_equals_the_composed_passes(
    run_file: object, sets: list[str], kind: str
) -> None:
    inputs = load_inputs(run_file, parse_sets(["assignment=data_parallel", *sets]))  # type: ignore[arg-type]
    run = _Run(inputs)
    step = run.step_graph(kind)
    batch, processors = inputs.run.batch_size, inputs.hardware.processors
    built = placement.data_parallel(
        step, batch, processors, inputs.run.optimizer, inputs.hardware.word_bytes
    )
    expected = composed(step, batch, processors, run)
    assert len(built.ops) == len(expected.ops) > 0
    for mine, theirs in zip(built.ops, expected.ops, strict=True):
        assert mine == theirs
    assert built == expected


def test_step_totals_are_the_sums_over_reads_and_writes() -> None:
    graphs = []
    for sets in (
        ["processors=3", "assignment=data_parallel"],
        ["processors=3", "run.techniques={pipedream: {mini_batches: 7}}"],
    ):
        run = _Run(load_inputs(MLP, parse_sets(sets)))
        base = run.simulate(run.placed(BASE, None), BASE)
        graphs.append(base.graph if run.placer is None else run.placed("pipedream", base))
    # GEMMs, vector ops, all-reduces and transfers
    assert len({type(op) for graph in graphs for op in graph.ops}) == 4
    for graph in graphs:
        moved = sum(a.bytes for op in graph.ops for a in (*reads_of(op), *writes_of(op)))
        assert step_totals(graph) == {
            "MACs": sum(op.macs for op in graph.ops if isinstance(op, GemmOp)),
            "vector ops": sum(op.vector_ops for op in graph.ops if isinstance(op, VectorOp)),
            "bytes read and written": moved,
        }
