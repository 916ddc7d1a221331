#!/usr/bin/env python3
"""Search the approximate-dropout pattern distribution and write it for a run file.

    python scripts/dropout_search.py --rate 0.3 --units 2048 [--max-period 16] \
        [--iterations 1000] [--seed 0] --out dist.json

Projected SGD on the simplex (``accelsim/techniques/dropout/patterns.py``): every
neuron's expected drop rate is ``--rate``.  Prints the largest per-neuron error,
the distribution's entropy, the spread of a drawn step's rate and the most likely
patterns; ``techniques.approximate_dropout.distribution: dist.json`` uses the file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    from accelsim import write_dropout_distribution

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--units", type=int, required=True)
    parser.add_argument("--max-period", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not 0 < args.rate < 1 or args.units < 1 or args.max_period < 2:
        parser.error("need 0 < --rate < 1, --units >= 1 and --max-period >= 2")
    found, spread = write_dropout_distribution(
        args.out,
        args.rate,
        args.units,
        max_period=args.max_period,
        iterations=args.iterations,
        seed=args.seed,
    )
    print(
        f"rate {args.rate:g} over {args.units} units: largest per-unit error"
        f" {found.max_error:.2e}, entropy {found.entropy():.3f} nats,"
        f" drawn rate spread {spread:.3f}"
    )
    rows = json.loads(args.out.read_text(encoding="utf-8"))["patterns"]
    rows.sort(key=lambda r: -r["probability"])
    for r in rows[:8]:
        kind = "keep" if r["keep"] else "drop"
        print(f"  {kind} period {r['period']:>2} offset {r['offset']:>2}: {r['probability']:.4f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
