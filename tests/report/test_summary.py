"""The typed step summary (``accelsim.report.summary``) and its ``summary.json`` record.

``StepSummary.to_dict`` must write exactly what ``summary.json`` has always
held (keys, key order, ints as ints and floats as floats), and
``StepSummary.from_dict`` must read it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest

import accelsim
from accelsim.report.console import summary_table
from accelsim.report.result import SCHEMA_VERSION
from accelsim.report.summary import (
    DesignKnobs,
    DramBytes,
    EnergySummary,
    MacCounts,
    StashSummary,
    StepSummary,
    WorkSummary,
)
from accelsim.report.training import TrainingResult
from accelsim.report.writer import write_run
from tests.conftest import ROOT as REPO

SMOKE = REPO / "configs" / "runs" / "smoke.yaml"
MLP = REPO / "configs" / "runs" / "mlp.yaml"
GP = "run.techniques={gradient_prediction: {}}"

# summary.json of the smoke run, top-level keys in the order they are written
SMOKE_KEYS = [
    "schema_version",
    "accelsim_version",
    "git_commit",
    "run",
    "workload",
    "hardware",
    "batch_size",
    "processors",
    "array",
    "design",
    "step",
    "convention",
    "assignment",
    "optimizer",
    "strided_dx",
    "psums",
    "fold_overlap",
    "workload_variant",
    "engine",
    "clock_mhz",
    "total_cycles",
    "seconds",
    "ops",
    "macs",
    "vector_ops",
    "utilization",
    "array_stall_cycles",
    "stall_fraction",
    "busy_cycles",
    "dram_bytes",
    "interconnect_bytes",
    "parameters",
    "stash",
    "energy_pj",
    "stages",
    "owners",
    "communication",
    "groups",
    "area_mm2",
    "power_w",
    "efficiency",
]


@cache
def smoke() -> TrainingResult:
    return accelsim.simulate(SMOKE)


@cache
def gradient_prediction() -> TrainingResult:
    return accelsim.simulate(MLP, overrides=[GP])


def written_summary(result: TrainingResult, out: Path) -> str:
    """The text of ``summary.json`` as ``accelsim run`` writes it."""
    directory = write_run(result, "", out)
    return (directory / "summary.json").read_text(encoding="utf-8")


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the declared type ``hint`` (ints are exactly ints)."""
    if is_dataclass(hint):
        return isinstance(value, hint) and all_fields_conform(value)
    if hint is int:
        return type(value) is int
    if hint is bool:
        return type(value) is bool
    if hint is float:
        return isinstance(value, float)
    if hint is str:
        return type(value) is str
    origin, args = get_origin(hint), get_args(hint)
    if type(None) in args:
        return value is None or any(conforms(value, a) for a in args if a is not type(None))
    if origin is Mapping:
        key, item = args
        return isinstance(value, Mapping) and all(
            conforms(k, key) and conforms(v, item) for k, v in value.items()
        )
    if origin is tuple and args[1:] == (Ellipsis,):
        return isinstance(value, tuple) and all(conforms(v, args[0]) for v in value)
    raise AssertionError(f"no check for {hint}")


def all_fields_conform(obj: Any) -> bool:
    hints = get_type_hints(type(obj))
    for f in fields(obj):
        assert conforms(getattr(obj, f.name), hints[f.name]), (f.name, getattr(obj, f.name))
    return True


