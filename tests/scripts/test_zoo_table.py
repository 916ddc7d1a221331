"""The zoo table of docs/guides/workloads.md (``scripts/zoo.py``): rows rendered by
hand, and the committed page's table rendered from the committed CSV. Needs no torch."""

from __future__ import annotations

import re

from tests.conftest import load_script

zoo = load_script("zoo")

ROWS = {
    "resnet18": {
        "model": "resnet18",
        "input": "3x224x224",
        "status": "imported",
        "error": "",
        "params": "11689512",
        "params_torch": "11689512",
        "forward_macs": "1814073344",
        "gflops_torchvision": "1.814",
        "macs_error_pct": "-0.0",
        "export_s": "3.1",
        "import_s": "0.4",
    },
    "alexnet": {
        "model": "alexnet",
        "input": "3x224x224",
        "status": "import failed",
        "error": "alexnet.onnx: nodes[/a]: no kind | none (got 'X')\nalexnet.onnx: nodes[/b]: two",
        "problems": "2",
        "params_torch": "61100840",
        "gflops_torchvision": "0.714",
        "export_s": "2.0",
        "import_s": "0.1",
    },
    "vit_h_14": {"model": "vit_h_14", "status": "stopped", "error": "still running after 9 s"},
}


def test_rows_rendered() -> None:
    """Sorted by name; a failure shows its first problem (a pipe escaped) and how many
    more; parameters that differ from the module's show the module's in brackets."""
    text = zoo.table({**ROWS, "resnet18": {**ROWS["resnet18"], "params": "11689511"}}, "t 1")
    assert text.splitlines() == [
        "3 models (t 1): 1 import, 0 of them with the module's parameters exactly and 1 with"
        " forward MACs within 1 % of torchvision's GFLOPS or rounding to them (three"
        " decimals). Regenerate with `python scripts/zoo.py` (all models; `--only NAME ...`"
        " for some).",
        "",
        "| model | input | status | parameters (torch) | forward MACs (torchvision GFLOPS)"
        " | MACs error | export, import |",
        "|---|---|---|---|---|---|---|",
        "| `alexnet` | 3x224x224 | import failed: alexnet.onnx: nodes[/a]: no kind \\| none"
        " (got 'X') (and 1 more) | (61,100,840) | (0.714 G) |  | 2.0 s, 0.1 s |",
        "| `resnet18` | 3x224x224 | imported | 11,689,511 (11,689,512) | 1.814 G (1.814 G)"
        " | +0.00 % | 3.1 s, 0.4 s |",
        "| `vit_h_14` |  | stopped: still running after 9 s |  |  |  |  |",
    ]


def test_macs_agree_within_one_percent_or_to_the_published_decimals() -> None:
    """ShuffleNetV2-x0.5's 40,476,448 MACs are 1.19 % above its 0.04 GFLOPS but round to
    them; 40,600,000 round to 0.041."""
    assert zoo.agrees(1_814_073_344, 1.814) and zoo.agrees(1.8 * 1.009e9, 1.8)
    assert zoo.agrees(40_476_448, 0.04)
    assert not zoo.agrees(40_600_000, 0.04) and not zoo.agrees(1.8 * 1.011e9, 1.8)


def test_the_pages_table_is_the_csvs() -> None:
    """docs/guides/workloads.md's zoo table is what the script writes from the committed
    CSV (regenerate both with ``python scripts/zoo.py``)."""
    page = zoo.DOCS.read_text(encoding="utf-8")
    written = page.partition(zoo.BEGIN + "\n")[2].partition("\n" + zoo.END)[0]
    stamp = re.match(r"\d+ models \(([^)]*)\)", written)
    assert stamp is not None
    assert written == zoo.table(zoo.read_rows(), stamp[1])
