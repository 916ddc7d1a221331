"""An imported layer table as the text of a workload file: a header comment, then
one flow mapping per layer, as the hand-written tables in ``workloads/`` are.

Whatever a model's file name, names and strings hold, each header line stays one
comment line and each string one scalar: non-printable characters (line breaks
``\\n``, ``\\r``, ``\\x85``, ``\\u2028``, escapes, NUL) are escaped, and characters
beyond the Basic Multilingual Plane are written as themselves, as YAML reads them.
"""

from __future__ import annotations

import re
from typing import Any

from accelsim.errors import printable

PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})
"""Words YAML would read as something other than a string."""


def workload_text(header: list[str], top: dict[str, Any], layers: list[dict[str, Any]]) -> str:
    """``header`` lines as comments, ``top``'s keys, then ``layers:`` one per line."""
    lines = [f"# {printable(line)}".rstrip() for line in header]
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
        return value if plain else _quoted(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML form for {type(value).__name__}")


def _quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: ``"`` and ``\\`` escaped, and every
    non-printable character by its code (``\\x85``, ``\\u2028``, ``\\U000e0001``)."""
    return '"' + "".join(_escape(c) for c in text) + '"'


def _escape(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
