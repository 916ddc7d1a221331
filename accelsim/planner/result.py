"""What a simulated plan gives: its step time and breakdown, tokens per second per chip,
the model FLOPs utilisation, its memory per chip, and the fastest plan of a search.

MFU is model FLOPs per second over peak: ``6 x parameters x tokens`` per step (the
forward pass's 2 and the backward pass's 4 FLOPs per parameter and token: Kaplan et al.
2020, section 2.1; PaLM, Chowdhery et al. 2022, appendix B, without its attention term;
Megatron-LM's count, Narayanan et al. 2021, adds attention's, this one does not), over
``chips x 2 x`` the arrays' MACs per cycle ``x`` the clock.  Recomputation is not
model work, so a plan that recomputes has a lower MFU than its arrays' utilisation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.config.hardware import HardwareSpec
from accelsim.errors import InputError
from accelsim.mapping.memory import MemoryBreakdown
from accelsim.planner.candidates import Candidate
from accelsim.sweep.pareto import pareto_front
from accelsim.sweep.plan import SweepPlan
from accelsim.sweep.store import Store

RECOMPUTATION_OWNER = "recomputation"
"""The owner of the ops the recomputation technique adds (``summary.json``'s ``owners``)."""


@dataclass(frozen=True)
class Fitting:
    """A candidate that fits, with its memory per chip."""

    candidate: Candidate
    memory: MemoryBreakdown


@dataclass(frozen=True)
class Scale:
    """What turns a step time into throughput and MFU: the model's parameters, the
    tokens of one step, the chips and their peak MACs per second each."""

    parameters: int
    tokens_per_step: int
    chips: int
    peak_macs_per_second: float

    @classmethod
    def of(cls, parameters: int, tokens_per_step: int, hw: HardwareSpec) -> Scale:
        return cls(parameters, tokens_per_step, hw.processors, hw.array.pes * hw.clock_mhz * 1e6)

    def mfu(self, step_seconds: float) -> float:
        """Model FLOPs per second over the chips' peak FLOPs per second."""
        model_flops = 6 * self.parameters * self.tokens_per_step
        return model_flops / step_seconds / (self.chips * 2 * self.peak_macs_per_second)


@dataclass(frozen=True)
class Evaluated:
    """A simulated plan and its ``summary.json``."""

    candidate: Candidate
    memory: MemoryBreakdown
    summary: Mapping[str, Any]

    @property
    def step_cycles(self) -> int:
        """The plan's step: a recomputing plan's the recomputation technique's step
        (``training``'s, not the baseline step the summary's tables hold), a pipeline
        plan's the composed step (recomputation inside its passes)."""
        training = self._recomputing()
        if training is None:
            return int(self.summary["total_cycles"])
        return int(training["steps"][RECOMPUTATION_OWNER]["cycles"])

    def _recomputing(self) -> Mapping[str, Any] | None:
        """The ``training`` section of a plan that recomputes outside a pipeline (whose
        composed step holds its recomputation), else None."""
        if "pipeline" in self.summary:
            return None
        training: Mapping[str, Any] | None = self.summary.get("training")
        return training

    @property
    def step_seconds(self) -> float:
        return self.step_cycles * 1e-6 / float(self.summary["clock_mhz"])

    @property
    def memory_bytes(self) -> int:
        return self.memory.total_bytes

    def breakdown(self, scale: Scale) -> dict[str, Any]:
        """The plan, its step time and what it is made of, throughput, MFU and memory."""
        seconds_per_cycle = 1e-6 / float(self.summary["clock_mhz"])
        exposed = {
            kind: entry["exposed_cycles"] * seconds_per_cycle
            for kind, entry in self.summary["communication"].items()
            if entry["cycles"]
        }
        return {
            "plan": self.candidate.label,
            "data": self.candidate.data,
            **dict(self.candidate.parallel),
            "recompute": self.candidate.recompute,
            "step_cycles": self.step_cycles,
            "step_seconds": self.step_seconds,
            "tokens_per_second_per_chip": scale.tokens_per_step / self.step_seconds / scale.chips,
            "mfu": scale.mfu(self.step_seconds),
            "compute_seconds": max(self.summary["busy_cycles"]["array"]) * seconds_per_cycle,
            "exposed_communication_seconds": exposed,
            "recomputation_seconds": self._recomputed_cycles() * seconds_per_cycle,
            "memory": self.memory.to_dict(),
            **_pipeline_breakdown(self.summary.get("pipeline"), seconds_per_cycle),
        }

    def _recomputed_cycles(self) -> float:
        """The recomputed ops' array cycles a chip (the mean over the chips) of a
        recomputing plan's step; 0 without recomputation."""
        training = self._recomputing()
        if training is None:
            return 0.0
        by_kind = training["sections"][RECOMPUTATION_OWNER]["by_kind"][RECOMPUTATION_OWNER]
        return float(by_kind["recompute_busy_cycles"].get("array", 0.0)) / int(
            self.summary["processors"]
        )


def _pipeline_breakdown(
    section: Mapping[str, Any] | None, seconds_per_cycle: float
) -> dict[str, Any]:
    """A pipeline plan's compute, bubble, recomputation (the most of a stage's backward
    passes, the recomputed work simulated alone) and exposed communication (its
    tensor-parallel collectives are inside its passes' compute; under ZeRO each stage's
    reduce-scatter past the flush and its whole all-gather, after its update), from its ``pipeline``
    section, in place of the one micro-batch the rest of its summary holds; nothing
    without a pipeline."""
    if section is None:
        return {}
    stages = section["stages"]

    def most(key: str) -> float:
        return float(max(s[key] for s in stages)) * seconds_per_cycle

    exposed = {"pipeline transfers": most("exposed_transfer_cycles")}
    if "zero" in section:  # reduce-scattered, the shard updated, then all-gathered
        exposed["data-parallel reduce_scatter"] = most("exposed_all_reduce_cycles")
        exposed["data-parallel all_gather"] = most("all_gather_cycles")
    else:
        exposed["data-parallel all_reduce"] = most("exposed_all_reduce_cycles")
    return {
        "compute_seconds": most("compute_cycles"),
        "bubble_seconds": most("bubble_cycles"),
        "recomputation_seconds": most("recomputed_cycles"),
        "exposed_communication_seconds": exposed,
    }


def evaluated(store: Path, plan: SweepPlan, fitting: Sequence[Fitting]) -> list[Evaluated]:
    """The plans the store holds finished, in the sweep's order (``fitting`` are the
    points' plans, one each).

    Raises:
        InputError: for a point whose ``summary.json`` cannot be read.
    """
    with Store(store) as db:
        ok = {row["identity"] for row in db.rows() if row.get("status") == "ok"}
    result = []
    for point, plan_fits in zip(plan.points, fitting, strict=True):
        if point.task.identity not in ok:
            continue
        path = store / "points" / point.task.identity / "summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError.single(
                str(path), "", "cannot read the point's summary", str(exc)
            ) from None
        result.append(Evaluated(plan_fits.candidate, plan_fits.memory, summary))
    return result


def fastest(plans: Sequence[Evaluated]) -> Evaluated:
    """The plan of the least step time (the first in the search's order on a tie)."""
    return min(plans, key=lambda e: e.step_seconds)


def front(plans: Sequence[Evaluated]) -> list[int]:
    """The plans no other is both faster and smaller than (step time, memory per chip)."""
    return pareto_front([(e.step_seconds, float(e.memory_bytes)) for e in plans])
