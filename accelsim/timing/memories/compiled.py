"""The memory models' kernels compiled, and :func:`reserve`, which the compiled event
loop calls to book a transfer on any memory: it dispatches to the kernel of that
memory's model by its code (one ``@njit`` kernel per model, compiled into the loop).

The loop keeps every memory's parameters and state in the arrays of a
:class:`accelsim.timing.flat.MemoryTable` (its state a copy it changes): memory ``m`` is of model
``model[m]``, its parameters start at ``params[param_ptr[m]]`` and its state at
``state[state_ptr[m]]``, as :meth:`accelsim.timing.memory.Memory.reserve` reads them.
"""

from __future__ import annotations

from typing import Any

from accelsim.timing.memories import fifo, interleaved, row_buffer
from accelsim.timing.numba_setup import inline

_fifo = inline(fifo.Fifo.reserve)
_interleaved = inline(interleaved.Interleaved.reserve)
_row_buffer = inline(row_buffer.RowBuffer.reserve)


@inline
def reserve(dram: Any, m: int, now: int, n_bytes: int, stream: int, write: bool) -> int:
    """Book ``n_bytes`` of stream class ``stream`` (written, with ``write``) on memory
    ``m`` at cycle ``now``; the cycle they have left it (they arrive its latency
    later)."""
    code, p, s = dram.model[m], dram.param_ptr[m], dram.state_ptr[m]
    if code == fifo.CODE:
        return _fifo(dram.params, p, dram.state, s, now, n_bytes, stream, write)
    if code == interleaved.CODE:
        return _interleaved(dram.params, p, dram.state, s, now, n_bytes, stream, write)
    if code == row_buffer.CODE:
        return _row_buffer(dram.params, p, dram.state, s, now, n_bytes, stream, write)
    raise RuntimeError("a memory of no registered model")
