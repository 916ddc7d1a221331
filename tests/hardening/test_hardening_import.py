"""Hostile ONNX models for ``accelsim import``: every file is imported, or refused in
one line blamed where the problem is (exit 2), never with an exception of the onnx
library.

The cases change one thing of a tiny graph (:func:`tiny_graph`); each family is one
cause: external data, malformed tensors and versions, a gzip bomb, graphs the walk
misread (a constant ``If``, a foreign domain, an output no node makes), and problems
of the generated table blamed on the node. Factories are in
``test_hardening_factory.py``.
"""

from __future__ import annotations

import gzip
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")

import onnx
from onnx import TensorProto, helper

from accelsim import cli
from accelsim.importer import onnx_graph
from accelsim.importer.model_import import import_model
from tests.importer.tiny_graph import tiny_graph

TABLE = [
    {"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
    {"name": "odd", "kind": "activation", "function": "relu"},
    {"name": "pool", "kind": "global_avgpool"},
    {"name": "flatten", "kind": "flatten"},
    {"name": "fc", "kind": "linear", "out_features": 2},
    {"name": "loss", "kind": "cross_entropy"},
]
"""The table of :func:`_model`'s graph."""


def _import(
    tmp_path: Path, model: onnx.ModelProto, capsys: pytest.CaptureFixture[str], *extra: str
) -> str:
    """``accelsim import`` of ``model`` saved as ``tmp_path/m.onnx``: its one line of
    stderr (without the model's name), after checking the exit code is 2 and nothing
    was written."""
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "w.yaml"
    assert cli.main(["import", str(path), "--out", str(out), *extra]) == cli.EXIT_INPUT
    assert not out.exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err.removeprefix(f"{path}: ").removesuffix("\n")


def _external(tensor: onnx.TensorProto, location: str, inline: bool = False, **keys: str) -> None:
    """Make ``tensor``'s data external at ``location`` (its own data removed unless
    ``inline``: a contradictory tensor, which the onnx library would read from the
    location, resolved against the working directory)."""
    if not inline:
        tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, **keys}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


LOCATIONS = {
    "outside": ("../../etc/passwd", {}),
    "absolute": ("/etc/passwd", {}),
    "device": ("/dev/zero", {}),
    "symlink": ("link.bin", {}),
    "missing": ("nothere.bin", {}),
    "wrong length": ("data.bin", {"length": "7", "offset": "3"}),
    "beside the model": ("data.bin", {}),
}
"""Where an external tensor's data may point (relative to the model's directory)."""


def _beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes) -> Path:
    """``tmp_path/models`` with ``data.bin`` (``data``) and ``link.bin`` (a link to
    ``/etc/passwd``); the working directory another one."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "data.bin").write_bytes(data)
    (models / "link.bin").symlink_to("/etc/passwd")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return models


@pytest.mark.parametrize("case", list(LOCATIONS))
def test_an_external_weight_imports_as_a_stripped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Only its shape is read, wherever its data points, from any directory."""
    path = _beside(tmp_path, monkeypatch, bytes(432)) / "m.onnx"
    model = tiny_graph()
    location, keys = LOCATIONS[case]
    _external(model.graph.initializer[0], location, **keys)
    path.write_bytes(model.SerializeToString())
    assert import_model(path).workload.model_dump(exclude_defaults=True)["layers"] == TABLE


@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("case", [c for c in LOCATIONS if c != "device"])
def test_an_external_value_is_never_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    inline: bool,
) -> None:
    """A Clip's lower bound with external data (0.0 beside the model: read, it would
    make the Clip a relu6) is unknown, so the Clip is declined."""
    models = _beside(tmp_path, monkeypatch, bytes(4))
    model = tiny_graph()
    model.graph.node[1].CopyFrom(
        helper.make_node("Clip", ["c", "lo", "hi"], ["s"], name="/relu6/Clip")
    )
    low = helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0])
    location, keys = LOCATIONS[case]
    _external(low, location, inline, **keys)
    model.graph.initializer.extend([low, helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])])
    assert _import(models, model, capsys) == (
        "nodes[/relu6/Clip]: op type Clip has no layer kind in this form (attributes,"
        " constant operands or shapes); --unsupported vector maps it to a generic vector op"
        " (got 'Clip')"
    )


