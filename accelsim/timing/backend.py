"""Which implementation computes the fold-level closed forms: NumPy or Numba.

Both implementations give identical results (``tests/timing/test_kernels.py``).  The
NumPy one (:mod:`accelsim.timing.closed_form`) needs nothing accelsim does not
already import.  The Numba kernels (:mod:`accelsim.timing.kernels`) are 3-7x
faster per row, but a process pays about 0.45 s to import Numba and load the
cached kernels, while the NumPy work of a whole training step takes well under
a millisecond.  ``auto`` therefore decides like ski rental: NumPy until the
work done would have paid for loading Numba, then Numba for the rest of the
process, which keeps kernel time plus loading within about twice that of the
better fixed choice made in hindsight.

The environment variable ``ACCELSIM_KERNELS`` selects ``auto`` (default),
``numpy`` or ``numba``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ConfigError
from accelsim.timing import closed_form

ENV_VAR = "ACCELSIM_KERNELS"
MODES = ("auto", "numpy", "numba")

# NumPy work, in table rows, that costs about as much as loading Numba (~0.45 s
# on the 2-core reference machine at ~0.2 us per row), and the per-table
# overhead of the NumPy path (~50 us) expressed in rows.
BREAK_EVEN_ROWS = 2_000_000
ROWS_PER_TABLE = 250


@dataclass(frozen=True)
class Kernels:
    """The three fold-level functions of one implementation."""

    name: str
    fold_cycles: Callable[..., Any]
    sram_counts: Callable[..., Any]
    dram_words: Callable[..., Any]


NUMPY = Kernels("numpy", closed_form.fold_cycles, closed_form.sram_counts, closed_form.dram_words)


def _numba() -> Kernels:
    from accelsim.timing import kernels  # Numba loads only when it pays

    return Kernels("numba", kernels.fold_cycles, kernels.sram_counts, kernels.dram_words)


class _Budget:
    """Rows costed with NumPy so far in this process (``auto`` mode)."""

    spent_rows = 0


def mode() -> str:
    """The selected mode.

    Raises:
        ConfigError: if ``ACCELSIM_KERNELS`` is set to something else than a mode.
    """
    value = os.environ.get(ENV_VAR, "auto")
    if value not in MODES:
        raise ConfigError.single(
            "environment", ENV_VAR, f"must be one of {', '.join(MODES)}", value
        )
    return value


def kernels_for(rows: int) -> Kernels:
    """The implementation to cost a table of ``rows`` GEMMs with.

    Raises:
        ConfigError: if ``ACCELSIM_KERNELS`` is invalid.
    """
    selected = mode()
    if selected == "numpy":
        return NUMPY
    if selected == "numba" or _Budget.spent_rows >= BREAK_EVEN_ROWS:
        return _numba()
    _Budget.spent_rows += rows + ROWS_PER_TABLE
    return NUMPY
