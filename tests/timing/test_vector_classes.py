"""The vector unit's fixed cost per op class (``vector_unit.class_overhead_cycles``):
each class's cost reaches exactly the ops of that class, in both engines."""

from __future__ import annotations

import math

import pytest

from accelsim.config.base import Convention
from accelsim.config.enums import DEFAULT_CHUNKS_PER_OP, PsumPolicy, VectorClass
from accelsim.config.hardware import HardwareSpec
from accelsim.errors import ConfigError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import OpGraph, Phase, Tensor, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.timing import engines
from accelsim.timing.costs import op_costs
from accelsim.timing.engines import EngineKind
from accelsim.timing.machine import Machine, machine_of
from tests.conftest import make_hw

LANES, ELEMENTS, OPS = 16, 64, 3  # 64 x 3 / 16 = 12 cycles of lanes per op
OWN = {"reduce": 7, "norm": 2000, "data_movement": 0}
UNIT = 100  # vector_unit.op_overhead_cycles: the classes without a cost of their own


def _hw(**classes: int) -> HardwareSpec:
    """Lanes of 16, DRAM without limits (no transfer time), the unit's fixed cost 100."""
    return make_hw(**{
        "vector_unit.lanes": LANES, "vector_unit.op_overhead_cycles": UNIT,
        "vector_unit.class_overhead_cycles": classes,
        "dram.bandwidth_bytes_per_cycle": math.inf, "dram.latency_cycles": 0,
    })  # fmt: skip


def _chain(hw: HardwareSpec) -> OpGraph:
    """One vector op of each class in turn, each reading the last one's output."""
    builder = GraphBuilder(hw.word_bytes)
    x = Tensor("x", TensorKind.ACTIVATION, ELEMENTS, 2)
    for op_class in VectorClass:
        y = Tensor(op_class.value, TensorKind.ACTIVATION, ELEMENTS, 2)
        builder.vector(op_class.value, "l", Phase.FWD, ELEMENTS, OPS, [x], [y], op_class=op_class)
        x = y
    return builder.build()


def _ends(hw: HardwareSpec, kind: EngineKind) -> list[int]:
    graph = _chain(hw)
    machine = machine_of(hw)
    costs = op_costs(
        graph, schedule(graph, (machine.array,)), machine, Convention.ACCELSIM,
        PsumPolicy.CHUNK, DEFAULT_CHUNKS_PER_OP,
    )  # fmt: skip
    return [int(e) for e in engines.simulate(graph, costs, Machine.of(hw), kind).end_cycle]


@pytest.mark.parametrize("kind", [EngineKind.SIMPY, EngineKind.COMPILED])
def test_each_class_pays_its_own_fixed_cost_and_the_rest_the_units(kind: EngineKind) -> None:
    # in VectorClass's order: elementwise, transcendental, reduce, data_movement, norm;
    # each op 12 cycles on the lanes after its fixed cost, one after the other
    fixed = [UNIT, UNIT, 7, 0, 2000]
    expected = [sum(12 + f for f in fixed[: i + 1]) for i in range(5)]
    assert expected == [112, 224, 243, 255, 2267]
    assert _ends(_hw(**OWN), kind) == expected


def test_without_class_costs_every_op_pays_the_units() -> None:
    assert _ends(_hw(), EngineKind.SIMPY) == [112 * (i + 1) for i in range(5)]


def test_a_class_cost_equal_to_the_units_changes_nothing() -> None:
    everyone = {c.value: UNIT for c in VectorClass}
    assert _ends(_hw(**everyone), EngineKind.SIMPY) == _ends(_hw(), EngineKind.SIMPY)


def test_every_class_has_its_key_and_a_lookup() -> None:
    hw = _hw(**OWN)
    costs = hw.vector_unit.class_overhead_cycles
    assert [costs.cycles(c) for c in VectorClass] == [None, None, 7, 0, 2000]
    assert [hw.vector_unit.overhead_cycles(c, 5) for c in VectorClass] == [100, 100, 7, 0, 2000]
    assert set(type(costs).model_fields) == {c.value for c in VectorClass}


def test_an_unknown_class_is_a_spec_error() -> None:
    with pytest.raises(ConfigError) as error:
        _hw(softmax=5)
    assert str(error.value) == (
        "test: vector_unit.class_overhead_cycles.softmax: unknown key; expected one of:"
        " data_movement, elementwise, norm, reduce, transcendental (got 5)"
    )
