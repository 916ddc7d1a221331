"""Numba kernels: fold-level arithmetic for every GEMM of a graph at once.

Pure array-in/array-out functions, compiled with ``@njit(cache=True)``; each
has a NumPy reference in ``tests/test_kernels.py`` and a vectorised NumPy twin
in :mod:`accelsim.timing.closed_form` (:mod:`accelsim.timing.backend` picks
one).  Dataflow codes are 0 = os, 1 = ws, 2 = is; convention codes 0 = accelsim,
1 = scalesim.

Compute cycles per fold (``R x C`` array, ``T`` streamed):

* accelsim: ``2R + C + T - 2`` for every dataflow (stationary-operand or
  output fill of R cycles, R+C-2 skew, T streamed), folds not overlapped;
  with fold overlap (``timing.fold_overlap``), the folds of an op pipeline:
  ``F`` folds take ``(F - 1) * (max(T, ceil(R / L)) + S) + 2R + C + T - 2`` where
  the array loads (output stationary: drains) ``L`` rows of a tile per cycle
  (``array.load_rows_per_cycle``, 1 by default; docs/model/timing.md derives it per
  dataflow) and swaps to the loaded tile in ``S`` cycles (``array.tile_swap_cycles``,
  0 by default);
* scalesim (SCALE-Sim 3.0.0): ``R + C + T - 2`` for os, ``2R + C + T - 2`` for
  ws and is, and the layer total is ``folds * per_fold - 1``; folds never
  overlap.
"""

from __future__ import annotations

import numpy as np

from accelsim.timing.closed_form import OS, SCALESIM, WS
from accelsim.timing.numba_setup import njit


@njit(cache=True)
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
    """Folds and compute cycles of each GEMM; ``overlap`` pipelines its folds
    (accelsim convention only), the next stationary tile loading ``load_rows``
    rows per cycle and swapping in ``swap_cycles``.

    Returns:
        ``(row_folds, col_folds, folds, compute_cycles)``; ``folds`` includes
        the ``count`` independent GEMMs of a batched op.
    """
    n_ops = sr.shape[0]
    row_folds = np.empty(n_ops, np.int64)
    col_folds = np.empty(n_ops, np.int64)
    folds = np.empty(n_ops, np.int64)
    cycles = np.empty(n_ops, np.int64)
    switch = (rows + load_rows - 1) // load_rows
    for i in range(n_ops):
        fr = (sr[i] + rows - 1) // rows
        fc = (sc[i] + cols - 1) // cols
        row_folds[i] = fr
        col_folds[i] = fc
        folds[i] = fr * fc * count[i]
        fill = rows if (convention == SCALESIM and dataflow[i] == OS) else 2 * rows
        per_fold = fill + cols + t[i] - 2
        if convention == SCALESIM:
            cycles[i] = folds[i] * per_fold - 1
        elif overlap:
            cycles[i] = (folds[i] - 1) * (max(t[i], switch) + swap_cycles) + per_fold
        else:
            cycles[i] = folds[i] * per_fold
    return row_folds, col_folds, folds, cycles


@njit(cache=True)
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
    """SRAM accesses (words) of each GEMM, counting real elements, not idle PEs.

    The streamed input is read once per pass over the other array dimension;
    the stationary one once.  Partial sums of ws/is are written once per row
    fold (and, in the accelsim convention, read back for every fold but the
    first).  The scalesim convention adds SCALE-Sim's ``folds * (R + C)`` extra
    ofmap writes for os and counts no partial-sum reads.

    Returns:
        ``(ifmap_reads, filter_reads, ofmap_reads, ofmap_writes)``.
    """
    n_ops = m.shape[0]
    ifmap_reads = np.empty(n_ops, np.int64)
    filter_reads = np.empty(n_ops, np.int64)
    ofmap_reads = np.empty(n_ops, np.int64)
    ofmap_writes = np.empty(n_ops, np.int64)
    for i in range(n_ops):
        mk = m[i] * k[i]
        kn = k[i] * n[i]
        mn = m[i] * n[i]
        fr = row_folds[i]
        fc = col_folds[i]
        if dataflow[i] == OS:
            a, b, c_w, c_r = fc * mk, fr * kn, mn, 0
            if convention == SCALESIM:
                c_w += fr * fc * (rows + cols)
        elif dataflow[i] == WS:
            a, b, c_w, c_r = fc * mk, kn, fr * mn, (fr - 1) * mn
        else:
            a, b, c_w, c_r = mk, fc * kn, fr * mn, (fr - 1) * mn
        if convention == SCALESIM:
            c_r = 0
        ifmap_reads[i] = a * count[i]
        filter_reads[i] = b * count[i]
        ofmap_reads[i] = c_r * count[i]
        ofmap_writes[i] = c_w * count[i]
    return ifmap_reads, filter_reads, ofmap_reads, ofmap_writes


