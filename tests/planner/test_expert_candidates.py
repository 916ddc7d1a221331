"""The expert-parallel degree in the plan search: a choice among the divisors of the
data-parallel degree (an expert group is that many replicas), counted by hand."""

from __future__ import annotations

from pydantic.fields import FieldInfo

from accelsim.config.parallel import ParallelSpec
from accelsim.planner.candidates import Model, enumerate_plans
from accelsim.planner.given import parse_plan


def test_expert_degrees_divide_the_replicas_and_the_experts() -> None:
    """8 chips, 4 heads, 4 experts, 2 blocks.  Without a pipeline: tensor 1 leaves 8
    replicas (expert 1, 2 or 4: dividing the 4 experts), tensor 2 leaves 4 (1, 2, 4),
    tensor 4 leaves 2 (1, 2); with 2 stages, the expert groups each stage's, tensor 1
    leaves 4 replicas (1, 2, 4), tensor 2 leaves 2 (1, 2), tensor 4 one (1): 14 plans,
    each with 3 recomputation policies."""
    model = Model(chips=8, global_batch=8, heads=(4,), experts=(4,), blocks=2)
    fields = {
        "tensor": FieldInfo(annotation=int, default=1),
        "expert": FieldInfo(annotation=int, default=1),
        "pipeline": FieldInfo(annotation=int, default=1),
    }
    plans = list(enumerate_plans(model, fields))
    assert len(plans) == 14 * 3
    found = {
        (c.data, *(dict(c.parallel)[k] for k in ("tensor", "expert", "pipeline"))) for c in plans
    }
    assert found == {
        *((8, 1, e, 1) for e in (1, 2, 4)),
        *((4, 2, e, 1) for e in (1, 2, 4)),
        *((2, 4, e, 1) for e in (1, 2)),
        *((4, 1, e, 2) for e in (1, 2, 4)),
        *((2, 2, e, 2) for e in (1, 2)),
        (1, 4, 1, 2),
    }
    assert "dp=4,tensor=2,expert=4,recompute=none" in {c.label for c in plans}


def test_a_given_expert_degree_leaves_the_replicas_to_the_tensor_degree() -> None:
    given = parse_plan("tp=2,ep=4", ParallelSpec.model_fields, 16)
    assert (given.data, dict(given.parallel)["expert"]) == (8, 4)
    assert given.label == "dp=8,tensor=2,expert=4,recompute=none"
    assert given.overrides()["parallel.expert"] == 4


def test_a_given_plan_with_a_pipeline_and_experts() -> None:
    """tp = 2, pp = 2, ep = 2 on 16 chips: 4 replicas of 2 stages x 2 ranks, each stage's
    expert groups 2 of them."""
    given = parse_plan("tp=2,pp=2,ep=2", ParallelSpec.model_fields, 16)
    assert (given.data, dict(given.parallel)["expert"]) == (4, 2)
    assert given.label == "dp=4,tensor=2,expert=2,pipeline=2,recompute=none"
    assert given.overrides()["parallel.pipeline"] == 2
