"""One torchvision model per family beyond the suite's, imported from its graph-only
fixture (``scripts/zoo.py --fixtures tests/fixtures/onnx``: built with random weights at
its default weights' input size, exported in training mode, constants' data stripped).
Needs only ``onnx``.

Every family imports with the module's parameters (``sum(p.numel())``, counted when it
was exported) and its forward MACs exactly, within 1 % of torchvision's GFLOPS
(``meta["_ops"]``, one multiply-add one operation) or rounding to them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx")

from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from tests.conftest import ROOT, load_script

zoo = load_script("zoo")

FIXTURES = ROOT / "tests" / "fixtures" / "onnx"

IMPORTS = {
    "convnext_tiny": (28_589_128, 4_455_531_264, 4.456),
    "efficientnet_b0": (5_288_548, 385_814_752, 0.386),
    "efficientnet_v2_s": (21_458_488, 8_365_617_152, 8.366),
    "googlenet": (6_624_904, 1_498_376_192, 1.498),
    "maxvit_t": (30_919_624, 5_558_046_720, 5.558),
    "mnasnet0_5": (2_218_512, 104_455_968, 0.104),
    "mobilenet_v3_small": (2_542_856, 56_510_400, 0.057),
    "regnet_x_400mf": (5_495_976, 413_812_608, 0.414),
    "regnet_y_400mf": (4_344_144, 401_842_848, 0.402),
    "resnext50_32x4d": (25_028_904, 4_230_479_872, 4.23),
    # 40,476,448 MACs are 1.19 % above 0.04 GFLOPS, a figure rounded to 0.001 GFLOPS:
    # they round to it (see zoo.agrees).
    "shufflenet_v2_x0_5": (1_366_792, 40_476_448, 0.04),
    "squeezenet1_0": (1_248_424, 818_924_576, 0.819),
    "swin_t": (28_288_354, 4_490_566_656, 4.491),
    # 0.32 % below 5.94 GFLOPS: the position bias MLPs' 18,662,400 MACs (225 coordinates
    # x (2 x 512 + 512 x heads) per block), once per step on constants, are not counted.
    "swin_v2_t": (28_351_570, 5_921_028_096, 5.94),
    "vit_b_16": (86_567_656, 17_563_828_224, 17.564),
    "wide_resnet50_2": (68_883_240, 11_398_021_120, 11.398),
}
"""Each family: the module's parameters, the imported forward MACs per sample,
torchvision's GFLOPS."""


def _imported(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Parameters and forward MACs of the fixture's import, the file named as
    ``NAME.onnx.gz`` in its messages."""
    monkeypatch.chdir(FIXTURES)
    workload = import_model(Path(f"{name}.onnx.gz")).workload
    stats = model_stats(workload, infer_shapes(workload, name))
    return stats.params, stats.forward_macs


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_family_imports_with_the_modules_parameters(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    params, macs, gflops = IMPORTS[name]
    assert _imported(name, monkeypatch) == (params, macs)
    assert zoo.agrees(macs, gflops)
