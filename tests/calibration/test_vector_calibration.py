"""The vector unit's calibration: measured lone vector ops, what each op moves, the
stream bound, the closed form against the engine, the fit and ``accelsim calibrate``
on a directory."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.calibration.vector_fit import (
    engine_vector_us,
    fit_vector,
    predict_us,
    vector_features,
    vector_graph,
    vector_hardware,
)
from accelsim.calibration.vector_ops import OPS, VectorMeasurements, read_vector_measurements
from accelsim.cli import main
from accelsim.config.base import Convention
from accelsim.config.enums import PsumPolicy, VectorClass
from accelsim.config.hardware import ClassOverheadSpec
from accelsim.config.loader import Override, dump_yaml, load_hardware
from accelsim.errors import InputError
from accelsim.mapping.schedule import schedule
from accelsim.timing.costs import op_costs
from accelsim.timing.machine import machine_of
from tests.conftest import ROOT

HARDWARE = ROOT / "configs" / "hardware"
VECTOR_OPS = ROOT / "configs" / "validation" / "silicon" / "vector_ops"
TRUTH = {
    "elementwise_overhead_us": 0.8, "transcendental_overhead_us": 1.0,
    "reduce_overhead_us": 0.4, "data_movement_overhead_us": 0.9, "norm_overhead_us": 2.5,
    "vector_stream_gb_s": 1200.0,
}  # fmt: skip
"""Known per-class fixed costs and stream a fit must find again."""


def _ops(*rows: tuple[str, int, int, int]) -> VectorMeasurements:
    names, d0, d1, d2 = zip(*rows, strict=True)
    ints = np.int64
    return VectorMeasurements(
        np.asarray(names), np.asarray(d0, ints), np.asarray(d1, ints), np.asarray(d2, ints),
        np.ones(len(rows)),
    )  # fmt: skip


def test_each_op_moves_what_its_collector_builds() -> None:
    hw = load_hardware(HARDWARE / "tpu_v4.yaml")
    f = vector_features(
        hw,
        _ops(("add", 2, 3, 4), ("reduce", 2, 3, 4), ("broadcast", 2, 3, 4),
             ("slice", 2, 3, 5), ("convert", 2, 3, 4), ("select", 2, 3, 4),
             ("sine", 2, 3, 4)),
    )  # fmt: skip
    # add: two bf16 inputs and one output of 24; reduce: 24 in, 2 x 3 sums out;
    # broadcast: a (2, 1, 4) plane in, 24 out; slice: 5 // 2 = 2 of d2 kept each way;
    # convert: bf16 in, f32 out; select: a 1-byte predicate and two bf16 inputs
    assert f.read_bytes.tolist() == [96, 48, 16, 24, 48, 120, 48]
    assert f.write_bytes.tolist() == [48, 12, 48, 24, 96, 48, 48]
    assert f.lane_ops.tolist() == [24, 24, 24, 30, 24, 24, 0]  # per element of the shape
    assert f.trig_elements.tolist() == [0, 0, 0, 0, 0, 0, 24]
    assert len(OPS) == 25


def test_malformed_rows_and_unknown_ops_are_reported_together(tmp_path) -> None:
    (tmp_path / "add_dataset.csv").write_text("d0,d1,d2,latency_us\n1,0,2,1.0\n1,2,2,-1\n")
    (tmp_path / "gather_dataset.csv").write_text("d0,d1,d2,latency_us\n1,1,1,1.0\n")
    (tmp_path / "tanh_dataset.csv").write_text("d0,d1,latency_us\n1,1,1.0\n")
    with pytest.raises(InputError) as err:
        read_vector_measurements(tmp_path)
    shown = [str(p) for p in err.value.problems]
    assert (
        shown[0]
        == f"{tmp_path}/add_dataset.csv: line 2: d1: not an integer in 1..16777216 (got '0')"
    )
    assert (
        shown[1]
        == f"{tmp_path}/add_dataset.csv: line 3: latency_us: not a positive number (got '-1')"
    )
    assert shown[2].startswith(f"{tmp_path}: gather_dataset.csv: unknown op (known: add, ")
    assert shown[3] == f"{tmp_path}/tanh_dataset.csv: missing columns d2"
    with pytest.raises(InputError, match=r"no <op>_dataset\.csv files"):
        read_vector_measurements(tmp_path / "none")


def test_a_half_holds_half_of_every_op() -> None:
    ops = _ops(*(("add", 1, 1, i) for i in range(1, 6)), ("tanh", 1, 1, 1))
    train, held = ops.half(3)
    assert sorted([*train, *held]) == list(range(6))
    assert (ops.op[train] == "add").sum() == 3 and (ops.op[held] == "add").sum() == 2
    assert (ops.op[train] == "tanh").sum() == 1  # an op of one row is fitted


def test_the_stream_bounds_a_vector_ops_compute() -> None:
    # default.yaml: 128 lanes.  An add of 1,000 bf16 elements moves 6,000 bytes: at
    # 10 bytes a cycle 600 cycles, more than its ceil(1000 / 128) = 8 on the lanes,
    # then its own fixed cost of 7 cycles
    plain = load_hardware(HARDWARE / "default.yaml")
    streamed = load_hardware(
        HARDWARE / "default.yaml",
        [Override("vector_unit.stream_bytes_per_cycle", 10, "--set", "s"),
         Override("vector_unit.op_overhead_cycles", 7, "--set", "o")],
    )  # fmt: skip

    def compute(hw):  # type: ignore[no-untyped-def]
        graph = vector_graph(hw, "add", 1, 1, 1000, 1)
        machine = machine_of(hw)
        costs = op_costs(
            graph, schedule(graph, (machine.array,)), machine, Convention.ACCELSIM,
            PsumPolicy.CHUNK, 8,
        )  # fmt: skip
        return int(costs.compute_cycles[0]), int(costs.overhead_cycles[0])

    assert compute(plain) == (8, 0)
    assert compute(streamed) == (607, 7)
    # the new keys stay out of a file that does not set them
    assert "stream_bytes_per_cycle" not in dump_yaml(plain.model_dump(mode="json"))


@pytest.mark.parametrize("chip", ["tpu_v6e", "tpu_v4"])
def test_the_closed_form_is_the_engines_lone_vector_op(chip: str) -> None:
    hw = load_hardware(HARDWARE / f"{chip}_calibrated.yaml")
    ops = read_vector_measurements(VECTOR_OPS / chip)
    rows = np.random.default_rng(1).choice(len(ops), 150, replace=False)
    sample = ops.subset(rows)
    values = {**TRUTH, "sine_cosine_ops": 50.0}
    closed = predict_us(vector_features(hw, sample), values)
    engine = engine_vector_us(vector_hardware(hw, values, tuple(VectorClass)), sample, 50)
    np.testing.assert_allclose(engine, closed, rtol=0.01)
    # each class at its own fixed cost: a reduce and a norm of one element apart
    tiny = _ops(("reduce", 1, 1, 1), ("batch_norm_training", 1, 1, 1))
    apart = np.diff(engine_vector_us(vector_hardware(hw, values, tuple(VectorClass)), tiny, 50))
    assert apart[0] == pytest.approx(2.5 - 0.4, abs=2 / hw.clock_mhz)


def test_a_fit_finds_the_values_that_made_its_data() -> None:
    hw = load_hardware(HARDWARE / "tpu_v6e_calibrated.yaml")
    ops = read_vector_measurements(VECTOR_OPS / "tpu_v6e")
    ops = ops.subset(np.random.default_rng(0).choice(len(ops), 1500, replace=False))
    f = vector_features(hw, ops)
    truth = {**TRUTH, "sine_cosine_ops": 90.0}
    made = VectorMeasurements(ops.op, ops.d0, ops.d1, ops.d2, predict_us(f, truth))
    found = fit_vector(hw, f, made)
    assert found.training_mape < 0.5
    assert found.measured == tuple(VectorClass)
    for name, value in truth.items():
        assert found.values[name] == pytest.approx(value, rel=0.03)


def test_the_fit_never_reads_the_held_out_half(tmp_path) -> None:
    # two copies of 100 measured ops of two classes, the second with every held-out
    # latency a thousand times its own: both fit the same file
    source = {op: (VECTOR_OPS / "tpu_v4" / f"{op}_dataset.csv").read_text().splitlines()
              for op in ("tanh", "reduce")}  # fmt: skip
    (tmp_path / "a").mkdir()
    for op, lines in source.items():
        (tmp_path / "a" / f"{op}_dataset.csv").write_text("\n".join(lines[:51]) + "\n")
    ops = read_vector_measurements(tmp_path / "a")
    _, held = ops.half(0)
    (tmp_path / "b").mkdir()
    for op in source:
        mine = np.flatnonzero(ops.op == op)
        latency = ops.latency_us[mine] * np.where(np.isin(mine, held), 1000, 1)
        rows = [f"{a},{b},{c},{t!r}" for a, b, c, t in zip(
            ops.d0[mine], ops.d1[mine], ops.d2[mine], latency.tolist(), strict=True)]  # fmt: skip
        (tmp_path / "b" / f"{op}_dataset.csv").write_text(
            "\n".join(["d0,d1,d2,latency_us", *rows]) + "\n"
        )
    changed = read_vector_measurements(tmp_path / "b")
    assert np.array_equal(changed.latency_us[held], ops.latency_us[held] * 1000)
    fitted = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.yaml"
        args = ["calibrate", str(tmp_path / name), "--hardware", str(HARDWARE / "tpu_v4.yaml"),
                "--out", str(out), "--half", "0"]  # fmt: skip
        assert main(args) == 0
        fitted.append(out.read_text().replace(str(tmp_path / name), "DIR"))
    assert fitted[0] == fitted[1]
    assert "reduce: " in fitted[0] and "transcendental: " in fitted[0]


def test_calibrate_fits_a_directory_of_vector_ops(tmp_path, capsys) -> None:
    data = tmp_path / "ops"
    data.mkdir()
    source = (VECTOR_OPS / "tpu_v4" / "tanh_dataset.csv").read_text().splitlines()
    (data / "tanh_dataset.csv").write_text("\n".join(source[:61]) + "\n")  # 60 shapes
    out = tmp_path / "fitted.yaml"
    args = ["calibrate", str(data), "--hardware", str(HARDWARE / "tpu_v4_calibrated.yaml"),
            "--out", str(out)]  # fmt: skip
    assert main([*args, "--fit", "op_overhead_us"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("calibrate: --fit: only for GEMMs: a vector fit fits them all")
    )
    assert main([*args, "--half", "0", "--folds", "31"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "calibrate: --folds: must be 2 to 20 (each fold is one more fit; 30 ops fitted) (got 31)"
        )
    )
    assert main([*args, "--half", "0"]) == 0
    printed = capsys.readouterr().out
    assert "on 30 of 60 vector ops" in printed
    assert next(line for line in printed.splitlines() if line.startswith("held out (other"))
    text = out.read_text()
    assert text.startswith("# configs/hardware/tpu_v4.yaml calibrated by accelsim calibrate")
    assert "# vector unit calibrated by accelsim calibrate on 30 of 60" in text
    assert "reduce_overhead_us" in printed and "(no such ops measured: not written)" in printed
    fitted = load_hardware(out)
    preset = load_hardware(HARDWARE / "tpu_v4_calibrated.yaml").vector_unit
    # only tanh was measured: its class's cost and the stream are fitted, the others kept
    unit = fitted.vector_unit
    assert unit.class_overhead_cycles.transcendental != preset.class_overhead_cycles.transcendental
    assert unit.stream_bytes_per_cycle != preset.stream_bytes_per_cycle
    assert unit.op_overhead_cycles == preset.op_overhead_cycles
    assert unit.class_overhead_cycles.reduce == preset.class_overhead_cycles.reduce
    assert fitted.calibrated_settings == {"timing.fold_overlap": True, "timing.psums": "chunk"}


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["tpu_v6e", "tpu_v4"])
def test_the_bundled_vector_units_are_the_fit_on_half_seed_0(chip: str) -> None:
    preset = load_hardware(HARDWARE / f"{chip}_calibrated.yaml")
    gemm_only = preset.model_copy(
        update={
            "vector_unit": preset.vector_unit.model_copy(
                update={
                    "op_overhead_cycles": None,
                    "stream_bytes_per_cycle": None,
                    "class_overhead_cycles": ClassOverheadSpec(),
                }
            )
        }
    )
    ops = read_vector_measurements(VECTOR_OPS / chip)
    train, _ = ops.half(0)
    fit = fit_vector(gemm_only, vector_features(gemm_only, ops).subset(train), ops.subset(train))
    assert vector_hardware(gemm_only, fit.values, fit.measured) == preset
