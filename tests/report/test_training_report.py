"""The typed training report: whole-training totals by hand, the scalars of a CSV row."""

from __future__ import annotations

import pytest

from accelsim.report.console import training_table
from accelsim.report.training import (
    BASE,
    Section,
    StepCost,
    Totals,
    TrainingPlan,
    TrainingReport,
)
from accelsim.units import plural


def cost(cycles: float, bound: float, binding: str = "dram") -> StepCost:
    return StepCost(cycles, 10 * cycles, 2 * cycles, bound, binding)


def report() -> TrainingReport:
    """Two epochs of 5 steps: the first all BP, the second a quarter GP."""
    plan = TrainingPlan(2, 5, ({"bp": 1.0, "gp": 0.0}, {"bp": 0.75, "gp": 0.25}))
    steps = {BASE: cost(100, 80), "bp": cost(120, 90), "gp": cost(40, 30, "compute")}
    sections = [
        Section("a", {"epochs": 3, "share": 0.5, "table": [1, 2], "note": "x"}, notes=("n",)),
        Section("b", {"share": 0.25, "speedup": 9.0}, warnings=("clamped",)),
    ]
    return TrainingReport.of(("a", "b"), plan, steps, sections)


def test_totals_speedup_bound_and_reductions_by_hand() -> None:
    r = report()
    # technique: 5 x (120) + 5 x (0.75 x 120 + 0.25 x 40) = 600 + 500 = 1,100 cycles
    assert r.totals["cycles"] == Totals(2 * 5 * 100, 1100)
    # bounds: 5 x 90 + 5 x (0.75 x 90 + 0.25 x 30) = 450 + 375 = 825
    assert r.totals["bound_cycles"] == Totals(2 * 5 * 80, 825)
    assert r.speedup == pytest.approx(1000 / 1100)
    assert r.speedup_bound == pytest.approx(1000 / 825)
    assert r.energy_reduction == pytest.approx(1 - 11_000 / 10_000)
    assert r.dram_reduction == pytest.approx(1 - 2200 / 2000)
    assert r.binding_bound == "bp dram, gp compute"
    same = TrainingReport.of(("a",), r.plan, {**r.steps, "gp": cost(40, 30)}, [])
    assert same.binding_bound == "dram"
    assert r.notes == ("a: n",) and r.warnings == ("b: clamped",)


def test_flat_rows_name_clashing_scalars_after_their_technique() -> None:
    row = report().flat()
    assert row["techniques"] == "a+b"
    assert row["bp_step_cycles"] == 120 and row["base_step_cycles"] == 100
    # a's "epochs" and "note" are its own; "share" is in both sections; b's "speedup"
    # would hide the run's
    assert row["epochs"] == 3 and row["note"] == "x"
    assert row["a.share"] == 0.5 and row["b.share"] == 0.25
    assert row["speedup"] == pytest.approx(1000 / 1100) and row["b.speedup"] == 9.0
    assert "table" not in row and "a.table" not in row


def test_to_dict_puts_the_shared_numbers_first_and_the_sections_last() -> None:
    d = report().to_dict()
    assert list(d)[:5] == ["techniques", "epochs", "batches_per_epoch", "steps", "kinds_by_epoch"]
    assert list(d)[-1] == "sections"
    assert d["cycles"] == {"baseline": 1000, "technique": 1100}
    assert d["sections"]["a"]["notes"] == ["n"] and d["sections"]["b"]["warnings"] == ["clamped"]
    assert d["warnings"] == ["b: clamped"]


def test_flat_rows_round_cycles_and_leave_internal_details_out() -> None:
    plan = TrainingPlan(1, 1, ({"p": 1.0},))
    steps = {BASE: cost(101, 80), "p": cost(686_647.5, 30)}
    details = {"stages": 2, "steady_cycles_per_minibatch": 686_647.5,
               "warmup_cycles": 2.49, "mini_batches_simulated": 8, "gain": 1.25}  # fmt: skip
    section = Section("p", details, internal=("mini_batches_simulated",))
    row = TrainingReport.of(("p",), plan, steps, [section]).flat()
    assert (row["p_step_cycles"], row["base_step_cycles"]) == (686_648, 101)
    assert (row["steady_cycles_per_minibatch"], row["warmup_cycles"]) == (686_648, 2)
    assert (row["stages"], row["gain"]) == (2, 1.25)
    assert "mini_batches_simulated" not in row and "p.mini_batches_simulated" not in row


@pytest.mark.parametrize(
    ("epochs", "steps", "line"),
    [(90, 1, "90 epochs of 1 step"), (1, 5, "1 epoch of 5 steps"), (2, 5, "2 epochs of 5 steps")],
)
def test_the_printed_training_counts_epochs_and_steps_in_number(
    epochs: int, steps: int, line: str
) -> None:
    shares = tuple({"bp": 1.0, "gp": 0.0} for _ in range(epochs))
    kinds = {BASE: cost(100, 80), "bp": cost(120, 90), "gp": cost(40, 30)}
    plan = TrainingPlan(epochs, steps, shares)
    table = training_table(TrainingReport.of(("a",), plan, kinds, [Section("a", {})]))
    assert [row.split(None, 1)[1] for row in table.splitlines() if "training" in row] == [line]


def test_plural_is_the_noun_for_one_and_its_plural_otherwise() -> None:
    assert [plural(n, "step") for n in (0, 1, 2)] == ["steps", "step", "steps"]
    assert plural(1, "mismatch", "mismatches") == "mismatch"
    assert plural(3, "mismatch", "mismatches") == "mismatches"
