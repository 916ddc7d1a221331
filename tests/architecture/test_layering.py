"""Import rules of docs/architecture.md: one-way layers, heavy libraries in one place each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "accelsim"
ORDER = [
    "errors",
    "counts",
    "units",
    "resources",
    "provenance",
    "collections_policy",
    "config",
    "network",
    "graph",
    "workload",
    "lowering",
    "importer",
    "mapping",
    "timing",
    "energy",
    "report",
    "techniques",
    "driver",
    "calibration",
    "sweep",
    "planner",
    "spec_reference",
    "api",
    "cli_sweep",
    "cli_plan",
    "cli_import",
    "cli_run",
    "cli_layer",
    "cli_calibrate",
    "cli_parser",
    "cli",
]
ONLY_IN = {
    "yaml": {"config/loader.py"},
    "numba": {"timing/numba_setup.py"},
    "simpy": {"timing/channel.py", "timing/engine.py"},
    "pandas": {"api.py"},
    "onnx": {"importer/onnx_graph.py", "importer/graph_view.py", "importer/onnx_model.py"},
    "torch": {"importer/torch_source.py"},
    "matplotlib": {
        "report/figure.py",
        "report/plots.py",
        "sweep/plots.py",
        "sweep/point_labels.py",
        "report/bars.py",
        "planner/figure.py",
    },
}


def _layer(relative: str) -> str:
    return relative.split("/")[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("relative", MODULES)
def test_imports_flow_one_way(relative: str) -> None:
    layer = _layer(relative)
    if layer not in ORDER:
        return
    rank = ORDER.index(layer)
    for name in _imports(PACKAGE / relative):
        if name.startswith("accelsim."):
            target = name.split(".")[1]
            if target in ORDER:
                assert ORDER.index(target) <= rank, f"{relative} imports higher layer {name}"


@pytest.mark.parametrize("relative", MODULES)
def test_heavy_libraries_stay_in_their_module(relative: str) -> None:
    roots = {name.split(".")[0] for name in _imports(PACKAGE / relative)}
    for library, allowed in ONLY_IN.items():
        if library in roots:
            assert relative in allowed, f"{relative} imports {library}"


def test_workload_loader_uses_config_loader_for_yaml() -> None:
    assert "yaml" not in {n.split(".")[0] for n in _imports(PACKAGE / "workload" / "loader.py")}
