"""A built wheel carries the configs and workloads: installed in a fresh venv, run elsewhere.

Marked ``packaging`` and left out of the default run: building the wheel fetches the
build backend (setuptools, wheel) from PyPI.  ``.ci/run`` runs it with
``python -m pytest -m packaging``.  The wheel is built from a copy of what it
packages (``pyproject.toml``, ``README.md``, ``accelsim/``), so the build leaves no
``build/`` or ``*.egg-info`` in the checkout.  The venv reuses the running
environment's site-packages (numpy, numba, ...) through a ``.pth`` file rather than
``--system-site-packages``, which from inside a venv such as ``.ci-venv`` would
expose the base interpreter's packages instead.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT as REPO

pytestmark = pytest.mark.packaging


def _run(args: list[object], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACCELSIM_DEBUG", "PYTHONPATH")}
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.stdout[-2000:], result.stderr[-4000:])
    return result.stdout


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bin/`` of a fresh venv holding the project's wheel and nothing else of accelsim."""
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "accelsim",
        source / "accelsim",
        ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"),
    )
    dist = work / "dist"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source], work))
    (wheel,) = dist.glob("accelsim-*.whl")

    venv = work / "venv"
    _ok(_run([sys.executable, "-m", "venv", venv], work))
    python = venv / "bin" / "python"
    purelib = _ok(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work)
    )
    parent = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib.strip()) / "_parent_env.pth").write_text("\n".join(parent) + "\n")
    _ok(
        _run(
            [python, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index", wheel],
            work,
        )
    )
    where = _ok(_run([python, "-c", "import accelsim; print(accelsim.__file__)"], work))
    assert Path(where.strip()).is_relative_to(venv), f"accelsim imported from {where}"
    return venv / "bin"


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory with no configs/ or workloads/ in it."""
    assert not (tmp_path / "configs").exists()
    return tmp_path


def test_models_lists_the_bundled_suite(venv_bin: Path, elsewhere: Path) -> None:
    out = _ok(_run([venv_bin / "accelsim", "models", "--json"], elsewhere))
    names = [m["name"] for m in json.loads(out)]
    assert len(names) == 14
    assert {"mlp", "resnet18", "bert_base"} <= set(names)


def test_layer_reads_bundled_hardware(venv_bin: Path, elsewhere: Path) -> None:
    args = ["layer", "--hardware", "configs/hardware/default.yaml", "--gemm", 64, 64, 64]
    record = json.loads(_ok(_run([venv_bin / "accelsim", *args, "--json"], elsewhere)))
    assert (record["m"], record["n"], record["k"]) == (64, 64, 64)
    assert record["compute_cycles"] > 0


def test_suite_runs_a_bundled_run_file(venv_bin: Path, elsewhere: Path) -> None:
    out = elsewhere / "out"
    args = ["suite", "configs/runs/suite.yaml", "--models", "mlp", "--out", out, "--force"]
    _ok(_run([venv_bin / "accelsim", *args], elsewhere))
    run_dir = out / "suite_default"
    assert (run_dir / "suite.csv").is_file()
    assert (run_dir / "mlp" / "summary.json").is_file()


def test_check_and_missing_bundled_paths(venv_bin: Path, elsewhere: Path) -> None:
    files = ["configs/hardware/eyeriss.yaml", "configs/runs/mlp.yaml", "workloads/vgg16.yaml"]
    assert _ok(_run([venv_bin / "accelsim", "check", *files], elsewhere)).count(": ok") == 3
    missing = _run([venv_bin / "accelsim", "check", "configs/hardware/nope.yaml"], elsewhere)
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.startswith("configs/hardware/nope.yaml: "), missing.stderr
