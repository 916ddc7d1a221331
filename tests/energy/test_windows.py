"""Peak power's windows: the peak found from few windows is the maximum over all of
them, to the bit, on hand-made and random traces."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.energy import windows
from accelsim.energy.windows import peak_rate, window_energy_pj


def trace(starts: list[int], ends: list[int]) -> SimpleNamespace:
    return SimpleNamespace(
        start_cycle=np.array(starts, np.int64),
        end_cycle=np.array(ends, np.int64),
        total_cycles=max(ends, default=0),
        processors=1,
    )


def every_window(t: SimpleNamespace, op_pj: np.ndarray, window: int) -> float:
    energy, lengths = window_energy_pj(t, op_pj, window)  # type: ignore[arg-type]
    return float(np.max(energy / lengths, initial=0.0))


def test_hand_timed_peak() -> None:
    # A: 1,000 pJ over 0-1,000; B: 2,000 pJ over 500-1,500; C: 300 pJ at 1,700 (one cycle).
    t = trace([0, 500, 1700], [1000, 1500, 1700])
    op_pj = np.array([1000.0, 2000.0, 300.0])
    # windows of 500: 500, 1,500, 1,000 and 300 pJ; the second holds 3 pJ a cycle
    assert peak_rate(t, op_pj, 500) == pytest.approx(3.0, rel=1e-12)  # type: ignore[arg-type]
    # windows of 100: C's 300 pJ in one window of 100 cycles
    assert peak_rate(t, op_pj, 100) == pytest.approx(3.0, rel=1e-12)  # type: ignore[arg-type]
    # windows of 30: 1,680-1,700 is the last whole one; C's cycle is in 1,680-1,701's cut last
    assert peak_rate(t, op_pj, 30) == every_window(t, op_pj, 30)  # type: ignore[arg-type]
    assert peak_rate(trace([], []), np.zeros(0), 10) == 0.0  # type: ignore[arg-type]


def test_few_windows_are_worked_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 pJ a cycle over 0-6,000,000 and 2 over 4,000,000-10,000,000: 1,000,000 windows of 10
    t = trace([0, 4_000_000], [6_000_000, 10_000_000])
    op_pj = np.array([6e6, 1.2e7])
    seen: list[int] = []
    rise = windows._rise

    def counted(line: windows.Breakpoints, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        seen.append(len(low))
        return rise(line, low, high)

    monkeypatch.setattr(windows, "_rise", counted)
    assert peak_rate(t, op_pj, 10) == every_window(t, op_pj, 10) == pytest.approx(3.0)  # type: ignore[arg-type]
    # the six windows at a breakpoint (0, 399,999, 400,000, 599,999, 600,000, 999,999),
    # then the 199,998 inside 4,000,000-6,000,000, the only stretch at their 3 pJ a cycle;
    assert seen == [6, 199_998, 1_000_000]  # then every window, to compare


@pytest.mark.parametrize("seed", range(40))
def test_random_traces_peak_to_the_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ops = int(rng.integers(1, 60))
    window = int(rng.choice([1, 7, 64, 100, 1000]))
    grid = int(rng.choice([1, window, 3]))  # starts and ends on window bounds, or anywhere
    starts = rng.integers(0, 20_000 // grid, ops) * grid
    lengths = rng.integers(0, 5_000 // grid, ops) * grid  # some of no cycles
    # repeated ops (ties of equal rates, as identical layers give) and random energies
    base = rng.choice([1.0, 3.0, 1e6], ops) if seed % 2 else rng.random(ops) * 1e7
    t = trace(list(starts), list(starts + lengths))
    assert peak_rate(t, base, window) == every_window(t, base, window)  # type: ignore[arg-type]


def test_beyond_exact_cycles_works_out_every_window() -> None:
    # cycles past 2^53 are not exact float64s: the peak comes from every window
    t = trace([0, 2**54], [2**54, 2**55])
    op_pj = np.array([1.0, 4.0])
    assert peak_rate(t, op_pj, 2**52) == every_window(t, op_pj, 2**52)  # type: ignore[arg-type]
    assert peak_rate(t, op_pj, 2**52) == pytest.approx(4.0 / 2**54, rel=1e-12)  # type: ignore[arg-type]
