"""The configuration reference: every spec field described, rows rendered from the specs."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import accelsim
from accelsim.config.base import Spec
from accelsim.spec_reference import all_rows, config_reference, provenance_reference, unit_of


def _all_specs() -> set[type[Spec]]:
    for module in pkgutil.walk_packages(accelsim.__path__, "accelsim."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: set[type[Spec]] = set()
    pending = [Spec]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.add(sub)
            pending.append(sub)
    return found


def test_every_spec_field_has_a_description() -> None:
    missing = [
        f"{spec.__module__}.{spec.__name__}.{name}"
        for spec in _all_specs()
        for name, info in spec.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert missing == []


def test_the_reference_reaches_every_spec_a_file_can_hold() -> None:
    reached = {row.model for row in all_rows()}
    # LayerBase and PipelineConfig are only bases: their fields reach the reference
    # through the layer kinds and the schedules.
    bases = {spec for spec in _all_specs() if spec.__subclasses__()}
    assert _all_specs() - bases - reached == set()


def test_units_come_from_the_suffix() -> None:
    assert [
        unit_of(name)
        for name in (
            "bandwidth_bytes_per_cycle",
            "dram_read_pj_per_bit",
            "capacity_gib",
            "stash_kib",
            "latency_cycles",
            "clock_mhz",
            "sram_mw_per_kib",
            "pe_mw",
            "rows",
        )
    ] == ["bytes/cycle", "pJ/bit", "GiB", "KiB", "cycles", "MHz", "mW/KiB", "mW", ""]


def test_rows_give_type_unit_default_and_bounds() -> None:
    rows = {row.key: row for row in all_rows()}
    latency = rows["dram.latency_cycles"]
    assert (latency.type, latency.unit, latency.default, latency.bounds) == (
        "integer",
        "cycles",
        "`0`",
        "≥ 0, ≤ 2,147,483,647",
    )
    bandwidth = rows["dram.bandwidth_bytes_per_cycle"]
    assert (bandwidth.unit, bandwidth.default, bandwidth.bounds) == (
        "bytes/cycle",
        "required",
        "≥ 0.001",
    )
    assert rows["array.dataflow"].type == "one of `os`, `ws`, `is`"
    assert rows["timing.group_cycles"].type == "integer or null"
    assert rows["techniques.gpipe.micro_batches"].default == "`4`"
    assert rows["techniques.layerpipe.delay_margin"].type == "integer or `auto`"


def test_markdown_has_a_section_per_file_layer_kind_and_technique() -> None:
    text = config_reference()
    for title in (
        "## Run file",
        "## Hardware file",
        "## Energy table",
        "## Workload file: `kind: conv2d`",
        "## Sweep file",
        "## Technique `layerpipe`",
    ):
        assert f"\n{title}\n" in f"\n{text}", title
    assert "| `dram.sharing` | one of `shared`, `per_processor` |   | `shared` |" in text


def test_provenance_table_lists_every_setting_with_its_source() -> None:
    table = provenance_reference("optimizer_fusion").splitlines()
    assert table == [
        "| setting | default | source | basis |",
        "|---|---|---|---|",
        "| `mode` | `backward` | ours | our choice of the paper's two orders [S]: backward (forward is the other) |",
        "| `weight_tiles` | `auto` | ours | our choice: per layer, the weight tile dX loaded serves the update unless the work waiting for dX and the dX partial sums sharing spills would take longer than sharing saves (estimated; a compiler's per-layer choice); dx and dram force one |",
    ]
    rows = provenance_reference("gradient_prediction").splitlines()[2:]
    assert len(rows) == 24
    assert "| `schedule.policy` | `adaptive` | paper |" in "\n".join(rows)


def test_provenance_of_an_unknown_technique_is_refused() -> None:
    with pytest.raises(KeyError):
        provenance_reference("dropconnect")