def _segment(t: onnx.TensorProto) -> None:
    t.segment.begin, t.segment.end = 0, 10


def _raw(size: int) -> Any:
    def change(t: onnx.TensorProto) -> None:
        t.ClearField("float_data")
        t.raw_data = bytes(size)

    return change


def _data_type(value: int) -> Any:
    def change(t: onnx.TensorProto) -> None:
        t.data_type = value

    return change


def _float_data(t: onnx.TensorProto) -> None:
    t.float_data.append(1.0)


def _negative(t: onnx.TensorProto) -> None:
    t.dims[0] = -4


TENSORS = {
    "segment": (_segment, "a tensor stored in segments is not supported"),
    "UNDEFINED": (_data_type(TensorProto.UNDEFINED), "data type 0 is no ONNX element type"),
    "unknown type": (_data_type(999), "data type 999 is no ONNX element type"),
    "raw not whole floats": (_raw(107), "raw data of 107 bytes; its shape [4, 3, 3, 3] needs 432"),
    "raw too long": (_raw(864), "raw data of 864 bytes; its shape [4, 3, 3, 3] needs 432"),
    "values too many": (_float_data, "109 values; its shape [4, 3, 3, 3] needs 108"),
    "negative dimension": (_negative, "a negative dimension in its shape [-4, 3, 3, 3]"),
}


def _on_weight(change: Any) -> Any:
    def apply(model: onnx.ModelProto) -> None:
        change(model.graph.initializer[0])

    return apply


def test_a_malformed_constant_in_a_branch_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = helper.make_tensor("v", TensorProto.FLOAT, [2], [0.0, 1.0])
    value.data_type = TensorProto.UNDEFINED
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], name="/k", value=value)],
        "then",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, None)],
    )
    model = tiny_graph()
    node = helper.make_node("If", ["flag"], ["z"], name="/if", then_branch=branch)
    model.graph.node.append(node)
    model.graph.initializer.append(helper.make_tensor("flag", TensorProto.BOOL, [], [True]))
    assert _import(tmp_path, model, capsys) == (
        "nodes[/if].then_branch.nodes[/k].value: data type 0 is no ONNX element type"
    )


def _no_opset(model: onnx.ModelProto) -> None:
    del model.opset_import[:]


def _opset(model: onnx.ModelProto) -> None:
    model.opset_import[0].version = 99


def _ir(model: onnx.ModelProto) -> None:
    model.ir_version = 999


def _foreign_without_opset(model: onnx.ModelProto) -> None:
    model.graph.node[1].domain = "com.evil"


def _foreign(model: onnx.ModelProto) -> None:
    model.graph.node[1].domain = "com.evil"
    model.opset_import.append(helper.make_opsetid("com.evil", 1))


def _nowhere_output(model: onnx.ModelProto) -> None:
    model.graph.output[0].name = "nowhere"


def _nowhere_input(model: onnx.ModelProto) -> None:
    model.graph.node[2].input[0] = "ghost"


GRAPHS = {
    "no opset_import": (
        _no_opset,
        "opset_import: the model imports no opset of the standard ONNX domain",
    ),
    "opset 99": (
        _opset,
        "opset_import: opset newer than the installed onnx library knows"
        f" ({onnx.defs.onnx_opset_version()}) (got 99)",
    ),
    "ir_version 999": (
        _ir,
        f"ir_version: newer than the installed onnx library reads ({onnx.IR_VERSION}) (got 999)",
    ),
    "foreign domain": (
        _foreign,
        "nodes[/odd/Relu]: op type com.evil.Relu has no layer kind; --unsupported vector"
        " maps it to a generic vector op (got 'com.evil.Relu')",
    ),
    "foreign domain without its opset": (
        _foreign_without_opset,
        "graph: shape inference failed: [TypeInferenceError] Cannot infer type and shape"
        " for node name /odd/Relu. No opset import for domain com.evil optype Relu",
    ),
    "output no node makes": (
        _nowhere_output,
        "graph.output: no node makes this output (got 'nowhere')",
    ),
    "input no node makes": (
        _nowhere_input,
        "nodes[/pool/GlobalAveragePool]: reads a tensor that no earlier node makes (got 'ghost')",
    ),
}


