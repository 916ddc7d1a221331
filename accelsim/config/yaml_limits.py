"""Caps on YAML inputs, checked around parsing: nesting of the text before it is
parsed (PyYAML's scanner is quadratic in it) and size and depth of the parsed data
with aliases expanded (a "billion laughs" file, or a cycle)."""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists in an input (the shipped files use 5)."""
MAX_NODES = 200_000
"""Most values in an input, aliases expanded (the biggest shipped file has about 6,000)."""


# Quoted scalars and comments, whose brackets do not nest anything.  As in YAML, a
# quote starts a scalar only at the start of a token (so "don't" quotes nothing)
# and "#" starts a comment only after white space.
_NOT_FLOW = re.compile(
    r"""(?:^|(?<=[\s\[{,:]))(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*')|(?:^|(?<=\s))#[^\n]*""",
    re.MULTILINE,
)


def flow_depth(text: str) -> int:
    """How deep ``[...]`` and ``{...}`` nest in ``text`` (an upper bound for YAML).

    PyYAML's scanner takes time quadratic in this depth (900 levels take two
    seconds, 10,000 minutes), so a deep text is refused before it is parsed.
    """
    brackets = re.sub(r"[^\[\]{}]", "", _NOT_FLOW.sub("", text))
    depth = deepest = 0
    for char in brackets:
        depth = depth + 1 if char in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


def size_problem(data: Any) -> str:
    """Why ``data`` is too deep or, with YAML aliases expanded, too big; empty if neither.

    An alias is a reference to another node, so a few lines can stand for
    billions of values (a "billion laughs" file) or for a cycle; the count
    follows every reference and stops at the first limit.
    """
    nodes = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"more than {MAX_NODES:,} values once YAML aliases are expanded"
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return ""
