"""The package version, recorded in every result file (kept equal to pyproject.toml's)."""

from __future__ import annotations

__version__ = "0.1.0"
