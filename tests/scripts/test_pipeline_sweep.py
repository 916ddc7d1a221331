"""The pipeline sweep script's summary (scripts/pipeline_sweep.py), on rows made by hand."""

from __future__ import annotations

import pytest

from tests.conftest import load_script


def _row(model: str, processors: int, schedule: str, speedup: float) -> dict[str, object]:
    return {
        "model": model,
        "processors": processors,
        "schedule": schedule,
        "speedup": speedup,
        "speedup_bound": 2 * speedup,
        "binding_bound": "dram",
        "task_gain": 1.5,
    }


def test_table_without_layerpipe(capsys: pytest.CaptureFixture[str]) -> None:
    """``--schedules gpipe,pipedream``: the table prints (LayerPipe's columns nan) and the
    LayerPipe-over-PipeDream summary, which needs both, is left out (it used to crash)."""
    rows = [
        _row(model, p, schedule, speedup)
        for model, p, schedule, speedup in [
            ("a", 1, "gpipe", 1.0),
            ("a", 1, "pipedream", 1.0),
            ("b", 1, "gpipe", 1.0),
            ("b", 1, "pipedream", 1.0),
            ("a", 2, "gpipe", 1.5),
            ("a", 2, "pipedream", 2.0),
            ("b", 2, "gpipe", 1.5),
            ("b", 2, "pipedream", 8.0),
        ]
    ]
    load_script("pipeline_sweep")._table(rows, ["gpipe", "pipedream"], 2, "shared")
    lines = capsys.readouterr().out.splitlines()
    # P = 2: geometric means 1.5 and sqrt(2 * 8) = 4; PipeDream's bound twice that.
    assert lines[-1].split() == [
        "2",
        "1.500",
        "4.000",
        "8.000",
        "nan",
        "nan",
        "nan",
        "1.500",
        "pi:dram",
        "2",
    ]
    assert not any("LayerPipe / PipeDream" in line for line in lines)


def test_table_with_both_prints_the_gains(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        _row("a", 1, "pipedream", 1.0),
        _row("a", 1, "layerpipe", 1.0),
        _row("a", 2, "pipedream", 2.0),
        _row("a", 2, "layerpipe", 2.5),
    ]
    load_script("pipeline_sweep")._table(rows, ["pipedream", "layerpipe"], 2, "per_processor")
    out = capsys.readouterr().out
    assert "LayerPipe / PipeDream" in out
    gains = {line.split()[0]: line.split()[1:] for line in out.splitlines()[-2:]}
    assert gains == {
        "a": ["+25.0%", "-", "+25.0%", "P=2"],
        "overall": ["+25.0%", "-", "+25.0%", "a", "P=2"],
    }
