"""The cycle bounds of the two parts of a step its graph orders
(``RunResult.ordered_cycle_bounds``), counted by hand on a graph of vector ops."""

from __future__ import annotations

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_graph
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Phase, TensorKind
from tests.conftest import ROOT


def test_the_parts_are_what_the_forward_ends_wait_for_and_what_waits_for_them() -> None:
    # 0 f: x -> y; 1 loss: y -> l (the forward end); 2 b: l -> g; 3 side: w -> s (waits
    # for nothing: in neither part); 4 u: g -> x.  Every op reads and writes 2 B words;
    # vector unit 128 lanes, DRAM 128 B/cycle.
    inputs = load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets([]))
    b = GraphBuilder(inputs.machine.hardware.word_bytes)
    x, y = b.tensor("x", TensorKind.ACTIVATION, 4096), b.tensor("y", TensorKind.ACTIVATION, 4096)
    loss = b.tensor("loss", TensorKind.ACTIVATION, 4096)
    g = b.tensor("g", TensorKind.GRADIENT, 4096)
    w, s = b.tensor("w", TensorKind.WEIGHT, 8192), b.tensor("s", TensorKind.GRADIENT, 8192)
    b.vector("f", "l", Phase.FWD, 4096, 1, [x], [y])
    b.vector("loss", "l", Phase.FWD, 4096, 1, [y], [loss])
    b.vector("b", "l", Phase.BWD_INPUT, 4096, 4, [loss], [g])
    b.vector("side", "l", Phase.BWD_INPUT, 8192, 2, [w], [s])
    b.vector("u", "l", Phase.UPDATE, 4096, 2, [g], [x])
    run = simulate_graph(inputs, b.build())
    parts = run.ordered_cycle_bounds()
    # before: f and loss, 4 accesses of 8192 B (256 cycles), 32 + 32 vector cycles
    assert parts.before == {"dram": 256.0, "interconnect": 0.0, "compute": 64.0}
    # after: b and u, 4 accesses of 8192 B, 4096 x 4 / 128 + 4096 x 2 / 128 cycles
    assert parts.after == {"dram": 256.0, "interconnect": 0.0, "compute": 192.0}
    # the whole step adds side's 2 x 16384 B and 128 cycles
    assert run.cycle_bounds() == {"dram": 768.0, "interconnect": 0.0, "compute": 384.0}
    assert parts.before_end_cycles == run.trace.end_cycle[1]
    assert run.total_cycles >= parts.before_end_cycles + max(parts.after.values())
