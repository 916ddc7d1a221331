"""Regression tests of input sizes: a topology's rows and a measurements file's GEMMs
are capped (refused at the first row past the cap, in seconds), what is accepted
costs each distinct GEMM once, a topology layer name or row that ``layer`` and
``run`` would refuse is refused when the file is read, by ``check`` too, and a step
graph grows linearly with its layers, its updates timed as if each waited for the
whole backward pass."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest

from accelsim import cli
from accelsim.calibration import measurements, model
from accelsim.calibration.fit import check_folds
from accelsim.calibration.measurements import Measurements, read_measurements
from accelsim.config.enums import PsumPolicy
from accelsim.config.loader import load_hardware
from accelsim.config.overrides import Override
from accelsim.driver import layer
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import simulate_graph, simulate_run
from accelsim.errors import InputError, WorkloadError
from accelsim.graph.links import wait_for
from accelsim.graph.ops import OpGraph, Phase, replaced
from accelsim.lowering.step import backward_sinks, lower
from accelsim.mapping import placement
from accelsim.workload import topology
from accelsim.workload.topology import read_topology
from tests.conftest import ROOT
from tests.hardening.test_hardening import run_cli

HARDWARE = ROOT / "configs" / "hardware" / "default.yaml"
TPU = ROOT / "configs" / "hardware" / "tpu_v6e.yaml"


def problems_of(path: Path) -> list[str]:
    with pytest.raises(WorkloadError) as caught:
        read_topology(path)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("a\x00b", "a\\x00b"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\tb", "a\\tb"),
        ("a\x0cb", "a\\x0cb"),
        ("a\x85b", "a\\x85b"),
        ("a\u2028b", "a\\u2028b"),
    ],
)
def test_a_topology_name_with_a_control_character_is_refused_where_it_is(
    tmp_path: Path, name: str, shown: str
) -> None:
    # NEL, U+2028 and a form feed end a line for str.splitlines, not for a CSV file:
    # they stay in the name, which refuses them
    path = tmp_path / "t.csv"
    path.write_text(f"Layer, M, N, K,\nok, 8, 8, 8,\n{name}, 8, 8, 8,\n", encoding="utf-8")
    assert problems_of(path) == [
        f"{path}: row 3, Layer: the name holds a control or other non-printable"
        f" character (got '{shown}')"
    ]


def test_check_run_and_layer_refuse_a_nul_in_a_topology_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width,"
                    " Channels, Num Filter, Strides,\nc\x000, 8, 8, 3, 3, 4, 4, 1,\n",
                    encoding="utf-8")  # fmt: skip
    message = (
        f"{path}: row 2, Layer name: the name holds a control or other non-printable"
        " character (got 'c\\x000')\n"
    )
    out_dir = tmp_path / "out"
    for args in (
        ("check", path),
        ("layer", "--hardware", HARDWARE, "--topology", path),
        ("run", ROOT / "configs/runs/mlp.yaml", "--set", f"workload={path}", "--out", out_dir),
    ):
        assert run_cli(capsys, *args) == (cli.EXIT_INPUT, "", message)
    assert not out_dir.exists()


def test_a_row_whose_largest_gemm_passes_2_62_macs_is_refused_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GEMM row: 2^18 * 2^18 * 2^18 = 2^54 MACs.  Conv row: forward P Q R S C NF =
    # 1 * 1 * 2^12 * 2^12 * 2^12 * 1 = 2^36, but dX is H W C NF R S = 2^12 * 2^12 *
    # 2^12 * 1 * 2^12 * 2^12 = 2^60; the last row's 2^48 passes.
    path = tmp_path / "t.csv"
    path.write_text(
        "Layer, M, N, K,\n"
        "g, 2097152, 2097152, 2097152,\n"
        "c, 16384, 16384, 4096, 4096, 4096, 1, 1,\n"
        "ok, 4096, 4096, 1, 1, 4096, 4096, 4096,\n",
        encoding="utf-8",
    )
    assert topology.largest_macs("conv", (4096, 4096, 1, 1, 4096, 4096, 4096)) == 2**48
    expected = (
        f"{path}: row 2: its largest GEMM's MACs (9.22e+18) exceed the limit of 2^62"
        " (4.61e+18) (got [2097152, 2097152, 2097152])\n"
        f"{path}: row 3: its largest GEMM's MACs (1.84e+19) exceed the limit of 2^62"
        " (4.61e+18) (got [16384, 16384, 4096, 4096, 4096, 1, 1])\n"
    )
    assert run_cli(capsys, "check", path) == (cli.EXIT_INPUT, "", expected)
    args = ("layer", "--hardware", HARDWARE, "--topology", path, "--phase", "fwd")
    assert run_cli(capsys, *args) == (cli.EXIT_INPUT, "", expected)


def test_a_topology_of_more_rows_than_the_cap_is_refused_at_the_row_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topology, "MAX_ROWS", 3)
    path = tmp_path / "t.csv"
    rows = "".join(f"l{i}, 8, 8, 8,\n" for i in range(3))
    path.write_text(f"Layer, M, N, K,\n{rows}", encoding="utf-8")
    assert [row.name for row in read_topology(path)] == ["l0", "l1", "l2"]
    path.write_text(f"Layer, M, N, K,\n# a comment\n{rows}\nl3, 8, 8, 8,\nbad\n", "utf-8")
    # the row past the cap is reported, and nothing after it is read
    assert problems_of(path) == [f"{path}: row 7: more than 3 layer rows (got 'l3, 8, 8, 8,')"]


def test_the_row_cap_is_checked_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    rows = "l, 8, 8, 8,\n" * (topology.MAX_ROWS + 1)
    path.write_text(f"Layer, M, N, K,\n{rows}", encoding="utf-8")
    start = time.perf_counter()
    problems = problems_of(path)
    assert time.perf_counter() - start < 10
    assert problems == [
        f"{path}: row {topology.MAX_ROWS + 2}: more than 100,000 layer rows (got 'l, 8, 8, 8,')"
    ]


def test_layer_topology_simulates_each_distinct_gemm_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "Layer, M, N, K,\na, 8, 16, 32,\nb, 8, 16, 32,\nc, 64, 8, 8,\nd, 8, 16, 32,\n", "utf-8"
    )
    args = ("layer", "--hardware", HARDWARE, "--topology", path, "--json")
    code, before, _ = run_cli(capsys, *args)
    simulated = []
    original = layer.simulate_layer

    def counted(*given: object, **named: object) -> object:
        simulated.append(given[2])
        return original(*given, **named)  # type: ignore[arg-type]

    monkeypatch.setattr("accelsim.cli_layer.simulate_layer", counted)
    assert run_cli(capsys, *args) == (code, before, "")
    assert [(g.m, g.n, g.k) for g in simulated] == [(8, 16, 32), (64, 8, 8)]
    single = ("layer", "--hardware", HARDWARE, "--gemm", 8, 16, 32, "--json")
    _, alone, _ = run_cli(capsys, *single)
    records = json.loads(before)
    assert [r.pop("layer") for r in records] == ["a", "b", "c", "d"]
    assert records[0] == records[1] == records[3] == json.loads(alone)


def gemms(dims: list[tuple[int, int, int]]) -> Measurements:
    m, n, k = (np.asarray(d, np.int64) for d in zip(*dims, strict=True))
    return Measurements(m, n, k, np.ones(len(dims)))


def test_calibrate_costs_each_distinct_gemm_once_per_orientation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hw = load_hardware(TPU)
    dims = [(128, 256, 512), (300, 100, 77), (128, 256, 512), (128, 256, 512)]
    each = [model.gemm_features(hw, gemms([d]), False, PsumPolicy.CHUNK) for d in dims]
    costed = []
    original = model._lone_gemm_costs

    def counted(*given: object) -> object:
        costed.append(given[1:4])
        return original(*given)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "_lone_gemm_costs", counted)
    together = model.gemm_features(hw, gemms(dims), False, PsumPolicy.CHUNK)
    # tpu_v6e has mapping.orientation: best, so each GEMM is costed transposed too
    assert costed == [(128, 256, 512), (300, 100, 77), (256, 128, 512), (100, 300, 77)]
    for name in ("given", "transposed"):
        for column in ("compute_cycles", "read_bytes", "prologue_bytes", "epilogue_bytes"):
            assert getattr(getattr(together, name), column).tolist() == [
                getattr(getattr(one, name), column)[0] for one in each
            ]
    costed.clear()
    timed = model.engine_us(hw, gemms(dims), False)
    assert costed == [(128, 256, 512), (300, 100, 77)]
    assert timed.tolist() == [model.engine_us(hw, gemms([d]), False)[0] for d in dims]


def test_a_measurements_file_of_more_gemms_than_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measurements, "MAX_GEMMS", 2)
    path = tmp_path / "m.csv"
    path.write_text("M,N,K,dtype,latency_us\n8,8,8,bf16,1\n8,8,8,bf16,1\n", encoding="utf-8")
    assert len(read_measurements(path, "bf16")) == 2
    with path.open("a", encoding="utf-8") as f:
        f.write("16,8,8,bf16,2\n")
    with pytest.raises(InputError) as caught:
        read_measurements(path, "bf16")
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: more than 2 measured GEMMs (got '3 rows')"
    ]


MLP_RUN = ROOT / "configs" / "runs" / "mlp.yaml"


def chain_inputs(tmp_path: Path, rows: int, *sets: tuple[str, object]) -> RunInputs:
    """The MLP run on a topology of ``rows`` equal GEMM rows, each reading the last."""
    path = tmp_path / f"chain{rows}.csv"
    rows_text = "".join(f"l{i}, 4, 8, 8,\n" for i in range(rows))
    path.write_text(f"Layer, M, N, K,\n{rows_text}", encoding="utf-8")
    overrides = [
        Override(key, value, "--set", key) for key, value in (("workload", str(path)), *sets)
    ]
    return load_inputs(MLP_RUN, overrides)


def placed_step(inputs: RunInputs) -> tuple[OpGraph, tuple[int, ...]]:
    """The run's step placed on one processor with its updates, and the ops that end
    its backward pass."""
    run = inputs.run
    step = lower(inputs.infos, inputs.workload, run.batch_size, inputs.hardware.word_bytes,
                 run.lowering.strided_dx)  # fmt: skip
    return placement.single(step, run.optimizer, inputs.hardware.word_bytes), backward_sinks(step)


@pytest.mark.parametrize("rows", [1_000, 20_000])
def test_each_update_of_a_chain_waits_for_one_earlier_update_not_the_whole_backward_pass(
    tmp_path: Path, rows: int
) -> None:
    graph, sinks = placed_step(chain_inputs(tmp_path, rows))
    updates = [op for op in graph.ops if op.phase is Phase.UPDATE]
    # the backward pass ends at every row's dW GEMM; the first update waits for all
    # of them, each later one for the update before it and its own dW
    assert len(sinks) == len(updates) == rows
    assert updates[0].deps == sinks
    for before, update in itertools.pairwise(updates):
        (dw,) = (d for group in update.sources for d in group)
        assert update.after == update.deps == (dw, before.op_id)
    # so the graph grows linearly: ops forward n + 1 (the loss), input gradients n
    # (the loss's, then every row's but the first), dW n, updates n; dependencies
    # n, n, 2 n - 1 (the first row reads the workload's input) and n + 2 (n - 1)
    assert len(graph.ops) == 4 * rows + 1
    assert sum(len(op.deps) for op in graph.ops) == 7 * rows - 3


@pytest.mark.parametrize(
    "sets",
    [
        (),
        (("optimizer", {"kind": "momentum", "clip_global_norm": 1.0}),),
        (("optimizer", {"kind": "adam", "master_weights": "fp32"}), ("batch_size", 3)),
    ],
)
@pytest.mark.parametrize("engine", ["simpy", "compiled"])
def test_updates_after_one_update_run_when_they_would_after_the_whole_backward_pass(
    tmp_path: Path, sets: tuple[tuple[str, object], ...], engine: str
) -> None:
    inputs = chain_inputs(tmp_path, 12, ("timing.engine", engine), *sets)
    graph, sinks = placed_step(inputs)
    updates = [op.op_id for op in graph.ops if op.phase is Phase.UPDATE]
    barrier = wait_for(graph, {u: sinks for u in updates})  # every update after every sink
    assert sum(map(len, (op.deps for op in barrier.ops))) > sum(
        map(len, (op.deps for op in graph.ops))
    )
    chained, full = (simulate_graph(inputs, g).trace for g in (graph, barrier))
    assert chained.start_cycle.tolist() == full.start_cycle.tolist()
    assert chained.end_cycle.tolist() == full.end_cycle.tolist()
    assert chained.events == full.events
    # an update that waited for its own gradient alone would start earlier
    alone = replaced_deps(graph, updates)
    early = simulate_graph(inputs, alone).trace
    assert early.start_cycle[updates[-1]] < full.start_cycle[updates[-1]]


def replaced_deps(graph: OpGraph, updates: list[int]) -> OpGraph:
    """``graph`` with each update waiting only for the ops making what it reads."""
    ops = list(graph.ops)
    for u in updates:
        made = tuple(sorted({d for group in ops[u].sources for d in group}))
        ops[u] = replaced(ops[u], deps=made, after=())
    return dataclasses.replace(graph, ops=tuple(ops))


@pytest.mark.slow
def test_a_run_of_a_100000_row_chain_finishes(tmp_path: Path) -> None:
    inputs = chain_inputs(tmp_path, topology.MAX_ROWS)
    result = simulate_run(inputs)
    assert len(result.graph.ops) == 4 * topology.MAX_ROWS + 1


@pytest.mark.parametrize(
    ("gemm_rows", "folds", "problem"),
    [
        (25, 21, "must be 2 to 20 (each fold is one more fit) (got 21)"),
        (25, 1, "must be 2 to 20 (each fold is one more fit) (got 1)"),
        (12, 13, "must be 2 to the 12 GEMMs measured (got 13)"),
    ],
)
def test_a_cross_validation_has_at_most_20_folds(gemm_rows: int, folds: int, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        check_folds(folds, gemms([(8, 8, 8)] * gemm_rows), "calibrate")
    assert [str(p) for p in caught.value.problems] == [f"calibrate: --folds: {problem}"]
    check_folds(min(20, gemm_rows), gemms([(8, 8, 8)] * gemm_rows), "calibrate")
