"""Registry of techniques: names -> plug-in classes, and loading them from a run file.

A technique's module is imported only when a run file names it, so a run
without techniques (and ``import accelsim``) loads none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

from accelsim.config.validate import join_path, suggest, validate_data
from accelsim.errors import ConfigError, Problem
from accelsim.techniques.base import Technique

# name -> (module under accelsim.techniques, class), in the order techniques compose:
# a run's techniques are kept in this order whatever order its file lists them in, so
# the order of the file never changes a number.  Rewrites then run by RewritePhase
# (work removed, then added, then fused), and within a phase in this order:
# approximate dropout before gradient skipping, so skipping draws its groups from
# those the step's dropout pattern kept (a dropped neuron has no gradient to skip).
REGISTRY: dict[str, tuple[str, str]] = {
    "approximate_dropout": ("approximate_dropout", "ApproximateDropout"),
    "gradient_skipping": ("gradient_skipping", "GradientSkipping"),
    "gradient_prediction": ("gradient_prediction", "GradientPrediction"),
    "recomputation": ("recomputation", "Recomputation"),
    "optimizer_fusion": ("optimizer_fusion", "OptimizerFusion"),
    "gpipe": ("pipelining", "GPipe"),
    "pipedream": ("pipelining", "PipeDream"),
    "layerpipe": ("layerpipe", "LayerPipe"),
}


def technique_class(name: str) -> type[Technique] | None:
    """The plug-in class registered as ``name`` (importing its module), or ``None``."""
    if name not in REGISTRY:
        return None
    module, cls = REGISTRY[name]
    found: type[Technique] = getattr(importlib.import_module(f"accelsim.techniques.{module}"), cls)
    return found


def load_techniques(sections: dict[str, dict[str, Any] | None], file: str) -> list[Technique]:
    """Instantiate the techniques a run file enables, in :data:`REGISTRY` order (the
    order they compose in, whatever order the file lists them in).

    Raises:
        ConfigError: for unknown names (listing the registered ones), invalid
            configs (at ``techniques.<name>.<key>``) and conflicting combinations.
    """
    problems: list[Problem] = []
    techniques: list[Technique] = []
    for name, data in sections.items():
        where = join_path("techniques", name)
        cls = technique_class(name)
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
    order = list(REGISTRY)
    return sorted(techniques, key=lambda t: order.index(t.name))


def compose_problems(techniques: list[Technique], file: str) -> list[Problem]:
    """Why these techniques cannot run together: two that define step kinds, or two
    that place the step on processors."""
    problems = []
    for what, owners in (
        ("define their own step kinds", [t.name for t in techniques if t.defines_kinds()]),
        ("place the step on processors", [t.name for t in techniques if t.places()]),
    ):
        if len(owners) > 1:
            problems.append(
                Problem(file, "techniques", f"at most one technique may {what}", owners)
            )
    return problems
