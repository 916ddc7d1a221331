"""Approximate dropout's Numba kernel: what the folds of GEMMs whose weight tiles a
pattern drops use, for every drawn step and GEMM at once.

Compiled with ``@njit(cache=True)`` (``njit`` from :mod:`accelsim.timing.numba_setup`;
Numba keys its cache by this file and each function's name).  The NumPy reference is
:func:`accelsim.techniques.dropout.folds.compacted_use` (one GEMM, one step), which
``tests/techniques/dropout/test_approximate_dropout.py`` holds it equal to.  A GEMM is a
row of an ``int64`` table with the columns of
:data:`~accelsim.techniques.dropout.folds.FIELDS`; a weight dimension is 1 (``W_IN``) or
2 (``W_OUT``), 0 for the batch.
"""

from __future__ import annotations

import numpy as np

from accelsim.timing.numba_setup import njit

SR, SC, T, ROWS, COLS, SR_IS, SC_IS, W_IN, W_OUT, PART, TILE_ROWS, TILE_COLS = range(12)
"""The columns of a GEMM's row (``folds.FIELDS``)."""


@njit(cache=True)
def compacted_use(
    gemms: np.ndarray, site: np.ndarray, period: np.ndarray, offset: np.ndarray, keep: np.ndarray
) -> np.ndarray:
    """What the folds of each GEMM use in each drawn step, ``[step, gemm, field]`` (the
    fields of :data:`accelsim.mapping.schedule.USE_FIELDS`), its surviving tiles
    compacted per column block: steps x GEMMs x the pattern's line classes x the
    tiles of a line.

    Args:
        gemms: One row per GEMM (``folds.FIELDS``).
        site: Each GEMM's pattern site (-1: no tile pattern, every fold runs).
        period, offset, keep: Each step's pattern per site, ``[step, site]``.
    """
    steps = period.shape[0]
    n = gemms.shape[0]
    out = np.zeros((steps, n, 9), np.int64)
    for g in range(n):
        row = gemms[g]
        if site[g] < 0:
            whole = _whole_use(row)
            for s in range(steps):
                out[s, g, :] = whole
            continue
        for s in range(steps):
            j = site[g]
            out[s, g, :] = _pattern_use(row, period[s, j], offset[s, j], keep[s, j] != 0)
    return out


@njit(cache=True)
def _whole_use(row: np.ndarray) -> np.ndarray:
    """What every fold of a GEMM uses."""
    sr, sc, tg = row[SR], row[SC], row[T]
    fr = (sr + row[ROWS] - 1) // row[ROWS]
    fc = (sc + row[COLS] - 1) // row[COLS]
    use = np.zeros(9, np.int64)
    use[0] = fr * fc
    use[1] = fr * fc * tg
    use[2] = sr * sc * tg
    use[3] = sr * sc
    use[4] = fc * sr * tg
    use[5] = fr * sc * tg
    use[6] = sr * tg
    use[7] = sc * tg
    use[8] = (fr - 1) * sc * tg
    return use


@njit(cache=True)
def _frame(row: np.ndarray) -> tuple[int, int, int, bool]:
    """The weight dimension cut into lines, the array side lines are gathered along,
    the other weight dimension, and whether that one is packed on the array's rows."""
    if row[SC_IS] != 0:
        line = row[SC_IS]
        across = row[COLS]
    else:
        line = row[SR_IS]
        across = row[ROWS]
    other = 2 if line == 1 else 1
    return line, across, other, row[SC_IS] != 0 and row[SR_IS] == other


@njit(cache=True)
def _extent(row: np.ndarray, dim: int) -> tuple[int, int, int]:
    """A weight dimension's size, tile size and tiles."""
    size = row[W_IN] if dim == 1 else row[W_OUT]
    tile = row[TILE_ROWS] if dim == 1 else row[TILE_COLS]
    return size, tile, (size + tile - 1) // tile


@njit(cache=True)
def _pattern_use(row: np.ndarray, d: int, o: int, k: bool) -> np.ndarray:
    """What a GEMM's folds use under one pattern (period ``d``, offset ``o``, keep
    ``k``): its lines grouped by their residue (or always running, past ``part``),
    each group's surviving tiles along the other dimension compacted."""
    line, across, other, packed = _frame(row)
    line_size, line_tile, n_lines = _extent(row, line)
    other_size, other_tile, n_other = _extent(row, other)
    per_block = across // line_tile
    union = np.zeros(n_other, np.bool_)
    acc = np.zeros(9, np.int64)
    for key in range(d + 1):
        count = 0
        width = 0
        for x in range(n_lines):
            always = line == 1 and (x + 1) * row[TILE_ROWS] > row[PART]
            if (key == d and always) or (key < d and not always and x % d == key):
                count += 1
                width += min(line_tile, line_size - x * line_tile)
        if count == 0:
            continue
        height = 0
        for y in range(n_other):
            forced = other == 1 and (y + 1) * row[TILE_ROWS] > row[PART]
            if key == d or forced or (((key + y) % d == o) == k):
                height += min(other_tile, other_size - y * other_tile)
                union[y] = True
        if height == 0:
            continue
        _add_blocks(acc, row, packed, (count + per_block - 1) // per_block, width, height)
    needed = 0
    for y in range(n_other):
        if union[y]:
            needed += min(other_tile, other_size - y * other_tile)
    if packed:
        acc[6] = needed * row[T]
    elif row[SC_IS] != 0:
        acc[6] = row[SR] * needed
    else:
        acc[7] = row[SC] * needed
        acc[8] = max(acc[8] - row[SC] * row[T], 0)
    return acc


@njit(cache=True)
def _add_blocks(
    acc: np.ndarray, row: np.ndarray, packed: bool, blocks: int, width: int, height: int
) -> None:
    """Add what ``blocks`` column blocks of lines ``width`` wide, ``height`` of the other
    dimension surviving, use: packed on the rows, streamed with the batch on the rows,
    or the lines on the rows and the batch streamed."""
    sr, sc, tg = row[SR], row[SC], row[T]
    if packed:
        folds = (height + row[ROWS] - 1) // row[ROWS]
        acc[0] += blocks * folds
        acc[1] += blocks * folds * tg
        acc[2] += height * width * tg
        acc[3] += height * width
        acc[4] += blocks * height * tg
        acc[5] += folds * width * tg
        acc[7] += width * tg
        acc[8] += (folds - 1) * width * tg
    elif row[SC_IS] != 0:
        fr = (sr + row[ROWS] - 1) // row[ROWS]
        acc[0] += blocks * fr
        acc[1] += blocks * fr * height
        acc[2] += sr * width * height
        acc[3] += sr * width
        acc[4] += blocks * sr * height
        acc[5] += fr * width * height
        acc[7] += width * height
        acc[8] += (fr - 1) * width * height
    else:
        fc = (sc + row[COLS] - 1) // row[COLS]
        acc[0] += blocks * fc
        acc[1] += blocks * fc * height
        acc[2] += width * sc * height
        acc[3] += width * sc
        acc[4] += fc * width * height
        acc[5] += blocks * sc * height
        acc[6] += width * height
        acc[8] += blocks * sc * height
