"""Write ``accelsim/data/model_counts.json``: the counts ``accelsim models`` prints for
the bundled suite, with the hashes of the files they come from
(:mod:`accelsim.report.model_counts`).  Run it after changing a bundled workload, the
suite or how a model is lowered; ``tests/report/test_model_counts.py`` says when.

    python scripts/model_counts.py
"""

from __future__ import annotations

import json

from accelsim.driver.inputs import suite_entries, suite_models
from accelsim.lowering.stats import model_stats
from accelsim.report.model_counts import COUNTS_FILE, counts_record
from accelsim.resources import data_dir


def main() -> int:
    suite = data_dir() / "configs" / "suites" / "default.yaml"
    workloads = [entry.workload_path for entry in suite_entries(suite)]
    stats = [model_stats(workload, infos) for workload, infos in suite_models(suite)]
    path = data_dir() / COUNTS_FILE
    path.write_text(json.dumps(counts_record(suite, workloads, stats), indent=2) + "\n")
    print(f"wrote {path}: {len(stats)} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
