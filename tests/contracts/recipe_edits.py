"""Edits of a module's text anchored on its structure (a named class, function or
assignment, found with :mod:`ast`), for the extension-recipe tests: each edit fails
with the file and the anchor it did not find, rather than editing the wrong place."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

Edit = Callable[[str, str], str]
"""An edit: (a module's text, its path for messages) -> the text edited."""


def _defined(text: str, path: str, name: str) -> ast.stmt:
    """The top-level statement of ``text`` that defines ``name``."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return node
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    pytest.fail(f"{path}: no top-level {name}, the anchor of the recipe's edit")


def _offset(text: str, line: int, column: int) -> int:
    """The index in ``text`` of ``ast``'s (1-based line, UTF-8 byte column)."""
    start = sum(len(x) + 1 for x in text.split("\n")[: line - 1])
    return start + len(text[start:].encode()[:column].decode())


def _line_start(text: str, line: int) -> int:
    return _offset(text, line, 0)


def insert_before(name: str, code: str) -> Edit:
    """Insert ``code`` (whole lines) before the top-level definition of ``name`` (its
    first decorator)."""

    def edit(text: str, path: str) -> str:
        node = _defined(text, path, name)
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        at = _line_start(text, first)
        return text[:at] + code + text[at:]

    return edit


def insert_before_last(function: str, code: str) -> Edit:
    """Insert ``code`` (whole lines, indented as the function's body) before the last
    statement of the top-level ``function``."""

    def edit(text: str, path: str) -> str:
        node = _defined(text, path, function)
        if not isinstance(node, ast.FunctionDef):
            pytest.fail(f"{path}: {function} is no function, the anchor of the recipe's edit")
        last = node.body[-1]
        indent = " " * last.col_offset
        at = _line_start(text, last.lineno)
        lines = "".join(indent + line for line in code.splitlines(keepends=True))
        return text[:at] + lines + text[at:]

    return edit


def add_import(statement: str) -> Edit:
    """Add ``statement`` after the module's last top-level import."""

    def edit(text: str, path: str) -> str:
        imports = [n for n in ast.parse(text).body if isinstance(n, ast.Import | ast.ImportFrom)]
        if not imports:
            pytest.fail(f"{path}: no import to add {statement!r} after")
        at = _line_start(text, (imports[-1].end_lineno or imports[-1].lineno) + 1)
        return text[:at] + statement + "\n" + text[at:]

    return edit


def add_entry(name: str, entry: str) -> Edit:
    """Add ``entry`` after the last item of the dict or list literal assigned to
    ``name`` (a registry)."""

    def edit(text: str, path: str) -> str:
        node = _defined(text, path, name)
        value = getattr(node, "value", None)
        items = value.values if isinstance(value, ast.Dict) else getattr(value, "elts", None)
        if not isinstance(value, ast.Dict | ast.List | ast.Tuple) or not items:
            pytest.fail(f"{path}: {name} is no literal with items, the anchor of the recipe's edit")
        last = items[-1]
        at = _offset(text, last.end_lineno or last.lineno, last.end_col_offset or 0)
        return text[:at] + ", " + entry + text[at:]

    return edit


def add_member(name: str, member: str) -> Edit:
    """Add ``member`` to the union ``name`` is an ``Annotated`` of (``A | B``, then
    its discriminator)."""

    def edit(text: str, path: str) -> str:
        node = _defined(text, path, name)
        value = getattr(node, "value", None)
        union = value.slice if isinstance(value, ast.Subscript) else None
        first = union.elts[0] if isinstance(union, ast.Tuple) else None
        if not isinstance(first, ast.BinOp):
            pytest.fail(f"{path}: {name} is no Annotated union, the anchor of the recipe's edit")
        at = _offset(text, first.end_lineno or first.lineno, first.end_col_offset or 0)
        return text[:at] + " | " + member + text[at:]

    return edit
