"""Approximate dropout on stochastic depth: a regular pattern over the batch's samples,
each residual branch run for the kept samples alone (counted by hand on two residual
MLP blocks at batch 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import GemmOp, Op, OpGraph, VectorOp
from accelsim.report.training import TrainingResult
from accelsim.techniques.dropout.depth import sample_columns
from accelsim.techniques.dropout.samples import find_sample_sites
from accelsim.techniques.dropout.steps import StepPlan, count_steps
from tests.conftest import ROOT
from tests.techniques.dropout.test_approximate_dropout import counted_as_simulated, drawn

RUN = ROOT / "configs" / "runs" / "mlp_dropout.yaml"
WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "stochastic_depth_mlp.yaml"
KIND = "approximate_dropout"
B = 10
BRANCHES = {"b1sd": ("b1fc1", "b1relu", "b1fc2"), "b2sd": ("b2fc1", "b2relu", "b2fc2")}
# Per block and sample: fc1 16 -> 32 and fc2 32 -> 16, 512 MACs each, in forward, dX
# and dW: 3,072 MACs.  fc0 (8 -> 16, forward and dW: 256) and the head (16 -> 4,
# three GEMMs: 192) are outside the branches.
BRANCH_MACS = 3 * (16 * 32 + 32 * 16)
OTHER_MACS = 2 * 8 * 16 + 3 * 16 * 4


def sets(rate: float, *more: str, period: int = 5) -> list[str]:
    return [
        f"workload={WORKLOAD}",
        f"batch_size={B}",
        *(f"workload.layers[{sd}].rate={rate}" for sd in BRANCHES),
        f"run.techniques.approximate_dropout={{max_period: {period}}}",
        *more,
    ]


def run(rate: float, *more: str, period: int = 5) -> TrainingResult:
    return simulate_training(load_inputs(RUN, parse_sets(sets(rate, *more, period=period))))


def ops(graph: OpGraph, layer: str) -> dict[str, Op]:
    return {op.name: op for op in graph.ops if op.layer == layer}


def details(result: TrainingResult) -> dict[str, Any]:
    assert result.training is not None
    found: dict[str, Any] = result.training.sections[KIND].details
    return found


def test_branches_are_found_from_the_join_back_to_the_fork() -> None:
    infos = load_inputs(RUN, parse_sets(sets(0.2))).infos
    sites, refused = find_sample_sites(infos)
    assert [(s.layer, s.branch, s.join) for s in sites] == [
        ("b1sd", BRANCHES["b1sd"], "b1add"),
        ("b2sd", BRANCHES["b2sd"], "b2add"),
    ]
    assert refused == {}


def test_half_the_samples_by_hand() -> None:
    """Rate 0.5 with periods up to 2: every step keeps samples 0, 2, .. or 1, 3, ..:
    exactly 5 of 10."""
    result = run(0.5, period=2)
    step, base = result.steps[KIND].graph, result.base.graph
    for sd, branch in BRANCHES.items():
        fc1, relu, fc2 = branch
        mine = ops(step, fc1) | ops(step, fc2)
        dims = {name: (op.m, op.n, op.k) for name, op in mine.items() if isinstance(op, GemmOp)}
        assert dims == {
            f"{fc1}.fwd": (5, 32, 16),  # M: 5 kept samples of 10
            f"{fc1}.dx": (5, 16, 32),
            f"{fc1}.dw": (32, 16, 5),  # K: the kept samples
            f"{fc2}.fwd": (5, 16, 32),
            f"{fc2}.dx": (5, 32, 16),
            f"{fc2}.dw": (16, 32, 5),
        }
        fwd = mine[f"{fc1}.fwd"]
        assert isinstance(fwd, GemmOp)
        # A: 5 samples x 16 inputs; B: the whole 16 x 32 weight
        assert (fwd.a_elements, fwd.b_elements) == (5 * 16, 16 * 32)
        dw = mine[f"{fc2}.dw"]
        assert isinstance(dw, GemmOp)
        assert (dw.a_elements, dw.b_elements) == (16 * 5, 5 * 32)
        act = ops(step, relu)[f"{relu}.fwd"]
        assert isinstance(act, VectorOp)
        # 5 x 32 elements, 2 bytes each, read and written
        assert act.elements == 160
        assert [a.bytes for a in act.reads] == [a.bytes for a in act.writes] == [320]
        bias = ops(step, fc2)[f"{fc2}.db"]
        assert isinstance(bias, VectorOp)
        # the bias gradient sums 5 x 16 output gradients into all 16 biases
        assert (bias.elements, bias.writes[0].elements) == (80, 16)
        layer, was = ops(step, sd), ops(base, sd)
        fwd_sd, was_sd = layer[f"{sd}.fwd"], was[f"{sd}.fwd"]
        assert isinstance(fwd_sd, VectorOp) and isinstance(was_sd, VectorOp)
        # no per-sample mask (its 2 bytes) any more; 5 x 16 scaled elements
        assert [a.bytes for a in was_sd.writes] == [320, 2]
        assert (fwd_sd.elements, [a.bytes for a in fwd_sd.writes]) == (80, [160])
        pattern = layer[f"{sd}.pattern"]
        assert isinstance(pattern, VectorOp) and pattern.owner == KIND
        assert pattern.vector_ops == 2 * B  # two ops per sample of the batch
        # the join adds the whole batch
        join, was_join = ops(step, f"{sd[:2]}add"), ops(base, f"{sd[:2]}add")
        assert [
            (o.name, o.elements, o.reads) for o in join.values() if isinstance(o, VectorOp)
        ] == [(o.name, o.elements, o.reads) for o in was_join.values() if isinstance(o, VectorOp)]
    macs = {g: sum(o.macs for o in g.ops if isinstance(o, GemmOp)) for g in (base, step)}
    assert macs[base] == B * (2 * BRANCH_MACS + OTHER_MACS) == 65_920
    assert macs[step] == B * OTHER_MACS + 2 * 5 * BRANCH_MACS == 35_200
    report = details(result)
    assert report["skipped_macs"] == 30_720
    assert report["skipped_mac_fraction"] == 30_720 / 65_920
    assert [s["kept_mean"] for s in report["stochastic_depth"]["sites"]] == [5.0, 5.0]
    assert result.training is not None
    assert result.training.sections[KIND].lines[-1] == (
        "stochastic depth",
        "2 branches run for 5.00 of 10 samples a step on average (5.00 to 5.00 by branch)",
    )
    assert report["not_compacted"] == []
    assert report["by_kind"][KIND]["per_step"]["cycles"]["std"] == 0


def test_rate_point_two_keeps_what_its_patterns_keep() -> None:
    """Rate 0.2 at batch 10: kept + dropped = 10, the kept share near 0.8, and the
    skipped MACs are the branch's MACs per sample times the mean dropped samples."""
    result = run(0.2)
    report = details(result)
    sites = report["stochastic_depth"]["sites"]
    dropped = 0.0
    for site in sites:
        assert site["kept_mean"] + site["dropped_mean"] == B
        assert abs(site["kept_share_expected"] - 0.8) <= site["search_max_error"]
        assert site["kept_share_drawn"] == pytest.approx(site["kept_share_expected"], rel=0.005)
        dropped += site["dropped_mean"]
    assert report["skipped_macs"] == pytest.approx(BRANCH_MACS * dropped)


