#!/usr/bin/env python3
"""Cross-validate accelsim's ``scalesim`` convention against SCALE-Sim 3.0.0.

For one hardware configuration and one or more SCALE-Sim-format topology CSVs
(conv rows ``name,H,W,R,S,C,NF,stride,`` and/or GEMM rows ``name,M,N,K,``) it
writes the matching SCALE-Sim ``.cfg`` and layout file into a temporary
directory, runs the SCALE-Sim CLI there in a subprocess (its own interpreter,
see ``--scalesim-python``), deletes the directory (SCALE-Sim always writes large
traces), simulates the same layers with accelsim in this process, and prints a
per-layer comparison and a summary line.

Checked (any difference fails, exit status 1), SCALE-Sim in CALC mode:
  compute cycles (``Total Cycles - Stall Cycles``), folds (SCALE-Sim's derived
  from its cycles: ``(cycles + 1) / per_fold``), mapping efficiency, SRAM ifmap
  and filter reads, SRAM ofmap writes, and DRAM ifmap/filter reads (words) for
  every operand that fits SCALE-Sim's prefetch buffer (footprint
  ``< 50 * floor(SRAM bytes / 100)`` words).
Reported only: DRAM reads of operands that do not fit, DRAM ofmap writes, and
  with ``--user`` SCALE-Sim's USER bandwidth mode (upstream stall bugs,
  scale-sim-v3 issue #130).

    python scripts/validate_scalesim.py --setup              # create .scalesim-venv/
    python scripts/validate_scalesim.py --hardware configs/hardware/scalesim.yaml \
        --topology configs/validation/alexnet_conv.csv
    python scripts/validate_scalesim.py --array 8x16 --dataflow is --sram-kb 16 \
        --bandwidth 16 --topology configs/validation/gemm_odd.csv --user
    python scripts/validate_scalesim.py --sweep --jobs 2    # 3 arrays x 3 dataflows x topologies

Exit status: 0 all checked quantities agree, 1 mismatches, 2 usage or run errors.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from accelsim import InputError, read_topology
from accelsim import TopologyLayer as Layer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = ROOT / ".scalesim-venv"
VALIDATION_DIR = ROOT / "configs" / "validation"
ENERGY_TABLE = ROOT / "configs" / "energy" / "horowitz45.yaml"
BASE_HARDWARE = ROOT / "configs" / "hardware" / "scalesim.yaml"
# numpy 2.4 crashes SCALE-Sim 3.0.0, hence its own interpreter.
SCALESIM_REQUIREMENTS = ("scalesim==3.0.0", "numpy<2.4")
PYTHON_ENV = "ACCELSIM_SCALESIM_PYTHON"

# The shipped comparison: 3 array shapes x 3 dataflows x these topologies.
# (rows, cols, SRAM kB per buffer); USER-mode DRAM bandwidth is cols words/cycle.
SWEEP_ARRAYS = (
    (32, 32, 64),  # SCALE-Sim scale.cfg
    (128, 128, 512),
    (31, 41, 48),  # odd, non-square: every layer leaves ragged folds
)
SWEEP_DATAFLOWS = ("os", "ws", "is")
SWEEP_TOPOLOGIES = ("alexnet_conv.csv", "resnet18_conv.csv", "gemm_odd.csv")

CFG_TEMPLATE = """[general]
run_name = run

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:   {ifmap_kb}
FilterSramSzkB:  {filter_kb}
OfmapSramSzkB:   {ofmap_kb}
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : {bandwidth}
Dataflow : {dataflow}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bandwidth}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bandwidth}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""

LAYOUT_HEADER = (
    "Layer name, IFMAP Height Intraline Factor, IFMAP Width Intraline Factor, "
    "Filter Height Intraline Factor, Filter Width Intraline Factor, "
    "Channel Intraline Factor, Num Filter Intraline Factor, "
    "IFMAP Height Intraline Order, IFMAP Width Intraline Order, Channel Intraline Order, "
    "IFMAP Height Interline Order, IFMAP Width Interline Order, Channel Interline Order, "
    "Num Filter Intraline Order, Channel Intraline Order, Filter Height Intraline Order, "
    "Filter Width Intraline Order, Num Filter Interline Order, Channel Interline Order, "
    "Filter Height Interline Order, Filter Width Interline Order,\n"
)
# Parsed (every field through int()) but unused with custom layouts off.
LAYOUT_ROW = "{name}, 1, 1, 1, 1, 1, 1, 3, 4, 5, 0, 1, 2, 4, 5, 6, 7, 0, 1, 2, 3,\n"
CONV_HEADER = (
    "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
    "Channels, Num Filter, Strides,\n"
)
GEMM_HEADER = "Layer, M, N, K,\n"


class HarnessError(Exception):
    """A usage, input or SCALE-Sim run problem (exit status 2)."""


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Hardware:
    """The SCALE-Sim side of a configuration (1-byte words, sizes in kB = KiB)."""

    rows: int
    cols: int
    dataflow: str
    ifmap_kb: int
    filter_kb: int
    ofmap_kb: int
    bandwidth: int
    preset: str | None = None

    def label(self) -> str:
        return f"{self.rows}x{self.cols} {self.dataflow}"

    def describe(self) -> str:
        return (
            f"{self.rows}x{self.cols} {self.dataflow}, SRAM kB ifmap/filter/ofmap "
            f"{self.ifmap_kb}/{self.filter_kb}/{self.ofmap_kb}, "
            f"bandwidth {self.bandwidth} words/cycle"
            + (f" (from {self.preset})" if self.preset else "")
        )


