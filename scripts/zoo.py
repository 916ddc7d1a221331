"""Every torchvision classification model through ``accelsim import``: the zoo table of
docs/guides/workloads.md and its CSV.

Run with a Python that has torch and torchvision (and accelsim):

    python scripts/zoo.py [--only NAME ...] [--fixtures tests/fixtures/onnx]

Each model of ``torchvision.models.list_models(module=torchvision.models)`` is measured
in a child process of its own, one at a time, the smallest first (by the parameters its
weights' metadata gives): built from its code with random weights (``weights=None``;
GoogLeNet and Inception-V3 without their auxiliary classifiers, which torchvision's
figures leave out too), at its default weights' input size (their
``transforms().crop_size``, a vision transformer's ``image_size`` set to it as
torchvision's builder sets it; nothing is downloaded), exported in training mode by
:func:`accelsim.export_onnx` and imported by :func:`accelsim.import_model` with
``accelsim import``'s defaults. Its row records the status (imported, or the error
word for word), the parameters against the module's ``sum(p.numel())``, the forward
MACs per sample against the weights' ``meta["_ops"]`` (torchvision's "GFLOPS", which
count one multiply-add as one operation: ResNet-18's 1.814 are its 1,814,073,344
MACs) and the seconds each step took.

Writes :data:`CSV` (``--only`` replaces those models' rows and keeps the others) and the
table between the :data:`BEGIN` and :data:`END` lines of :data:`DOCS`, from the whole
CSV (a model without a row gets one saying it was not measured); ``--table`` measures
nothing and rewrites the table alone. ``--fixtures DIR`` also writes the graph-only
fixture of each model of :data:`FAMILIES` it measures (``scripts/export_onnx_fixtures.py``'s
stripping).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "docs" / "guides" / "data" / "torchvision_zoo.csv"
DOCS = ROOT / "docs" / "guides" / "workloads.md"
BEGIN = "<!-- zoo table: written by scripts/zoo.py from docs/guides/data/torchvision_zoo.csv -->"
END = "<!-- end of the zoo table -->"
KEPT = 10
"""Problems of an error the CSV keeps (the table shows the first, and how many)."""
TIMEOUT_S = 3600
"""A model's child process is stopped after this long (its row says so)."""
KWARGS: dict[str, dict[str, Any]] = {
    "googlenet": {"aux_logits": False, "init_weights": False},
    "inception_v3": {"aux_logits": False, "init_weights": False},
}
"""Builder arguments beyond ``weights=None``: one classifier (the workload format has
one loss), as torchvision's parameters and GFLOPS for GoogLeNet count it; weights
left as torch initialises them (torchvision's own initialisation is slow and changes no
shape)."""
FAMILIES = (
    "convnext_tiny",
    "efficientnet_b0",
    "efficientnet_v2_s",
    "googlenet",
    "maxvit_t",
    "mnasnet0_5",
    "mobilenet_v3_small",
    "regnet_x_400mf",
    "regnet_y_400mf",
    "resnext50_32x4d",
    "shufflenet_v2_x0_5",
    "squeezenet1_0",
    "swin_t",
    "swin_v2_t",
    "vit_b_16",
    "wide_resnet50_2",
)
"""One model per family beyond the suite's fixtures (AlexNet, VGG, ResNet, MobileNet-V2,
DenseNet, Inception-V3): the graph-only fixtures of ``tests/importer/test_import_zoo.py``."""
FIELDS = (
    "model",
    "input",
    "weights",
    "status",
    "error",
    "problems",
    "params",
    "params_torch",
    "params_torchvision",
    "forward_macs",
    "gflops_torchvision",
    "macs_error_pct",
    "layers",
    "onnx_bytes",
    "export_s",
    "import_s",
)
"""The CSV's columns: ``error`` is the first :data:`KEPT` problems of the error, one a
line, ``problems`` how many it has; ``params`` and ``forward_macs`` are the imported table's
(``accelsim models``), ``params_torch`` the module's ``sum(p.numel())``,
``params_torchvision`` and ``gflops_torchvision`` the weights' metadata."""


def models() -> list[str]:
    """torchvision's classification models, the smallest first."""
    import torchvision

    names = torchvision.models.list_models(module=torchvision.models)
    return sorted(names, key=lambda n: (_weights(n).meta["num_params"], n))


def _weights(name: str) -> Any:
    import torchvision

    return torchvision.models.get_model_weights(name).DEFAULT


