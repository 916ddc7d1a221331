"""Exception hierarchy for accelsim.

Every layer of the data flow raises one of these; only :mod:`accelsim.cli`
turns them into messages and exit codes.  Errors caused by the user's input
(`InputError` and its subclasses) carry a list of :class:`Problem` records, each
rendered as ``file: key.path: problem (got value)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_NO_VALUE = object()

MAX_COUNT = 2**62
"""Largest count of one op (its MACs, vector ops, bytes) and largest cycle of a step:
counts are ``int64`` per op and per event, and the sum of two such counts (an event's
start and its duration) still fits ``int64`` (2^63 - 1).  A step's totals are Python
integers (:mod:`accelsim.counts`), never refused."""

MAX_COUNT_TEXT = "2^62"
""":data:`MAX_COUNT` as messages write it."""


@dataclass(frozen=True)
class Problem:
    """One problem found in one input file.

    Attributes:
        file: The input file (or ``--set``) the problem is in.
        path: Dotted key path inside that file, e.g. ``layers[3].kernel``; empty for
            the whole file.
        message: What is wrong, in words.
        value: The offending value, or the module-level sentinel when there is none.
    """

    file: str
    path: str
    message: str
    value: Any = _NO_VALUE

    def __str__(self) -> str:
        """One line: control characters escaped, a long value cut to :data:`MAX_SHOWN` chars."""
        where = f"{self.file}: {self.path}" if self.path else self.file
        text = f"{printable(where)}: {printable(self.message)}"
        if self.value is not _NO_VALUE:
            text += f" (got {shown(repr(self.value))})"
        return text


MAX_SHOWN = 200
"""Characters of an offending value (or a path) a message shows."""


def shown(text: str) -> str:
    """``text`` as a message shows it: control characters escaped, cut to :data:`MAX_SHOWN`
    characters (saying how long it was)."""
    text = printable(text)
    if len(text) > MAX_SHOWN:
        text = f"{text[:MAX_SHOWN]}... ({len(text):,} characters)"
    return text


def printable(text: str) -> str:
    """``text`` with every non-printable character (newline, NUL, ``\\u2028``, a
    non-UTF-8 file name's ``\\udcff``, ...) escaped as Python writes it (``\\n``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class AccelsimError(Exception):
    """Base class of every error raised by accelsim."""


class InputError(AccelsimError):
    """Bad user input: one or more :class:`Problem` records.

    Args:
        problems: The problems found; at least one.
    """

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("InputError needs at least one problem")
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, file: str, path: str, message: str, value: Any = _NO_VALUE) -> InputError:
        """Build an error that holds one problem."""
        return cls([Problem(file, path, message, value)])


class ConfigError(InputError):
    """A configuration file (hardware, run, energy) is malformed or invalid."""


class WorkloadError(InputError):
    """A workload's layer table is inconsistent (shapes, unknown inputs, ...)."""


class LimitError(AccelsimError):
    """A simulated step would end after :data:`MAX_COUNT` cycles: its inputs are out of range.

    Raised inside the engine, where the input file is unknown; the message is
    what is wrong and what to change.
    """


class OutputError(AccelsimError):
    """Results cannot be written (e.g. the run directory exists without --force)."""


class ClusterError(AccelsimError):
    """A sweep's cluster cannot run its points (every Dask worker gone): the points
    finished so far are stored, and the same command resumes once workers are back."""


class WorkerError(ClusterError):
    """A local worker process died (killed by a signal: SIGKILL is what the kernel
    sends when memory runs out): the message says how; the sweep's points finished so
    far are stored, and the same command resumes."""


class SimulationError(AccelsimError):
    """The engine reached an inconsistent state: an internal bug, not bad input."""


class GraphError(SimulationError):
    """A technique's rewrite left an ill-formed step graph
    (:func:`accelsim.graph.check.graph_problems`): a bug, or a combination of
    techniques their checks should have refused; the message names the technique
    and the step kind."""
