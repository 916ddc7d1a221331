"""Registry of techniques: names -> plug-in classes, and loading them from a run file."""

from __future__ import annotations

from typing import Any

from accelsim.config.validate import join_path, suggest, validate_data
from accelsim.errors import ConfigError, Problem
from accelsim.techniques.approximate_dropout import ApproximateDropout
from accelsim.techniques.base import Technique
from accelsim.techniques.gradient_prediction import GradientPrediction
from accelsim.techniques.gradient_skipping import GradientSkipping
from accelsim.techniques.optimizer_fusion import OptimizerFusion
from accelsim.techniques.pipelining import GPipe, LayerPipe, PipeDream

REGISTRY: dict[str, type[Technique]] = {
    cls.name: cls
    for cls in (
        GradientPrediction,
        GradientSkipping,
        GPipe,
        PipeDream,
        LayerPipe,
        OptimizerFusion,
        ApproximateDropout,
    )
}


def load_techniques(sections: dict[str, dict[str, Any] | None], file: str) -> list[Technique]:
    """Instantiate the techniques a run file enables, in the order it lists them.

    Raises:
        ConfigError: for unknown names (listing the registered ones), invalid
            configs (at ``techniques.<name>.<key>``) and conflicting combinations.
    """
    problems: list[Problem] = []
    techniques: list[Technique] = []
    for name, data in sections.items():
        where = join_path("techniques", name)
        cls = REGISTRY.get(name)
        if cls is None:
            problems.append(
                Problem(file, where, "unknown technique; " + suggest(name, list(REGISTRY)), name)
            )
            continue
        try:
            config = validate_data(cls.Config, data if data is not None else {}, file, prefix=where)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        techniques.append(cls(config, file))
    names = {t.name for t in techniques}
    for t in techniques:
        clash = sorted((t.conflicts - {t.name}) & names)
        if clash:
            problems.append(
                Problem(
                    file,
                    join_path("techniques", t.name),
                    f"cannot be combined with {', '.join(clash)}",
                    sorted(names),
                )
            )
    if problems:
        raise ConfigError(problems)
    return techniques


def compose_problems(techniques: list[Technique], file: str) -> list[Problem]:
    """Why these techniques cannot run together: two that define step kinds, or two
    that place the step on processors."""
    problems = []
    for what, owners in (
        ("define their own step kinds", [t.name for t in techniques if t.step_kinds()]),
        ("place the step on processors", [t.name for t in techniques if t.places()]),
    ):
        if len(owners) > 1:
            problems.append(
                Problem(file, "techniques", f"at most one technique may {what}", owners)
            )
    return problems