def _as_int(value: float, what: str) -> int:
    if not math.isfinite(value) or value != int(value) or value <= 0:
        raise HarnessError(f"{what} must be a positive whole number for SCALE-Sim, got {value}")
    return int(value)


def hardware_from_args(args: argparse.Namespace) -> Hardware:
    from accelsim import read_yaml

    preset = Path(args.hardware) if args.hardware else BASE_HARDWARE
    try:
        data = read_yaml(preset)
    except Exception as exc:
        raise HarnessError(f"{preset}: {exc}") from exc
    rows, cols = int(data["array"]["rows"]), int(data["array"]["cols"])
    if args.array:
        try:
            rows, cols = (int(x) for x in args.array.lower().split("x"))
        except ValueError:
            raise HarnessError(f"--array must look like 32x32, got {args.array!r}") from None
    dataflow = args.dataflow or str(data["array"]["dataflow"])
    buffers = data["buffers"]
    kb = {k: buffers[f"{k}_kib"] for k in ("ifmap", "filter", "ofmap")}
    if args.sram_kb is not None:
        kb = dict.fromkeys(kb, args.sram_kb)
    for k in kb:
        override = getattr(args, f"{k}_kb")
        if override is not None:
            kb[k] = override
    bandwidth = (
        args.bandwidth if args.bandwidth is not None else data["dram"]["bandwidth_bytes_per_cycle"]
    )
    return Hardware(
        rows=_as_int(rows, "array rows"),
        cols=_as_int(cols, "array cols"),
        dataflow=dataflow,
        ifmap_kb=_as_int(float(kb["ifmap"]), "ifmap SRAM kB"),
        filter_kb=_as_int(float(kb["filter"]), "filter SRAM kB"),
        ofmap_kb=_as_int(float(kb["ofmap"]), "ofmap SRAM kB"),
        bandwidth=_as_int(float(bandwidth), "bandwidth (words/cycle)"),
        preset=str(preset.relative_to(ROOT)) if preset.is_relative_to(ROOT) else str(preset),
    )


# ------------------------------------------------------------ SCALE-Sim semantics
# An independent statement of what SCALE-Sim 3.0.0 does (measured, see docs/validation.md):
# these decide which counts are comparable and derive folds from its cycles.


@dataclass(frozen=True)
class ScaleSimShape:
    m: int
    n: int
    k: int
    ifmap_unique: int  # distinct ifmap addresses read from DRAM
    filter_unique: int


def _touched(size: int, kernel: int, stride: int, windows: int) -> int:
    covered: set[int] = set()
    for e in range(windows):
        covered.update(range(e * stride, min(size, e * stride + kernel)))
    return len(covered)


