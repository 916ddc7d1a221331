"""Loading Numba for the compiled engine without SciPy's BLAS probe (timing/numba_setup.py).

Each check runs in a fresh interpreter, since the test process may have loaded
Numba and SciPy already.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it leaves its answer in ``out``."""
    script = f"import json, sys\nout = {{}}\n{code}\nprint(json.dumps(out))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACCELSIM_KERNELS": "auto"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return loaded


@pytest.mark.skipif(importlib.util.find_spec("scipy") is None, reason="SciPy not installed")
def test_a_compiled_run_loads_no_scipy_linear_algebra_and_leaves_it_importable() -> None:
    out = fresh(
        "import accelsim\n"
        "summary = accelsim.simulate('configs/runs/smoke.yaml',"
        " overrides=['timing.engine=compiled'])\n"
        "out['engine'] = summary.base.step_summary().settings['engine']\n"
        "out['linalg'] = 'scipy.linalg' in sys.modules\n"
        "import scipy.linalg.cython_blas\n"
        "out['blas'] = scipy.linalg.cython_blas.__name__"
    )
    assert out == {"engine": "compiled", "linalg": False, "blas": "scipy.linalg.cython_blas"}


def test_nothing_is_blocked_when_the_probe_already_ran() -> None:
    out = fresh(
        "import numba.np.arraymath\n"
        "before = numba.np.arraymath._HAVE_BLAS\n"
        "from accelsim.timing import numba_setup\n"
        "out['same'] = numba.np.arraymath._HAVE_BLAS == before\n"
        "out['blocked'] = numba_setup.BLAS_PROBE in sys.modules"
        " and sys.modules[numba_setup.BLAS_PROBE] is None"
    )
    assert out == {"same": True, "blocked": False}


def test_a_compiled_run_loads_one_cached_overload() -> None:
    run = (
        "import accelsim\n"
        "accelsim.simulate('configs/runs/smoke.yaml', overrides=['timing.engine=compiled'])\n"
    )
    fresh(run)  # compiles the loop into the on-disk cache if it is not there yet
    out = fresh(
        "from numba.core import caching\n"
        "loaded = []\n"
        "original = caching.Cache.load_overload\n"
        "def load(self, sig, target):\n"
        "    found = original(self, sig, target)\n"
        "    loaded.append([self._name.split()[1], found is not None])\n"
        "    return found\n"
        "caching.Cache.load_overload = load\n"
        f"{run}"
        "out['loaded'] = loaded"
    )
    assert out == {"loaded": [["run_events", True]]}
