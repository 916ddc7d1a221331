"""``accelsim compile``: compile the event loop once for every DRAM model, ahead.

The compiled engine's loop is compiled the first time a step of a DRAM model runs on
it and cached on disk (:mod:`accelsim.timing.numba_setup`); ``accelsim compile``
pays that where it is shown (an install, a CI image's build) by running the bundled
smoke run on the compiled engine once per model, and says how long each took (a
model already cached only loads).  ``accelsim run`` and ``accelsim sweep`` print a
line on stderr before a step compiles the loop (:func:`engine_notices`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MODELS = {
    "fifo": [],
    "interleaved": ["dram.channels=2"],
    "row_buffer": ["dram.model=row_buffer"],
}
"""Each DRAM model, and the settings that give the smoke run's hardware that model."""


def add_command(sub: Any) -> None:
    """Add ``compile`` to the parser's subcommands."""
    sub.add_parser(
        "compile",
        help="compile the compiled engine's event loop for every DRAM model, once",
        description="Compile (or load, when cached) the compiled event engine's loop for"
        " every DRAM model by running the bundled smoke run on it, so that no later run"
        " or sweep pays the compile (about 6 s a model). Run it after installing, or"
        " when building a CI image.",
    )


def run_smoke(sets: list[str]) -> None:
    """Simulate the bundled smoke run on the compiled engine with ``sets``."""
    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import load_inputs
    from accelsim.driver.run import simulate_training
    from accelsim.resources import data_dir

    run_file = data_dir() / "configs" / "runs" / "smoke.yaml"
    simulate_training(load_inputs(run_file, parse_sets([*sets, "timing.engine=compiled"])))


def cmd_compile(_args: argparse.Namespace) -> int:
    """``accelsim compile``: the smoke run once per DRAM model, each line timed."""
    for model, sets in MODELS.items():
        began = time.perf_counter()
        run_smoke(sets)
        print(f"event loop for DRAM model {model}: ready in {time.perf_counter() - began:.1f} s")
    return 0


@contextmanager
def engine_notices() -> Iterator[None]:
    """Inside the block, a step about to compile the event loop says so on stderr
    (:func:`accelsim.timing.engines.notices`)."""
    from accelsim.timing.engines import notices

    def tell(line: str) -> None:
        print(f"accelsim: {line}", file=sys.stderr, flush=True)

    with notices(tell):
        yield
