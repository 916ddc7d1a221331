"""Write ``accelsim/data/model_counts.json``: the counts ``accelsim models`` prints for
the bundled suite, with the hashes of the files they come from
(``accelsim/report/model_counts.py``).  Run it after changing a bundled workload, the
suite or how a model is lowered; ``tests/report/test_model_counts.py`` says when.

    python scripts/model_counts.py
"""

from __future__ import annotations

from accelsim import write_model_counts


def main() -> int:
    path, models = write_model_counts()
    print(f"wrote {path}: {models} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
