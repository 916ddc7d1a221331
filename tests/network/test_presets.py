"""The presets' networks: the TPU pods' tori and the GPU cluster's two levels, as their
files' sources give them."""

from __future__ import annotations

import pytest

from accelsim.config.interconnect import Topology
from accelsim.config.loader import load_hardware, parse_sets
from accelsim.network.collectives import Algorithm, Collective
from accelsim.network.cost import plan, schedule_cycles
from accelsim.network.topology import Network
from tests.conftest import ROOT

HARDWARE = ROOT / "configs" / "hardware"


@pytest.mark.parametrize(
    ("preset", "processors", "dims", "bandwidth"),
    [
        # 50 GB/s each way per link at 1.05 GHz.
        ("tpu_v4.yaml", 64, (4, 4, 4), 47.6),
        # 800 GB/s both ways over 4 ports at 1.751 GHz.
        ("tpu_v6e.yaml", 256, (16, 16), 57.1),
    ],
)
def test_a_tpu_chip_sits_in_its_pods_torus(
    preset: str, processors: int, dims: tuple[int, ...], bandwidth: float
) -> None:
    chip = load_hardware(HARDWARE / preset)
    assert chip.processors == 1
    assert (chip.interconnect.topology, chip.interconnect.dims) == (Topology.TORUS, dims)
    pod = load_hardware(HARDWARE / preset, parse_sets([f"processors={processors}"]))
    net = Network.of(pod.interconnect, processors)
    assert net.processors == processors
    # Each chip has a link each way to each neighbour: 2 per dimension.
    assert len(net.links()) == processors * 2 * len(dims)
    assert {d.bandwidth_bytes_per_cycle for d in net.dimensions} == {bandwidth}


def test_the_gpu_cluster_is_two_nodes_of_eight_on_a_fabric() -> None:
    hw = load_hardware(HARDWARE / "gpu_cluster.yaml")
    net = Network.of(hw.interconnect, hw.processors)
    assert [(d.topology, d.size) for d in net.dimensions] == [
        (Topology.SWITCH, 8),
        (Topology.SWITCH, 2),
    ]
    # 18 NVLink links of 13.66 B/cycle to the node's switch; one 27.32 B/cycle NIC port.
    nvlink, fabric = net.dimensions
    assert nvlink.bandwidth_bytes_per_cycle == pytest.approx(18 * 13.66)
    assert fabric.bandwidth_bytes_per_cycle == 27.32
    # An all-reduce of 16 MiB over all 16 GPUs, one phase per level: in the node each
    # GPU sends 7 pieces of 2 MiB through its port, then 1 MiB goes to the other node.
    size = 16 * 2**20
    schedule = plan(net, Collective.ALL_REDUCE, tuple(range(16)), size, Algorithm.MULTI_DIM)
    in_node = 1000 + -(-7 * 2**21 // (18 * 13.66))
    across = 4000 + -(-(2**20) // 27.32)
    assert schedule_cycles(net, schedule) == 2 * (in_node + across)


def test_the_a100_cluster_is_two_dgx_a100_nodes() -> None:
    hw = load_hardware(HARDWARE / "a100_cluster.yaml")
    # 108 SMs of one 32x32 array at 1.41 GHz: the datasheet's 312 dense bf16 TFLOP/s.
    macs_per_cycle = hw.array.count * hw.array.rows * hw.array.cols
    assert 2 * macs_per_cycle * hw.clock_mhz * 1e6 == pytest.approx(312e12, rel=1e-3)
    # 2,039 GB/s of HBM2e.
    assert hw.dram.bandwidth_bytes_per_cycle * hw.clock_mhz * 1e6 == pytest.approx(2039e9, 1e-4)
    net = Network.of(hw.interconnect, hw.processors)
    assert [(d.topology, d.size) for d in net.dimensions] == [
        (Topology.SWITCH, 8),
        (Topology.SWITCH, 2),
    ]
    nvlink, fabric = net.dimensions
    # 12 NVLink 3 links of 25 GB/s each way (300 GB/s); one 200 Gb/s HDR port per GPU.
    assert nvlink.bandwidth_bytes_per_cycle * hw.clock_mhz * 1e6 == pytest.approx(300e9, 1e-3)
    assert fabric.bandwidth_bytes_per_cycle * hw.clock_mhz * 1e6 == pytest.approx(25e9, 1e-3)
