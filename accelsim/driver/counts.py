"""Write the cache of the bundled suite's counts (:mod:`accelsim.report.model_counts`),
counted live: ``scripts/model_counts.py``."""

from __future__ import annotations

import json
from pathlib import Path

from accelsim.driver.inputs import suite_entries, suite_models
from accelsim.lowering.stats import model_stats
from accelsim.report.model_counts import COUNTS_FILE, counts_record
from accelsim.resources import data_dir


def write_model_counts() -> tuple[Path, int]:
    """Count every model of the bundled suite and write ``data/model_counts.json``;
    the file written and the number of models."""
    suite = data_dir() / "configs" / "suites" / "default.yaml"
    workloads = [entry.workload_path for entry in suite_entries(suite)]
    stats = [model_stats(workload, infos) for workload, infos in suite_models(suite)]
    path = data_dir() / COUNTS_FILE
    path.write_text(json.dumps(counts_record(suite, workloads, stats), indent=2) + "\n")
    return path, len(stats)
