"""Figures of a sweep, drawn from its collected table (never by re-simulating).

Units are ms and mJ, titles name the sweep's technique and set-up, there is one
y axis per panel, each meaning keeps one colour, and any matplotlib format
(``png``, ``pdf``, ``svg``) can be written.  matplotlib is imported lazily
through the object-oriented API with the Agg canvas.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from accelsim.config.loader import parse_value
from accelsim.errors import InputError

Row = Mapping[str, Any]


class PlotKind(str, Enum):
    """The figures of ``accelsim plot``."""

    SPEEDUP = "speedup"
    ENERGY = "energy"
    HEATMAP = "heatmap"
    PARETO = "pareto"
    SCALING = "scaling"


FORMATS = ("png", "pdf", "svg")
"""The formats ``accelsim plot`` writes."""


def output_path(
    directory: Path, kind: PlotKind, output: Path | None, fmt: str | None
) -> tuple[Path, str]:
    """Where ``accelsim plot`` writes, and in which format.

    Without ``output``: ``directory/plots/<kind>.<fmt>`` (png by default).  With it,
    exactly ``output``: in the format its suffix names, or without a suffix in ``fmt``
    (png by default).

    Raises:
        InputError: for a suffix that is not a format's, or that contradicts ``fmt``.
    """
    if output is None:
        fmt = fmt or FORMATS[0]
        return directory / "plots" / f"{kind.value}.{fmt}", fmt
    suffix = output.suffix.lower().removeprefix(".")
    if not suffix:
        return output, fmt or FORMATS[0]
    if suffix not in FORMATS:
        raise InputError.single(
            "--output",
            "",
            f"unknown suffix '.{suffix}'; the formats are {', '.join(FORMATS)}",
            str(output),
        )
    if fmt is not None and fmt != suffix:
        raise InputError.single(
            "--output", "", f"its suffix contradicts --format {fmt}", str(output)
        )
    return output, suffix


def parse_assignment(text: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--baseline`` or ``--where``, the value read as YAML.

    Raises:
        InputError: for text without ``=``.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError.single(option, "", "expected KEY=VALUE", text)
    return key.strip(), parse_value(value.strip())


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a) == str(b)


def select(rows: Sequence[Row], axes: Sequence[str], where: Sequence[tuple[str, Any]]) -> list[Row]:
    """The successful rows matching every ``where`` pair.

    Raises:
        InputError: for a ``where`` key that is not an axis, or no row left.
    """
    for key, value in where:
        if key not in axes:
            raise InputError.single("--where", key, f"not an axis; axes: {', '.join(axes)}", value)
    chosen = [
        r for r in rows if r.get("status") == "ok" and all(_same(r.get(k), v) for k, v in where)
    ]
    if not chosen:
        raise InputError.single("--where", "", "no finished point matches", dict(where))
    return chosen


def varying(rows: Sequence[Row], axes: Sequence[str]) -> list[str]:
    """The axes that take more than one value among ``rows``, less those that move in
    step with an earlier one (the later keys of a zip group)."""
    chosen: list[str] = []
    for axis in axes:
        values = {str(r.get(axis)) for r in rows}
        if len(values) < 2:
            continue
        if not any(_in_step(rows, a, axis) for a in chosen):
            chosen.append(axis)
    return chosen


def _in_step(rows: Sequence[Row], a: str, b: str) -> bool:
    """Whether axes ``a`` and ``b`` take their values one-to-one among ``rows``."""
    pairs = {(str(r.get(a)), str(r.get(b))) for r in rows}
    return len(pairs) == len({str(r.get(a)) for r in rows}) == len({str(r.get(b)) for r in rows})


def axis_name(rows: Sequence[Row], axes: Sequence[str], axis: str) -> str:
    """``axis`` and the axes that move in step with it, for an axis label."""
    same = [a for a in axes if a == axis or (len({str(r.get(a)) for r in rows}) > 1
                                             and _in_step(rows, axis, a))]  # fmt: skip
    return " = ".join(same)


def _label(row: Row, keys: Sequence[str]) -> str:
    return ", ".join(f"{k}={row.get(k)}" for k in keys) or "all"


def setup_title(name: str, rows: Sequence[Row], what: str) -> str:
    """``what`` and the set-up the rows share: technique, hardware, workload, batch."""
    parts = []
    for key, shown in (
        ("techniques", "technique"),
        ("hardware", "base hardware"),
        ("workload", "model"),
        ("batch_size", "batch"),
    ):
        values = sorted({str(r.get(key)) for r in rows})
        parts.append(f"{shown} {values[0]}" if len(values) == 1 else f"{shown}: varied")
    return f"{name}: {what}\n" + textwrap.fill("; ".join(parts), 70)


def _ms(row: Row) -> float:
    return 1e3 * float(row["seconds"])


def _mj(row: Row) -> float:
    return float(row["energy_pj"]) / 1e9


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def plot_speedup(
    rows: Sequence[Row], axes: Sequence[str], baseline: tuple[str, Any] | None, title: str
) -> Any:
    """Speedup bars over ``baseline`` (the point with that axis value and the same other
    axes), per group of the other axes, with a geometric-mean group.

    Without a baseline, the technique's own whole-training ``speedup`` per point
    (with its bound as a marker).

    Raises:
        InputError: for a baseline that is not an axis value, or no speedup to plot.
    """
    if baseline is None:
        if not all(r.get("speedup") is not None for r in rows):
            raise InputError.single(
                "--baseline", "", "needed: these points report no technique speedup"
            )
        groups = [_label(r, varying(rows, axes)) for r in rows]
        series = {"technique speedup": [float(r["speedup"]) for r in rows]}
        bounds = [r.get("speedup_bound") for r in rows]
    else:
        key, value = baseline
        if key not in axes:
            raise InputError.single("--baseline", key, f"not an axis; axes: {', '.join(axes)}")
        others = [a for a in varying(rows, axes) if a != key]
        base = {_label(r, others): r for r in rows if _same(r.get(key), value)}
        if not base:
            raise InputError.single("--baseline", key, "no finished point has this value", value)
        groups = list(base)
        compared = [v for v in dict.fromkeys(str(r.get(key)) for r in rows) if not _same(v, value)]
        series = {}
        for v in compared:
            speedups = []
            for group in groups:
                match = [r for r in rows if _label(r, others) == group and str(r.get(key)) == v]
                speedups.append(_ms(base[group]) / _ms(match[0]) if match else math.nan)
            series[f"{key}={v}"] = speedups
        bounds = [None] * len(groups)
    fig = _figure(max(7.0, 0.5 * len(groups) * max(1, len(series)) + 3), 4.5)
    ax = fig.subplots()
    labels = [*groups, "geomean"]
    width = 0.8 / max(1, len(series))
    for i, ((name, values), colour) in enumerate(
        zip(series.items(), _colours(len(series)), strict=True)
    ):
        finite = [v for v in values if v > 0 and math.isfinite(v)]
        mean = math.exp(sum(math.log(v) for v in finite) / len(finite)) if finite else math.nan
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [*values, mean], width=width, color=colour, label=name)
    if any(b is not None for b in bounds):
        ax.scatter(
            range(len(groups)),
            [math.nan if b is None else float(b) for b in bounds],
            marker="_",
            s=200,
            color="black",
            label="bound",
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylabel("speedup (x)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return fig


def plot_energy(rows: Sequence[Row], axes: Sequence[str], title: str) -> Any:
    """Stacked energy per point (mJ), one colour per energy component."""
    components = sorted(
        {k for r in rows for k in r if k.startswith("energy_") and k.endswith("_pj")}
        - {"energy_pj"}
    )
    labels = [_label(r, varying(rows, axes)) for r in rows]
    fig = _figure(max(7.0, 0.45 * len(rows) + 3), 4.5)
    ax = fig.subplots()
    bottom = [0.0] * len(rows)
    for component, colour in zip(components, _colours(len(components)), strict=True):
        values = [float(r.get(component) or 0.0) / 1e9 for r in rows]
        name = component.removeprefix("energy_").removesuffix("_pj")
        ax.bar(range(len(rows)), values, bottom=bottom, color=colour, label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(range(len(rows)), labels, rotation=45, ha="right")
    ax.set_ylabel("step energy (mJ)")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _technique(rows: Sequence[Row]) -> bool:
    """Whether every point reports a technique's speedup (the figure to show then)."""
    return all(r.get("speedup") is not None for r in rows)


