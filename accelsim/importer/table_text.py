"""An imported layer table as the text of a workload file: a header comment, then
one flow mapping per layer, as the hand-written tables in ``workloads/`` are."""

from __future__ import annotations

import json
import re
from typing import Any

PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})
"""Words YAML would read as something other than a string."""


def workload_text(header: list[str], top: dict[str, Any], layers: list[dict[str, Any]]) -> str:
    """``header`` lines as comments, ``top``'s keys, then ``layers:`` one per line."""
    lines = [f"# {line}".rstrip() for line in header]
    lines += [f"{key}: {_value(value)}" for key, value in top.items()]
    lines.append("layers:")
    lines += [f"  - {_value(layer)}" for layer in layers]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        plain = PLAIN.fullmatch(value) and value.lower() not in YAML_WORDS
        return value if plain else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML form for {type(value).__name__}")
