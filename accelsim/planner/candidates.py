"""The candidate plans of a model on ``chips`` processors and a global batch.

A plan sets every field of the run's parallel plan (:class:`ParallelSpec`, read at run
time) and a recomputation policy.  Each field takes its values from :data:`AXES`: a
*degree* (the processors a plan splits over: ``tensor``, ``pipeline``) takes the
divisors of the chips its rule allows, and the data-parallel degree is the chips over
the product of the degrees; a *choice* takes its values from the model and the fields
chosen before it (``micro_batch``: divisors of the per-replica batch; ``expert``:
divisors of the data-parallel degree, whose replicas its groups are).  A
field with no entry takes every value of its type when that is a bool, an enum or a
literal, and its default otherwise.  A new field of the plan is one more entry of
:data:`AXES`.
"""

from __future__ import annotations

import enum
import itertools
import math
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo

RECOMPUTE = ("none", "selective", "full")
"""The recomputation policies a search tries: none (no technique), then the
recomputation technique's ``selective`` and ``full`` (not with sequence parallelism,
whose gathers ``full`` would not repeat: the technique refuses it)."""


@dataclass(frozen=True)
class Model:
    """What of the model and the run the rules of :data:`AXES` read."""

    chips: int
    global_batch: int
    heads: tuple[int, ...]
    """Every attention layer's heads and key/value heads."""
    experts: tuple[int, ...]
    """Every mixture-of-experts layer's experts."""
    blocks: int
    """The repeated blocks of the layer table (a pipeline's most stages)."""


@dataclass(frozen=True)
class Axis:
    """How a field of the parallel plan is searched: ``degree`` fields multiply with
    the data-parallel degree to the chips and take the divisors ``allows`` keeps;
    a choice takes ``choices(model, chosen)`` (None: every value of its type, as a
    field without a rule), ``chosen`` being the degrees, the data-parallel degree
    (:data:`DATA`) and the fields before it, or its default where they do not
    ``need`` it (a pipeline's schedule and micro-batch without a pipeline)."""

    degree: bool
    allows: Callable[[Model, int], bool] = lambda model, value: True
    choices: Callable[[Model, Mapping[str, Any]], Sequence[Any]] | None = None
    needs: Callable[[Mapping[str, Any]], bool] = lambda chosen: True


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, smallest first."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _replica_batch(model: Model, chosen: Mapping[str, Any]) -> int:
    return model.global_batch // int(chosen[DATA])


def _virtual_stages(model: Model, chosen: Mapping[str, Any]) -> list[int]:
    """An interleaved schedule's model chunks a stage: 2 or more, each chunk as many
    blocks (``blocks / (pipeline x virtual_stages)`` whole), as Megatron-LM requires."""
    if not _interleaved(chosen):
        return [1]
    per_stage, rest = divmod(model.blocks, int(chosen["pipeline"]))
    return [v for v in divisors(per_stage) if v > 1] if not rest else []


def _interleaved(chosen: Mapping[str, Any]) -> bool:
    return bool(_plain(chosen.get("schedule")) == "interleaved")


MAX_MICRO_BATCH = 4
"""The most samples of a micro-batch the search tries (our choice, to bound the
search: a larger one holds more activations a micro-batch and leaves fewer
micro-batches to fill the pipeline)."""