def plot_heatmap(rows: Sequence[Row], axes: Sequence[str], title: str) -> Any:
    """The technique's speedup (x, each cell with the bound it allows) when every point
    has one, else step time (ms), over the two axes that vary.

    Raises:
        InputError: unless exactly two axes vary among the rows.
    """
    keys = varying(rows, axes)
    if len(keys) != 2:
        raise InputError.single(
            "--kind heatmap",
            "",
            "needs exactly two varying axes; fix the others with --where KEY=VALUE",
            keys,
        )
    y_key, x_key = keys
    xs = list(dict.fromkeys(str(r.get(x_key)) for r in rows))
    ys = list(dict.fromkeys(str(r.get(y_key)) for r in rows))
    technique = _technique(rows)
    grid = [[math.nan] * len(xs) for _ in ys]
    labels = [[""] * len(xs) for _ in ys]
    for r in rows:
        i, j = ys.index(str(r.get(y_key))), xs.index(str(r.get(x_key)))
        grid[i][j] = float(r["speedup"]) if technique else _ms(r)
        labels[i][j] = f"{grid[i][j]:.3g}"
        if technique and r.get("speedup_bound") is not None:
            labels[i][j] += f"\n(at most {float(r['speedup_bound']):.3g})"
    fig = _figure(max(8.0, 1.0 * len(xs) + 3), max(4.0, 0.6 * len(ys) + 2))
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    finite = [v for line in grid for v in line if math.isfinite(v)]
    middle = (min(finite) + max(finite)) / 2
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            if math.isfinite(value):
                colour = "black" if value > middle else "white"
                ax.text(j, i, labels[i][j], ha="center", va="center", color=colour)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    ax.set_xlabel(axis_name(rows, axes, x_key))
    ax.set_ylabel(axis_name(rows, axes, y_key))
    fig.colorbar(image, ax=ax, label="technique speedup (x)" if technique else "step time (ms)")
    ax.set_title(title)
    return fig


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates, by the first."""
    order = sorted(range(len(points)), key=lambda i: points[i])
    front: list[int] = []
    best = math.inf
    for i in order:
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front


def plot_pareto(rows: Sequence[Row], axes: Sequence[str], title: str) -> Any:
    """Step time against step energy; the Pareto-optimal points joined and labelled."""
    points = [(_ms(r), _mj(r)) for r in rows]
    front = pareto_front(points)
    fig = _figure(7.0, 5.0)
    ax = fig.subplots()
    ax.scatter(*zip(*points, strict=True), color="tab:gray", s=14, label="design point")
    ax.plot(
        [points[i][0] for i in front],
        [points[i][1] for i in front],
        color="tab:red",
        marker="o",
        label="Pareto front",
    )
    keys = varying(rows, axes)
    for i in front:
        ax.annotate(_label(rows[i], keys), points[i], fontsize="x-small", xytext=(4, 4),
                    textcoords="offset points")  # fmt: skip
    ax.set_xlabel("step time (ms)")
    ax.set_ylabel("step energy (mJ)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return fig


def plot_scaling(rows: Sequence[Row], axes: Sequence[str], x_key: str | None, title: str) -> Any:
    """Speedup along a numeric axis, one labelled line per combination of the other
    varying axes: the technique's own speedup when every point reports one (a
    pipeline's over one processor, say; dotted beside it, the bound it allows),
    else the step time's over the axis's smallest value.

    Raises:
        InputError: when no numeric axis varies (or ``x_key`` is not one).
    """
    numeric = [
        a
        for a in varying(rows, axes)
        if all(isinstance(r.get(a), int | float) and not isinstance(r.get(a), bool) for r in rows)
    ]
    key = x_key or (numeric[0] if numeric else None)
    if key is None or key not in numeric:
        raise InputError.single("--x", "", "needs a numeric axis that varies", numeric)
    others = [a for a in varying(rows, axes) if a != key]
    lines: dict[str, list[Row]] = {}
    for r in rows:
        lines.setdefault(_label(r, others), []).append(r)
    technique = _technique(rows)
    fig = _figure(7.0, 4.5)
    ax = fig.subplots()
    for (name, members), colour in zip(lines.items(), _colours(len(lines)), strict=True):
        members = sorted(members, key=lambda r: float(r[key]))
        first = _ms(members[0])
        ax.plot(
            [float(r[key]) for r in members],
            [float(r["speedup"]) if technique else first / _ms(r) for r in members],
            marker="o",
            color=colour,
            label=name,
        )
        if technique and all(r.get("speedup_bound") is not None for r in members):
            ax.plot(
                [float(r[key]) for r in members],
                [float(r["speedup_bound"]) for r in members],
                linestyle=":",
                color=colour,
                label=f"{name}: bound",
            )
    if all(isinstance(r[key], int) for r in rows):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(axis_name(rows, axes, key))
    ax.set_ylabel("technique speedup (x)" if technique else f"speedup over the smallest {key} (x)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return fig


def draw(
    kind: PlotKind,
    name: str,
    rows: Sequence[Row],
    axes: Sequence[str],
    path: Path,
    baseline: tuple[str, Any] | None = None,
    x_key: str | None = None,
    fmt: str = FORMATS[0],
) -> None:
    """Draw ``kind`` of the (already selected) ``rows`` into ``path`` in format ``fmt``
    (whatever ``path``'s suffix)."""
    what = {
        PlotKind.SPEEDUP: (
            f"speedup over {baseline[0]}={baseline[1]}"
            if baseline is not None
            else "the technique's whole-training speedup over the baseline"
        ),
        PlotKind.ENERGY: "step energy by component",
        PlotKind.HEATMAP: "the technique's speedup" if _technique(rows) else "step time",
        PlotKind.PARETO: "step time against energy",
        PlotKind.SCALING: "scaling",
    }[kind]
    title = setup_title(name, rows, what)
    makers: dict[PlotKind, Callable[[], Any]] = {
        PlotKind.SPEEDUP: lambda: plot_speedup(rows, axes, baseline, title),
        PlotKind.ENERGY: lambda: plot_energy(rows, axes, title),
        PlotKind.HEATMAP: lambda: plot_heatmap(rows, axes, title),
        PlotKind.PARETO: lambda: plot_pareto(rows, axes, title),
        PlotKind.SCALING: lambda: plot_scaling(rows, axes, x_key, title),
    }
    fig = makers[kind]()
    fig.savefig(path, dpi=150, format=fmt)
