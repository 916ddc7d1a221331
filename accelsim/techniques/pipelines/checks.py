"""What a pipeline schedule's settings cannot be with a run's hardware, batch and
optimizer: the load-time checks every schedule makes."""

from __future__ import annotations

from collections.abc import Callable

from accelsim.errors import Problem
from accelsim.techniques.base import LoadContext
from accelsim.techniques.pipelines.config import MAX_MINI_BATCHES, PipelineConfig
from accelsim.units import plural


def schedule_problems(
    cfg: PipelineConfig,
    load: LoadContext,
    depth: tuple[int, int],
    deepest: int,
    source: str,
    where: Callable[[str], str],
) -> list[Problem]:
    """Problems of a schedule's ``cfg`` in the run ``load`` describes.

    Args:
        depth: The schedule's stages and the fewest mini-batches that fill them and
            measure a steady state.
        deepest: The most stages whose fill fits in the mini-batches' limit.
        source: The run file; ``where`` gives a setting's key path in it.
    """
    processors, batch = load.hardware.processors, load.run.batch_size
    problems = []
    stages, needed = depth
    if cfg.mini_batches is not None and cfg.mini_batches < needed:
        problems.append(
            Problem(
                source,
                where("mini_batches"),
                f"too few to fill {stages} stages and measure a steady state (needs >= {needed})",
                cfg.mini_batches,
            )
        )
    if cfg.mini_batches is None and needed > MAX_MINI_BATCHES:
        problems.append(
            Problem(
                source,
                where("stages"),
                f"{stages} stages need {needed} mini-batches to fill and measure a steady"
                f" state, more than the limit of {MAX_MINI_BATCHES:,}; set stages to at"
                f" most {deepest}",
                stages,
            )
        )
    if cfg.stages is not None and cfg.stages > processors:
        problems.append(
            Problem(
                source,
                where("stages"),
                f"more stages than the hardware's {processors} {plural(processors, 'processor')}",
                cfg.stages,
            )
        )
    if batch % cfg.micro_batches:
        problems.append(
            Problem(
                source,
                where("micro_batches"),
                f"must divide the batch size {batch}",
                cfg.micro_batches,
            )
        )
    if load.run.optimizer.clip_global_norm is not None:
        problems.append(
            Problem(
                source,
                "optimizer.clip_global_norm",
                "global-norm clipping across pipeline stages is not modelled",
                load.run.optimizer.clip_global_norm,
            )
        )
    return problems
