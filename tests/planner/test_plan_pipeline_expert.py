"""``accelsim plan`` of a mixture-of-experts workload with a pipeline and experts: the
4-block decoder of ``tests/fixtures/workloads/tiny_moe_blocks.yaml`` (4 experts, top-2,
h = 16, inner width 24) on 16 chips of the A100 cluster, global batch 16: the search's
candidates with expert groups inside each stage, and a given plan ``tp=1,pp=2,ep=4``
evaluated, its memory counted by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.config.parallel import ParallelSpec
from accelsim.planner.candidates import Model, enumerate_plans
from tests.conftest import ROOT

WORKLOAD = ROOT / "tests" / "fixtures" / "workloads" / "tiny_moe_blocks.yaml"
HARDWARE = ROOT / "configs" / "hardware" / "a100_cluster.yaml"


def test_the_search_offers_experts_inside_a_pipeline() -> None:
    """16 chips, 4 blocks: with 2 stages at tensor 1 (8 replicas) the expert degree is
    1, 2 or 4 (dividing the 4 experts), at tensor 2 (4 replicas) 1, 2 or 4, at tensor 4
    (2 replicas) 1 or 2; with 4 stages at tensor 1 (4 replicas) 1, 2 or 4."""
    model = Model(chips=16, global_batch=16, heads=(4,), experts=(4,), blocks=4)
    fields = {k: ParallelSpec.model_fields[k] for k in ("tensor", "pipeline", "expert")}
    found = {
        (dict(c.parallel)["tensor"], dict(c.parallel)["pipeline"], dict(c.parallel)["expert"])
        for c in enumerate_plans(model, fields)
        if dict(c.parallel)["pipeline"] > 1
    }
    assert {(t, p, e) for t, p, e in found if e > 1} == {
        (1, 2, 2),
        (1, 2, 4),
        (2, 2, 2),
        (2, 2, 4),
        (4, 2, 2),
        (1, 4, 2),
        (1, 4, 4),
        (2, 4, 2),
    }


def test_a_given_pipeline_plan_with_experts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tp = 1, pp = 2, ep = 4, dp = 8: the first stage (the embedding and 2 blocks) holds
    one expert of each of its 2 moe layers: 1,024 + 2 x (1,120 + 1,152) = 5,568
    parameters, 11,136 bytes at bf16; the summary's pipeline section names the expert
    degree, and the plan's step is the pipeline's."""
    argv = [
        "plan",
        str(WORKLOAD),
        "--hardware",
        str(HARDWARE),
        "--chips",
        "16",
        "--global-batch",
        "16",
        "--jobs",
        "1",
        "--store",
        str(tmp_path / "search"),
        "--plan",
        "pp=2,ep=4,micro_batch=1",
        "--json",
    ]
    assert main(argv) == 0
    chosen: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (chosen["pipeline"], chosen["expert"], chosen["data"]) == (2, 4, 8)
    summary_path = next((tmp_path / "search" / "points").glob("*/summary.json"))
    summary = json.loads(summary_path.read_text("utf-8"))
    section = summary["pipeline"]
    assert (section["expert"], section["micro_batches"]) == (4, 2)
    assert chosen["step_cycles"] == section["step_cycles"]
    assert summary["memory"]["weights_bytes"] == 11_136
    assert summary["memory"]["pipeline_stage"] == 0
