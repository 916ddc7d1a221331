#!/usr/bin/env python3
"""Time a GPT-3 175B training step (``workloads/gpt3_175b.yaml``, 2,048 tokens, one
sequence a replica, Adam) on 1,024 chips as tensor 8 x data 128 and on 8,192 chips
as tensor 8 x data 1,024, paired, against one default ``accelsim run``.

Each command runs in a fresh process, as a user runs it: ``accelsim run`` of
``configs/runs/default.yaml`` with the workload, ``run.parallel: {tensor: 8}``,
``assignment: data_parallel``, ``dram.sharing: per_processor`` (symmetry needs a
DRAM per processor), ``run.on_capacity: report`` (the step does not fit a 16 GiB
chip without pipeline stages, and is reported anyway) and the default ring.  After
one untimed warm-up of each, the commands alternate run by run, so all see the same
load; the table gives each one's median CPU seconds (user + system, the child's
``wait4`` usage), its peak resident set, the step's cycles and which processors
were simulated, and the targets: at most 30 CPU-s and 2 GiB at 1,024 chips, 8,192
chips within 1.5x of that.

    python scripts/bench_llm.py                  # 1,024 and 8,192 chips, 3 runs
    python scripts/bench_llm.py --chips 1024 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TENSOR = 8
CPU_TARGET_S, RSS_TARGET_MIB, SCALE_TARGET = 30.0, 2048, 1.5


def argv(chips: int | None, out: str) -> list[str]:
    """The command: GPT-3 on ``chips`` chips, or the default run for None."""
    run = [sys.executable, "-m", "accelsim", "run", "configs/runs/default.yaml", "--out", out]
    if chips is None:
        return [*run, "--force"]
    sets = [
        "workload=workloads/gpt3_175b.yaml",
        "optimizer={kind: adam}",
        f"processors={chips}",
        f"batch_size={chips // TENSOR}",
        f"run.parallel={{tensor: {TENSOR}}}",
        "assignment=data_parallel",
        "dram.sharing=per_processor",
        "run.on_capacity=report",
    ]
    return [*run, "--force", *(a for s in sets for a in ("--set", s))]


def timed(command: list[str], out: str) -> tuple[float, int, dict[str, object]]:
    """CPU seconds, peak RSS (MiB) and ``summary.json`` of one run of ``command``."""
    for old in Path(out).glob("*/summary.json"):
        old.unlink()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        error = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"failed: {' '.join(command)}\n{error}")
    (summary,) = Path(out).glob("*/summary.json")
    record = json.loads(summary.read_text())
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chips", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    rows: list[int | None] = [None, *args.chips]
    cpu: dict[int | None, list[float]] = {c: [] for c in rows}
    rss: dict[int | None, int] = dict.fromkeys(rows, 0)
    record: dict[int | None, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as out:
        for repeat in range(args.runs + 1):
            for chips in rows:
                seconds, peak, record[chips] = timed(argv(chips, out), out)
                if repeat:  # the first round warms the caches up
                    cpu[chips].append(seconds)
                    rss[chips] = max(rss[chips], peak)
    print(f"{'step':44} {'CPU s':>8} {'peak MiB':>9} {'step cycles':>16}  simulated")
    for chips in rows:
        label = (
            "default run (ResNet-18, batch 32)"
            if chips is None
            else (f"GPT-3 175B, {chips:,} chips, t {TENSOR} x d {chips // TENSOR:,}")
        )
        symmetry = record[chips].get("symmetry")
        simulated = (
            "all"
            if not isinstance(symmetry, dict)
            else (", ".join(f"p{p}" for p in symmetry["simulated_processors"]))
        )
        print(
            f"{label:44} {statistics.median(cpu[chips]):8.2f} {rss[chips]:9d}"
            f" {int(str(record[chips]['total_cycles'])):16,d}  {simulated}"
        )
    first = args.chips[0]
    print(
        f"targets: {first:,} chips at most {CPU_TARGET_S:.0f} CPU-s and {RSS_TARGET_MIB} MiB;"
        f" {SCALE_TARGET}x that for 8,192"
    )
    for chips in args.chips[1:]:
        ratio = statistics.median(cpu[chips]) / statistics.median(cpu[first])
        print(
            f"{chips:,} chips over {first:,}: {ratio:.2f}x CPU, {rss[chips] / rss[first]:.2f}x RSS"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
