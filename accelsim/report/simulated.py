"""Which processors a step simulated and which it inferred from them
(``summary.json``'s ``symmetry``), when its symmetric data-parallel replicas were
simulated once per role (:mod:`accelsim.timing.symmetry`), or why every processor
of its replicas or ranks was simulated under ``symmetry: auto``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SimulatedProcessors:
    """``simulated``: the processors simulated, one of each role;
    ``inferred_from``: per processor, the simulated processor whose timing it takes,
    or None for a simulated one; ``unsymmetric``: why every processor was simulated
    though ``symmetry: auto`` allowed fewer (empty when some were inferred)."""

    simulated: tuple[int, ...]
    inferred_from: tuple[int | None, ...]
    unsymmetric: str = ""

    @classmethod
    def of(
        cls, copies: tuple[int, ...], processors: int = 0, unsymmetric: str = ""
    ) -> SimulatedProcessors | None:
        """From a trace's ``copies``, its ``processors`` and its ``unsymmetric``
        (None when every processor was simulated and no reason is given)."""
        if not copies:
            if not unsymmetric:
                return None
            return cls(tuple(range(processors)), (None,) * processors, unsymmetric)
        return cls(
            tuple(p for p, q in enumerate(copies) if p == q),
            tuple(None if p == q else q for p, q in enumerate(copies)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "simulated_processors": list(self.simulated),
            "inferred_from": list(self.inferred_from),
            **({"unsymmetric": self.unsymmetric} if self.unsymmetric else {}),
        }

    @classmethod
    def read(cls, summary: Mapping[str, Any]) -> SimulatedProcessors | None:
        """A ``summary.json`` record's ``symmetry`` read back, None where it has none
        (``ValueError`` for a malformed one)."""
        if "symmetry" not in summary:
            return None
        data = summary["symmetry"]
        try:
            return cls(
                tuple(int(p) for p in data["simulated_processors"]),
                tuple(None if q is None else int(q) for q in data["inferred_from"]),
                str(data.get("unsymmetric", "")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"summary: symmetry: malformed (got {data!r})") from error

    def described(self) -> str:
        """``p0, p5 (p1-p4 as p0, p6-p7 as p5)``: the console's words for it (``every
        processor: why`` when none was inferred)."""
        if self.unsymmetric:
            return f"every processor: {self.unsymmetric}"
        inferred = []
        for rep in self.simulated:
            members = [p for p, q in enumerate(self.inferred_from) if q == rep]
            if members:
                inferred.append(f"{_span(members)} as p{rep}")
        return f"{', '.join(f'p{p}' for p in self.simulated)} ({', '.join(inferred)} inferred)"


def _span(members: list[int]) -> str:
    """``p1-p4`` for a run of consecutive processors, else ``p1,p3``."""
    if len(members) > 2 and members == list(range(members[0], members[-1] + 1)):
        return f"p{members[0]}-p{members[-1]}"
    return ",".join(f"p{m}" for m in members)
