"""Numba for accelsim's compiled code, loaded without probing SciPy's BLAS.

The first jitted call of a process, compiled or loaded from the cache,
initialises Numba's CPU target, which imports Numba's NumPy support; its array
math module probes for a BLAS once, at import, by importing
``scipy.linalg.cython_blas``, and so SciPy's linear algebra (about 0.2 s,
a third of what loading Numba and the cached event loop costs, when SciPy is
installed).  Nothing accelsim compiles uses a BLAS, so :func:`njit` imports
that module first with the probe's import blocked (a ``None`` entry in
``sys.modules``, which makes that import fail without loading anything) and
removes the block at once.  The probe's answer only picks, for ``np.convolve``
and ``np.correlate`` on floats compiled later in the process, Numba's own inner
product instead of BLAS's; ``np.dot`` and ``np.linalg`` check for a BLAS again
when they are compiled and find SciPy's as usual.  Nothing changes when the
probe already ran or SciPy's BLAS is already imported.

The event loop (:mod:`accelsim.timing.event_loop`) and the kernels
(:mod:`accelsim.timing.kernels`) take :func:`njit` from here.
"""

from __future__ import annotations

import sys

from numba import njit

__all__ = ["njit"]

BLAS_PROBE = "scipy.linalg.cython_blas"


def _import_array_math_unprobed() -> None:
    """Import Numba's array math with the BLAS probe's import blocked."""
    if "numba.np.arraymath" in sys.modules or BLAS_PROBE in sys.modules:
        return
    sys.modules[BLAS_PROBE] = None  # type: ignore[assignment]
    try:
        import numba.np.arraymath  # noqa: F401  (the probe runs here, once)
    except ImportError:  # a Numba laid out otherwise: it loads as it would without this
        pass
    finally:
        if sys.modules.get(BLAS_PROBE, ()) is None:
            del sys.modules[BLAS_PROBE]


_import_array_math_unprobed()
