"""Techniques compose: ADA-GP's step kinds under a pipeline schedule, checks at load time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.config.base import Spec
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.graph.ops import Phase
from accelsim.graph.queries import BACKWARD
from accelsim.report.result import TrainingResult
from accelsim.techniques.base import Technique
from accelsim.techniques.registry import compose_problems
from accelsim.timing.costs import UNIT_ARRAY, UNIT_VECTOR
from tests.conftest import ROOT

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
    assert not any(op.phase in BACKWARD for op in gp.graph.ops)
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


class _Kinds(Technique):
    name = "kinds"
    Config = Spec

    def step_kinds(self) -> tuple[str, ...]:
        return ("a", "b")


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
    """The baseline, then LayerPipe's four stage candidates, each at M and 2M mini-batches to
    measure its period; the winner is not simulated again."""
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
    assert calls == ["base"] + ["candidate"] * 8
    assert result.steps["layerpipe"].settings["step"] == "layerpipe"


def test_dropout_skipping_fusion_and_a_pipeline_in_one_run() -> None:
    """Approximate dropout (PRUNE), gradient skipping (PRUNE), backward optimizer fusion
    (FUSE) and PipeDream (placement) in one run: the pipelined step of the rewritten
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