def measure(name: str, fixtures: Path | None = None) -> dict[str, Any]:
    """``name`` built, exported and imported, as a CSV row (the keys of :data:`FIELDS`).

    The import reads the export from a temporary directory as ``NAME.onnx``, the name
    its errors give. With ``fixtures``, a model of :data:`FAMILIES` also has its
    graph-only fixture written there.
    """
    import torchvision

    from accelsim import WorkloadError, export_onnx, import_model

    weights = _weights(name)
    size = weights.transforms().crop_size[0]
    model = torchvision.models.get_model(name, weights=None, **_kwargs(name, size))
    row: dict[str, Any] = {
        "model": name,
        "input": f"3x{size}x{size}",
        "weights": str(weights).rpartition(".")[2],
        "params_torch": sum(p.numel() for p in model.parameters()),
        "params_torchvision": weights.meta["num_params"],
        "gflops_torchvision": weights.meta["_ops"],
    }
    start = time.perf_counter()
    try:
        data = export_onnx(model, (3, size, size), weights=False)
    except WorkloadError as exc:
        data = b""
        row.update(status="export failed", **_error(exc.problems))
    row["export_s"] = round(time.perf_counter() - start, 1)
    if not data:
        return row
    row["onnx_bytes"] = len(data)
    if fixtures is not None and name in FAMILIES:
        # The script's own folder is on sys.path: measure writes fixtures in its child.
        from export_onnx_fixtures import write_fixture

        write_fixture(fixtures / f"{name}.onnx.gz", data, _built(name, size))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        Path(f"{name}.onnx").write_bytes(data)
        try:
            text = import_model(Path(f"{name}.onnx"), name=name).text
        except WorkloadError as exc:
            text = ""
            row.update(status="import failed", **_error(exc.problems))
        row["import_s"] = round(time.perf_counter() - start, 1)
        os.chdir(ROOT)
        if not text:
            return row
        stats = _counted(Path(folder) / f"{name}.yaml", text)
    error = stats["forward_macs"] / (weights.meta["_ops"] * 1e9) - 1
    return {
        **row,
        "status": "imported",
        "params": stats["params"],
        "forward_macs": stats["forward_macs"],
        "macs_error_pct": round(100 * error, 2),
        "layers": stats["layers"],
    }


def _error(problems: list[Any]) -> dict[str, Any]:
    """The ``error`` and ``problems`` of a row: the first :data:`KEPT` problems, one a line
    (a Swin has hundreds), and how many there are."""
    return {"error": "\n".join(str(p) for p in problems[:KEPT]), "problems": len(problems)}


def _counted(path: Path, text: str) -> dict[str, Any]:
    """``accelsim models --json`` of the workload file ``text``, written at ``path``:
    its parameters, forward MACs per sample and layers."""
    path.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "accelsim", "models", str(path), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    (stats,) = json.loads(done.stdout)
    return dict(stats)


def _kwargs(name: str, size: int) -> dict[str, Any]:
    """The builder's arguments beyond ``weights=None``: :data:`KWARGS`, and a vision
    transformer's ``image_size``, which torchvision's builder takes from the weights
    (ViT-H/14's are for 518 x 518 images)."""
    sized = {"image_size": size} if name.startswith("vit_") else {}
    return {**KWARGS.get(name, {}), **sized}


def _built(name: str, size: int) -> str:
    """How the model was built, as the fixture's doc string says."""
    args = "".join(f", {k}={v}" for k, v in _kwargs(name, size).items())
    return f"torchvision.models.{name}(weights=None{args})"


def measured(name: str, fixtures: Path | None = None, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """:func:`measure` of ``name`` in a child process (its memory returned when it ends);
    a child that is stopped, or dies, gives a row saying so."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one", name]
    if fixtures is not None:
        command += ["--fixtures", str(fixtures.resolve())]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"model": name, "status": "stopped", "error": f"still running after {timeout:.0f} s"}
    if done.returncode == 0:
        return dict(json.loads(done.stdout.splitlines()[-1]))
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    seconds = time.perf_counter() - start
    error = f"the child process ended with code {done.returncode} after {seconds:.0f} s: {last}"
    return {"model": name, "status": "crashed", "error": error}


def read_rows(path: Path = CSV) -> dict[str, dict[str, str]]:
    """The CSV's rows by model (none when it does not exist)."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as stream:
        return {row["model"]: row for row in csv.DictReader(stream)}


def write_rows(rows: dict[str, dict[str, Any]], path: Path = CSV) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, FIELDS, lineterminator="\n")
        writer.writeheader()
        for name in sorted(rows):
            writer.writerow({k: rows[name].get(k, "") for k in FIELDS})


