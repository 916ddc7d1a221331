"""The Megatron-LM memory check (scripts/validate_megatron_memory.py): the 22B model's
rows of Korthikanti et al. (2022) against accelsim's breakdown, counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script

# The 22B model at its Table 3 plan: 48 layers, h = 6,144, a = 64 heads, s = 2,048
# tokens, micro-batch b = 4, tensor-parallel t = 8; vocabulary 51,200.
L, H, A, S, B, T, V = 48, 6_144, 64, 2_048, 4, 8, 51_200
# One rank's parameters by hand: attention's Wqkv 3h x h / t, bqkv 3h / t, Wo h x h / t
# and bo h (whole); fc 4h x h / t and its bias 4h / t; proj 4h x h / t and its bias h
# (whole); two norms 2 x 2h; then the table's eighth, the whole position table, ln_f.
LAYER = 3 * H * H // T + 3 * H // T + H * H // T + H + 2 * (4 * H * H // T) + 4 * H // T + H
PARAMETERS = L * (LAYER + 4 * H) + V * H // T + S * H + 2 * H
# A layer's stash without dropout (tests/mapping/test_memory.py) and the stash outside the
# layers: the embeddings' sum and ln_f's output (b s h each), the loss's share of the
# logits (b s V / t) and the tokens, 2 bytes a word.
STASH = L * (S * B * H * (8 + 24 // T) + 2 * A * S * S * B // T)
STASH += 2 * 2 * B * S * H + 2 * B * S * V // T + 2 * B * S
# Korthikanti et al.'s dropout a layer: two 1-byte masks of s b h, attention's mask and
# output 3 a s^2 b / t.
DROPOUT = L * (2 * S * B * H + 3 * A * S * S * B // T)
GIB = 2**30


def test_the_22b_rows(tmp_path: Path) -> None:
    vm = load_script("validate_megatron_memory")
    rows = {(r.model, r.mode): r for r in vm.measured(tmp_path)}
    assert len(rows) == 2  # the 22B model (no pipeline), two modes with memory figures
    none = rows["megatron-22B", "none"]
    assert PARAMETERS == 2_771_853_312
    # 18 bytes a parameter: within 5 % of the reference's 45.5625 GiB, which counts the
    # layers' 12 h^2 weights only (45.5625 GiB = 18 x 48 x 12 h^2 / t bytes)
    assert none.accelsim_params_gib == 18 * PARAMETERS / GIB
    assert 18 * L * 12 * H * H // T / GIB == none.params_gib == 45.5625
    assert none.accelsim_params_gib / none.params_gib == pytest.approx(1.0199, abs=1e-4)
    # the stash alone is 37.5 % under 59.25 GiB: the layer table has no dropout; with
    # Korthikanti et al.'s dropout terms added it is within 5 % (0.5 % over)
    assert none.accelsim_activations_gib == STASH / GIB
    assert none.dropout_gib == DROPOUT / GIB == 22.5
    assert none.accelsim_activations_gib / none.activations_gib == pytest.approx(0.625, abs=1e-3)
    with_dropout = (STASH + DROPOUT) / GIB
    assert with_dropout / none.activations_gib == pytest.approx(1.0049, abs=1e-4)


def test_rows_accelsim_cannot_lower_say_what_they_need(tmp_path: Path) -> None:
    """The 22B model with sequence parallelism keeps the same parameters and optimizer
    state (counted) and needs sequence parallelism for its activations; the models
    with a pipeline are not in this table (scripts/megatron_memory.py counts them)."""
    vm = load_script("validate_megatron_memory")
    rows = {(r.model, r.mode): r for r in vm.measured(tmp_path)}
    seqsel = rows["megatron-22B", "seqsel"]
    assert seqsel.accelsim_params_gib == 18 * PARAMETERS / GIB
    assert (seqsel.accelsim_activations_gib, seqsel.activations_missing) == (
        None,
        "sequence parallelism",
    )
    assert {model for model, _ in rows} == {"megatron-22B"}
    text = vm.table(list(rows.values()))
    for line in (
        "| megatron-22B | seqsel | 45.56 | 46.47 | +2.0 % | 9.56 | needs sequence parallelism |",
        "| megatron-22B | none | 45.56 | 46.47 | +2.0 % | 59.25 | 37.04 | -37.5 % | 59.54 |",
    ):
        assert line in text
