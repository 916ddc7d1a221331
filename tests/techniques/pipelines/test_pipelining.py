"""Pipeline schedules (techniques/pipelines/): GPipe, PipeDream, LayerPipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, GemmOp, TransferOp, VectorOp
from accelsim.report.result import RunResult
from accelsim.report.training import TrainingResult
from accelsim.techniques.pipelines.config import PipeDreamConfig
from accelsim.techniques.pipelines.pipedream import PipeDream
from accelsim.techniques.pipelines.plan import (
    partition,
    replicated_partition,
    ring_allreduce_cycles,
    task_bounds,
)
from accelsim.techniques.pipelines.schedule import Schedule
from accelsim.timing.machine import Machine
from tests.conftest import ROOT, make_hw

SCHEDULES = ("gpipe", "pipedream", "layerpipe")


def run_file(tmp_path: Path, workload: str, batch: int = 16) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        "\n".join(
            [
                "name: pipe",
                f"hardware: {ROOT / 'configs/hardware/default.yaml'}",
                f"workload: {ROOT / 'workloads' / workload}.yaml",
                f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}",
                f"batch_size: {batch}",
                "optimizer: {kind: momentum}",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def pipeline(result: TrainingResult) -> dict[str, Any]:
    """The placing technique's section of a run's training report, with the run's
    speedup, bound and binding resource: one step kind, placed by that technique."""
    training = result.training
    assert training is not None
    (name,) = [t for t in training.techniques if t in ("gpipe", "pipedream", "layerpipe")]
    return {
        **training.sections[name].details,
        "technique": name,
        "speedup": training.speedup,
        "speedup_bound": training.speedup_bound,
        "binding_bound": training.binding_bound,
        "warnings": list(training.sections[name].warnings),
    }


def train(path: Path, processors: int, technique: str) -> TrainingResult:
    sets = [f"processors={processors}", f"run.techniques={{{technique}}}"]
    return simulate_training(load_inputs(path, parse_sets(sets)))


def test_partition_minimises_the_bottleneck() -> None:
    assert partition([5, 1, 1, 1, 5, 1], 2) == [0, 0, 0, 1, 1, 1]  # 7 | 7, not 8 | 6
    assert partition([1, 1, 1, 1], 4) == [0, 1, 2, 3]
    assert partition([9, 1, 1], 2) == [0, 1, 1]
    assert partition([3, 3], 5) == [0, 1]  # never more stages than layers


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("workload", ["mlp", "resnet18"])
def test_one_stage_is_the_baseline_step(tmp_path: Path, schedule: str, workload: str) -> None:
    result = train(run_file(tmp_path, workload), 1, f"{schedule}: {{micro_batches: 1}}")
    report = pipeline(result)
    assert report is not None
    assert report["steady_cycles_per_minibatch"] == result.base.total_cycles
    assert report["speedup"] == 1.0


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_does_the_same_macs(tmp_path: Path, schedule: str) -> None:
    result = train(run_file(tmp_path, "resnet18"), 4, f"{schedule}: {{mini_batches: 9}}")
    step = result.steps[schedule]
    gemm_macs = sum(op.macs for op in step.graph.ops if isinstance(op, GemmOp))
    assert gemm_macs == 9 * int(result.base.trace.costs.macs.sum())


@pytest.mark.parametrize(
    ("workload", "processors"),
    [
        ("resnet18", 4),
        ("vgg16", 4),
        pytest.param("bert_base", 8, marks=pytest.mark.slow),  # 2 x 26 and 52 mini-batches
        ("mlp", 3),
    ],
)
def test_layerpipe_is_never_slower_than_pipedream(
    tmp_path: Path, workload: str, processors: int
) -> None:
    path = run_file(tmp_path, workload, batch=32)
    """On PipeDream's partition (``placement: stages``) LayerPipe keeps the fastest of
    its options, which include 1F1B with each dX sent as soon as it is made."""
    pipedream = pipeline(train(path, processors, "pipedream: {}"))
    layerpipe = pipeline(train(path, processors, "layerpipe: {placement: stages}"))
    assert pipedream is not None and layerpipe is not None
    assert layerpipe["partition"] == pipedream["partition"]
    assert layerpipe["steady_cycles_per_minibatch"] <= pipedream["steady_cycles_per_minibatch"]
    for report in (pipedream, layerpipe):
        assert all(0 <= p["utilization"] <= 1 for p in report["processors"])
        # Busy and idle split the window in which the pipeline is full: completions
        # S - 1 to M - S, with the default M = 3 S + 2.
        simulated, stages = report["mini_batches_simulated"], report["stages"]
        assert simulated == 3 * stages + 2
        assert report["steady_window"] == [stages - 1, simulated - stages]
        for p in report["processors"]:
            assert p["busy_cycles"] + p["idle_cycles"] == report["steady_window_cycles"]


def test_communication_is_the_tensors_crossing_stage_boundaries(tmp_path: Path) -> None:
    # MLP 784-2048-2048-10 on 3 stages, batch 16, bf16 activations and gradients.
    result = train(run_file(tmp_path, "mlp"), 3, "pipedream: {mini_batches: 7}")
    report = pipeline(result)
    assert report is not None
    # fc2 costs more than all the other layers together, so the only optimal
    # partition gives it a stage alone: fc1 relu1 | fc2 | relu2 fc3 loss.
    assert [s["first_layer"] for s in report["partition"]] == ["fc1", "fc2", "relu2"]
    # Both boundaries (relu1 -> fc2, fc2 -> relu2) are 2048 wide and send the
    # activation forward and its gradient back: 2 x 2 x 16 samples x 2048 x 2 B.
    assert report["interconnect_bytes_per_minibatch"] == 2 * 2 * 16 * 2048 * 2
    transfers = [op for op in result.steps["pipedream"].graph.ops if isinstance(op, TransferOp)]
    assert {abs(op.source - op.destination) for op in transfers} == {1}


@pytest.mark.slow
def test_memory_and_delays_per_schedule(tmp_path: Path) -> None:
    path = run_file(tmp_path, "resnet18")
    reports = {
        "gpipe": pipeline(train(path, 4, "gpipe: {micro_batches: 4}")),
        "pipedream": pipeline(train(path, 4, "pipedream: {}")),
        "layerpipe": pipeline(train(path, 4, "layerpipe: {placement: stages}")),
        "layerpipe_ema": pipeline(train(path, 4, "layerpipe: {placement: stages, weights: ema}")),
    }
    versions = {k: [p["weight_versions"] for p in r["processors"]] for k, r in reports.items()}
    assert versions["gpipe"] == [0, 0, 0, 0]
    assert versions["pipedream"] == [3, 2, 1, 0]  # S - s - 1 stashed versions
    assert versions["layerpipe"] == [3, 2, 1, 0]  # delay 2 S(l) half-steps = S(l) versions
    assert versions["layerpipe_ema"] == [1, 1, 1, 0]  # one extra buffer per layer
    gpipe = reports["gpipe"]["processors"]
    assert all(p["activation_stash_bytes"] > 0 for p in gpipe)
    assert reports["pipedream"]["warmup_cycles"] > 0


def test_weight_stash_is_the_stage_weights_times_versions(tmp_path: Path) -> None:
    """sum(|W_l|) over a stage's layers, times its weight versions (bf16 weights: 2 B)."""
    path = run_file(tmp_path, "resnet18")
    inputs = load_inputs(path, parse_sets(["processors=4", "run.techniques={pipedream: {}}"]))
    result = simulate_training(inputs)
    report = pipeline(result)
    assert report is not None
    weights: dict[str, int] = {}
    for p in result.base.graph.parameters:
        weights[p.layer] = weights.get(p.layer, 0) + p.weight.elements * 2
    order = [info.layer.name for info in inputs.infos]
    for row, proc in zip(report["partition"], report["processors"], strict=True):
        first, last = order.index(row["first_layer"]), order.index(row["last_layer"])
        stage_bytes = sum(weights.get(n, 0) for n in order[first : last + 1])
        assert proc["weight_stash_bytes"] == stage_bytes * proc["weight_versions"]
    assert report["processors"][0]["weight_stash_bytes"] > 0


