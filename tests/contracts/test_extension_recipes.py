"""The extension recipes of ``docs/architecture.md`` (section 10), followed to the letter.

Each recipe lists, in a fenced block, the files a plug-in of its kind adds (``new``)
and the existing files it edits (``edit``).  For each kind, a test here reads that
list, copies the ``accelsim`` package, adds a trivial but real plug-in exactly as
listed (its new files, from ``plugins/`` at the recipe's paths, an edit to each listed
file and to no other), runs accelsim from the copy in fresh interpreters and checks
the plug-in's numbers, counted by hand.  Then it takes each listed edit out alone and
expects the plug-in not to run.  So a recipe that misses a file fails (the plug-in does
not run), and so does one that lists a file the plug-in does not need (this plug-in
has no edit for it, or runs without it).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelsim.timing.memories import registry
from tests.contracts.recipe_edits import (
    Edit,
    add_entry,
    add_import,
    add_member,
    insert_before,
    insert_before_last,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PLUGINS = Path(__file__).resolve().parent / "plugins"
"""Each plug-in's new files, at the paths its recipe gives them (names filled in)."""

RECIPE = re.compile(r'^```text title="Recipe: (?P<title>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)


@dataclass(frozen=True)
class Recipe:
    """The files a recipe lists, under ``accelsim/``: added, and edited."""

    new: tuple[str, ...]
    edit: tuple[str, ...]


def recipes() -> dict[str, Recipe]:
    """Every recipe of the page, by title: each line of its block ``new PATH what`` or
    ``edit PATH what``, a line starting with a space continuing the one before."""
    found = {}
    for block in RECIPE.finditer(DOC.read_text(encoding="utf-8")):
        files: dict[str, list[str]] = {"new": [], "edit": []}
        for line in block["body"].splitlines():
            if line.strip() and not line.startswith(" "):
                verb, path = line.split()[:2]
                assert verb in files, f"recipe {block['title']!r}: {line!r} is neither new nor edit"
                files[verb].append(path)
        found[block["title"]] = Recipe(tuple(files["new"]), tuple(files["edit"]))
    return found


class NotRun(Exception):
    """A command of a plug-in's scenario exited with an error: its exit status and
    what it printed to standard error."""

    def __init__(self, status: int, stderr: str) -> None:
        super().__init__(stderr)
        self.status, self.stderr = status, stderr


@dataclass(frozen=True)
class PlugIn:
    """A trivial plug-in of one kind: its recipe's title, the names its recipe's
    placeholders take, its edits of each existing file, and the runs that check its
    numbers (each raising :class:`NotRun` when a command fails)."""

    recipe: str
    names: Mapping[str, str]
    edits: Mapping[str, tuple[Edit, ...]]
    scenario: Callable[[Copy], None]

    def named(self, pattern: str) -> str:
        """A recipe's path with this plug-in's names."""
        for placeholder, name in self.names.items():
            pattern = pattern.replace(placeholder, name)
        return pattern


class Copy:
    """The package copied with a plug-in added as its recipe says, and a directory
    outside it to run accelsim in."""

    def __init__(self, plug_in: PlugIn, tmp_path: Path) -> None:
        found = recipes()
        if plug_in.recipe not in found:
            pytest.fail(f"docs/architecture.md has no recipe {plug_in.recipe!r}")
        recipe = found[plug_in.recipe]
        self.root, self.work = tmp_path / "copy", tmp_path / "work"
        self.package = self.root / "accelsim"
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / "accelsim", self.package, ignore=ignore)
        self.work.mkdir()
        for pattern in recipe.new:
            path = plug_in.named(pattern)
            if not (PLUGINS / path).is_file():
                pytest.fail(f"recipe {plug_in.recipe!r} adds {path}, which is not in {PLUGINS}")
            (self.package / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(PLUGINS / path, self.package / path)
        self.originals: dict[str, str] = {}
        for listed in recipe.edit:
            if listed not in plug_in.edits:
                pytest.fail(f"recipe {plug_in.recipe!r} edits {listed}, which its plug-in does not")
            self.originals[listed] = (self.package / listed).read_text(encoding="utf-8")
            self.edit(listed, plug_in.edits[listed])

    def edit(self, listed: str, edits: tuple[Edit, ...]) -> None:
        """Make ``edits`` to the copy's ``listed`` file, from its original text."""
        text = self.originals[listed]
        for edit in edits:
            text = edit(text, listed)
        (self.package / listed).write_text(text, encoding="utf-8")

    def restore(self, listed: str) -> None:
        """Take the edits of ``listed`` out again."""
        (self.package / listed).write_text(self.originals[listed], encoding="utf-8")

    def run(self, *argv: str, code: str = "") -> str:
        """``accelsim ARGV``, or ``python -c CODE ARGV``, from the copy: what it printed.

        Raises:
            NotRun: when it exits with an error.
        """
        env = {
            **os.environ,
            "PYTHONPATH": str(self.root),
            "PYTHONDONTWRITEBYTECODE": "1",  # an edit taken out is never read from a cache
            "ACCELSIM_KERNELS": "numpy",
            "NUMBA_CACHE_DIR": str(self.work / "numba"),
        }
        command = ["-c", code] if code else ["-m", "accelsim"]
        done = subprocess.run(
            [sys.executable, *command, *argv],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=env,
            timeout=300,
        )
        if done.returncode:
            raise NotRun(done.returncode, done.stderr.strip())
        return done.stdout

    def write(self, name: str, text: str) -> Path:
        """A file of the run directory."""
        (self.work / name).write_text(text, encoding="utf-8")
        return self.work / name


def failure(plug_in: PlugIn, copy: Copy) -> str:
    """What failed when the plug-in's scenario ran on ``copy`` (empty: it ran)."""
    try:
        plug_in.scenario(copy)
    except NotRun as failed:
        return failed.stderr or f"exit status {failed.status}"
    return ""


def follow(plug_in: PlugIn, tmp_path: Path) -> None:
    """The plug-in runs as its recipe adds it, and does not without any one of the
    recipe's edits."""
    copy = Copy(plug_in, tmp_path)
    if failed := failure(plug_in, copy):
        pytest.fail(f"the plug-in of recipe {plug_in.recipe!r} does not run:\n{failed}")
    for listed in copy.originals:
        copy.restore(listed)
        if not failure(plug_in, copy):
            pytest.fail(f"recipe {plug_in.recipe!r} lists {listed}: its plug-in runs without")
        copy.edit(listed, plug_in.edits[listed])


def run_file(copy: Copy, workload: str, techniques: str = "{}", batch: int = 4) -> Path:
    """A run file of ``workload`` on the SCALE-Sim-like hardware, timed by SimPy."""
    configs = ROOT / "configs"
    return copy.write(
        "run.yaml",
        f"name: recipe\nhardware: {configs / 'hardware' / 'scalesim.yaml'}\n"
        f"workload: {workload}\nenergy: {configs / 'energy' / 'horowitz45.yaml'}\n"
        f"batch_size: {batch}\noptimizer: {{kind: sgd}}\ntiming: {{engine: simpy}}\n"
        f"techniques: {techniques}\n",
    )


# -- a memory model: one channel whose bus turns around between reads and writes ------

TURNAROUND_SPEC = '''class TurnaroundDramSpec(DramSpec):
    """``model: turnaround``: one channel whose bus turns around between directions."""

    model: Literal["turnaround"] = Field(
        default="turnaround", description="turnaround: one channel turning between directions."
    )
    turnaround_cycles: Annotated[int, Field(ge=0, le=2**20, strict=True)] = Field(
        default=8, description="Cycles a transfer waits when the last was the other way."
    )

    @model_validator(mode="after")
    def _one_channel(self) -> TurnaroundDramSpec:
        if self.channels != 1:
            raise RuleViolation("model", "turnaround is one channel", self.model)
        return self


'''

BOOK = """
import json, sys
from pathlib import Path

import numpy as np

from accelsim.config.loader import load_hardware, parse_sets
from accelsim.timing.flat import memory_table
from accelsim.timing.loop.records import Dram
from accelsim.timing.machine import Machine
from accelsim.timing.memories import compiled
from accelsim.timing.memory import MemoryState, Stream, StreamClass
from accelsim.timing.numba_setup import njit

machine = Machine.of(load_hardware(Path(sys.argv[1]), parse_sets(sys.argv[2:])))
now, n_bytes, kind, write = (0, 492, 0), (256, 128, 128), (0, 0, 1), (False, True, False)


@njit
def book(dram, now, n_bytes, kind, write):
    leaves = np.zeros(len(now), np.int64)
    for i in range(len(now)):
        leaves[i] = compiled.reserve(dram, 0, now[i], n_bytes[i], kind[i], write[i])
    return leaves


state = MemoryState(machine.dram[0])
streams = [Stream(StreamClass(k), write=w) for k, w in zip(kind, write)]
python = [state.reserve(*r) - state.latency_cycles for r in zip(now, n_bytes, streams)]
arrays = [np.asarray(a, np.int64) for a in (now, n_bytes, kind)]
table = memory_table(machine.dram)
dram = Dram(table, table.state.copy(), compiled.model_of(table))
fast = book(dram, *arrays, np.asarray(write)).tolist()
print(json.dumps({"python": python, "compiled": fast}))
"""
"""Three transfers booked on the kernel in Python (the SimPy engine's and a lone op's
face) and on the compiled engine's dispatch: their cycles leaving the memory."""

TURNAROUND_SETS = (
    "dram.model=turnaround",
    "dram.turnaround_cycles=40",
    "dram.bandwidth_bytes_per_cycle=128",
    "dram.latency_cycles=100",
)


def turnaround_runs(copy: Copy) -> None:
    """An 8 x 8 x 8 GEMM alone (``accelsim layer``) on the default 128 x 128 array, its
    fp16 operands 128 B each: the prologue reads A and B, 256 B, 0..2, arriving at 102;
    one fold computes 2 * 128 + 128 + 8 - 2 = 390 cycles, to 492; then C's 128 B are
    written after the bus turns around: 492 + 40 + 1 = 533, arriving at 633."""
    default = str(ROOT / "configs" / "hardware" / "default.yaml")
    sets = [arg for s in TURNAROUND_SETS for arg in ("--set", s)]
    out = copy.run("layer", "--hardware", default, "--gemm", "8", "8", "8", "--json", *sets)
    layer = json.loads(out)
    assert (layer["compute_cycles"], layer["stall_cycles"], layer["total_cycles"]) == (
        390,
        243,
        633,
    )
    assert layer["dram_bytes"] == {"ifmap": 128, "filter": 128, "ofmap": 128, "psum_read": 0}
    # The same two transfers on both faces of the kernel, then a 128 B read at 0 that
    # queues behind the write and turns the bus around again: 533 + 40 + 1 = 574.
    booked = json.loads(copy.run(default, *TURNAROUND_SETS, code=BOOK))
    assert booked == {"python": [2, 533, 574], "compiled": [2, 533, 574]}


MEMORY_MODEL = PlugIn(
    recipe="a memory model",
    names={"<model>": "turnaround"},
    edits={
        "config/dram.py": (
            insert_before("dram_model_of", TURNAROUND_SPEC),
            add_member("DramModelSpec", 'Annotated[TurnaroundDramSpec, Tag("turnaround")]'),
        ),
        "timing/memories/registry.py": (
            add_import("from accelsim.timing.memories.turnaround import Turnaround"),
            add_entry("MODELS", "Turnaround.name: Turnaround.of"),
        ),
        "timing/memories/compiled.py": (
            add_import("from accelsim.timing.memories import turnaround"),
            insert_before("reserve", "_turnaround = inline(turnaround.Turnaround.reserve)\n\n\n"),
            insert_before_last(
                "reserve",
                "if code == turnaround.CODE:\n"
                "    return _turnaround(table.params, p, state, s, now, n_bytes, stream, write)\n",
            ),
        ),
    },
    scenario=turnaround_runs,
)


def test_the_turnaround_code_is_the_next_free_one() -> None:
    """The plug-in's ``CODE``, 3, is the next free one, as its recipe says."""
    codes = {build.__self__.code for build in registry.MODELS.values()}
    assert max(codes) + 1 == len(codes) == 3
    assert "CODE = 3\n" in (PLUGINS / "timing" / "memories" / "turnaround.py").read_text()


def test_a_memory_model_added_by_its_recipe(tmp_path: Path) -> None:
    follow(MEMORY_MODEL, tmp_path)


@pytest.mark.slow
def test_a_memory_model_added_by_its_recipe_times_a_run_alike_in_both_engines(
    tmp_path: Path,
) -> None:
    """A training step of the MLP on the model, through the SimPy engine and the
    compiled event loop (compiled afresh with the model's kernel: about 20 s): the same
    cycles; and with no turnaround, the cycles of the fifo model it adds to."""
    copy = Copy(MEMORY_MODEL, tmp_path)
    run = run_file(copy, str(ROOT / "workloads" / "mlp.yaml"))
    cycles = {}
    for engine, model, turnaround in [
        ("simpy", "turnaround", 40),
        ("compiled", "turnaround", 40),
        ("simpy", "turnaround", 0),
        ("simpy", "fifo", 0),
    ]:
        sets = [f"timing.engine={engine}", f"hardware.dram.model={model}"]
        if model == "turnaround":
            sets.append(f"hardware.dram.turnaround_cycles={turnaround}")
        out = copy.work / f"{engine}-{model}-{turnaround}"
        copy.run("run", str(run), "--out", str(out), *[a for s in sets for a in ("--set", s)])
        (summary,) = out.glob("*/summary.json")
        cycles[engine, model, turnaround] = json.loads(summary.read_text())["total_cycles"]
    assert cycles["simpy", "turnaround", 40] == cycles["compiled", "turnaround", 40]
    assert cycles["simpy", "turnaround", 0] == cycles["simpy", "fifo", 0]
    assert cycles["simpy", "turnaround", 40] > cycles["simpy", "fifo", 0]


# -- a technique: one vector op of its own, checking the loss gradient -------------------


def loss_check_runs(copy: Copy) -> None:
    """The 784-2048-2048-10 MLP at batch 4: its loss gradient is 4 x 10 = 40 elements,
    which the check reads at 3 ops each: one op, 120 vector ops, no MACs, all its own."""
    mlp = ROOT / "workloads" / "mlp.yaml"
    run = run_file(copy, str(mlp), "{loss_check: {ops_per_element: 3}}")
    copy.run("run", str(run), "--out", str(copy.work / "out"))
    out = copy.work / "out" / "mlp_recipe_loss_check"
    base = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    step = json.loads((out / "steps" / "loss_check" / "summary.json").read_text(encoding="utf-8"))
    mine = step["owners"]["loss_check"]
    assert (mine["ops"], mine["macs"], mine["vector_ops"]) == (1, 0, 120)
    assert set(base["owners"]) == {"core"}
    assert step["vector_ops"] == base["vector_ops"] + 120
    assert (
        step["stages"]["backward"]["vector_ops"] == base["stages"]["backward"]["vector_ops"] + 120
    )
    assert base["training"]["sections"]["loss_check"] == {
        "vector_ops": {"loss_check": 120},
        "inputs": [
            {"key": "ops_per_element", "value": 3, "source": "run", "basis": "set in the run"}
        ],
    }


TECHNIQUE = PlugIn(
    recipe="a technique",
    names={"<name>": "loss_check"},
    edits={
        "techniques/registry.py": (
            add_entry(
                "REGISTRY", '"loss_check": "accelsim.techniques.loss_check.technique:LossCheck"'
            ),
        ),
    },
    scenario=loss_check_runs,
)


def test_a_technique_added_by_its_recipe(tmp_path: Path) -> None:
    follow(TECHNIQUE, tmp_path)


# -- a layer kind: the input times a constant ---------------------------------------------

SCALE_SPEC = '''class Scale(LayerBase):
    """The input times a constant, element by element."""

    kind: Literal["scale"] = Field(description=KIND)
    factor: float = Field(description="The constant.")


'''

SCALED = """name: scaled
input: {kind: vector, features: 16}
layers:
  - {name: fc1, kind: linear, out_features: 8}
  - {name: half, kind: scale, factor: 0.5}
  - {name: fc2, kind: linear, out_features: 4}
  - {name: loss, kind: cross_entropy}
"""


def scale_runs(copy: Copy) -> None:
    """A 16-8-4 MLP with ``half`` scaling fc1's 8 outputs, at batch 2: one op each way of
    2 x 8 = 16 elements, 32 vector ops, no parameters, no MACs."""
    run = run_file(copy, str(copy.write("scaled.yaml", SCALED)), batch=2)
    copy.run("run", str(run), "--out", str(copy.work / "out"))
    with (copy.work / "out" / "scaled_recipe" / "layers.csv").open(encoding="utf-8") as table:
        half = next(row for row in csv.DictReader(table) if row["layer"] == "half")
    counts = ("ops", "params", "fwd_macs", "bwd_input_macs", "bwd_weight_macs", "vector_ops")
    assert [int(half[c]) for c in counts] == [2, 0, 0, 0, 0, 32]


LAYER_KIND = PlugIn(
    recipe="a layer kind",
    names={"<family>": "scale"},
    edits={
        "workload/model.py": (insert_before("Layer", SCALE_SPEC), add_member("Layer", "Scale")),
        "lowering/rules/__init__.py": (
            add_import("from accelsim.lowering.rules import scale"),
            add_entry("__all__", '"scale"'),
        ),
    },
    scenario=scale_runs,
)


def test_a_layer_kind_added_by_its_recipe(tmp_path: Path) -> None:
    follow(LAYER_KIND, tmp_path)


# -- a workload file format: a line of layer widths -----------------------------------------


def widths_runs(copy: Copy) -> None:
    """``16 8 4``: fc1 (16 x 8 weights and 8 biases, 136 parameters), a ReLU, fc2 (8 x 4
    and 4, 36), the loss: 172 parameters; per sample 128 + 32 = 160 forward MACs, and
    for training as many weight-gradient MACs and fc2's 32 input-gradient ones."""
    net = copy.write("net.widths", "16 8 4\n")
    (model,) = json.loads(copy.run("models", str(net), "--json"))
    assert (model["name"], model["input"], model["layers"]) == ("net", "features 16", 4)
    assert (model["params"], model["forward_macs"], model["training_macs"]) == (172, 160, 352)
    assert model["source"] == "net.widths (layer widths)"
    bad = copy.write("bad.widths", "16 x 4\n")
    with pytest.raises(NotRun) as refused:
        copy.run("check", str(bad))
    assert (refused.value.status, refused.value.stderr) == (
        2,
        "bad.widths: width 2: not a positive integer (got 'x')",
    )


READER = PlugIn(
    recipe="a workload file format",
    names={"<format>": "widths"},
    edits={
        "workload/formats.py": (
            add_entry("READERS", '".widths": ("accelsim.workload.widths", "widths_table")'),
        ),
    },
    scenario=widths_runs,
)


def test_a_workload_file_format_added_by_its_recipe(tmp_path: Path) -> None:
    follow(READER, tmp_path)


def test_the_page_has_a_recipe_per_extension_point() -> None:
    plug_ins = (MEMORY_MODEL, TECHNIQUE, LAYER_KIND, READER)
    assert sorted(recipes()) == sorted(p.recipe for p in plug_ins)
