"""The comparison with ASTRA-sim's analytical backend (scripts/compare_astra.py): accelsim's
side of committed rows held to closed forms by hand, and the page's table to what the
script writes from the committed CSVs. Needs no ASTRA-sim."""

from __future__ import annotations

import math

import pytest

from tests.conftest import load_script

ca = load_script("compare_astra")

B = 50 * 2**30 / 1e9
"""ASTRA-sim's 50 GB/s: 2^30 bytes a GB, per ns (a cycle at 1 GHz)."""
L = 500


def _row(topology: str, collective: str, algorithm: str, size: int) -> dict[str, str]:
    (found,) = [
        r
        for r in ca.read_records(ca.CSV)
        if (r["topology"], r["collective"], r["algorithm"], r["size_bytes"])
        == (topology, collective, algorithm, str(size))
    ]
    return found


def test_units_are_astra_sims() -> None:
    """50 GB/s of 2^30 bytes is 53.687 bytes per ns; every link 500 ns."""
    assert round(ca.BANDWIDTH, 7) == 53.6870912
    assert ca.LINK == {"bandwidth_bytes_per_cycle": ca.BANDWIDTH, "latency_cycles": 500}


@pytest.mark.parametrize("topology", ["Ring_8", "Switch_8", "FullyConnected_4"])
def test_ring_all_reduce_is_the_closed_form(topology: str) -> None:
    """A ring all-reduce of S on n processors: 2(n - 1) steps of L + ceil(c / B), c =
    ceil(S / n) (a switch's latency once a trip); ASTRA-sim's time kept as committed."""
    size = 1 << 20
    row = ca.compare(_row(topology, "all_reduce", "ring", size))
    n = int(topology.split("_")[-1])
    assert row.accelsim_ns == 2 * (n - 1) * (L + math.ceil(math.ceil(size / n) / B))
    assert row.astra_ns == int(_row(topology, "all_reduce", "ring", size)["time_ns"])


def test_all_gather_takes_astra_sims_shard() -> None:
    """ASTRA-sim's all-gather size is each NPU's shard: accelsim gathers 8 of them, so a
    direct all-gather on 8 fully connected processors sends the shard to each in one
    step."""
    size = 64 << 20
    row = ca.compare(_row("FullyConnected_8", "all_gather", "direct", size))
    assert row.accelsim_algorithm == "direct"
    assert row.accelsim_ns == L + math.ceil(size / B)


def test_multi_dim_reduce_scatter_on_a_torus() -> None:
    """Ring_Ring_Ring_4x4x4 is a [4, 4, 4] torus; its reduce-scatter accelsim's
    multi_dim in ASTRA-sim's 4 chunks: per chunk and dimension 3 steps of two rings,
    one each way on half the chunk (pieces of S_k / 8), S_k a quarter of the one
    before; the first chunk through the three dimensions, the other three at the
    first dimension's rate."""
    size = 1 << 20
    row = ca.compare(_row("Ring_Ring_Ring_4x4x4", "reduce_scatter", "ring/ring/ring", size))
    assert row.accelsim_algorithm == "multi_dim"
    chunk = size // 4
    phases = [3 * (L + math.ceil((chunk // 4**k) / 8 / B)) for k in range(3)]
    assert phases == [3 * (500 + 611), 3 * (500 + 153), 3 * (500 + 39)]
    assert row.accelsim_ns == sum(phases) + 3 * phases[0] == 16908


def test_every_row_maps() -> None:
    """Every committed row has an accelsim network and algorithm; the all-to-alls of
    the multi-dimensional networks run flat (no multi_dim all-to-all)."""
    assert ca.accelsim_algorithm("all_to_all", "ring/ring") == "ring"
    assert ca.accelsim_algorithm("all_reduce", "doubleBinaryTree/doubleBinaryTree") == "multi_dim"
    records = ca.read_records(ca.CSV)
    assert len(records) == 285
    assert {r["topology"] for r in records} == set(ca.TOPOLOGIES)


def test_the_pages_table_is_the_csvs() -> None:
    """docs/model/network.md's ASTRA-sim table is what the script writes from the
    committed CSVs (regenerate with ``python scripts/compare_astra.py``)."""
    page = ca.DOCS.read_text(encoding="utf-8")
    written = page.partition(ca.BEGIN + "\n")[2].partition("\n" + ca.END)[0]
    assert written == ca.block(ca.compared(ca.CSV), ca.compared(ca.AWARE_CSV))
