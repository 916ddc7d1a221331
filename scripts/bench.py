#!/usr/bin/env python3
"""Time whole accelsim commands and print a table (median of several runs).

Each command runs in a fresh process, exactly as a user would run it, after one
untimed warm-up run that fills Numba's on-disk cache and Python's bytecode
cache (``PYTHONDONTWRITEBYTECODE`` is dropped for the children).  Peak RSS is
the child's maximum resident set size.  The last two rows are references: the
start-up floor (``scripts/startup_floor.py``: NumPy, PyYAML and one pydantic
model validated, no accelsim code) is what any command that validates a file
pays first, and the interpreter alone says how fast the machine was.

    python scripts/bench.py            # default set, 5 runs each
    python scripts/bench.py --runs 9
    python scripts/bench.py --vs-scalesim --runs 3   # SCALE-Sim 3.0.0 vs accelsim
    python scripts/bench.py --sweep --runs 3          # sweep throughput (bench_sweep.py)
    python scripts/bench.py --short     # check, plot, models against the floor, paired
    python scripts/bench.py --engines   # SimPy vs compiled engine, data-parallel P sweep
    python scripts/bench.py --llm       # GPT-3 175B on 1,024 and 8,192 chips (bench_llm.py)
    python scripts/bench.py --symmetry  # ResNet-50 data parallel to 8,192 chips (bench_symmetry.py)

``--sweep`` times design-point sweeps: points per second per core for ResNet-18
and BERT-base training-step points in this process and through the process
pool, planning 10,000 and 100,000 points, and the 1,000- and 10,000-point
ResNet-18 sweeps (``configs/sweeps/resnet18_1000.yaml``, ``resnet18_10000.yaml``)
end to end as ``accelsim sweep --jobs <cores>`` in a fresh process, each also as
a multiple of one ``accelsim run configs/runs/default.yaml`` timed beside it.

``--vs-scalesim`` times SCALE-Sim 3.0.0 (its CLI, in the interpreter that
``scripts/validate_scalesim.py`` uses) and accelsim on the same forward layers
(AlexNet and ResNet-18 conv layers from configs/validation/, 32x32 and 128x128,
output and weight stationary), with the runs of both interleaved, and prints medians, the
ratios, the ratio at the start-up floor and both peak RSS figures; see
``vs_scalesim`` for what is timed.

``--engines`` times the two event engines in-process on the distinct steps of
a run (events per second, warm, best of ``--runs``; the compiled engine's
one-off Numba load is the difference of a fresh smoke run with each), then whole
``accelsim run`` commands of data-parallel training at P = 1..256 with each
engine.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


FLOOR = [sys.executable, str(ROOT / "scripts" / "startup_floor.py")]
"""The start-up floor of a validated command (``scripts/startup_floor.py``)."""


def commands(out: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, argv, extra environment) of each timed command."""
    accelsim = [sys.executable, "-m", "accelsim"]
    resnet18 = [*accelsim, "run", "configs/runs/default.yaml", "--out", out, "--force"]
    numba = {"ACCELSIM_KERNELS": "numba"}
    return [
        ("ResNet-18 step, batch 32, 128x128 default", resnet18, {}),
        ("ResNet-18 step, ACCELSIM_KERNELS=numba", resnet18, numba),
        ("MLP step, batch 128, 128x128 default",
         [*accelsim, "run", "configs/runs/mlp.yaml", "--out", out, "--force"], {}),
        ("fourteen-model suite, batch 32, default",
         [*accelsim, "suite", "configs/runs/suite.yaml", "--out", out, "--force"], {}),
        ("ResNet-18 ADA-GP (base, BP, GP steps)",
         [*resnet18, "--set", "run.techniques={gradient_prediction: {}}"], {}),
        ("ResNet-18 LayerPipe, 4 processors (free tasks, delay margins, PipeDream fallback)",
         [*resnet18, "--set", "processors=4", "--set", "run.techniques={layerpipe: {}}"], {}),
        ("LSTM-PTB approx. dropout, 32x32 tiles, 100 steps",
         [*accelsim, "run", "configs/runs/mlp_dropout.yaml", "--out", out, "--force", "--set",
          "workload=workloads/lstm_ptb.yaml", "--set", "batch_size=64", "--set",
          "run.techniques.approximate_dropout={pattern: tile, tile: {rows: 32, cols: 32}}"], {}),
        ("  the same, ACCELSIM_KERNELS=numpy",
         [*accelsim, "run", "configs/runs/mlp_dropout.yaml", "--out", out, "--force", "--set",
          "workload=workloads/lstm_ptb.yaml", "--set", "batch_size=64", "--set",
          "run.techniques.approximate_dropout={pattern: tile, tile: {rows: 32, cols: 32}}"],
         {"ACCELSIM_KERNELS": "numpy"}),
        ("MLP PipeDream, 4 processors, 384 mini-batches",
         [*accelsim, "run", "configs/runs/mlp.yaml", "--out", out, "--force", "--set",
          "processors=4", "--set", "run.techniques={pipedream: {mini_batches: 384}}"], {}),
        ("ResNet-18 data-parallel, P = 256, batch 256",
         [*resnet18, "--set", "processors=256", "--set", "assignment=data_parallel",
          "--set", "batch_size=256"], {}),
        *(
            (f"ResNet-50 data-parallel, ring, a DRAM each, P = {p:,}, batch {p:,} (symmetry)",
             [*resnet18, "--set", "workload=workloads/resnet50.yaml", "--set",
              f"processors={p}", "--set", "assignment=data_parallel", "--set",
              f"batch_size={p}", "--set", "dram.sharing=per_processor"], {})
            for p in (16, 1024)
        ),
        ("ResNet-34 LayerPipe, 9 processors, per-processor DRAM",
         [*accelsim, "run", "configs/experiments/pipeline.yaml", "--out", out, "--force",
          "--set", "workload=workloads/resnet34.yaml", "--set", "processors=9",
          "--set", "dram.sharing=per_processor", "--set", "run.techniques={layerpipe: {}}"], {}),
        ("ResNet-18 convs, 32x32 OS (layer --topology)",
         [*accelsim, "layer", "--hardware", "configs/hardware/scalesim.yaml", "--topology",
          "configs/validation/resnet18_conv.csv", "--convention", "scalesim", "--json"], {}),
        ("one GEMM (layer --gemm 64 128 256 --json; target 0.2 s)",
         [*accelsim, "layer", "--hardware", "configs/hardware/default.yaml", "--gemm", "64",
          "128", "256", "--json"], {}),
        ("start-up floor: numpy, yaml, one pydantic model validated",
         FLOOR, {}),
        ("the interpreter alone (python -c pass), the machine's speed",
         [sys.executable, "-c", "pass"], {}),
    ]  # fmt: skip


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """This environment with ``extra``, less ``PYTHONDONTWRITEBYTECODE``: a command
    runs with Python's bytecode cache, as an installed accelsim does (without it,
    every process compiles each module it imports from source, about a third of
    their import time)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **extra}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Run ``argv`` with ``env`` added to the environment; return (wall s, peak RSS MiB)."""
    elapsed, usage = _waited(argv, env)
    return elapsed, usage.ru_maxrss // 1024


