"""``accelsim import`` of PyTorch modules: needs torch and torchvision (and transformers
for BERT's case, skipped without it).

Marked ``torch``: left out of the default run (minutes), and skipped without them;
select them with the Python of an environment that has them (``python -m pytest -m
torch``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("onnx")

from torch import nn  # noqa: E402

from accelsim.importer.model_import import import_model  # noqa: E402
from accelsim.lowering.infer import infer_shapes  # noqa: E402
from accelsim.lowering.stats import model_stats  # noqa: E402
from tests.conftest import ROOT as REPO  # noqa: E402

pytestmark = pytest.mark.torch

FIXTURES = REPO / "tests" / "fixtures" / "onnx"


def _export_script() -> ModuleType:
    path = REPO / "scripts" / "export_onnx_fixtures.py"
    spec = importlib.util.spec_from_file_location("export_onnx_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _export_script()


@pytest.mark.parametrize("name", sorted(SCRIPT.MODELS))
def test_module_imports_as_its_committed_fixture(name: str) -> None:
    """Each model built from its code (random weights) imports to the same table as the
    committed fixture, and the table's parameters are the module's (BERT's needs
    transformers: skipped without it)."""
    if name == "bert_base":
        pytest.importorskip("transformers")
    module, shape, tokens, _ = SCRIPT.MODELS[name]()
    ours = import_model(module, input_shape=shape, tokens=tokens, name=name).workload
    committed = import_model(FIXTURES / f"{name}.onnx.gz", name=name).workload
    assert ours.layers == committed.layers
    params = model_stats(ours, infer_shapes(ours, name)).params
    if name == "inception_v3":
        assert params == 23_834_568  # torchvision's 27,161,264 less the AuxLogits head
    elif name == "bert_base":
        assert params == sum(p.numel() for p in module.parameters()) == 109_483_778
    else:
        assert params == sum(p.numel() for p in module.parameters())


class _Gate(nn.Module):
    """Squeeze-and-excitation: global pool, two 1x1 convs, a sigmoid gate times the map."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, channels // 4, 1)
        self.expand = nn.Conv2d(channels // 4, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.expand(torch.relu(self.reduce(self.pool(x)))))
        return x * gate


class _Small(nn.Module):
    """A conv, group norm, an SE gate, a transposed conv, an upsample, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(4, 16)
        self.gate = _Gate(16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.resize = nn.Upsample(scale_factor=2, mode="nearest")
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.resize(self.up(self.gate(self.norm(self.conv(x)))))
        return self.fc(torch.flatten(self.pool(x), 1))


def test_a_module_with_the_new_layer_kinds() -> None:
    module = _Small()
    result = import_model(module, input_shape=(3, 8, 8))
    kinds = [(x.name, x.kind) for x in result.workload.layers]
    assert kinds == [
        ("conv", "conv2d"),
        ("norm", "groupnorm"),
        ("gate.pool", "adaptive_avgpool"),
        ("gate.reduce", "conv2d"),
        ("gate.relu", "activation"),
        ("gate.expand", "conv2d"),
        ("gate.sigmoid", "activation"),
        ("gate.mul", "mul"),
        ("up", "conv_transpose2d"),
        ("resize", "upsample"),
        ("pool", "global_avgpool"),
        ("view", "flatten"),
        ("fc", "linear"),
        ("loss", "cross_entropy"),
    ]
    stats = model_stats(result.workload, infer_shapes(result.workload, "small"))
    assert stats.params == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("kind", ["encoder", "lstm"])
def test_a_sequence_first_module_imports_as_its_batch_first_twin(kind: str) -> None:
    """A ``batch_first=False`` module exported at ``(1, 16, 64)`` would run over one
    token: it is exported again as ``(16, 1, 64)`` and imports as the batch-first one."""

    def build(first: bool) -> nn.Module:
        if kind == "encoder":
            return nn.TransformerEncoderLayer(64, 4, 128, batch_first=first)
        return nn.Sequential(nn.Linear(64, 64), _Outputs(nn.LSTM(64, 32, batch_first=first)))

    tables = [import_model(build(first), input_shape=(16, 64)) for first in (True, False)]
    rows = [[x.model_dump(exclude={"name"}) for x in t.workload.layers] for t in tables]
    assert rows[0] == rows[1]
    assert "sequence-first" in tables[1].text and "sequence-first" not in tables[0].text


class _Outputs(nn.Module):
    """A recurrent module's output sequence (not its states)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)[0]


def test_a_torchscript_export_imports_alike(tmp_path: Path) -> None:
    """PyTorch's older exporter (``dynamo=False``, training mode) writes other nodes
    (``Flatten``, ``GlobalAveragePool``, a ``Gemm``) and names: the same table kinds and
    sizes."""
    import torchvision

    module = torchvision.models.resnet18(weights=None).train()
    exported = tmp_path / "resnet18.onnx"
    torch.onnx.export(
        module,
        (torch.randn(1, 3, 224, 224),),
        exported,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        dynamo=False,
        opset_version=20,
    )
    legacy = import_model(exported).workload
    current = import_model(FIXTURES / "resnet18.onnx.gz").workload
    assert [x.kind for x in legacy.layers] == [x.kind for x in current.layers]
    ours, theirs = (model_stats(w, infer_shapes(w, "r")) for w in (legacy, current))
    assert (ours.params, ours.training_macs) == (theirs.params, theirs.training_macs)
