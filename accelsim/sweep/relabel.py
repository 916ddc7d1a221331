"""``--label KEY=TEXT``: a figure's configurations, models and axes renamed.

A ``KEY`` is an axis key (``array.rows``: the axis label and legend title say
``TEXT``) or a value as the figure shows it (``resnet18``, a technique combination
``gradient_prediction+optimizer_fusion``, ``128``: every tick label and legend entry
that shows it says ``TEXT``).  Renaming happens on the points drawn, before any
figure is made, so every kind names things alike; a ``KEY`` the points do not have
is refused with what can be renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accelsim.errors import InputError
from accelsim.sweep.labels import value_text
from accelsim.sweep.plots import Figure


def parse_label(text: str) -> tuple[str, str]:
    """``KEY=TEXT`` of ``--label``; ``TEXT`` is taken as written.

    Raises:
        InputError: for text without ``=``, or an empty key or text.
    """
    key, sep, shown = text.partition("=")
    if not sep or not key.strip() or not shown.strip():
        raise InputError.single("--label", "", "expected KEY=TEXT", text)
    return key.strip(), shown.strip()


def relabelled(fig: Figure, labels: Mapping[str, str]) -> Figure:
    """``fig`` with its axes and their values renamed by ``labels``.

    Raises:
        InputError: for a key that is neither an axis nor a value of one among the
            points drawn.
    """
    if not labels:
        return fig
    shown = {axis: {value_text(r.get(axis)) for r in fig.rows} for axis in fig.axes}
    for key in labels:
        if key not in fig.axes and not any(key in values for values in shown.values()):
            raise InputError.single(
                "--label",
                key,
                "names no axis or axis value of the points drawn; axes: " + ", ".join(fig.axes),
            )

    def axis(key: str) -> str:
        return labels.get(key, key)

    def value(v: Any) -> Any:
        return labels.get(value_text(v), v)

    keys = fig.varying()
    by = fig.by or next((a for a in ("model", "workload") if a in keys), None)
    return replace(
        fig,
        rows=[{**r, **{axis(k): value(r.get(k)) for k in fig.axes}} for r in fig.rows],
        axes=[axis(a) for a in fig.axes],
        where=[(axis(k), value(v)) for k, v in fig.where],
        baseline=None if fig.baseline is None else (axis(fig.baseline[0]), value(fig.baseline[1])),
        x_key=None if fig.x_key is None else axis(fig.x_key),
        y_key=None if fig.y_key is None else axis(fig.y_key),
        by=None if by is None else axis(by),
    )
