"""The Megatron-LM time check (``scripts/megatron_time.py``, written into
docs/validation-megatron.md by ``scripts/validate_megatron.py``): Korthikanti et al.
(2022)'s iteration times against accelsim's steps on the A100 preset. The steps are
14 % to 25 % short of the measured (only 1T's ``full`` within the check's 15 %), the
ratio of the two settings within 5 % on the pipelined models and not on 22B; each
figure is asserted as it is (nothing tuned), 22B's with its terms and the work each
step does counted by hand."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_script

mt = load_script("megatron_time")
vm = load_script("validate_megatron")
# The 22B model at its Table 3 plan: 48 layers, h = 6,144, s = 2,048 tokens, a global
# batch of b = 4 on t = 8 tensor-parallel GPUs; vocabulary 51,200.
L, H, S, B, T, V = 48, 6_144, 2_048, 4, 8, 51_200
TOKENS = B * S
# Forward MACs a token: a layer's QKV, output projection and MLP (12 h^2) and
# attention's QK^T and AV over the whole sequence (2 s h); the LM head (V h).
FORWARD = TOKENS * (L * (12 * H * H + 2 * S * H) + V * H)
QKT = L * B * S * S * H
"""Attention's QK^T over every head, what selective recomputation recomputes."""


def _plans() -> dict[str, dict[str, str]]:
    return {r["model"]: r for r in mt.reference_rows(mt.MEGATRON / "plans.csv")}


def test_the_network_of_a_plan_is_nodes_of_eight() -> None:
    plans = _plans()
    assert mt.network_sets(plans["22B"]) == [
        "hardware.processors=8",
        "hardware.interconnect.levels=[]",
    ]
    assert mt.network_sets(plans["1T"]) == [
        "hardware.processors=512",
        'hardware.interconnect.levels=[{"topology": "switch", "dims": [64],'
        ' "bandwidth_bytes_per_cycle": 17.73, "latency_cycles": 4000}]',
    ]


@pytest.fixture(scope="module")
def rows() -> list[Any]:
    return mt.timed_rows()


@pytest.mark.slow
def test_the_22b_steps(rows: list[Any]) -> None:
    by = {(r.model, r.mode): r for r in rows}
    full, seqsel = by["22B", "full"], by["22B", "seqsel"]
    # every layer's forward recomputed but the LM head, and the QK^T alone
    assert full.flops_per_processor == 2 * (4 * FORWARD - TOKENS * V * H) / T
    assert seqsel.flops_per_processor == 2 * (3 * FORWARD + QKT) / T
    # 1,506,857,988 and 1,261,715,592 cycles at 1,410 MHz
    assert full.step_s == pytest.approx(1_506_857_988 / 1.41e9, rel=1e-12)
    assert seqsel.step_s == pytest.approx(1_261_715_592 / 1.41e9, rel=1e-12)
    # outside the check: -24.7 % and -18.7 %, the ratio -7.5 % (1.194 against 1.291)
    assert full.step_s / full.measured_s - 1 == pytest.approx(-0.2474, abs=1e-4)
    assert seqsel.step_s / seqsel.measured_s - 1 == pytest.approx(-0.1865, abs=1e-4)
    assert mt.ratios(rows)[0] == ("22B", pytest.approx(1.42 / 1.10), pytest.approx(1.1943, 1e-4))
    # each above its bound: the DRAM traffic at 2,039 GB/s
    assert (full.binding, seqsel.binding) == ("dram", "dram")
    assert full.bound_s == pytest.approx(0.7203, abs=1e-4) and full.bound_s < full.step_s
    assert seqsel.bound_s == pytest.approx(0.5505, abs=1e-4) and seqsel.bound_s < seqsel.step_s


@pytest.mark.slow
def test_the_22b_terms(rows: list[Any]) -> None:
    """The model's GEMMs at 73.1 % of the arrays' peak in both; the recomputed arrays'
    work, the update's, and the collectives' exposed time of the page's terms."""
    full, seqsel = rows[0].terms, rows[1].terms
    peak_macs = 108 * 1_024 * 1.41e9
    for terms in (full, seqsel):
        assert 3 * FORWARD / T / peak_macs / terms.array_s == pytest.approx(0.731, abs=1e-3)
        assert terms.update_vector_s == pytest.approx(0.0408, abs=1e-4)
    assert full.recomputed_array_s == pytest.approx(0.2072, abs=1e-4)
    assert seqsel.recomputed_array_s == pytest.approx(0.0140, abs=1e-4)
    assert [(k, round(w, 3), round(e, 3)) for k, w, e in full.communication_s] == [
        ("all_reduce", 0.266, 0.026)
    ]
    assert [(k, round(w, 3), round(e, 3)) for k, w, e in seqsel.communication_s] == [
        ("all_reduce", 0.001, 0.001),
        ("all_gather", 0.136, 0.070),
        ("reduce_scatter", 0.102, 0.017),
    ]
    rest = [r.step_s - r.terms.array_s - r.terms.recomputed_array_s for r in rows[:2]]
    assert rest == [pytest.approx(0.2343, abs=1e-4), pytest.approx(0.2544, abs=1e-4)]


@pytest.mark.slow
def test_the_pipelined_steps(rows: list[Any]) -> None:
    """175B, 530B and 1T composed from their chunks' passes (no bound or terms for a
    composed step): each under the measured, their ratios within the check's 5 %."""
    errors = {
        (r.model, r.mode): round(100 * (r.step_s / r.measured_s - 1), 1)
        for r in rows
        if r.model != "22B"
    }
    assert errors == {
        ("175B", "full"): -21.4,
        ("175B", "seqsel"): -21.6,
        ("530B", "full"): -21.0,
        ("530B", "seqsel"): -23.5,
        ("1T", "full"): -14.2,
        ("1T", "seqsel"): -16.7,
    }
    assert {m: (round(a, 3), round(c, 3)) for m, a, c in mt.ratios(rows)} == {
        "22B": (1.291, 1.194),
        "175B": (1.319, 1.322),
        "530B": (1.297, 1.339),
        "1T": (1.321, 1.359),
    }
    assert all(r.terms is None and r.bound_s is None for r in rows if r.model != "22B")


@pytest.mark.slow
def test_the_page_is_the_scripts(rows: list[Any]) -> None:
    assert vm.PAGE.read_text("utf-8") == vm.page(vm.measured(), rows)