def test_every_step_keeps_a_sample() -> None:
    """Sample patterns have periods up to the batch, and one keeps every sample: each
    step keeps 1 to 10 samples, and step 0's branch GEMMs run for its kept ones."""
    inputs = load_inputs(RUN, parse_sets(sets(0.2)))
    result = simulate_training(inputs)
    plan = drawn(inputs, result)[1]
    kept = plan.kept[:, plan.first_sample :]
    assert kept.shape == (100, 2) and kept.min() >= 1 and kept.max() <= B
    assert (kept < B).mean() > 0.5
    step = result.steps[KIND].graph
    for j, branch in enumerate(BRANCHES.values()):
        fwd = ops(step, branch[0])[f"{branch[0]}.fwd"]
        assert isinstance(fwd, GemmOp) and fwd.m == kept[0, j]


def test_a_small_rate_is_reached_by_steps_that_drop_no_sample() -> None:
    """Rate 0.02 (torchvision's first blocks' are 0.006 to 0.03) is below 1/5: most steps
    keep all 10 samples and the others drop one to five, 0.2 samples a step on average."""
    report = details(run(0.02))
    for site in report["stochastic_depth"]["sites"]:
        assert site["kept_share_expected"] == pytest.approx(0.98, abs=site["search_max_error"])
        assert site["kept_share_drawn"] == pytest.approx(0.98, rel=0.005)
        assert site["dropped_mean"] == pytest.approx(B * (1 - site["kept_share_drawn"]))
    assert report["skipped_macs"] > 0


def test_skipped_work_grows_with_the_rate() -> None:
    skipped, energy = [], []
    for rate in (0.2, 0.3, 0.4, 0.5):
        result = run(rate)
        assert result.training is not None
        assert result.training.speedup <= result.training.speedup_bound
        skipped.append(details(result)["skipped_macs"])
        energy.append(result.training.energy_reduction)
    assert skipped == sorted(skipped) and len(set(skipped)) == 4
    assert energy == sorted(energy) and energy[0] > 0


