"""MkDocs hooks of the documentation site (``mkdocs.yml``), and the tutorial runner.

The parts of the site below are made while it is built, never written by hand:

* ``docs/reference/configuration.md`` holds the marker ``<!-- config-reference -->``,
  replaced by :func:`accelsim.config_reference`: every key of every input file,
  rendered from the specs the loader validates with; each technique's page holds
  ``<!-- provenance: NAME -->``, replaced by :func:`accelsim.provenance_reference`,
  the table of where each default comes from that the technique's reports state.
* ``docs/getting-started.md`` is run: its titled YAML blocks are written to the
  files they name and its ``bash`` and ``python`` blocks run in order, in a fresh
  directory that has the bundled ``configs`` and ``workloads`` (as a checkout has).
  A command that fails stops the build.  ``docs/guides/figures.md`` is run the same
  way, in a directory of its own.  Each image such a page shows as
  ``figures/NAME`` (``../figures/NAME`` from a guide) is the file ``NAME`` names in
  that directory, so the figures are those this run drew.
* Each technique page's figure, ``techniques/figures/NAME.png``, is drawn from
  ``techniques/data/NAME.csv`` (``scripts/technique_figures.py`` simulates and writes
  both; drawing takes a second).

The repository holds a copy of each of these figures under ``docs/``, so that the
pages read as Markdown files show them too; ``python scripts/mkdocs_hooks.py``
draws them all again into ``docs/``, and the site's build replaces each copy by the
figure it draws.

``tests/docs/test_docs.py`` runs the tutorial the same way (``pytest -m docs``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import accelsim

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "getting-started.md"
RUN_PAGES = (TUTORIAL, DOCS / "guides" / "figures.md")
"""The pages run while the site builds, for the figures they show."""
TECHNIQUE_DATA = DOCS / "techniques" / "data"
CONFIG_MARKER = "<!-- config-reference -->"
PROVENANCE_MARKER = re.compile(r"<!-- provenance: (\w+) -->")
API_MARKER = "<!-- api-reference -->"
FIGURE = re.compile(r"!\[[^\]]*\]\((?:\.\./)*figures/([^)\s]+)\)")
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
RUN_TIMEOUT_S = 120


class Block(NamedTuple):
    """One fenced block of the tutorial: its language, its title (a file name) and text."""

    language: str
    title: str
    text: str


def tutorial_blocks(page: Path = TUTORIAL, section: str = "") -> list[Block]:
    """The fenced blocks of ``page`` in order, or of its ``## section`` only."""
    text = page.read_text(encoding="utf-8")
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = []
    for match in FENCE.finditer(text):
        title = TITLE.search(match.group(2))
        blocks.append(Block(match.group(1), title.group(1) if title else "", match.group(3)))
    return blocks


def commands(block: Block) -> list[str]:
    """The shell commands of a ``bash`` block, continuation lines joined, comment lines
    dropped."""
    joined = block.text.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and line[0] != "#"]


