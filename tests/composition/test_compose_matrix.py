"""Techniques compose whatever order the run file lists them in: every pair (and, marked
slow, every triple and every four) of ADA-GP, approximate dropout (row, tile and
feature-map patterns), gradient skipping (filter, row and layer grouping), optimizer
fusion (forward, backward) and activation recomputation (full, selective), in both
orders, on the dropout MLP, the LSTM and ResNet-18, gives the same ``summary.json``
numbers, or the same refusal where a combination is declared impossible; so does
approximate dropout acting on stochastic depth beside each other technique and each
pipeline schedule."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from tests.conftest import ROOT

RUNS = ROOT / "configs" / "runs"
MODELS = {
    "mlp": (RUNS / "mlp_dropout.yaml", ["batch_size=32"]),
    "lstm": (RUNS / "mlp.yaml", ["workload=workloads/lstm_ptb.yaml", "batch_size=4"]),
    "resnet18": (RUNS / "default.yaml", ["batch_size=2"]),
}
GROUPS: dict[str, dict[str, str]] = {
    "adagp": {"adagp": "gradient_prediction: {}"},
    "dropout": {
        "row": "approximate_dropout: {rate: 0.5, pattern: row, steps: 20}",
        "tile": "approximate_dropout: {rate: 0.5, pattern: tile, steps: 20}",
        "maps": "approximate_dropout: {pattern: element, feature_maps: {rate: 0.5}}",
    },
    "skipping": {
        g: f"gradient_skipping: {{grouping: {g}, skip_fraction: 0.5}}"
        for g in ("filter", "row", "layer")
    },
    "fusion": {m: f"optimizer_fusion: {{mode: {m}}}" for m in ("forward", "backward")},
    "recomputation": {p: f"recomputation: {{policy: {p}}}" for p in ("full", "selective")},
}
# What refuses a combination: row and tile patterns need a dropout layer, feature maps a
# droppable convolution (the MLP and the LSTM have none); tile patterns cannot share a
# weight with filter or row skipping, which packs its gradient; selective recomputation
# needs an attention layer (none of the three has one).
REFUSALS = (
    "has no dropout layer",
    "has no convolution whose input maps may be dropped",
    "tile patterns skip folds",
    "has no attention layer",
)


def combinations(size: int) -> list[tuple[str, ...]]:
    """Every choice of one variant from each of ``size`` different techniques."""
    out = []
    for groups in itertools.combinations(GROUPS.values(), size):
        out += list(itertools.product(*(g.values() for g in groups)))
    return out


def outcome(
    model: str, techniques: tuple[str, ...], models: dict[str, tuple[Path, list[str]]] = MODELS
) -> tuple[str, Any]:
    """The run's summaries (the baseline's with the training report, then each step
    kind's), or the refusal, for ``techniques`` listed in that order."""
    run_file, sets = models[model]
    inputs_sets = [*sets, f"run.techniques={{{', '.join(techniques)}}}"]
    try:
        result = simulate_training(load_inputs(Path(run_file), parse_sets(inputs_sets)))
    except ConfigError as exc:
        return "refused", str(exc)
    assert result.training is not None
    assert result.training.speedup <= result.training.speedup_bound
    steps = {kind: step.summary() for kind, step in result.steps.items()}
    return "ran", (result.summary(), steps)


def same_both_ways(model: str, techniques: tuple[str, ...]) -> None:
    first = outcome(model, techniques)
    second = outcome(model, techniques[::-1])
    assert first == second
    if first[0] == "refused":
        assert any(reason in first[1] for reason in REFUSALS), first[1]


@pytest.mark.parametrize("techniques", combinations(2), ids="+".join)
def test_every_pair_composes_in_either_order_on_the_mlp(techniques: tuple[str, ...]) -> None:
    same_both_ways("mlp", techniques)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lstm", "resnet18"])
@pytest.mark.parametrize("techniques", combinations(2), ids="+".join)
def test_every_pair_composes_in_either_order(model: str, techniques: tuple[str, ...]) -> None:
    same_both_ways(model, techniques)


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("techniques", combinations(3) + combinations(4), ids="+".join)
def test_every_triple_and_four_compose_in_either_order(
    model: str, techniques: tuple[str, ...]
) -> None:
    same_both_ways(model, techniques)


def test_the_four_together_on_the_mlp_in_two_orders() -> None:
    """The four techniques in one run, listed forwards and backwards (the slow test above
    runs every combination of their variants)."""
    techniques = (
        GROUPS["adagp"]["adagp"],
        GROUPS["dropout"]["row"],
        GROUPS["skipping"]["row"],
        GROUPS["fusion"]["backward"],
    )
    kind, (summary, steps) = outcome("mlp", techniques)
    assert kind == "ran" and set(steps) == {"bp", "gp"}
    assert summary["training"]["techniques"] == [
        "approximate_dropout",
        "gradient_skipping",
        "gradient_prediction",
        "optimizer_fusion",
    ]
    assert outcome("mlp", techniques[::-1]) == (kind, (summary, steps))


SAMPLED = ["workload=" + str(ROOT / "tests/fixtures/workloads/stochastic_depth_mlp.yaml")]
STOCHASTIC_DEPTH_MODELS = {
    "single": (RUNS / "mlp_dropout.yaml", [*SAMPLED, "batch_size=10"]),
    "piped": (RUNS / "mlp_dropout.yaml", [*SAMPLED, "batch_size=10", "processors=2"]),
}
PIPELINES = {
    "gpipe": "gpipe: {micro_batches: 2}",
    "pipedream": "pipedream: {}",
    "layerpipe": "layerpipe: {}",
}
STOCHASTIC_DEPTH = "approximate_dropout: {max_period: 5, steps: 20}"


@pytest.mark.parametrize(
    "other",
    [v for name, g in GROUPS.items() if name != "dropout" for v in g.values()]
    + list(PIPELINES.values()),
)
def test_stochastic_depth_sites_compose_in_either_order(other: str) -> None:
    """Approximate dropout on the two stochastic-depth branches of a residual MLP beside
    every other technique (a pipeline's micro-batches each keep their share of the
    samples): the same numbers both ways, each branch acted on."""
    model = "piped" if other in PIPELINES.values() else "single"
    pair = (STOCHASTIC_DEPTH, other)
    first = outcome(model, pair, STOCHASTIC_DEPTH_MODELS)
    assert first == outcome(model, pair[::-1], STOCHASTIC_DEPTH_MODELS)
    if other == GROUPS["recomputation"]["selective"]:
        assert first[0] == "refused" and "has no attention layer" in first[1]
        return
    assert first[0] == "ran"
    details = first[1][0]["training"]["sections"]["approximate_dropout"]
    sites = details["stochastic_depth"]["sites"]
    assert [s["layer"] for s in sites] == ["b1sd", "b2sd"]
    assert details["skipped_macs"] > 0
