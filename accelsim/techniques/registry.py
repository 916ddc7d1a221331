"""Registry of techniques: names -> plug-in classes, and loading them from a run file.

A technique's module is imported only when a run file names it, so a run
without techniques (and ``import accelsim``) loads none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

from accelsim.config.validate import join_path, suggest, validate_data
from accelsim.errors import ConfigError, Problem
from accelsim.techniques.base import Technique, kind_definers, placers
from accelsim.techniques.order import composition_order

REGISTRY: dict[str, str] = {
    "approximate_dropout": "accelsim.techniques.dropout.technique:ApproximateDropout",
    "gpipe": "accelsim.techniques.pipelines.gpipe:GPipe",
    "gradient_prediction": "accelsim.techniques.prediction.technique:GradientPrediction",
    "gradient_skipping": "accelsim.techniques.skipping.technique:GradientSkipping",
    "layerpipe": "accelsim.techniques.pipelines.layerpipe:LayerPipe",
    "optimizer_fusion": "accelsim.techniques.fusion.technique:OptimizerFusion",
    "pipedream": "accelsim.techniques.pipelines.pipedream:PipeDream",
    "recomputation": "accelsim.techniques.recomputation.technique:Recomputation",
}
"""Each technique's name in run files -> ``module:Class`` of its plug-in.  The order
they compose in is their own declaration (:mod:`accelsim.techniques.order`)."""


def technique_class(name: str) -> type[Technique[Any]] | None:
    """The plug-in class registered as ``name`` (importing its module), or ``None``."""
    if name not in REGISTRY:
        return None
    module, cls = REGISTRY[name].split(":")
    found: type[Technique[Any]] = getattr(importlib.import_module(module), cls)
    return found


def load_techniques(sections: dict[str, dict[str, Any] | None], file: str) -> list[Technique[Any]]:
    """Instantiate the techniques a run file enables, in the order they compose
    (:func:`~accelsim.techniques.order.composition_order`, whatever order the file
    lists them in).

    Raises:
        ConfigError: for unknown names (listing the registered ones), invalid
            configs (at ``techniques.<name>.<key>``), conflicting combinations and
            declared orders that form a cycle.
    """
    problems: list[Problem] = []
    techniques: list[Technique[Any]] = []
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
    return composition_order(techniques, file)


def compose_problems(techniques: list[Technique[Any]], file: str) -> list[Problem]:
    """Why these techniques cannot run together: two that define step kinds, or two
    that place the step on processors."""
    problems = []
    for what, owners in (
        ("define their own step kinds", [t.name for t in kind_definers(techniques)]),
        ("place the step on processors", [t.name for t in placers(techniques)]),
    ):
        if len(owners) > 1:
            problems.append(
                Problem(file, "techniques", f"at most one technique may {what}", owners)
            )
    return problems
