"""The row-buffer DRAM model (``dram.model: row_buffer``), timed by hand to the cycle.

A channel's share of ``b`` bytes with ``k`` misses holds it ``k * miss_cycles +
ceil(b / bandwidth)`` cycles after what it carries; a share misses when its stream
class or direction is not the channel's last (or it is the channel's first), and once
more for each row boundary it crosses.  Below: 1 B/cycle, latency 10, rows of 1,000 B,
misses of 30 cycles, unless said otherwise.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import accelsim
from accelsim.cli import main
from accelsim.config.dram import RowBufferDramSpec
from accelsim.config.run import EngineKind
from accelsim.errors import ConfigError
from accelsim.graph.ops import OpGraph
from accelsim.timing import compiled, engine, engines
from accelsim.timing.costs import UNIT_ARRAY
from accelsim.timing.flat import flatten
from accelsim.timing.machine import Machine
from accelsim.timing.memories.row_buffer import RowBuffer
from accelsim.timing.memory import MemoryState, Stream, StreamClass
from tests.sweep.test_sweep import SMOKE, sweep_file
from tests.timing.test_engine import costs, gemm, hw

ACT, WEIGHT = StreamClass.ACTIVATION, StreamClass.WEIGHT
SETS = (
    "dram.model=row_buffer",
    "dram.row_bytes=1000",
    "dram.miss_cycles=30",
    "dram.bandwidth_bytes_per_cycle=1",
    "dram.latency_cycles=10",
)


def memory(*sets: str) -> MemoryState:
    """A fresh row-buffer memory of :data:`SETS` and ``sets``."""
    return Machine.of(hw(*SETS, *sets)).memories()[0]


def test_a_hit_a_stream_change_and_a_direction_change_on_one_channel() -> None:
    state = memory()
    book = state.reserve
    # The channel's first share opens a row: 100 B hold it 30 + 100, 0..130, arrive 140.
    assert book(0, 100, Stream(ACT)) == 140
    # The same stream carries on in its row (100 of 1,000 B used): a hit, 130..330.
    assert book(0, 200, Stream(ACT)) == 340
    # A weight read is another stream: a miss, 330..410.
    assert book(0, 50, Stream(WEIGHT)) == 420
    # A weight write is another direction: a miss, 410..490.
    assert book(0, 50, Stream(WEIGHT, write=True)) == 500
    # The channel's free cycle, its open row's stream (2 * class + write), bytes used.
    assert state.state == [0, 490, 2 * WEIGHT + 1, 50]


def test_a_share_crossing_row_boundaries_opens_each_row() -> None:
    state = memory()
    book = state.reserve
    # 1,500 B from an idle channel: its first row and the one it crosses into, two
    # misses: 60 + 1,500, 0..1,560, arrive 1,570.
    assert book(0, 1500, Stream(ACT)) == 1570
    # 500 B more fill the second row to its last byte: a hit, 1,560..2,060.
    assert book(0, 500, Stream(ACT)) == 2070
    # The next byte is in the third row: a miss, 2,060..2,091.
    assert book(0, 1, Stream(ACT)) == 2101


def test_two_channels_deal_shares_and_keep_a_row_each() -> None:
    state = memory("dram.channels=2")
    book = state.reserve
    # 600 B are blocks of 256, 256 and 88 B from channel 0: channel 0 takes 344 B and
    # channel 1 256 B, each its first share (a miss): 0..374 and 0..286, arrive 384.
    assert book(0, 600, Stream(ACT)) == 384
    # 300 B from channel 1 (after the last block): 256 B on channel 1 (hit, 286..542) and
    # 44 B on channel 0 (hit, 374..418): arrive 552.
    assert book(0, 300, Stream(ACT)) == 552
    # A 100 B write from channel 1: another direction, a miss, 542..672, arrive 682.
    assert book(0, 100, Stream(ACT, write=True)) == 682
    assert state.model.channel_free(state.state) == (418, 672)
    assert state.model.bound(1000) == 500.0  # no misses: 1,000 B over two channels


def _chain(on: Machine, streams: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """End cycles of three chained GEMMs (reads 100, 200 and 50 B, the last also writes
    50 B) in both engines, asserted equal."""
    graph = OpGraph(ops=(gemm(0), gemm(1, 0), gemm(2, 1)), processor=(0, 0, 0))
    c = costs([UNIT_ARRAY] * 3, reads=[100, 200, 50], writes=[0, 0, 50], epilogue_bytes=[0, 0, 50])
    reference = engine.simulate(graph, c, on, streams)
    fast = compiled.simulate(graph, c, flatten(graph, c, on, streams))
    assert fast.end_cycle.tolist() == reference.end_cycle.tolist()
    assert fast.events == reference.events
    return reference.end_cycle.tolist()


def test_both_engines_time_the_same_misses() -> None:
    on = Machine.of(hw(*SETS))
    # Op 0 reads 100 B (the row opens: 0..130, arrive 140); op 1 at 140 reads 200 B of
    # the same stream (a hit: 140..340, arrive 350); op 2 at 350 reads 50 B of weights (a
    # miss: 350..430, arrive 440) and writes 50 B of them (a miss: 440..520, arrive 530).
    weights = np.array([ACT, ACT, WEIGHT]), np.array([ACT, ACT, WEIGHT])
    assert _chain(on, weights) == [140, 350, 530]
    # All activations: op 2's read is a hit (350..400, arrive 410), its write a miss
    # (another direction: 410..490, arrive 500).
    activations = np.zeros(3, np.int64), np.zeros(3, np.int64)
    assert _chain(on, activations) == [140, 350, 500]


@pytest.mark.parametrize(("channels", "model"), [(1, "fifo"), (2, "interleaved")])
def test_without_miss_cycles_it_is_the_model_without_rows(channels: int, model: str) -> None:
    rows = ["dram.model=row_buffer", f"dram.channels={channels}", "dram.miss_cycles=0"]
    plain = [f"dram.model={model}", f"dram.channels={channels}"]
    cycles = [accelsim.simulate(SMOKE, sets).base.total_cycles for sets in (rows, plain)]
    assert cycles[0] == cycles[1]
    with_misses = accelsim.simulate(SMOKE, [*rows[:2]]).base.total_cycles
    assert with_misses > cycles[0]


def test_the_memo_never_serves_another_models_or_streams_timing() -> None:
    # The same graph and costs on fifo, then row_buffer, then row_buffer with other
    # streams, in one process and through the memo: each gets its own timing.
    graph = OpGraph(ops=(gemm(0), gemm(1, 0)), processor=(0, 0))
    c = costs([UNIT_ARRAY] * 2, reads=[100, 200])
    fifo = Machine.of(hw("dram.bandwidth_bytes_per_cycle=1", "dram.latency_cycles=10"))
    rows = Machine.of(hw(*SETS))
    same = np.zeros(2, np.int64), np.zeros(2, np.int64)
    other = np.array([ACT, WEIGHT]), np.zeros(2, np.int64)
    ends = [
        engines.simulate(graph, c, on, EngineKind.SIMPY, streams).end_cycle.tolist()
        for on, streams in ((fifo, same), (rows, same), (rows, other))
    ]
    # fifo: 0..100, 110; 110..310, 320.  row_buffer: a miss, 0..130, 140; a hit,
    # 140..340, 350; with a weight read, a miss, 140..370, 380.
    assert ends == [[110, 320], [140, 350], [140, 380]]


def test_the_spec_names_the_model_and_its_parameters() -> None:
    spec = hw("dram.model=row_buffer").dram
    assert isinstance(spec, RowBufferDramSpec)
    assert (spec.row_bytes, spec.miss_cycles, spec.channels) == (2048, 30, 1)
    dumped = hw("dram.model=row_buffer", "dram.channels=2").model_dump(mode="json")["dram"]
    assert {k: dumped[k] for k in ("model", "channels", "row_bytes", "miss_cycles")} == {
        "model": "row_buffer",
        "channels": 2,
        "row_bytes": 2048,
        "miss_cycles": 30,
    }
    model = Machine.of(hw("dram.model=row_buffer", "dram.channels=4")).dram[0]
    assert isinstance(model, RowBuffer) and model.capacity_bytes == 4 * 16 * 2**30
    with pytest.raises(ConfigError) as caught:
        hw("dram.model=row_buffer", "dram.row_bytes=0")
    assert str(caught.value) == "--set: dram.row_bytes: input should be greater than 0 (got 0)"
    with pytest.raises(ConfigError) as caught:
        hw("dram.miss_cycles=3")
    assert str(caught.value).startswith("--set: dram.miss_cycles: unknown key")


def test_summary_json_records_the_model_and_its_parameters() -> None:
    sets = ["dram.model=row_buffer", "dram.row_bytes=1024", "dram.miss_cycles=20"]
    record = accelsim.simulate(SMOKE, sets).base.summary()
    design = record["design"]
    assert {k: design[k] for k in ("dram_model", "dram_channels")} == {
        "dram_model": "row_buffer",
        "dram_channels": 1,
    }
    assert (design["dram_row_bytes"], design["dram_miss_cycles"]) == (1024, 20)


def test_a_sweep_over_the_model_and_its_parameters_runs_resumes_and_collects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_file(
        tmp_path / "sweeps",
        "name: rows\nset:\n  dram.model: row_buffer\n"
        "grid:\n  dram.row_bytes: [512, 2048]\n  dram.miss_cycles: [0, 40]\n",
    )
    models = sweep_file(
        tmp_path / "sweeps",
        "name: models\ngrid:\n  dram.model: [fifo, row_buffer]\n",
        name="m.yaml",
    )
    out = tmp_path / "out"
    for sweep, points in ((path, 4), (models, 2)):
        assert main(["sweep", str(sweep), "--out", str(out), "--keep-points", "all"]) == 0
        assert (
            f"{points} points, 0 already stored, {points} run (0 failed)" in capsys.readouterr().out
        )
        assert main(["sweep", str(sweep), "--out", str(out)]) == 0
        assert f"{points} points, {points} already stored, 0 run" in capsys.readouterr().out
    table = tmp_path / "rows.csv"
    assert main(["collect", str(out / "rows"), "--csv", str(table)]) == 0
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        sets = [
            "dram.model=row_buffer",
            f"dram.row_bytes={row['dram.row_bytes']}",
            f"dram.miss_cycles={row['dram.miss_cycles']}",
        ]
        expected = accelsim.simulate(SMOKE, sets).base.step_summary()
        assert int(row["total_cycles"]) == expected.total_cycles
        assert (row["dram_model"], row["dram_row_bytes"]) == ("row_buffer", row["dram.row_bytes"])
        summary = json.loads(
            (out / "rows" / "points" / row["identity"] / "summary.json").read_text()
        )
        assert summary["design"]["dram_miss_cycles"] == int(row["dram.miss_cycles"])
    cycles = {(r["dram.row_bytes"], r["dram.miss_cycles"]): int(r["total_cycles"]) for r in rows}
    assert cycles[("512", "0")] == cycles[("2048", "0")]  # no miss costs anything
    assert cycles[("512", "40")] > cycles[("2048", "40")] > cycles[("2048", "0")]
    table = tmp_path / "models.csv"
    assert main(["collect", str(out / "models"), "--csv", str(table)]) == 0
    with table.open(encoding="utf-8") as handle:
        by_model = {r["dram.model"]: r for r in csv.DictReader(handle)}
    assert int(by_model["row_buffer"]["total_cycles"]) > int(by_model["fifo"]["total_cycles"])
    assert by_model["fifo"]["dram_model"] == "fifo"
