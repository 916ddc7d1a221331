"""Bundled configs and workloads: ``accelsim.resources`` and the CLI's fallback to them."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim import cli, cli_parser
from accelsim.resources import bundled_path, data_dir
from tests.conftest import ROOT as REPO


def test_data_dir_holds_configs_and_workloads() -> None:
    assert (data_dir() / "configs" / "hardware" / "default.yaml").is_file()
    assert (data_dir() / "workloads" / "resnet18.yaml").is_file()
    assert cli_parser.DEFAULT_ENERGY.is_file()
    assert cli_parser.DEFAULT_SUITE.is_file()


@pytest.mark.parametrize("top", ["configs", "workloads"])
def test_checkout_tops_are_relative_symlinks_into_the_package(top: str) -> None:
    link = REPO / top
    assert link.is_symlink()
    assert not Path(link.readlink()).is_absolute()
    assert link.resolve() == (REPO / "accelsim" / "data" / top).resolve()


def test_bundled_path_falls_back_only_when_missing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert bundled_path("configs/runs/suite.yaml") == data_dir() / "configs/runs/suite.yaml"
    assert bundled_path("./workloads/mlp.yaml") == data_dir() / "workloads/mlp.yaml"
    # Missing in both places, other prefixes, absolute paths: unchanged.
    for text in ("configs/runs/nope.yaml", "runs/suite.yaml", "/configs/runs/suite.yaml"):
        assert bundled_path(text) == Path(text)
    # A local file shadows the bundled one.
    local = tmp_path / "configs" / "runs" / "suite.yaml"
    local.parent.mkdir(parents=True)
    local.write_text("name: local\n")
    assert bundled_path("configs/runs/suite.yaml") == Path("configs/runs/suite.yaml")


def test_cli_reads_bundled_files_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    files = ["configs/hardware/default.yaml", "configs/runs/mlp.yaml", "workloads/mlp.yaml"]
    assert cli.main(["check", *files]) == cli.EXIT_OK
    assert capsys.readouterr().out.count(": ok") == 3
    assert cli.main(["check", "workloads/nope.yaml"]) == cli.EXIT_INPUT
    assert capsys.readouterr().err.startswith("workloads/nope.yaml: file not found")
