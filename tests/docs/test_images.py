"""Every image the documentation shows is a file of the repository, at the path its
Markdown names, so the pages show it read as files as well as in the built site; each
technique page shows its figure, drawn from a CSV that says how it was made."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tests.conftest import ROOT

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
TECHNIQUE_PAGES = (
    "gradient-prediction",
    "optimizer-fusion",
    "approximate-dropout",
    "gradient-skipping",
    "pipelines",
    "recomputation",
)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_image_resolves_from_its_page() -> None:
    shown = 0
    for page in pages():
        for target in IMAGE.findall(page.read_text(encoding="utf-8")):
            assert not target.startswith(("http:", "https:", "/")), (page.name, target)
            assert (page.parent / target).resolve().is_file(), (page.name, target)
            shown += 1
    assert shown >= 6 + 6 + 2


def test_each_technique_page_shows_its_figure_from_its_csv() -> None:
    for name in TECHNIQUE_PAGES:
        text = (ROOT / "docs" / "techniques" / f"{name}.md").read_text(encoding="utf-8")
        assert f"](figures/{name}.png)" in text.split("## What is modelled")[0], name
        data = ROOT / "docs" / "techniques" / "data" / f"{name}.csv"
        lines = data.read_text(encoding="utf-8").splitlines()
        comments = [line for line in lines if line.startswith("#")]
        assert comments[1].startswith(
            f"# written by: python scripts/technique_figures.py --technique {name} ("
        ), name
        assert re.fullmatch(r"# accelsim \S+, commit [0-9a-f]{40}", comments[2]), name
        rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
        assert len(rows) >= 7, name
        for row in rows:
            speedup, bound = float(row["speedup"]), float(row["speedup_bound"])
            assert 0 < speedup <= bound * (1 + 1e-9), (name, row)
            assert row["binding_bound"], (name, row)
