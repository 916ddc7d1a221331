"""``accelsim run`` of a symmetric data-parallel step: simulated once, one replica
standing for every processor, and every report written from it equal to the step of
every replica's (``symmetry: full``), number for number."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.graph.ops import CommOp
from accelsim.report.result import RunResult
from accelsim.report.tables import STANDS_FOR_COLUMN
from accelsim.timing.symmetry import UNBALANCED
from tests.report.test_figures import svg_text
from tests.timing.test_replica import CASES, DATA_PARALLEL
from tests.timing.test_replica import full as every_replica
from tests.timing.test_symmetry import BUCKETS, MLP
from tests.timing.test_symmetry import simulated as each_role

FULL = "run.data_parallel.symmetry=full"


def _inputs(*sets: str) -> Any:
    return load_inputs(MLP, parse_sets([*DATA_PARALLEL, *sets]))


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize("buckets", [[], [BUCKETS]], ids=["one per gradient", "buckets"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_step_placed_once_reports_what_the_step_of_every_replica_reports(
    case: str, buckets: list[str], engine: str
) -> None:
    sets = [*CASES[case], *buckets, f"timing.engine={engine}"]
    once = simulate_run(_inputs(*sets))
    whole = every_replica(*sets)
    processors = whole.hardware.processors
    comms = sum(isinstance(op, CommOp) for op in once.graph.ops)
    assert once.trace.replicas == processors
    assert (len(once.graph.ops) - comms) * processors + comms == len(whole.graph.ops)
    # summary.json, number for number (energy too: both add each processor's sum
    # correctly rounded), but the `symmetry` block the full step has no need for.
    record, full = once.summary(), whole.summary()
    assert record.pop("symmetry") == {
        "simulated_processors": [0],
        "inferred_from": [None, *[0] * (processors - 1)],
    }
    assert json.dumps(record) == json.dumps(full)
    # Every table lists every processor.
    assert all(len(cycles) == processors for cycles in record["busy_cycles"].values())
    # The step placed whole and simulated once per role (the path symmetry: auto took
    # before the step was placed once) says the same, symmetry too.
    roles = each_role(*sets).summary()
    assert json.dumps(once.summary()) == json.dumps(roles)
    assert once.layer_rows() == whole.layer_rows()
    # What the techniques read of a step: its bounds and its layers' busy cycles.
    assert once.cycle_bounds() == whole.cycle_bounds()
    assert once.ordered_cycle_bounds() == whole.ordered_cycle_bounds()
    assert once.layer_phase_cycles() == whole.layer_phase_cycles()
    assert once.kernels() == whole.kernels()


@pytest.mark.parametrize("setting", ["mapping.search=per_layer", "lowering.compile=fused"])
def test_a_searched_mapping_and_a_fused_program_report_alike_placed_once(setting: str) -> None:
    sets = [*CASES["ring of 4"], setting]
    record, full = simulate_run(_inputs(*sets)).summary(), every_replica(*sets).summary()
    assert record.pop("symmetry")["simulated_processors"] == [0]
    assert json.dumps(record) == json.dumps(full)
    if setting.startswith("mapping"):
        # a replica's 3 forward, 2 dX (none into the input) and 3 dW GEMMs, 4 times
        assert record["mapping"]["gemms"] == 4 * 8


def _ops_csv(result: RunResult) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(result.ops_csv())))


def test_ops_csv_has_processor_0s_rows_and_the_all_reduces_with_how_many_each_stands_for() -> None:
    sets = CASES["ring of 4"]
    once, whole = simulate_run(_inputs(*sets)), every_replica(*sets)
    rows, full = _ops_csv(once), _ops_csv(whole)
    kept = [r for r in full if r["processor"] == "0"]
    assert len(rows) == len(kept) == 29
    for row, same in zip(rows, kept, strict=True):
        stands = row.pop(STANDS_FOR_COLUMN)
        assert stands == ("1" if row["kind"] == "comm" else "4")
        assert row.pop("inferred_from") == ""
        assert {**row, "op_id": ""} == {**same, "op_id": ""}
    # What the rows stand for adds up to the step: the replica's MACs four times.
    macs = sum(int(r["macs"]) * int(r[STANDS_FOR_COLUMN]) for r in _ops_csv(once))
    assert macs == sum(int(r["macs"]) for r in full) == once.summary()["macs"]["total"]
    assert sum(int(r[STANDS_FOR_COLUMN]) for r in _ops_csv(once)) == len(full) == 98
    # A step of every replica has no such column.
    assert STANDS_FOR_COLUMN not in full[0]


def test_the_gantt_chart_of_a_step_placed_once_draws_processor_0(tmp_path: Path) -> None:
    from accelsim.report import plots

    ops = tmp_path / "ops.csv"
    ops.write_text(simulate_run(_inputs(*CASES["ring of 4"])).ops_csv())
    plots.plot_gantt(ops, tmp_path / "g.svg", "t", 64.0, 4, "svg")
    names = set(svg_text(tmp_path / "g.svg"))
    assert {"P0 array", "P0 vector", "P0 DRAM"} <= names
    assert not {"P1 DRAM", "P1 array"} & names


def test_a_step_that_cannot_be_placed_once_takes_the_path_of_every_replica() -> None:
    sets = [*CASES["ring of 4"], "dram.sharing=shared"]
    result = simulate_training(_inputs(*sets)).base
    assert result.trace.replicas == 1
    assert len(result.graph.ops) == 98


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *sets: str) -> str:
    argv = ["run", str(MLP), "--out", str(tmp_path)]
    for s in [*DATA_PARALLEL, "processors=2048", "batch_size=2048", *sets]:
        argv += ["--set", s]
    assert main(argv) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


ABOVE = (
    "--set: processors: above 1,024 only with parallel.pipeline above 1 or for a data-parallel"
    " step simulated once, one replica standing for every processor, and this one cannot be:"
)


def test_above_1024_processors_a_step_that_cannot_be_placed_once_is_refused_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # From the specs alone ...
    assert _refused(tmp_path, capsys, FULL) == (
        f"{ABOVE} run.data_parallel.symmetry: full simulates every processor (got 2048)"
    )
    # ... or once placed: a ring over a torus's processors in order loads its links
    # unevenly.
    torus = ["interconnect.topology=torus", "interconnect.dims=[2, 1024]"]
    assert _refused(tmp_path, capsys, *torus, "interconnect.algorithm=ring") == (
        f"{ABOVE} {UNBALANCED} (got 2048)"
    )
    assert not any(tmp_path.iterdir())


def test_8192_processors_run_as_one_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(MLP), "--out", str(tmp_path)]
    for s in [*DATA_PARALLEL, "processors=8192", "batch_size=8192"]:
        argv += ["--set", s]
    assert main(argv) == 0
    assert "simulated       p0 (p1-p8191 as p0 inferred)" in capsys.readouterr().out
    (summary,) = tmp_path.glob("*/summary.json")
    record = json.loads(summary.read_text())
    # the replica's 23 ops on every processor, its 6 all-reduces once
    assert (record["processors"], record["ops"]) == (8192, 8192 * 23 + 6)
    busy = record["busy_cycles"]["array"]
    assert len(busy) == 8192 and busy == [busy[0]] * 8192
    assert record["symmetry"]["inferred_from"] == [None, *[0] * 8191]
