"""The console's area and power lines."""

from __future__ import annotations

from accelsim.report.silicon import silicon_rows
from accelsim.report.summary import StepSummary
from tests.report.test_summary import smoke


def _power_line(node_nm: object) -> str:
    summary: StepSummary = smoke().base.step_summary()
    rows = dict(silicon_rows(summary.silicon, node_nm))
    return rows["power"]


def test_the_power_line_says_when_energy_is_not_scaled_to_the_node() -> None:
    assert "not scaled" not in _power_line(45)
    assert _power_line(7).endswith(
        "; dynamic energy as the energy table gives it, not scaled to 7 nm"
    )