def test_bad_schedule_configs(tmp_path: Path) -> None:
    path = run_file(tmp_path, "mlp", batch=16)
    with pytest.raises(
        ConfigError,
        match=r"techniques.gpipe.micro_batches: must divide the batch"
        r" size 16 \(got 3\)",
    ):
        train(path, 2, "gpipe: {micro_batches: 3}")
    with pytest.raises(
        ConfigError,
        match=r"techniques.pipedream.stages: more stages than the"
        r" hardware's 2 processors \(got 4\)",
    ):
        train(path, 2, "pipedream: {stages: 4}")
    with pytest.raises(
        ConfigError,
        match=r"techniques.pipedream: cannot be combined with"
        r" layerpipe",
    ):
        train(path, 2, "pipedream: {}, layerpipe: {}")
    with pytest.raises(
        ConfigError,
        match=r"techniques.gpipe.mini_batches: too few to fill 3 stages and measure a steady"
        r" state \(needs >= 7\) \(got 6\)",
    ):
        train(path, 3, "gpipe: {mini_batches: 6}")
    with pytest.raises(
        ConfigError,
        match=r"techniques.layerpipe.dx_split: input should be 'rows', 'activation' or"
        r" 'none' \(got 'foo'\)",
    ):
        train(path, 2, "layerpipe: {dx_split: foo}")
    with pytest.raises(ConfigError, match=r"techniques.gpipe.replicate: unknown key"):
        train(path, 2, "gpipe: {replicate: true}")


