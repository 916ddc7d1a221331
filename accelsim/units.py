"""Unit constants and conversions.

Internally time is integer cycles, sizes are bytes and energy is pJ.  Only the
report layer converts to seconds, GB or mJ, through these helpers.
"""

from __future__ import annotations

KIB_BYTES = 1024
BITS_PER_BYTE = 8


def kib_to_bytes(kib: float) -> int:
    """Convert KiB to whole bytes (rounded down)."""
    return int(kib * KIB_BYTES)


def cycles_to_seconds(cycles: float, clock_mhz: float) -> float:
    """Convert cycles at ``clock_mhz`` to seconds."""
    return cycles / (clock_mhz * 1e6)


def pj_to_mj(energy_pj: float) -> float:
    """Convert picojoules to millijoules."""
    return energy_pj / 1e9


def bytes_to_gb(n_bytes: float) -> float:
    """Convert bytes to decimal gigabytes."""
    return n_bytes / 1e9


def bytes_to_mb(n_bytes: float) -> float:
    """Convert bytes to decimal megabytes."""
    return n_bytes / 1e6


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``noun`` as ``count`` of it take it: itself for one, else ``many`` (``noun`` with
    an ``s`` unless given): ``f"{n} {plural(n, 'step')}"`` is ``1 step``, ``2 steps``."""
    if count == 1:
        return noun
    return noun + "s" if many is None else many
