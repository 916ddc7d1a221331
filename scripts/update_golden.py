#!/usr/bin/env python3
"""Regenerate the golden summaries in ``tests/golden/`` from the current simulator.

Run it only after a deliberate modelling change, and explain the change of
numbers in the commit message; it never edits any input file.

    python scripts/update_golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.end_to_end.test_golden import CASES, golden_path, golden_record  # noqa: E402


def main() -> int:
    for name in CASES:
        path = golden_path(name)
        path.write_text(json.dumps(golden_record(name), indent=2, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
