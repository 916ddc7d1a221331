"""The Megatron-LM memory check (``scripts/validate_megatron.py``): Korthikanti et al.
(2022)'s per-GPU memory of the 22B, 175B, 530B and 1T models against accelsim's
breakdown, each figure counted by hand or set beside the measured with its reason, and
the committed page the script's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_script

vm = load_script("validate_megatron")
GIB = 2**30
# The 22B model at its Table 3 plan: 48 layers, h = 6,144, a = 64 heads, s = 2,048
# tokens, micro-batch b = 4, tensor-parallel t = 8; vocabulary 51,200.
L, H, A, S, B, T, V = 48, 6_144, 64, 2_048, 4, 8, 51_200
SBH, AS2B = S * B * H, A * S * S * B
# One rank's parameters by hand: attention's Wqkv 3h x h / t, bqkv 3h / t, Wo h x h / t
# and bo h (whole); fc 4h x h / t and its bias 4h / t; proj 4h x h / t and its bias h
# (whole); two norms 2 x 2h; then the table's eighth, the whole position table, ln_f.
LAYER = 3 * H * H // T + 3 * H // T + H * H // T + H + 2 * (4 * H * H // T) + 4 * H // T + H
PARAMETERS = L * (LAYER + 4 * H) + V * H // T + S * H + 2 * H
SHAPES = {"175B": (12_288, 96), "530B": (20_480, 128), "1T": (25_600, 160)}


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], Any]:
    return {(r.model, r.mode): r for r in vm.measured()}


def test_the_22b_rows_by_hand(rows: dict[tuple[str, str], Any]) -> None:
    none, seqsel = rows["22B", "none"], rows["22B", "seqsel"]
    assert PARAMETERS == 2_771_853_312
    # 18 bytes a parameter, 2.0 % over the reference's 45.5625 GiB, which counts the
    # layers' 12 h^2 weights only; neither sequence parallelism nor recomputation moves it
    assert none.counted_params_gib == seqsel.counted_params_gib == 18 * PARAMETERS / GIB
    assert 18 * L * 12 * H * H // T / GIB == none.params_gib == 45.5625
    assert none.counted_params_gib / none.params_gib == pytest.approx(1.0199, abs=1e-4)
    # Korthikanti et al.'s layers (59.25 GiB exactly), and outside them: the embedding
    # dropout's mask (s b h bytes), ln_f's input and output (2 s b h each), the loss's
    # share of the logits (2 b s V / t) and the tokens (2 b s)
    layers = L * (SBH * (10 + 24 // T) + 5 * AS2B // T)
    assert layers / GIB == none.activations_gib == 59.25
    outside = SBH + 2 * 2 * SBH + 2 * B * S * V // T + 2 * B * S
    assert none.counted_activations_gib == (layers + outside) / GIB
    assert none.counted_activations_gib / none.activations_gib == pytest.approx(1.0056, abs=1e-4)
    # with sequence parallelism and selective recomputation: 34 s b h / t a layer (9.5625
    # GiB exactly); outside, the mask and ln_f's a t-th, the loss's and the tokens whole
    layers = L * 34 * SBH // T
    assert layers / GIB == seqsel.activations_gib == 9.5625
    outside = (SBH + 2 * 2 * SBH) // T + 2 * B * S * V // T + 2 * B * S
    assert seqsel.counted_activations_gib == (layers + outside) / GIB
    assert seqsel.counted_activations_gib / seqsel.activations_gib == pytest.approx(
        1.0133, abs=1e-4
    )


@pytest.mark.parametrize("model", ["175B", "530B", "1T"])
def test_the_pipelined_models(rows: dict[tuple[str, str], Any], model: str) -> None:
    """A stage of blocks holds the measured parameters and optimizer state (to 0.05 %:
    the biases and norms a count of 12 h^2 a layer leaves out); the first stage holds the
    token table's share (V h / t) and the whole position table (s h) besides, at 18
    bytes each; its stash is the measured within 2.5 % (the stash outside the layers)."""
    none, seqsel = rows[model, "none"], rows[model, "seqsel"]
    h, _ = SHAPES[model]
    assert none.block_stage_params_gib == pytest.approx(none.params_gib, rel=0.0005)
    extra = (none.counted_params_gib - none.block_stage_params_gib) * GIB
    assert extra == pytest.approx(18 * (V // T * h + S * h), abs=1)
    over = {"175B": 0.039, "530B": 0.092, "1T": 0.110}[model]
    assert none.counted_params_gib / none.params_gib - 1 == pytest.approx(over, abs=5e-4)
    ratio = {"175B": 1.0056, "530B": 1.0240, "1T": 1.0238}[model]
    assert none.counted_activations_gib / none.activations_gib == pytest.approx(ratio, abs=1e-4)
    assert seqsel.counted_params_gib == none.counted_params_gib
    # with sequence parallelism and selective recomputation (the recomputing step's
    # stash by stage): within 1.5 %, the stash outside the layers again
    ratio = {"175B": 1.0038, "530B": 1.0148, "1T": 1.0147}[model]
    assert seqsel.counted_activations_gib / seqsel.activations_gib == pytest.approx(ratio, abs=1e-4)


def test_the_175b_seqsel_row_by_hand(rows: dict[tuple[str, str], Any]) -> None:
    """175B's first stage (t 8, p 8, v 3: chunks of 4 layers) holds 31 chunks' forwards
    at its peak (Megatron-LM's interleaved warm-up of 2 (p - 1) + (v - 1) p = 30, and
    one), 124 layers of 34 s b h / t bytes: the measured 12.35 GiB; besides, each of its
    first chunk's 16 micro-batches in flight keeps the embedding dropout's mask (s b h /
    t bytes) and the tokens (2 b s)."""
    seqsel = rows["175B", "seqsel"]
    h = SHAPES["175B"][0]
    sbh = S * 1 * h
    layers = (2 * 7 + 2 * 8 + 1) * 4 * 34 * sbh // T
    assert layers / GIB == pytest.approx(seqsel.activations_gib, abs=0.005)
    assert seqsel.counted_activations_gib * GIB == layers + 16 * (sbh // T + 2 * S)


def test_the_page_is_the_scripts(rows: dict[tuple[str, str], Any]) -> None:
    assert vm.PAGE.read_text("utf-8").startswith(vm.memory_page(list(rows.values())))