def test_the_counted_step_zero_is_the_simulated_step() -> None:
    """The per-step count gives step 0's simulated branch GEMMs exactly, and each branch
    vector op's share of its baseline work is its step's kept samples over the batch."""
    inputs = load_inputs(RUN, parse_sets(sets(0.2)))
    result = simulate_training(inputs)
    ctx, plan = drawn(inputs, result)
    first = plan.first_sample
    samples = sample_columns(plan)
    assert samples == {
        layer: first + j
        for j, (sd, branch) in enumerate(BRANCHES.items())
        for layer in (sd, *branch)
    }
    counts = count_steps(
        ctx,
        result.base,
        StepPlan(
            plan.shrinks, plan.tiles, plan.kept, plan.fetched, plan.patterns, plan.tile, samples, B
        ),
    )
    assert len(counts.op_ids) == 12  # two branches' two linear layers, three GEMMs each
    step = counted_as_simulated(counts, result, "dram_ifmap_read_bytes")
    by_name = {o.name: o.op_id for o in step.graph.ops}
    # per branch: relu forward and backward, the two biases' gradients; the layer's two ops
    assert len(counts.vector_ids) == 2 * 6
    base_ops = result.base.graph.ops
    for j, op_id in enumerate(counts.vector_ids.tolist()):
        op = base_ops[op_id]
        assert isinstance(op, VectorOp)
        col = samples[op.layer]
        expected = -(-op.elements * plan.kept[:, col] // B) / op.elements
        assert counts.vector_share[:, j].tolist() == expected.tolist()
        simulated = step.graph.ops[by_name[op.name]]
        assert isinstance(simulated, VectorOp)
        assert simulated.elements == op.elements * counts.vector_share[0, j]


def test_both_engines_give_the_same_summary() -> None:
    summaries = []
    for engine in ("simpy", "compiled"):
        result = run(0.2, f"timing.engine={engine}")
        summary = result.summary()
        steps = {kind: step.summary() for kind, step in result.steps.items()}
        assert {s.pop("engine") for s in (summary, *steps.values())} == {engine}
        summaries.append((summary, steps))
    assert summaries[0] == summaries[1]


@pytest.mark.parametrize(
    ("rate", "batch", "message"),
    [
        (
            0.2,
            1,
            "--set: run.techniques.approximate_dropout.stochastic_depth: a batch of 1 sample"
            " leaves b1sd no pattern that keeps some samples and drops others (its branch"
            " would run or vanish whole); set stochastic_depth: false for its conventional"
            " per-sample mask (got True)",
        ),
        (
            0.8,
            4,
            "--set: run.techniques.approximate_dropout.stochastic_depth: stochastic-depth rate"
            " 0.8 of b1sd is out of reach of sample patterns with periods up to 4 (max_period"
            " 5, batch 4: rates up to 0.75); set stochastic_depth: false for its conventional"
            " per-sample mask (got True)",
        ),
    ],
)
def test_a_batch_without_a_pattern_is_refused(
    rate: float, batch: int, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(RUN, parse_sets([*sets(rate), f"batch_size={batch}"]))
    assert [str(p) for p in caught.value.problems] == [message]
    # with stochastic depth off, a dropout layer before the head is the only site
    path = tmp_path / "w.yaml"
    path.write_text(
        WORKLOAD.read_text().replace(
            "  - {name: head,", "  - {name: drop, kind: dropout, rate: 0.5}\n  - {name: head,"
        )
    )
    off = "run.techniques.approximate_dropout={max_period: 5, stochastic_depth: false}"
    more = [f"workload={path}", f"batch_size={batch}", off]
    report = details(simulate_training(load_inputs(RUN, parse_sets([*sets(rate), *more]))))
    assert [site["dropout"] for site in report["sites"]] == ["drop"]
    assert report["stochastic_depth"] == {
        "sites": [],
        "not_acted_on": dict.fromkeys(BRANCHES, "stochastic_depth is off"),
    }
    assert report["not_compacted"] == list(BRANCHES)


def test_a_branch_that_cannot_shrink_is_reported_with_its_reason(tmp_path: Path) -> None:
    """b2fc2 is read outside its branch too: b2sd is left to its conventional mask."""
    path = tmp_path / "w.yaml"
    path.write_text(
        WORKLOAD.read_text().replace(
            "  - {name: head,",
            "  - {name: tap, kind: add, inputs: [b2add, b2fc2]}\n  - {name: head,",
        )
    )
    result = simulate_training(load_inputs(RUN, parse_sets([*sets(0.2), f"workload={path}"])))
    report = details(result)
    assert [s["layer"] for s in report["stochastic_depth"]["sites"]] == ["b1sd"]
    assert report["stochastic_depth"]["not_acted_on"] == {
        "b2sd": "b2fc2 of its branch is also read by tap, outside the branch"
    }
    assert report["not_compacted"] == ["b2sd"]


def halved(tmp_path: Path, workload: str) -> tuple[RunInputs, TrainingResult]:
    """The ``workload`` table run at batch 10 with periods up to 2: every stochastic-depth
    layer at rate 0.5 keeps 5 samples, every dropout layer at 0.5 half its neurons."""
    path = tmp_path / "w.yaml"
    path.write_text(workload)
    more = (f"workload={path}", "run.techniques.approximate_dropout={max_period: 2}")
    inputs = load_inputs(RUN, parse_sets([*sets(0.5)[:2], *more]))
    return inputs, simulate_training(inputs)


def test_a_convolution_branch_scales_its_samples_times_positions(tmp_path: Path) -> None:
    """A conv, batchnorm and ReLU branch on a 4x6x6 map (a 3x3 conv, padding 1): rate 0.5
    with periods up to 2 keeps 5 of 10 samples, so M = 5 x 36 positions forward and dX,
    K = 5 x 36 in dW; a second stochastic-depth layer at rate 0 is not acted on."""
    _, result = halved(
        tmp_path,
        "name: conv_depth\n"
        "input: {kind: image, channels: 4, height: 6, width: 6}\n"
        "layers:\n"
        "  - {name: stem, kind: conv2d, out_channels: 4, kernel: 1}\n"
        "  - {name: conv, kind: conv2d, out_channels: 4, kernel: 3, padding: 1}\n"
        "  - {name: bn, kind: batchnorm}\n"
        "  - {name: relu, kind: activation, function: relu}\n"
        "  - {name: sd, kind: stochastic_depth, rate: 0.5}\n"
        "  - {name: join, kind: add, inputs: [stem, sd]}\n"
        "  - {name: idle, kind: stochastic_depth, rate: 0.0, inputs: [join]}\n"
        "  - {name: join2, kind: add, inputs: [join, idle]}\n"
        "  - {name: pool, kind: global_avgpool}\n"
        "  - {name: fc, kind: linear, out_features: 3}\n"
        "  - {name: loss, kind: cross_entropy}\n",
    )
    step = result.steps[KIND].graph
    conv = {n: (o.m, o.n, o.k) for n, o in ops(step, "conv").items() if isinstance(o, GemmOp)}
    assert conv == {"conv.fwd": (180, 4, 36), "conv.dx": (180, 4, 36), "conv.dw": (4, 36, 180)}
    bn = ops(step, "bn")["bn.fwd"]
    assert isinstance(bn, VectorOp) and bn.elements == 5 * 4 * 36
    # the affine parameters are read whole
    assert [a.elements for a in bn.reads] == [5 * 4 * 36, 8]
    report = details(result)["stochastic_depth"]
    assert [s["branch"] for s in report["sites"]] == [["conv", "bn", "relu"]]
    assert report["not_acted_on"] == {"idle": "its rate is 0: no sample to drop"}


def test_a_dropout_site_inside_a_branch_shrinks_both_ways(tmp_path: Path) -> None:
    """A dropout layer between the branch's two linear layers is a row site too: with
    periods up to 2 it keeps 16 of 32 neurons and the branch 5 of 10 samples, so fc1's
    forward GEMM is 5 x 16 x 16 and fc2's dW 16 x 16 x 5."""
    _, result = halved(
        tmp_path,
        "name: mixed\n"
        "input: {kind: vector, features: 16}\n"
        "layers:\n"
        "  - {name: fc0, kind: linear, out_features: 16}\n"
        "  - {name: fc1, kind: linear, out_features: 32}\n"
        "  - {name: relu, kind: activation, function: relu}\n"
        "  - {name: drop, kind: dropout, rate: 0.5}\n"
        "  - {name: fc2, kind: linear, out_features: 16}\n"
        "  - {name: sd, kind: stochastic_depth, rate: 0.5}\n"
        "  - {name: join, kind: add, inputs: [fc0, sd]}\n"
        "  - {name: head, kind: linear, out_features: 4}\n"
        "  - {name: loss, kind: cross_entropy}\n",
    )
    step = result.steps[KIND].graph
    dims = {
        n: (o.m, o.n, o.k)
        for layer in ("fc1", "fc2")
        for n, o in ops(step, layer).items()
        if isinstance(o, GemmOp)
    }
    assert dims == {
        "fc1.fwd": (5, 16, 16),  # kept samples x kept neurons x inputs
        "fc1.dx": (5, 16, 16),
        "fc1.dw": (16, 16, 5),
        "fc2.fwd": (5, 16, 16),  # kept samples x outputs x kept neurons
        "fc2.dx": (5, 16, 16),
        "fc2.dw": (16, 16, 5),
    }
    relu = ops(step, "relu")["relu.fwd"]
    assert isinstance(relu, VectorOp) and relu.elements == 5 * 16
    report = details(result)
    assert [s["dropout"] for s in report["sites"]] == ["drop"]
    assert [s["layer"] for s in report["stochastic_depth"]["sites"]] == ["sd"]


def test_every_branch_of_an_imported_convnext_is_acted_on() -> None:
    """torchvision's ConvNeXt-T, imported: its 17 stochastic-depth layers (rates 0.006
    to 0.1; the first block's, 0, is not exported) each drop samples of their branch
    (depthwise conv, layernorm, two pointwise layers, the layer scale)."""
    onnx = ROOT / "tests" / "fixtures" / "onnx" / "convnext_tiny.onnx.gz"
    sets = [f"workload={onnx}", "batch_size=4", "run.techniques={approximate_dropout: {}}"]
    default = ROOT / "configs" / "runs" / "default.yaml"
    result = simulate_training(load_inputs(default, parse_sets(sets)))
    report = details(result)["stochastic_depth"]
    assert len(report["sites"]) == 17 and report["not_acted_on"] == {}
    first, last = report["sites"][0], report["sites"][-1]
    assert (first["rate"], last["rate"]) == (0.005882, 0.1)
    assert (round(first["kept_mean"], 2), round(last["kept_mean"], 2)) == (3.98, 3.59)
    assert result.training is not None
    assert 1 < result.training.speedup <= result.training.speedup_bound


def test_a_matmul_in_a_branch_runs_for_the_kept_samples_heads(tmp_path: Path) -> None:
    """Attention scores as a two-head matmul of two projections (6 positions, 4 features a
    head): one 6 x 6 x 4 GEMM per sample and head, 20 at batch 10, 10 for the 5 kept."""
    inputs, result = halved(
        tmp_path,
        "name: scores\n"
        "input: {kind: sequence, length: 6, features: 8}\n"
        "layers:\n"
        "  - {name: fc0, kind: linear, out_features: 8}\n"
        "  - {name: q, kind: linear, out_features: 8, inputs: [fc0]}\n"
        "  - {name: k, kind: linear, out_features: 8, inputs: [fc0]}\n"
        "  - {name: scores, kind: matmul, heads: 2, transpose_b: true, inputs: [q, k]}\n"
        "  - {name: soft, kind: softmax}\n"
        "  - {name: out, kind: linear, out_features: 8}\n"
        "  - {name: sd, kind: stochastic_depth, rate: 0.5}\n"
        "  - {name: join, kind: add, inputs: [fc0, sd]}\n"
        "  - {name: head, kind: linear, out_features: 4}\n"
        "  - {name: loss, kind: cross_entropy}\n",
    )
    ctx, plan = drawn(inputs, result)
    columns = sample_columns(plan)
    step_plan = StepPlan(
        plan.shrinks, plan.tiles, plan.kept, plan.fetched, plan.patterns, (1, 1), columns, B
    )
    counts = count_steps(ctx, result.base, step_plan)
    counted_as_simulated(counts, result, "dram_ofmap_write_bytes")  # the scores' too
    assert "scores" in counts.layers
    shapes = {
        name: {n: (o.m, o.n, o.k, o.count) for n, o in ops(graph, "scores").items()}
        for name, graph in (("base", result.base.graph), ("step", result.steps[KIND].graph))
    }
    assert shapes["base"] == {
        "scores.fwd": (6, 6, 4, 20),
        "scores.da": (6, 4, 6, 20),
        "scores.db": (6, 4, 6, 20),
    }
    assert shapes["step"] == {n: (*d[:3], 10) for n, d in shapes["base"].items()}
    q = ops(result.steps[KIND].graph, "q")["q.fwd"]
    assert isinstance(q, GemmOp) and (q.m, q.n, q.k) == (5 * 6, 8, 8)
    assert [s["branch"] for s in details(result)["stochastic_depth"]["sites"]] == [
        ["q", "k", "scores", "soft", "out"]
    ]
