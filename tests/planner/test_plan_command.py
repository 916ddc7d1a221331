"""``accelsim plan`` end to end on the 2-block GPT of
``tests/fixtures/workloads/tiny_gpt.yaml`` (4 heads, 7,616 parameters, 8 tokens a
sample) on 8 chips of the A100 cluster, global batch 4: the search's counts, the
memory filter, ``--plan`` against ``accelsim run``, ``--json`` and MFU by hand, resume,
and the refusals."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.planner.figure import FIGURE_NAME
from tests.conftest import ROOT

WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt.yaml"
HARDWARE = ROOT / "configs" / "hardware" / "a100_cluster.yaml"
BLOCKS = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt_blocks.yaml"


def plan(tmp_path: Path, *extra: str, hardware: Path = HARDWARE) -> list[str]:
    return [
        "plan",
        str(WORKLOAD),
        "--hardware",
        str(hardware),
        "--chips",
        "8",
        "--global-batch",
        "4",
        "--jobs",
        "1",
        "--store",
        str(tmp_path / "search"),
        *extra,
    ]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_search_counts_json_and_mfu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chosen = run_json(capsys, plan(tmp_path, "--json"))
    # 40 candidates (tests/planner/test_candidates.py: 2 tensor degrees x 4 ZeRO stages
    # x (3 policies without sequence parallelism + 2 with it)), all simulated.
    assert chosen["search"] == {
        "enumerated": 40,
        "refused_by_checks": {},
        "refused_by_memory": {},
        "fitting": 40,
        "filter_seconds": chosen["search"]["filter_seconds"],
        "simulated": 40,
        "already_stored": 0,
        "pruned_by_bound": 0,
        "search_seconds": chosen["search"]["search_seconds"],
        # tests/planner/test_bound.py: the chosen plan's 2 ranks wait for 10 all-reduces
        # of 2 steps of 1,001 cycles, and a cycle of GEMMs.
        "chosen_bound_seconds": (10 * 2 * 1001 + 1) * (1e-6 / 1410),
    }
    assert 0 < chosen["search"]["filter_seconds"] < chosen["search"]["search_seconds"]
    assert set(chosen) >= {
        "plan",
        "step_cycles",
        "step_seconds",
        "tokens_per_second_per_chip",
        "mfu",
        "compute_seconds",
        "exposed_communication_seconds",
        "recomputation_seconds",
        "memory",
    }
    seconds = chosen["step_seconds"]
    assert seconds == pytest.approx(chosen["step_cycles"] / 1.41e9)
    # 4 samples x 8 tokens over 8 chips; 6 x 7,616 parameters x 32 tokens over 8 chips
    # x 2 x 108 arrays of 32 x 32 MACs x 1.41 GHz.
    assert chosen["tokens_per_second_per_chip"] == pytest.approx(32 / seconds / 8)
    assert chosen["mfu"] == pytest.approx(6 * 7616 * 32 / seconds / (8 * 2 * 108 * 1024 * 1.41e9))
    assert chosen["memory"]["fits"] is True
    assert (tmp_path / "search" / FIGURE_NAME).stat().st_size > 0


@pytest.mark.slow
def test_memory_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 40,000 bytes: tensor 2's five plans without sharding (54,992 and 54,480 bytes a
    # chip without and with selective recomputation, three policies without sequence
    # parallelism and two with it) do not fit, tensor 4's (36,160 and 35,648) do
    # (tests/mapping/test_memory.py counts such breakdowns), and so does tensor 2 with
    # its optimizer state sharded over its 4 replicas (ZeRO 1, 2 and 3).
    small = tmp_path / "small.yaml"
    text = HARDWARE.read_text(encoding="utf-8")
    small.write_text(text.replace("capacity_gib: 74.5", f"capacity_gib: {40_000 / 2**30}"))
    chosen = run_json(capsys, plan(tmp_path, "--json", hardware=small))
    assert chosen["search"]["refused_by_memory"] == {"optimizer_state": 5}
    assert chosen["search"]["simulated"] == 35
    # The fastest: tensor 2, ZeRO 1. A rank's 3,920 parameters: 7,840 bytes of bf16
    # weights and of gradients; Adam's two fp32 states, 31,360 bytes, over 4: 7,840.
    assert chosen["plan"] == "dp=4,tensor=2,zero=1,recompute=none"
    memory = chosen["memory"]
    assert (memory["weights_bytes"], memory["gradients_bytes"]) == (7840, 7840)
    assert memory["optimizer_state_bytes"] == 31_360 // 4
    assert (memory["zero"], memory["sharded_over"], memory["total_bytes"]) == (1, 4, 31_472)


def test_given_plan_equals_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chosen = run_json(capsys, plan(tmp_path, "--json", "--plan", "tp=4,recompute=selective"))
    assert chosen["plan"] == "dp=2,tensor=4,recompute=selective"
    assert chosen["search"]["enumerated"] == 1
    sets = [
        "hardware.processors=8",
        "hardware.interconnect.levels=[]",
        "parallel.tensor=4",
        "techniques={recomputation: {policy: selective}}",
    ]
    from accelsim.config.loader import parse_sets

    inputs = load_inputs(tmp_path / "search" / "plan_run.yaml", parse_sets(sets))
    result = simulate_training(inputs)
    # The plan's step is the recomputing one, not the baseline step the run also
    # simulates; recomputation_seconds its recomputed array cycles a chip.
    step = result.steps["recomputation"]
    assert step.total_cycles == chosen["step_cycles"] != result.base.total_cycles
    assert chosen["step_seconds"] == step.total_cycles * 1e-6 / inputs.hardware.clock_mhz
    mine = step.step_summary().owners["recomputation"].busy_cycles["array"]
    seconds = sum(mine) / len(mine) * 1e-6 / inputs.hardware.clock_mhz
    assert seconds > 0
    assert chosen["recomputation_seconds"] == pytest.approx(seconds, rel=1e-12)


@pytest.mark.slow
def test_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(plan(tmp_path)) == 0
    store = tmp_path / "search"
    points = sorted((store / "points").iterdir())
    kept = {p.name: (p / "summary.json").stat().st_mtime_ns for p in points[1:]}
    # As if the search had been killed before its first plan was stored.
    with sqlite3.connect(store / "store.sqlite") as db:
        db.execute("DELETE FROM points WHERE identity = ?", (points[0].name,))
    capsys.readouterr()
    assert main(plan(tmp_path)) == 0
    out = capsys.readouterr().out
    assert (
        "simulated       40 (39 already stored), 0 pruned by their bound; the search took " in out
    )
    assert {
        name: (store / "points" / name / "summary.json").stat().st_mtime_ns for name in kept
    } == kept


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(plan(tmp_path, "--plan", "tp=x")) == 2
    assert capsys.readouterr().err.strip() == ("--plan: tp: expected a positive integer (got 'x')")
    assert main(plan(tmp_path, "--plan", "tp=8,recompute=none")) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "--plan: parallel.tensor: must divide layer h0.attn's 4 heads (a tensor-parallel group"
        " splits attention by heads) (got 8)"
    )
    small = tmp_path / "small.yaml"
    text = HARDWARE.read_text(encoding="utf-8")
    small.write_text(text.replace("capacity_gib: 74.5", f"capacity_gib: {40_000 / 2**30}"))
    assert main(plan(tmp_path, "--plan", "tp=2", hardware=small)) == 2
    assert capsys.readouterr().err.strip() == (
        "--plan: a processor needs 53.70 KiB, more than the 39.06 KiB of its DRAM"
        " (weights 7.66, gradients 7.66, optimizer_state 30.62, activations 6.52,"
        " communication 0.25, workspace 1.00 KiB) (got 'tp=2')"
    )
    assert not os.path.exists(tmp_path / "search" / "store.sqlite")
    # 100 bytes: nothing fits; each plan's refusal listed, exit 3.
    small.write_text(text.replace("capacity_gib: 74.5", f"capacity_gib: {100 / 2**30}"))
    assert main(plan(tmp_path, hardware=small)) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == [
        "no plan fits:",
        "  dp=4,tensor=2,recompute=full: 50,896 bytes per chip, 100 fit",
    ]
    assert len(out) == 42  # the plans line, "no plan fits:", 40 plans


@pytest.mark.slow
def test_gpt3_175b_on_1024_chips_enumerated_and_filtered(tmp_path: Path) -> None:
    # Tensor-parallel plans alone (no pipeline or sharding): t | 96 heads and
    # dp = 1024 / t | 1,536 samples leave t in {2, 4, 8, 16, 32}, x 3 policies; full
    # recomputation is refused beside tensor parallelism, and no plan fits 80 GB: the
    # fewest bytes a chip, t = 8 with selective recomputation, are 586,891,345,920.
    from accelsim.config.parallel import ParallelSpec
    from accelsim.driver.inputs import InputCache
    from accelsim.planner import search
    from accelsim.planner.candidates import enumerate_plans

    request = search.Request(
        ROOT / "workloads" / "gpt3_175b.yaml", HARDWARE, 1024, 1536, None, tmp_path / "s"
    )
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    model = search.model_of(search.model_inputs(cache, base, sets), 1024, 1536)
    tensor_only = {"tensor": ParallelSpec.model_fields["tensor"]}
    candidates = list(enumerate_plans(model, tensor_only))
    assert [c.label for c in candidates[::3]] == [
        f"dp={1024 // t},tensor={t},recompute=none" for t in (2, 4, 8, 16, 32)
    ]
    filtered = search.filter_plans(cache, base, sets, candidates)
    assert filtered.counts(0) == {
        "enumerated": 15,
        "refused_by_checks": {},
        "refused_by_memory": {"optimizer_state": 7, "activations": 8},
        "fitting": 0,
        "filter_seconds": 0,
    }
    assert filtered.refusals["dp=128,tensor=8,recompute=selective"] == (
        "586,891,345,920 bytes per chip, 79,993,765,888 fit"
    )


def test_a_given_pipeline_plan_shows_its_bubble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tp = 1, pp = 2, dp = 4 on the 4-block GPT of ``tiny_gpt_blocks.yaml``: two blocks
    a stage, one sample a replica, so one micro-batch, whose 1F1B bubble is half the
    pipeline's time in the closed form."""
    argv = plan(tmp_path, "--plan", "pp=2,dp=4", "--json")
    argv[1] = str(BLOCKS)
    chosen = run_json(capsys, argv)
    assert chosen["pipeline"] == 2
    summary_path = next((tmp_path / "search" / "points").glob("*/summary.json"))
    section = json.loads(summary_path.read_text("utf-8"))["pipeline"]
    assert section["micro_batches"] == 1 and section["bubble_fraction_closed_form"] == 0.5
    cycles_to_s = 1 / 1.41e9
    most_bubble = max(s["bubble_cycles"] for s in section["stages"])
    assert chosen["bubble_seconds"] == pytest.approx(most_bubble * cycles_to_s)
    assert chosen["step_cycles"] == section["step_cycles"]
    assert set(chosen["exposed_communication_seconds"]) == {
        "pipeline transfers",
        "data-parallel all_reduce",
    }


