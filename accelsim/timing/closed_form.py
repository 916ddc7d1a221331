"""Fold-level closed forms for every GEMM of a graph, vectorised with NumPy.

The same functions as the Numba kernels in :mod:`accelsim.timing.kernels`,
with the same arguments and results, written as whole-array NumPy expressions;
see the kernels module for what each quantity means.  A training step has tens
to a few hundred GEMMs per array unit, where loading Numba would cost far more
than it saves, so :mod:`accelsim.timing.backend` uses these until a process has
done enough work to repay it.  The integer codes below are shared by both.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

ACCELSIM = 0
SCALESIM = 1
OS, WS, IS = 0, 1, 2


class DramGemms(NamedTuple):
    """What the DRAM traffic of a unit's GEMMs depends on besides their folds, one
    entry per GEMM: its dataflow code, ``M``, ``N``, how many independent GEMMs it
    stands for (``gemm_count``: a batched op's), each operand's footprint (words) and
    word size (bytes), whether A, B and C stay on chip, and whether a resident tile
    stream takes its stationary operand as it is loaded (each tile loaded once).  A
    named tuple, so that the Numba kernel takes it too."""

    dataflow: np.ndarray
    m: np.ndarray
    n: np.ndarray
    gemm_count: np.ndarray
    a_footprint: np.ndarray
    b_footprint: np.ndarray
    a_word: np.ndarray
    b_word: np.ndarray
    c_word: np.ndarray
    a_on_chip: np.ndarray
    b_on_chip: np.ndarray
    c_on_chip: np.ndarray
    stationary_served: np.ndarray


class DramRules(NamedTuple):
    """What DRAM traffic follows besides the GEMMs: the ifmap, filter and ofmap buffer
    sizes, the array's width in columns, the convention code, whether ws and is cut
    the streamed dimension into chunks whose partial sums fit (``chunk_stream``), and
    whether they cut it finer when that reads fewer bytes (``fit_stream``)."""

    ifmap_bytes: int
    filter_bytes: int
    ofmap_bytes: int
    cols: int
    convention: int
    chunk_stream: bool
    fit_stream: bool


def _ceil(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return -(-a // b)


def op_cycles(
    dataflow: np.ndarray,
    t: np.ndarray,
    folds: np.ndarray,
    rows: int,
    cols: int,
    convention: int,
    overlap: bool,
    load_rows: int,
    swap_cycles: int,
) -> np.ndarray:
    """Compute cycles of GEMMs that run ``folds`` folds each (0 cycles for 0 folds).

    ``overlap`` pipelines the folds (accelsim convention only): the first fold
    costs ``2R + C + T - 2`` and every later one ``max(T, ceil(R / load_rows))
    + swap_cycles``, the next stationary tile loading (output stationary: the last
    outputs draining) ``load_rows`` rows per cycle behind the stream, then taking
    ``swap_cycles`` to swap in.
    """
    if convention == SCALESIM:
        fill = np.where(dataflow == OS, rows, 2 * rows)
        return np.where(folds > 0, folds * (fill + cols + t - 2) - 1, 0)
    per_fold = 2 * rows + cols + t - 2
    if overlap:
        switch = -(-rows // load_rows)
        later = np.maximum(t, switch) + swap_cycles
        return np.where(folds > 0, (folds - 1) * later + per_fold, 0)
    cycles: np.ndarray = folds * per_fold
    return cycles


def fold_cycles(
    dataflow: np.ndarray,
    sr: np.ndarray,
    sc: np.ndarray,
    t: np.ndarray,
    count: np.ndarray,
    rows: int,
    cols: int,
    convention: int,
    overlap: bool,
    load_rows: int,
    swap_cycles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(row_folds, col_folds, folds, compute_cycles)`` of each GEMM."""
    row_folds = _ceil(sr, rows)
    col_folds = _ceil(sc, cols)
    folds = row_folds * col_folds * count
    cycles = op_cycles(dataflow, t, folds, rows, cols, convention, overlap, load_rows, swap_cycles)
    return row_folds, col_folds, folds, cycles


def sram_counts(
    dataflow: np.ndarray,
    m: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    count: np.ndarray,
    row_folds: np.ndarray,
    col_folds: np.ndarray,
    rows: int,
    cols: int,
    convention: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ifmap_reads, filter_reads, ofmap_reads, ofmap_writes)`` in words."""
    is_os = dataflow == OS
    mk, kn, mn = m * k, k * n, m * n
    fr, fc = row_folds, col_folds
    ifmap = np.where(dataflow == IS, mk, fc * mk)
    filt = np.where(is_os, fr * kn, np.where(dataflow == WS, kn, fc * kn))
    writes = np.where(is_os, mn, fr * mn)
    if convention == SCALESIM:
        writes = writes + np.where(is_os, fr * fc * (rows + cols), 0)
        reads = np.zeros_like(mn)
    else:
        reads = np.where(is_os, 0, (fr - 1) * mn)
    return ifmap * count, filt * count, reads * count, writes * count


def _chunk_reads(
    chunks: np.ndarray,
    fc: np.ndarray,
    s_fp: np.ndarray,
    s_word: np.ndarray,
    s_half: np.ndarray,
    t_fp: np.ndarray,
    t_word: np.ndarray,
    t_half: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Words of the stationary and the streamed operand (ws, is) read in ``chunks``
    chunks of the streamed dimension: the stationary one once per chunk unless it fits
    whole, the streamed one once if a chunk's slice of it fits, else once per column
    fold."""
    stationary = np.where((chunks == 1) | (t_fp * t_word <= t_half), t_fp, chunks * t_fp)
    stream = np.where(_ceil(s_fp, chunks) * s_word <= s_half, s_fp, fc * s_fp)
    return stationary, stream


def spilled_words(
    streamed: np.ndarray, width: np.ndarray, cols: int, cap: np.ndarray
) -> np.ndarray:
    """Words of partial sums that do not fit ``cap`` words, summed over the column
    blocks of a ws or is GEMM streaming ``streamed`` rows past ``width`` output columns
    (blocks of the array's ``cols`` columns, the last one narrower): what goes out to
    DRAM after a row fold and comes back for the next, when the streamed dimension
    goes through whole."""
    full, last = width // cols, width % cols
    words: np.ndarray = full * np.maximum(streamed * cols - cap, 0) + np.maximum(
        streamed * last - cap, 0
    )
    return words


def dram_words(
    gemms: DramGemms, row_folds: np.ndarray, col_folds: np.ndarray, rules: DramRules
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(a_reads, b_reads, c_reads, c_writes)`` in words, for all ``gemm_count`` GEMMs."""
    g = gemms
    half_if, half_fl = rules.ifmap_bytes // 2, rules.filter_bytes // 2
    half_of = rules.ofmap_bytes // 2
    fr, fc = row_folds, col_folds
    a_fp, b_fp = g.a_footprint, g.b_footprint
    mn = g.m * g.n
    is_os = g.dataflow == OS
    ws = g.dataflow == WS
    # os: A once if it fits, else per column fold; B's column slice likewise per row fold.
    a_os = np.where(a_fp * g.a_word <= half_if, a_fp, fc * a_fp)
    b_os = np.where(_ceil(b_fp, fc) * g.b_word <= half_fl, b_fp, fr * b_fp)
    # ws streams m past stationary B; is streams n past stationary A.
    streamed = np.where(ws, g.m, g.n)
    psum_row = np.minimum(rules.cols, np.where(ws, g.n, g.m)) * g.c_word
    s_fp, t_fp = np.where(ws, a_fp, b_fp), np.where(ws, b_fp, a_fp)
    s_word, t_word = np.where(ws, g.a_word, g.b_word), np.where(ws, g.b_word, g.a_word)
    s_half, t_half = np.where(ws, half_if, half_fl), np.where(ws, half_fl, half_if)
    # a stationary operand loaded once that does not fit whole: the stream goes through
    # whole, where partial sums then spill (where none would, the chunks stay)
    width = np.where(ws, g.n, g.m)
    beyond = (fr - 1) * spilled_words(streamed, width, rules.cols, half_of // g.c_word)
    whole = rules.chunk_stream & g.stationary_served & ~is_os & (t_fp * t_word > t_half)
    whole &= beyond > 0
    if rules.chunk_stream:
        fit = np.maximum(1, half_of // psum_row)
        chunks = np.where(whole, 1, _ceil(streamed, fit))
        spill = np.zeros_like(is_os)
    else:
        chunks = np.ones_like(streamed)
        spill = ~is_os & (streamed * psum_row > half_of)
    stationary, stream = _chunk_reads(chunks, fc, s_fp, s_word, s_half, t_fp, t_word, t_half)
    if rules.chunk_stream and rules.fit_stream:
        # Fewer passes over the streamed operand: chunks whose slice of it fits.
        fits = np.minimum(np.maximum(chunks, _ceil(s_fp * s_word, np.maximum(s_half, 1))), streamed)
        st, sm = _chunk_reads(fits, fc, s_fp, s_word, s_half, t_fp, t_word, t_half)
        # Bytes from DRAM: an operand kept on chip costs none.
        s_cost = np.where(np.where(ws, g.a_on_chip, g.b_on_chip), 0, s_word)
        t_cost = np.where(np.where(ws, g.b_on_chip, g.a_on_chip), 0, t_word)
        fewer = ~whole & (st * t_cost + sm * s_cost < stationary * t_cost + stream * s_cost)
        stationary, stream = np.where(fewer, st, stationary), np.where(fewer, sm, stream)
    a = np.where(is_os, a_os, np.where(ws, stream, stationary))
    b = np.where(is_os, b_os, np.where(ws, stationary, stream))
    spilled = np.where(whole, beyond, 0)
    c_w = np.where(spill, fr * mn, mn + spilled)
    c_r = np.where(spill, (fr - 1) * mn, spilled)
    if rules.convention == SCALESIM:
        a = np.where(a_fp < 50 * (rules.ifmap_bytes // 100) // g.a_word, a_fp, a)
        b = np.where(b_fp < 50 * (rules.filter_bytes // 100) // g.b_word, b_fp, b)
        c_w = np.where(is_os, c_w, fr * mn)
        c_r = np.where(is_os, c_r, 0)
    return (
        np.where(g.a_on_chip, 0, a * g.gemm_count),
        np.where(g.b_on_chip, 0, b * g.gemm_count),
        np.where(g.c_on_chip, 0, c_r * g.gemm_count),
        np.where(g.c_on_chip, 0, c_w * g.gemm_count),
    )
