"""Numba kernel: surviving folds of every GEMM in every step under tile dropout.

The hot loop of approximate random dropout: steps x GEMMs x folds x the weight
tiles of each fold.  Compiled with ``@njit(cache=True)``; the NumPy reference is
:func:`accelsim.timing.dropout_folds.surviving_folds` (``tests/test_dropout.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_NONE, _W_IN, _W_OUT = 0, 1, 2


@njit(cache=True)
def surviving_folds(
    sr: np.ndarray,
    sc: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    sr_is: np.ndarray,
    sc_is: np.ndarray,
    w_in: np.ndarray,
    w_out: np.ndarray,
    part: np.ndarray,
    tile_rows: np.ndarray,
    tile_cols: np.ndarray,
    site: np.ndarray,
    period: np.ndarray,
    offset: np.ndarray,
    keep: np.ndarray,
) -> np.ndarray:
    """Surviving folds ``[step, gemm]``; see :mod:`accelsim.timing.dropout_folds`."""
    steps = period.shape[0]
    n = sr.shape[0]
    out = np.empty((steps, n), np.int64)
    for s in range(steps):
        for g in range(n):
            fr = (sr[g] + rows[g] - 1) // rows[g]
            fc = (sc[g] + cols[g] - 1) // cols[g]
            if site[g] < 0:
                out[s, g] = fr * fc
                continue
            d = period[s, site[g]]
            o = offset[s, site[g]]
            k = keep[s, site[g]] != 0
            tr = tile_rows[g]
            tc = tile_cols[g]
            alive = 0
            for i in range(fr):
                r_lo = i * rows[g]
                r_hi = min(r_lo + rows[g], sr[g])
                for j in range(fc):
                    c_lo = j * cols[g]
                    c_hi = min(c_lo + cols[g], sc[g])
                    in_lo, in_hi, out_lo, out_hi = 0, w_in[g], 0, w_out[g]
                    if sr_is[g] == _W_IN:
                        in_lo, in_hi = r_lo, r_hi
                    elif sr_is[g] == _W_OUT:
                        out_lo, out_hi = r_lo, r_hi
                    if sc_is[g] == _W_IN:
                        in_lo, in_hi = c_lo, c_hi
                    elif sc_is[g] == _W_OUT:
                        out_lo, out_hi = c_lo, c_hi
                    if in_hi > part[g]:
                        alive += 1
                        continue
                    runs = False
                    for r in range(in_lo // tr, (in_hi - 1) // tr + 1):
                        for c in range(out_lo // tc, (out_hi - 1) // tc + 1):
                            if ((r + c) % d == o) == k:
                                runs = True
                                break
                        if runs:
                            break
                    if runs:
                        alive += 1
            out[s, g] = alive
    return out
