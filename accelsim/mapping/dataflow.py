"""Operand-to-array mapping of a GEMM for each dataflow (SCALE-Sim's convention).

For ``C[m x n] = A[m x k] . B[k x n]`` the dataflow decides which dimension
spreads over the array rows (``Sr``), which over the columns (``Sc``) and which
is streamed through in time (``T``):

====  =====  =====  ====  ==========
flow  Sr     Sc     T     stationary
====  =====  =====  ====  ==========
os    m      n      k     C (outputs)
ws    k      n      m     B (weights)
is    k      m      n     A (inputs)
====  =====  =====  ====  ==========

Confirmed against SCALE-Sim 3.0.0 (``systolic_compute_*.set_params``).

A PE that does ``r`` MACs per cycle (``array.rates`` at the GEMM's precision, as
tensor cores and MXUs double their rate at half the width) takes ``r`` elements of
the reduction dimension ``k`` at once: the array maps ``k' = ceil(k / r)`` in place
of ``k``, on its rows (ws, is: a PE row holds ``r`` rows of B or A) or in its stream
(os: a stream step feeds ``r`` elements of ``k``).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
from typing_extensions import assert_never

from accelsim.config.base import Dataflow

K = TypeVar("K", int, np.ndarray)

# Integer codes used by the Numba kernels.
DATAFLOW_CODE = {Dataflow.OS: 0, Dataflow.WS: 1, Dataflow.IS: 2}


def array_dims(
    dataflow: Dataflow, m: int, n: int, k: int, k_per_pe: int = 1
) -> tuple[int, int, int]:
    """Return ``(Sr, Sc, T)``: rows-mapped, columns-mapped and streamed dimensions,
    ``k`` packed ``k_per_pe`` to a PE (:func:`packed_k`)."""
    k = packed_k(k, k_per_pe)
    match dataflow:
        case Dataflow.OS:
            return m, n, k
        case Dataflow.WS:
            return k, n, m
        case Dataflow.IS:
            return k, m, n
        case _:
            assert_never(dataflow)


def packed_k(k: K, k_per_pe: int) -> K:
    """The reduction dimension an array maps when each PE does ``k_per_pe`` MACs per
    cycle: ``ceil(k / k_per_pe)``."""
    return -(-k // k_per_pe)
