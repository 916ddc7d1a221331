"""``accelsim compile`` and the line ``accelsim run`` prints before the loop compiles
(the compile mocked: no cache is said to be on disk)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelsim import cli, cli_compile
from accelsim.timing import engines, tile_groups

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "runs" / "smoke.yaml"


def test_compile_runs_a_step_of_each_dram_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(cli_compile, "run_smoke", ran.append)
    assert cli.main(["compile"]) == 0
    assert ran == [[], ["dram.channels=2"], ["dram.model=row_buffer"]]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ready in ")[0] for line in lines] == [
        "event loop for DRAM model fifo",
        "event loop for DRAM model interleaved",
        "event loop for DRAM model row_buffer",
    ]


def test_compile_runs_the_smoke_run_on_the_compiled_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kinds: list[str] = []
    real = tile_groups.simulate

    def recorded(*args: object, **kwargs: object) -> object:
        trace = real(*args, **kwargs)  # type: ignore[arg-type]
        kinds.append(trace.engine)
        return trace

    monkeypatch.setattr(tile_groups, "simulate", recorded)
    cli_compile.run_smoke(["dram.channels=2"])
    assert kinds and set(kinds) == {"compiled"}


def test_run_says_before_it_compiles_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(engines, "compiled_cached", lambda: False)
    monkeypatch.delitem(sys.modules, "accelsim.timing.compiled", raising=False)
    monkeypatch.setattr(engines._Memo, "steps", type(engines._Memo.steps)())
    argv = ["run", str(SMOKE), "--out", str(tmp_path), "--set", "timing.engine=compiled"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "accelsim: compiling the event loop once (about 6 s)\n" in err
    # Nothing is said by a run on SimPy.
    argv = ["run", str(SMOKE), "--out", str(tmp_path), "--force"]
    assert cli.main([*argv, "--set", "timing.engine=simpy"]) == 0
    assert "compiling" not in capsys.readouterr().err
