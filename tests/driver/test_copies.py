"""A run without a pipeline places a copy of its step on every processor; more than
``MAX_COPIED_OPS`` ops so placed are refused before placing them, by ``accelsim run``
and by the plan search's filter (``accelsim.driver.copies``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.driver import pipeline
from accelsim.driver.inputs import InputCache
from accelsim.driver.run import rewritten_step, simulate_training
from accelsim.errors import ConfigError
from accelsim.planner import search
from tests.conftest import ROOT

TINY = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt.yaml"
GPT3 = ROOT / "workloads" / "gpt3_175b.yaml"
HARDWARE = ROOT / "configs" / "hardware" / "a100_cluster.yaml"


def plan(tmp_path: Path, workload: Path, chips: int, batch: int, *extra: str) -> list[str]:
    return [
        "plan",
        str(workload),
        "--hardware",
        str(HARDWARE),
        "--chips",
        str(chips),
        "--global-batch",
        str(batch),
        "--jobs",
        "1",
        "--store",
        str(tmp_path / "search"),
        *extra,
    ]


def refusal(ops: int, processors: int, limit: int) -> str:
    return (
        f"hardware.processors: a copy of the step ({ops:,} ops) on every processor places"
        f" {processors * ops:,} ops, more than the {limit:,} a run places (its memory and"
        " time grow with them): simulate it with parallel.pipeline above 1, as data"
        " parallelism without a parallel plan or technique (one replica standing for every"
        f" processor), or on fewer processors (got {processors})"
    )


def test_gpt3_zero3_on_1024_chips_is_refused_before_placing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tensor 2 x data 512 with ZeRO 3 and full recomputation (it fits): 4,722 ops a
    copy, 4,835,328 placed."""
    argv = plan(
        tmp_path,
        GPT3,
        1024,
        1536,
        "--json",
        "--plan",
        "tp=2,dp=512,zero=3,micro_batch=1,recompute=full",
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"accelsim plan: {refusal(4722, 1024, pipeline.MAX_COPIED_OPS)}\n"


def test_the_run_refuses_as_the_search_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the limit at one processor's copy of the tiny GPT's step, the run of a plan
    on 8 chips refuses it as it places it, and the search's filter refuses every plan
    of the search (none has a pipeline) with the same problem."""
    request = search.Request(TINY, HARDWARE, 8, 4, None, tmp_path / "search")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    inputs = cache.load(base, search.overrides_of(sets | {"parallel.tensor": 2}))
    ops = len(rewritten_step(inputs, 1).ops)
    monkeypatch.setattr(pipeline, "MAX_COPIED_OPS", ops)
    with pytest.raises(ConfigError) as exc:
        simulate_training(inputs)
    assert str(exc.value).endswith(refusal(ops, 8, ops))
    assert main(plan(tmp_path, TINY, 8, 4, "--json")) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["search"]["refused_by_checks"] == {"hardware.processors": 40}
    assert out["search"]["fitting"] == 0
