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
"""

from __future__ import annotations

from typing_extensions import assert_never

from accelsim.config.base import Dataflow

# Integer codes used by the Numba kernels.
DATAFLOW_CODE = {Dataflow.OS: 0, Dataflow.WS: 1, Dataflow.IS: 2}


def array_dims(dataflow: Dataflow, m: int, n: int, k: int) -> tuple[int, int, int]:
    """Return ``(Sr, Sc, T)``: rows-mapped, columns-mapped and streamed dimensions."""
    match dataflow:
        case Dataflow.OS:
            return m, n, k
        case Dataflow.WS:
            return k, n, m
        case Dataflow.IS:
            return k, m, n
        case _:
            assert_never(dataflow)
