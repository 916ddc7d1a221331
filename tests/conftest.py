"""Shared fixtures: the repository root and small hardware/energy specs."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from accelsim.config.energy import EnergyTable
from accelsim.config.hardware import HardwareSpec
from accelsim.config.loader import Override, load_energy, load_hardware, read_yaml
from accelsim.config.run import AssignmentPolicy, OptimizerKind, OptimizerSpec, StridedDx
from accelsim.config.validate import validate_data
from accelsim.graph.ops import GemmOp, OpGraph, Phase
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.shapes import LayerInfo
from accelsim.lowering.step import lower
from accelsim.mapping.placement import place
from accelsim.workload.loader import load_workload
from accelsim.workload.model import Workload

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as a module, registered under ``NAME`` (dataclasses look
    their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make_hw(**changes: Any) -> HardwareSpec:
    """The default hardware with dotted-key changes, e.g. ``make_hw(**{"array.rows": 8})``."""
    data = read_yaml(ROOT / "configs" / "hardware" / "default.yaml")
    for key, value in changes.items():
        target = data
        *parents, last = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return validate_data(HardwareSpec, data, "test")


def assign(
    policy: AssignmentPolicy,
    infos: list[LayerInfo],
    workload: Workload,
    hw: HardwareSpec,
    batch: int,
    strided_dx: StridedDx,
    optimizer: OptimizerKind,
) -> OpGraph:
    """Lower the training step of ``workload`` and place it by ``policy``, with its updates."""

    def step(samples: int) -> OpGraph:
        return lower(infos, workload, samples, hw.word_bytes, strided_dx)

    spec = OptimizerSpec(kind=optimizer)
    return place(policy, step, batch, hw.processors, spec, hw.word_bytes)


@cache
def model(
    name: str, variant: str | None = None, batch: int = 1
) -> tuple[dict[str, LayerInfo], OpGraph]:
    """Layer infos by name and the lowered training step of ``workloads/<name>.yaml``."""
    choose = None if variant is None else Override("workload_variant", variant, "t", "t")
    workload = load_workload(ROOT / "workloads" / f"{name}.yaml", variant=choose)
    infos = infer_shapes(workload, "t")
    graph = assign(
        AssignmentPolicy.SINGLE,
        infos,
        workload,
        make_hw(),
        batch,
        StridedDx.SKIP_ZEROS,
        OptimizerKind.SGD,
    )
    return {i.layer.name: i for i in infos}, graph


def params(graph: OpGraph) -> int:
    """Trainable elements of a graph."""
    return sum(p.weight.elements for p in graph.parameters)


def fwd_macs(graph: OpGraph) -> int:
    """Forward GEMM MACs of a graph."""
    return sum(op.macs for op in graph.ops if isinstance(op, GemmOp) and op.phase is Phase.FWD)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def default_hw() -> HardwareSpec:
    return load_hardware(ROOT / "configs" / "hardware" / "default.yaml")


@pytest.fixture
def energy_table() -> EnergyTable:
    return load_energy(ROOT / "configs" / "energy" / "horowitz45.yaml")


SLOW_CASES = (
    "tests/contracts/test_memory_models.py::test_the_engines_agree_on_memories_of_several_models",
    "tests/contracts/test_extension_recipes.py::test_a_memory_model_added_by_its_recipe",
    "tests/techniques/pipelines/test_pipelining.py::test_no_period_beats_its_bounds[per_processor-resnet18-4-layerpipe: {}]",
    "tests/techniques/pipelines/test_pipelining.py::test_no_period_beats_its_bounds[shared-resnet18-4-layerpipe: {}]",
    "tests/techniques/pipelines/test_pipelining.py::test_speedup_does_not_depend_on_the_mini_batches_simulated[layerpipe-options1]",
    "tests/techniques/pipelines/test_pipelining.py::test_every_schedule_does_the_same_macs[layerpipe]",
    "tests/techniques/pipelines/test_pipelining.py::test_layerpipe_default_tries_both_placements[resnet18-5-winner0-1.038]",
    "tests/techniques/pipelines/test_layerpipe_optimum.py::test_uneven_layers_reach_the_optimum_but_for_the_delay_cap",
    "tests/report/test_bar_layout.py::test_no_text_leaves_the_figure_or_overlaps_another[",
)  # fmt: skip
"""The slowest cases of the default run (``--durations``), marked ``slow`` here, where one
case of a parametrized test can be named (one ending in ``[``: every case of the test):
``.ci/run`` runs them with ``-m slow``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        base = item.nodeid.partition("[")[0] + "["
        if item.nodeid in SLOW_CASES or base in SLOW_CASES:
            item.add_marker(pytest.mark.slow)
