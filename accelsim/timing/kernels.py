"""Numba kernels: fold-level arithmetic for every GEMM of a graph at once.

Pure array-in/array-out functions, compiled with ``@njit(cache=True)``
(:func:`dram_words` takes its arrays and settings as two named tuples,
:class:`~accelsim.timing.closed_form.DramGemms` and
:class:`~accelsim.timing.closed_form.DramRules`); each has a NumPy reference in
``tests/timing/test_kernels.py`` and a vectorised NumPy twin in
:mod:`accelsim.timing.closed_form` (:mod:`accelsim.timing.backend` picks
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

from accelsim.timing.closed_form import OS, SCALESIM, WS, DramGemms, DramRules
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
    chunks: int, fc: int, s: tuple[int, int, int, bool], t: tuple[int, int, int, bool]
) -> tuple[int, int]:
    """One GEMM's :func:`accelsim.timing.closed_form._chunk_reads`; ``s`` and ``t`` are
    the streamed and the stationary operand as (footprint, word bytes, half its buffer,
    kept on chip)."""
    stationary = t[0] if (chunks == 1 or t[0] * t[1] <= t[2]) else chunks * t[0]
    stream = s[0] if ((s[0] + chunks - 1) // chunks) * s[1] <= s[2] else fc * s[0]
    return stationary, stream


@njit(cache=True)
def _spilled_words(streamed: int, width: int, cols: int, cap: int) -> int:
    """One GEMM's :func:`accelsim.timing.closed_form.spilled_words`."""
    full, last = width // cols, width % cols
    return full * max(streamed * cols - cap, 0) + max(streamed * last - cap, 0)


