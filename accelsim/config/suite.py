"""Suite spec: a named, ordered set of workloads run under one run file.

Loaded from ``configs/suites/*.yaml``; workload paths are relative to the suite file.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from accelsim.config.base import Name, PathName, RuleViolation, Spec


class SuiteModel(Spec):
    """One model of a suite: a short name and its workload file."""

    name: PathName = Field(description="The model's name: its directory and table row.")
    workload: Name = Field(description="The workload file, relative to the suite file.")


class SuiteSpec(Spec):
    """An ordered list of models."""

    name: Name = Field(description="The suite's name.")
    description: str = Field(default="", description="Free text.")
    models: list[SuiteModel] = Field(min_length=1, description="The models, in run order.")

    @model_validator(mode="after")
    def _unique_names(self) -> SuiteSpec:
        seen: set[str] = set()
        for i, model in enumerate(self.models):
            if model.name in seen:
                raise RuleViolation(f"models[{i}].name", "duplicate model name", model.name)
            seen.add(model.name)
        return self
