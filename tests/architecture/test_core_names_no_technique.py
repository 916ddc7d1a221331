"""The core rooms a technique plugs into (timing/, mapping/, report/) name no technique
in code: no import of accelsim.techniques, no technique's name as an identifier or a
string.  A docstring may cite one as an example of a generic mechanism."""

from __future__ import annotations

import ast

import pytest

from accelsim.techniques.registry import REGISTRY
from tests.conftest import ROOT

PACKAGE = ROOT / "accelsim"
CORE = ("timing", "mapping", "report")
WORDS = {
    *REGISTRY,
    *(entry.split(":")[1].lower() for entry in REGISTRY.values()),
    "dropout",
    "skipping",
    "predictor",
    "adagp",
    "ada_gp",
}
"""Technique names (as run files and classes spell them) and the words only a technique
stands for."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (of the module, a class or a
    function, or the string right after an assignment: an attribute's)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            first = i == 0 and isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            after_assign = i > 0 and isinstance(body[i - 1], ast.Assign | ast.AnnAssign)
            if (
                (first or after_assign)
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                found.add(id(stmt.value))
    return found


def names_in_code(source: str) -> list[tuple[int, str]]:
    """Every identifier, imported module and string constant (docstrings left out) of a
    module's code, with its line."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            out.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((line, node.attr))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.append((line, node.name))
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            out.append((line, node.arg))
        elif isinstance(node, ast.alias):
            out += [(line, node.name), *([(line, node.asname)] if node.asname else [])]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((line, node.module))
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        ):
            out.append((line, node.value))
    return out


def technique_names(source: str) -> list[str]:
    """Where a module's code names a technique: ``line: name``."""
    found = []
    for line, name in sorted(names_in_code(source)):
        folded = name.lower().replace("-", "_")
        if folded.startswith("accelsim.techniques") or any(w in folded for w in WORDS):
            found.append(f"{line}: {name}")
    return found


MODULES = sorted(
    p.relative_to(PACKAGE).as_posix() for part in CORE for p in (PACKAGE / part).rglob("*.py")
)


@pytest.mark.parametrize("relative", MODULES)
def test_core_code_names_no_technique(relative: str) -> None:
    assert technique_names((PACKAGE / relative).read_text(encoding="utf-8")) == []


def test_the_check_finds_names_imports_and_strings_but_not_docstrings() -> None:
    source = (
        '"""Approximate dropout is an example of a sampled rewriter."""\n'
        "from accelsim.techniques.registry import REGISTRY\n"
        "import accelsim.techniques\n"
        "LAYERPIPE_STAGES = 2\n"
        "def f(dropout_rate: float) -> str:\n"
        '    """A docstring may say gradient_skipping."""\n'
        '    return "gpipe"\n'
        'WHO = "optimizer_fusion"\n'
        '"""An attribute docstring may say pipedream."""\n'
        "class GradientPrediction: ...\n"
    )
    assert technique_names(source) == [
        "2: accelsim.techniques.registry",
        "3: accelsim.techniques",
        "4: LAYERPIPE_STAGES",
        "5: dropout_rate",
        "7: gpipe",
        "8: optimizer_fusion",
        "10: GradientPrediction",
    ]