def same_shape(a: Any, b: Any, where: str = "") -> None:
    """``a`` and ``b`` have the same keys in the same order and leaves of the same type."""
    assert type(a) is type(b), (where, a, b)
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            same_shape(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_shape(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def test_to_dict_is_the_written_summary_json(tmp_path: Path) -> None:
    """Every key of the smoke run's summary.json, in order, with the same value types."""
    result = smoke()
    summary = result.base.step_summary()
    text = written_summary(result, tmp_path)
    written = json.loads(text)
    assert list(written) == SMOKE_KEYS
    record = summary.to_dict()
    same_shape(record, written)
    assert json.dumps(record, indent=2) + "\n" == text
    assert record == result.base.summary() == result.summary()
    assert summary.schema_version == SCHEMA_VERSION == written["schema_version"] == 2
    # symmetry: only a step simulated on one processor of each role has it
    # (tests/timing/test_symmetry.py); mapping: written only under a mapping search
    # (tests/timing/test_mapper.py).
    optional = {"settings", "symmetry", "silicon", "mapping"}
    assert {f.name for f in fields(StepSummary)} - optional <= set(written)
    assert (
        list(summary.settings)
        == SMOKE_KEYS[SMOKE_KEYS.index("design") + 1 : SMOKE_KEYS.index("clock_mhz")]
    )


def test_design_knobs_are_the_hardware_as_numbers() -> None:
    """The set-up a sweep varies, read from the run's inputs, not parsed from ``array``."""
    result = accelsim.simulate(
        SMOKE, ["array.rows=16", "dram.bandwidth_bytes_per_cycle=24", "batch_size=3"]
    )
    summary = result.base.step_summary()
    inputs = accelsim.load_inputs(SMOKE)
    hw = inputs.hardware
    assert replace(summary.design, other_keys={}) == DesignKnobs(
        rows=16,
        cols=hw.array.cols,
        dataflow=hw.array.dataflow.value,
        ifmap_kib=hw.buffers.ifmap_kib,
        filter_kib=hw.buffers.filter_kib,
        ofmap_kib=hw.buffers.ofmap_kib,
        stash_kib=hw.buffers.stash_kib,
        dram_bandwidth_bytes_per_cycle=24.0,
        dram_latency_cycles=hw.dram.latency_cycles,
        processors=hw.processors,
        clock_mhz=hw.clock_mhz,
        batch_size=3,
    )
    assert summary.design.other_keys["array_count"] == hw.array.count == 1
    assert summary.array == f"16x{hw.array.cols} {hw.array.dataflow.value}"
    assert (summary.design.dram_model, summary.design.dram_channels) == ("fifo", 1)
    four = accelsim.simulate(SMOKE, ["dram.channels=4"]).base.step_summary().design
    assert (four.dram_model, four.dram_channels) == ("interleaved", 4)
    assert "dram_row_bytes" not in four.other_keys  # no key of another model
    assert summary.accelsim_version == accelsim.__version__
    commit = summary.git_commit
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit)


def test_fields_have_their_declared_types() -> None:
    summary = smoke().base.step_summary()
    assert all_fields_conform(summary)
    assert isinstance(summary.macs, MacCounts)
    assert isinstance(summary.dram_bytes, DramBytes)
    assert isinstance(summary.stash, StashSummary)
    assert isinstance(summary.energy_pj, EnergySummary)
    record = summary.to_dict()
    hints = get_type_hints(StepSummary)
    for f in fields(StepSummary):
        # symmetry: not on one processor; mapping: only under a mapping search
        if f.name in ("settings", "git_commit", "symmetry", "silicon", "mapping"):
            continue
        value, hint = record[f.name], hints[f.name]
        if hint in (int, float, str):
            assert type(value) is hint, f.name
        else:  # a tuple of records (the groups) as a list, the others as objects
            assert type(value) is (list if get_origin(hint) is tuple else dict), f.name


def test_from_dict_reads_summary_json_back(tmp_path: Path) -> None:
    summary = smoke().base.step_summary()
    read = StepSummary.from_dict(json.loads(written_summary(smoke(), tmp_path)))
    assert read == summary
    assert all_fields_conform(read)
    assert read.to_dict() == summary.to_dict()


def test_the_dram_model_and_its_parameters_are_design_keys() -> None:
    # A model's own keys are written dram_<key>; a record written before the model had
    # a name reads as one fifo channel.
    knobs = replace(
        smoke().base.step_summary().design,
        dram_model="row_buffer",
        other_keys={"dram_row_bytes": 2048, "dram_miss_cycles": 30},
    )
    record = knobs.to_dict()
    assert list(record)[-4:] == [
        "dram_model",
        "dram_channels",
        "dram_row_bytes",
        "dram_miss_cycles",
    ]
    assert (record["dram_row_bytes"], record["dram_miss_cycles"]) == (2048, 30)
    assert DesignKnobs.from_dict(json.loads(json.dumps(record))) == knobs
    older = {k: v for k, v in record.items() if k not in ("dram_model", "dram_channels")}
    older = {k: v for k, v in older.items() if k not in ("dram_row_bytes", "dram_miss_cycles")}
    assert DesignKnobs.from_dict(older) == replace(knobs, dram_model="fifo", other_keys={})


def test_training_section_is_the_training_report(tmp_path: Path) -> None:
    """The training report follows the step summary under ``training``: its shared
    numbers, then each technique's section; extra units and energy components are keys
    of the mappings; each step kind round-trips."""
    result = gradient_prediction()
    assert result.training is not None
    written = json.loads(written_summary(result, tmp_path))
    assert list(written) == [*result.base.step_summary().to_dict(), "training"]
    training = written["training"]
    assert training == json.loads(json.dumps(result.training.to_dict()))
    assert list(training)[:3] == ["techniques", "epochs", "batches_per_epoch"]
    assert training["speedup"] == result.training.speedup
    assert list(training["sections"]) == ["gradient_prediction"]
    assert StepSummary.from_dict(written) == result.base.step_summary()
    for kind, step in result.steps.items():
        summary = step.step_summary()
        assert summary.settings["step"] == kind
        assert "predictor" in summary.busy_cycles
        assert "predictor_mac" in summary.energy_pj.by_component
        assert all_fields_conform(summary)
        assert StepSummary.from_dict(json.loads(json.dumps(summary.to_dict()))) == summary


def test_from_dict_rejects_bad_records() -> None:
    record = smoke().base.summary()
    with pytest.raises(ValueError, match=re.escape("schema_version: expected 2 (got 1)")):
        StepSummary.from_dict(record | {"schema_version": 1})
    with pytest.raises(ValueError, match="missing key 'total_cycles'"):
        StepSummary.from_dict({k: v for k, v in record.items() if k != "total_cycles"})
    with pytest.raises(ValueError, match=re.escape("seconds: expected float (got int 1)")):
        StepSummary.from_dict(record | {"seconds": 1})
    with pytest.raises(ValueError, match=re.escape("total: expected int (got bool True)")):
        StepSummary.from_dict(record | {"macs": record["macs"] | {"total": True}})


def test_summary_table_reads_the_typed_summary() -> None:
    summary = smoke().base.step_summary()
    table = summary_table(summary)
    assert table == summary_table(summary.to_dict())
    assert f"{summary.total_cycles:,}" in table
    changed = replace(summary, macs=replace(summary.macs, total=7))
    assert " 7  (fwd " in summary_table(changed)


def test_stages_and_owners_each_add_up_to_the_step() -> None:
    """Every op counts once in its stage and once for its owner: each table's ops, MACs,
    vector ops, DRAM bytes, op energy and busy cycles add up to the step's."""
    for result in (smoke().base, *gradient_prediction().steps.values()):
        s = result.step_summary()
        assert list(s.stages) == ["forward", "backward", "update", "communication"]
        for table in (s.stages, s.owners):
            parts = list(table.values())
            assert all(isinstance(w, WorkSummary) for w in parts)
            assert sum(w.ops for w in parts) == s.ops
            assert sum(w.macs for w in parts) == s.macs.total
            assert sum(w.vector_ops for w in parts) == s.vector_ops
            assert sum(w.dram_read_bytes for w in parts) == s.dram_bytes.read
            assert sum(w.dram_write_bytes for w in parts) == s.dram_bytes.write
            energy = sum(w.energy_pj for w in parts) + s.energy_pj.by_phase["static"]
            assert energy == pytest.approx(s.energy_pj.total, rel=1e-12)
            for unit, cycles in s.busy_cycles.items():
                summed = [sum(c) for c in zip(*(w.busy_cycles[unit] for w in parts), strict=True)]
                assert summed == list(cycles), unit
    plain = smoke().base.step_summary()
    assert list(plain.owners) == ["core"]
    assert plain.stages["forward"].macs == plain.macs.fwd
    assert plain.stages["backward"].macs == plain.macs.bwd_input + plain.macs.bwd_weight
    assert plain.stages["communication"].ops == 0  # one processor: no all-reduce
    bp = gradient_prediction().steps["bp"].step_summary()
    assert list(bp.owners) == ["core", "gradient_prediction"]
    assert bp.owners["gradient_prediction"].macs == bp.macs.aux  # the predictor's GEMMs
    # the predictor infers in the forward stage and trains in the backward stage
    assert bp.stages["forward"].macs > bp.macs.fwd and bp.stages["backward"].macs > (
        bp.macs.bwd_input + bp.macs.bwd_weight
    )


def test_a_record_without_stages_or_owners_reads_back_without_them() -> None:
    record = smoke().base.summary()
    old = {k: v for k, v in record.items() if k not in ("stages", "owners")}
    read = StepSummary.from_dict(old)
    assert (read.stages, read.owners) == ({}, {})
    assert read == replace(smoke().base.step_summary(), stages={}, owners={})
