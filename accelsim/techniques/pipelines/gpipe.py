"""GPipe (Huang et al., NeurIPS 2019): ``micro_batches`` per mini-batch; all forwards,
then all backwards, then the update; the next mini-batch waits for it (synchronous)."""

from __future__ import annotations

from accelsim.report.training import Source
from accelsim.techniques.pipelines.config import GPipeConfig
from accelsim.techniques.pipelines.plan import Plan
from accelsim.techniques.pipelines.schedule import Schedule
from accelsim.techniques.provenance import Origin


class GPipe(Schedule[GPipeConfig]):
    """GPipe: micro-batched, all forwards then all backwards, synchronous updates."""

    name = "gpipe"
    synchronous = True

    def defaults(self) -> dict[str, Origin]:
        return {
            **super().defaults(),
            "micro_batches": (
                Source.OURS,
                "our choice: 4 micro-batches (GPipe splits each mini-batch into several)",
            ),
        }

    def in_flight(self, stage: int, plan: Plan) -> int:
        return 1

    def position(self, stage: int, plan: Plan, j: int, backward: bool) -> int:
        return 2 * j + int(backward)

    def weight_versions(self, stage: int, plan: Plan) -> int:
        return 0
