"""Techniques compose: ADA-GP's step kinds under a pipeline schedule, checks at load time."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.base import Spec
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, simulate_training
from accelsim.errors import GraphError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.check import graph_problems
from accelsim.graph.ops import (
    GemmOp,
    OpGraph,
    Parameter,
    ParamKind,
    Phase,
    Stage,
    TensorKind,
    replaced,
)
from accelsim.report.training import TrainingResult
from accelsim.techniques.base import KindDefiner
from accelsim.techniques.registry import compose_problems
from accelsim.techniques.skipping.groups import skipped_count
from accelsim.timing.costs import UNIT_ARRAY, UNIT_VECTOR
from tests.conftest import ROOT, make_hw
from tests.techniques.dropout.test_approximate_dropout import period_two
from tests.techniques.test_technique_order import Plain

MLP = ROOT / "configs" / "runs" / "mlp.yaml"


def composed(processors: int = 3, schedule: str = "pipedream") -> TrainingResult:
    sets = [
        f"processors={processors}",
        f"run.techniques={{gradient_prediction: {{}}, {schedule}: {{}}}}",
    ]
    return simulate_training(load_inputs(MLP, parse_sets(sets)))


def test_adagp_step_kinds_run_under_a_pipeline_schedule() -> None:
    result = composed()
    assert set(result.steps) == {"bp", "gp"}
    report = result.training
    assert report is not None and report.techniques == ("gradient_prediction", "pipedream")
    pipeline = report.sections["pipedream"].details["step_kinds"]
    for kind, step in result.steps.items():
        # every stage works, and the step is 3 S + 2 = 11 pipelined mini-batches of the
        # kind's graph
        assert set(step.trace.processor.tolist()) == {0, 1, 2}
        assert {op.tag.mini_batch for op in step.graph.ops} == set(range(11))
        steady = pipeline[kind]["steady_cycles_per_minibatch"]
        assert report.steps[kind].cycles == steady
        assert steady >= pipeline[kind]["binding_bound_cycles"]
    # a pipelined kind's cost is bounded per mini-batch, and so is the training speedup
    for kind in ("bp", "gp"):
        cost = report.steps[kind]
        assert cost.cycles >= cost.bound_cycles
        assert cost.bound_cycles == pipeline[kind]["binding_bound_cycles"]
    assert report.speedup <= report.speedup_bound
    gp = result.steps["gp"]
    assert not any(op.stage is Stage.BACKWARD for op in gp.graph.ops)
    assert any(op.phase is Phase.AUX for op in gp.graph.ops)
    assert gp.graph.stashed == frozenset()


def test_pipelined_steps_respect_the_busiest_processor_bound() -> None:
    """A steady interval cannot be shorter than one mini-batch's work on the busiest unit:
    every unit does the same work for each of the 11 simulated mini-batches."""
    result = composed()
    assert result.training is not None
    for kind, step in result.steps.items():
        steady = result.training.steps[kind].cycles
        for unit in (UNIT_ARRAY, UNIT_VECTOR):
            per_minibatch = step.trace.busy_cycles(unit).max() / 11
            assert steady >= per_minibatch, (kind, unit)


def test_a_pipelined_gp_step_beats_a_pipelined_bp_step() -> None:
    result = composed()
    single = simulate_training(
        load_inputs(MLP, parse_sets(["run.techniques={gradient_prediction: {}}"]))
    )
    assert result.training is not None and single.training is not None
    steps = result.training.steps
    assert steps["gp"].cycles < steps["bp"].cycles
    # on three stages each kind's steady interval is shorter than the one-processor step
    for kind in ("bp", "gp"):
        assert steps[kind].cycles < single.training.steps[kind].cycles


def test_check_rejects_technique_errors_before_simulating(tmp_path: Path) -> None:
    """The issue's example: micro-batches that do not divide the batch fail in `check`."""
    run = tmp_path / "run.yaml"
    run.write_text(
        MLP.read_text().replace("batch_size: 128", "batch_size: 16")
        + "techniques: {gpipe: {micro_batches: 3}}\n",
        encoding="utf-8",
    )
    run.write_text(
        run.read_text()
        .replace("../hardware/", f"{ROOT}/configs/hardware/")
        .replace("../../workloads/", f"{ROOT}/workloads/")
        .replace("../energy/", f"{ROOT}/configs/energy/"),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "accelsim", "check", str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"{run}: techniques.gpipe.micro_batches: must divide the batch size 16 (got 3)"
    )


