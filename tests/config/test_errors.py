"""Library-level tests of how accelsim reports bad input.

Every user mistake must surface as a :class:`~accelsim.errors.ConfigError` or
:class:`~accelsim.errors.WorkloadError` whose ``problems`` each read
``file: key.path: problem (got value)``, never as a stray Python exception.
Each test writes a small YAML file into ``tmp_path``, usually a preset from
``configs/`` or ``workloads/`` with one thing broken, and pins the exact
wording of the resulting message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsim.config.base import Dataflow
from accelsim.config.loader import (
    display_path,
    load_energy,
    load_hardware,
    parse_sets,
)
from accelsim.config.run_file import load_run_file
from accelsim.driver.inputs import load_inputs
from accelsim.errors import ConfigError, InputError, WorkloadError
from accelsim.lowering.infer import load_model
from tests.conftest import ROOT as REPO

DEFAULT_HW = REPO / "configs" / "hardware" / "default.yaml"
SCALESIM_HW = REPO / "configs" / "hardware" / "scalesim.yaml"
HOROWITZ = REPO / "configs" / "energy" / "horowitz45.yaml"
SMOKE_RUN = REPO / "configs" / "runs" / "smoke.yaml"
MLP = REPO / "workloads" / "mlp.yaml"

DELETE = object()  # set_key() value that removes the key


# --------------------------------------------------------------------------- helpers


def preset(path: Path) -> dict[str, Any]:
    """A preset file as plain data, ready to be mutated."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def set_key(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """Set (or with ``DELETE`` remove) a dotted key in nested mappings; returns ``data``."""
    *parents, last = dotted.split(".")
    target = data
    for part in parents:
        target = target[part]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


def write(directory: Path, content: dict[str, Any] | str, name: str = "file.yaml") -> Path:
    """Write ``content`` (plain data or raw YAML text) to ``directory/name``."""
    path = directory / name
    text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def hardware_file(tmp_path: Path, changes: dict[str, Any]) -> Path:
    """default.yaml with each dotted key in ``changes`` set (or deleted)."""
    data = preset(DEFAULT_HW)
    for key, value in changes.items():
        set_key(data, key, value)
    return write(tmp_path, data, "hw.yaml")


def run_file(tmp_path: Path, **fields: Any) -> Path:
    """smoke.yaml with absolute references (so it works from tmp_path) and ``fields`` set."""
    data = preset(SMOKE_RUN)
    data.update(hardware=str(SCALESIM_HW), workload=str(MLP), energy=str(HOROWITZ))
    data.update(fields)
    return write(tmp_path, data, "run.yaml")


def workload_file(tmp_path: Path, layers: list[dict[str, Any]], **fields: Any) -> Path:
    """mlp.yaml with its layer list replaced by ``layers`` and other ``fields`` set."""
    data = preset(MLP)
    data["layers"] = layers
    data.update(fields)
    return write(tmp_path, data, "workload.yaml")


def mlp_layers() -> list[dict[str, Any]]:
    """The layers of workloads/mlp.yaml: fc1 relu1 fc2 relu2 fc3 loss."""
    return preset(MLP)["layers"]


def lines(excinfo: pytest.ExceptionInfo[InputError]) -> list[str]:
    """The rendered problems of a raised InputError, one string each."""
    return [str(p) for p in excinfo.value.problems]


def shown(path: Path) -> str:
    """How accelsim names ``path`` in messages."""
    return display_path(path)


# --------------------------------------------------------------------------- YAML syntax


def test_yaml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    text = DEFAULT_HW.read_text(encoding="utf-8")
    assert "\nclock_mhz: 1000\n" in text
    broken = text.replace("\nclock_mhz: 1000\n", "\nclock_mhz: 1000: 2\n")
    line = broken.splitlines().index("clock_mhz: 1000: 2") + 1
    path = write(tmp_path, broken)

    expected = (
        f"{shown(path)}: line {line}, column 16: invalid YAML: mapping values are not allowed here"
    )
    with pytest.raises(ConfigError, match=re.escape(expected)) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [expected]


def test_unclosed_flow_mapping_in_workload_is_a_workload_error(tmp_path: Path) -> None:
    path = write(tmp_path, "name: w\nlayers: [\n")
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: line 3, column 1: invalid YAML: expected the node content"
        ),
    ):
        load_model(path)


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    text = DEFAULT_HW.read_text(encoding="utf-8").rstrip("\n") + "\nname: again\n"
    line = len(text.splitlines())
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: line {line}, column 1: invalid YAML: duplicate key 'name'"
    ]


def test_duplicate_nested_key_points_at_the_second_occurrence(tmp_path: Path) -> None:
    text = DEFAULT_HW.read_text(encoding="utf-8")
    old = "array: {rows: 128, cols: 128,"
    new = "array: {rows: 128, cols: 128, rows: 64,"
    assert old in text
    broken = text.replace(old, new)
    line_text = next(ln for ln in broken.splitlines() if ln.startswith(new))
    line = broken.splitlines().index(line_text) + 1
    column = line_text.index("rows: 64") + 1
    path = write(tmp_path, broken)
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"{shown(path)}: line {line}, column {column}: invalid YAML: duplicate key 'rows'"
        ),
    ):
        load_hardware(path)


def test_unhashable_yaml_key_is_reported_not_crashed(tmp_path: Path) -> None:
    # Used to escape from the duplicate-key check as a TypeError (exit 1).
    text = DEFAULT_HW.read_text(encoding="utf-8").rstrip("\n") + "\n[a, b]: 1\n"
    line = len(text.splitlines())
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: line {line}, column 1: invalid YAML: a key must be"
        " a plain value, not a list"
    ]


def test_integer_top_level_key_is_named_as_a_key(tmp_path: Path) -> None:
    path = write(tmp_path, {**preset(DEFAULT_HW), 1: 2})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert [p.path for p in excinfo.value.problems] == ["1"]


@pytest.mark.parametrize(
    ("text", "got"), [("- a\n- b\n", "'list'"), ("just words\n", "'str'"), ("42\n", "'int'")]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    path = write(tmp_path, text)
    expected = f"{shown(path)}: expected a mapping at the top level (got {got})"
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [expected]
    # The same check guards workload files, raised as a WorkloadError there.
    with pytest.raises(WorkloadError, match=re.escape(expected)):
        load_model(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [f"{shown(path)}: file not found"]


# --------------------------------------------------------------------------- keys and types


@pytest.mark.parametrize(
    ("section", "typo", "correct", "suggestion"),
    [
        ("buffers", "ifmap_kb", "ifmap_kib", "did you mean 'ifmap_kib'"),
        ("array", "dataflw", "dataflow", "did you mean 'dataflow' or 'dataflows'?"),
    ],
)
def test_misspelt_key_gets_a_suggestion(
    tmp_path: Path, section: str, typo: str, correct: str, suggestion: str
) -> None:
    data = preset(DEFAULT_HW)
    value = data[section].pop(correct)
    data[section][typo] = value
    path = write(tmp_path, data)

    with pytest.raises(
        ConfigError, match=re.escape(f"{shown(path)}: {section}.{typo}: unknown key; {suggestion}")
    ) as excinfo:
        load_hardware(path)
    # The renamed key is also reported as missing, in the same error.
    assert f"{shown(path)}: {section}.{correct}: missing required key" in lines(excinfo)
    assert len(excinfo.value.problems) == 2
    typo_problem = next(p for p in excinfo.value.problems if p.path == f"{section}.{typo}")
    assert typo_problem.value == value
    assert str(typo_problem).endswith(f"(got {value!r})")


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, {**preset(DEFAULT_HW), "procesors": 2})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: procesors: unknown key; did you mean 'processors'? (got 2)"
    ]


def test_missing_required_key_has_no_value(tmp_path: Path) -> None:
    path = hardware_file(tmp_path, {"array.rows": DELETE})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [f"{shown(path)}: array.rows: missing required key"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("array.rows", "128", "expected an integer (got '128')"),
        ("array.rows", True, "expected an integer (got True)"),
        ("array.rows", 1.5, "expected an integer (got 1.5)"),
        ("clock_mhz", "fast", "expected a number (got 'fast')"),
        ("clock_mhz", True, "expected a number (got True)"),
        ("name", ["a"], "expected a string (got ['a'])"),
        ("array", None, "expected a mapping (got None)"),
    ],
)
def test_wrong_type(tmp_path: Path, key: str, value: Any, message: str) -> None:
    path = hardware_file(tmp_path, {key: value})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [f"{shown(path)}: {key}: {message}"]
    (problem,) = excinfo.value.problems
    assert (problem.file, problem.path, problem.value) == (shown(path), key, value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("array.rows", -1),
        ("array.cols", 0),
        ("buffers.ifmap_kib", 0),
        ("buffers.filter_kib", -2.5),
        ("processors", 0),
    ],
)
def test_non_positive_sizes(tmp_path: Path, key: str, value: Any) -> None:
    path = hardware_file(tmp_path, {key: value})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: {key}: input should be greater than 0 (got {value!r})"
    ]


def test_bandwidth_below_a_thousandth_of_a_byte_per_cycle(tmp_path: Path) -> None:
    path = hardware_file(tmp_path, {"dram.bandwidth_bytes_per_cycle": 0})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: dram.bandwidth_bytes_per_cycle:"
        " input should be greater than or equal to 0.001 (got 0)"
    ]


def test_negative_latency_is_rejected_but_zero_is_fine(tmp_path: Path) -> None:
    path = hardware_file(tmp_path, {"dram.latency_cycles": -1})
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"{shown(path)}: dram.latency_cycles: input should be greater than or equal to 0"
            " (got -1)"
        ),
    ):
        load_hardware(path)
    assert (
        load_hardware(hardware_file(tmp_path, {"dram.latency_cycles": 0})).dram.latency_cycles == 0
    )


@pytest.mark.parametrize("dataflow", ["WS", "Os", "rs", "weight_stationary", 1, None])
def test_unknown_dataflow_is_an_error(tmp_path: Path, dataflow: Any) -> None:
    path = hardware_file(tmp_path, {"array.dataflow": dataflow})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: array.dataflow: input should be 'os', 'ws' or 'is' (got {dataflow!r})"
    ]


@pytest.mark.parametrize(
    ("text", "expected"), [("os", Dataflow.OS), ("ws", Dataflow.WS), ("is", Dataflow.IS)]
)
def test_lower_case_dataflows_are_accepted(tmp_path: Path, text: str, expected: Dataflow) -> None:
    hw = load_hardware(hardware_file(tmp_path, {"array.dataflow": text}))
    assert hw.array.dataflow is expected


@pytest.mark.parametrize(
    ("key", "value"), [("word_bytes.weights", 3), ("word_bytes.activations", 16)]
)
def test_word_size_rule(tmp_path: Path, key: str, value: int) -> None:
    path = hardware_file(tmp_path, {key: value})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [
        f"{shown(path)}: {key}: word size must be one of 1, 2, 4, 8 bytes (got {value})"
    ]


@pytest.mark.parametrize("key", ["buffers.ifmap_kib", "buffers.stash_kib", "clock_mhz"])
def test_infinite_size_or_clock_is_rejected(tmp_path: Path, key: str) -> None:
    # Used to crash in kib_to_bytes (OverflowError) or give 0 seconds for clock_mhz.
    path = hardware_file(tmp_path, {key: float("inf")})
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert lines(excinfo) == [f"{shown(path)}: {key}: expected a finite number (got inf)"]


def test_infinite_dram_bandwidth_means_ideal_memory(tmp_path: Path) -> None:
    hw = load_hardware(hardware_file(tmp_path, {"dram.bandwidth_bytes_per_cycle": float("inf")}))
    assert hw.dram.bandwidth_bytes_per_cycle == float("inf")


# --------------------------------------------------------------------------- cross-field rule


NEEDS = re.compile(r"\(needs >= (?P<kib>[0-9.]+) KiB\)")


def test_buffer_too_small_for_one_tile(tmp_path: Path) -> None:
    # default.yaml: a 128x128 array of 2-byte words; one tile alone is 32 KiB.
    path = hardware_file(tmp_path, {"buffers.ifmap_kib": 1})
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"{shown(path)}: buffers.ifmap_kib: too small for one 128x128 tile of 2-byte words"
        ),
    ) as excinfo:
        load_hardware(path)
    (problem,) = excinfo.value.problems
    assert problem.path == "buffers.ifmap_kib"
    assert problem.value == 1
    needs = NEEDS.search(problem.message)
    assert needs, problem.message
    assert float(needs["kib"]) == 128 * 128 * 2 / 1024  # 32 KiB


@pytest.mark.parametrize("key", ["buffers.ifmap_kib", "buffers.filter_kib", "buffers.ofmap_kib"])
def test_buffer_rule_threshold_is_the_one_it_states(tmp_path: Path, key: str) -> None:
    # scalesim.yaml: 32x32 array, 1-byte words.  The size the message asks for
    # must be accepted, and anything below it rejected.
    data = preset(SCALESIM_HW)
    small = write(tmp_path, set_key(data, key, 0.5), "small.yaml")
    with pytest.raises(
        ConfigError,
        match=re.escape(f"{shown(small)}: {key}: too small for one 32x32 tile of 1-byte words"),
    ) as excinfo:
        load_hardware(small)
    needs = NEEDS.search(excinfo.value.problems[0].message)
    assert needs, excinfo.value.problems[0].message
    need_kib = float(needs["kib"])
    assert need_kib == 32 * 32 * 1 / 1024  # 1 KiB

    fits = load_hardware(write(tmp_path, set_key(data, key, need_kib), "fits.yaml"))
    assert getattr(fits.buffers, key.split(".")[1]) == need_kib
    short = write(tmp_path, set_key(data, key, need_kib - 1 / 1024), "short.yaml")
    with pytest.raises(ConfigError, match=re.escape(f"{key}: too small for one 32x32 tile")):
        load_hardware(short)


# --------------------------------------------------------------------------- several problems


def test_several_problems_in_one_file_are_reported_together(tmp_path: Path) -> None:
    path = hardware_file(
        tmp_path,
        {
            "array.rows": -1,
            "clock_mhz": "fast",
            "dram.bandwidth_bytes_per_cycle": 0,
            "buffers.ifmap_kb": 4,
        },
    )
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert sorted(lines(excinfo)) == sorted(
        [
            f"{shown(path)}: array.rows: input should be greater than 0 (got -1)",
            f"{shown(path)}: clock_mhz: expected a number (got 'fast')",
            f"{shown(path)}: dram.bandwidth_bytes_per_cycle: input should be greater than or equal to 0.001 (got 0)",
            f"{shown(path)}: buffers.ifmap_kb: unknown key; did you mean 'ifmap_kib' or"
            " 'ofmap_kib'? (got 4)",
        ]
    )
    # The exception text is the problems, one per line.
    assert str(excinfo.value).splitlines() == lines(excinfo)


def test_every_problem_has_the_file_path_message_value_shape(tmp_path: Path) -> None:
    path = hardware_file(
        tmp_path,
        {
            "array.rows": True,
            "array.dataflow": "WS",
            "buffers.ofmap_kib": 0,
            "processors": "2",
        },
    )
    with pytest.raises(ConfigError) as excinfo:
        load_hardware(path)
    assert len(excinfo.value.problems) == 4
    shape = re.compile(
        rf"^{re.escape(shown(path))}: (?P<path>[a-z_]+(\.[a-z_]+)*): "
        r"(?P<message>[a-z][^\n]*) \(got (?P<value>[^\n]+)\)$"
    )
    for problem in excinfo.value.problems:
        match = shape.match(str(problem))
        assert match, str(problem)
        assert match["path"] == problem.path
        assert match["value"] == repr(problem.value)
    assert {p.path for p in excinfo.value.problems} == {
        "array.rows",
        "array.dataflow",
        "buffers.ofmap_kib",
        "processors",
    }


# --------------------------------------------------------------------------- run files


def test_run_file_pointing_at_missing_hardware(tmp_path: Path) -> None:
    path = run_file(tmp_path, hardware="missing_hw.yaml")
    with pytest.raises(ConfigError) as excinfo:
        load_run_file(path)
    assert lines(excinfo) == [f"{shown(path)}: hardware: file not found (got 'missing_hw.yaml')"]


def test_run_file_missing_hardware_and_energy_reports_both(tmp_path: Path) -> None:
    path = run_file(tmp_path, hardware="no_hw.yaml", energy="no_energy.yaml")
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path)
    assert lines(excinfo) == [
        f"{shown(path)}: hardware: file not found (got 'no_hw.yaml')",
        f"{shown(path)}: energy: file not found (got 'no_energy.yaml')",
    ]


def test_run_file_pointing_at_missing_workload(tmp_path: Path) -> None:
    path = run_file(tmp_path, workload="no_workload.yaml")
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path)
    assert lines(excinfo) == [f"{shown(path)}: workload: file not found (got 'no_workload.yaml')"]


def test_hardware_and_workload_problems_are_reported_together(tmp_path: Path) -> None:
    hw = hardware_file(tmp_path, {"array.rows": 0})
    layers = mlp_layers()
    layers[0] = {"name": "fc1", "kind": "linear", "out_features": -3}
    workload = workload_file(tmp_path, layers)
    path = run_file(tmp_path, hardware=hw.name, workload=workload.name)
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path)
    assert lines(excinfo) == [
        f"{shown(hw)}: array.rows: input should be greater than 0 (got 0)",
        f"{shown(workload)}: layers[0].out_features: input should be greater than 0 (got -3)",
    ]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"batch_sze": 3}, "batch_sze: unknown key; did you mean 'batch_size'? (got 3)"),
        ({"batch_size": 0}, "batch_size: input should be greater than 0 (got 0)"),
        (
            {"optimizer": {"kind": "Adam"}},
            "optimizer.kind: input should be 'sgd', 'momentum' or 'adam' (got 'Adam')",
        ),
        (
            {"timing": {"convention": "SCALESIM"}},
            "timing.convention: input should be 'scalesim' or 'accelsim' (got 'SCALESIM')",
        ),
        (
            {"name": "../escape"},
            "name: string should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$' (got '../escape')",
        ),
    ],
)
def test_run_file_field_errors(tmp_path: Path, fields: dict[str, Any], expected: str) -> None:
    path = run_file(tmp_path, **fields)
    with pytest.raises(ConfigError) as excinfo:
        load_run_file(path)
    assert lines(excinfo) == [f"{shown(path)}: {expected}"]


@pytest.mark.parametrize(
    ("overrides", "error", "expected"),
    [
        (
            {"hardware.array.rows": -1},
            ConfigError,
            "overrides.hardware.array.rows: input should be greater than 0 (got -1)",
        ),
        (
            {"hardware.array.dataflow": "WS"},
            ConfigError,
            "overrides.hardware.array.dataflow: input should be 'os', 'ws' or 'is' (got 'WS')",
        ),
        (
            {"hardware.array.rowz": 4},
            ConfigError,
            "overrides.hardware.array.rowz: unknown key; did you mean 'rows'? (got 4)",
        ),
        (
            {"hardware.buffers.ifmap_kib": 0.5},
            ConfigError,
            "overrides.hardware.buffers.ifmap_kib: too small for one 32x32 tile of 1-byte words",
        ),
        (
            {"energy.mac_pj.int8": -1},
            ConfigError,
            "overrides.energy.mac_pj.int8: input should be greater than 0 (got -1)",
        ),
        (
            {"workload.input.features": 0},
            WorkloadError,
            "overrides.workload.input.features: input should be greater than 0 (got 0)",
        ),
        (
            {"array.rows": 4},
            ConfigError,
            "overrides.array.rows: override keys start with 'hardware.', 'workload.', 'energy.' (got 4)",
        ),
    ],
)
def test_run_file_override_errors_blame_the_run_file(
    tmp_path: Path, overrides: dict[str, Any], error: type[InputError], expected: str
) -> None:
    path = run_file(tmp_path, overrides=overrides)
    with pytest.raises(error, match=re.escape(f"{shown(path)}: {expected}")) as excinfo:
        load_inputs(path)
    assert len(excinfo.value.problems) == 1
    # Not blamed on the preset that the override was applied to.
    assert excinfo.value.problems[0].file == shown(path)


def test_valid_run_file_override_is_applied(tmp_path: Path) -> None:
    inputs = load_inputs(
        run_file(tmp_path, overrides={"hardware.array.rows": 16, "workload.input.features": 100})
    )
    assert inputs.hardware.array.rows == 16
    assert inputs.workload.input.features == 100
    assert inputs.infos[0].in_shapes[0].dims == (100,)


# --------------------------------------------------------------------------- --set


@pytest.mark.parametrize(
    ("sets", "error", "expected"),
    [
        (
            ["array.rows=-1"],
            ConfigError,
            "--set: array.rows: input should be greater than 0 (got -1)",
        ),
        (
            ["hardware.array.rows=1.5"],
            ConfigError,
            "--set: hardware.array.rows: expected an integer (got 1.5)",
        ),
        (
            ["array.dataflow=WS"],
            ConfigError,
            "--set: array.dataflow: input should be 'os', 'ws' or 'is' (got 'WS')",
        ),
        (["batch_size=abc"], ConfigError, "--set: batch_size: expected an integer (got 'abc')"),
        (
            ["batch_sise=8"],
            ConfigError,
            "--set: batch_sise: unknown key; did you mean 'batch_size'?",
        ),
        (
            ["workload.layers[0].out_features=0"],
            WorkloadError,
            "--set: workload.layers[0].out_features: input should be greater than 0 (got 0)",
        ),
        (
            ["workload.layers[9].out_features=3"],
            ConfigError,
            "--set: workload.layers[9].out_features: no such list element",
        ),
        (
            ["array.rows=64", "array.rows=-3"],
            ConfigError,
            "--set: array.rows: input should be greater than 0 (got -3)",
        ),
    ],
)
def test_set_errors_blame_set(
    tmp_path: Path, sets: list[str], error: type[InputError], expected: str
) -> None:
    with pytest.raises(error, match=re.escape(expected)) as excinfo:
        load_inputs(run_file(tmp_path), parse_sets(sets))
    assert [p.file for p in excinfo.value.problems] == ["--set"]


@pytest.mark.parametrize("item", ["batch_size", "=3", ""])
def test_set_without_key_value_form(item: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_sets([item])
    assert lines(excinfo) == [f"--set: expected KEY=VALUE (got {item!r})"]


def test_set_of_run_overrides_blames_set(tmp_path: Path) -> None:
    # Used to be blamed on the run file's overrides.hardware.array.rows.
    path = run_file(tmp_path)
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path, parse_sets(["overrides.hardware.array.rows=-1"]))
    (problem,) = excinfo.value.problems
    assert (problem.file, problem.path, problem.value) == (
        "--set",
        "overrides.hardware.array.rows",
        -1,
    )


# --------------------------------------------------------------------------- workloads


def test_unknown_layer_kind_gets_a_suggestion(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[0] = {"name": "fc1", "kind": "conv", "out_channels": 8, "kernel": 3}
    path = workload_file(tmp_path, layers)
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert lines(excinfo) == [
        f"{shown(path)}: layers[0].kind: unknown kind; did you mean 'conv2d' or 'concat'?"
        " (got 'conv')"
    ]


def test_unknown_layer_key_gets_a_suggestion(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[2]["out_feature"] = layers[2].pop("out_features")
    path = workload_file(tmp_path, layers)
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: layers[2].out_feature: unknown key; did you mean 'out_features'?"
            " (got 2048)"
        ),
    ):
        load_model(path)


def test_linear_after_conv_without_flatten(tmp_path: Path) -> None:
    layers = [{"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3}, *mlp_layers()]
    path = workload_file(
        tmp_path, layers, input={"kind": "image", "channels": 1, "height": 28, "width": 28}
    )
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: layers[1]: linear needs a features or sequence input"
            " (got 'chw 4x26x26')"
        ),
    ):
        load_model(path)


def test_shape_error_does_not_cascade_into_unknown_inputs(tmp_path: Path) -> None:
    # Every later layer reading the failed one used to get a spurious
    # "unknown input" error at a .inputs key it does not even have.
    layers = [{"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3}, *mlp_layers()]
    path = workload_file(
        tmp_path, layers, input={"kind": "image", "channels": 1, "height": 28, "width": 28}
    )
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert lines(excinfo) == [
        f"{shown(path)}: layers[1]: linear needs a features or sequence input (got 'chw 4x26x26')"
    ]


def test_flatten_fixes_linear_after_conv(tmp_path: Path) -> None:
    layers = [
        {"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3},
        {"name": "flat", "kind": "flatten"},
        *mlp_layers(),
    ]
    workload, infos = load_model(
        workload_file(
            tmp_path, layers, input={"kind": "image", "channels": 1, "height": 28, "width": 28}
        )
    )
    assert len(workload.layers) == 8
    assert str(infos[1].out_shape) == "features 2704"  # 4 channels x 26 x 26


def test_add_of_mismatched_shapes(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers.insert(4, {"name": "skip", "kind": "add", "inputs": ["input", "relu2"]})
    path = workload_file(tmp_path, layers)
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: layers[4].inputs: add inputs have incompatible shapes features 784"
            " and features 2048 (got ['features 784', 'features 2048'])"
        ),
    ):
        load_model(path)


def test_input_names_an_undefined_layer(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[2]["inputs"] = ["relu0"]
    path = workload_file(tmp_path, layers)
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: layers[2].inputs: unknown input (inputs must be defined earlier);"
            " did you mean 'relu1'? (got 'relu0')"
        ),
    ):
        load_model(path)


def test_duplicate_layer_name(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[3]["name"] = "relu1"
    path = workload_file(tmp_path, layers)
    with pytest.raises(
        WorkloadError,
        match=re.escape(f"{shown(path)}: layers[3].name: duplicate layer name (got 'relu1')"),
    ):
        load_model(path)


@pytest.mark.parametrize(("change", "count"), [("drop", 0), ("double", 2)])
def test_workload_needs_exactly_one_cross_entropy_loss(
    tmp_path: Path, change: str, count: int
) -> None:
    layers = mlp_layers()
    assert layers[-1]["kind"] == "cross_entropy"
    if change == "drop":
        layers.pop()
    else:
        layers.append({"name": "loss2", "kind": "cross_entropy", "inputs": ["fc3"]})
    path = workload_file(tmp_path, layers)
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert lines(excinfo) == [
        f"{shown(path)}: layers: a training workload needs exactly one"
        f" cross_entropy loss layer (got {count})"
    ]


def test_loss_cannot_feed_another_layer(tmp_path: Path) -> None:
    layers = [*mlp_layers(), {"name": "after", "kind": "linear", "out_features": 3}]
    path = workload_file(tmp_path, layers)
    with pytest.raises(
        WorkloadError,
        match=re.escape(
            f"{shown(path)}: layers[5].name: the loss output cannot feed another layer (got 'loss')"
        ),
    ):
        load_model(path)


def test_several_workload_problems_are_reported_together(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[0]["out_features"] = -4
    layers[1]["kind"] = "relu"
    path = workload_file(tmp_path, layers)
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert [p.path for p in excinfo.value.problems] == ["layers[0].out_features", "layers[1].kind"]
    assert lines(excinfo)[0] == (
        f"{shown(path)}: layers[0].out_features: input should be greater than 0 (got -4)"
    )
    assert lines(excinfo)[1].startswith(
        f"{shown(path)}: layers[1].kind: unknown kind; expected one of: activation, adaptive_avgpool, add,"
    )


@pytest.mark.parametrize("kernel", [0, [3, 3, 3], "3"])
def test_bad_kernel_is_one_problem_at_the_kernel_key(tmp_path: Path, kernel: Any) -> None:
    # kernel is `int | [int, int]`; pydantic's member tags (constrained-int,
    # list[constrained-int]) used to leak into the path as two problems.
    layers = [
        {"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": kernel},
        {"name": "flat", "kind": "flatten"},
        *mlp_layers(),
    ]
    path = workload_file(
        tmp_path, layers, input={"kind": "image", "channels": 1, "height": 28, "width": 28}
    )
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    (problem,) = excinfo.value.problems
    assert (problem.file, problem.path, problem.value) == (shown(path), "layers[0].kernel", kernel)
    assert "constrained" not in problem.message


def test_layer_that_is_not_a_mapping(tmp_path: Path) -> None:
    # Used to show pydantic's "input should be a valid dictionary or object ...".
    layers = mlp_layers()
    layers[1] = "relu"
    path = workload_file(tmp_path, layers)
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert lines(excinfo) == [f"{shown(path)}: layers[1]: expected a mapping (got 'relu')"]


# --------------------------------------------------------------------------- energy tables


def test_energy_table_field_errors(tmp_path: Path) -> None:
    data = preset(HOROWITZ)
    data["unit"] = "nJ"
    data["sram"]["read_pj_per_byte"] = 0
    data["mac_pj"]["int9"] = 1.0
    path = write(tmp_path, data, "energy.yaml")
    with pytest.raises(ConfigError) as excinfo:
        load_energy(path)
    assert sorted(p.path for p in excinfo.value.problems) == [
        "mac_pj.int9",
        "sram.read_pj_per_byte",
        "unit",
    ]
    assert f"{shown(path)}: unit: input should be 'pJ' (got 'nJ')" in lines(excinfo)
    assert f"{shown(path)}: sram.read_pj_per_byte: input should be greater than 0 (got 0)" in lines(
        excinfo
    )


def test_energy_table_without_the_array_precision(tmp_path: Path) -> None:
    data = preset(HOROWITZ)
    del data["mac_pj"]["int8"]  # scalesim.yaml's array is int8
    energy = write(tmp_path, data, "energy.yaml")
    path = run_file(tmp_path, energy=str(energy))
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path)
    assert lines(excinfo) == [
        f"{shown(energy)}: mac_pj: no entry for the array precision of"
        " hardware 'scalesim-32x32' (got 'int8')"
    ]


def test_scientific_notation_without_a_dot_is_a_number(tmp_path: Path) -> None:
    data = preset(HOROWITZ)
    text = write(tmp_path, data, "energy.yaml").read_text(encoding="utf-8")
    path = tmp_path / "energy.yaml"
    path.write_text(
        text.replace("interconnect_pj_per_bit: 2", "interconnect_pj_per_bit: 2e-1"),
        encoding="utf-8",
    )
    assert load_energy(path).interconnect_pj_per_bit == pytest.approx(0.2)
    assert parse_sets(["energy.dram_read_pj_per_bit=8e0"])[0].value == 8.0


def test_layer_whose_output_never_reaches_the_loss(tmp_path: Path) -> None:
    layers = mlp_layers()
    layers[-1]["inputs"] = ["fc3"]
    layers.insert(5, {"name": "dead", "kind": "linear", "out_features": 7, "inputs": ["relu1"]})
    path = workload_file(tmp_path, layers)
    with pytest.raises(WorkloadError) as excinfo:
        load_model(path)
    assert lines(excinfo) == [
        f"{shown(path)}: layers[5].name: output is never used: no later layer reads it and it"
        " is not the loss (got 'dead')"
    ]