def _micro_batches(model: Model, chosen: Mapping[str, Any]) -> list[int]:
    """A micro-batch's samples: at most :data:`MAX_MICRO_BATCH`, dividing a replica's
    batch (into a multiple of the stages under the interleaved schedule)."""
    batch, stages = _replica_batch(model, chosen), int(chosen.get("pipeline", 1))
    step = stages if _interleaved(chosen) else 1
    return [m for m in divisors(batch) if m <= MAX_MICRO_BATCH and (batch // m) % step == 0]


def _zero_stages(model: Model, chosen: Mapping[str, Any]) -> tuple[int, ...]:
    """The ZeRO stages: none with one replica, 3 not with a pipeline."""
    if int(chosen[DATA]) == 1:
        return (0,)
    return (0, 1, 2) if chosen.get("pipeline", 1) > 1 else (0, 1, 2, 3)


def _expert_degrees(model: Model, chosen: Mapping[str, Any]) -> list[int]:
    """The expert-parallel degrees: divisors of the data-parallel degree (an expert
    group is that many replicas) dividing every mixture-of-experts layer's experts (1
    without one)."""
    return [
        e
        for e in divisors(int(chosen[DATA]))
        if e == 1 or (bool(model.experts) and all(x % e == 0 for x in model.experts))
    ]


def _pipelined(chosen: Mapping[str, Any]) -> bool:
    return int(chosen.get("pipeline", 1)) > 1


AXES: dict[str, Axis] = {
    "tensor": Axis(True, lambda m, t: all(h % t == 0 for h in m.heads)),
    "pipeline": Axis(True, lambda m, p: p == 1 or (p <= m.blocks and m.blocks % p == 0)),
    "expert": Axis(False, choices=_expert_degrees),
    "schedule": Axis(False, needs=_pipelined),
    "virtual_stages": Axis(False, choices=_virtual_stages, needs=_pipelined),
    "micro_batch": Axis(False, choices=_micro_batches, needs=_pipelined),
    "sequence_parallel": Axis(
        False,
        choices=lambda m, c: (False, True) if c.get("tensor", 1) > 1 else (False,),
    ),
    "zero": Axis(False, choices=_zero_stages, needs=lambda c: c.get("expert", 1) == 1),
}
"""The search's rule for each field of the parallel plan it knows: a degree's divisors
of the chips it allows (tensor: dividing every attention layer's heads and key/value
heads; pipeline: dividing the blocks, as Megatron-LM requires), or a choice's values,
from the fields chosen before it: the expert degree dividing the data-parallel degree
and every mixture-of-experts layer's experts (1 without one; with a pipeline too, its
expert groups those of each stage); a pipeline's
schedule, virtual stages and micro-batch only with a pipeline (the interleaved
schedule with 2 or more virtual stages, each chunk the same whole number of blocks;
the micro-batch dividing a replica's batch, into a multiple of the stages when
interleaved); sequence parallelism with tensor parallelism; the ZeRO
stages with more than one replica and no experts (:func:`accelsim.driver.zero.zero_problems`
refuses those), stage 3 without a pipeline.  A pipeline plan's step is simulated at pass granularity
(:mod:`accelsim.driver.pipeline_step`), with recomputation from the recomputing
step's passes."""

DATA = "data"
"""The data-parallel degree: the chips over the other degrees (a field of its own when
the plan has one)."""


@dataclass(frozen=True)
class Candidate:
    """One plan: the parallel plan's fields, the data-parallel degree and the
    recomputation policy."""

    parallel: tuple[tuple[str, Any], ...]
    data: int
    recompute: str
    defaults: tuple[tuple[str, Any], ...] = ()
    """The fields' defaults, which the label leaves out."""

    @property
    def label(self) -> str:
        """``dp=2,tensor=4,recompute=none``: the plan as ``--plan`` takes it, the fields
        at their default left out."""
        default = dict(self.defaults)
        fields = "".join(
            f"{k}={_text(v)},"
            for k, v in self.parallel
            if k != DATA and (k not in default or v != default[k])
        )
        return f"dp={self.data},{fields}recompute={self.recompute}"

    def overrides(self) -> dict[str, Any]:
        """The run-file keys that set this plan."""
        keys: dict[str, Any] = {f"parallel.{k}": _plain(v) for k, v in self.parallel}
        policy = {} if self.recompute == "none" else {"recomputation": {"policy": self.recompute}}
        return keys | {"techniques": policy}


def defaults_of(fields: Mapping[str, FieldInfo]) -> tuple[tuple[str, Any], ...]:
    """Each field's default."""
    return tuple((name, info.default) for name, info in fields.items())


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _text(value: Any) -> str:
    value = _plain(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def field_values(info: FieldInfo) -> tuple[Any, ...]:
    """Every value of a field with no rule: a bool's two, an enum's members, a literal's
    values, else only its default."""
    kind = info.annotation
    if kind is bool:
        return (False, True)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return tuple(kind)
    if typing.get_origin(kind) is typing.Literal:
        return typing.get_args(kind)
    return (info.default,)


def enumerate_plans(model: Model, fields: Mapping[str, FieldInfo]) -> Iterator[Candidate]:
    """Every candidate over ``fields`` (the parallel plan's, by name) whose degrees
    multiply with the data-parallel degree to the chips and whose data-parallel degree
    divides the global batch, in a fixed order."""
    degrees = [name for name in fields if name in AXES and AXES[name].degree]
    options = [
        [d for d in divisors(model.chips) if AXES[name].allows(model, d)] for name in degrees
    ]
    for chosen in itertools.product(*options):
        rest, remainder = divmod(model.chips, math.prod(chosen))
        if remainder or model.global_batch % rest:
            continue
        yield from _with_choices(model, fields, dict(zip(degrees, chosen, strict=True)), rest)


def _with_choices(
    model: Model, fields: Mapping[str, FieldInfo], degrees: dict[str, int], data: int
) -> Iterator[Candidate]:
    defaults = defaults_of(fields)
    for chosen in _choices(model, fields, {**degrees, DATA: data}, list(fields)):
        parallel = tuple((name, chosen[name]) for name in fields)
        policies = RECOMPUTE[:2] if chosen.get("sequence_parallel") else RECOMPUTE
        for policy in policies:
            yield Candidate(parallel, data, policy, defaults)


def _choices(
    model: Model, fields: Mapping[str, FieldInfo], chosen: dict[str, Any], rest: list[str]
) -> Iterator[dict[str, Any]]:
    """Every value of the fields ``rest`` (in order, each from the ones before it)."""
    if not rest:
        yield chosen
        return
    name, info = rest[0], fields[rest[0]]
    if name in chosen:
        values: Sequence[Any] = (chosen[name],)
    elif name in AXES and not AXES[name].needs(chosen):
        values = (info.default,)
    elif name in AXES and (choices := AXES[name].choices) is not None:
        values = tuple(choices(model, chosen))
    else:
        values = field_values(info)
    for value in values:
        yield from _choices(model, fields, {**chosen, name: value}, rest[1:])
