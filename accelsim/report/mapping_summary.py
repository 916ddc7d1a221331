"""``summary.json``'s ``mapping``: what ``mapping.search`` chose for a step's GEMMs
(present only under a search, so a step without one keeps its record)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from accelsim.mapping.dataflow import DATAFLOW_CODE
from accelsim.timing.unit_codes import UNIT_VECTOR

if TYPE_CHECKING:
    from accelsim.timing.costs import OpCosts

_COUNTS = ("gemms", "moved", "vector_unit", "transposed", "fewest_reads")


@dataclass(frozen=True)
class MappingSummary:
    """Counts of the searched GEMMs (the main array's) of a step.

    Attributes:
        gemms: GEMM ops the search mapped.
        moved: Those whose mapping is not the one without a search (``array.dataflow``,
            as the graph gives it, the run's stream blocking, on the array).
        vector_unit: Those run on the vector unit.
        transposed: Those run as their transpose.
        fewest_reads: Those whose streamed dimension is blocked for the fewest reads.
        dataflows: Those on the array by dataflow (``os``, ``ws``, ``is``).
    """

    gemms: int
    moved: int
    vector_unit: int
    transposed: int
    fewest_reads: int
    dataflows: Mapping[str, int]

    @classmethod
    def of(cls, costs: OpCosts, weights: np.ndarray | None = None) -> MappingSummary | None:
        """The counts of ``costs``' search, None without one (each op counted
        ``weights`` times: the processors whose op it stands for; once without)."""
        chosen = costs.mapping
        if chosen is None:
            return None
        w = np.ones(len(costs.unit), np.int64) if weights is None else weights
        searched = chosen.searched
        flows = chosen.dataflow[searched]

        def count(mask: np.ndarray) -> int:
            return int(w[mask].sum())

        return cls(
            gemms=count(searched),
            moved=count(chosen.moved),
            vector_unit=count(searched & (costs.unit == UNIT_VECTOR)),
            transposed=count(chosen.transposed),
            fewest_reads=count(searched & (chosen.dataflow >= 0) & chosen.fewest_reads),
            dataflows={
                d.value: int(w[searched][flows == code].sum()) for d, code in DATAFLOW_CODE.items()
            },
        )

    def described(self) -> str:
        """The console's line: how many GEMMs moved, to where."""
        flows = ", ".join(f"{count} {name}" for name, count in self.dataflows.items() if count)
        return (
            f"{self.moved} of {self.gemms} GEMMs moved: {self.vector_unit} on the vector unit,"
            f" {flows or 'none'} on the array, {self.transposed} transposed"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``mapping`` record."""
        counts = {name: getattr(self, name) for name in _COUNTS}
        return {**counts, "dataflows": dict(self.dataflows)}

    @classmethod
    def read(cls, data: Any) -> MappingSummary | None:
        """A ``mapping`` record read back (None when absent).

        Raises:
            ValueError: for a record that is no mapping of counts.
        """
        if data is None:
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("dataflows"), Mapping):
            raise ValueError(f"summary: mapping: expected a mapping of counts (got {data!r})")
        counts: dict[str, int] = {}
        for key, value in {**{n: data.get(n) for n in _COUNTS}, **data["dataflows"]}.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"summary: mapping.{key}: expected int (got {value!r})")
            counts[key] = value
        flows = {key: counts.pop(key) for key in list(counts) if key not in _COUNTS}
        return cls(**counts, dataflows=flows)
