"""GEMM ops of a graph -> a structure-of-arrays table for the timing kernels.

One row per GEMM op: its ``(Sr, Sc, T)`` array mapping, its shape, its operand
footprints and word sizes, and whether each operand stays on chip.  The fold
arithmetic itself runs in :mod:`accelsim.timing.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.mapping.dataflow import DATAFLOW_CODE, array_dims
from accelsim.mapping.units import ArrayUnit
from accelsim.graph.ops import GemmOp, OpGraph


@dataclass(frozen=True)
class GemmTable:
    """Per-GEMM arrays (int64 unless noted), aligned with ``op_index``."""

    op_index: np.ndarray
    dataflow: np.ndarray
    sr: np.ndarray
    sc: np.ndarray
    t: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    count: np.ndarray
    a_footprint: np.ndarray
    b_footprint: np.ndarray
    a_word: np.ndarray
    b_word: np.ndarray
    c_word: np.ndarray
    a_on_chip: np.ndarray  # bool
    b_on_chip: np.ndarray  # bool
    c_on_chip: np.ndarray  # bool

    def __len__(self) -> int:
        return int(self.op_index.shape[0])


def tabulate(graph: OpGraph, unit: ArrayUnit) -> GemmTable:
    """Build the :class:`GemmTable` of the GEMM ops of ``graph`` that run on ``unit``."""
    dataflow = unit.array.dataflow
    gemms = [op for op in graph.ops if isinstance(op, GemmOp) and op.unit == unit.name]
    dims = [array_dims(dataflow, op.m, op.n, op.k) for op in gemms]

    def ints(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64).reshape(len(values))

    def flags(values: list[bool]) -> np.ndarray:
        return np.asarray(values, dtype=np.bool_).reshape(len(values))

    on_chip = graph.on_chip
    return GemmTable(
        op_index=ints([op.op_id for op in gemms]),
        dataflow=ints([DATAFLOW_CODE[dataflow]] * len(gemms)),
        sr=ints([d[0] for d in dims]),
        sc=ints([d[1] for d in dims]),
        t=ints([d[2] for d in dims]),
        m=ints([op.m for op in gemms]),
        n=ints([op.n for op in gemms]),
        k=ints([op.k for op in gemms]),
        count=ints([op.count for op in gemms]),
        a_footprint=ints([op.a_elements for op in gemms]),
        b_footprint=ints([op.b_elements for op in gemms]),
        a_word=ints([op.a.word_bytes for op in gemms]),
        b_word=ints([op.b.word_bytes for op in gemms]),
        c_word=ints([op.c.word_bytes for op in gemms]),
        a_on_chip=flags([op.a.name in on_chip for op in gemms]),
        b_on_chip=flags([op.b.name in on_chip for op in gemms]),
        c_on_chip=flags([op.c.name in on_chip for op in gemms]),
    )
