"""The memory models' kernels compiled, and :func:`reserve`, which the compiled event
loop calls to book a transfer on any memory: it goes to the kernel of that memory's
model by its code (one ``@njit`` kernel per model, compiled into the loop).

The loop books on a :class:`~accelsim.timing.loop.records.Dram`: the step's
:class:`accelsim.timing.flat.MemoryTable` (memory ``m`` is of model ``model[m]``, its
parameters start at ``params[param_ptr[m]]`` and its state at ``state[state_ptr[m]]``,
as :meth:`accelsim.timing.memory.Memory.reserve` reads them), the state it changes
(a copy of the table's idle state) and the code of the model all its memories are of.

**One loop per model.**  That code is known when the loop is compiled: the loop takes
it as a :class:`ModelCode` (:func:`model_of`), which Numba types as that literal
integer, so each model gets a loop of its own (compiled when a step of it first runs,
and cached on disk beside the others), in which :func:`reserve` is that model's kernel
alone, as if no other model were registered.  A step whose memories are of several
models runs the loop of :data:`MIXED`, in which :func:`reserve` goes to each memory's
kernel by ``model[m]`` at run time.  Going by code at run time in every loop cost 5
to 9 % of the events per second (docs/performance.md, "Event engines and scaling"),
and a model added to the dispatch would have slowed every other model's steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.timing.flat import MemoryTable
from accelsim.timing.memories import fifo, interleaved, row_buffer
from accelsim.timing.numba_setup import inline, literal

MIXED = -1
"""The model code of a step whose memories are of several models."""

_fifo = inline(fifo.Fifo.reserve)
_interleaved = inline(interleaved.Interleaved.reserve)
_row_buffer = inline(row_buffer.RowBuffer.reserve)


@inline
def reserve(dram: Any, m: int, now: int, n_bytes: int, stream: int, write: bool) -> int:
    """Book ``n_bytes`` of stream class ``stream`` (written, with ``write``) on memory
    ``m`` of ``dram`` at cycle ``now``; the cycle they have left it (they arrive its
    latency later)."""
    table, state = dram.table, dram.state
    code = table.model[m] if dram.model == MIXED else dram.model  # a constant but in MIXED
    p, s = table.param_ptr[m], table.state_ptr[m]
    if code == fifo.CODE:
        return _fifo(table.params, p, state, s, now, n_bytes, stream, write)
    if code == interleaved.CODE:
        return _interleaved(table.params, p, state, s, now, n_bytes, stream, write)
    if code == row_buffer.CODE:
        return _row_buffer(table.params, p, state, s, now, n_bytes, stream, write)
    raise RuntimeError("a memory of no registered model")


class ModelCode:
    """A model's code (or :data:`MIXED`) as the event loop's argument: Numba types it as
    that literal integer (its ``_numba_type_``, which Numba's ``typeof`` reads), so the
    loop is compiled for each code.

    Args:
        code: The code.
    """

    __slots__ = ("_numba_type_", "code")

    def __init__(self, code: int) -> None:
        self.code = code
        self._numba_type_ = literal(code)

    def __index__(self) -> int:  # how Numba takes the value of an integer argument
        return self.code


_CODES: dict[int, ModelCode] = {}


def model_of(table: MemoryTable) -> ModelCode:
    """The code of the model of every memory in ``table``, or :data:`MIXED`."""
    codes = np.unique(table.model)
    code = int(codes[0]) if len(codes) == 1 else MIXED
    if code not in _CODES:
        _CODES[code] = ModelCode(code)
    return _CODES[code]
