#!/usr/bin/env python3
"""Time a GPT-3 175B training step (``workloads/gpt3_175b.yaml``, 2,048 tokens, Adam,
global batch 1,536) in the 3D plans of Narayanan et al. (2021): tensor 8 x pipeline 16
x data 8 on 1,024 chips and x data 64 on 8,192 chips, 1F1B with micro-batches of one
sequence, on the A100 cluster preset (``accelsim plan ... --plan tp=8,pp=16,dp=N``),
paired, against one default ``accelsim run``.

Each command runs in a fresh process, as a user runs it, the plan in a fresh store
with ``--jobs 1`` (simulated in that process).  After one untimed warm-up of each, the
commands alternate run by run, so all see the same load; the table gives each one's
median CPU seconds (user + system, the child's ``wait4`` usage), its peak resident set,
the step's cycles and which processors were simulated, and the targets: at most 30
CPU-s and 2 GiB at 1,024 chips, 8,192 chips within 1.5x of that.

With ``--search`` it then times the whole plan search once (``accelsim plan`` without
``--plan`` on 1,024 chips, ``--jobs 2``, a fresh store): its wall and CPU seconds (its
worker processes' included), the plans it enumerated, refused and simulated, and the
target: at most 10 minutes on two cores.

    python scripts/bench_llm.py                  # 1,024 and 8,192 chips, 3 runs
    python scripts/bench_llm.py --chips 1024 --runs 1
    python scripts/bench_llm.py --chips 1024 --runs 1 --search
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TENSOR, PIPELINE, GLOBAL_BATCH = 8, 16, 1536
CPU_TARGET_S, RSS_TARGET_MIB, SCALE_TARGET = 30.0, 2048, 1.5
SEARCH_CHIPS, SEARCH_JOBS, SEARCH_TARGET_S = 1024, 2, 600.0


def argv(chips: int | None, out: str, search: bool = False) -> list[str]:
    """The command: GPT-3 on ``chips`` chips (its search with ``search``), or the
    default run for None."""
    accelsim = [sys.executable, "-m", "accelsim"]
    if chips is None:
        return [*accelsim, "run", "configs/runs/default.yaml", "--out", out, "--force"]
    plan = f"tp={TENSOR},pp={PIPELINE},dp={chips // (TENSOR * PIPELINE)}"
    given = ["--json"] if search else ["--plan", plan]
    jobs = SEARCH_JOBS if search else 1
    return [
        *accelsim,
        "plan",
        "workloads/gpt3_175b.yaml",
        "--hardware",
        "configs/hardware/a100_cluster.yaml",
        "--chips",
        str(chips),
        "--global-batch",
        str(GLOBAL_BATCH),
        *given,
        "--jobs",
        str(jobs),
        "--store",
        str(Path(out) / "plan"),
    ]


def search_row(out: str) -> None:
    """Time the whole search once and print its row."""
    shutil.rmtree(out)
    os.mkdir(out)
    command = argv(SEARCH_CHIPS, out, search=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{stderr.decode()}")
    counts = json.loads(stdout)["search"]
    refused = sum(counts["refused_by_checks"].values()) + sum(counts["refused_by_memory"].values())
    print(
        f"GPT-3 175B plan search, {SEARCH_CHIPS:,} chips, --jobs {SEARCH_JOBS}:"
        f" {counts['enumerated']:,} plans, {refused:,} refused, {counts['simulated']:,}"
        f" simulated; {wall:.0f} s wall, {cpu:.0f} CPU-s, load average {os.getloadavg()[0]:.1f};"
        f" target at most {SEARCH_TARGET_S:.0f} s on two cores"
    )


def timed(command: list[str], out: str) -> tuple[float, int, dict[str, object]]:
    """CPU seconds, peak RSS (MiB) and ``summary.json`` of one run of ``command``."""
    shutil.rmtree(out)
    os.mkdir(out)
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        error = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"failed: {' '.join(command)}\n{error}")
    (summary,) = Path(out).glob("**/summary.json")
    record = json.loads(summary.read_text())
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chips", type=int, nargs="+", default=[1024, 8192])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command")
    parser.add_argument("--search", action="store_true", help="then time the whole search once")
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
            else (
                f"GPT-3 175B, {chips:,} chips, t {TENSOR} x p {PIPELINE}"
                f" x d {chips // (TENSOR * PIPELINE):,}"
            )
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
    if args.search:
        with tempfile.TemporaryDirectory() as out:
            search_row(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
