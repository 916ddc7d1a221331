"""Approximate random dropout patterns and the SGD search for their distribution.

A pattern is periodic over unit indices (neurons for row patterns, tiles of a weight
matrix for tile patterns): period ``d``, offset ``o`` and a kind.  A *drop* pattern
drops the units whose index is ``o`` modulo ``d`` (rate about ``1/d``); a *keep*
pattern keeps only those (rate about ``1 - 1/d``).  A tile ``(r, c)`` of a tile grid
has index ``r + c``, so its dropped tiles lie on diagonals and spread over every
tile row and column.  The family holds every period from 2 to ``max_period`` with
every offset, in both kinds ([M] Song et al. define row and tile patterns by a
period and an offset; the two kinds and the diagonal tile index are our choice).

:func:`search` finds the probability of each pattern such that every unit's
expected drop rate is the target ``p``: projected stochastic gradient descent on
the probability simplex of

    mean_i (sum_j q_j D[j, i] - p)^2  +  w_t * (mu * sum_j q_j (r_j - p)^2  -  lambda * H(q))

where ``D[j, i]`` says whether pattern ``j`` drops unit ``i``, ``r_j`` is pattern
``j``'s drop rate, the gradient is taken on a random batch of units per step, and
``H`` is the entropy of ``q``.  The two regularisers are our reading of what the
paper intends [D]: the spread term keeps each step's drop rate near ``p``, as
conventional dropout's binomial count is (its rate varies by only
``sqrt(p(1-p)/n)`` between steps), so the patterns drawn bracket ``p`` instead of
ranging from 1/16 to 15/16; the entropy term spreads the probability over offsets
so no unit is dropped on a fixed schedule.  Their weight ``w_t`` decays linearly
from 1 to 0 over the first half, so the second half fits the marginals alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.errors import ConfigError


@dataclass(frozen=True)
class PatternFamily:
    """Candidate patterns: ``period``, ``offset`` and ``keep`` (true: a keep pattern)."""

    period: np.ndarray
    offset: np.ndarray
    keep: np.ndarray  # bool

    @classmethod
    def up_to(cls, max_period: int) -> PatternFamily:
        """Every period 2..``max_period``, every offset, both kinds (a period-2 keep
        pattern is a period-2 drop pattern, so only drop patterns have period 2)."""
        rows = [
            (d, o, keep)
            for keep in (False, True)
            for d in range(2, max_period + 1)
            if not (keep and d == 2)
            for o in range(d)
        ]
        period, offset, keep = zip(*rows, strict=True)
        return cls(
            np.asarray(period, np.int64), np.asarray(offset, np.int64), np.asarray(keep, bool)
        )

    def __len__(self) -> int:
        return int(self.period.shape[0])

    def rates(self) -> np.ndarray:
        """Nominal drop rate of each pattern (exact over a multiple of its period)."""
        rate: np.ndarray = np.where(self.keep, 1 - 1 / self.period, 1 / self.period)
        return rate

    def drops(self, index: np.ndarray) -> np.ndarray:
        """``D[pattern, unit]``: whether each pattern drops the unit of each index."""
        hit = (index[None, :] % self.period[:, None]) == self.offset[:, None]
        dropped: np.ndarray = hit != self.keep[:, None]
        return dropped

    def row_drops(self, units: int) -> np.ndarray:
        """``D`` over ``units`` neurons."""
        return self.drops(np.arange(units, dtype=np.int64))

    def tile_drops(self, grid_rows: int, grid_cols: int) -> np.ndarray:
        """``D`` over a ``grid_rows x grid_cols`` tile grid (tile ``(r, c)`` has index r + c)."""
        r, c = np.divmod(np.arange(grid_rows * grid_cols, dtype=np.int64), grid_cols)
        return self.drops(r + c)

    def burst_rows(self, units: int, per_burst: int) -> np.ndarray:
        """Per pattern, the neurons of ``units`` in the DRAM bursts of ``per_burst``
        neurons that hold a kept one: what a gather of the kept neurons along a
        tensor's contiguous dimension moves (rows taken as burst-aligned)."""
        kept = ~self.row_drops(units)
        bursts = -(-units // per_burst)
        padded = np.zeros((kept.shape[0], bursts * per_burst), bool)
        padded[:, :units] = kept
        touched = padded.reshape(kept.shape[0], bursts, per_burst).any(axis=2)
        lengths = np.minimum(per_burst, units - per_burst * np.arange(bursts))
        moved: np.ndarray = touched @ lengths
        return moved

    def kept_rows(self, pattern: np.ndarray, units: int) -> np.ndarray:
        """Neurons of ``units`` that each pattern index in ``pattern`` keeps."""
        d, o, keep = self.period[pattern], self.offset[pattern], self.keep[pattern]
        hits = np.where(o < units, (units - 1 - o) // d + 1, 0)
        kept: np.ndarray = np.where(keep, hits, units - hits)
        return kept


def site_chances(
    drops: np.ndarray, q: np.ndarray, rate: float
) -> tuple[np.ndarray, float, np.ndarray]:
    """A site's pattern probabilities ``q`` normalised, its units' worst deviation from
    ``rate`` under them (``drops``: ``D[pattern, unit]``), and the share of its units
    each pattern keeps."""
    q = q / q.sum()
    kept_share: np.ndarray = 1 - drops.mean(axis=1)
    return q, float(np.abs(q @ drops - rate).max()), kept_share


def draw(
    seed: int,
    chances: Sequence[tuple[np.ndarray, float, np.ndarray]],
    steps: int,
    tolerance: float,
    most: int,
) -> tuple[list[np.ndarray], list[float]]:
    """Each site's pattern per step, drawn from ``seed`` with the site's probabilities
    (``chances``: probabilities, search error, share of units each pattern keeps), and
    the mean kept share of each: ``steps`` steps, doubled (to at most ``most``) until
    every site's mean kept share is within ``tolerance`` of its expectation."""
    expected = [float(q @ share) for q, _, share in chances]
    while True:
        rng = np.random.default_rng(seed)
        drawn = [rng.choice(len(q), size=steps, p=q) for q, _, _ in chances]
        means = [float(share[d].mean()) for d, (_, _, share) in zip(drawn, chances, strict=True)]
        near = all(abs(m - e) <= tolerance * e for m, e in zip(means, expected, strict=True))
        if near or steps >= most:
            return drawn, means
        steps = min(2 * steps, most)


@dataclass(frozen=True)
class SearchResult:
    """The distribution found, the expected drop rate per unit, and the loss curve."""

    probabilities: np.ndarray
    marginals: np.ndarray
    losses: np.ndarray
    rate: float

    @property
    def max_error(self) -> float:
        """The largest deviation of a unit's expected drop rate from the target."""
        return float(np.abs(self.marginals - self.rate).max())

    def entropy(self) -> float:
        q = self.probabilities[self.probabilities > 0]
        return float(-(q * np.log(q)).sum())

    def rate_spread(self, drops: np.ndarray) -> float:
        """Standard deviation of the drop rate of the pattern drawn in a step."""
        rates = drops.mean(axis=1)
        mean = float(self.probabilities @ rates)
        return float(np.sqrt(self.probabilities @ (rates - mean) ** 2))


def project_simplex(v: np.ndarray) -> np.ndarray:
    """The Euclidean projection of ``v`` onto the probability simplex (Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1
    ks = np.arange(1, v.shape[0] + 1)
    rho = int(np.nonzero(u - cumulative / ks > 0)[0][-1])
    theta = cumulative[rho] / (rho + 1)
    projected: np.ndarray = np.maximum(v - theta, 0.0)
    return projected


_FOUND: dict[tuple[object, ...], SearchResult] = {}
"""Searches made in this process, by their inputs (the search is a pure function of
them): a run searches each dropout site's distribution, and a sweep's points and a
plan's candidates search the same sites again."""
_KEPT_SEARCHES = 256


def search(
    drops: np.ndarray,
    rate: float,
    *,
    iterations: int = 1000,
    batch: int = 256,
    step: float = 0.5,
    spread: float = 1.0,
    entropy: float = 1e-3,
    seed: int = 0,
) -> SearchResult:
    """Pattern probabilities whose expected drop rate is ``rate`` for every unit
    (the search done once per distinct input in a process: the result's arrays
    are read-only).

    Args:
        drops: ``D[pattern, unit]`` of the family over the units.
        rate: The target drop probability of every unit.
        iterations: SGD steps; the step size decays as ``step / sqrt(t + 1)``.
        batch: Units sampled per step (all when there are fewer).
        spread: Initial weight ``mu`` of the rate-spread regulariser (decays to 0).
        entropy: Initial weight ``lambda`` of the entropy regulariser (decays to 0).
        seed: Seed of the unit sampling.
    """
    d = np.ascontiguousarray(drops)
    digest = hashlib.blake2b(d.tobytes(), digest_size=16).digest()
    key = (d.shape, d.dtype.str, digest, rate, iterations, batch, step, spread, entropy, seed)
    found = _FOUND.get(key)
    if found is None:
        found = _searched(d, rate, iterations, batch, step, spread, entropy, seed)
        for array in (found.probabilities, found.marginals, found.losses):
            array.setflags(write=False)
        if len(_FOUND) >= _KEPT_SEARCHES:
            del _FOUND[next(iter(_FOUND))]
        _FOUND[key] = found
    return found


def _searched(
    drops: np.ndarray,
    rate: float,
    iterations: int,
    batch: int,
    step: float,
    spread: float,
    entropy: float,
    seed: int,
) -> SearchResult:
    """The projected SGD of :func:`search`, run."""
    rng = np.random.default_rng(seed)
    d = drops.astype(np.float64)
    patterns, units = d.shape
    rates = d.mean(axis=1)
    q = np.full(patterns, 1.0 / patterns)
    losses = np.empty(iterations)
    for t in range(iterations):
        cols = rng.choice(units, size=min(batch, units), replace=False)
        sample = d[:, cols]
        residual = q @ sample - rate
        losses[t] = float(np.mean(residual**2))
        weight = max(0.0, 1 - 2 * t / iterations)
        regulariser = spread * (rates - rate) ** 2 + entropy * (np.log(np.maximum(q, 1e-12)) + 1)
        grad = 2 * sample @ residual / cols.shape[0] + weight * regulariser
        q = project_simplex(q - step / np.sqrt(t + 1) * grad)
    return SearchResult(q, q @ d, losses, rate)


def save_distribution(path: Path, family: PatternFamily, result: SearchResult) -> None:
    """Write the distribution as JSON: the target rate and one row per pattern."""
    rows = [
        {"period": int(d), "offset": int(o), "keep": bool(k), "probability": float(p)}
        for d, o, k, p in zip(
            family.period, family.offset, family.keep, result.probabilities, strict=True
        )
    ]
    data = {"rate": result.rate, "max_error": result.max_error, "patterns": rows}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def load_distribution(
    path: Path, family: PatternFamily, source: str, where: str
) -> tuple[float, np.ndarray]:
    """``(rate, probabilities over family)`` from a file :func:`save_distribution` wrote.

    Raises:
        ConfigError: at ``where`` in ``source`` if the file is unreadable, malformed,
            names a pattern outside ``family`` or its probabilities do not sum to 1.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rate = float(data["rate"])
        rows = [
            (int(r["period"]), int(r["offset"]), bool(r["keep"]), float(r["probability"]))
            for r in data["patterns"]
        ]
    except OSError as exc:
        raise ConfigError.single(
            source, where, f"cannot read the distribution: {exc.strerror}", str(path)
        ) from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError.single(
            source,
            where,
            "expected JSON with rate and patterns of period, offset, keep, probability",
            str(path),
        ) from None
    index = {
        (int(d), int(o), bool(k)): j
        for j, (d, o, k) in enumerate(zip(family.period, family.offset, family.keep, strict=True))
    }
    q = np.zeros(len(family))
    for d, o, k, p in rows:
        j = index.get((d, o, k))
        if j is None or p < 0:
            raise ConfigError.single(
                source, where, f"pattern (period {d}, offset {o}) is not in the family", str(path)
            )
        q[j] += p
    if abs(q.sum() - 1) > 1e-6:
        raise ConfigError.single(
            source, where, f"probabilities sum to {q.sum():g}, not 1", str(path)
        )
    return rate, q


def write_distribution(
    path: Path,
    rate: float,
    units: int,
    *,
    max_period: int = 16,
    iterations: int = 1000,
    seed: int = 0,
) -> tuple[SearchResult, float]:
    """Search the row-pattern distribution for ``units`` neurons at ``rate`` and write it
    to ``path`` (the technique's ``distribution:``); returns the result and the
    standard deviation of a drawn pattern's rate."""
    family = PatternFamily.up_to(max_period)
    drops = family.row_drops(units)
    found = search(drops, rate, iterations=iterations, seed=seed)
    save_distribution(path, family, found)
    return found, found.rate_spread(drops)
