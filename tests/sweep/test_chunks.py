"""How a sweep's points are cut into chunks: at most 16 points, about eight chunks per
worker, and whole runs of points that differ only along the fastest dimension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.sweep import plan_sweep
from accelsim.sweep.executors import chunked
from tests.conftest import ROOT


def _lengths(chunks: list[list[Any]]) -> list[int]:
    return [len(chunk) for chunk in chunks]


def test_without_runs_chunks_are_equal_slices() -> None:
    tasks: list[Any] = list(range(40))  # one worker: ceil(40 / 8) = 5 points a chunk
    assert chunked(tasks, 1) == [tasks[i : i + 5] for i in range(0, 40, 5)]
    assert _lengths(chunked(list(range(1000)), 2)) == [16] * 62 + [8]


def test_runs_stay_whole_where_they_fit() -> None:
    tasks: list[Any] = list(range(40))
    # runs of 3 never share a chunk of 5 (the last run, of one point, joins the one
    # before); runs of 2 go two to a chunk
    assert _lengths(chunked(tasks, 1, [i // 3 for i in range(40)])) == [3] * 12 + [4]
    assert _lengths(chunked(tasks, 1, [i // 2 for i in range(40)])) == [4] * 10
    # a run of 7 is cut at the chunk's 5 points; its last 2 start the next chunk alone
    chunks = chunked(tasks, 1, [i // 7 for i in range(40)])
    assert _lengths(chunks) == [5, 2] * 5 + [5]
    assert [c[0] for c in chunks] == [0, 5, 7, 12, 14, 19, 21, 26, 28, 33, 35]
    assert [t for c in chunks for t in c] == tasks


def test_a_sweeps_fastest_dimension(tmp_path: Path) -> None:
    path = tmp_path / "sw.yaml"
    base = ROOT / "configs" / "runs" / "default.yaml"
    path.write_text(
        f"name: f\nbase: {base}\ngrid:\n  array.rows: [16, 32]\n  buffers.ifmap_kib: [128]\n",
        encoding="utf-8",
    )
    assert plan_sweep(path).spec.fastest() == ["buffers.ifmap_kib"]
    path.write_text(
        f"name: f\nbase: {base}\ngrid:\n  array.rows: [16, 32]\nzip:\n"
        "  - array.cols: [16, 32]\n    buffers.ifmap_kib: [128, 256]\n",
        encoding="utf-8",
    )
    assert plan_sweep(path).spec.fastest() == ["array.cols", "buffers.ifmap_kib"]
