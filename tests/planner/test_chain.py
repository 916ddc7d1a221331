"""The tensor-parallel chains of a plan's passes (:mod:`accelsim.planner.chain`): each
collective's least cycles are the engines' for it alone, and never more under
contention; the collectives claimed for the 4-block GPT's passes (t = 2, with and
without sequence parallelism) lie on one path of the lowered pass, found by walking
its ops, and their cycles are counted by hand."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from accelsim.config.loader import load_hardware, parse_sets
from accelsim.driver.pipeline_step import _chunk_ops, rank_step
from accelsim.driver.run import _Run
from accelsim.graph.ops import (
    CommGroup,
    CommOp,
    GemmOp,
    OpGraph,
    Phase,
    Stage,
    Tensor,
    TensorKind,
)
from accelsim.lowering.tensor_parallel import plan_tensor
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.network.collectives import Collective
from accelsim.planner.chain import chain_collectives, layer_weights, pass_chains
from accelsim.techniques.base import BASE
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.engine import simulate
from accelsim.timing.machine import Machine, machine_of
from accelsim.timing.sends import least_cycles
from tests.conftest import ROOT
from tests.mapping.test_pipeline_memory import loaded
from tests.timing.test_engine import costs

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
A100 = ROOT / "configs" / "hardware" / "a100_cluster.yaml"
IDEAL_DRAM = ["dram.bandwidth_bytes_per_cycle=.inf", "dram.latency_cycles=0"]


def _comm(op_id: int, kind: Collective, group: tuple[int, ...], size_bytes: int) -> CommOp:
    tensor = Tensor(f"x{op_id}", TensorKind.ACTIVATION, size_bytes // 2, 2)
    return CommOp(
        op_id, f"c{op_id}", "l", Phase.COMM, Stage.FORWARD, tensor, group, (), collective=kind
    )


def _durations(ops: tuple[CommOp, ...], on: Machine) -> list[int]:
    graph = OpGraph(ops=ops, processor=tuple(op.participants[0] for op in ops))
    trace = simulate(graph, costs([UNIT_COMM] * len(ops)), on)
    return (trace.end_cycle - trace.start_cycle).tolist()


@pytest.mark.parametrize("kind", [AR, AG, RS])
def test_a_collective_alone_takes_its_least_cycles_and_contention_only_delays_it(
    kind: Collective,
) -> None:
    # The A100 cluster: 2 nodes of 8 on NVSwitch, joined by InfiniBand.  A group of 16
    # spans both nodes; alone, the engine takes its least cycles.  Two at once on the
    # same links, or two pairs across the nodes sharing processor 0's links, each take
    # at least theirs, and the contention delays one of them.
    on = Machine.of(load_hardware(A100, parse_sets(IDEAL_DRAM)))
    whole = tuple(range(16))
    size = 1 << 20
    least = least_cycles(on, kind, whole, size)
    assert _durations((_comm(0, kind, whole, size),), on) == [least]
    twice = _durations((_comm(0, kind, whole, size), _comm(1, kind, whole, size)), on)
    assert min(twice) >= least and max(twice) > least
    pairs = ((0, 8), (0, 9))
    shared = _durations(tuple(_comm(i, kind, g, size) for i, g in enumerate(pairs)), on)
    alone = [least_cycles(on, kind, g, size) for g in pairs]
    assert all(a >= b for a, b in zip(shared, alone, strict=True)) and shared != alone


def test_on_a_one_level_ring_a_shift_is_one_hop_of_its_sends() -> None:
    # The default hardware as a ring of 4, links of 64 B/cycle + 200: ranks (0, 1) each
    # send 128 B on their own link a shift (the engines' ring, whatever the route
    # back from 1 to 0): 202 cycles a shift, an all-reduce 2 shifts, in the engine too.
    on = Machine.of(
        load_hardware(
            ROOT / "configs/hardware/default.yaml", parse_sets(["processors=4", *IDEAL_DRAM])
        )
    )
    for kind, shifts in ((AR, 2), (AG, 1), (RS, 1)):
        assert least_cycles(on, kind, (0, 1), 256) == 202 * shifts
        assert _durations((_comm(0, kind, (0, 1), 256),), on) == [202 * shifts]


def _ancestors(graph: OpGraph) -> dict[int, int]:
    """Each op's ancestors (the ops it waits for, directly or not), as a bit set."""
    out: dict[int, int] = {}
    for op in graph.ops:
        bits = 0
        for i in (*op.deps, *op.after):
            bits |= out[i] | (1 << i)
        out[op.op_id] = bits
    return out


def _comparable(a: int, b: int, ancestors: dict[int, int]) -> bool:
    return a == b or bool(ancestors[a] >> b & 1) or bool(ancestors[b] >> a & 1)


def _walked(graph: OpGraph, ids: list[int], weight: dict[tuple[str, Collective], int]) -> int:
    """The heaviest path of the ops ``ids``, each tensor collective weighing
    ``weight[(its layer, its kind)]`` (0 when absent), every other op 0."""
    kept, into = set(ids), {}
    for op in graph.ops:
        if op.op_id in kept:
            w = 0
            if isinstance(op, CommOp) and op.group is CommGroup.TENSOR:
                w = weight.get((op.layer, op.collective), 0)
            waits = (into[i] for i in (*op.deps, *op.after) if i in into)
            into[op.op_id] = w + max(waits, default=0)
    return max(into.values(), default=0)