def agrees(macs: float, gflops: float) -> bool:
    """Whether ``macs`` are within 1 % of torchvision's ``gflops``, or round to them
    (torchvision gives three decimals: 0.001 GFLOPS is more than 1 % of a small model's)."""
    return abs(macs / (gflops * 1e9) - 1) <= 0.01 or round(macs / 1e9, 3) == gflops


def table(rows: dict[str, dict[str, str]], versions: str) -> str:
    """The Markdown table of every row, in torchvision's order of names."""
    imported = [r for r in rows.values() if r["status"] == "imported"]
    exact = [r for r in imported if r["params"] == r["params_torch"]]
    close = [
        r for r in imported if agrees(float(r["forward_macs"]), float(r["gflops_torchvision"]))
    ]
    lines = [
        f"{len(rows)} models ({versions}): {len(imported)} import, {len(exact)} of them"
        f" with the module's parameters exactly and {len(close)} with forward MACs within"
        " 1 % of torchvision's GFLOPS or rounding to them (three decimals). Regenerate with"
        " `python scripts/zoo.py` (all models; `--only NAME ...` for some).",
        "",
        "| model | input | status | parameters (torch) | forward MACs (torchvision GFLOPS)"
        " | MACs error | export, import |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_table_row(rows[name]) for name in sorted(rows)]
    return "\n".join(lines)


def _table_row(row: dict[str, str]) -> str:
    model = f"`{row['model']}`"
    seconds = ", ".join(f"{row[k]} s" for k in ("export_s", "import_s") if row.get(k))
    torch_params = f"{int(row['params_torch']):,}" if row.get("params_torch") else ""
    gflops = row.get("gflops_torchvision", "")
    if row["status"] != "imported":
        status = ": ".join(filter(None, (row["status"], _first_problem(row))))
        sizes = [f"({torch_params})" if torch_params else "", f"({gflops} G)" if gflops else ""]
        cells = [model, row.get("input", ""), status, *sizes, "", seconds]
        return "| " + " | ".join(cells) + " |"
    params = int(row["params"])
    mark = "" if str(params) == row["params_torch"] else f" ({torch_params})"
    macs = f"{int(row['forward_macs']) / 1e9:.3f} G ({gflops} G)"
    error = f"{float(row['macs_error_pct']) or 0.0:+.2f} %"  # -0.0 as +0.00
    cells = [model, row["input"], "imported", f"{params:,}{mark}", macs, error, seconds]
    return "| " + " | ".join(cells) + " |"


def _first_problem(row: dict[str, Any]) -> str:
    """A row's first problem, with how many more the error has, as a table cell shows it."""
    text = row.get("error", "").partition("\n")[0]
    more = int(row.get("problems") or 1) - 1
    if more:
        text += f" (and {more} more)"
    return text.replace("|", "\\|")


def versions() -> str:
    import torch
    import torchvision

    return f"torch {torch.__version__}, torchvision {torchvision.__version__}"


def write_docs(rows: dict[str, dict[str, str]], stamp: str, path: Path = DOCS) -> None:
    """The table between the markers of ``path`` replaced by the rows'."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN + "\n")
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{table(rows, stamp)}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, help="model names (default: all)")
    parser.add_argument("--fixtures", type=Path, default=None, help="write FAMILIES' fixtures")
    parser.add_argument(
        "--table", action="store_true", help="measure nothing: the page's table from the CSV"
    )
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.fixtures)))
        return
    names = models()
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        parser.error(f"not a torchvision classification model: {', '.join(unknown)}")
    rows: dict[str, dict[str, Any]] = dict(read_rows())
    for name in [] if args.table else [n for n in names if n in args.only] if args.only else names:
        row = measured(name, args.fixtures)
        rows[name] = row
        write_rows(rows)
        print(f"{name}: {row['status']} {_first_problem(row)}", flush=True)
    for name in names:
        rows.setdefault(name, {"model": name, "status": "not measured", "error": ""})
    write_rows(rows)
    write_docs(read_rows(), versions())


if __name__ == "__main__":
    main()
