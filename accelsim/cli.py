"""Command line: ``accelsim run | layer | suite | models | check``, and ``sweep |
collect | plot`` (:mod:`accelsim.cli_sweep`).

With :mod:`accelsim.cli_sweep`, the only module that prints or exits.  Bad input (any
:class:`~accelsim.errors.InputError`, an existing run directory) exits with
code 2 and one line per problem, ``file: key.path: problem (got value)``;
an internal error exits with code 1.  Set ``ACCELSIM_DEBUG=1`` (or ``true``,
``yes``) for tracebacks.
SIGINT, SIGTERM and SIGHUP remove unfinished results and exit ``128 +
signal`` with one line; a closed stdout (``| head``) exits 141 silently.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeAlias, cast

from accelsim import __version__, cli_import, cli_sweep
from accelsim.collections_policy import fewer_collections
from accelsim.errors import InputError, LimitError, OutputError
from accelsim.resources import bundled_path, data_dir

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2
EXIT_SIGNAL = 128
"""Stopped by signal N: exit ``128 + N`` (130 for Ctrl-C), as a shell reports it."""
SIGPIPE = 13
CONFIGS = data_dir() / "configs"
DEFAULT_ENERGY = CONFIGS / "energy" / "horowitz45.yaml"
DEFAULT_SUITE = CONFIGS / "suites" / "default.yaml"
# The module and function of each command, imported when that command runs, so that
# a command loads none of what only another one needs (``tests/test_startup.py``).
COMMANDS = {
    "run": ("accelsim.cli_run", "cmd_run"),
    "layer": ("accelsim.cli_layer", "cmd_layer"),
    "calibrate": ("accelsim.cli_calibrate", "cmd_calibrate"),
    "suite": ("accelsim.cli_run", "cmd_suite"),
    "models": ("accelsim.cli_run", "cmd_models"),
    "check": ("accelsim.cli_run", "cmd_check"),
    "import": ("accelsim.cli_import", "cmd_import"),
    "init": ("accelsim.cli_run", "cmd_init"),
    "sweep": ("accelsim.cli_sweep", "cmd_sweep"),
    "collect": ("accelsim.cli_sweep", "cmd_collect"),
    "plot": ("accelsim.cli_sweep", "cmd_plot"),
}


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
    "import": [
        "accelsim import tests/fixtures/onnx/resnet18.onnx.gz --out resnet18_imported.yaml",
        "accelsim import torchvision.models:resnet18 --input-shape 3x224x224 \\\n"
        "      --out resnet18_imported.yaml --force --unsupported vector",
    ],
    "init": ["accelsim init myproject && cd myproject && accelsim run configs/runs/default.yaml"],
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
        default=Convention.ACCELSIM.value,
        help="timing convention: accelsim's, or SCALE-Sim 3.0.0's (exact compute cycles)",
    )
    layer.add_argument(
        "--psums",
        choices=[p.value for p in PsumPolicy],
        default=PsumPolicy.CHUNK.value,
        help="ws/is partial sums: chunk the stream so they fit, or spill",
    )
    layer.add_argument(
        "--fold-overlap",
        action="store_true",
        help="pipeline the folds: fill and drain once per layer (accelsim convention only)",
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
        help="CSV with columns M,N,K,dtype,latency_us (C = A[MxK].B[KxN])",
    )
    cal.add_argument("--hardware", type=bundled_path, required=True, help="hardware YAML to fit")
    cal.add_argument("--out", type=Path, required=True, help="the fitted hardware YAML to write")
    cal.add_argument(
        "--fit",
        default="",
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
        action="store_true",
        help="fit with the folds pipelined (then use the file with --fold-overlap)",
    )
    cal.add_argument(
        "--psums", choices=[p.value for p in PsumPolicy], default=PsumPolicy.CHUNK.value
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


class _Interrupted(BaseException):
    """A termination signal arrived (a BaseException, as KeyboardInterrupt is)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _on_signal(signum: int, _frame: object) -> None:
    # Only the first signal interrupts; later ones must not cut the clean-up short.
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise _Interrupted(signum)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`_Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _fewer_collections(process_ends: bool) -> Iterator[None]:
    """Collect young objects less often while a command runs
    (:func:`~accelsim.collections_policy.fewer_collections`).

    When the process ends with the command (``process_ends``), the objects left
    are frozen (:func:`gc.freeze`) instead of collected: the interpreter's exit
    would otherwise traverse every one of them (pydantic's schemas, numpy's and
    the step's objects), 50-100 ms after a run on the reference machine, to free
    memory the operating system takes back anyway.  Output files are closed by
    then and the standard streams are still flushed at exit.
    """
    with fewer_collections():
        try:
            yield
        finally:
            if process_ends:
                gc.freeze()


def escaped(text: str, keep: str = "\n\t") -> str:
    """``text`` with every non-printable character but those in ``keep`` escaped
    (``\x1b``, ``\x07``, ``\u2028``), as error messages show them."""
    if text.isprintable():
        return text
    return "\n".join(
        line
        if line.isprintable()
        else "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in line)
        for line in text.split("\n")
    )


class _Escaping:
    """A text stream that writes ``stream`` with :func:`escaped` text (other attributes
    are the stream's): what accelsim prints cannot drive the terminal (set its title,
    clear its screen), whatever names the inputs hold."""

    def __init__(self, stream: TextIO, keep: str) -> None:
        self._stream = stream
        self._keep = keep

    def write(self, text: str) -> int:
        self._stream.write(escaped(text, self._keep))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def _escaped_output() -> Iterator[None]:
    """Escape control characters in everything printed while a command runs: tables,
    ``wrote ...`` lines, CSV and warnings on stdout, messages on stderr.  Newlines and
    tabs are kept, and on stderr the carriage returns that redraw a progress bar."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _Escaping(stdout, "\n\t"))
    sys.stderr = cast(TextIO, _Escaping(stderr, "\n\t\r"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accelsim`` console script and ``python -m accelsim``.

    Without ``argv`` the command is the process's own (``sys.argv``) and the
    process ends after it (see :func:`_fewer_collections`); with ``argv`` (a
    caller in Python) nothing outlives the call.
    """
    # Parsing builds the parser, which imports pydantic: collect less from the start.
    with _fewer_collections(process_ends=argv is None), _escaped_output():
        try:
            args = build_parser().parse_args(argv)
            module, name = COMMANDS[args.command]
            command = getattr(importlib.import_module(module), name)
        except KeyboardInterrupt:
            # Ctrl-C while pydantic, NumPy and the command's modules load (before the
            # command's own handlers): nothing is written yet, so one line suffices.
            print("accelsim: stopped by SIGINT", file=sys.stderr)
            return EXIT_SIGNAL + signal.SIGINT
        return _run(command, args)


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``command``, mapping what it raises to a message and an exit code."""
    try:
        with _signals_interrupt():
            return command(args)
    except _Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"accelsim: stopped by {name}; unfinished results removed", file=sys.stderr)
        return EXIT_SIGNAL + exc.signum
    except BrokenPipeError:
        # The reader of stdout went away (``accelsim ... | head``): stop quietly,
        # as a program killed by SIGPIPE would, without a second error at exit.
        _silence_stdout()
        return EXIT_SIGNAL + SIGPIPE
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INPUT
    except (OutputError, LimitError) as exc:
        print(f"accelsim: {exc}" if isinstance(exc, LimitError) else exc, file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:
        if debugging():
            raise
        print(f"accelsim: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(
            "accelsim: rerun with ACCELSIM_DEBUG=1 for a traceback and report it", file=sys.stderr
        )
        return EXIT_INTERNAL


DEBUG_VALUES = ("1", "true", "yes")
"""Values of ``ACCELSIM_DEBUG`` (any letter case) that turn tracebacks on; ``0``,
``false``, ``no`` or an empty value keep them off."""


def debugging() -> bool:
    """Whether ``ACCELSIM_DEBUG`` asks for tracebacks of internal errors."""
    return os.environ.get("ACCELSIM_DEBUG", "").strip().lower() in DEBUG_VALUES


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated model names (got {text!r})")
    return names
