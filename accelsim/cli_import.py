"""``accelsim import``: a model (ONNX file or PyTorch module factory) -> a workload file."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.cli_sweep import printing
from accelsim.errors import WorkloadError
from accelsim.importer.input_shapes import INPUT_TYPES
from accelsim.units import plural

FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
"""``package.module:callable``: a function (or class) returning an ``nn.Module``."""


def add_command(sub: Any) -> None:
    """Add ``import`` to the parser's subcommands."""
    imp = sub.add_parser(
        "import",
        help="write a workload file from an ONNX model or a PyTorch module",
        description="Import a model as a layer table. MODEL is an ONNX file (exported in"
        " training mode; .onnx or .onnx.gz) or package.module:factory, a callable returning"
        " a torch.nn.Module (needs torch).",
    )
    imp.add_argument("model", help="ONNX file, or package.module:factory")
    imp.add_argument("--out", type=Path, required=True, help="the workload YAML to write")
    imp.add_argument(
        "--input-shape",
        type=_shape,
        action="append",
        default=None,
        metavar="DIMS[:TYPE]",
        help="input per sample, e.g. 3x224x224 or 128 (required for a module; for ONNX only"
        " when the input has symbolic dimensions); once per input for a model of several"
        " (a decoder's target and memory: --input-shape 16x64 --input-shape 32x64). A"
        " module's input is exported as floats, or as TYPE: int (integers: token ids, or"
        " a mask of ones and zeros such as Hugging Face's attention_mask: --input-shape"
        " 128:int --input-shape 128:int) or bool (a padding mask); a mask that only masks"
        " attention scores is read as a constant, no input of the table",
    )
    imp.add_argument(
        "--tokens", action="store_true", help="a module's (first) input is token ids (integers)"
    )
    imp.add_argument(
        "--name",
        default=None,
        help="workload name (default: the ONNX file's name without .onnx or .onnx.gz, or the"
        " factory's name: resnet18 for torchvision.models:resnet18)",
    )
    imp.add_argument(
        "--unsupported",
        choices=("error", "vector"),
        default="error",
        help="an op without a layer kind: an error, or a generic vector layer",
    )
    imp.add_argument(
        "--loss",
        choices=("cross_entropy", "none"),
        default="cross_entropy",
        help="cross_entropy: append that loss when the graph has none; none: append nothing",
    )
    imp.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file (a symbolic link itself, never its target)",
    )


@dataclass(frozen=True)
class InputArg:
    """One ``--input-shape``.

    Attributes:
        dims: The input's dimensions per sample.
        element_type: Its elements' type in a module's export: ``float`` unless given.
        typed: Whether a type was given (``128:int``).
    """

    dims: tuple[int, ...]
    element_type: str
    typed: bool


def _shape(text: str) -> InputArg:
    shape, colon, kind = text.partition(":")
    if colon and kind not in INPUT_TYPES:
        message = f"expected a type of {', '.join(INPUT_TYPES)} after the colon (got {text!r})"
        raise argparse.ArgumentTypeError(message)
    try:
        dims = tuple(int(part) for part in shape.lower().split("x"))
    except ValueError:
        message = f"expected dimensions like 3x224x224 or 128:int (got {text!r})"
        raise argparse.ArgumentTypeError(message) from None
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"dimensions must be positive (got {text!r})")
    return InputArg(dims, kind or "float", bool(colon))


def cmd_import(args: argparse.Namespace) -> int:
    """``accelsim import``: write the table, print its size and notes.

    The file is staged and renamed into place once it reads back as the table
    (:func:`~accelsim.report.staging.staged_file`): an existing ``--out`` is
    replaced only with ``--force`` (a symbolic link itself, never its target), and
    never when it is the model file.
    """
    from accelsim.config.loader import reads_back
    from accelsim.importer.model_import import import_model
    from accelsim.lowering.infer import infer_shapes
    from accelsim.lowering.stats import model_stats
    from accelsim.report.staging import check_file, not_an_input, staged_file, write_verified

    out: Path = args.out
    if os.path.lexists(args.model):
        not_an_input(out, "--out", {"the model file": Path(args.model)})
    check_file(out, args.force)
    source = _source(args.model)
    factory = None if isinstance(source, Path) else args.model.partition(":")[2]
    given: list[InputArg] | None = args.input_shape
    typed = given is not None and any(arg.typed for arg in given)
    result = import_model(
        source,
        input_shape=None if given is None else [arg.dims for arg in given],
        tokens=args.tokens,
        input_types=[arg.element_type for arg in given] if given and typed else None,
        name=args.name or (factory and factory.rpartition(".")[2]),
        unsupported=args.unsupported,
        loss=args.loss,
    )
    reads_back(result.text, result.workload)
    with staged_file(out, args.force) as path:
        write_verified(path, result.text)
    stats = model_stats(result.workload, infer_shapes(result.workload, str(out)))
    with printing(out):
        print(
            f"wrote {out}: {stats.layers} {plural(stats.layers, 'layer')},"
            f" {stats.params:,} {plural(stats.params, 'parameter')},"
            f" {stats.forward_macs:,} forward MACs per sample ({stats.input})"
        )
    return 0


def _source(model: str) -> Any:
    """An ONNX path, or the module a ``package.module:factory`` builds; what the
    factory's own code raises is an input error at the factory spec."""
    if os.path.lexists(model) or not FACTORY.fullmatch(model):
        return Path(model)
    factory = _factory(model)
    try:
        built = factory()
    except (Exception, SystemExit) as exc:
        raise WorkloadError.single(model, "", "calling the factory failed", _text(exc)) from None
    if isinstance(built, str | bytes | os.PathLike):
        message = "the factory returned a string or a path, not a torch.nn.Module"
        raise WorkloadError.single(model, "", message, built)
    return built


def _factory(model: str) -> Any:
    """The callable ``package.module:factory`` names, its module found in the working
    directory first (as ``python -m`` finds it)."""
    module_name, _, attr = model.partition(":")
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        factory: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            factory = getattr(factory, part)
    except (ImportError, AttributeError) as exc:
        raise WorkloadError.single(model, "", f"cannot load the factory: {exc}") from None
    except (Exception, SystemExit) as exc:
        message = "importing the factory's module failed"
        raise WorkloadError.single(model, "", message, _text(exc)) from None
    finally:
        sys.path.remove(cwd)
    if not callable(factory):
        message = "the factory is not callable"
        raise WorkloadError.single(model, "", message, type(factory).__name__)
    return factory


def _text(exc: BaseException) -> str:
    """An exception as a message shows it: its type, and its text when it has one."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
