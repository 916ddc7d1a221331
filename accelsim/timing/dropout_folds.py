"""Surviving folds of GEMMs whose weight tiles a dropout pattern drops, step by step.

For every simulated step ``s`` and GEMM ``g``, the folds of ``g`` on its array
that still run when the step's tile pattern drops weight tiles.  A GEMM's weight
``W`` has an input dimension (its rows, fan-in) and an output dimension; each of
the GEMM's array-mapped dimensions ``Sr`` and ``Sc`` is one of them or neither
(the batch, which covers every weight row or column).  Fold ``(i, j)`` covers
rows ``[i R, (i + 1) R)`` of ``Sr`` and columns ``[j C, (j + 1) C)`` of ``Sc``
and is skipped only if every weight tile it touches is dropped.  Only the first
``part`` weight rows can be dropped (an LSTM's recurrent rows never are).

Tile ``(r, c)`` is dropped by pattern ``(period, offset, keep)`` when
``(r + c) % period == offset`` differs from ``keep`` (see
:mod:`accelsim.techniques.dropout_patterns`).

:func:`surviving_folds` is the NumPy reference (one GEMM, one step, as a fold
mask); :func:`accelsim.timing.kernels.surviving_folds` is the Numba kernel over
all steps and GEMMs, and :func:`count_surviving` picks one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from accelsim.mapping.schedule import USE_FIELDS, fold_use
from accelsim.timing import backend

NONE, W_IN, W_OUT = 0, 1, 2  # what an array-mapped dimension of a GEMM is
FOLD_BREAK_EVEN = 100_000  # ~0.45 s of the reference at ~200k folds/s (2-core machine)


def surviving_folds(
    sr: int,
    sc: int,
    rows: int,
    cols: int,
    sr_is: int,
    sc_is: int,
    w_in: int,
    w_out: int,
    part: int,
    tile: tuple[int, int],
    pattern: tuple[int, int, bool],
) -> np.ndarray:
    """The fold mask (true: the fold runs) of one GEMM under one tile pattern.

    Args:
        sr, sc: The GEMM's row- and column-mapped dimensions; ``rows``, ``cols``
            the array's.
        sr_is, sc_is: What ``Sr`` and ``Sc`` are (``NONE``, ``W_IN``, ``W_OUT``).
        w_in, w_out: The weight's input and output dimensions.
        part: Weight rows that can be dropped (the first ``part``).
        tile: ``(tile rows, tile cols)`` over ``(w_in, w_out)``.
        pattern: ``(period, offset, keep)``.
    """
    period, offset, keep = pattern
    tr, tc = tile
    grid_r, grid_c = -(-part // tr), -(-w_out // tc)
    r, c = np.meshgrid(np.arange(grid_r), np.arange(grid_c), indexing="ij")
    dropped = ((r + c) % period == offset) != keep
    fr, fc = -(-sr // rows), -(-sc // cols)
    mask = np.ones((fr, fc), dtype=bool)
    for i in range(fr):
        for j in range(fc):
            ranges = {W_IN: (0, w_in), W_OUT: (0, w_out)}
            for kind, lo, hi in ((sr_is, i * rows, min((i + 1) * rows, sr)),
                                 (sc_is, j * cols, min((j + 1) * cols, sc))):  # fmt: skip
                if kind != NONE:
                    ranges[kind] = (lo, hi)
            (in_lo, in_hi), (out_lo, out_hi) = ranges[W_IN], ranges[W_OUT]
            if in_hi > part:
                continue
            block = dropped[
                in_lo // tr : (in_hi - 1) // tr + 1, out_lo // tc : (out_hi - 1) // tc + 1
            ]
            mask[i, j] = not bool(block.all())
    return mask


def count_surviving(
    gemms: dict[str, np.ndarray], patterns: dict[str, np.ndarray], site: np.ndarray
) -> np.ndarray:
    """What the surviving folds use, ``[step, gemm, field]`` (per GEMM of a batched op;
    the fields of :data:`accelsim.mapping.schedule.USE_FIELDS`, the surviving folds
    first).

    Args:
        gemms: Per-GEMM int64 arrays ``sr, sc, rows, cols, sr_is, sc_is, w_in,
            w_out, part, tile_rows, tile_cols``.
        patterns: ``period, offset, keep`` arrays of shape ``[step, site]``.
        site: Each GEMM's pattern site (-1: no tile pattern, every fold runs).
    """
    steps = patterns["period"].shape[0]
    folds = -(-gemms["sr"] // gemms["rows"]) * -(-gemms["sc"] // gemms["cols"])
    if use_numba(steps * int(np.sum(folds[site >= 0]))):
        from accelsim.timing import kernels  # Numba loads only when it pays

        kernel: Callable[..., np.ndarray] = kernels.surviving_folds
        return kernel(
            *(gemms[k] for k in FIELDS),
            site,
            patterns["period"],
            patterns["offset"],
            patterns["keep"].astype(np.int64),
        )
    return count_surviving_numpy(gemms, patterns, site)


def use_numba(folds: int) -> bool:
    """Whether counting ``folds`` tile-masked folds is worth loading Numba (the
    ``ACCELSIM_KERNELS`` mode of :mod:`accelsim.timing.backend`; ``auto`` loads it
    beyond ``FOLD_BREAK_EVEN`` folds, about what the NumPy reference counts in the
    0.45 s Numba takes to load)."""
    mode = backend.mode()
    return mode == "numba" or (mode == "auto" and folds > FOLD_BREAK_EVEN)


def count_surviving_numpy(
    gemms: dict[str, np.ndarray], patterns: dict[str, np.ndarray], site: np.ndarray
) -> np.ndarray:
    """:func:`count_surviving` with the NumPy reference, fold mask by fold mask."""
    steps = patterns["period"].shape[0]
    out = np.empty((steps, site.shape[0], len(USE_FIELDS)), np.int64)
    for g in range(site.shape[0]):
        sr, sc, rows, cols, sr_is, sc_is, w_in, w_out, part, tr, tc = (
            int(gemms[k][g]) for k in FIELDS
        )
        for s in range(steps):
            if site[g] < 0:
                out[s, g] = fold_use(np.ones((-(-sr // rows), -(-sc // cols)), bool), sr, sc, rows, cols)
                continue
            pattern = (
                int(patterns["period"][s, site[g]]),
                int(patterns["offset"][s, site[g]]),
                bool(patterns["keep"][s, site[g]]),
            )
            mask = surviving_folds(
                sr, sc, rows, cols, sr_is, sc_is, w_in, w_out, part, (tr, tc), pattern
            )
            out[s, g] = fold_use(mask, sr, sc, rows, cols)
    return out


FIELDS = ("sr", "sc", "rows", "cols", "sr_is", "sc_is", "w_in", "w_out", "part", "tile_rows",
          "tile_cols")  # fmt: skip


def benchmark_dropout_folds(steps: int = 100, gemms: int = 30) -> tuple[int, float, float]:
    """``(folds, Numba seconds, NumPy seconds)`` counting ``steps`` x ``gemms`` GEMMs of
    2048 x 2048 weights on a 128x128 array (256 folds each, 16 tiles of 32x32 per fold)
    under keep patterns of period 2..8; warm, best of three."""
    from accelsim.timing import kernels

    rng = np.random.default_rng(0)
    values = (2048, 2048, 128, 128, W_IN, W_OUT, 2048, 2048, 2048, 32, 32)
    table = {k: np.full(gemms, v, np.int64) for k, v in zip(FIELDS, values, strict=True)}
    site = np.zeros(gemms, np.int64)
    patterns = {
        "period": rng.integers(2, 9, (steps, 1)),
        "offset": np.zeros((steps, 1), np.int64),
        "keep": np.ones((steps, 1), bool),
    }
    kernel: Callable[..., np.ndarray] = kernels.surviving_folds
    args = (*(table[k] for k in FIELDS), site, patterns["period"], patterns["offset"])
    keep = patterns["keep"].astype(np.int64)

    def best(run: Callable[[], object]) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return min(times)

    kernel(*args, keep)  # compile, or load from the cache
    fast = best(lambda: kernel(*args, keep))
    slow = best(lambda: count_surviving_numpy(table, patterns, site))
    return steps * gemms * 256, fast, slow
