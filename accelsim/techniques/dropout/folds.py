"""What the folds of GEMMs whose weight tiles a dropout pattern drops use, step by step.

A GEMM's weight ``W`` has an input dimension (its rows, fan-in, ``w_in``) and an
output dimension (``w_out``), cut into tiles of ``tile rows x tile cols``; tile
``(r, c)`` is dropped by pattern ``(period, offset, keep)`` when
``(r + c) % period == offset`` differs from ``keep`` (see
:mod:`accelsim.techniques.dropout.patterns`).  Only the first ``part`` weight rows
can be dropped (an LSTM's recurrent rows never are): a tile reaching past them
always runs.  Each of the GEMM's array-mapped dimensions ``Sr`` and ``Sc`` and its
stream ``T`` is one weight dimension or neither (the batch).

**Compaction.** The weight dimension on the array's columns (or, when the columns
hold the batch, the one on its rows) is cut into *lines*: tile columns of the
weight in the array's frame.  Lines whose indices are equal modulo the pattern's
period have the same surviving tiles along the weight's other dimension; they
are gathered, ``array width // tile width`` of them to a *column block* (a 128x128
array with 32x32 tiles: four 32-wide lines), and in each column block only the
surviving tiles along the other dimension run:

* other dimension on the array's rows (ws forward and ``dX``, os ``dW``): the
  surviving tile rows of the block pack together, ``ceil(surviving rows / R)`` row
  folds, each streaming all of ``T``;
* other dimension streamed (ws ``dW``, os forward and ``dX``, is): every fold of the
  block streams only the surviving tiles' positions (a shorter stream).

A block's gathered lines and packed rows are address generation (gathers of whole
tile rows and columns), not modelled as extra work.  With tiles as large as the
array every line is its own block, so the forward and ``dX`` folds are exactly
those the tiles keep; ``dW`` streams lose their dropped tiles.

:func:`compacted_use` is the NumPy reference (one GEMM, one step);
:func:`accelsim.techniques.dropout.kernels.compacted_use` is the Numba kernel over all
steps and GEMMs, and :func:`count_surviving` picks one.  Both give the fields of
:data:`accelsim.mapping.schedule.USE_FIELDS`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from accelsim.mapping.schedule import USE_FIELDS, extents, whole_use
from accelsim.timing import backend

NONE, W_IN, W_OUT = 0, 1, 2  # what an array-mapped dimension of a GEMM is
FOLD_BREAK_EVEN = 500_000  # ~0.45 s of the reference at ~1.1 M folds/s (2-core machine)


def compacted_use(
    sr: int,
    sc: int,
    t: int,
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
    """:data:`~accelsim.mapping.schedule.USE_FIELDS` of one GEMM under one tile pattern,
    its surviving tiles compacted per column block (see the module docstring).

    Args:
        sr, sc, t: The GEMM's row- and column-mapped dimensions and its stream;
            ``rows``, ``cols`` the array's.
        sr_is, sc_is: What ``Sr`` and ``Sc`` are (``NONE``, ``W_IN``, ``W_OUT``).
        w_in, w_out: The weight's input and output dimensions.
        part: Weight rows that can be dropped (the first ``part``).
        tile: ``(tile rows, tile cols)`` over ``(w_in, w_out)``; each at most the
            array's smaller side.
        pattern: ``(period, offset, keep)``.
    """
    period, offset, keep = pattern
    sizes = {W_IN: (w_in, tile[0]), W_OUT: (w_out, tile[1])}
    line, across = (sc_is, cols) if sc_is != NONE else (sr_is, rows)
    other = W_OUT if line == W_IN else W_IN
    packed = sc_is != NONE and sr_is == other  # the other dimension on the rows
    line_ext = extents(*sizes[line])
    other_ext = extents(*sizes[other])
    per_block = across // sizes[line][1]
    # a line's key: its residue modulo the period, or ``period`` for a line that
    # always runs (input rows past ``part``)
    index = np.arange(line_ext.shape[0])
    always = (index + 1) * tile[0] > part if line == W_IN else np.zeros_like(index, bool)
    keys = np.where(always, period, index % period)
    y = np.arange(other_ext.shape[0])
    forced = (y + 1) * tile[0] > part if other == W_IN else np.zeros_like(y, bool)
    use = dict.fromkeys(USE_FIELDS, 0)
    union = np.zeros_like(y, bool)
    fr, fc = -(-sr // rows), -(-sc // cols)
    for key in range(period + 1):
        lines = keys == key
        if not lines.any():
            continue
        survives = forced | (((key + y) % period == offset) == keep) | (key == period)
        height = int(survives @ other_ext)
        if not height:
            continue
        union |= survives
        width = int(lines @ line_ext)
        blocks = -(-int(lines.sum()) // per_block)
        if packed:
            folds = -(-height // rows)
            add = (blocks * folds, blocks * folds * t, height * width * t, height * width,
                   blocks * height * t, folds * width * t, 0, width * t,
                   (folds - 1) * width * t)  # fmt: skip
        elif sc_is != NONE:  # streamed: the batch on the rows
            add = (blocks * fr, blocks * fr * height, sr * width * height, sr * width,
                   blocks * sr * height, fr * width * height, 0, width * height,
                   (fr - 1) * width * height)  # fmt: skip
        else:  # lines on the rows, the batch on the columns, streamed
            add = (blocks * fc, blocks * fc * height, width * sc * height, width * sc,
                   fc * width * height, blocks * sc * height, width * height, 0,
                   blocks * sc * height)  # fmt: skip
        for name, value in zip(USE_FIELDS, add, strict=True):
            use[name] += value
    needed = int(union @ other_ext)
    if packed:
        use["any_rows"] = needed * t
    elif sc_is != NONE:
        use["any_rows"] = sr * needed
    else:
        use["any_cols"] = sc * needed
        # every row fold of a column block after the first makes a round trip
        use["spill_cols"] = max(use["spill_cols"] - sc * t, 0)
    return np.array([use[name] for name in USE_FIELDS], np.int64)


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
        from accelsim.techniques.dropout import kernels  # Numba loads only when it pays

        kernel: Callable[..., np.ndarray] = kernels.compacted_use
        return kernel(
            table(gemms),
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
        sr, sc, t, rows, cols, sr_is, sc_is, w_in, w_out, part, tr, tc = (
            int(gemms[k][g]) for k in FIELDS
        )
        if site[g] < 0:
            whole = whole_use(np.array([sr]), np.array([sc]), np.array([t]), rows, cols)
            out[:, g] = [int(whole[name][0]) for name in USE_FIELDS]
            continue
        for s in range(steps):
            pattern = (
                int(patterns["period"][s, site[g]]),
                int(patterns["offset"][s, site[g]]),
                bool(patterns["keep"][s, site[g]]),
            )
            out[s, g] = compacted_use(
                sr, sc, t, rows, cols, sr_is, sc_is, w_in, w_out, part, (tr, tc), pattern
            )
    return out


FIELDS = ("sr", "sc", "t", "rows", "cols", "sr_is", "sc_is", "w_in", "w_out", "part",
          "tile_rows", "tile_cols")  # fmt: skip
"""The per-GEMM arrays of :func:`count_surviving`, and the columns of the kernel's table."""


