"""``timing.engine: auto`` chooses by cost: the break-even of the compiled engine from
injected costs (no timing here), and the line said before the loop compiles."""

from __future__ import annotations

import sys

import pytest

from accelsim.config.run import EngineKind
from accelsim.timing import engines
from accelsim.timing.costs import UNIT_ARRAY
from accelsim.timing.engine_costs import REFERENCE, EngineCosts
from tests.timing.test_compiled import costs

# Binary fractions, so that the break-evens are exact: 8 s / 0.5 s an event = 16
# events with the cache; (8 + 40) s / 0.5 s = 96 without.
INJECTED = EngineCosts(simpy_s_per_event=0.5, compiled_s_per_event=0.0, load_s=8.0, compile_s=40.0)


def test_break_even_is_the_fixed_cost_over_the_saving_per_event() -> None:
    assert INJECTED.break_even_events(cached=True) == 16
    assert INJECTED.break_even_events(cached=False) == 96
    assert not INJECTED.compiled_pays(15, cached=True)
    assert INJECTED.compiled_pays(16, cached=True)
    assert not INJECTED.compiled_pays(95, cached=False)
    assert INJECTED.compiled_pays(96, cached=False)
    # A compiled event that costs something raises the break-even: 8 / (0.5 - 0.25).
    dearer = EngineCosts(0.5, 0.25, 8.0, 40.0)
    assert dearer.break_even_events(cached=True) == 32
    # The reference machine: 0.4 s / (1.5 us - 20 ns) and (0.4 + 6) s / the same.
    assert REFERENCE.break_even_events(cached=True) == 270_271
    assert REFERENCE.break_even_events(cached=False) == 4_324_325


def test_auto_chooses_by_the_injected_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    c = costs([UNIT_ARRAY], chunks=[4])
    assert engines.estimated_events(c) == 17
    monkeypatch.setattr(engines._Budget, "costs", INJECTED)
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(engines._Budget, "spent_events", 0)
    monkeypatch.setattr(engines._Budget, "compiled", True)  # cached: 17 >= 16 pays at once
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED
    monkeypatch.setattr(engines._Budget, "compiled", False)  # not cached: 17 < 96
    assert engines.choose(EngineKind.AUTO, c) is EngineKind.SIMPY
    assert engines._Budget.spent_events == 17
    # 17 spent + 17 + 4 x 17 to follow = 102 >= 96: the first step that pays compiles.
    with engines.followed_by(4.0):
        assert engines.choose(EngineKind.AUTO, c) is EngineKind.COMPILED
    assert engines._Budget.compiled is True


def test_a_compile_is_announced_to_the_listener_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines._Budget, "costs", INJECTED)
    monkeypatch.delitem(sys.modules, "accelsim.timing.compiled", raising=False)
    told: list[str] = []
    monkeypatch.setattr(engines, "compiled_cached", lambda: False)
    engines._announce_compile()  # nobody listens
    with engines.notices(told.append):
        engines._announce_compile()
    assert told == ["compiling the event loop once (about 40 s)"]
    monkeypatch.setattr(engines, "compiled_cached", lambda: True)
    with engines.notices(told.append):
        engines._announce_compile()  # cached: loading is not announced
    assert len(told) == 1
    assert engines._Notices.tell is None
