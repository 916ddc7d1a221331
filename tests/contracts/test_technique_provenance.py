"""Every technique states where each input of its model comes from: the paper, a
re-implementation, recalled from the paper, our choice, a trace, or the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.report.training import Source
from accelsim.techniques import registry
from accelsim.techniques.provenance import leaves
from tests.conftest import ROOT

RUNS = ROOT / "configs" / "runs"


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_every_setting_has_an_origin(name: str) -> None:
    cls = registry.technique_class(name)
    assert cls is not None
    technique = cls(cls.Config(), "run.yaml")
    table = getattr(technique, "defaults", None)
    defaults = (
        table() if callable(table) else vars(__import__(cls.__module__, fromlist=["x"]))["DEFAULTS"]
    )
    keys = [key for key, _, _ in leaves(technique.config)]
    assert sorted(keys) == sorted(defaults), name


def test_inputs_say_paper_ours_trace_and_run(tmp_path: Path) -> None:
    trace = tmp_path / "errors.csv"
    trace.write_text(
        "epoch,batch,predictor_error\n" + "".join(f"{e},0,0.1\n" for e in range(3)),
        encoding="utf-8",
    )
    run = tmp_path / "run.yaml"
    run.write_text(
        (RUNS / "mlp.yaml")
        .read_text(encoding="utf-8")
        .replace("../hardware/", f"{RUNS.parent}/hardware/")
        .replace("../../workloads/", f"{ROOT}/workloads/")
        .replace("../energy/", f"{RUNS.parent}/energy/")
        + "training: {epochs: 3}\n"
        + "techniques: {gradient_prediction: {schedule: {error_trace: errors.csv,"
        " warmup_epochs: 1}}}\n",
        encoding="utf-8",
    )
    result = simulate_training(load_inputs(run, parse_sets(["batch_size=16"])))
    assert result.training is not None
    section = result.training.sections["gradient_prediction"]
    by_key = {i.key: i for i in section.inputs}
    assert by_key["schedule.error_trace"].source is Source.TRACE
    assert by_key["schedule.error_trace"].basis == "measured, read from errors.csv"
    assert by_key["schedule.warmup_epochs"].source is Source.RUN
    assert by_key["schedule.warmup_epochs"].value == 1
    assert by_key["network.pool"].source is Source.REIMPLEMENTATION
    assert by_key["array.rows"].source is Source.OURS and by_key["array.rows"].value == 64
    assert by_key["schedule.policy"].source is Source.PAPER
    assert section.provenance().startswith("paper: schedule.policy; reimplementation: network.")
    written = result.training.to_dict()["sections"]["gradient_prediction"]["inputs"]
    assert {
        k: v
        for k, v in written[[w["key"] for w in written].index("schedule.warmup_epochs")].items()
        if k != "basis"
    } == {"key": "schedule.warmup_epochs", "value": 1, "source": "run"}
