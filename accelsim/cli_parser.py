"""The command line's parser: every subcommand, its options, their defaults and the
examples its ``--help`` ends with.

:mod:`accelsim.cli` runs what it parses; the options of ``sweep``, ``collect``,
``plot``, ``import`` and ``compile`` come from :mod:`accelsim.cli_sweep`,
:mod:`accelsim.cli_import` and :mod:`accelsim.cli_compile`.  Building the parser
imports no command's module.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from accelsim import __version__, cli_compile, cli_import, cli_plan, cli_sweep
from accelsim.resources import bundled_path, data_dir

CONFIGS = data_dir() / "configs"
DEFAULT_ENERGY = CONFIGS / "energy" / "horowitz45.yaml"
DEFAULT_SUITE = CONFIGS / "suites" / "default.yaml"


def _positive(text: str) -> int:
    from accelsim.config.base import MAX_INT

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if not 0 < value <= MAX_INT:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer up to 2^31 - 1 = {MAX_INT:,} (got {value})"
        )
    return value


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated model names (got {text!r})")
    return names


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        help="parent directory of run directories (default: results)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing run directory")


def _add_sets(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help_text
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="accelsim", description="Cycle-level simulator of DNN training accelerators."
    )
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_layer(sub)
    _add_calibrate(sub)
    _add_suite(sub)
    models = sub.add_parser("models", help="sizes of workload files, or of the models of a suite")
    models.add_argument(
        "files",
        type=bundled_path,
        nargs="*",
        metavar="FILE",
        help="workload files to summarise: YAML layer tables or SCALE-Sim topology CSVs"
        " (none: the suite's models)",
    )
    models.add_argument(
        "--suite",
        type=bundled_path,
        default=None,
        help="suite YAML (default: configs/suites/default.yaml); not with FILE",
    )
    models.add_argument("--json", action="store_true", help="print one JSON list")
    check = sub.add_parser("check", help="validate config files without simulating")
    check.add_argument(
        "files",
        type=bundled_path,
        nargs="+",
        help="hardware, energy, workload, run, suite or sweep YAML files, or SCALE-Sim"
        " topology CSVs",
    )
    check.add_argument(
        "--max-points",
        type=_positive,
        default=None,
        metavar="N",
        help="allow a sweep file up to N points (default: 10,000)",
    )
    init = sub.add_parser(
        "init",
        help="copy the bundled configs and workloads into a new project directory",
        description="Copy the bundled configs/ and workloads/ into DIR (made if missing),"
        " side by side, so the copied run, sweep and suite files name the copies; edit"
        " them and run from DIR. Example: accelsim init myproject && cd myproject &&"
        " accelsim run configs/runs/default.yaml",
    )
    init.add_argument("directory", type=Path, help="the project directory")
    cli_sweep.add_commands(sub)
    cli_import.add_command(sub)
    cli_compile.add_command(sub)
    cli_plan.add_command(sub)
    for name, command in sub.choices.items():
        command.formatter_class = DefaultsFormatter
        command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    return parser


EXAMPLES = {
    "run": [
        "accelsim run configs/runs/default.yaml --force",
        "accelsim run configs/runs/mlp.yaml --set batch_size=256 --set array.dataflow=os",
        "accelsim run configs/runs/default.yaml --gantt --set processors=4 \\\n"
        '      --set "run.techniques={layerpipe: {}}"',
    ],
    "calibrate": [
        "accelsim calibrate configs/validation/silicon/tpu_v6e_gemm_train.csv"
        " --hardware configs/hardware/tpu_v6e.yaml --out fitted.yaml --fold-overlap",
        "accelsim calibrate my_gemms.csv --hardware configs/hardware/default.yaml"
        " --out fitted.yaml --fit op_overhead_us,array_efficiency",
        "accelsim calibrate configs/validation/silicon/vector_ops/tpu_v6e"
        " --hardware configs/hardware/tpu_v6e_calibrated.yaml --out fitted.yaml --half 0",
    ],
    "layer": [
        "accelsim layer --hardware configs/hardware/scalesim.yaml"
        " --conv 227 227 11 11 3 96 4 --convention scalesim --json",
        "accelsim layer --hardware configs/hardware/default.yaml --gemm 512 1024 768"
        " --phase bwd_weight",
    ],
    "suite": [
        "accelsim suite configs/runs/suite.yaml --models mlp,resnet18 --force",
        'accelsim suite configs/runs/suite.yaml --set "run.techniques={gradient_prediction: {}}"'
        " --format pdf --size column",
    ],
    "models": ["accelsim models", "accelsim models --json"],
    "check": ["accelsim check configs/hardware/*.yaml workloads/*.yaml configs/sweeps/*.yaml"],
    "compile": ["accelsim compile"],
    "import": [
        "accelsim import tests/fixtures/onnx/resnet18.onnx.gz --out resnet18_imported.yaml",
        "accelsim import torchvision.models:resnet18 --input-shape 3x224x224 \\\n"
        "      --out resnet18_imported.yaml --force --unsupported vector",
    ],
    "init": ["accelsim init myproject && cd myproject && accelsim run configs/runs/default.yaml"],
    "plan": [
        "accelsim plan workloads/llama3_8b.yaml --hardware configs/hardware/a100_cluster.yaml \\\n"
        "      --chips 16 --global-batch 16 --seq 2048",
        "accelsim plan workloads/gpt3_175b.yaml --hardware configs/hardware/a100_cluster.yaml \\\n"
        "      --chips 1024 --global-batch 1536 --plan tp=8,dp=128,recompute=selective --json",
    ],
    "sweep": [
        "accelsim sweep configs/sweeps/arrays.yaml --out results --jobs 2",
        "accelsim sweep configs/sweeps/suite_design.yaml --dask-workers 4",
    ],
    "collect": [
        "accelsim collect results/arrays --csv results/arrays.csv",
        "accelsim collect results/arrays --json",
    ],
    "plot": [
        "accelsim plot results/adagp --kind technique --format pdf --size column",
        "accelsim plot results/suite_design --kind speedup --baseline array.dataflow=os"
        " --where dram.bandwidth_bytes_per_cycle=128",
        "accelsim plot results/arrays --kind heatmap",
    ],
}
"""Examples that ``--help`` of each command ends with (each runs from a checkout, or
from anywhere after an install, the bundled configs standing in)."""


class DefaultsFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` text with every option's default (where its help does not give one
    already) and the examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or "default" in text or action.required:
            return text
        if action.default is argparse.SUPPRESS:  # --help, --version
            return text
        if action.default is None or action.default == []:
            return f"{text} (default: none)"
        if action.default is False:
            return f"{text} (default: off)"
        return f"{text} (default: %(default)s)"


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_run(sub: Subparsers) -> None:
    run = sub.add_parser("run", help="simulate one training step of a run file")
    run.add_argument("run_file", type=bundled_path, help="run YAML (configs/runs/*.yaml)")
    _add_output(run)
    run.add_argument(
        "--gantt",
        action="store_true",
        help="also draw gantt.png (op timeline per processor) for every step kind",
    )
    run.add_argument(
        "--memory-only",
        action="store_true",
        help="print one processor's memory by class against the DRAM capacity, without"
        " simulating the step or writing anything",
    )
    _add_sets(
        run,
        "override a field: batch_size=64, array.rows=64, "
        "hardware.dram.bandwidth_bytes_per_cycle=32, workload.input.height=32",
    )


def _add_layer(sub: Subparsers) -> None:
    from accelsim.config.base import Convention
    from accelsim.config.enums import PsumPolicy
    from accelsim.graph.ops import Phase

    layer = sub.add_parser("layer", help="simulate one GEMM or conv layer (SCALE-Sim style)")
    layer.add_argument("--hardware", type=bundled_path, required=True, help="hardware YAML")
    layer.add_argument(
        "--energy",
        type=bundled_path,
        default=DEFAULT_ENERGY,
        help="energy table YAML (default: configs/energy/horowitz45.yaml)",
    )
    _add_sets(layer, "override a hardware field, e.g. array.rows=64")
    shape = layer.add_mutually_exclusive_group(required=True)
    shape.add_argument(
        "--gemm", nargs=3, type=_positive, metavar=("M", "N", "K"), help="C[MxN] = A[MxK] . B[KxN]"
    )
    shape.add_argument(
        "--conv",
        nargs=7,
        type=_positive,
        metavar=("H", "W", "R", "S", "C", "K", "STRIDE"),
        help="padded ifmap HxW, RxS filter, C channels, K filters, stride",
    )
    shape.add_argument(
        "--topology",
        type=bundled_path,
        metavar="CSV",
        help="every row of a SCALE-Sim topology file, in one process",
    )
    layer.add_argument(
        "--phase",
        choices=[p.value for p in (Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT)],
        default="fwd",
        help="which training GEMM: forward, input gradient (dX) or weight gradient (dW)",
    )
    layer.add_argument(
        "--convention",
        choices=[c.value for c in Convention],
        help="timing convention: accelsim's (default), or SCALE-Sim 3.0.0's (exact compute cycles)",
    )
    layer.add_argument(
        "--psums",
        choices=[p.value for p in PsumPolicy],
        help="ws/is partial sums: chunk the stream so they fit (default), or spill",
    )
    layer.add_argument(
        "--fold-overlap",
        action=argparse.BooleanOptionalAction,
        help="pipeline the folds: fill and drain once per layer (accelsim convention only;"
        " default: off, or as the hardware file was calibrated)",
    )
    layer.add_argument("--json", action="store_true", help="print one JSON object")


def _add_calibrate(sub: Subparsers) -> None:
    from accelsim.config.enums import PsumPolicy

    cal = sub.add_parser(
        "calibrate", help="fit a hardware file's physical parameters to measured GEMM latencies"
    )
    cal.add_argument(
        "measurements",
        type=Path,
        help="CSV with columns M,N,K,dtype,latency_us (C = A[MxK].B[KxN]), or a directory"
        " of measured vector ops, one <op>_dataset.csv each (columns d0,d1,d2,latency_us)",
    )
    cal.add_argument("--hardware", type=bundled_path, required=True, help="hardware YAML to fit")
    cal.add_argument("--out", type=Path, required=True, help="the fitted hardware YAML to write")
    cal.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file (a symbolic link itself, never its target)",
    )
    cal.add_argument(
        "--fit",
        metavar="NAMES",
        help="comma-separated parameters to fit (default: all four: op_overhead_us,"
        " array_efficiency, read_bandwidth_gb_s, write_bandwidth_gb_s)",
    )
    cal.add_argument(
        "--range",
        dest="ranges",
        action="append",
        default=[],
        metavar="NAME=LOW:HIGH",
        help="search a parameter inside this part of its physical range",
    )
    cal.add_argument(
        "--fold-overlap",
        action=argparse.BooleanOptionalAction,
        help="fit with the folds pipelined (default: off, or as the hardware file was"
        " calibrated); the fitted file records it",
    )
    cal.add_argument(
        "--psums",
        choices=[p.value for p in PsumPolicy],
        help="partial sums: chunk (default) or spill; the fitted file records it",
    )
    cal.add_argument(
        "--half",
        type=int,
        metavar="SEED",
        help="vector ops only: fit on a random half of each op's rows (seed SEED) and"
        " print the other half's held-out error",
    )
    cal.add_argument(
        "--folds",
        type=int,
        default=0,
        metavar="K",
        help="also print the held-out error of K-fold cross-validation: each GEMM predicted"
        " by the same fit on the other folds (random folds, seed 0; the fit's closed form)",
    )
    _add_sets(cal, "override a hardware field before fitting, e.g. array.count=4")


def _add_suite(sub: Subparsers) -> None:
    suite = sub.add_parser("suite", help="simulate one training step of every model of a suite")
    suite.add_argument(
        "run_file", type=bundled_path, help="run YAML whose workload is replaced per model"
    )
    suite.add_argument(
        "--suite",
        type=bundled_path,
        default=DEFAULT_SUITE,
        help="suite YAML (default: configs/suites/default.yaml, the 14 models)",
    )
    suite.add_argument(
        "--models",
        type=_names,
        default=None,
        metavar="A,B,...",
        help="only these models of the suite (default: all of them)",
    )
    _add_output(suite)
    cli_sweep.add_figure_options(suite, "png")
    _add_sets(suite, "override a field for every model (as for run)")
