"""Each Numba kernel and its closed_form twin against a plain NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.timing import closed_form, kernels


def _ceil(a: np.ndarray, b: int) -> np.ndarray:
    return -(-a // b)


def _table(seed: int, n: int = 200) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    m, nn, k = (rng.integers(1, 3000, n) for _ in range(3))
    return {
        "dataflow": rng.integers(0, 3, n),
        "m": m,
        "n": nn,
        "k": k,
        "count": rng.integers(1, 4, n),
        "a_fp": np.minimum(m * k, rng.integers(1, 4_000_000, n)),
        "b_fp": k * nn,
        "a_word": rng.choice([1, 2, 4], n),
        "b_word": rng.choice([1, 2, 4], n),
        "c_word": rng.choice([1, 2, 4], n),
        "a_on": rng.random(n) < 0.1,
        "b_on": rng.random(n) < 0.1,
        "c_on": rng.random(n) < 0.1,
        "served": rng.random(n) < 0.3,
    }


def _dims(t: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    df, m, n, k = t["dataflow"], t["m"], t["n"], t["k"]
    sr = np.select([df == 0, df == 1], [m, k], k)
    sc = np.select([df == 0, df == 1], [n, n], m)
    tt = np.select([df == 0, df == 1], [k, m], n)
    return sr, sc, tt


@pytest.mark.parametrize(
    ("convention", "overlap"),
    [(closed_form.ACCELSIM, False), (closed_form.ACCELSIM, True), (closed_form.SCALESIM, False)],
)
@pytest.mark.parametrize(("rows", "cols"), [(32, 32), (128, 128), (12, 14), (8, 4)])
@pytest.mark.parametrize("module", [kernels, closed_form], ids=["numba", "closed_form"])
@pytest.mark.parametrize(("load", "swap"), [(1, 0), (3, 0), (2, 7)])
def test_fold_cycles_matches_numpy(
    convention: int, overlap: bool, rows: int, cols: int, module, load: int, swap: int
) -> None:
    t = _table(rows * cols + convention)
    sr, sc, tt = _dims(t)
    fr, fc, folds, cycles = module.fold_cycles(
        t["dataflow"], sr, sc, tt, t["count"], rows, cols, convention, overlap, load, swap
    )
    ref_fr, ref_fc = _ceil(sr, rows), _ceil(sc, cols)
    ref_folds = ref_fr * ref_fc * t["count"]
    fill = np.where((convention == closed_form.SCALESIM) & (t["dataflow"] == 0), rows, 2 * rows)
    ref_cycles = ref_folds * (fill + cols + tt - 2) - (convention == closed_form.SCALESIM)
    if overlap:
        # the first fold whole, every later one max(T, ceil(R / load)) + swap: its load
        # or drain hides behind the stream before it, its swap does not
        switch = -(-rows // load)
        later = np.maximum(tt, switch) + swap
        ref_cycles = (2 * rows + cols + tt - 2) + (ref_folds - 1) * later
    np.testing.assert_array_equal(fr, ref_fr)
    np.testing.assert_array_equal(fc, ref_fc)
    np.testing.assert_array_equal(folds, ref_folds)
    np.testing.assert_array_equal(cycles, ref_cycles)


@pytest.mark.parametrize("convention", [closed_form.ACCELSIM, closed_form.SCALESIM])
@pytest.mark.parametrize("module", [kernels, closed_form], ids=["numba", "closed_form"])
def test_sram_counts_matches_numpy(convention: int, module) -> None:
    rows, cols = 16, 8
    t = _table(7 + convention)
    sr, sc, _ = _dims(t)
    fr, fc = _ceil(sr, rows), _ceil(sc, cols)
    got = module.sram_counts(
        t["dataflow"], t["m"], t["n"], t["k"], t["count"], fr, fc, rows, cols, convention
    )
    df, m, n, k, cnt = t["dataflow"], t["m"], t["n"], t["k"], t["count"]
    ifmap = np.where(df == 2, m * k, fc * m * k) * cnt
    filt = np.select([df == 0, df == 1], [fr * k * n, k * n], fc * k * n) * cnt
    extra = fr * fc * (rows + cols) if convention == closed_form.SCALESIM else 0
    of_w = np.where(df == 0, m * n + extra, fr * m * n) * cnt
    of_r = (
        np.zeros_like(m)
        if convention == closed_form.SCALESIM
        else np.where(df == 0, 0, (fr - 1) * m * n) * cnt
    )
    for value, ref in zip(got, (ifmap, filt, of_r, of_w), strict=True):
        np.testing.assert_array_equal(value, ref)


KERNELS = ("fold_cycles", "sram_counts", "dram_words")


def _arguments(
    t: dict[str, np.ndarray],
    rows: int,
    cols: int,
    convention: int,
    sizes: tuple[int, int, int],
    chunk_stream: bool,
    fit_stream: bool = False,
) -> dict[str, tuple]:
    """Arguments of each kernel for the GEMM table ``t`` (``chunk_stream`` also
    stands for fold overlap, which only the accelsim convention has)."""
    sr, sc, tt = _dims(t)
    fr, fc = _ceil(sr, rows), _ceil(sc, cols)
    df, m, n, k, cnt = t["dataflow"], t["m"], t["n"], t["k"], t["count"]
    overlap = chunk_stream and convention == closed_form.ACCELSIM
    return {
        "fold_cycles": (df, sr, sc, tt, cnt, rows, cols, convention, overlap, 1, 5),
        "sram_counts": (df, m, n, k, cnt, fr, fc, rows, cols, convention),
        "dram_words": (
            closed_form.DramGemms(
                *(df, m, n, cnt, t["a_fp"], t["b_fp"]),
                *(t["a_word"], t["b_word"], t["c_word"], t["a_on"], t["b_on"], t["c_on"]),
                t["served"],
            ),
            fr,
            fc,
            closed_form.DramRules(*sizes, cols, convention, chunk_stream, fit_stream),
        ),
    }


def _fewest(
    low: int,
    high: int,
    s_fp: int,
    s_word: int,
    s_half: int,
    t_fp: int,
    t_word: int,
    t_half: int,
    fc: int,
    s_on: bool,
    t_on: bool,
) -> int:
    """By brute force, the chunk count from ``low`` to ``high`` (at least ``low``) that
    reads the fewest DRAM bytes of a streamed and a stationary operand (none of one on
    chip), the smallest of equals."""  # fmt: skip
    c = np.arange(low, max(low, high) + 1)
    stream = np.where(_ceil(s_fp, c) * s_word <= s_half, s_fp, fc * s_fp)
    stationary = np.where((c == 1) | (t_fp * t_word <= t_half), t_fp, c * t_fp)
    dram = stream * s_word * (not s_on) + stationary * t_word * (not t_on)
    return int(c[np.argmin(dram)])


def _beyond(streamed: int, width: int, cols: int, cap: int) -> int:
    """Words of partial sums over ``cap`` words, column block by column block."""
    blocks = [min(cols, width - j) for j in range(0, width, cols)]
    return sum(max(streamed * w - cap, 0) for w in blocks)


def _dram_reference(
    t: dict[str, np.ndarray],
    fr: np.ndarray,
    fc: np.ndarray,
    sizes: tuple[int, int, int],
    cols: int,
    convention: int,
    chunk_stream: bool,
    fit_stream: bool,
) -> tuple[np.ndarray, ...]:
    half_if, half_fl, half_of = (s // 2 for s in sizes)
    out = []
    for i in range(len(t["m"])):
        df, m, n = t["dataflow"][i], t["m"][i], t["n"][i]
        a_fp, b_fp = t["a_fp"][i], t["b_fp"][i]
        wa, wb, wc = t["a_word"][i], t["b_word"][i], t["c_word"][i]
        c_w, c_r = m * n, 0
        if df == 0:
            a = a_fp if a_fp * wa <= half_if else fc[i] * a_fp
            b = b_fp if _ceil(b_fp, fc[i]) * wb <= half_fl else fr[i] * b_fp
        elif df == 1:
            rows_fit = max(1, half_of // (min(cols, n) * wc))
            chunks = _ceil(m, rows_fit) if chunk_stream else 1
            if not chunk_stream and m * min(cols, n) * wc > half_of:
                c_w, c_r = fr[i] * m * n, (fr[i] - 1) * m * n
            c = _fewest(chunks, m if fit_stream and chunk_stream else chunks, a_fp, wa, half_if,
                        b_fp, wb, half_fl, fc[i], t["a_on"][i], t["b_on"][i])  # fmt: skip
            spilled = (fr[i] - 1) * _beyond(m, n, cols, half_of // wc)
            if chunk_stream and t["served"][i] and b_fp * wb > half_fl and spilled > 0:
                c = 1  # B loaded once: m streams whole, partial sums over half_of spill
                c_w, c_r = m * n + spilled, spilled
            b = np.where((c == 1) | (b_fp * wb <= half_fl), b_fp, c * b_fp)
            a = np.where(_ceil(a_fp, c) * wa <= half_if, a_fp, fc[i] * a_fp)
        else:
            cols_fit = max(1, half_of // (min(cols, m) * wc))
            chunks = _ceil(n, cols_fit) if chunk_stream else 1
            if not chunk_stream and n * min(cols, m) * wc > half_of:
                c_w, c_r = fr[i] * m * n, (fr[i] - 1) * m * n
            c = _fewest(chunks, n if fit_stream and chunk_stream else chunks, b_fp, wb, half_fl,
                        a_fp, wa, half_if, fc[i], t["b_on"][i], t["a_on"][i])  # fmt: skip
            spilled = (fr[i] - 1) * _beyond(n, m, cols, half_of // wc)
            if chunk_stream and t["served"][i] and a_fp * wa > half_if and spilled > 0:
                c = 1  # A loaded once: n streams whole, partial sums over half_of spill
                c_w, c_r = m * n + spilled, spilled
            a = np.where((c == 1) | (a_fp * wa <= half_if), a_fp, c * a_fp)
            b = np.where(_ceil(b_fp, c) * wb <= half_fl, b_fp, fc[i] * b_fp)
        if convention == closed_form.SCALESIM:
            a = a_fp if a_fp < 50 * (sizes[0] // 100) // wa else a
            b = b_fp if b_fp < 50 * (sizes[1] // 100) // wb else b
            if df != 0:
                c_w, c_r = fr[i] * m * n, 0
        cnt = t["count"][i]
        out.append(
            (
                0 if t["a_on"][i] else a * cnt,
                0 if t["b_on"][i] else b * cnt,
                0 if t["c_on"][i] else c_r * cnt,
                0 if t["c_on"][i] else c_w * cnt,
            )
        )
    return tuple(np.array(col) for col in zip(*out, strict=True))


@pytest.mark.parametrize(
    ("chunk_stream", "fit_stream"), [(True, False), (False, False), (True, True), (False, True)]
)
@pytest.mark.parametrize("convention", [closed_form.ACCELSIM, closed_form.SCALESIM])
@pytest.mark.parametrize(
    "sizes", [(65536, 65536, 65536), (2 << 20, 2 << 20, 1 << 20), (4096, 2048, 8192)]
)
@pytest.mark.parametrize("module", [kernels, closed_form], ids=["numba", "closed_form"])
def test_dram_words_matches_numpy(
    convention: int, sizes: tuple[int, int, int], chunk_stream: bool, fit_stream: bool, module
) -> None:
    rows, cols = 32, 32
    t = _table(sum(sizes) % 1000 + convention)
    sr, sc, _ = _dims(t)
    fr, fc = _ceil(sr, rows), _ceil(sc, cols)
    args = _arguments(t, rows, cols, convention, sizes, chunk_stream, fit_stream)["dram_words"]
    got = module.dram_words(*args)
    ref = _dram_reference(t, fr, fc, sizes, cols, convention, chunk_stream, fit_stream)
    for value, expected in zip(got, ref, strict=True):
        np.testing.assert_array_equal(value, expected)
    if convention == closed_form.ACCELSIM and sizes[2] <= 65536:
        # some partial sums spill and are read back (chunked: a served stationary operand's)
        assert got[2].sum() > 0
    if chunk_stream and fit_stream and convention == closed_form.ACCELSIM:
        # Never more bytes than chunking for partial sums alone, and fewer somewhere.
        plain = module.dram_words(*args[:-1], args[-1]._replace(fit_stream=False))
        a_word, b_word = t["a_word"], t["b_word"]
        mine, theirs = got[0] * a_word + got[1] * b_word, plain[0] * a_word + plain[1] * b_word
        assert (mine <= theirs).all()
        assert (mine < theirs).any()


@pytest.mark.parametrize("name", KERNELS)
def test_kernels_stay_valid_python(name: str) -> None:
    """The uncompiled function (what NUMBA_DISABLE_JIT=1 runs) gives the same answers."""
    kernel = getattr(kernels, name)
    args = _arguments(_table(3, n=40), 16, 16, 0, (8192, 8192, 8192), False)[name]
    for jit, py in zip(kernel(*args), kernel.py_func(*args), strict=True):
        np.testing.assert_array_equal(jit, py)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("convention", [closed_form.ACCELSIM, closed_form.SCALESIM])
@pytest.mark.parametrize(
    ("chunk_stream", "fit_stream"), [(True, False), (False, False), (True, True)]
)
@pytest.mark.parametrize(("rows", "cols"), [(32, 32), (12, 14), (128, 64)])
@pytest.mark.parametrize(
    "sizes", [(65536, 65536, 65536), (2 << 20, 2 << 20, 1 << 20), (4096, 2048, 8192)]
)
def test_closed_form_equals_numba(
    name: str,
    convention: int,
    chunk_stream: bool,
    fit_stream: bool,
    rows: int,
    cols: int,
    sizes: tuple[int, int, int],
) -> None:
    """The vectorised NumPy twin returns exactly what the Numba kernel does."""
    t = _table(rows + cols + sum(sizes) % 97 + convention, n=500)
    args = _arguments(t, rows, cols, convention, sizes, chunk_stream, fit_stream)[name]
    got = getattr(closed_form, name)(*args)
    expected = getattr(kernels, name)(*args)
    assert len(got) == len(expected) == 4
    for value, ref in zip(got, expected, strict=True):
        assert value.dtype == np.int64
        np.testing.assert_array_equal(value, ref)
