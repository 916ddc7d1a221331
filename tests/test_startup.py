"""A lean start-up: what ``import accelsim`` and a plain run do not load.

Each check runs in a fresh interpreter, since the test process has loaded
everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.techniques.registry import REGISTRY, technique_class

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "numba", "scipy")
TECHNIQUE_MODULES = sorted({f"accelsim.techniques.{module}" for module, _ in REGISTRY.values()})


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACCELSIM_KERNELS": "auto"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.parametrize("code", ["import accelsim", "import accelsim.cli"])
def test_import_loads_no_plots_numba_simpy_or_technique(code: str) -> None:
    loaded = loaded_after(code)
    assert not loaded & {*HEAVY, "simpy", *TECHNIQUE_MODULES}


def test_a_run_without_techniques_loads_simpy_only() -> None:
    loaded = loaded_after("import accelsim\naccelsim.simulate('configs/runs/smoke.yaml')")
    assert "simpy" in loaded
    assert not loaded & {*HEAVY, *TECHNIQUE_MODULES, "accelsim.timing.compiled"}


def test_a_run_loads_only_the_techniques_it_names() -> None:
    loaded = loaded_after(
        "import accelsim\naccelsim.simulate('configs/runs/mlp.yaml',"
        " overrides=['run.techniques={gradient_prediction: {}}'])"
    )
    assert loaded & set(TECHNIQUE_MODULES) == {"accelsim.techniques.gradient_prediction"}


def test_registry_names_match_the_classes() -> None:
    for name in REGISTRY:
        cls = technique_class(name)
        assert cls is not None and cls.name == name
    assert technique_class("dropout") is None
