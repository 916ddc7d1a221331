"""The candidate plans, counted by hand: every factorisation of 8 chips over the plan's
fields, kept where the tensor degree divides the heads and the data-parallel degree the
global batch, times the three recomputation policies."""

from __future__ import annotations

import enum
from typing import Literal

import pytest
from pydantic.fields import FieldInfo

from accelsim.config.parallel import ParallelSpec
from accelsim.errors import ConfigError
from accelsim.planner.candidates import Model, enumerate_plans, field_values
from accelsim.planner.given import parse_plan

# 4 heads, global batch 4, 2 blocks.
MODEL = Model(chips=8, global_batch=4, heads=(4,), experts=(), blocks=2)


def test_the_plans_of_8_chips() -> None:
    # t in {1, 2, 4, 8} dividing 4 heads: 1, 2, 4; p in {1, 2} dividing 2 blocks; dp =
    # 8 / (t p) dividing batch 4. Without a pipeline: t = 2 (dp 4) and t = 4 (dp 2),
    # each with ZeRO stages 0 to 3 and sequence parallelism off (3 policies) and on
    # (none and selective: 2): 2 x 4 x 5 = 40. With p = 2, 1F1B (interleaved needs 2
    # blocks a stage) and every micro-batch dividing the replica's 4 / dp samples:
    # (t, dp) = (1, 4): 1, ZeRO 0 to 2: 3 x 3 policies; (2, 2): 1, 2, ZeRO 0 to 2,
    # sequence parallelism off and on: 2 x 3 x 5; (4, 1): 1, 2, 4, ZeRO 0 alone
    # (one replica): 3 x 5. 9 + 30 + 15 = 54 pipeline plans: 94 in all.
    plans = list(enumerate_plans(MODEL, ParallelSpec.model_fields))
    assert len(plans) == 94
    assert [c.label for c in plans if dict(c.parallel)["pipeline"] == 1] == [
        f"dp={dp},tensor={t},{sp}{z}recompute={r}"
        for dp, t in ((4, 2), (2, 4))
        for sp in ("", "sequence_parallel=true,")
        for z in ("", "zero=1,", "zero=2,", "zero=3,")
        for r in (("none", "selective", "full") if not sp else ("none", "selective"))
    ]
    # Interleaved on 4 blocks and 2 stages: 2 virtual stages, micro-batches a multiple
    # of the stages.
    blocks = Model(chips=8, global_batch=4, heads=(4,), experts=(), blocks=4)
    interleaved = [
        c
        for c in enumerate_plans(blocks, ParallelSpec.model_fields)
        if str(dict(c.parallel)["schedule"].value) == "interleaved"
    ]
    assert {(dict(c.parallel)["virtual_stages"], c.data) for c in interleaved} == {(2, 2), (2, 1)}
    assert all((4 // c.data // dict(c.parallel)["micro_batch"]) % 2 == 0 for c in interleaved)


def test_new_fields_slot_in() -> None:
    # tp | 4 heads, pp <= 2 blocks, dp = 8 / (tp pp) | batch 4, micro_batch | 4 / dp
    # with a pipeline (its default without one): (tp, pp, dp) = (1, 2, 4): mb 1;
    # (2, 1, 4): -; (2, 2, 2): 1, 2; (4, 1, 2): -; (4, 2, 1): 1, 2, 4; (1, 1, 8) has
    # dp 8 > batch: 8 plans, x 3 policies.
    fields = {
        "tensor": FieldInfo(annotation=int, default=1),
        "pipeline": FieldInfo(annotation=int, default=1),
        "micro_batch": FieldInfo(annotation=int, default=1),
    }
    plans = list(enumerate_plans(MODEL, fields))
    assert len(plans) == 24
    triples = {(dict(c.parallel)["tensor"], dict(c.parallel)["pipeline"], c.data) for c in plans}
    assert triples == {(1, 2, 4), (2, 1, 4), (2, 2, 2), (4, 1, 2), (4, 2, 1)}
    assert plans[0].overrides() == {
        "parallel.tensor": 1,
        "parallel.pipeline": 2,
        "parallel.micro_batch": 1,
        "techniques": {},
    }
    assert plans[0].label == "dp=4,pipeline=2,recompute=none"  # defaults left out
    # A model without experts: the expert degree is 1 alone.
    fields["expert"] = FieldInfo(annotation=int, default=1)
    assert len(list(enumerate_plans(MODEL, fields))) == 24
    # A field of the plan with no rule of its own: a bool takes both values.
    fields["overlap"] = FieldInfo(annotation=bool, default=False)
    assert len(list(enumerate_plans(MODEL, fields))) == 48


class Schedule(str, enum.Enum):
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


def test_values_of_a_field_without_a_rule() -> None:
    assert field_values(FieldInfo(annotation=Schedule, default=Schedule.ONE_F_ONE_B)) == (
        Schedule.ONE_F_ONE_B,
        Schedule.INTERLEAVED,
    )
    literal = FieldInfo(annotation=Literal["a", "b"], default="a")
    assert field_values(literal) == ("a", "b")
    assert field_values(FieldInfo(annotation=float, default=0.5)) == (0.5,)


def test_given_plan() -> None:
    plan = parse_plan("tp=2, recompute=selective", ParallelSpec.model_fields, 8)
    assert (dict(plan.parallel)["tensor"], plan.data, plan.recompute) == (2, 4, "selective")
    assert plan.label == "dp=4,tensor=2,recompute=selective"
    assert parse_plan("dp=2,tensor=4", ParallelSpec.model_fields, 8).label == (
        "dp=2,tensor=4,recompute=none"
    )


def test_a_zero_stage_is_parsed_and_labelled() -> None:
    given = parse_plan("tp=2,zero=2", ParallelSpec.model_fields, 8)
    assert (dict(given.parallel)["zero"], given.data) == (2, 4)
    assert given.label == "dp=4,tensor=2,zero=2,recompute=none"
    assert given.overrides()["parallel.zero"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tp=x", "--plan: tp: expected a positive integer (got 'x')"),
        ("tp=0", "--plan: tp: expected a positive integer (got '0')"),
        (
            "zz=4",
            "--plan: zz: not a field of the parallel plan (expected one of tensor, expert,"
            " pipeline, schedule, virtual_stages, micro_batch, sequence_parallel, zero,"
            " zero_prefetch, tp, pp, ep, sp, dp, recompute) (got '4')",
        ),
        ("tp", "--plan: tp: expected key=value (got 'tp')"),
        ("tp=2,tp=4", "--plan: tp: given twice (got '4')"),
        ("recompute=some", "--plan: recompute: expected one of none, selective, full (got 'some')"),
        ("tp=3", "--plan: the degrees multiply to 3, not the 8 chips (got 'tp=3')"),
        ("tp=2,dp=2", "--plan: the degrees multiply to 4, not the 8 chips (got 'tp=2,dp=2')"),
    ],
)
def test_bad_plans(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_plan(text, ParallelSpec.model_fields, 8)
    assert str(caught.value) == message


def test_the_plans_of_gpt3_on_1024_chips() -> None:
    # GPT-3 175B: 96 heads, 96 blocks; 1,024 chips, global batch 1,536.
    gpt3 = Model(chips=1024, global_batch=1536, heads=(96,), experts=(), blocks=96)
    plans = list(enumerate_plans(gpt3, ParallelSpec.model_fields))
    assert len(plans) == 8033
    # Without a pipeline, t in {2, 4, 8, 16, 32} (dp = 1024 / t divides 1,536), ZeRO 0
    # to 3, 3 policies without sequence parallelism and 2 with it: 5 x 4 x 5 = 100.
    assert sum(dict(c.parallel)["pipeline"] == 1 for c in plans) == 100
    # t 8 x p 16 (dp 8, 192 samples a replica): 1F1B with micro-batches 1, 2, 3, 4;
    # interleaved with 2, 3 or 6 virtual stages (6 blocks a stage), each with the same
    # four (192 / m a multiple of 16): 4 + 3 x 4 = 16; x 5 policies and sequence
    # parallelism, x ZeRO 0 to 2: 240.
    assert (
        sum(dict(c.parallel)["tensor"] == 8 and dict(c.parallel)["pipeline"] == 16 for c in plans)
        == 240
    )
