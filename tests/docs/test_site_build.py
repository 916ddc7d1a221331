"""What the documentation build installs and enables, as the ``docs`` extra's comment
in ``pyproject.toml`` says: Material for MkDocs held at the last release that prints no
end-of-life banner, which is safe only while the site enables nothing its later
releases fix; ruff to format the API reference's signatures."""

from __future__ import annotations

import tomllib
import yaml

from tests.conftest import ROOT


def extra(name: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements: list[str] = project["optional-dependencies"][name]
    return requirements


def test_material_is_held_where_the_build_prints_no_banner() -> None:
    assert "mkdocs-material==9.7.1" in extra("docs")


def test_the_site_enables_nothing_later_material_releases_fix() -> None:
    """9.7.4 hardened the social-cards plugin, 9.7.7 fixed search suggestions."""
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in site["plugins"]]
    assert plugins == ["search", "mkdocstrings"]
    assert "search.suggest" not in site["theme"]["features"]


def test_the_docs_extra_formats_signatures_with_the_developers_ruff() -> None:
    ruff = [r for r in extra("docs") if r.startswith("ruff")]
    assert ruff == [r for r in extra("dev") if r.startswith("ruff")] == ["ruff>=0.17.6,<0.18"]
