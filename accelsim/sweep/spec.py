"""Sweep spec: a base run file and the axes of a design-point sweep.

Loaded from a sweep YAML file; paths (``base``, ``suite``, ``workload`` values)
are relative to the sweep file.  Axes are dotted keys that ``--set`` accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from accelsim.config.base import Name, PathName, RuleViolation, Spec
from accelsim.sweep.schema import column_key

# The axis a suite adds: one point per model, named as in the suite file.
MODEL_AXIS = "model"


class SweepSpec(Spec):
    """A sweep file.

    ``grid`` axes combine as a Cartesian product (first key slowest); each
    ``zip`` group is one more dimension whose keys advance together (equal-length
    lists); ``suite`` (optionally narrowed by ``models``) adds a ``model`` axis
    first.  ``set`` fixes keys for every point; a point that matches every key of
    one ``exclude`` entry is dropped.  ``layers`` also keeps each point's
    ``layers.csv``.  ``name`` follows the rule of run names (it names a directory);
    two axes may not differ only in letter case (the store's SQLite columns would
    not tell them apart).
    """

    name: PathName = Field(description="The sweep's directory below --out.")
    description: str = Field(default="", description="Free text.")
    base: Name = Field(
        description="The run file every point starts from, relative to the sweep file."
    )
    suite: Name | None = Field(
        default=None,
        description="A suite file (relative to the sweep file) that adds a first axis"
        " model, one value per model.",
    )
    models: list[Name] | None = Field(
        default=None, min_length=1, description="Keep only these models of the suite."
    )
    set: dict[str, Any] = Field(
        default_factory=dict, description="Keys fixed for every point, as --set takes them."
    )
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Axes combined as a Cartesian product, the first key slowest: any key"
        " --set takes, each with its list of values.",
    )
    zip: list[dict[str, list[Any]]] = Field(
        default_factory=list,
        description="Groups of keys that advance together (lists of equal length); each"
        " group is one more dimension of the product.",
    )
    exclude: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Partial points: a point whose axes match every key of one entry is dropped.",
    )
    layers: bool = Field(default=False, description="Also keep each point's layers.csv.")

    @model_validator(mode="after")
    def _axes(self) -> SweepSpec:
        if self.models is not None and self.suite is None:
            raise RuleViolation("models", "needs a suite to choose from", self.models)
        seen: set[str] = {MODEL_AXIS} if self.suite is not None else set()
        columns = {column_key(key): key for key in seen}
        groups = [("grid", {k: v}) for k, v in self.grid.items()]
        groups += [(f"zip[{i}]", group) for i, group in enumerate(self.zip)]
        for where, group in groups:
            lengths = {len(values) for values in group.values()}
            if not group:
                raise RuleViolation(where, "expected at least one key", group)
            if len(lengths) > 1:
                raise RuleViolation(where, "the lists of a zip group differ in length", group)
            for key, values in group.items():
                if not values:
                    raise RuleViolation(f"{where}.{key}", "expected at least one value", values)
                if key in seen:
                    raise RuleViolation(f"{where}.{key}", "axis given twice", key)
                if key in self.set:
                    raise RuleViolation(f"{where}.{key}", "also fixed by 'set'", key)
                other = columns.setdefault(column_key(key), key)
                if other != key:
                    raise RuleViolation(
                        f"{where}.{key}",
                        f"differs from axis '{other}' only in letter case, which the store's"
                        " columns do not tell apart",
                        key,
                    )
                seen.add(key)
        for i, entry in enumerate(self.exclude):
            for key in entry:
                if key not in seen:
                    raise RuleViolation(f"exclude[{i}].{key}", "not an axis of the sweep", key)
        return self

    def fastest(self) -> list[str]:
        """The axis keys of the dimension that varies fastest in sweep order (the last
        zip group's, else the last grid key; none for a sweep of models alone)."""
        if self.zip:
            return list(self.zip[-1])
        return list(self.grid)[-1:]

    def axes(self) -> list[str]:
        """Every axis key, in the order of the point's dimensions."""
        keys = [MODEL_AXIS] if self.suite is not None else []
        keys += list(self.grid)
        for group in self.zip:
            keys += list(group)
        return keys