def test_a_given_pipeline_plan_with_full_recomputation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pp = 2 with full recomputation: simulated, its recomputation the most of a
    stage's backward passes' recomputed cycles (one micro-batch each)."""
    argv = plan(tmp_path, "--plan", "pp=2,dp=4,recompute=full", "--json")
    argv[1] = str(BLOCKS)
    chosen = run_json(capsys, argv)
    assert (chosen["pipeline"], chosen["recompute"]) == (2, "full")
    summary_path = next((tmp_path / "search" / "points").glob("*/summary.json"))
    section = json.loads(summary_path.read_text("utf-8"))["pipeline"]
    redone = [s["recomputed_cycles"] for s in section["stages"]]
    assert redone == [c["recomputed_cycles"] for c in section["chunks"]]
    assert min(redone) > 0
    assert chosen["recomputation_seconds"] == pytest.approx(max(redone) / 1.41e9)


def test_a_given_pipeline_plan_with_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pp = 2, dp = 4, zero = 1: each stage's reduce-scatter past the flush and its
    all-gather, the most of a stage's, in place of the all-reduce."""
    argv = plan(tmp_path, "--plan", "pp=2,dp=4,zero=1", "--json")
    argv[1] = str(BLOCKS)
    chosen = run_json(capsys, argv)
    summary_path = next((tmp_path / "search" / "points").glob("*/summary.json"))
    section = json.loads(summary_path.read_text("utf-8"))["pipeline"]
    assert section["zero"] == 1
    gathers = [s["all_gather_cycles"] for s in section["stages"]]
    assert min(gathers) > 0
    exposed = chosen["exposed_communication_seconds"]
    assert set(exposed) == {
        "pipeline transfers",
        "data-parallel reduce_scatter",
        "data-parallel all_gather",
    }
    assert exposed["data-parallel all_gather"] == pytest.approx(max(gathers) / 1.41e9)


@pytest.mark.filterwarnings("error::UserWarning")
def test_a_long_plan_label_fits_its_figure(tmp_path: Path) -> None:
    """The fastest plan's label (here 98 characters) is the figure's title, wrapped at
    its commas; written beside its point it ran out of the figure, and matplotlib's
    layout gave up with a warning, which this test makes an error."""
    label = "tp=2,pp=2,schedule=interleaved,virtual_stages=2,micro_batch=1,zero=1"
    argv = plan(tmp_path, "--plan", label)
    argv[1] = str(BLOCKS)
    assert main(argv) == 0
    assert (tmp_path / "search" / FIGURE_NAME).stat().st_size > 0
