"""Loading Numba for the compiled engine without SciPy's BLAS probe (timing/numba_setup.py).

Each check runs in a fresh interpreter, since the test process may have loaded
Numba and SciPy already.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import ROOT


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


# -- the cache covers every source the loop is compiled from -----------------------------

HELPER = (
    "from accelsim.timing.numba_setup import njit\n"
    "STEP = {step}\n"
    "@njit\n"
    "def helper(x):\n"
    "    return x + STEP\n"
)
LOOP = (
    "from accelsim.timing.numba_setup import cached\n"
    "from pkg.helper import helper\n"
    "@cached()\n"
    "def loop(x):\n"
    "    return 2 * helper(x)\n"
)


def _package(tmp_path: Path, **modules: str) -> dict[str, str]:
    """Package ``pkg`` in ``tmp_path`` of ``modules`` (name: source); the environment
    of a fresh interpreter that imports it (its cache beside it)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in modules.items():
        (package / f"{name}.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def _answer(script: str, env: dict[str, str], cwd: Path) -> list[int]:
    """The JSON list ``script`` prints last, run in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=cwd
    )
    assert result.returncode == 0, result.stderr
    answer: list[int] = json.loads(result.stdout.splitlines()[-1])
    return answer


def test_a_cached_function_is_compiled_again_when_a_helper_module_changes(
    tmp_path: Path,
) -> None:
    # loop(1) = 2 * (1 + STEP).  Unchanged, a fresh process loads the cached code;
    # with STEP edited in the helper's module (not the loop's) it compiles again.
    env = _package(tmp_path, helper=HELPER.format(step=1), loop=LOOP)
    script = (
        "import json\nfrom pkg.loop import loop\n"
        "stats = loop.stats\n"
        "print(json.dumps([loop(1), sum(stats.cache_hits.values()),"
        " sum(stats.cache_misses.values())]))"
    )
    assert _answer(script, env, tmp_path) == [4, 0, 1]  # compiled, and cached beside it
    assert list((tmp_path / "pkg" / "__pycache__").glob("loop.loop-*.nbi"))
    assert _answer(script, env, tmp_path) == [4, 1, 0]  # loaded from the cache
    (tmp_path / "pkg" / "helper.py").write_text(HELPER.format(step=5))
    assert _answer(script, env, tmp_path) == [12, 0, 1]  # the helper changed: compiled again
    assert _answer(script, env, tmp_path) == [12, 1, 0]


AS_IS = (
    "from accelsim.timing.numba_setup import cached, njit\n"
    "@cached(wraparound=False)\n"
    "def as_is(a, i):\n"
    "    return a[i]\n"
    "@njit\n"
    "def wrapped(a, i):\n"
    "    return a[i]\n"
)


def test_a_function_compiled_without_wraparound_takes_a_negative_index_as_it_is(
    tmp_path: Path,
) -> None:
    # A view 5 elements into its buffer: index -1 is the view's last element (9) with
    # Python's wraparound, the buffer's element before the view (4) without it; a
    # function compiled afterwards in the same process wraps again, and the cached
    # code (the second run) is compiled without it too.
    env = _package(tmp_path, indexing=AS_IS)
    script = (
        "import json\nimport numpy as np\nfrom pkg.indexing import as_is, wrapped\n"
        "view = np.arange(10)[5:]\n"
        "print(json.dumps([int(as_is(view, -1)), int(wrapped(view, -1)), int(as_is(view, 2)),"
        " sum(as_is.stats.cache_hits.values())]))"
    )
    assert _answer(script, env, tmp_path) == [4, 9, 7, 0]
    assert _answer(script, env, tmp_path) == [4, 9, 7, 1]


def test_the_event_loops_cache_covers_its_helpers_and_the_memory_models() -> None:
    from accelsim.timing import event_loop
    from accelsim.timing.numba_setup import compiled_from

    files = {p.relative_to(ROOT).as_posix() for p in compiled_from(event_loop.run_events.py_func)}
    assert {
        "accelsim/timing/event_loop.py",
        "accelsim/timing/flat.py",  # it reads flat.KIND_UNIT
        "accelsim/timing/loop/queues.py",
        "accelsim/timing/loop/records.py",
        "accelsim/timing/loop/transfers.py",
        "accelsim/timing/loop/units.py",
        "accelsim/timing/memories/compiled.py",
        "accelsim/timing/memories/fifo.py",
        "accelsim/timing/memories/interleaved.py",
    } <= files


def _jitted(function: Any) -> list[Any]:
    """``function`` and every jitted function it calls, recursively."""
    from numba.core.dispatcher import Dispatcher

    from accelsim.timing.numba_setup import _names

    found, pending = [], [function]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.append(current)
        for name in _names(current.__code__):
            value = current.__globals__.get(name)
            if isinstance(value, Dispatcher):
                pending.append(value.py_func)
    return found


def _imported(module: Any) -> set[str]:
    """The names ``module`` imports from other modules (``from x import name``)."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_event_loop_reads_no_constant_imported_by_name() -> None:
    # compiled_from cannot trace a constant imported by name (``from m import X``), so a
    # change to it would leave a stale loop in the cache: jitted code reads another
    # module's constants as that module's attributes.
    from numba.core.dispatcher import Dispatcher

    from accelsim.timing import event_loop

    offending = []
    for function in _jitted(event_loop.run_events.py_func):
        module = sys.modules[function.__module__]
        imported = _imported(module)
        for name in function.__code__.co_names:
            value = function.__globals__.get(name)
            plain = not isinstance(value, Dispatcher | types.ModuleType) and value is not None
            if plain and name in imported and not callable(value):
                offending.append(f"{function.__qualname__}: {name}")
    assert offending == []


def test_the_index_fix_is_replaced_only_where_numba_has_the_one_it_stands_in_for() -> None:
    # This Numba's fix is replaced (a rename or a new parameter list shows up here);
    # a module without it, or with another parameter list, keeps the wraparound.
    from numba.np import arrayobj

    from accelsim.timing.numba_setup import replaceable_fix

    assert replaceable_fix(arrayobj) is arrayobj.fix_integer_index

    def reshaped(context: object, builder: object, idxty: object, idx: object) -> None:
        return None

    assert replaceable_fix(SimpleNamespace()) is None
    assert replaceable_fix(SimpleNamespace(fix_integer_index=reshaped)) is None
