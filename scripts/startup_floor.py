#!/usr/bin/env python3
"""The start-up floor of a validated command, with no accelsim code: what every
``accelsim`` command that reads a YAML file pays before it does anything of its own.

It imports NumPy, PyYAML and pydantic, defines one pydantic model with the settings
and constrained fields accelsim's specs use (frozen, strict, no unknown keys,
deferred build, ``Field(gt=..., le=...)``), and validates one small YAML mapping
read with PyYAML's C loader, as accelsim reads its files.  Validating is part of
the floor: pydantic builds the model's schema then and loads its plug-in
machinery (``importlib.metadata``) on the first validation of a process.  It
collects garbage as the ``accelsim`` command line does (``GC_ALLOCATIONS`` from
the start, what is left frozen at the end), so that no command can beat it by
that alone.  ``scripts/bench.py`` times it beside the commands it bounds.
"""

from __future__ import annotations

import gc

GC_ALLOCATIONS = 100_000
"""As ``accelsim.collections_policy.GC_ALLOCATIONS``
(``tests/architecture/test_startup.py`` checks it)."""
gc.set_threshold(GC_ALLOCATIONS, *gc.get_threshold()[1:])

from typing import Annotated  # noqa: E402  (after the collector's setting, as in accelsim)

import numpy  # noqa: E402, F401  (imported for its start-up cost, as every command does)
import yaml  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

PositiveInt = Annotated[int, Field(gt=0, le=2**31 - 1)]


class Array(BaseModel):
    """A stand-in spec, built like accelsim's."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)
    rows: PositiveInt
    cols: PositiveInt


Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Array.model_validate(yaml.load("{rows: 128, cols: 128}", Loader=Loader))
gc.freeze()
