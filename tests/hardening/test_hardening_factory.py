"""Hostile PyTorch factories for ``accelsim import package.module:factory``: whatever
the factory's own code raises is exit 2 at the factory spec, one line, never an
internal error; its module is found in the working directory.

Factory resolution needs no torch: it happens before torch is needed. The test that
imports a module is marked ``torch``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelsim import cli

FACTORIES = {
    "raises": (
        "def build():\n    raise ValueError('boom')\n",
        "calling the factory failed (got 'ValueError: boom')",
    ),
    "needs arguments": (
        "def build(n):\n    return n\n",
        'calling the factory failed (got "TypeError: build() missing 1 required positional'
        " argument: 'n'\")",
    ),
    "infinite recursion": (
        "def build():\n    return build()\n",
        "calling the factory failed (got 'RecursionError: maximum recursion depth exceeded')",
    ),
    "exits": (
        "import sys\ndef build():\n    sys.exit(3)\n",
        "calling the factory failed (got 'SystemExit: 3')",
    ),
    "not callable": ("build = 42\n", "the factory is not callable (got 'int')"),
    "returns a path": (
        "def build():\n    return 'm.onnx'\n",
        "the factory returned a string or a path, not a torch.nn.Module (got 'm.onnx')",
    ),
    "module raises": (
        "raise RuntimeError('at import')\n",
        "importing the factory's module failed (got 'RuntimeError: at import')",
    ),
    "module exits": (
        "import sys\nsys.exit(4)\n",
        "importing the factory's module failed (got 'SystemExit: 4')",
    ),
    "syntax error": (
        "def build(:\n",
        "importing the factory's module failed (got 'SyntaxError: invalid syntax"
        " (hostile_factory.py, line 1)')",
    ),
    "no such factory": (
        "",
        "cannot load the factory: module 'hostile_factory' has no attribute 'build'",
    ),
}


@pytest.mark.parametrize("case", list(FACTORIES))
def test_a_factory_that_fails_is_blamed_on_its_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """The module is found in the working directory (no ``PYTHONPATH``), the factory
    resolved and called before torch is needed; ``m.onnx`` there is not read."""
    source, message = FACTORIES[case]
    (tmp_path / "hostile_factory.py").write_text(source)
    (tmp_path / "m.onnx").write_text("read as a model, it would be refused as no ONNX file")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "hostile_factory", raising=False)
    path = list(sys.path)
    try:
        code = cli.main(
            ["import", "hostile_factory:build", "--input-shape", "8", "--out", "w.yaml"]
        )
    finally:
        sys.modules.pop("hostile_factory", None)
    assert (code, capsys.readouterr().err) == (
        cli.EXIT_INPUT,
        f"hostile_factory:build: {message}\n",
    )
    assert sys.path == path
    assert not (tmp_path / "w.yaml").exists()


@pytest.mark.torch
def test_a_factory_in_the_working_directory_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    source = "import torch\ndef build():\n    return torch.nn.Sequential(torch.nn.Linear(8, 4))\n"
    (tmp_path / "tiny_factory.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    args = ["import", "tiny_factory:build", "--input-shape", "8", "--out", "w.yaml"]
    assert cli.main(args) == cli.EXIT_OK
    written = (tmp_path / "w.yaml").read_text()
    assert "kind: linear, out_features: 4" in written
    assert "\nname: build\n" in written  # the factory's name, as --help says