BROKEN = {
    **{
        f"weight: {case}": (_on_weight(change), f"initializer[w]: {message}")
        for case, (change, message) in TENSORS.items()
    },
    **GRAPHS,
}
"""Each change of :func:`tiny_graph` and the problem it is refused with."""


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_malformed_model_is_refused_naming_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    change, message = BROKEN[case]
    model = tiny_graph()
    change(model)
    assert _import(tmp_path, model, capsys) == message


def _branch(name: str, op: str, reads: str) -> onnx.GraphProto:
    return helper.make_graph(
        [helper.make_node(op, [reads], [f"{name}_out"], name=f"/{name}/{op}")],
        name,
        [],
        [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)],
    )


def _with_if(condition: onnx.TensorProto | None, nested: bool = False) -> onnx.ModelProto:
    """:func:`tiny_graph` with its Relu in an ``If``'s then-branch (a Sigmoid in the
    else-branch); ``nested``: the then-branch is itself such an ``If``."""
    model = tiny_graph()
    then = _branch("then", "Relu", "c")
    if nested:
        inner = helper.make_node(
            "If",
            ["flag"],
            ["then_out"],
            name="/inner",
            then_branch=_branch("deep", "Relu", "c"),
            else_branch=_branch("deeper", "Tanh", "c"),
        )
        then = helper.make_graph(
            [inner],
            "then",
            [],
            [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)],
        )
    node = helper.make_node(
        "If",
        ["flag"],
        ["s"],
        name="/if/If",
        then_branch=then,
        else_branch=_branch("else", "Sigmoid", "c"),
    )
    model.graph.node[1].CopyFrom(node)
    if condition is not None:
        model.graph.initializer.append(condition)
    else:
        size = helper.make_node("Size", ["x"], ["size"], name="/size")
        flag = helper.make_node("Equal", ["size", "k"], ["flag"], name="/flag")
        nodes = list(model.graph.node)
        del model.graph.node[:]
        model.graph.node.extend([nodes[0], size, flag, *nodes[1:]])
    return model


@pytest.mark.parametrize(
    ("flag", "nested", "layer"),
    [
        (True, False, {"name": "then", "kind": "activation", "function": "relu"}),
        (False, False, {"name": "else", "kind": "activation", "function": "sigmoid"}),
        (True, True, {"name": "deep", "kind": "activation", "function": "relu"}),
    ],
)
def test_an_if_of_a_constant_condition_is_its_taken_branch(
    tmp_path: Path, flag: bool, nested: bool, layer: dict[str, Any]
) -> None:
    condition = helper.make_tensor("flag", TensorProto.BOOL, [], [flag])
    path = tmp_path / "m.onnx"
    path.write_bytes(_with_if(condition, nested).SerializeToString())
    layers = import_model(path).workload.model_dump(exclude_defaults=True)["layers"]
    assert layers == [TABLE[0], layer, *TABLE[2:]]


def _computed_condition() -> onnx.ModelProto:
    """A condition computed from the input's size (no activation)."""
    model = _with_if(None)
    model.graph.initializer.append(helper.make_tensor("k", TensorProto.INT64, [], [192]))
    return model


def _unknown_condition() -> onnx.ModelProto:
    """A condition whose data was stripped."""
    condition = helper.make_tensor("flag", TensorProto.BOOL, [], [True])
    condition.ClearField("int32_data")
    return _with_if(condition)


def _fewer_outputs() -> onnx.ModelProto:
    """A constant condition, and an ``If`` of two outputs whose branches make one."""
    model = _with_if(helper.make_tensor("flag", TensorProto.BOOL, [], [True]))
    model.graph.node[1].output.append("unused")
    return model


