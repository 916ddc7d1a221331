"""Whether a run without a pipeline would place too many copies of its step, found
before placing them (:func:`~accelsim.driver.pipeline.refuse_copies`, which
:meth:`~accelsim.driver.run._Run.place` applies as it places): the plan search's
filter refuses such a plan as the run's checks refuse one."""

from __future__ import annotations

from accelsim.driver import pipeline as pipelines
from accelsim.driver.inputs import RunInputs
from accelsim.driver.run import _Run, rewritten_step
from accelsim.errors import ConfigError


def refuse_copies(inputs: RunInputs) -> None:
    """Refuses the run, without a pipeline, if its copies of the step, one a processor,
    would make more ops than a run places.

    Raises:
        ConfigError: naming ``hardware.processors``, blamed where the run wrote it.
    """
    if pipelines.pipeline_degree(inputs.run) > 1:
        return
    local = _Run(inputs).local_batch()
    try:
        pipelines.refuse_copies(
            inputs.hardware, inputs.source, lambda: len(rewritten_step(inputs, local).ops)
        )
    except ConfigError as exc:
        raise ConfigError(inputs.run_file.blame(exc.problems)) from None