def timed_cpu(argv: list[str]) -> tuple[float, float]:
    """Run ``argv``; return (wall s, CPU s of it and the processes it waited for)."""
    elapsed, usage = _waited(argv, {})
    return elapsed, usage.ru_utime + usage.ru_stime


def _waited(argv: list[str], env: dict[str, str]) -> tuple[float, Any]:
    """Run ``argv`` to its end; its wall time and resource usage."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_environment(env),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"failed: {' '.join(argv)}\n{proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return elapsed, usage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="timed runs per command (default 5, 3 with --vs-scalesim)",
    )
    parser.add_argument(
        "--vs-scalesim",
        action="store_true",
        help="time SCALE-Sim 3.0.0 against accelsim on AlexNet and ResNet-18 forward conv layers",
    )
    parser.add_argument(
        "--scalesim-python", help="python with scalesim 3.0.0 (see validate_scalesim.py)"
    )
    parser.add_argument(
        "--only",
        help="--vs-scalesim: comma-separated subset, e.g. alexnet-32x32,resnet18-128x128-ws",
    )
    parser.add_argument("--sweep", action="store_true", help="time design-point sweeps")
    parser.add_argument(
        "--short", action="store_true", help="short commands against the start-up floor, paired"
    )
    parser.add_argument(
        "--engines", action="store_true", help="SimPy vs compiled engine; data-parallel P sweep"
    )
    parser.add_argument("--llm", action="store_true", help="GPT-3 175B steps (bench_llm.py)")
    parser.add_argument(
        "--symmetry", action="store_true", help="data parallel to 8,192 chips (bench_symmetry.py)"
    )
    args = parser.parse_args()
    if args.llm or args.symmetry:
        script = str(ROOT / "scripts" / ("bench_llm.py" if args.llm else "bench_symmetry.py"))
        return subprocess.call([sys.executable, script, "--runs", str(args.runs or 3)])
    if args.sweep or args.short:
        import bench_sweep  # scripts/, beside this file

        return (bench_sweep.sweep_speed if args.sweep else bench_sweep.short_commands)(
            args.runs or (3 if args.sweep else 7)
        )
    if args.engines:
        return engines(args.runs or 3)
    if args.vs_scalesim:
        return vs_scalesim(args.runs or 3, args.scalesim_python, args.only)
    args.runs = args.runs or 5
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        "Python's bytecode cache on"
    )
    print(f"{'command':52} {'median s':>9} {'min s':>7} {'max s':>7} {'peak RSS MiB':>13}")
    with tempfile.TemporaryDirectory() as out:
        for label, argv, env in commands(out):
            timed(argv, env)
            samples = [timed(argv, env) for _ in range(args.runs)]
            walls = [s[0] for s in samples]
            rss = max(s[1] for s in samples)
            print(
                f"{label:52} {statistics.median(walls):9.3f} {min(walls):7.3f} "
                f"{max(walls):7.3f} {rss:13d}"
            )
    dropout_kernel()
    return 0


def dropout_kernel() -> None:
    """Throughput of the approximate-dropout fold kernel and its speed-up over the NumPy
    reference (see ``accelsim.benchmark_dropout_folds``)."""
    from accelsim import benchmark_dropout_folds

    folds, numba_s, numpy_s = benchmark_dropout_folds()
    print(
        f"approx. dropout fold kernel, {folds:,} folds (100 steps x 30 GEMMs x 256 folds):"
        f" Numba {folds / numba_s:,.0f} folds/s, NumPy reference {folds / numpy_s:,.0f}"
        f" folds/s, speed-up {numpy_s / numba_s:,.0f}x"
    )


ENGINE_CASES = (
    ("ResNet-18 step, batch 32", "configs/runs/default.yaml", []),
    ("BERT-base step, batch 32", "configs/runs/default.yaml",
     ["workload=workloads/bert_base.yaml"]),
    ("MLP PipeDream, 4 stages, 384 and 768 mini-batches", "configs/runs/mlp.yaml",
     ["processors=4", "run.techniques={pipedream: {mini_batches: 384}}"]),
    ("MLP data-parallel, P = 1, batch 4", "configs/runs/mlp.yaml",
     ["processors=1", "assignment=data_parallel", "batch_size=4"]),
    ("MLP data-parallel, P = 64, batch 256", "configs/runs/mlp.yaml",
     ["processors=64", "assignment=data_parallel", "batch_size=256"]),
    ("MLP data-parallel, P = 256, batch 1,024", "configs/runs/mlp.yaml",
     ["processors=256", "assignment=data_parallel", "batch_size=1024"]),
)  # fmt: skip
"""The steps ``--engines`` times; the data-parallel MLP at 4 samples a processor, each
simulated (one DRAM shared), gives the compiled loop's events per second as the
processors grow (docs/performance.md, "Event engines and scaling")."""
DATA_PARALLEL = (1, 4, 16, 64, 256)


def engines(runs: int) -> int:
    """Events per second of both engines, the compiled engine's load cost, and whole
    data-parallel commands with each engine."""
    from accelsim import benchmark_engines, load_inputs, parse_sets

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'steps of':52} {'events':>9} {'SimPy ev/s':>11} {'compiled ev/s':>13} "
        f"{'ratio':>6} {'flatten ms':>10}"
    )
    for label, run_file, sets in ENGINE_CASES:
        t = benchmark_engines(load_inputs(ROOT / run_file, parse_sets(sets)), runs)
        print(
            f"{label:52} {t.events:9,} {t.events / t.simpy_seconds:11,.0f} "
            f"{t.events / t.compiled_seconds:13,.0f} {t.simpy_seconds / t.compiled_seconds:6.0f} "
            f"{t.flatten_seconds * 1e3:10.1f}"
        )
    smoke = [sys.executable, "-m", "accelsim", "run", "configs/runs/smoke.yaml", "--out"]
    with tempfile.TemporaryDirectory() as out:
        walls = {
            engine: statistics.median(
                timed([*smoke, out, "--force", "--set", f"timing.engine={engine}"], {})[0]
                for _ in range(runs)
            )
            for engine in ("simpy", "compiled")
        }
    print(
        f"smoke run (314 events), whole command: SimPy {walls['simpy']:.3f} s, compiled "
        f"{walls['compiled']:.3f} s: loading Numba and the cached loop costs "
        f"{walls['compiled'] - walls['simpy']:.3f} s per process"
    )
    print(f"\n{'data-parallel MLP, batch 256, whole command':44} {'SimPy s':>8} {'compiled s':>10}")
    with tempfile.TemporaryDirectory() as out:
        for p in DATA_PARALLEL:
            walls = []
            for engine in ("simpy", "compiled"):
                argv = [sys.executable, "-m", "accelsim", "run", "configs/runs/mlp.yaml",
                        "--out", out, "--force", "--set", f"processors={p}", "--set",
                        "assignment=data_parallel", "--set", "batch_size=256", "--set",
                        f"timing.engine={engine}"]  # fmt: skip
                walls.append(statistics.median(timed(argv, {})[0] for _ in range(runs)))
            print(f"{'P = ' + str(p):44} {walls[0]:8.3f} {walls[1]:10.3f}")
    return 0


VS_WORKLOADS = (("AlexNet", "alexnet_conv.csv"), ("ResNet-18", "resnet18_conv.csv"))
# (rows, cols, SRAM kB per buffer), each output and weight stationary.
VS_ARRAYS = ((32, 32, 64), (128, 128, 512))
VS_DATAFLOWS = ("os", "ws")
SHORT_RUNS = 5
"""accelsim and start-up floor runs after each SCALE-Sim run (``--vs-scalesim``)."""


def _harness():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "validate_scalesim", ROOT / "scripts" / "validate_scalesim.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed_capture(argv: list[str], cwd: Path) -> tuple[float, int, str]:
    """Run ``argv`` in ``cwd``; return (wall seconds, peak RSS MiB, stdout)."""
    # Files, not pipes: SCALE-Sim's progress bars would fill a pipe and block it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, env=child_environment({}))
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"failed: {' '.join(argv)}\n{err.read().decode()[-3000:]}")
        out.seek(0)
        return elapsed, usage.ru_maxrss // 1024, out.read().decode()


def vs_scalesim(runs: int, scalesim_python: str | None, only: str | None) -> int:
    """SCALE-Sim 3.0.0 vs accelsim on the same forward layers, same machine.

    Per workload, array and dataflow, each run (interleaved, in this order) times:
    * SCALE-Sim: ``python -m scalesim.scale`` on the topology file, CALC mode,
      one process for all layers (its output directory is deleted after each run);
    * accelsim: ``accelsim layer --topology FILE --convention scalesim --json``,
      one process for all layers (start-up plus simulation), :data:`SHORT_RUNS`
      times, each followed by the start-up floor, after one untimed run of both
      (the first command after a SCALE-Sim run of gigabytes was up to 3 times
      slower in an earlier measurement, for a reason not established);
    * accelsim's in-process simulation time of all rows (warm), from
      ``scripts/validate_scalesim.py --accelsim-only``.

    The start-up floor (``scripts/startup_floor.py``) is what every command that
    validates its files with pydantic pays, so SCALE-Sim's time over it (``at floor``)
    is the most such a command can reach: an estimate, since both are medians of a
    few runs on a machine whose speed drifts (a median of accelsim's can come out a
    few per cent under the floor's).
    Compute cycles of every layer are compared (SCALE-Sim ``Total Cycles - Stall
    Cycles`` vs accelsim).
    """
    import json
    import shutil

    vs = _harness()
    try:
        python = vs.resolve_scalesim_python(scalesim_python)
    except vs.HarnessError as exc:
        raise SystemExit(f"bench: {exc}") from exc
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"SCALE-Sim python: {python}; {runs} SCALE-Sim runs, each followed by {SHORT_RUNS} "
        "accelsim and start-up floor runs; medians"
    )
    header = (
        f"{'workload':10} {'array':8} {'flow':4} {'layers':>6} {'SCALE-Sim s':>11} {'RSS MiB':>7} "
        f"{'accelsim s':>10} {'RSS MiB':>7} {'accelsim sim ms':>15} {'floor s':>7} "
        f"{'ratio':>9} {'at floor':>9} {'ratio sim':>9} {'cycles':>9}"
    )
    print(header)
    wanted = {w.strip() for w in only.split(",")} if only else None
    failures = 0
    with tempfile.TemporaryDirectory(prefix="accelsim-bench-") as tmp:
        for workload, topo_name in VS_WORKLOADS:
            topo = ROOT / "configs" / "validation" / topo_name
            layers = vs.read_topology(topo)
            for (rows, cols, kb), flow in itertools.product(VS_ARRAYS, VS_DATAFLOWS):
                key = f"{topo_name.split('_')[0]}-{rows}x{cols}-{flow}"
                if wanted is not None and not {key, key.removesuffix(f"-{flow}")} & wanted:
                    continue
                hw = vs.Hardware(rows, cols, flow, kb, kb, kb, 64)
                work = Path(tmp) / key
                work.mkdir()
                ss_argv = [str(python), *vs.write_scalesim_inputs(work, hw, layers, "CALC")]
                hw_yaml = work / "hw.yaml"
                base = (ROOT / "configs" / "hardware" / "scalesim.yaml").read_text()
                hw_yaml.write_text(
                    base.replace("{rows: 32, cols: 32, dataflow: os,",
                                 f"{{rows: {rows}, cols: {cols}, dataflow: {flow},")
                    .replace("ifmap_kib: 64, filter_kib: 64, ofmap_kib: 64",
                             f"ifmap_kib: {kb}, filter_kib: {kb}, ofmap_kib: {kb}")
                )  # fmt: skip
                sim_argv = [
                    sys.executable, str(ROOT / "scripts" / "validate_scalesim.py"),
                    "--accelsim-only", "--array", f"{rows}x{cols}", "--dataflow", flow,
                    "--sram-kb", str(kb), "--topology", str(topo),
                ]  # fmt: skip
                cli_argv = [
                    sys.executable, "-m", "accelsim", "layer", "--hardware", str(hw_yaml),
                    "--topology", str(topo), "--convention", "scalesim", "--json",
                ]  # fmt: skip
                timed_capture(cli_argv, ROOT)  # warm-up: Numba's on-disk cache
                ss_t: list[float] = []
                one_t: list[float] = []
                sim_t: list[float] = []
                floor_t: list[float] = []
                ss_rss = one_rss = 0
                ss_cycles: list[int] = []
                acc_cycles: list[int] = []
                for _ in range(runs):
                    wall, rss, _ = timed_capture(ss_argv, work)
                    ss_t.append(wall)
                    ss_rss = max(ss_rss, rss)
                    if not ss_cycles:
                        report = vs.read_reports(work / "out" / "run")
                        ss_cycles = [
                            int(r["Total Cycles"]) - int(r["Stall Cycles"]) for r in report
                        ]
                    shutil.rmtree(work / "out")
                    # The first commands after SCALE-Sim's gigabytes ran slow: untimed.
                    timed_capture(cli_argv, ROOT)
                    timed_capture(FLOOR, ROOT)
                    for _ in range(SHORT_RUNS):
                        wall, rss, out = timed_capture(cli_argv, ROOT)
                        one_t.append(wall)
                        one_rss = max(one_rss, rss)
                        floor_t.append(timed_capture(FLOOR, ROOT)[0])
                    acc_cycles = [r["compute_cycles"] for r in json.loads(out)]
                    _, _, out = timed_capture(sim_argv, ROOT)
                    records = [json.loads(line) for line in out.splitlines() if line.strip()]
                    sim_t.append(records[-1]["sim_seconds_warm"])
                same = ss_cycles == acc_cycles
                failures += not same
                ss, one, sim, floor = (statistics.median(x) for x in (ss_t, one_t, sim_t, floor_t))
                print(
                    f"{workload:10} {rows}x{cols:<5} {flow:4} {len(layers):6d} {ss:11.2f} "
                    f"{ss_rss:7d} {one:10.3f} {one_rss:7d} {sim * 1e3:15.2f} {floor:7.3f} "
                    f"{ss / one:8.0f}x {ss / floor:8.0f}x {ss / sim:8.0f}x "
                    f"{'identical' if same else 'DIFFER':>9}",
                    flush=True,
                )
    print(
        "ratio = SCALE-Sim / accelsim, whole commands; at floor = SCALE-Sim / start-up floor, "
        "the most a validated command can reach; ratio sim = SCALE-Sim whole command / "
        "accelsim in-process simulation time of all rows (warm)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
