"""Whole training steps: data parallelism, stash residency, energy, determinism."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.energy.model import estimate_energy
from accelsim.report.result import RunResult
from accelsim.timing.costs import UNIT_ARRAY
from tests.conftest import ROOT

MLP_RUN = ROOT / "configs" / "runs" / "mlp.yaml"
RESNET_RUN = ROOT / "configs" / "runs" / "default.yaml"


def run(path: Path, *sets: str) -> RunResult:
    return simulate_run(load_inputs(path, parse_sets(list(sets))))


def test_data_parallel_conserves_macs_and_speeds_up_compute_bound() -> None:
    ideal = (
        "dram.bandwidth_bytes_per_cycle=.inf",
        "dram.latency_cycles=0",
        "interconnect.bandwidth_bytes_per_cycle=.inf",
        "interconnect.latency_cycles=0",
    )
    one = run(RESNET_RUN, *ideal, "batch_size=8")
    four = run(RESNET_RUN, *ideal, "batch_size=8", "processors=4", "assignment=data_parallel")
    gemm_macs = [int(r.trace.costs.macs.sum()) for r in (one, four)]
    assert gemm_macs[0] == gemm_macs[1]
    assert four.total_cycles < 0.5 * one.total_cycles
    assert set(four.trace.processor.tolist()) == {0, 1, 2, 3}
    assert four.summary()["interconnect_bytes"] > 0


def test_data_parallel_shows_dram_contention() -> None:
    slow = ("dram.bandwidth_bytes_per_cycle=4", "interconnect.bandwidth_bytes_per_cycle=.inf")
    one = run(MLP_RUN, *slow)
    two = run(MLP_RUN, *slow, "processors=2", "assignment=data_parallel")
    array = two.trace.costs.unit == UNIT_ARRAY
    # Both processors queue on one DRAM channel: far from a 2x speedup, and the
    # array stalls more in total than on one processor.
    assert two.total_cycles > 0.8 * one.total_cycles
    assert (
        two.trace.stall_cycles[array].sum()
        > one.trace.stall_cycles[one.trace.costs.unit == UNIT_ARRAY].sum()
    )


def test_data_parallel_needs_a_sample_per_processor() -> None:
    from accelsim.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"batch_size: data_parallel needs at least one sample"
        r" per processor \(4\) \(got 2\)",
    ):
        run(MLP_RUN, "processors=4", "assignment=data_parallel", "batch_size=2")


def test_unlimited_bandwidth_whole_step_has_no_stalls() -> None:
    result = run(
        RESNET_RUN, "batch_size=2", "dram.bandwidth_bytes_per_cycle=.inf", "dram.latency_cycles=0"
    )
    assert int(result.trace.stall_cycles.sum()) == 0
    assert result.total_cycles <= int(result.trace.costs.compute_cycles.sum())


def test_halving_bandwidth_never_reduces_step_cycles() -> None:
    cycles = [
        run(RESNET_RUN, "batch_size=2", f"dram.bandwidth_bytes_per_cycle={bw}").total_cycles
        for bw in (256, 128, 64, 32, 16)
    ]
    assert cycles == sorted(cycles)
    assert cycles[-1] > cycles[0]


def test_on_chip_stash_removes_stash_traffic() -> None:
    off = run(MLP_RUN).summary()
    on = run(MLP_RUN, "buffers.stash_kib=65536").summary()
    assert off["stash"]["dram_read_bytes"] > 0 and off["stash"]["dram_write_bytes"] > 0
    assert on["stash"]["dram_read_bytes"] == on["stash"]["dram_write_bytes"] == 0
    assert on["stash"]["on_chip_bytes"] == on["stash"]["bytes"] == off["stash"]["bytes"]
    assert on["dram_bytes"]["total"] < off["dram_bytes"]["total"]


def test_summary_is_consistent() -> None:
    result = run(MLP_RUN)
    s = result.summary()
    assert s["schema_version"] == 2
    assert s["macs"]["total"] == s["macs"]["fwd"] + s["macs"]["bwd_input"] + s["macs"]["bwd_weight"]
    assert s["macs"]["aux"] == 0
    assert 0 < s["utilization"] <= 1
    assert s["energy_pj"]["total"] == pytest.approx(sum(s["energy_pj"]["by_component"].values()))
    assert s["energy_pj"]["total"] == pytest.approx(sum(s["energy_pj"]["by_phase"].values()))
    rows = result.op_rows()
    assert (
        sum(r["dram_read_ifmap_bytes"] + r["dram_read_filter_bytes"] for r in rows)
        == s["dram_bytes"]["read"]
    )
    layers = result.layer_rows()
    assert sum(r["fwd_macs"] for r in layers) == s["macs"]["fwd"]
    assert (
        sum(r["params"] for r in layers)
        == s["parameters"]
        == 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10
    )


@settings(max_examples=30, deadline=None)
@given(
    field=st.sampled_from(
        [
            "macs",
            "vector_ops",
            "sram_ifmap_read_bytes",
            "sram_filter_write_bytes",
            "sram_ofmap_write_bytes",
            "dram_ifmap_read_bytes",
            "dram_ofmap_write_bytes",
            "interconnect_bytes",
        ]
    ),
    op=st.integers(0, 22),
    extra=st.integers(1, 10**9),
)
def test_energy_never_decreases_when_a_count_grows(field: str, op: int, extra: int) -> None:
    result = _mlp_result()
    costs = result.trace.costs
    grown = getattr(costs, field).copy()
    grown[op % len(grown)] += extra
    trace = dataclasses.replace(result.trace, costs=dataclasses.replace(costs, **{field: grown}))
    table = load_inputs(MLP_RUN).energy
    before = estimate_energy(result.trace, result.hardware, table).total_pj
    after = estimate_energy(trace, result.hardware, table).total_pj
    assert after >= before
    # A count that the op's unit really has always costs energy (MACs only on an array).
    if field != "macs" or int(costs.unit[op % len(grown)]) == UNIT_ARRAY:
        assert after > before
    longer = dataclasses.replace(result.trace, total_cycles=result.total_cycles + extra)
    assert estimate_energy(longer, result.hardware, table).total_pj > before


_CACHE: dict[str, RunResult] = {}


def _mlp_result() -> RunResult:
    if "mlp" not in _CACHE:
        _CACHE["mlp"] = run(MLP_RUN)
    return _CACHE["mlp"]


def run_in_processes(tmp_path: Path, hash_seeds: tuple[str | None, ...]) -> list[Path]:
    """``accelsim run configs/runs/smoke.yaml`` once per seed, in parallel processes.

    Each process gets this environment plus ``ACCELSIM_KERNELS=numpy`` and, unless
    the seed is None, its own ``PYTHONHASHSEED``; returns the run directories.
    """
    started = []
    for i, seed in enumerate(hash_seeds):
        env = {**os.environ, "ACCELSIM_KERNELS": "numpy"}
        if seed is not None:
            env["PYTHONHASHSEED"] = seed
        out = tmp_path / f"out{i}"
        command = [sys.executable, "-m", "accelsim", "run", "configs/runs/smoke.yaml"]
        process = subprocess.Popen(
            [*command, "--out", str(out), "--force"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append((out, process))
    for _, process in started:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    return [out / "mlp_smoke" for out, _ in started]


@pytest.mark.parametrize(
    "hash_seeds", [(None, None), ("0", "4242")], ids=["same-environment", "two-hash-seeds"]
)
def test_two_processes_write_identical_files(
    tmp_path: Path, hash_seeds: tuple[str | None, ...]
) -> None:
    first, second = run_in_processes(tmp_path, hash_seeds)
    for name in ("summary.json", "ops.csv", "layers.csv"):
        data = (first / name).read_bytes()
        assert data.count(b"\n") > 1, name  # a header and rows, not an empty file
        assert data == (second / name).read_bytes(), name


def test_static_energy_scales_with_time() -> None:
    result = _mlp_result()
    # default.yaml at 1 GHz with horowitz45's leakage: 128 x 128 PEs x 0.005 mW +
    # (2048 + 2048 + 1024) KiB x 0.01 mW + 128 lanes x 0.02 mW = 81.92 + 51.2 + 2.56
    # = 135.68 mW, which is 135.68 pJ per 1 ns cycle.
    assert result.energy.static_pj == pytest.approx(135.68 * result.total_cycles, rel=1e-12)
    # Twice the time leaks twice as much and changes no dynamic energy.
    longer = dataclasses.replace(result.trace, total_cycles=2 * result.total_cycles)
    twice = estimate_energy(longer, result.hardware, load_inputs(MLP_RUN).energy)
    assert twice.static_pj == pytest.approx(2 * result.energy.static_pj, rel=1e-12)
    np.testing.assert_array_equal(twice.op_pj, result.energy.op_pj)
    assert np.all(result.energy.op_pj >= 0)
