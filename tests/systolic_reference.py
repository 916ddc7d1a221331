"""A register-level reference of a systolic array running several folds.

Each cycle moves every register of an ``R x C`` array one step, and every value
carries its fold (and row or stream index) as a tag, so a schedule that breaks a
hazard (an input port fed twice in a cycle, a shadow register overwritten before
its PE took it, two values landing in one register) fails an assertion instead of
producing a wrong answer silently; the outputs are checked against the matrix
products.  ``tests/timing/test_fold_overlap.py`` drives it with the schedule behind
accelsim's closed forms and checks the cycle of the last output against them.

Weight stationary (input stationary is the same hardware on ``C^T = B^T A^T``):
each column loads its next stationary tile into shadow registers through a
shift chain, one row per cycle for ``R`` cycles (column ``c`` ``c`` cycles after
column 0); the new tile's front moves down one row per cycle and the registers
below it hold still, so row ``r``'s shadow is overwritten ``r`` cycles into the
load; a PE swaps shadow into active when the first input of a new fold reaches
it; inputs enter row ``r`` ``r`` cycles late and move right, partial sums move
down and leave the bottom row.

Output stationary: rows of ``A`` enter from the left and columns of ``B`` from the
top, skewed; a PE's last MAC of a fold writes its result into its shadow register,
and each column drains its shadows down a shift chain (``R`` cycles) once its
bottom PE has finished the fold; a draining value moves every cycle, any other
stays where it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Tag = tuple[int, int]  # (fold, index)


def _feed(starts: Sequence[int], length: int, cycle: int, lane: int) -> Tag | None:
    """The ``(fold, t)`` an input port of ``lane`` takes at ``cycle`` (skewed by ``lane``)."""
    fed = [(f, cycle - s - lane) for f, s in enumerate(starts) if 0 <= cycle - s - lane < length]
    assert len(fed) <= 1, f"port {lane} fed twice at cycle {cycle}: {fed}"
    return fed[0] if fed else None


def weight_stationary(
    weights: Sequence[np.ndarray],
    inputs: Sequence[np.ndarray],
    starts: Sequence[int],
    loads: Sequence[int],
) -> int:
    """Run fold ``f`` (stationary ``weights[f]``, ``R x C``; streamed ``inputs[f]``, ``T x R``)
    whose column 0 starts loading at ``loads[f]`` and whose first input enters row 0 at
    ``starts[f]``; check every output and return the cycles until the last one is out."""
    rows, cols = weights[0].shape
    length = inputs[0].shape[0]
    active: list[list[tuple[int, float] | None]] = [[None] * cols for _ in range(rows)]
    shadow: list[list[tuple[int, int, float, bool] | None]] = [[None] * cols for _ in range(rows)]
    acts: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
    sums: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
    out = [np.full((length, cols), np.nan) for _ in weights]
    last, cycle = -1, 0
    horizon = max(starts) + length + 2 * rows + cols + 2
    while cycle < horizon:
        new_acts = [[None] * cols for _ in range(rows)]
        new_sums = [[None] * cols for _ in range(rows)]
        new_shadow = [row[:] for row in shadow]
        for c in range(cols):
            for r in range(rows):
                if c == 0:
                    tag = _feed(starts, length, cycle, r)
                    a_in = None if tag is None else (*tag, float(inputs[tag[0]][tag[1], r]))
                else:
                    a_in = acts[r][c - 1]
                p_in = sums[r - 1][c] if r else (None if a_in is None else (*a_in[:2], 0.0))
                if a_in is None:
                    assert p_in is None, f"partial sum without input at ({r}, {c}), {cycle}"
                    continue
                assert p_in is not None and p_in[:2] == a_in[:2], f"misaligned at ({r}, {c})"
                fold = a_in[0]
                held = active[r][c]
                if held is None or held[0] != fold:  # swap the shadow in
                    sh = shadow[r][c]
                    assert sh is not None and sh[:2] == (fold, r), (
                        f"fold {fold} weight not in place at ({r}, {c}), cycle {cycle}: {sh}"
                    )
                    active[r][c] = (fold, sh[2])
                    new_shadow[r][c] = (*sh[:3], True)
                    held = active[r][c]
                assert held is not None
                new_acts[r][c] = a_in
                new_sums[r][c] = (*p_in[:2], p_in[2] + a_in[2] * held[1])
        for c in range(cols):  # the load chains shift after the PEs read their shadows
            loading = [f for f, start in enumerate(loads) if 0 <= cycle - start - c < rows]
            assert len(loading) <= 1
            if not loading:
                continue
            f = loading[0]
            step = cycle - loads[f] - c  # the deepest row's weight is fed first
            chain = [new_shadow[r][c] for r in range(rows)]
            fed = (f, rows - 1 - step, float(weights[f][rows - 1 - step, c]), False)
            for r in range(step + 1):  # the new tile's front has reached row `step`
                old = chain[r]
                assert old is None or old[0] == f or old[3], (
                    f"fold {old[0]} weight of ({r}, {c}) overwritten before use, cycle {cycle}"
                )
                new_shadow[r][c] = fed if r == 0 else chain[r - 1]
        for c in range(cols):
            done = new_sums[rows - 1][c]
            if done is not None:
                out[done[0]][done[1], c] = done[2]
                last = cycle
        acts, sums, shadow = new_acts, new_sums, new_shadow
        cycle += 1
    for f, (w, a) in enumerate(zip(weights, inputs, strict=True)):
        np.testing.assert_allclose(out[f], a @ w, err_msg=f"fold {f}")
    return last + 1


def output_stationary(
    lefts: Sequence[np.ndarray],
    tops: Sequence[np.ndarray],
    starts: Sequence[int],
    drains: Sequence[Sequence[int]],
) -> int:
    """Run fold ``f`` (``lefts[f]``, ``R x T``, from the left; ``tops[f]``, ``T x C``, from
    the top) whose first operands enter at ``starts[f]`` and whose column ``c`` starts
    draining at ``drains[f][c]``; check every output and return the cycles until the
    last one is out."""
    rows, length = lefts[0].shape
    cols = tops[0].shape[1]
    acc: list[list[tuple[int, float] | None]] = [[None] * cols for _ in range(rows)]
    shadow: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
    a_regs: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
    b_regs: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
    out = [np.full((rows, cols), np.nan) for _ in lefts]
    last, cycle = -1, 0
    horizon = max(max(d) for d in drains) + rows + 1
    while cycle < horizon:
        new_a = [[None] * cols for _ in range(rows)]
        new_b = [[None] * cols for _ in range(rows)]
        written: dict[tuple[int, int], tuple[int, int, float]] = {}
        for r in range(rows):
            for c in range(cols):
                if c == 0:
                    tag = _feed(starts, length, cycle, r)
                    a_in = None if tag is None else (*tag, float(lefts[tag[0]][r, tag[1]]))
                else:
                    a_in = a_regs[r][c - 1]
                if r == 0:
                    tag = _feed(starts, length, cycle, c)
                    b_in = None if tag is None else (*tag, float(tops[tag[0]][tag[1], c]))
                else:
                    b_in = b_regs[r - 1][c]
                if a_in is None and b_in is None:
                    continue
                assert a_in is not None and b_in is not None and a_in[:2] == b_in[:2], (
                    f"operands misaligned at ({r}, {c}), cycle {cycle}: {a_in} {b_in}"
                )
                fold, t = a_in[:2]
                held = acc[r][c]
                assert (held is None) == (t == 0) and (held is None or held[0] == fold)
                total = (0.0 if held is None else held[1]) + a_in[2] * b_in[2]
                acc[r][c] = (fold, total) if t < length - 1 else None
                if t == length - 1:
                    written[(r, c)] = (fold, r, total)
                new_a[r][c], new_b[r][c] = a_in, b_in
        new_shadow: list[list[tuple[int, int, float] | None]] = [[None] * cols for _ in range(rows)]
        for c in range(cols):
            for r in range(rows):
                value = shadow[r][c]
                if value is None:
                    continue
                if drains[value[0]][c] <= cycle:  # draining: one row down, or out
                    if r == rows - 1:
                        out[value[0]][value[1], c] = value[2]
                        last = cycle
                    else:
                        assert new_shadow[r + 1][c] is None, f"collision at ({r + 1}, {c})"
                        new_shadow[r + 1][c] = value
                else:
                    assert new_shadow[r][c] is None, f"collision at ({r}, {c}), cycle {cycle}"
                    new_shadow[r][c] = value
            for r in range(rows):
                if (r, c) in written:
                    assert new_shadow[r][c] is None, (
                        f"result of ({r}, {c}) lands on an undrained value, cycle {cycle}"
                    )
                    new_shadow[r][c] = written[(r, c)]
        a_regs, b_regs, shadow = new_a, new_b, new_shadow
        cycle += 1
    for f, (a, b) in enumerate(zip(lefts, tops, strict=True)):
        np.testing.assert_allclose(out[f], a @ b, err_msg=f"fold {f}")
    return last + 1
