"""The whole torchvision zoo through ``accelsim import`` (``scripts/zoo.py``).

Marked ``zoo``: left out of the default run (about an hour on two cores), skipped
without torch, torchvision and onnxscript; select it with the torch environment's
``python -m pytest -m zoo``. Each model is measured as the script measures it (in a
child process); one that imports has the module's parameters exactly and forward MACs
within 1 % of torchvision's GFLOPS (or rounding to them). One that does not import is an expected failure
if the committed table records it failing, and a failure if the table records it
imported.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("onnxscript")

from tests.conftest import load_script

pytestmark = pytest.mark.zoo

zoo = load_script("zoo")


@pytest.mark.parametrize("name", zoo.models())
def test_model_imports_with_its_parameters_and_macs(name: str) -> None:
    row = zoo.measured(name)
    if row["status"] != "imported":
        recorded = zoo.read_rows().get(name, {}).get("status")
        assert recorded != "imported", f"{name} imported when the table was written: {row}"
        pytest.xfail(f"{row['status']}: {row['error']}")
    assert row["params"] == row["params_torch"]
    assert zoo.agrees(row["forward_macs"], row["gflops_torchvision"])
