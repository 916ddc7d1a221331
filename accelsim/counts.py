"""Exact totals of per-op counts.

Per op and per event, counts (MACs, vector ops, bytes, cycles) are ``int64``: an op's
count is at most :data:`~accelsim.errors.MAX_COUNT` (2^62, checked before a step is
simulated), so the sum of two, an event's start plus its duration, still fits.  A
total over a whole step may not (a GPT-3 step on 1,024 chips makes more than 10^21
MACs, past ``int64``'s 9.2e18), so totals are Python integers, exact at any size:
NumPy adds in ``int64`` when the sum provably fits and Python adds the rest.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, LimitError

LIMIT_MESSAGE = (
    f"the step takes more than {MAX_COUNT_TEXT} cycles ({MAX_COUNT:.3g}), beyond what"
    " an event's time is kept in; raise the DRAM or interconnect bandwidth, lower their"
    " latency_cycles or the batch size"
)
"""What a :class:`~accelsim.errors.LimitError` says: an op or the step lasts past
:data:`~accelsim.errors.MAX_COUNT` cycles."""

INT64_MAX = 2**63 - 1
"""The largest ``int64``."""


def exact_total(values: np.ndarray) -> int:
    """The sum of an integer array, exact: ``int64`` arithmetic when ``size x
    max |value|`` fits, Python integers otherwise."""
    if _fits(values):
        return int(values.sum())
    return sum(values.tolist())


def exact_group_totals(group: np.ndarray, values: np.ndarray, groups: int) -> list[int]:
    """Per group ``0 .. groups - 1``, the exact sum of the ``values`` whose ``group``
    it is (:func:`exact_total`'s rule: ``int64`` when it provably fits)."""
    if not _fits(values):
        out = [0] * groups
        for g, v in zip(group.tolist(), values.tolist(), strict=True):
            out[g] += v
        return out
    sums = np.zeros(groups, np.int64)
    np.add.at(sums, group, values)
    return sums.tolist()


def whole_cycles(cycles: np.ndarray) -> np.ndarray:
    """Durations in cycles (floats: bytes over a rate), rounded up to ``int64``.

    Raises:
        LimitError: if one lasts more than :data:`~accelsim.errors.MAX_COUNT` cycles
            (the cast would wrap around).
    """
    up = np.ceil(cycles)
    if up.size and up.max() > MAX_COUNT:
        raise LimitError(LIMIT_MESSAGE)
    whole: np.ndarray = up.astype(np.int64)
    return whole


def _fits(values: np.ndarray) -> bool:
    """Whether every sum of ``values`` fits ``int64``: ``size x max |value|`` does."""
    if values.size == 0:
        return True
    largest = max(abs(int(values.max())), abs(int(values.min())))
    return largest * values.size <= INT64_MAX