@pytest.mark.parametrize("sequence", [False, True])
def test_the_claimed_collectives_lie_on_one_path_of_each_pass(
    tmp_path: Path, sequence: bool
) -> None:
    # The default hardware's one-level ring, links of 64 B/cycle + 200: a collective of
    # 8 x 16 words of 2 bytes (256 B) over ranks (0, 1), each rank sending 128 B on its
    # own link a shift, 2 + 200 cycles: an all-reduce two shifts, 404 cycles, a gather
    # or a scatter one.  Each pass's claimed collectives, weighted so, are walked on the
    # lowered pass's ops: its heaviest path holds them all; and each of its forward
    # GEMMs (forward pass) or input-gradient GEMMs (backward) waits for, or is waited
    # for by, each of them, so the array runs them in the gaps between collectives.
    plan = "{pipeline: 2, tensor: 2" + (", sequence_parallel: true}" if sequence else "}")
    inputs = loaded(tmp_path, plan, 4, "batch_size=4")
    graph = rank_step(inputs.run, inputs.hardware, _Run(inputs).step_graph(BASE), 1)
    ancestors = _ancestors(graph)
    cut = cut_stages(inputs.infos, 2, 1)
    ops = _chunk_ops(graph, cut)
    on = machine_of(inputs.hardware)
    found = chain_collectives(inputs.infos, plan_tensor(inputs.infos, 2, sequence))
    by_name = {info.layer.name: info for info in inputs.infos}
    cycles = {kind: least_cycles(on, kind, (0, 1), 256) for kind in (AR, AG, RS)}
    assert cycles == {AR: 404, AG: 202, RS: 202}
    weights = layer_weights(found, {}, 1, 1, lambda kind, _: cycles[kind], (2, 2))
    for g, names in enumerate(cut.chunks):
        chains = pass_chains(by_name, names, weights, 1)
        claimed: tuple[dict[tuple[str, Collective], int], ...] = ({}, {})
        for name in names:
            for kind, n in found[name].forward if name in found else ():
                assert 2 * n == 256
                at = by_name[name].inputs[0] if kind is AG else name  # gathered: its input's
                claimed[0][(at, kind)] = cycles[kind]
            for kind, _ in found[name].backward if name in found else ():
                claimed[1][(name, kind)] = cycles[kind]
        for which, (stage, phase) in enumerate(
            ((Stage.FORWARD, Phase.FWD), (Stage.BACKWARD, Phase.BWD_INPUT))
        ):
            ids = ops.rank_zero[g][stage]
            assert chains[1 + which] == _walked(graph, ids, claimed[which])
            comms = [
                i
                for i in ids
                if isinstance(op := graph.ops[i], CommOp)
                and (op.layer, op.collective) in claimed[which]
            ]
            gemms = [
                i
                for i in ids
                if isinstance(op := graph.ops[i], GemmOp)
                and op.phase is phase
                and op.stage is stage
                and op.layer in names
            ]
            assert len(comms) == len(claimed[which]) and gemms
            assert all(_comparable(c, i, ancestors) for c in comms for i in comms + gemms)
        # by hand: chunk 0 is the embedding and 2 blocks, chunk 1 2 blocks and the head
        if sequence:  # a block gathers and scatters twice each way; the embedding's
            # output scattered (forward) and its gradient gathered, the head's input
            # gathered, ln_f's gradient scattered
            assert chains[1:] == (9 * 202, 9 * 202)
        else:  # a block all-reduces twice each way; the embedding's output (forward),
            # ln_f's output gradient (backward)
            assert chains[1:] == ((5 * 404, 4 * 404) if g == 0 else (4 * 404, 5 * 404))


def test_a_layers_weight_is_its_chain_gemms_and_collectives(tmp_path: Path) -> None:
    # Weights are cycles times the scale, 10: fc's 3 forward and 5 input-gradient MACs
    # at the scale (0.3 and 0.5 cycles a sample); each collective, 2 samples of 128
    # words of 2 bytes, timed 7 cycles.  For 2 samples: fc 6 and 10, attention's
    # forward all-reduce 70, ln_1's backward one 70.
    inputs = loaded(tmp_path, "{pipeline: 2, tensor: 2}", 4, "batch_size=4")
    found = chain_collectives(inputs.infos, plan_tensor(inputs.infos, 2))
    sizes: list[int] = []

    def timed(kind: Collective, size_bytes: int) -> int:
        sizes.append(size_bytes)
        return 7

    weights = layer_weights(found, {"h.0.fc": (3, 5)}, 10, 2, timed, (2, 2))
    assert weights["h.0.fc"] == (6, 10)
    assert weights["h.0.attn"] == (70, 0)
    assert weights["h.0.ln_1"] == (0, 70)
    assert set(sizes) == {2 * 128 * 2}
    by_name = {info.layer.name: info for info in inputs.infos}
    names = ["h.0.ln_1", "h.0.attn", "h.0.add", "h.0.ln_2", "h.0.fc", "h.0.act", "h.0.proj"]
    # forward: ln_1, attn (70), ..., fc (6), act, proj (70) into the last; backward:
    # proj, act, fc (10), ln_2 (70), add, attn, ln_1 (70)
    chains = pass_chains(by_name, names, weights, 10)
    assert chains == (Fraction(146, 10), Fraction(146, 10), Fraction(150, 10))