def test_cli_run_draws_a_gantt_chart_per_step(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    path = run_file(tmp_path, "mlp", batch=8)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelsim",
            "run",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--gantt",
            "--set",
            "processors=2",
            "--set",
            "run.techniques={pipedream: {mini_batches: 5}}",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "out" / "mlp_pipe_pipedream"
    for step_dir in (run_dir, run_dir / "steps" / "pipedream"):
        assert (step_dir / "gantt.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["training"]["techniques"] == ["pipedream"]
    assert summary["training"]["sections"]["pipedream"]["stages"] == 2
    assert "steady period" in done.stdout and "stash per processor" in done.stdout


@pytest.mark.parametrize(
    "schedule", [*(f"{s}: {{}}" for s in SCHEDULES), "pipedream: {replicate: true}"]
)
@pytest.mark.parametrize(("workload", "processors"), [("mlp", 3), ("resnet18", 4)])
@pytest.mark.parametrize("sharing", ["shared", "per_processor"])
def test_no_period_beats_its_bounds(
    tmp_path: Path, schedule: str, workload: str, processors: int, sharing: str
) -> None:
    """The period is at least one mini-batch's DRAM time (the busiest channel's when each
    processor has its own), link time and busiest unit's work, and the speedup at most
    what the binding bound allows."""
    sets = [f"processors={processors}", f"dram.sharing={sharing}"]
    sets.append(f"run.techniques={{{schedule}}}")
    report = pipeline(
        simulate_training(load_inputs(run_file(tmp_path, workload), parse_sets(sets)))
    )
    assert report is not None
    bounds = report["period_bounds_cycles"]
    assert set(bounds) == {"dram", "interconnect", "compute"}
    assert report["binding_bound_cycles"] == max(bounds.values())
    assert bounds[report["binding_bound"]] == report["binding_bound_cycles"]
    assert report["steady_cycles_per_minibatch"] >= report["binding_bound_cycles"]
    assert report["speedup"] <= report["speedup_bound"]


@pytest.mark.parametrize(
    ("schedule", "options"), [("pipedream", []), ("layerpipe", ["placement: tasks"])]
)
def test_speedup_does_not_depend_on_the_mini_batches_simulated(
    tmp_path: Path, schedule: str, options: list[str]
) -> None:
    """Doubling the simulated mini-batches moves the speedup by less than 2 %:
    the period is a steady-state figure, not an average over fill and drain.
    (LayerPipe's stage options are built as PipeDream's are; its free placement is
    its own.)"""
    path = run_file(tmp_path, "resnet18")
    default = pipeline(train(path, 4, f"{schedule}: {{{', '.join(options)}}}"))
    longer = ", ".join([*options, "mini_batches: 28"])
    doubled = pipeline(train(path, 4, f"{schedule}: {{{longer}}}"))
    assert default is not None and doubled is not None
    assert default["mini_batches_simulated"] == 14
    assert doubled["speedup"] == pytest.approx(default["speedup"], rel=0.02)


def test_task_bounds_by_hand() -> None:
    """Layer A: fwd 6, dW 6 (no dX: the first layer); layer B: fwd 2, dX 2, dW 2.
    PipeDream's best contiguous partition on 2 processors is A | B: period 12.
    A free longest-first schedule of the five tasks: 6, 6 | +2, +2 | +2 -> 10."""
    tasks = {
        "A": {"fwd": 6, "dw": 6, "update": 0},
        "B": {"fwd": 2, "dx": 2, "dw": 2, "update": 0},
    }
    assert task_bounds(tasks, 2) == {
        "pipedream_cycles": 12.0,
        "free_tasks_cycles": 10.0,
        "gain": 1.2,
    }
    # one processor: both are the whole step
    assert task_bounds(tasks, 1)["gain"] == 1.0


def test_linear5_free_tasks_beat_a_contiguous_partition_beyond_five_processors() -> None:
    """The pipeline toy: five equal layers cannot fill P = 7..9 stages, separate tasks can."""
    run = ROOT / "configs" / "experiments" / "linear5.yaml"
    gains = {}
    for processors in (5, 9):
        sets = parse_sets([f"processors={processors}", "run.techniques={pipedream: {}}"])
        report = pipeline(simulate_training(load_inputs(run, sets)))
        assert report is not None
        gains[processors] = report["task_bounds"]["gain"]
    # on five processors one stage holds a layer and the loss; on nine, four are idle
    assert 1.0 < gains[5] < 1.15 < 1.4 < gains[9]


LINEAR5 = ROOT / "configs/experiments/linear5.yaml"


def train_linear5(processors: int, technique: str) -> TrainingResult:
    sets = [f"processors={processors}", f"run.techniques={{{technique}}}"]
    return simulate_training(load_inputs(LINEAR5, parse_sets(sets)))


def test_free_tasks_use_more_processors_than_layers() -> None:
    """Five equal linear layers (and the loss) on 9 processors: PipeDream has at most one
    stage per layer, 6, and a period of the costliest layer (its forward, dX and dW);
    LayerPipe's free tasks spread over all 9 and beat it by the task model's margin."""
    pipedream = pipeline(train_linear5(9, "pipedream: {}"))
    layerpipe = pipeline(train_linear5(9, "layerpipe: {}"))
    assert pipedream is not None and layerpipe is not None
    assert pipedream["stages"] == 6
    assert layerpipe["placement"] == "tasks"
    assert sorted(layerpipe["tasks_per_processor"]) == [str(p) for p in range(9)]
    assert layerpipe["speedup"] > 1.5 * pipedream["speedup"]
    assert layerpipe["speedup"] <= layerpipe["speedup_bound"]
    # The list scheduler's busiest processor sets the compute bound it reaches (the
    # task loads were measured on one processor: 400 cycles of latency apart).
    busiest = max(layerpipe["task_loads_cycles"])
    assert layerpipe["period_bounds_cycles"]["compute"] == pytest.approx(busiest, rel=1e-3)
    assert layerpipe["steady_cycles_per_minibatch"] <= 1.005 * max(layerpipe["task_loads_cycles"])


def test_free_tasks_stay_near_their_stage_and_split_dx_with_the_previous_one() -> None:
    """Five equal linear layers and the loss on 8 processors, free placement: the six
    stages are one layer each.  With ``dx_split: rows`` (kept here) a dX GEMM's moved
    rows run on the previous stage's processor; every other task runs within one stage
    of its layer's (``reach: 1``) or on processors 6 and 7, which have no stage.  A
    layer's dX and dW may run on different processors at once."""
    report = pipeline(train_linear5(8, "layerpipe: {placement: tasks}"))
    assert report is not None and report["dx_split_rows"]
    order = ["fc1", "fc2", "fc3", "fc4", "fc5", "loss"]
    assert [row["first_layer"] for row in report["partition"]] == order
    where = {task: int(p) for p, names in report["tasks_per_processor"].items() for task in names}
    for task, p in where.items():
        layer, role = task.split(":")
        stage = order.index(layer)
        if role == "dx.part0":
            assert p == max(stage - 1, 0), task
        else:
            assert abs(p - stage) <= 1 or p >= 6, task
    assert any(where.get(f"fc{i}:dx.part0") != where.get(f"fc{i}:dx.part1") for i in range(2, 6))
    assert any(where[f"fc{i}:dw"] != where.get(f"fc{i}:dx.part1") for i in range(2, 6))


def test_free_tasks_activation_reading_runs_f_prime_below(tmp_path: Path) -> None:
    """``dx_split: activation``: the backward of relu2 (``⊙ f'``) runs on the processor of
    fc2's task that reads it, not necessarily fc3's, which computes ``W3ᵀδ``."""
    sets = ["processors=3", "dram.sharing=per_processor"]
    sets.append("run.techniques={layerpipe: {dx_split: activation}}")
    result = simulate_training(load_inputs(run_file(tmp_path, "mlp", batch=256), parse_sets(sets)))
    report = pipeline(result)
    assert report is not None and not report["dx_split_rows"]
    tasks = {task: int(p) for p, names in report["tasks_per_processor"].items() for task in names}
    assert tasks["relu2:dx"] == tasks[next(t for t in ("fc2:dx", "fc2:dw") if t in tasks)]
    assert tasks["relu1:dx"] == tasks["fc1:dw"]  # fc1 is the first layer: no dX


def test_free_tasks_weight_stash_is_weights_times_their_delay() -> None:
    """Each layer keeps ``delay - 1`` extra weight versions (``2 S(l)`` half-steps with
    ``S(l) = delay - 1``), counted on every processor that reads them: those of its
    forward and of its dX GEMMs (which use the version the forward used); with the
    moving average, one buffer."""
    for weights, kept in (("stash", lambda d: d - 1), ("ema", lambda d: min(1, d - 1))):
        result = train_linear5(7, f"layerpipe: {{placement: tasks, weights: {weights}}}")
        report = pipeline(result)
        assert report is not None
        graph = result.steps["layerpipe"].graph
        readers: dict[str, set[int]] = {}
        for op in graph.ops:
            reads_weights = op.phase.value in ("fwd", "bwd_input") and isinstance(op, GemmOp)
            if reads_weights and op.tag.mini_batch == 0:
                readers.setdefault(op.layer, set()).add(graph.processor[op.op_id])
        expected = [0] * 7
        for p in result.base.graph.parameters:
            delay = report["weight_delay_minibatches"][p.layer]
            for home in readers[p.layer]:
                expected[home] += p.weight.elements * 2 * kept(delay)
        assert [row["weight_stash_bytes"] for row in report["processors"]] == expected
        assert sum(expected) > 0
        assert any(len(homes) > 1 for homes in readers.values())


def test_free_tasks_activation_stash_is_on_the_processors_reading_it() -> None:
    """In the free placement a stashed activation is held by the processors whose
    backward ops read it, not by the one that wrote it: each layer's input (2048 x 4096
    bf16, 16 MiB) on its dW's processor and the loss's probabilities (as large) on its
    backward's, each times the reading layer's delay in mini-batches."""
    result = train_linear5(7, "layerpipe: {placement: tasks}")
    report = pipeline(result)
    tasks = {t: int(p) for p, names in report["tasks_per_processor"].items() for t in names}
    delays = report["weight_delay_minibatches"]
    expected = [0] * 7
    for task in ("fc1:dw", "fc2:dw", "fc3:dw", "fc4:dw", "fc5:dw", "loss:dx"):
        expected[tasks[task]] += 2048 * 4096 * 2 * delays[task.split(":")[0]]
    assert [row["activation_stash_bytes"] for row in report["processors"]] == expected
    assert tasks["fc2:fwd"] != tasks["fc2:dw"]  # a stash away from its writer


def test_ring_allreduce_cycles_by_hand() -> None:
    # 1,000 bytes among 4: 6 link steps of 250 bytes at 10 B/cycle plus 5 cycles each
    # (180); each processor reads them at 100 B/cycle and writes them back at 50 (10 +
    # 20), each with the DRAM's 7-cycle latency: 224.
    hw = make_hw(**{"processors": 4, "interconnect.bandwidth_bytes_per_cycle": 10,
                    "interconnect.latency_cycles": 5, "dram.bandwidth_bytes_per_cycle": 100,
                    "dram.write_bandwidth_bytes_per_cycle": 50, "dram.latency_cycles": 7})  # fmt: skip
    link, dram = Machine.of(hw).link, Machine.of(hw).dram[0]
    cycles = ring_allreduce_cycles(np.array([1000.0, 0.0]), 4, link, dram)
    assert cycles.tolist() == [224.0, 6 * 5 + 14]


def test_replicated_partition_by_hand() -> None:
    """Costs 10, 1, 1 on 3 processors: with free all-reduces the best is one stage on
    all three (12 / 3 = 4, against 10 / 2 = 5 for the first layer on two); when the
    first layer's gradients cost 100 cycles to all-reduce, no stage is replicated."""
    free = lambda size, copies: 0 * size  # noqa: E731
    assert replicated_partition([10, 1, 1], [0, 0, 0], 3, free) == ([0, 0, 0], [3])
    costly = lambda size, copies: size  # noqa: E731
    assert replicated_partition([10, 1, 1], [100, 0, 0], 3, costly) == ([0, 1, 1], [1, 1])
    assert replicated_partition([5, 1, 1, 1, 5, 1], [0] * 6, 2, free)[1] == [1, 1]


def test_pipedream_replicates_stages_with_an_allreduce() -> None:
    """Six layers on 9 processors: without replicas PipeDream leaves 3 idle; with them
    its partitioner runs stages on several processors, which take turns over
    mini-batches and all-reduce their gradients over the replicas."""
    plain = train_linear5(9, "pipedream: {}")
    replicated = train_linear5(9, "pipedream: {replicate: true}")
    report = pipeline(replicated)
    assert plain.training is not None
    copies = [row["replicas"] for row in report["partition"]]
    assert sum(copies) <= 9 and max(copies) > 1
    graph = replicated.steps["pipedream"].graph
    reduces = [op for op in graph.ops if isinstance(op, CommOp)]
    assert reduces and {len(op.participants) for op in reduces} <= set(copies) - {1}
    assert report["speedup"] > 1.3 * plain.training.speedup
    assert report["speedup"] <= report["speedup_bound"]
    # Each replica keeps its own weight versions.
    assert sum(p["weight_stash_bytes"] > 0 for p in report["processors"]) > len(copies) - 1


def test_pipedream_sends_a_stage_gradient_when_its_backward_is_done(tmp_path: Path) -> None:
    """PipeDream runs a stage's backward as one unit: the input gradient leaves for the
    previous stage only after the stage's last backward op of that mini-batch."""
    result = train(run_file(tmp_path, "mlp", batch=32), 3, "pipedream: {}")
    run = result.steps["pipedream"]
    graph, trace = run.graph, run.trace
    sent = [
        op for op in graph.ops if isinstance(op, TransferOp) and op.phase.value.startswith("bwd")
    ]
    assert sent
    for transfer in sent:
        backward_ends = [
            int(trace.end_cycle[op.op_id])
            for op in graph.ops
            if isinstance(op, GemmOp | VectorOp)
            and op.phase.value.startswith("bwd")
            and op.tag.mini_batch == transfer.tag.mini_batch
            and graph.processor[op.op_id] == transfer.source
        ]
        assert int(trace.start_cycle[transfer.op_id]) >= max(backward_ends)


def test_layerpipe_keeps_the_faster_of_its_placements(tmp_path: Path) -> None:
    """The default (``placement: best``) tries the free task placements (the list
    scheduler within one stage and anywhere, the task model's best assignments) and
    the stage options, PipeDream's own order among them, and keeps the shortest
    period; the report names the winner and lists every candidate's period.  A free
    placement whose rated period (its busiest load or DRAM time) already exceeds the
    shortest period of those simulated is not simulated.  On the small MLP (batch 64,
    3 processors, shared DRAM) the free task placement within one stage wins, ties
    going to it."""
    path = run_file(tmp_path, "mlp", batch=64)
    pipedream = pipeline(train(path, 3, "pipedream: {}"))
    layerpipe = pipeline(train(path, 3, "layerpipe: {}"))
    assert pipedream is not None and layerpipe is not None
    assert (layerpipe["placement"], layerpipe["candidate"]) == ("tasks", "free")
    tried = layerpipe["candidates"]
    assert [(c["placement"], c["candidate"]) for c in tried] == [
        ("tasks", "free"),
        ("tasks", "free_anywhere"),
        ("tasks", "task_optimum"),
        ("tasks", "task_optimum_split_dx"),
        ("stages", "split_dx_defer_dw"),
        ("stages", "defer_dw"),
        ("stages", "one_f_one_b"),
        ("stages", "pipedream"),
    ]
    simulated = [c for c in tried if c["steady_cycles_per_minibatch"] is not None]
    (skipped,) = [c for c in tried if c not in simulated]
    assert skipped["candidate"] == "task_optimum_split_dx" and skipped["fits"] is None
    assert skipped["rated_cycles_per_minibatch"] > min(
        c["steady_cycles_per_minibatch"] for c in simulated if c["placement"] == "stages"
    )
    assert all(c["fits"] for c in simulated)
    periods = [c["steady_cycles_per_minibatch"] for c in simulated]
    assert layerpipe["steady_cycles_per_minibatch"] == min(periods) == periods[0]
    assert periods[-1] == pipedream["steady_cycles_per_minibatch"]
    for c in simulated[:3]:  # no free placement beats its rating
        assert c["steady_cycles_per_minibatch"] >= c["rated_cycles_per_minibatch"]


@pytest.mark.parametrize(
    ("workload", "processors", "winner", "gain"),
    [
        # ResNet-18: dW deferred, on PipeDream's stages.
        ("resnet18", 5, ("stages", "defer_dw"), 1.038),
        # The MLP: its 2048x2048 layer's tasks spread over the processors.
        ("mlp", 3, ("tasks", "free"), 1.444),
    ],
)
def test_layerpipe_default_tries_both_placements(
    tmp_path: Path, workload: str, processors: int, winner: tuple[str, str], gain: float
) -> None:
    """Batch 32, a DRAM channel per processor: each kind of placement wins somewhere,
    and LayerPipe is never slower than PipeDream."""
    path = run_file(tmp_path, workload, batch=32)
    sets = [f"processors={processors}", "dram.sharing=per_processor"]
    reports = [
        pipeline(
            simulate_training(
                load_inputs(path, parse_sets([*sets, f"run.techniques={{{technique}: {{}}}}"]))
            )
        )
        for technique in ("pipedream", "layerpipe")
    ]
    pipedream, layerpipe = reports
    assert pipedream is not None and layerpipe is not None
    assert (layerpipe["placement"], layerpipe["candidate"]) == winner
    assert round(layerpipe["speedup"] / pipedream["speedup"], 3) == gain
    assert layerpipe["speedup"] <= layerpipe["speedup_bound"]


@pytest.mark.parametrize("processors", [2, 3, 4, 5, 6])
def test_replicated_pipedream_reports_the_measured_period(tmp_path: Path, processors: int) -> None:
    """With a DRAM channel per processor the all-reduces' bytes count on every replica's
    own channel, so no (correct) bound rises above the measured period and the report's
    period is the measured one (it was clamped up to a bound that charged a whole
    all-reduce to one processor: 3.20x printed at P = 5 for 3.76x measured)."""
    sets = [f"processors={processors}", "dram.sharing=per_processor"]
    sets.append("run.techniques={pipedream: {replicate: true}}")
    inputs = load_inputs(run_file(tmp_path, "mlp", batch=32), parse_sets(sets))
    report = pipeline(simulate_training(inputs))
    assert report is not None
    assert not report["clamped"] and report["warnings"] == []
    assert report["steady_cycles_per_minibatch"] == report["measured_cycles_per_minibatch"]
    assert report["steady_cycles_per_minibatch"] >= report["binding_bound_cycles"]
    assert report["speedup"] <= report["speedup_bound"]


def test_a_period_clamped_to_its_bound_says_so(tmp_path: Path) -> None:
    """Replicated PipeDream on the MLP, P = 4, one shared channel: the makespan difference
    of 14 and 28 mini-batches comes out 0.75 % under the DRAM bound (the shorter run's
    drain leaves the channel idle longer), so the period is the bound, and the report
    says so beside the measured figure."""
    sets = parse_sets(["processors=4", "run.techniques={pipedream: {replicate: true}}"])
    report = pipeline(simulate_training(load_inputs(run_file(tmp_path, "mlp", batch=32), sets)))
    assert report is not None
    assert report["clamped"]
    assert report["binding_bound"] == "dram"
    assert report["steady_cycles_per_minibatch"] == report["binding_bound_cycles"]
    assert report["measured_cycles_per_minibatch"] < report["steady_cycles_per_minibatch"]
    assert report["warnings"] == [
        "steady period clamped to the dram bound, 1,041,018 cycles per mini-batch: the"
        " measured period, 1,033,184, is 0.75 % below it (two finite runs drained"
        " differently); the speedup is taken at the bound"
    ]
    assert report["speedup"] == report["speedup_bound"]


@pytest.mark.slow
def test_each_step_kind_is_split_on_its_own_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADA-GP's GP step is the forward pass (with the predictor), its BP step the whole
    step with the predictor's training: each is split into stages on its own layer
    costs, from its step graph simulated on one processor.  Split on the baseline
    step's costs instead (forward, backward and update), ResNet-18's GP stages are far
    from even. ResNet-18, batch 32, P = 4, a DRAM channel per processor."""
    sets = [
        "processors=4",
        "dram.sharing=per_processor",
        "run.techniques={gradient_prediction: {}, pipedream: {}}",
    ]
    path = run_file(tmp_path, "resnet18", batch=32)

    def kinds() -> dict[str, Any]:
        report = pipeline(simulate_training(load_inputs(path, parse_sets(sets))))
        assert report is not None
        section: dict[str, Any] = report["step_kinds"]
        return section

    own = kinds()

    def baseline_costs(
        self: Schedule[Any], ctx: object, step: object, base: RunResult
    ) -> tuple[RunResult, bool]:
        return base, False

    monkeypatch.setattr(Schedule, "single_step", baseline_costs)
    before = kinds()
    assert {k: r["balanced_on"] for k, r in own.items()} == {"bp": "own_step", "gp": "own_step"}
    assert {r["balanced_on"] for r in before.values()} == {"baseline_step"}
    speedups = {k: round(own[k]["speedup"], 2) for k in own}
    assert speedups == {"bp": 2.04, "gp": 7.55}
    assert {k: round(before[k]["speedup"], 2) for k in before} == {"bp": 2.06, "gp": 6.23}
    for report in (*own.values(), *before.values()):
        assert report["speedup"] <= report["speedup_bound"]
    # The GP step's layer costs are its forward pass's: less than half the step's.
    gp, bp = own["gp"]["partition"], own["bp"]["partition"]
    assert 2 * sum(s["cost_cycles"] for s in gp) < sum(s["cost_cycles"] for s in bp)


def test_a_plain_schedule_is_split_on_the_baseline_step(tmp_path: Path) -> None:
    """Without a rewriting technique a step kind's graph is the baseline step's, whose
    simulated costs are reused."""
    report = pipeline(train(run_file(tmp_path, "mlp"), 3, "pipedream: {}"))
    assert report is not None
    assert report["balanced_on"] == "baseline_step"


def test_free_tasks_are_reported_with_an_on_chip_stash(tmp_path: Path) -> None:
    """With ``stash_kib`` the simulated graph is a copy with some stash kept on chip;
    the report still finds the free placement's layout (it read PipeDream's stages
    instead: placement ``stages`` and their weight versions)."""
    sets = ["processors=3", "dram.sharing=per_processor", "run.techniques={layerpipe: {}}"]
    path = run_file(tmp_path, "mlp", batch=128)
    reports = [
        simulate_training(load_inputs(path, parse_sets([*sets, f"buffers.stash_kib={kib}"])))
        for kib in (0, 512)
    ]
    without, with_stash = (pipeline(r) for r in reports)
    assert without is not None and with_stash is not None
    assert without["placement"] == with_stash["placement"] == "tasks"
    keys = ("weight_delay_minibatches", "tasks_per_processor")
    assert {k: with_stash[k] for k in keys} == {k: without[k] for k in keys}


def test_deep_pipelines_stay_within_the_mini_batch_limit(tmp_path: Path) -> None:
    """The default ``3 S + 2`` mini-batches is capped at the limit of 1,024, and a pipeline
    too deep to fill and measure within it (``2 S + 1`` for ``S`` stages, or ``P``
    processors for LayerPipe's free tasks) is refused at load time."""
    schedule = PipeDream(PipeDreamConfig(), "run.yaml")
    assert schedule.mini_batches(300) == 902 and schedule.mini_batches(400) == 1024
    path = run_file(tmp_path, "mlp")
    for technique, processors, stages, needed, deepest in (
        ("pipedream", 600, 6, None, None),  # six layers: six stages, however many processors
        ("layerpipe", 512, 512, 1025, 511),  # free tasks use every processor
        ("layerpipe", 511, 511, None, None),
    ):
        sets = parse_sets([f"processors={processors}", f"run.techniques={{{technique}: {{}}}}"])
        if needed is None:
            load_inputs(path, sets)
            continue
        with pytest.raises(ConfigError) as excinfo:
            load_inputs(path, sets)
        assert str(excinfo.value) == (
            f"--set: run.techniques.{technique}.stages: {stages} stages need {needed}"
            " mini-batches to fill and measure a steady state, more than the limit of"
            f" 1,024; set stages to at most {deepest} (got {stages})"
        )
