"""The settings a step's summary records (``summary.json``'s ``settings``): those that
decide its numbers, each optional one only when set, so default summaries stay as
they were."""

from __future__ import annotations

from accelsim.config.enums import EpilogueFusion, RunMode
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.driver.expert_parallel import expert_degree
from accelsim.driver.parallel import tensor_degree
from accelsim.driver.precision import precision_settings


def step_settings(
    run: RunSpec, hw: HardwareSpec, step: str, engine: str, compiled: bool
) -> dict[str, str]:
    """The settings of a ``step`` of ``run`` on ``hw``, simulated by ``engine``
    (``compiled``: the step lowered as a compiled program)."""
    settings = {
        "step": step,
        "convention": run.timing.convention.value,
        "assignment": run.assignment.value,
        "optimizer": run.optimizer.kind.value,
        "strided_dx": run.lowering.strided_dx.value,
        "psums": run.timing.psums.value,
        "fold_overlap": "true" if run.timing.fold_overlap else "false",
        "workload_variant": run.workload_variant or "",
        "engine": engine,
    }
    fusion = run.lowering.fuse_epilogues
    if (
        fusion is not EpilogueFusion.NONE
    ):  # recorded when set, so default summaries stay as they were
        settings["fuse_epilogues"] = fusion.value
    if compiled:
        settings["compile"] = run.lowering.compile.value
        settings["attention"] = run.lowering.attention.value
    if run.mode is not RunMode.TRAINING:  # the same: a training step's summary is unchanged
        settings["mode"] = run.mode.value
    if tensor_degree(run) > 1:  # the same
        settings["tensor_parallel"] = str(tensor_degree(run))
        if run.parallel is not None and run.parallel.sequence_parallel:
            settings["sequence_parallel"] = "true"
    if expert_degree(run) > 1:  # the same
        settings["expert_parallel"] = str(expert_degree(run))
    settings |= precision_settings(hw, run.precision is not None)  # the same
    return settings
