"""``accelsim models``' table, and the counts of the bundled suite's models cached in
``accelsim/data/model_counts.json``.

Counting a model lowers its whole training step, so the fourteen bundled models cost
about twice a ResNet-18 simulation.  Their counts are a data file instead, written by
``scripts/model_counts.py`` with the SHA-256 of the suite file and of every workload
file it lists; ``accelsim models`` prints them while each of those files is as
hashed, and counts live otherwise (an edited file).  ``tests/report/test_model_counts.py``
holds the file equal to the live counts, so a change to lowering that moves a count
fails until the file is written again.  This module imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelsim.lowering.counts import ModelStats
from accelsim.resources import data_dir

COUNTS_FILE = "model_counts.json"
"""The cache's name in the bundled data directory."""


def file_hash(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def counts_record(suite: Path, workloads: Sequence[Path], stats: Sequence[ModelStats]) -> Any:
    """The cache's content: the hash of ``suite`` and of each of its ``workloads`` (by
    path relative to the data directory) and each model's counts."""
    root = data_dir()
    files = [suite, *workloads]
    return {
        "files": {f.resolve().relative_to(root).as_posix(): file_hash(f) for f in files},
        "models": [dataclasses.asdict(s) for s in stats],
    }


def cached_counts(suite: Path) -> list[ModelStats] | None:
    """The cached counts of ``suite``'s models, if ``suite`` is the bundled default
    suite and it and its workload files are as hashed; otherwise None."""
    root = data_dir()
    if suite.resolve() != (root / "configs" / "suites" / "default.yaml").resolve():
        return None
    try:
        record = json.loads((root / COUNTS_FILE).read_text(encoding="utf-8"))
        if any(file_hash(root / name) != digest for name, digest in record["files"].items()):
            return None
        return [ModelStats(**model) for model in record["models"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def models_table(stats: Sequence[ModelStats]) -> str:
    """One line per model: input, parameters, MACs per sample, layer count (the name
    column at least 14 characters wide and the input's 22, wider for a longer one)."""
    width = max([14, *(len(s.name) for s in stats)])
    inputs = max([22, *(len(s.input) for s in stats)])
    header = (
        f"{'model':<{width}} {'input':<{inputs}} {'params':>13} {'fwd MACs':>16} "
        f"{'train MACs':>17} {'layers':>6}"
    )
    lines = [header]
    for s in stats:
        lines.append(
            f"{s.name:<{width}} {s.input:<{inputs}} {s.params:>13,} {s.forward_macs:>16,} "
            f"{s.training_macs:>17,} {s.layers:>6}"
        )
    return "\n".join(lines)
