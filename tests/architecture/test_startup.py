"""A lean start-up: what ``import accelsim`` and each command do not load.

Each check runs in a fresh interpreter, since the test process has loaded
everything already.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import accelsim
from accelsim import cli, collections_policy
from accelsim.config.base import Spec
from accelsim.techniques.registry import REGISTRY, technique_class
from tests.conftest import ROOT

HEAVY = ("matplotlib", "numba", "scipy")
TECHNIQUE_PACKAGES = sorted(
    {".".join(entry.split(":")[0].split(".")[:3]) for entry in REGISTRY.values()}
)
"""Each technique's subpackage (``accelsim.techniques.prediction``, ...)."""


def techniques_loaded(loaded: set[str]) -> set[str]:
    """The technique subpackages of which ``loaded`` has a module."""
    return {p for p in TECHNIQUE_PACKAGES for m in loaded if m == p or m.startswith(p + ".")}


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACCELSIM_KERNELS": "auto"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def after_command(*argv: str) -> set[str]:
    """The modules a fresh interpreter has loaded after ``accelsim ARGV`` succeeded."""
    return loaded_after(f"from accelsim import cli\nassert cli.main({list(argv)!r}) == 0")


def test_import_accelsim_loads_only_the_version() -> None:
    loaded = loaded_after("import accelsim")
    assert {m for m in loaded if m.startswith("accelsim")} == {"accelsim", "accelsim._version"}
    assert not loaded & {"numpy", "pydantic", "yaml", "simpy", *HEAVY}