def table(gemms: dict[str, np.ndarray]) -> np.ndarray:
    """The per-GEMM arrays ``gemms`` as the kernel's ``int64`` table: a row per GEMM, a
    column per field of :data:`FIELDS`."""
    return np.stack([gemms[k] for k in FIELDS], axis=1).astype(np.int64)


def benchmark_dropout_folds(steps: int = 100, gemms: int = 30) -> tuple[int, float, float]:
    """``(folds, Numba seconds, NumPy seconds)`` counting ``steps`` x ``gemms`` GEMMs of
    2048 x 2048 weights on a 128x128 array (256 folds each, 16 tiles of 32x32 per fold)
    under keep patterns of period 2..8; warm, best of three."""
    from accelsim.techniques.dropout import kernels

    rng = np.random.default_rng(0)
    values = (2048, 2048, 1024, 128, 128, W_IN, W_OUT, 2048, 2048, 2048, 32, 32)
    columns = {k: np.full(gemms, v, np.int64) for k, v in zip(FIELDS, values, strict=True)}
    site = np.zeros(gemms, np.int64)
    patterns = {
        "period": rng.integers(2, 9, (steps, 1)),
        "offset": np.zeros((steps, 1), np.int64),
        "keep": np.ones((steps, 1), bool),
    }
    kernel: Callable[..., np.ndarray] = kernels.compacted_use
    args = (table(columns), site, patterns["period"], patterns["offset"])
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
    slow = best(lambda: count_surviving_numpy(columns, patterns, site))
    return steps * gemms * 256, fast, slow