def _environment(bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join((str(bin_dir), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    env["MPLBACKEND"] = "Agg"
    return env


def _commands_bin(directory: Path) -> Path:
    """A directory whose ``accelsim`` and ``python`` run this interpreter, so that the
    page's commands run this checkout's code whatever is installed."""
    directory.mkdir(exist_ok=True)
    for name, argv in (("accelsim", f"{sys.executable} -m accelsim"), ("python", sys.executable)):
        script = directory / name
        script.write_text(f'#!/bin/sh\nexec {argv} "$@"\n', encoding="utf-8")
        script.chmod(0o755)
    return directory


def _run(argv: list[str], workdir: Path, bin_dir: Path, what: str) -> str:
    result = subprocess.run(
        argv,
        cwd=workdir,
        env=_environment(bin_dir),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"tutorial: {what} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def run_tutorial(
    workdir: Path, page: Path = TUTORIAL, section: str = ""
) -> list[tuple[Block, str]]:
    """Run every block of the tutorial (or of one ``## section`` of ``page``) in
    ``workdir``, in order; each block with its output.

    Titled blocks are written to the files they name; each command of a ``bash`` block
    runs in ``bash`` (globs, quotes and comments as a user's shell has them) and each
    ``python`` block in ``python -c``, with ``accelsim`` and ``python`` this
    interpreter and this checkout first on the path.  ``workdir`` gets links to the
    checkout's ``configs`` and ``workloads``.

    Raises:
        RuntimeError: a command or a Python block exits with an error.
    """
    for name in ("configs", "workloads"):
        if not (workdir / name).exists():
            (workdir / name).symlink_to((ROOT / name).resolve())
    with tempfile.TemporaryDirectory(prefix="accelsim-bin-") as directory:
        bin_dir = _commands_bin(Path(directory))
        outputs = []
        for block in tutorial_blocks(page, section):
            if block.title:
                target = workdir / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text, encoding="utf-8")
                outputs.append((block, ""))
            elif block.language == "bash":
                printed = [
                    _run(["bash", "-e", "-o", "pipefail", "-c", command], workdir, bin_dir, command)
                    for command in commands(block)
                ]
                outputs.append((block, "".join(printed)))
            elif block.language == "python":
                code = [sys.executable, "-c", block.text]
                outputs.append((block, _run(code, workdir, bin_dir, "python block")))
    return outputs


def figures(page: Path = TUTORIAL) -> list[str]:
    """The figures a page shows as ``figures/NAME``: the files the page's run draws."""
    return FIGURE.findall(page.read_text(encoding="utf-8"))


def drawn_figures(directory: Path) -> dict[str, bytes]:
    """Every figure the site draws, by its path under ``docs/``: each run page's (run in
    a directory of its own under ``directory``) and each technique page's.

    Raises:
        RuntimeError: a page shows a figure its run did not draw.
    """
    drawn: dict[str, bytes] = {}
    for page in RUN_PAGES:
        workdir = directory / page.stem
        workdir.mkdir()
        run_tutorial(workdir, page)
        for name in figures(page):
            if not (workdir / name).is_file():
                raise RuntimeError(
                    f"{page.name}: figures/{name} is shown but the page drew no {name}"
                )
            drawn[f"figures/{name}"] = (workdir / name).read_bytes()
    draw = _technique_figures().draw
    for data in sorted(TECHNIQUE_DATA.glob("*.csv")):
        png = directory / f"{data.stem}.png"
        draw(data, png)
        drawn[f"techniques/figures/{data.stem}.png"] = png.read_bytes()
    return drawn


def _technique_figures() -> Any:
    """``scripts/technique_figures.py`` as a module."""
    spec = importlib.util.spec_from_file_location("technique_figures", ROOT / "scripts" /
                                                  "technique_figures.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def on_files(files: Any, config: Any) -> Any:
    """Draw every figure of :func:`drawn_figures` and put it in the site in place of the
    repository's copy."""
    from mkdocs.structure.files import File

    with tempfile.TemporaryDirectory(prefix="accelsim-figures-") as directory:
        for path, content in drawn_figures(Path(directory)).items():
            copy = files.get_file_from_path(path)
            if copy is not None:
                files.remove(copy)
            files.append(File.generated(config, path, content=content))
    return files


def api_reference() -> str:
    """One mkdocstrings entry per public name (``accelsim.__all__``), grouped by the
    module that defines it, each titled by the name ``accelsim`` gives it."""
    by_module: dict[str, list[str]] = {}
    for name in sorted(accelsim.__all__):
        if name == "__version__":
            continue
        obj = getattr(accelsim, name)
        target = f"{obj.__module__}.{obj.__qualname__}"
        entry = f"::: {target}\n    options:\n      heading: accelsim.{name}\n"
        by_module.setdefault(obj.__module__, []).append(entry)
    return "\n".join(
        f"## `{module}`\n\n" + "\n".join(entries) for module, entries in sorted(by_module.items())
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the markers by what the code says: the configuration reference, a
    technique's provenance table (``<!-- provenance: NAME -->``) and the API
    reference."""
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, accelsim.config_reference())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference())
    return PROVENANCE_MARKER.sub(lambda m: accelsim.provenance_reference(m.group(1)), markdown)


def main() -> int:
    """Draw every figure of the site into ``docs/``: the repository's copies."""
    with tempfile.TemporaryDirectory(prefix="accelsim-figures-") as directory:
        for path, content in drawn_figures(Path(directory)).items():
            target = DOCS / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            print(f"wrote docs/{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