def test_every_public_name_loads_on_first_use() -> None:
    assert {*accelsim._LAZY, "__version__"} == set(accelsim.__all__)
    assert set(accelsim.__all__) <= set(dir(accelsim))
    for name in accelsim.__all__:
        assert getattr(accelsim, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        accelsim.nothing  # noqa: B018


def test_python_m_accelsim_imports_only_the_command_line() -> None:
    loaded = loaded_after(
        "import runpy, sys\nsys.argv = ['accelsim', '--help']\ntry:\n    runpy.run_module('accelsim', run_name='__main__')\nexcept SystemExit:\n    pass"
    )
    assert "accelsim.cli" in loaded
    assert not loaded & {"accelsim.api", "accelsim.driver.inputs", "numpy", "simpy", *HEAVY}


LAYER_NEVER = {
    *HEAVY,
    "simpy",
    "tqdm",
    "accelsim.api",
    "accelsim.config.run",
    "accelsim.config.run_file",
    "accelsim.driver.inputs",
    "accelsim.driver.run",
    "accelsim.driver.bench",
    "accelsim.lowering.rules",
    "accelsim.report.plots",
    "accelsim.sweep",
    "accelsim.timing.engine",
    "accelsim.timing.engines",
    "accelsim.workload.model",
}


@pytest.mark.parametrize(
    "shape",
    [
        ["--gemm", "64", "128", "256", "--json"],
        ["--conv", "58", "58", "3", "3", "64", "64", "1", "--phase", "bwd_weight"],
        ["--topology", "configs/validation/ci_small_conv.csv", "--json"],
    ],
)
def test_layer_loads_no_engine_technique_run_driver_or_sweep(shape: list[str]) -> None:
    loaded = after_command("layer", "--hardware", "configs/hardware/default.yaml", *shape)
    assert not loaded & LAYER_NEVER
    assert not {m for m in loaded if m.startswith("accelsim.techniques")}


def test_run_loads_no_plots_sweep_progress_bar_or_unused_technique(tmp_path: Path) -> None:
    loaded = after_command("run", "configs/runs/smoke.yaml", "--out", str(tmp_path))
    assert "simpy" in loaded
    assert not loaded & {*HEAVY, "tqdm", "accelsim.sweep", "accelsim.api"}
    assert not techniques_loaded(loaded)
    assert not loaded & {"accelsim.report.plots", "accelsim.timing.compiled"}
    # numpy loads these on first use: a run without techniques draws no random
    # numbers, and counting processors needs no masked arrays.
    assert not loaded & {"numpy.random", "numpy.ma"}


@pytest.mark.parametrize("code", ["import accelsim", "import accelsim.cli"])
def test_import_loads_no_plots_numba_simpy_or_technique(code: str) -> None:
    loaded = loaded_after(code)
    assert not loaded & {*HEAVY, "simpy"}
    assert not techniques_loaded(loaded)


def test_a_run_without_techniques_loads_simpy_only() -> None:
    loaded = loaded_after("import accelsim\naccelsim.simulate('configs/runs/smoke.yaml')")
    assert "simpy" in loaded
    assert not loaded & {*HEAVY, "accelsim.timing.compiled"}
    assert not techniques_loaded(loaded)


def test_a_run_loads_only_the_techniques_it_names() -> None:
    loaded = loaded_after(
        "import accelsim\naccelsim.simulate('configs/runs/mlp.yaml',"
        " overrides=['run.techniques={gradient_prediction: {}}'])"
    )
    assert techniques_loaded(loaded) == {"accelsim.techniques.prediction"}


def test_registry_names_match_the_classes() -> None:
    for name in REGISTRY:
        cls = technique_class(name)
        assert cls is not None and cls.name == name
    assert technique_class("dropout") is None


LAYER = ["layer", "--hardware", "configs/hardware/default.yaml", "--gemm", "8", "8", "8"]


def test_the_process_command_freezes_what_is_left_for_a_quick_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    gc.unfreeze()
    assert cli.main(LAYER) == 0
    assert gc.get_freeze_count() == 0  # a caller in Python keeps its collector
    monkeypatch.setattr(sys, "argv", ["accelsim", *LAYER])
    try:
        assert cli.main() == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    capsys.readouterr()


def test_the_benchmark_floor_builds_its_model_as_accelsim_builds_specs() -> None:
    """``scripts/startup_floor.py`` stands for what any validated command pays: it
    loads no accelsim module, configures its model as :class:`Spec` does and
    collects garbage as the command line does."""
    floor = str(ROOT / "scripts" / "startup_floor.py")
    loaded = loaded_after(f"import runpy\nrunpy.run_path({floor!r})")
    assert not {m for m in loaded if m.split(".")[0] == "accelsim"}
    threshold = gc.get_threshold()
    try:
        namespace = runpy.run_path(floor)
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert namespace["Array"].model_config == Spec.model_config
    assert namespace["GC_ALLOCATIONS"] == collections_policy.GC_ALLOCATIONS


def test_check_of_a_hardware_file_loads_no_run_driver() -> None:
    loaded = after_command("check", "configs/hardware/default.yaml")
    assert not loaded & {
        *HEAVY,
        "accelsim.driver.inputs",
        "accelsim.config.run",
        "accelsim.lowering.rules",
        "accelsim.energy.model",
        "accelsim.sweep.plan",
    }


def test_check_of_a_run_without_a_parallel_plan_loads_no_plan_checks_or_costs() -> None:
    loaded = after_command("check", "configs/runs/default.yaml")
    assert "accelsim.driver.inputs" in loaded
    assert not loaded & {
        *HEAVY,
        "accelsim.driver.parallel",
        "accelsim.driver.pipeline",
        "accelsim.driver.pipeline_step",
        "accelsim.driver.zero",
        "accelsim.driver.expert_parallel",
        "accelsim.report.result",
        "accelsim.report.pipeline",
        "accelsim.timing.costs",
        "accelsim.mapping.placement",
    }


def test_sweep_names_load_on_first_use() -> None:
    loaded = loaded_after("import accelsim.sweep.collect")
    assert not loaded & {
        "accelsim.sweep.plan",
        "accelsim.sweep.executors",
        "accelsim.driver.inputs",
    }
    from accelsim import sweep

    assert set(sweep._LAZY) == set(sweep.__all__) <= set(dir(sweep))
    for name in sweep.__all__:
        assert getattr(sweep, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        sweep.nothing  # noqa: B018


def test_plot_of_a_finished_sweep_loads_no_planning_or_simulation(tmp_path: Path) -> None:
    from accelsim.sweep import Executor, plan_sweep, run_sweep

    run_sweep(plan_sweep(ROOT / "configs" / "sweeps" / "arrays.yaml"), tmp_path, Executor())
    loaded = after_command("plot", str(tmp_path / "arrays"), "--kind", "heatmap")
    assert "matplotlib" in loaded
    assert not loaded & {
        "accelsim.sweep.plan",
        "accelsim.sweep.executors",
        "accelsim.driver.inputs",
        "accelsim.timing.engines",
        "simpy",
        "numba",
    }
