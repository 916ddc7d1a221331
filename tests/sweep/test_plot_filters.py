"""``accelsim plot``'s ``--where`` on the techniques axis (the sweep file's syntax and
the column's labels) and ``--label``: what they choose and rename, and their errors."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.errors import InputError
from accelsim.sweep.plot_options import PlotKind, select
from accelsim.sweep.plots import Figure
from accelsim.sweep.relabel import parse_label, relabelled

AXES = ["model", "techniques", "array.rows"]
ROWS: list[dict[str, Any]] = [
    {"status": "ok", "model": m, "techniques": t, "array.rows": r}
    for m in ("mlp", "resnet18")
    for t in ("gradient_prediction", "optimizer_fusion", "gradient_prediction+optimizer_fusion")
    for r in (128, 256)
]


def chosen(*where: tuple[str, Any]) -> set[tuple[str, str, int]]:
    return {(r["model"], r["techniques"], r["array.rows"]) for r in select(ROWS, AXES, where)}


def test_techniques_match_in_the_sweep_files_syntax_and_as_labelled() -> None:
    section = chosen(("techniques", {"gradient_prediction": {}}), ("model", "mlp"))
    assert section == {("mlp", "gradient_prediction", 128), ("mlp", "gradient_prediction", 256)}
    assert chosen(("techniques", "gradient_prediction"), ("model", "mlp")) == section
    both = {"optimizer_fusion": {}, "gradient_prediction": {}}
    pair = chosen(("techniques", both), ("array.rows", 128))
    assert pair == {
        ("mlp", "gradient_prediction+optimizer_fusion", 128),
        ("resnet18", "gradient_prediction+optimizer_fusion", 128),
    }
    assert chosen(("techniques", "optimizer_fusion+gradient_prediction"), ("array.rows", 128)) == (
        pair
    )


def test_a_filter_that_matches_nothing_lists_the_values_its_axis_takes() -> None:
    with pytest.raises(InputError) as caught:
        select(ROWS, AXES, [("model", "mlp"), ("techniques", {"gradient_skipping": {}})])
    assert str(caught.value) == (
        "--where: techniques: no finished point has this value; it takes: gradient_prediction,"
        " optimizer_fusion, gradient_prediction+optimizer_fusion"
        " (got {'gradient_skipping': {}})"
    )
    with pytest.raises(InputError) as caught:
        select(ROWS, AXES, [("array.rows", 64)])
    assert str(caught.value) == (
        "--where: array.rows: no finished point has this value; it takes: 128, 256 (got 64)"
    )


def test_labels_rename_configurations_models_and_axes() -> None:
    labels = dict(
        parse_label(text)
        for text in (
            "gradient_prediction=ADA-GP",
            "gradient_prediction+optimizer_fusion=ADA-GP + fusion",
            "resnet18=ResNet-18",
            "array.rows=array height",
        )
    )
    fig = relabelled(Figure(PlotKind.TECHNIQUE, "s", ROWS, AXES), labels)
    assert fig.axes == ["model", "techniques", "array height"]
    assert fig.by == "model"
    shown = {(r["model"], r["techniques"], r["array height"]) for r in fig.rows}
    assert ("ResNet-18", "ADA-GP + fusion", 256) in shown
    assert ("mlp", "ADA-GP", 128) in shown
    assert ("mlp", "optimizer_fusion", 128) in shown
    assert {r["array.rows"] for r in fig.rows} == {128, 256}  # the column kept for the title


def test_a_label_that_names_nothing_is_refused_with_the_axes() -> None:
    with pytest.raises(InputError) as caught:
        relabelled(Figure(PlotKind.TECHNIQUE, "s", ROWS, AXES), {"ResNet18": "ResNet-18"})
    assert str(caught.value) == (
        "--label: ResNet18: names no axis or axis value of the points drawn;"
        " axes: model, techniques, array.rows"
    )
    with pytest.raises(InputError) as caught:
        parse_label("resnet18")
    assert str(caught.value) == "--label: expected KEY=TEXT (got 'resnet18')"
