"""Choosing NumPy or Numba for the fold-level closed forms."""

from __future__ import annotations

import subprocess
import sys

import pytest

from accelsim.errors import ConfigError
from accelsim.timing import backend, closed_form, kernels


def test_numpy_mode_never_loads_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "numpy")
    monkeypatch.setattr(backend._Budget, "spent_rows", 10 * backend.BREAK_EVEN_ROWS)
    assert backend.kernels_for(10**7) is backend.NUMPY


def test_numba_mode_uses_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "numba")
    chosen = backend.kernels_for(1)
    assert chosen.name == "numba"
    assert chosen.fold_cycles is kernels.fold_cycles
    assert chosen.dram_words is kernels.dram_words


def test_auto_switches_to_numba_once_the_numpy_work_would_have_paid_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    monkeypatch.setattr(backend._Budget, "spent_rows", 0)
    per_call = 100_000 + backend.ROWS_PER_TABLE
    calls_on_numpy = -(-backend.BREAK_EVEN_ROWS // per_call)
    names = [backend.kernels_for(100_000).name for _ in range(calls_on_numpy + 3)]
    assert names == ["numpy"] * calls_on_numpy + ["numba"] * 3
    assert backend._Budget.spent_rows == calls_on_numpy * per_call


def test_auto_keeps_numpy_for_a_training_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    monkeypatch.setattr(backend._Budget, "spent_rows", 0)
    assert backend.kernels_for(300).fold_cycles is closed_form.fold_cycles
    assert backend._Budget.spent_rows == 300 + backend.ROWS_PER_TABLE


def test_bad_mode_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "fast")
    with pytest.raises(ConfigError) as info:
        backend.kernels_for(1)
    assert str(info.value) == (
        "environment: ACCELSIM_KERNELS: must be one of auto, numpy, numba (got 'fast')"
    )


def test_a_layer_command_does_not_import_numba(root) -> None:
    """Start-up: `accelsim layer` on a few GEMMs does not load Numba (nor matplotlib)."""
    code = (
        "import sys\n"
        "from accelsim.cli import main\n"
        "assert main(['layer', '--hardware', 'configs/hardware/default.yaml', '--gemm', '64', '32', '48', '--json']) == 0\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'matplotlib'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"