def test_data_parallel_needs_a_sample_per_processor_at_load_time() -> None:
    with pytest.raises(Exception, match=r"batch_size: data_parallel needs at least one sample"):
        load_inputs(MLP, parse_sets(["processors=4", "assignment=data_parallel", "batch_size=2"]))


class _Kinds(Plain, KindDefiner[Spec]):
    name = "kinds"

    def step_kinds(self, ctx: object) -> tuple[str, ...]:
        return ("a", "b")

    def kind_shares(self, ctx: object) -> list[dict[str, float]]:
        return [{"a": 0.5, "b": 0.5}]


class _Other(_Kinds):
    name = "other"


def test_two_techniques_defining_step_kinds_cannot_compose() -> None:
    problems = compose_problems(
        [_Kinds(Spec(), "run.yaml"), _Other(Spec(), "run.yaml")], "run.yaml"
    )
    assert [str(p) for p in problems] == [
        "run.yaml: techniques: at most one technique may define their own step kinds"
        " (got ['kinds', 'other'])"
    ]


def test_layerpipe_simulates_each_candidate_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline, then the step with its dX rows split on one processor (the task
    model's costs; the whole step's are the baseline's), then LayerPipe's four stage
    candidates, each at M and 2M mini-batches to measure its period; the winner is
    not simulated again."""
    from accelsim.driver import run as driver_run

    calls: list[str] = []
    real = driver_run.simulate_graph

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(str(args[2]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(driver_run, "simulate_graph", counted)
    inputs = load_inputs(
        MLP, parse_sets(["processors=3", "run.techniques={layerpipe: {placement: stages}}"])
    )
    result = simulate_training(inputs)
    assert calls == ["base"] + ["candidate"] * 9
    assert result.steps["layerpipe"].settings["step"] == "layerpipe"


def test_dropout_skipping_fusion_and_a_pipeline_in_one_run() -> None:
    """Approximate dropout and gradient skipping (removing work), backward optimizer fusion
    (fusing what they left) and PipeDream (placement) in one run: the pipelined step of the rewritten
    graph is faster than the baseline step, within its bound, and has fewer MACs than
    the dropout-free, skip-free pipelined step."""
    run = ROOT / "configs" / "runs" / "mlp_dropout.yaml"
    both = "approximate_dropout: {rate: 0.5, pattern: row}, gradient_skipping: {skip_fraction: 0.3}"
    sets = ["batch_size=128", "processors=3"]
    composed = simulate_training(
        load_inputs(
            run,
            parse_sets(
                [
                    *sets,
                    f"run.techniques={{{both}, optimizer_fusion: {{mode: backward}}, pipedream: {{}}}}",
                ]
            ),
        )
    )
    plain = simulate_training(
        load_inputs(run, parse_sets([*sets, "run.techniques={pipedream: {}}"]))
    )
    report = composed.training
    assert report is not None
    assert 1 < report.speedup <= report.speedup_bound
    macs = {
        name: int(result.steps["pipedream"].trace.costs.macs.sum())
        for name, result in (("composed", composed), ("plain", plain))
    }
    assert macs["composed"] < macs["plain"]


# ---------------------------------------------------------------- composition by construction

DROPOUT_MLP = ROOT / "configs" / "runs" / "mlp_dropout.yaml"


def dropout_and_skipping(
    tmp_path: Path, grouping: str, *first: str, batch: int = 64
) -> TrainingResult:
    """Period-2 row dropout (1,024 of each 2,048 hidden units kept in every step) and
    skipping half of every grouped weight's groups, listed in the order ``first`` gives."""
    sections = {
        "approximate_dropout": f"approximate_dropout: {{distribution: {period_two(tmp_path)}}}",
        "gradient_skipping": f"gradient_skipping: {{grouping: {grouping}, skip_fraction: 0.5}}",
    }
    order = [*first, *(name for name in sections if name not in first)]
    sets = [f"batch_size={batch}", f"run.techniques={{{', '.join(sections[n] for n in order)}}}"]
    return simulate_training(load_inputs(DROPOUT_MLP, parse_sets(sets)))


def dims(result: TrainingResult, name: str) -> tuple[int, int, int]:
    (op,) = [o for o in next(iter(result.steps.values())).graph.ops if o.name == name]
    assert isinstance(op, GemmOp)
    return op.m, op.n, op.k


@pytest.mark.parametrize("first", ["approximate_dropout", "gradient_skipping"])
def test_dropout_then_skipping_by_hand(tmp_path: Path, first: str) -> None:
    """fc1 784 -> 2048 (drop1 keeps 1,024), fc2 2048 -> 2048 (drop1 in, drop2 out),
    fc3 2048 -> 10 (drop2 in).  Dropout compacts the GEMMs to the kept units, then
    filter skipping halves the output rows (neurons) it finds: 1024 -> 512, and fc3's
    10 -> 5; each weight's update keeps half its elements and monitors the kept rows."""
    result = dropout_and_skipping(tmp_path, "filter", first)
    b = 64
    assert dims(result, "fc1.dw") == (512, 784, b)
    assert dims(result, "fc2.dw") == (512, 1024, b)
    assert dims(result, "fc3.dw") == (5, 1024, b)
    params = {p.weight.name: p for p in next(iter(result.steps.values())).graph.parameters}
    assert params["fc1.W"].update_elements == 784 * 2048 // 2
    assert params["fc2.W"].update_elements == 2048 * 2048 // 2
    assert params["fc2.W"].monitor_groups == 512
    assert params["fc3.W"].monitor_groups == 5
    row = dropout_and_skipping(tmp_path, "row", first)
    # row grouping: the input columns dropout kept (1,024 of fc2's and fc3's 2,048), halved
    assert dims(row, "fc2.dw") == (1024, 512, b)
    assert dims(row, "fc3.dw") == (10, 512, b)


def test_the_rewrites_commute_to_rounding(tmp_path: Path) -> None:
    """Applied directly in either order, dropout's and skipping's rewrites give each GEMM
    the same size to one unit of rounding (dropout scales a dimension's share, skipping
    counts the groups it finds): the fixed order they run in is a convention, not a
    dependency."""
    for grouping in ("filter", "row"):
        sets = [
            "batch_size=64",
            "run.techniques={approximate_dropout: {rate: 0.3},"
            f" gradient_skipping: {{grouping: {grouping}, skip_fraction: 0.45}}}}",
        ]
        run = _Run(load_inputs(DROPOUT_MLP, parse_sets(sets)))
        lowered = run.lowered(64)
        dropout, skipping = run.rewriters
        kind = dropout.name
        one = skipping.rewrite_graph(dropout.rewrite_graph(lowered, kind, run.ctx), kind, run.ctx)
        other = dropout.rewrite_graph(skipping.rewrite_graph(lowered, kind, run.ctx), kind, run.ctx)
        gemms = [
            (a, b)
            for a, b in zip(one.ops, other.ops, strict=True)
            if isinstance(a, GemmOp) and isinstance(b, GemmOp)
        ]
        assert gemms and all(a.name == b.name for a, b in gemms)
        for a, b in gemms:
            for d in ("m", "n", "k"):
                assert abs(getattr(a, d) - getattr(b, d)) <= 1, (grouping, a.name, d)
        # both acted on fc2's weight gradient: dropout on its rows and columns,
        # skipping further on its rows (filter) or columns (row)
        alone = next(
            o for o in dropout.rewrite_graph(lowered, kind, run.ctx).ops if o.name == "fc2.dw"
        )
        both = next(a for a, _ in gemms if a.name == "fc2.dw")
        assert isinstance(alone, GemmOp) and alone.m < 2048 and alone.n < 2048
        skipped = "m" if grouping == "filter" else "n"
        groups = getattr(alone, skipped)
        assert getattr(both, skipped) == groups - skipped_count(0.45, groups)


@pytest.mark.parametrize("first", ["approximate_dropout", "gradient_skipping"])
def test_extreme_settings_compose_and_beat_each_alone(first: str) -> None:
    """Skipping 0.9 of the groups with dropout at 0.7 (once a negative GEMM size and a
    crash): both orders run, every GEMM keeps a positive size, and together they beat
    either alone, within the composed bounds; the composed "nothing trains" bound
    exceeds skipping's own (which ignores dropout), as the composed run does."""
    parts = {
        "approximate_dropout": "approximate_dropout: {rate: 0.7, steps: 20}",
        "gradient_skipping": "gradient_skipping: {skip_fraction: 0.9}",
    }
    order = [parts[first], *(v for k, v in parts.items() if k != first)]

    def train(*techniques: str) -> TrainingResult:
        sets = ["batch_size=64", f"run.techniques={{{', '.join(techniques)}}}"]
        return simulate_training(load_inputs(DROPOUT_MLP, parse_sets(sets)))

    both = train(*order)
    alone = {name: train(section) for name, section in parts.items()}
    report = both.training
    assert report is not None
    for op in both.steps["approximate_dropout"].graph.ops:
        assert not isinstance(op, GemmOp) or min(op.m, op.n, op.k) >= 1
    speedups = {name: r.training.speedup for name, r in alone.items() if r.training}
    assert report.speedup > max(speedups.values())
    skipping = report.sections["gradient_skipping"].details
    assert report.speedup <= skipping["upper_bound_speedup"]
    own = alone["gradient_skipping"].training
    assert own is not None
    bound_alone = own.sections["gradient_skipping"].details["upper_bound_speedup"]
    assert report.speedup > bound_alone
    assert skipping["upper_bound_speedup"] > bound_alone


def test_adagp_counts_only_its_own_predictor_work(tmp_path: Path) -> None:
    """ADA-GP's predictor energy and MACs are those of the ops it added: tile dropout's
    pattern ops (auxiliary work too) are dropout's, not the predictor's."""
    dist = period_two(tmp_path)

    def predictor(*more: str) -> tuple[dict[str, Any], TrainingResult]:
        techniques = ", ".join(("gradient_prediction: {}", *more))
        sets = ["batch_size=64", f"run.techniques={{{techniques}}}"]
        result = simulate_training(load_inputs(DROPOUT_MLP, parse_sets(sets)))
        assert result.training is not None
        return result.training.sections["gradient_prediction"].details["predictor"], result

    alone, _ = predictor()
    with_dropout, result = predictor(
        f"approximate_dropout: {{pattern: tile, distribution: {dist}}}"
    )
    bp = result.steps["bp"]
    patterns = [op for op in bp.graph.ops if op.owner == "approximate_dropout"]
    assert patterns and all(op.phase is Phase.AUX for op in patterns)
    pattern_pj = sum(float(bp.energy.op_pj[op.op_id]) for op in patterns)
    assert pattern_pj > 0
    for kind in ("bp", "gp"):
        assert with_dropout[kind]["energy_pj"] == alone[kind]["energy_pj"]
        assert with_dropout[kind]["macs"] == alone[kind]["macs"]
    # every op is the step's or one technique's: the owners partition the energy
    owners = {op.owner for op in bp.graph.ops}
    assert owners == {"", "gradient_prediction", "approximate_dropout"}
    total = sum(float(e) for e in bp.energy.op_pj)
    by_owner = sum(
        sum(float(bp.energy.op_pj[op.op_id]) for op in bp.graph.ops if op.owner == owner)
        for owner in owners
    )
    assert by_owner == pytest.approx(total)


def test_a_rewrite_that_breaks_the_graph_names_the_technique_and_kind() -> None:
    run = _Run(load_inputs(MLP, parse_sets(["run.techniques={gradient_skipping: {}}"])))

    def zero_rows(graph: OpGraph) -> OpGraph:
        ops = tuple(
            replaced(op, m=0) if isinstance(op, GemmOp) and op.name == "fc2.dw" else op
            for op in graph.ops
        )
        return dataclasses.replace(graph, ops=ops)

    step = run.step_graph("skip_0", {"gradient_skipping": zero_rows})
    with pytest.raises(
        GraphError,
        match=r"^techniques.gradient_skipping made an ill-formed 'skip_0' step graph:"
        r" GEMM fc2.dw has m = 0$",
    ):
        step(16)


def test_graph_problems_finds_each_kind_of_fault() -> None:
    b = GraphBuilder(make_hw().word_bytes)
    x = b.tensor("x", TensorKind.ACTIVATION, 8)
    w = b.tensor("w", TensorKind.WEIGHT, 4, parameter="w")
    y = b.tensor("y", TensorKind.ACTIVATION, 8)
    orphan = b.tensor("orphan", TensorKind.ACTIVATION, 8)
    dw = b.tensor("dw", TensorKind.GRADIENT, 4, parameter="w")
    b.gemm("fwd", "l", Phase.FWD, 4, 2, 2, 1, x, w, y)
    b.vector("reads_orphan", "l", Phase.FWD, 8, 1, [orphan], [y])
    made = b.gemm("dw", "l", Phase.BWD_WEIGHT, 2, 2, 4, 1, y, x, dw)
    good = b.build((Parameter("l", w, dw, made, ParamKind.WEIGHT, 2),))
    assert graph_problems(good, ("x",)) == [
        "reads_orphan reads orphan, which no op before it makes"
    ]
    wrong = dataclasses.replace(
        good,
        stashed=frozenset({("x", 0), ("y", 1)}),
        parameters=(Parameter("l", w, dw, 0, ParamKind.WEIGHT, 2, updated_elements=0),),
    )
    assert graph_problems(wrong, ("x", "orphan")) == [
        "the stash is not what the backward stage reads (stashed but unread:"
        " ['y (version 1)'], read but not stashed: ['y'])",
        "w's gradient op fwd does not write dw",
        "w is trained but updates 0 elements",
    ]
