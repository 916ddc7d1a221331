"""A step's cycle bounds (``RunResult.cycle_bounds``): bytes and work per channel, link and
unit, each charged where the engine charges it; counted by hand on a lone all-reduce."""

from __future__ import annotations

import pytest

from accelsim.config.loader import load_energy, load_hardware, parse_sets
from accelsim.config.run import Convention, PsumPolicy
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.energy.model import estimate_energy
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind
from accelsim.mapping.schedule import schedule
from accelsim.mapping.units import main_array
from accelsim.report.result import RunResult
from accelsim.timing.costs import op_costs
from accelsim.timing.engines import simulate
from accelsim.timing.machine import Machine
from tests.conftest import ROOT


def allreduce_run(processors: int, participants: tuple[int, ...], sharing: str) -> RunResult:
    """One ring all-reduce of 1001 bf16 gradients (2002 B) on the default hardware (DRAM
    128 B/cycle + 100, links 64 B/cycle + 200), placed on its first participant."""
    hw = load_hardware(
        ROOT / "configs/hardware/default.yaml",
        parse_sets([f"processors={processors}", f"dram.sharing={sharing}"]),
    )
    op = CommOp(
        op_id=0,
        name="allreduce",
        layer="l",
        phase=Phase.COMM,
        stage=Stage.COMMUNICATION,
        tensor=Tensor("dw", TensorKind.GRADIENT, 1001, 2),
        participants=participants,
        deps=(),
    )
    graph = OpGraph(ops=(op,), processor=(participants[0],))
    costs = op_costs(
        graph,
        schedule(graph, (main_array(hw),)),
        Machine.of(hw),
        Convention.ACCELSIM,
        PsumPolicy.CHUNK,
        1,
    )
    trace = simulate(graph, costs, Machine.of(hw))
    energy = estimate_energy(trace, hw, load_energy(ROOT / "configs/energy/horowitz45.yaml"))
    return RunResult("t", "t", 1, {}, Machine.of(hw), graph, trace, energy)


@pytest.mark.parametrize(
    ("processors", "participants", "sharing", "dram_bytes", "link_bytes", "makespan"),
    [
        # Each of 3 participants: its own channel reads and writes the 2002 B (4004 B),
        # its link sends 2 (3 - 1) = 4 chunks of ceil(2002 / 3) = 668 B (2672 B).
        # (Charged all to processor 0 they were 3 x 4004 = 12012 B and 3 x 2672 =
        # 8016 B: 93.8 and 125.3 cycles, beyond the 1076-cycle makespan's DRAM and
        # link phases of 2 x 16 and 4 x 11 cycles of transfer.)
        (3, (0, 1, 2), "per_processor", 4004, 2672, 1076),
        # Two participants of three: 2 x 2002 B each, 2 (2 - 1) chunks of 1001 B.
        (3, (0, 2), "per_processor", 4004, 2002, 664),
        # One shared channel carries every participant's bytes: 3 x 4004 B, as before;
        # the links stay each participant's own.
        (3, (0, 1, 2), "shared", 12012, 2672, 1140),
    ],
)
def test_allreduce_bytes_count_on_every_participant(
    processors: int,
    participants: tuple[int, ...],
    sharing: str,
    dram_bytes: int,
    link_bytes: int,
    makespan: int,
) -> None:
    run = allreduce_run(processors, participants, sharing)
    assert run.total_cycles == makespan  # tests/timing/test_engine.py counts these by hand
    assert run.cycle_bounds() == {
        "dram": dram_bytes / 128,
        "interconnect": link_bytes / 64,
        "compute": 0.0,
    }
    assert max(run.cycle_bounds().values()) <= makespan
    assert run.cycle_bounds(4) == {k: v / 4 for k, v in run.cycle_bounds().items()}


def test_reads_and_writes_bound_at_their_own_bandwidths() -> None:
    sets = ["hardware.dram.read_bandwidth_bytes_per_cycle=256",
            "hardware.dram.write_bandwidth_bytes_per_cycle=32"]  # fmt: skip
    result = simulate_run(load_inputs(ROOT / "configs" / "runs" / "mlp.yaml", parse_sets(sets)))
    c = result.trace.costs
    reads, writes = int(c.dram_read_bytes.sum()), int(c.dram_ofmap_write_bytes.sum())
    assert result.cycle_bounds()["dram"] == pytest.approx(reads / 256 + writes / 32)
    assert result.total_cycles >= result.cycle_bounds()["dram"]


def test_channels_divide_the_dram_bound_and_the_step_never_beats_it() -> None:
    # The MLP step (batch 128, Adam) moves the same bytes over 1, 2 or 4 channels of
    # 128 B/cycle: its DRAM bound is bytes / (channels x 128), and no step is shorter
    # than its binding bound (so the speedup over one channel never beats it).
    one = simulate_run(load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets([])))
    for channels in (2, 4):
        run = simulate_run(
            load_inputs(ROOT / "configs/runs/mlp.yaml", parse_sets([f"dram.channels={channels}"]))
        )
        bounds = run.cycle_bounds()
        assert run.dram_bytes == one.dram_bytes
        assert bounds["dram"] == one.dram_bytes / (channels * 128)
        assert run.total_cycles >= max(bounds.values())
        assert run.total_cycles < one.total_cycles
