"""ops.csv is formatted a column at a time; its text must be what csv.writer writes
for the same rows, quoting included."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.report.tables import OP_COLUMNS, ops_csv
from tests.conftest import ROOT


def written(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(OP_COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue()


def test_ops_csv_is_the_csv_writers_text_for_awkward_values() -> None:
    names = ["plain", "a,b", 'say "hi"', "two\nlines", " lead", "", "é"]
    columns: list[list[Any]] = [list(range(len(names)))]
    for j in range(1, len(OP_COLUMNS)):
        if j in (1, 2):  # name, layer
            columns.append(names[j - 1 :] + names[: j - 1])
        elif j == 5:  # a GEMM shape: an integer, or empty for other ops
            columns.append([3, "", 2**62, "", 0, 7, ""])
        elif j == 15:  # floats print as repr
            columns.append([0.0, 1e-7, 0.1 + 0.2, 123456789.125, 1e22, -0.0, 0.5])
        elif j == 16:  # repeated integers, formatted once
            columns.append([5, 5, 7, 5, 2**63, 7, 5])
        elif j == 19:  # repeated floats, formatted once
            columns.append([0.1, 0.1, 2.5, 0.1, 1e-9, 2.5, 0.1])
        elif j == 31:  # zero and minus zero are equal but print differently
            columns.append([0.0, -0.0, 0.0, 0.0, -0.0, 0.5, 0.5])
        else:
            columns.append([j * 10**k for k in range(len(names))])
    assert ops_csv(columns) == written(zip(*columns, strict=True))


def test_a_run_writes_the_rows_it_reports() -> None:
    inputs = load_inputs(
        ROOT / "configs" / "runs" / "mlp.yaml",
        parse_sets(["processors=3", "run.techniques={pipedream: {mini_batches: 9}}"]),
    )
    result = simulate_training(inputs)
    for step in (result.base, *result.steps.values()):
        rows = [[row[c] for c in OP_COLUMNS] for row in step.op_rows()]
        assert step.ops_csv() == written(rows)