@njit(cache=True)
def _chunk_reads(
    chunks: int,
    fc: int,
    s_fp: int,
    s_word: int,
    s_half: int,
    t_fp: int,
    t_word: int,
    t_half: int,
) -> tuple[int, int]:
    """One GEMM's :func:`accelsim.timing.closed_form._chunk_reads`."""
    stationary = t_fp if (chunks == 1 or t_fp * t_word <= t_half) else chunks * t_fp
    stream = s_fp if ((s_fp + chunks - 1) // chunks) * s_word <= s_half else fc * s_fp
    return stationary, stream


@njit(cache=True)
def dram_words(
    dataflow: np.ndarray,
    m: np.ndarray,
    n: np.ndarray,
    count: np.ndarray,
    row_folds: np.ndarray,
    col_folds: np.ndarray,
    a_footprint: np.ndarray,
    b_footprint: np.ndarray,
    a_word: np.ndarray,
    b_word: np.ndarray,
    c_word: np.ndarray,
    a_on_chip: np.ndarray,
    b_on_chip: np.ndarray,
    c_on_chip: np.ndarray,
    ifmap_bytes: int,
    filter_bytes: int,
    ofmap_bytes: int,
    cols: int,
    convention: int,
    chunk_stream: bool,
    fit_stream: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DRAM traffic (words) of each GEMM from its loop order and the buffer sizes.

    Loop order (SCALE-Sim's): column folds outer, row folds inner.  Reuse needs
    the reused data to fit in half of its double-buffered buffer.

    * os keeps outputs in the PEs: A is fetched once if it fits (else once per
      column fold), each column slice of B once if it fits (else once per row
      fold).
    * ws and is accumulate partial sums over the row folds in the ofmap buffer.
      With ``chunk_stream`` the streamed dimension is split into chunks whose
      partial sums fit, so they never spill; the stationary operand is then
      re-fetched per chunk unless it fits whole, and the streamed one is
      fetched once per chunk if its slice fits, else once per column fold.
      With ``fit_stream`` as well, the chunks are made as small as the
      streamed operand's slice needs to fit too, whenever that reads fewer
      DRAM bytes (the streamed operand once, the stationary one once per
      chunk unless it fits whole).  Without ``chunk_stream``, the whole
      streamed dimension goes through each fold: the streamed operand is
      fetched once if it fits (else once per column fold),
      the stationary one once, and partial sums that do not fit in half the
      ofmap buffer spill to DRAM after every row fold and are read back.
    * scalesim: SCALE-Sim 3.0.0's CALC mode: an operand whose footprint is
      under ``50 * floor(bytes / 100)`` words is read once, and ws and is write
      the outputs once per row fold with no read-back.  (Operands that do not
      fit follow the rules above: SCALE-Sim has no closed form there.)

    Operands kept on chip move no DRAM traffic.

    Returns:
        ``(a_reads, b_reads, c_reads, c_writes)`` in words, for all ``count``
        GEMMs; ``c_reads`` are partial sums read back.

    Longer than the 80 lines we otherwise allow, on purpose: it is one loop body
    that mirrors :func:`accelsim.timing.closed_form.dram_words` case by case (the
    twin tests compare them), and a helper called from an ``njit`` loop would
    only split that mirror in two.
    """
    n_ops = m.shape[0]
    a_reads = np.zeros(n_ops, np.int64)
    b_reads = np.zeros(n_ops, np.int64)
    c_reads = np.zeros(n_ops, np.int64)
    c_writes = np.zeros(n_ops, np.int64)
    half_if = ifmap_bytes // 2
    half_fl = filter_bytes // 2
    half_of = ofmap_bytes // 2
    for i in range(n_ops):
        fr = row_folds[i]
        fc = col_folds[i]
        a_fp = a_footprint[i]
        b_fp = b_footprint[i]
        mn = m[i] * n[i]
        c_w = mn
        c_r = 0
        if dataflow[i] == OS:
            a = a_fp if a_fp * a_word[i] <= half_if else fc * a_fp
            b_slice = (b_fp + fc - 1) // fc
            b = b_fp if b_slice * b_word[i] <= half_fl else fr * b_fp
        else:
            # ws streams m past stationary B; is streams n past stationary A.
            ws = dataflow[i] == WS
            streamed = m[i] if ws else n[i]
            psum_row = min(cols, n[i] if ws else m[i]) * c_word[i]
            chunks = 1
            if chunk_stream:
                chunks = (streamed + max(1, half_of // psum_row) - 1) // max(1, half_of // psum_row)
            elif streamed * psum_row > half_of:
                c_w, c_r = fr * mn, (fr - 1) * mn
            s_fp, s_word, s_half = (a_fp, a_word[i], half_if) if ws else (b_fp, b_word[i], half_fl)
            t_fp, t_word, t_half = (b_fp, b_word[i], half_fl) if ws else (a_fp, a_word[i], half_if)
            stationary, stream = _chunk_reads(
                chunks, fc, s_fp, s_word, s_half, t_fp, t_word, t_half
            )
            if chunk_stream and fit_stream:
                fits = min(
                    max(chunks, (s_fp * s_word + max(s_half, 1) - 1) // max(s_half, 1)), streamed
                )
                st, sm = _chunk_reads(fits, fc, s_fp, s_word, s_half, t_fp, t_word, t_half)
                s_on, t_on = (a_on_chip[i], b_on_chip[i]) if ws else (b_on_chip[i], a_on_chip[i])
                s_cost = 0 if s_on else s_word  # bytes from DRAM: none for one kept on chip
                t_cost = 0 if t_on else t_word
                if st * t_cost + sm * s_cost < stationary * t_cost + stream * s_cost:
                    stationary, stream = st, sm
            a, b = (stream, stationary) if ws else (stationary, stream)
        if convention == SCALESIM:
            if a_fp < 50 * (ifmap_bytes // 100) // a_word[i]:
                a = a_fp
            if b_fp < 50 * (filter_bytes // 100) // b_word[i]:
                b = b_fp
            if dataflow[i] != OS:
                c_w, c_r = fr * mn, 0
        a_reads[i] = 0 if a_on_chip[i] else a * count[i]
        b_reads[i] = 0 if b_on_chip[i] else b * count[i]
        c_reads[i] = 0 if c_on_chip[i] else c_r * count[i]
        c_writes[i] = 0 if c_on_chip[i] else c_w * count[i]
    return a_reads, b_reads, c_reads, c_writes