@pytest.mark.parametrize("build", [_computed_condition, _unknown_condition, _fewer_outputs])
def test_an_if_that_cannot_be_inlined_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Any
) -> None:
    """Its branches read the Conv's output: it is an op without a layer kind, not a
    constant dropped with everything after it."""
    assert _import(tmp_path, build(), capsys) == (
        "nodes[/if/If]: op type If has no layer kind; --unsupported vector maps it to a"
        " generic vector op (got 'If')"
    )


def test_input_shape_beyond_the_integer_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for dims, shown in (
        ("3x99999999999999999999x8", "99999999999999999999"),
        ("3x2147483648x8", "2147483648"),
    ):
        assert _import(tmp_path, tiny_graph(), capsys, "--input-shape", dims) == (
            f"--input-shape: each dimension is 1 to 2,147,483,647 (got [3, {shown}, 8])"
        )


def test_a_problem_of_the_table_is_blamed_on_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _import(tmp_path, tiny_graph(group=0), capsys) == (
        "nodes[/conv/Conv]: its layer conv: groups: input should be greater than 0 (got 0)"
    )
    model = tiny_graph()
    del model.graph.node[1:]
    model.graph.node[0].output[0] = "y"
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    assert _import(tmp_path, model, capsys) == (
        "graph.output: its layer loss: cross_entropy needs a features or sequence input"
        " (got 'chw 4x8x8')"
    )
    model = tiny_graph()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2**31
    assert _import(tmp_path, model, capsys) == (
        "graph.input: as the workload's input.channels: input should be less than or equal"
        " to 2147483647 (got 2147483648)"
    )


def _gzipped(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "m.onnx.gz"
    path.write_bytes(gzip.compress(data))
    return path


def test_a_gzipped_model_is_read_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_graph().SerializeToString()
    path = _gzipped(tmp_path, data)
    monkeypatch.setattr(onnx_graph, "MAX_GZIP_BYTES", len(data))
    assert import_model(path).workload.model_dump(exclude_defaults=True)["layers"] == TABLE
    monkeypatch.setattr(onnx_graph, "MAX_GZIP_BYTES", len(data) - 1)
    assert cli.main(["import", str(path), "--out", str(tmp_path / "w.yaml")]) == cli.EXIT_INPUT
    assert capsys.readouterr().err == (
        f"{path}: decompresses to more than {len(data) - 1:,} bytes, the limit of a gzipped"
        " model (only shapes are read: export it without weights, or decompress it)\n"
    )


PEAK_CHILD = """
import sys
from accelsim import cli
code = cli.main(sys.argv[2:])
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
with open(sys.argv[1], "w") as out:
    out.write(peak)
sys.exit(code)
"""
"""Run ``accelsim`` with the arguments after the first; write its peak resident memory
(KiB, of this process since it started: ``ru_maxrss`` would count the parent's
memory before ``exec``) to the first."""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_gzip_bomb_is_refused_in_seconds_and_bounded_memory(tmp_path: Path) -> None:
    """2 MiB of gzip expanding to 2 GiB: refused after 256 MiB, in well under 10 s of
    CPU time (its own, whatever else the machine runs) and 400 MiB of memory (the
    interpreter and onnx take about 60 MiB)."""
    member = gzip.compress(bytes(2**20), compresslevel=9)
    bomb = tmp_path / "bomb.onnx.gz"
    bomb.write_bytes(member * 2048)
    assert bomb.stat().st_size < 2.1 * 2**20
    peak = tmp_path / "peak"
    args = ["import", str(bomb), "--out", str(tmp_path / "w.yaml")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", PEAK_CHILD, str(peak), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert (done.returncode, done.stdout) == (cli.EXIT_INPUT, "")
    assert done.stderr == (
        f"{bomb}: decompresses to more than 268,435,456 bytes, the limit of a gzipped model"
        " (only shapes are read: export it without weights, or decompress it)\n"
    )
    assert cpu_seconds < 10
    assert int(peak.read_text()) < 400 * 1024  # KiB
