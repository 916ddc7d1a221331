"""The order techniques compose in: their declared constraints, sorted topologically."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from accelsim.config.base import Spec
from accelsim.errors import ConfigError, Problem
from accelsim.report.training import Section
from accelsim.techniques.base import Technique
from accelsim.techniques.order import composition_order, constraints
from accelsim.techniques.pipelines.config import GPipeConfig, LayerPipeConfig
from accelsim.techniques.provenance import Origin
from accelsim.techniques.registry import REGISTRY, load_techniques, technique_class
from accelsim.techniques.skipping.config import GradientSkippingConfig

PIPELINES = ("gpipe", "layerpipe", "pipedream")
COMPOSED = (
    "approximate_dropout",
    "gradient_skipping",
    "gradient_prediction",
    "recomputation",
    "optimizer_fusion",
)
"""The order the techniques compose in, a pipeline schedule last."""


class Plain(Technique[Spec]):
    """A technique with nothing to check, no settings and an empty section."""

    def validate(self, load: object) -> list[Problem]:
        return []

    def defaults(self) -> dict[str, Origin]:
        return {}

    def training(self, *args: object) -> Section:
        return Section(self.name, {})


def throwaway(
    name: str, after: Mapping[str, str] | None = None, before: Mapping[str, str] | None = None
) -> Technique[Spec]:
    """A technique that only declares its order."""

    class Throwaway(Plain):
        pass

    Throwaway.name = name
    Throwaway.after = after or {}
    Throwaway.before = before or {}
    return Throwaway(Spec(), "run.yaml")


def names(techniques: list[Any]) -> list[str]:
    return [t.name for t in techniques]


def test_two_techniques_after_each_other_are_refused_with_both_named() -> None:
    a = throwaway("a", after={"b": "a reads what b wrote"})
    b = throwaway("b", after={"a": "b reads what a wrote"})
    with pytest.raises(ConfigError) as caught:
        composition_order([a, b], "run.yaml")
    assert str(caught.value) == (
        "run.yaml: techniques: their declared order is a cycle: a before b (b reads what a"
        " wrote), b before a (a reads what b wrote) (got ['a', 'b'])"
    )


def test_a_longer_cycle_is_named_from_its_first_technique_and_others_left_out() -> None:
    techniques = [
        throwaway("c", before={"a": "c first"}),
        throwaway("a", before={"b": "a first"}),
        throwaway("b", before={"c": "b first"}),
        throwaway("aardvark", after={"a": "aardvark last"}),
    ]
    with pytest.raises(ConfigError) as caught:
        composition_order(techniques, "run.yaml")
    assert str(caught.value) == (
        "run.yaml: techniques: their declared order is a cycle: a before b (a first),"
        " b before c (b first), c before a (c first) (got ['a', 'b', 'c'])"
    )


def test_after_and_before_both_order_and_the_name_breaks_ties() -> None:
    techniques = [
        throwaway("zeta"),
        throwaway("mid", before={"alpha": "mid first"}),
        throwaway("alpha"),
        throwaway("last", after={"zeta": "zeta first"}),
    ]
    for given in itertools.permutations(techniques):
        assert names(composition_order(list(given), "run.yaml")) == ["mid", "alpha", "zeta", "last"]


def test_a_declaration_naming_an_absent_technique_is_ignored() -> None:
    b = throwaway("b", after={"z": "never in the run"}, before={"a": "b first"})
    a = throwaway("a")
    assert constraints([a, b]) == {("b", "a"): "b first"}
    assert names(composition_order([a, b], "run.yaml")) == ["b", "a"]


def registered(name: str) -> Technique[Any]:
    cls = technique_class(name)
    assert cls is not None
    return cls(cls.Config(), "run.yaml")


@pytest.mark.parametrize("pipeline", [None, *PIPELINES])
def test_every_combination_composes_in_one_order_whatever_the_file_lists(
    pipeline: str | None,
) -> None:
    """Every set of the registered techniques (at most one pipeline schedule) in every
    order it could be listed: approximate dropout, gradient skipping, ADA-GP,
    recomputation, optimizer fusion, then the schedule; every pair of them ordered by a
    declaration."""
    assert set(REGISTRY) == {*COMPOSED, *PIPELINES}
    for size in range(len(COMPOSED) + 1):
        for subset in itertools.combinations(COMPOSED, size):
            chosen = [*subset, *([pipeline] if pipeline else [])]
            if not chosen:
                continue
            pairs = constraints([registered(n) for n in chosen])
            assert set(pairs) == set(itertools.combinations(chosen, 2))
            for listed in itertools.permutations(chosen):
                order = composition_order([registered(n) for n in listed], "run.yaml")
                assert names(order) == chosen


def test_loading_a_run_file_keeps_the_composition_order() -> None:
    sections: dict[str, dict[str, Any] | None] = {
        "pipedream": {},
        "optimizer_fusion": None,
        "approximate_dropout": {},
    }
    loaded = load_techniques(sections, "run.yaml")
    assert names(loaded) == ["approximate_dropout", "optimizer_fusion", "pipedream"]


def test_a_technique_s_config_is_the_spec_it_is_generic_in() -> None:
    assert type(registered("gradient_skipping")).Config is GradientSkippingConfig
    assert type(registered("gpipe")).Config is GPipeConfig  # through Schedule[GPipeConfig]
    assert type(registered("layerpipe")).Config is LayerPipeConfig
    assert type(throwaway("a")).Config is Spec