@njit(cache=True)
def _fewer_reads(
    chunks: int,
    streamed: int,
    fc: int,
    s: tuple[int, int, int, bool],
    t: tuple[int, int, int, bool],
    stationary: int,
    stream: int,
) -> tuple[int, int]:
    """The reads of :func:`_chunk_reads` with chunks small enough for the streamed
    operand's slice to fit too, when those read fewer DRAM bytes (an operand kept on
    chip costs none), else ``stationary`` and ``stream``."""
    half = max(s[2], 1)
    fits = min(max(chunks, (s[0] * s[1] + half - 1) // half), streamed)
    st, sm = _chunk_reads(fits, fc, s, t)
    s_cost = 0 if s[3] else s[1]
    t_cost = 0 if t[3] else t[1]
    if st * t_cost + sm * s_cost < stationary * t_cost + stream * s_cost:
        return st, sm
    return stationary, stream


@njit(cache=True)
def dram_words(
    gemms: DramGemms, row_folds: np.ndarray, col_folds: np.ndarray, rules: DramRules
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DRAM traffic (words) of each GEMM from its loop order and the buffer sizes.

    Loop order (SCALE-Sim's): column folds outer, row folds inner.  Reuse needs
    the reused data to fit in half of its double-buffered buffer.

    * os keeps outputs in the PEs: A is fetched once if it fits (else once per
      column fold), each column slice of B once if it fits (else once per row
      fold).
    * ws and is accumulate partial sums over the row folds in the ofmap buffer.
      With ``rules.chunk_stream`` the streamed dimension is split into chunks whose
      partial sums fit, so they never spill; the stationary operand is then
      re-fetched per chunk unless it fits whole, and the streamed one is
      fetched once per chunk if its slice fits, else once per column fold.
      With ``rules.fit_stream`` as well, the chunks are made as small as the
      streamed operand's slice needs to fit too, whenever that reads fewer
      DRAM bytes (the streamed operand once, the stationary one once per
      chunk unless it fits whole).  A stationary operand that a resident tile
      stream takes as it is loaded (``stationary_served``) is loaded once: where it
      does not fit whole and partial sums would spill, the streamed dimension goes
      through whole, and the partial sums beyond half the ofmap buffer make a round
      trip per row fold after the first (``closed_form.spilled_words``).  Without
      ``chunk_stream``, the whole streamed dimension goes through each fold: the
      streamed operand is fetched once if it fits (else once per column fold),
      the stationary one once, and partial sums that do not fit in half the
      ofmap buffer spill to DRAM after every row fold and are read back.
    * scalesim: SCALE-Sim 3.0.0's CALC mode: an operand whose footprint is
      under ``50 * floor(bytes / 100)`` words is read once, and ws and is write
      the outputs once per row fold with no read-back.  (Operands that do not
      fit follow the rules above: SCALE-Sim has no closed form there.)

    Operands kept on chip move no DRAM traffic.

    Returns:
        ``(a_reads, b_reads, c_reads, c_writes)`` in words, for all ``gemm_count``
        GEMMs; ``c_reads`` are partial sums read back.
    """
    g = gemms
    n_ops = g.m.shape[0]
    a_reads = np.zeros(n_ops, np.int64)
    b_reads = np.zeros(n_ops, np.int64)
    c_reads = np.zeros(n_ops, np.int64)
    c_writes = np.zeros(n_ops, np.int64)
    half_if = rules.ifmap_bytes // 2
    half_fl = rules.filter_bytes // 2
    half_of = rules.ofmap_bytes // 2
    for i in range(n_ops):
        fr = row_folds[i]
        fc = col_folds[i]
        a_fp = g.a_footprint[i]
        b_fp = g.b_footprint[i]
        a_word = g.a_word[i]
        b_word = g.b_word[i]
        mn = g.m[i] * g.n[i]
        c_w = mn
        c_r = 0
        if g.dataflow[i] == OS:
            a = a_fp if a_fp * a_word <= half_if else fc * a_fp
            b_slice = (b_fp + fc - 1) // fc
            b = b_fp if b_slice * b_word <= half_fl else fr * b_fp
        else:
            # ws streams m past stationary B; is streams n past stationary A.
            ws = g.dataflow[i] == WS
            streamed, width = (g.m[i], g.n[i]) if ws else (g.n[i], g.m[i])
            psum_row = min(rules.cols, width) * g.c_word[i]
            a_op = (a_fp, a_word, half_if, g.a_on_chip[i])
            b_op = (b_fp, b_word, half_fl, g.b_on_chip[i])
            stream_op, stationary_op = (a_op, b_op) if ws else (b_op, a_op)
            spilled = (fr - 1) * _spilled_words(streamed, width, rules.cols, half_of // g.c_word[i])
            whole = rules.chunk_stream and g.stationary_served[i] and spilled > 0
            whole = whole and stationary_op[0] * stationary_op[1] > stationary_op[2]
            chunks = 1
            if whole:
                c_w, c_r = mn + spilled, spilled
            elif rules.chunk_stream:
                chunks = (streamed + max(1, half_of // psum_row) - 1) // max(1, half_of // psum_row)
            elif streamed * psum_row > half_of:
                c_w, c_r = fr * mn, (fr - 1) * mn
            stationary, stream = _chunk_reads(chunks, fc, stream_op, stationary_op)
            if rules.chunk_stream and rules.fit_stream and not whole:
                stationary, stream = _fewer_reads(
                    chunks, streamed, fc, stream_op, stationary_op, stationary, stream
                )
            a, b = (stream, stationary) if ws else (stationary, stream)
        if rules.convention == SCALESIM:
            if a_fp < 50 * (rules.ifmap_bytes // 100) // a_word:
                a = a_fp
            if b_fp < 50 * (rules.filter_bytes // 100) // b_word:
                b = b_fp
            if g.dataflow[i] != OS:
                c_w, c_r = fr * mn, 0
        a_reads[i] = 0 if g.a_on_chip[i] else a * g.gemm_count[i]
        b_reads[i] = 0 if g.b_on_chip[i] else b * g.gemm_count[i]
        c_reads[i] = 0 if g.c_on_chip[i] else c_r * g.gemm_count[i]
        c_writes[i] = 0 if g.c_on_chip[i] else c_w * g.gemm_count[i]
    return a_reads, b_reads, c_reads, c_writes
