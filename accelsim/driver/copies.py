"""Whether a run without a pipeline would place too many copies of its step, found
before placing them (:func:`~accelsim.driver.pipeline.refuse_copies`, which
:meth:`~accelsim.driver.run._Run.place` applies as it places): the plan search's
filter refuses such a plan as the run's checks refuse one."""

from __future__ import annotations

from accelsim.config.run import AssignmentPolicy
from accelsim.driver import pipeline as pipelines
from accelsim.driver.inputs import RunInputs
from accelsim.driver.run import _Run, rewritten_step
from accelsim.errors import ConfigError


def refuse_copies(inputs: RunInputs) -> None:
    """Refuses the run, data-parallel without a pipeline or a placing technique, if its
    copies of the step, one a processor, would make more ops than a run places.

    Raises:
        ConfigError: naming ``hardware.processors``, blamed where the run wrote it.
    """
    run = inputs.run
    if pipelines.pipeline_degree(run) > 1 or run.assignment is not AssignmentPolicy.DATA_PARALLEL:
        return
    sim = _Run(inputs)
    if sim.placer is not None:
        return
    local = sim.local_batch()
    try:
        pipelines.refuse_copies(
            inputs.hardware, inputs.source, lambda: len(rewritten_step(inputs, local).ops)
        )
    except ConfigError as exc:
        raise ConfigError(inputs.run_file.blame(exc.problems)) from None