def scalesim_shape(layer: Layer) -> ScaleSimShape:
    if layer.kind == "gemm":
        m, n, k = layer.dims
        return ScaleSimShape(m, n, k, m * k, k * n)
    h, w, r, s, c, nf, stride = layer.dims
    e = -(-(h - r + stride) // stride)  # SCALE-Sim's ceil output size
    f = -(-(w - s + stride) // stride)
    return ScaleSimShape(
        e * f,
        nf,
        r * s * c,
        _touched(h, r, stride, e) * _touched(w, s, stride, f) * c,
        r * s * c * nf,
    )


def per_fold_cycles(hw: Hardware, shape: ScaleSimShape) -> int:
    t = {"os": shape.k, "ws": shape.m, "is": shape.n}[hw.dataflow]
    if hw.dataflow == "os":
        return t + hw.rows + hw.cols - 2
    return 2 * hw.rows + hw.cols + t - 2


def scalesim_cycles(hw: Hardware, layer: Layer) -> int:
    """SCALE-Sim's compute cycles ``folds * per_fold - 1`` (its run time grows with them)."""
    shape = scalesim_shape(layer)
    sr, sc = {"os": (shape.m, shape.n), "ws": (shape.k, shape.n), "is": (shape.k, shape.m)}[
        hw.dataflow
    ]
    folds = -(-sr // hw.rows) * -(-sc // hw.cols)
    return folds * per_fold_cycles(hw, shape) - 1


def fits_words(kb: int) -> int:
    """SCALE-Sim CALC mode reads each distinct address once while fewer than this."""
    return 50 * ((kb * 1024) // 100)


# ------------------------------------------------------------------- SCALE-Sim run


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def scalesim_works(python: Path | str) -> bool:
    try:
        probe = subprocess.run(
            [str(python), "-c", "import scalesim.scale_sim, numpy"],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def ensure_scalesim_venv(venv: Path = DEFAULT_VENV, quiet: bool = True) -> Path:
    """Create ``venv`` with SCALE-Sim 3.0.0 unless it already works; return its python.

    Serialised with a lock file, so concurrent callers (e.g. test workers) share it.
    """
    python = venv_python(venv)
    if python.exists() and scalesim_works(python):
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.with_name(venv.name + ".lock")
    with open(lock_path, "w") as lock:
        with contextlib.suppress(ImportError):
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and scalesim_works(python):
            return python
        if venv.exists():
            shutil.rmtree(venv)
        out = subprocess.DEVNULL if quiet else None
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=out)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
        if quiet:
            pip.append("-q")
        done = subprocess.run([*pip, *SCALESIM_REQUIREMENTS], stdout=out)
        if done.returncode != 0 or not scalesim_works(python):
            raise HarnessError(f"could not install {' '.join(SCALESIM_REQUIREMENTS)} into {venv}")
    return python


def resolve_scalesim_python(explicit: str | None, setup: bool = False) -> Path:
    """--scalesim-python, else $ACCELSIM_SCALESIM_PYTHON, else .scalesim-venv/ (created with
    --setup), else this interpreter if it can import SCALE-Sim (the ``validate`` extra)."""
    chosen = explicit or os.environ.get(PYTHON_ENV)
    if chosen:
        if os.sep in chosen:  # relative paths must survive running in a temp dir
            chosen = os.path.abspath(chosen)
        if not scalesim_works(chosen):
            raise HarnessError(f"{chosen}: cannot import scalesim (and numpy) with this python")
        return Path(chosen)
    if setup:
        return ensure_scalesim_venv(DEFAULT_VENV, quiet=False)
    python = venv_python(DEFAULT_VENV)
    if python.exists() and scalesim_works(python):
        return python
    if scalesim_works(sys.executable):
        return Path(sys.executable)
    raise HarnessError(
        "no SCALE-Sim interpreter: run `python scripts/validate_scalesim.py --setup` "
        f"(creates {DEFAULT_VENV.relative_to(ROOT)}/ with {' '.join(SCALESIM_REQUIREMENTS)}), "
        f"or pass --scalesim-python / set {PYTHON_ENV}"
    )


def write_scalesim_inputs(
    directory: Path, hw: Hardware, layers: Sequence[Layer], mode: str
) -> list[str]:
    """Write ``c.cfg``, ``l.csv`` and ``t.csv`` (one kind of layer); return the CLI arguments."""
    kinds = {layer.kind for layer in layers}
    if len(kinds) != 1:
        raise HarnessError("one SCALE-Sim run takes one kind of layer")
    kind = kinds.pop()
    (directory / "c.cfg").write_text(CFG_TEMPLATE.format(**asdict(hw), mode=mode), encoding="utf-8")
    topo = [GEMM_HEADER if kind == "gemm" else CONV_HEADER]
    layout = [LAYOUT_HEADER]
    for i, layer in enumerate(layers):
        topo.append(f"L{i}, " + ", ".join(str(d) for d in layer.dims) + ",\n")
        layout.append(LAYOUT_ROW.format(name=f"L{i}"))
    (directory / "t.csv").write_text("".join(topo), encoding="utf-8")
    (directory / "l.csv").write_text("".join(layout), encoding="utf-8")
    args = ["-m", "scalesim.scale", "-c", "c.cfg", "-t", "t.csv", "-l", "l.csv", "-p", "out"]
    return [*args, "-i", "gemm"] if kind == "gemm" else args


def _number(text: str) -> int | float | str:
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return text
    if value.is_integer() and "." not in text and "e" not in text.lower():
        return int(value)
    return value


def _read_report(path: Path) -> list[dict[str, Any]]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split(",")]
    return [
        {h: _number(v) for h, v in zip(header, line.split(","), strict=False) if h}
        for line in lines[1:]
    ]


def read_reports(run_dir: Path) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    reports = [
        _read_report(run_dir / name)
        for name in ("COMPUTE_REPORT.csv", "BANDWIDTH_REPORT.csv", "DETAILED_ACCESS_REPORT.csv")
    ]
    for rows in zip(*reports, strict=True):
        row: dict[str, Any] = {}
        for part in rows:
            row.update(part)
        merged.append(row)
    return merged


LAYER_STARTS = "Running Layer "
"""How SCALE-Sim 3.0.0 starts each layer on stdout (``scalesim/simulator.py``)."""


def run_counting_layers(
    command: Sequence[str], cwd: Path, on_layer: Callable[[], None] | None = None
) -> tuple[int, str]:
    """Run ``command`` (a SCALE-Sim CLI) in ``cwd``, calling ``on_layer()`` as each layer
    it simulates ends (the next one starting, or the process ending).

    Returns its exit code and its stdout and stderr, interleaved.  Its output is read
    as it comes (unbuffered), so a long layer shows as the one in progress.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines: list[str] = []
    started = 0
    with subprocess.Popen(
        list(command), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(LAYER_STARTS):
                if started and on_layer is not None:
                    on_layer()
                started += 1
    if started and proc.returncode == 0 and on_layer is not None:
        on_layer()
    return proc.returncode, "".join(lines)


def run_scalesim(
    python: Path,
    hw: Hardware,
    layers: Sequence[Layer],
    mode: str = "CALC",
    on_layer: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Run SCALE-Sim (one subprocess per layer kind) in a temporary directory, calling
    ``on_layer()`` as each layer ends.

    Returns the per-layer report rows in ``layers`` order and the wall seconds.
    """
    results: dict[int, dict[str, Any]] = {}
    seconds = 0.0
    for kind in ("conv", "gemm"):
        picked = [i for i, layer in enumerate(layers) if layer.kind == kind]
        if not picked:
            continue
        with tempfile.TemporaryDirectory(prefix="accelsim-scalesim-") as tmp:
            work = Path(tmp)
            args = write_scalesim_inputs(work, hw, [layers[i] for i in picked], mode)
            start = time.perf_counter()
            code, output = run_counting_layers([str(python), *args], work, on_layer)
            seconds += time.perf_counter() - start
            run_dir = work / "out" / "run"
            if code != 0 or not (run_dir / "COMPUTE_REPORT.csv").exists():
                raise HarnessError(
                    f"SCALE-Sim failed ({hw.label()} {mode}, exit {code}):\n{output[-4000:]}"
                )
            rows = read_reports(run_dir)
        if len(rows) != len(picked):
            raise HarnessError(f"SCALE-Sim reported {len(rows)} layers, expected {len(picked)}")
        results.update(zip(picked, rows, strict=True))
    return [results[i] for i in range(len(layers))], seconds


# --------------------------------------------------------------------- accelsim run


def accelsim_hardware(hw: Hardware) -> Any:
    """The HardwareSpec equal to ``hw``: 1-byte words everywhere, buffers in KiB = kB."""
    from accelsim import hardware_from_data, read_yaml

    data = read_yaml(
        ROOT / hw.preset
        if hw.preset and not Path(hw.preset).is_absolute()
        else Path(hw.preset or BASE_HARDWARE)
    )
    data["array"] = {
        **data["array"],
        "rows": hw.rows,
        "cols": hw.cols,
        "dataflow": hw.dataflow,
        "precision": "int8",
    }
    data["buffers"] = {
        "ifmap_kib": hw.ifmap_kb,
        "filter_kib": hw.filter_kb,
        "ofmap_kib": hw.ofmap_kb,
    }
    data["dram"] = {**data["dram"], "bandwidth_bytes_per_cycle": hw.bandwidth}
    data["word_bytes"] = dict.fromkeys(
        ("activations", "weights", "gradients", "optimizer_state"), 1
    )
    data["name"] = f"scalesim-validate-{hw.rows}x{hw.cols}-{hw.dataflow}"
    try:
        return hardware_from_data(data, "validate_scalesim")
    except Exception as exc:
        raise HarnessError(f"accelsim rejects {hw.describe()}:\n{exc}") from exc


def run_accelsim(
    hw: Hardware, layers: Sequence[Layer], on_layer: Callable[[], None] | None = None
) -> tuple[list[dict[str, Any]], float]:
    """Simulate every layer with the library (scalesim convention, forward, batch 1),
    calling ``on_layer()`` as each ends."""
    from accelsim import Convention, Phase, load_energy, simulate_layer, topology_gemm

    spec = accelsim_hardware(hw)
    table = load_energy(ENERGY_TABLE)
    out = []
    start = time.perf_counter()
    for layer in layers:
        gemm = topology_gemm(layer, Phase.FWD, Convention.SCALESIM)
        out.append(simulate_layer(spec, table, gemm, Phase.FWD, Convention.SCALESIM))
        if on_layer is not None:
            on_layer()
    return out, time.perf_counter() - start


# ---------------------------------------------------------------------- comparison


@dataclass
class Quantity:
    name: str
    scalesim: int | float
    accelsim: int | float
    checked: bool  # a difference is a mismatch
    note: str = ""

    @property
    def equal(self) -> bool:
        if isinstance(self.scalesim, float) or isinstance(self.accelsim, float):
            return math.isclose(self.scalesim, self.accelsim, rel_tol=1e-9, abs_tol=1e-12)
        return self.scalesim == self.accelsim

    @property
    def mismatch(self) -> bool:
        return self.checked and not self.equal


@dataclass
class LayerComparison:
    layer: Layer
    shape: ScaleSimShape
    quantities: list[Quantity] = field(default_factory=list)

    def get(self, name: str) -> Quantity:
        return next(q for q in self.quantities if q.name == name)

    @property
    def mismatches(self) -> list[Quantity]:
        return [q for q in self.quantities if q.mismatch]


COLUMNS = (
    # (quantity, table header)
    ("cycles", "compute cyc"),
    ("folds", "folds"),
    ("mapping_eff", "map eff %"),
    ("sram_ifmap_reads", "SRAM if rd"),
    ("sram_filter_reads", "SRAM fl rd"),
    ("sram_ofmap_writes", "SRAM of wr"),
    ("dram_ifmap_reads", "DRAM if rd"),
    ("dram_filter_reads", "DRAM fl rd"),
    ("dram_ofmap_writes", "DRAM of wr"),
)


def compare_layer(
    hw: Hardware,
    layer: Layer,
    calc: dict[str, Any],
    acc: dict[str, Any],
    user: dict[str, Any] | None = None,
) -> LayerComparison:
    """Compare one layer's SCALE-Sim CALC report row (and optional USER row) with accelsim."""
    shape = scalesim_shape(layer)
    cmp = LayerComparison(layer, shape)
    q = cmp.quantities
    q.append(Quantity("shape", (shape.m, shape.n, shape.k), (acc["m"], acc["n"], acc["k"]), True))  # type: ignore[arg-type]
    cycles = int(calc["Total Cycles"]) - int(calc["Stall Cycles"])
    q.append(Quantity("cycles", cycles, int(acc["compute_cycles"]), True))
    per_fold = per_fold_cycles(hw, shape)
    folds: int | float = (
        (cycles + 1) // per_fold if (cycles + 1) % per_fold == 0 else (cycles + 1) / per_fold
    )
    q.append(Quantity("folds", folds, int(acc["folds"]), True))
    q.append(
        Quantity(
            "mapping_eff",
            float(calc["Mapping Efficiency %"]),
            100.0 * float(acc["mapping_efficiency"]),
            True,
        )
    )
    q.append(
        Quantity(
            "sram_ifmap_reads", int(calc["SRAM IFMAP Reads"]), int(acc["sram_reads"]["ifmap"]), True
        )
    )
    q.append(
        Quantity(
            "sram_filter_reads",
            int(calc["SRAM Filter Reads"]),
            int(acc["sram_reads"]["filter"]),
            True,
        )
    )
    q.append(
        Quantity(
            "sram_ofmap_writes",
            int(calc["SRAM OFMAP Writes"]),
            int(acc["sram_writes"]["ofmap"]),
            True,
        )
    )
    # 1-byte words: accelsim's DRAM bytes are words.
    if_fits = shape.ifmap_unique < fits_words(hw.ifmap_kb)
    fl_fits = shape.filter_unique < fits_words(hw.filter_kb)
    q.append(
        Quantity(
            "dram_ifmap_reads",
            int(calc["DRAM IFMAP Reads"]),
            int(acc["dram_bytes"]["ifmap"]),
            if_fits,
            "" if if_fits else "does not fit",
        )
    )
    q.append(
        Quantity(
            "dram_filter_reads",
            int(calc["DRAM Filter Reads"]),
            int(acc["dram_bytes"]["filter"]),
            fl_fits,
            "" if fl_fits else "does not fit",
        )
    )
    q.append(
        Quantity(
            "dram_ofmap_writes",
            int(calc["DRAM OFMAP Writes"]),
            int(acc["dram_bytes"]["ofmap"]),
            False,
            "reported only",
        )
    )
    if user is not None:
        q.append(Quantity("user_stall_cycles", int(user["Stall Cycles"]), 0, False, "USER mode"))
        q.append(
            Quantity(
                "user_dram_ifmap_reads",
                int(user["DRAM IFMAP Reads"]),
                int(acc["dram_bytes"]["ifmap"]),
                False,
                "USER mode",
            )
        )
        q.append(
            Quantity(
                "user_dram_filter_reads",
                int(user["DRAM Filter Reads"]),
                int(acc["dram_bytes"]["filter"]),
                False,
                "USER mode",
            )
        )
    return cmp


@dataclass
class Outcome:
    hw: Hardware
    topologies: list[str]
    comparisons: list[LayerComparison]
    scalesim_seconds: float
    accelsim_seconds: float
    user: bool

    @property
    def mismatches(self) -> int:
        return sum(len(c.mismatches) for c in self.comparisons)

    @property
    def failed_layers(self) -> int:
        return sum(1 for c in self.comparisons if c.mismatches)

    def count(self, predicate: Any) -> int:
        return sum(1 for c in self.comparisons for q in c.quantities if predicate(q))

    def summary(self) -> str:
        checked = self.count(lambda q: q.checked)
        dram = self.count(
            lambda q: q.name in ("dram_ifmap_reads", "dram_filter_reads") and q.checked
        )
        dram_all = 2 * len(self.comparisons)
        nofit_diff = self.count(
            lambda q: (
                q.name in ("dram_ifmap_reads", "dram_filter_reads")
                and not q.checked
                and not q.equal
            )
        )
        text = (
            f"SUMMARY {self.hw.label()} [{', '.join(self.topologies)}]: "
            f"{len(self.comparisons)} layers compared, {checked} quantities checked, "
            f"{self.mismatches} mismatch{'' if self.mismatches == 1 else 'es'} in"
            f" {self.failed_layers} layer{'' if self.failed_layers == 1 else 's'}; "
            f"DRAM reads compared for {dram}/{dram_all} operands (the rest do not fit; "
            f"{nofit_diff} of those differ, reported only)"
        )
        if self.user:
            user_diff = self.count(lambda q: q.name.startswith("user_dram") and not q.equal)
            stalled = sum(1 for c in self.comparisons if c.get("user_stall_cycles").scalesim)
            text += (
                f"; USER mode: {user_diff} DRAM read counts differ, {stalled} layers stall "
                "(reported only, scale-sim-v3 #130)"
            )
        return (
            text + f"; SCALE-Sim {self.scalesim_seconds:.1f} s, "
            f"accelsim {self.accelsim_seconds * 1e3:.1f} ms"
        )


def _cell(q: Quantity) -> str:
    def fmt(v: int | float) -> str:
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    if q.equal:
        return fmt(q.scalesim)
    mark = "!" if q.checked else "~"
    return f"{fmt(q.scalesim)}{mark}{fmt(q.accelsim)}"


def format_table(outcome: Outcome) -> str:
    headers = ["layer", "M,N,K", *[h for _, h in COLUMNS]]
    if outcome.user:
        headers += ["USER stall", "USER DRAM if", "USER DRAM fl"]
    rows = []
    for c in outcome.comparisons:
        cells = [c.layer.name, f"{c.shape.m},{c.shape.n},{c.shape.k}"]
        cells += [_cell(c.get(name)) for name, _ in COLUMNS]
        if outcome.user:
            cells += [
                str(c.get("user_stall_cycles").scalesim),
                _cell(c.get("user_dram_ifmap_reads")),
                _cell(c.get("user_dram_filter_reads")),
            ]
        cells.append("MISMATCH" if c.mismatches else "ok")
        rows.append(cells)
    headers.append("")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(h).rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    shape_bad = [c.layer.name for c in outcome.comparisons if c.get("shape").mismatch]
    if shape_bad:
        lines.append(
            f"GEMM shape differs (SCALE-Sim vs accelsim M,N,K) for: {', '.join(shape_bad)}"
        )
    lines.append(
        "cells: one value = equal; SS!acc = checked mismatch; SS~acc = differs, reported only "
        "(DRAM of an operand that does not fit, DRAM ofmap writes, USER mode)"
    )
    return "\n".join(lines)


def validate(
    hw: Hardware,
    layers: Sequence[Layer],
    python: Path,
    user: bool = False,
    topologies: Iterable[str] = (),
    stage: Callable[[str], None] | None = None,
    on_layer: Callable[[], None] | None = None,
) -> Outcome:
    """Run both simulators on ``layers`` and compare them; ``stage(name)`` is called as
    each of the (two or three) runs starts, ``on_layer()`` as each run's layer ends."""
    step = stage or (lambda name: None)
    step("accelsim")
    acc, acc_seconds = run_accelsim(hw, layers, on_layer)
    step("SCALE-Sim CALC")
    calc, ss_seconds = run_scalesim(python, hw, layers, "CALC", on_layer)
    user_rows: list[dict[str, Any] | None] = [None] * len(layers)
    if user:
        step("SCALE-Sim USER")
        got, extra = run_scalesim(python, hw, layers, "USER", on_layer)
        user_rows = list(got)
        ss_seconds += extra
    comparisons = [
        compare_layer(hw, layer, c, a, u)
        for layer, c, a, u in zip(layers, calc, acc, user_rows, strict=True)
    ]
    return Outcome(hw, list(topologies), comparisons, ss_seconds, acc_seconds, user)


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "hardware": asdict(outcome.hw),
        "topologies": outcome.topologies,
        "mismatches": outcome.mismatches,
        "scalesim_seconds": outcome.scalesim_seconds,
        "accelsim_seconds": outcome.accelsim_seconds,
        "layers": [
            {
                "name": c.layer.name,
                "kind": c.layer.kind,
                "dims": list(c.layer.dims),
                "quantities": {
                    q.name: {
                        "scalesim": q.scalesim,
                        "accelsim": q.accelsim,
                        "checked": q.checked,
                        "equal": q.equal,
                        "note": q.note,
                    }
                    for q in c.quantities
                },
            }
            for c in outcome.comparisons
        ],
    }


# --------------------------------------------------------------------------- sweep


def parse_arrays(text: str) -> tuple[tuple[int, int, int], ...]:
    """``--arrays`` text ``RxC:kB,...`` -> ``((rows, cols, kB), ...)``."""
    arrays = []
    for item in text.split(","):
        try:
            shape, kb = item.strip().lower().split(":")
            rows, cols = (int(x) for x in shape.split("x"))
            arrays.append((rows, cols, int(kb)))
        except ValueError:
            raise HarnessError(f"--arrays must look like 32x32:64,12x14:36, got {text!r}") from None
        if min(arrays[-1]) <= 0:
            raise HarnessError(f"--arrays sizes must be positive, got {item!r}")
    return tuple(arrays)


def sweep_jobs(
    topologies: Sequence[Path], arrays: Sequence[tuple[int, int, int]] = SWEEP_ARRAYS
) -> list[tuple[Hardware, Path]]:
    return [
        (Hardware(rows, cols, df, kb, kb, kb, cols), topo)
        for rows, cols, kb in arrays
        for df in SWEEP_DATAFLOWS
        for topo in topologies
    ]


def run_sweep(
    python: Path,
    topologies: Sequence[Path],
    jobs: int,
    user: bool,
    max_cycles: int | None = None,
    progress: Callable[[Outcome, int, int], None] | None = None,
    arrays: Sequence[tuple[int, int, int]] = SWEEP_ARRAYS,
) -> tuple[list[Outcome], int]:
    """Every array x SWEEP_DATAFLOWS x topology, SCALE-Sim runs ``jobs`` at a time.

    With ``max_cycles``, layers whose SCALE-Sim compute cycles would exceed it
    are left out (SCALE-Sim takes roughly 0.15 ms per cycle of a 32-wide array).
    ``progress(outcome, finished, total)`` is called as each run finishes.
    Returns the outcomes (in sweep order) and the number of layers left out.
    """
    parsed = {topo: read_topology(topo) for topo in topologies}
    work = []
    skipped = 0
    for hw, topo in sweep_jobs(topologies, arrays):
        kept = [
            x for x in parsed[topo] if max_cycles is None or scalesim_cycles(hw, x) <= max_cycles
        ]
        skipped += len(parsed[topo]) - len(kept)
        if kept:
            work.append((hw, topo, kept))

    def one(item: tuple[Hardware, Path, list[Layer]]) -> Outcome:
        hw, topo, layers = item
        return validate(hw, layers, python, user, [topo.name])

    # accelsim runs in this process (threads share it); SCALE-Sim in subprocesses.
    run_accelsim(work[0][0], work[0][2][:1])  # warm up once: imports, first calls
    # Longest first, so parallel runs finish together.
    order = sorted(work, key=lambda w: -sum(scalesim_cycles(w[0], x) * w[0].cols for x in w[2]))
    done: dict[int, Outcome] = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = {pool.submit(one, w): w for w in order}
        for future in concurrent.futures.as_completed(futures):
            outcome = future.result()
            done[id(futures[future])] = outcome
            if progress is not None:
                progress(outcome, len(done), len(work))
    return [done[id(w)] for w in work], skipped


def sweep_markdown(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| array | dataflow | SRAM kB | topology | layers | quantities checked "
        "| DRAM reads compared | mismatches | non-fitting DRAM reads differing (reported) |"
        + (
            " USER-mode DRAM reads differing / layers stalling (reported) |"
            if outcomes and outcomes[0].user
            else ""
        )
        + " SCALE-Sim s | accelsim ms |",
        "|---|---|---|---|---|---|---|---|---|"
        + ("---|" if outcomes and outcomes[0].user else "")
        + "---|---|",
    ]
    for o in outcomes:
        dram = o.count(lambda q: q.name in ("dram_ifmap_reads", "dram_filter_reads") and q.checked)
        nofit = o.count(
            lambda q: (
                q.name in ("dram_ifmap_reads", "dram_filter_reads")
                and not q.checked
                and not q.equal
            )
        )
        cells = [
            f"{o.hw.rows}x{o.hw.cols}",
            o.hw.dataflow,
            str(o.hw.ifmap_kb),
            ", ".join(o.topologies),
            str(len(o.comparisons)),
            str(o.count(lambda q: q.checked)),
            f"{dram}/{2 * len(o.comparisons)}",
            str(o.mismatches),
            str(nofit),
        ]
        if o.user:
            user_diff = o.count(lambda q: q.name.startswith("user_dram") and not q.equal)
            stalled = sum(1 for c in o.comparisons if c.get("user_stall_cycles").scalesim)
            cells.append(f"{user_diff} / {stalled}")
        cells += [f"{o.scalesim_seconds:.1f}", f"{o.accelsim_seconds * 1e3:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    total_layers = sum(len(o.comparisons) for o in outcomes)
    total_checked = sum(o.count(lambda q: q.checked) for o in outcomes)
    total_mis = sum(o.mismatches for o in outcomes)
    lines.append(
        f"| **total** | | | | **{total_layers}** | **{total_checked}** | | **{total_mis}** | |"
        + (" |" if outcomes and outcomes[0].user else "")
        + f" {sum(o.scalesim_seconds for o in outcomes):.0f} |"
        f" {sum(o.accelsim_seconds for o in outcomes) * 1e3:.0f} |"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Compare accelsim's scalesim convention with SCALE-Sim 3.0.0 layer by layer.",
        epilog="Exit status: 0 agree, 1 mismatches, 2 errors.",
    )
    p.add_argument(
        "--topology",
        "-t",
        action="append",
        default=[],
        metavar="CSV",
        help="SCALE-Sim topology CSV (conv and/or GEMM rows); repeatable",
    )
    p.add_argument("--layers", help="comma-separated layer names or 0-based row indices to keep")
    p.add_argument(
        "--hardware",
        metavar="YAML",
        help="accelsim hardware preset (default configs/hardware/scalesim.yaml); "
        "word sizes are forced to 1 byte",
    )
    p.add_argument("--array", metavar="RxC", help="array rows x cols, e.g. 32x32")
    p.add_argument("--dataflow", choices=("os", "ws", "is"))
    p.add_argument("--sram-kb", type=int, help="ifmap, filter and ofmap SRAM size in kB (= KiB)")
    p.add_argument("--ifmap-kb", type=int)
    p.add_argument("--filter-kb", type=int)
    p.add_argument("--ofmap-kb", type=int)
    p.add_argument("--bandwidth", type=int, help="DRAM words/cycle (SCALE-Sim USER mode only)")
    p.add_argument(
        "--user",
        action="store_true",
        help="also run SCALE-Sim's USER bandwidth mode and report (never fail on) "
        "its DRAM reads and stalls",
    )
    p.add_argument(
        "--scalesim-python",
        metavar="PY",
        help=f"python that can import scalesim 3.0.0 (default ${PYTHON_ENV}, else "
        ".scalesim-venv/bin/python, else this python if it has the validate extra)",
    )
    p.add_argument(
        "--setup",
        action="store_true",
        help="create .scalesim-venv/ with scalesim==3.0.0 and numpy<2.4 if missing",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="the shipped comparison: arrays 32x32/64kB, 128x128/512kB, 31x41/48kB (or "
        "--arrays) x os/ws/is x configs/validation/{alexnet_conv,resnet18_conv,gemm_odd}.csv "
        "(or --topology)",
    )
    p.add_argument(
        "--arrays",
        metavar="RxC:kB,...",
        help="--sweep: array shapes and SRAM kB per buffer, e.g. 12x14:36 (Eyeriss-like)",
    )
    p.add_argument("--jobs", "-j", type=int, default=1, help="parallel SCALE-Sim runs in --sweep")
    p.add_argument(
        "--max-cycles",
        type=int,
        metavar="N",
        help="--sweep: leave out layers whose SCALE-Sim compute cycles exceed N "
        "(the full sweep takes hours of SCALE-Sim time)",
    )
    p.add_argument("--json", metavar="FILE", help="also write all comparisons as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="summary lines only")
    p.add_argument(
        "--accelsim-only",
        action="store_true",
        help="simulate the topology with accelsim only and print one JSON line per layer "
        "(used by scripts/bench.py --vs-scalesim)",
    )
    return p


def select_layers(layers: list[Layer], spec: str | None) -> list[Layer]:
    if not spec:
        return layers
    keep = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        if token.isdigit() and int(token) < len(layers):
            keep.append(layers[int(token)])
            continue
        found = [layer for layer in layers if layer.name == token]
        if not found:
            raise HarnessError(f"--layers: no layer {token!r}")
        keep.extend(found)
    return keep


def accelsim_only(hw: Hardware, layers: Sequence[Layer]) -> int:
    results, first = run_accelsim(hw, layers)
    _, warm = run_accelsim(hw, layers)
    for layer, r in zip(layers, results, strict=True):
        print(
            json.dumps(
                {"name": layer.name, "compute_cycles": r["compute_cycles"], "folds": r["folds"]}
            )
        )
    print(json.dumps({"sim_seconds_first": first, "sim_seconds_warm": warm}))
    return 0


def progress_bar(bar: tqdm[Any]) -> Callable[[Outcome, int, int], None]:
    """A ``run_sweep`` progress callback that advances ``bar`` (rate and ETA) and prints
    each finished run's one-line summary above it."""

    def report(outcome: Outcome, finished: int, total: int) -> None:
        if bar.total != total:
            bar.reset(total)
            bar.update(finished - 1)
        bar.update(1)
        bar.write(f"[{finished}/{total}] {outcome.summary()}", file=sys.stderr)

    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.sweep:
            topologies = [Path(t) for t in args.topology] or [
                VALIDATION_DIR / t for t in SWEEP_TOPOLOGIES
            ]
            python = resolve_scalesim_python(args.scalesim_python, args.setup)
            arrays = parse_arrays(args.arrays) if args.arrays else SWEEP_ARRAYS
            with tqdm(desc="SCALE-Sim runs", unit="run", file=sys.stderr) as bar:
                outcomes, skipped = run_sweep(
                    python,
                    topologies,
                    args.jobs,
                    args.user,
                    args.max_cycles,
                    progress_bar(bar),
                    arrays,
                )
            for o in outcomes:
                if not args.quiet:
                    print(f"\n== {o.hw.describe()} / {', '.join(o.topologies)}")
                    print(format_table(o))
                print(o.summary())
            print()
            print(sweep_markdown(outcomes))
            total = sum(o.mismatches for o in outcomes)
            compared = sum(len(o.comparisons) for o in outcomes)
            print(
                f"SWEEP: {len(outcomes)} runs, {compared} layers compared, {total} mismatches"
                + (
                    f" ({skipped} layer runs over --max-cycles {args.max_cycles} left out)"
                    if skipped
                    else ""
                )
            )
            if args.json:
                Path(args.json).write_text(
                    json.dumps([outcome_json(o) for o in outcomes], indent=1)
                )
            return 1 if total else 0
        if not args.topology:
            if args.setup:
                print(f"SCALE-Sim python: {resolve_scalesim_python(args.scalesim_python, True)}")
                return 0
            raise HarnessError("give --topology CSV (or --sweep, or --setup)")
        hw = hardware_from_args(args)
        layers = [layer for t in args.topology for layer in read_topology(Path(t))]
        layers = select_layers(layers, args.layers)
        if args.accelsim_only:
            return accelsim_only(hw, layers)
        python = resolve_scalesim_python(args.scalesim_python, args.setup)
        names = [Path(t).name for t in args.topology]
        runs = 3 if args.user else 2
        with tqdm(total=runs * len(layers), unit="layer", file=sys.stderr) as bar:
            # One step per layer of each run (accelsim, SCALE-Sim CALC, USER), so a
            # long SCALE-Sim run shows which of its layers it is at.

            def layer_done() -> None:
                bar.update(1)

            stage = bar.set_description
            outcome = validate(hw, layers, python, args.user, names, stage, layer_done)
        print(
            f"hardware: {hw.describe()}; SCALE-Sim CALC mode{' + USER mode' if args.user else ''}"
        )
        if not args.quiet:
            print(format_table(outcome))
        print(outcome.summary())
        if args.json:
            Path(args.json).write_text(json.dumps(outcome_json(outcome), indent=1))
        return 1 if outcome.mismatches else 0
    except HarnessError as exc:
        print(f"validate_scalesim: error: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
