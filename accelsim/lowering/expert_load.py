"""How a ``moe`` layer's router splits a rank's tokens over the experts, and the tokens
each expert then computes.

With ``N`` tokens, ``k`` experts a token and ``E`` experts, the router makes ``T = N x
k`` assignments, an even share of ``T / E`` an expert.  The layer's ``hot_load`` ``h``
(at least 1, at most ``E / k``: a token picks an expert once) is our model of load
imbalance, the max-over-mean load MoE papers report: the hottest expert, the layer's
first, receives ``ceil(h x T / E)`` tokens and the other ``E - 1`` share the rest
evenly (the first ``R mod (E - 1)`` of them one more than the others).  ``h = 1`` is a
balanced router.  Every rank of an expert-parallel group routes its tokens alike, so
the hot expert is hot on every rank (the worst case: a globally popular expert).

What an expert computes is the layer's ``overflow``:

* ``drop`` (GShard, Lepikhin et al. 2021; Switch Transformer, Fedus et al. 2022): every
  expert computes its capacity ``C = ceil(capacity_factor x T / E)`` tokens, its buffer
  padded, and the tokens routed past ``C`` are dropped (they skip the layer through the
  residual); the shapes, and so the time, do not depend on ``h``;
* ``pad`` (DeepSpeed-MoE's ``drop_tokens: false``, whose capacity is the largest
  expert's count, all-reduced to the maximum over the ranks): every expert computes
  the hottest expert's tokens, padded; none dropped;
* ``dropless`` (MegaBlocks, Gale et al. 2023): each expert computes exactly its own
  tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from accelsim.workload import model as wm


def capacity(tokens: int, layer: wm.Moe) -> int:
    """Tokens each expert computes under ``overflow: drop``:
    ``ceil(capacity_factor x tokens x top_k / experts)``, exact (the factor as the
    fraction its float is)."""
    return math.ceil(Fraction(layer.capacity_factor) * tokens * layer.top_k / layer.experts)


def routed_tokens(tokens: int, layer: wm.Moe) -> tuple[int, ...]:
    """The tokens the router sends each expert of ``layer`` from ``tokens`` tokens (the
    module's model: the first expert ``hot_load`` times the even share, rounded up, the
    others the rest evenly); they sum to ``tokens x top_k``."""
    experts, assignments = layer.experts, tokens * layer.top_k
    hot = math.ceil(Fraction(layer.hot_load) * assignments / experts)
    if experts == 1:
        return (assignments,)
    each, extra = divmod(assignments - hot, experts - 1)
    return (hot, *(each + (j < extra) for j in range(experts - 1)))


@dataclass(frozen=True)
class ExpertLoad:
    """The tokens routed to each expert of a layer on one rank and the tokens each
    computes (its GEMMs' rows, padding included)."""

    routed: tuple[int, ...]
    computed: tuple[int, ...]

    @property
    def dropped(self) -> int:
        """Assignments routed past their expert's capacity (``overflow: drop``)."""
        return sum(max(0, r - c) for r, c in zip(self.routed, self.computed, strict=True))

    @property
    def even(self) -> bool:
        """Whether every expert computes as many tokens."""
        return len(set(self.computed)) == 1


def expert_load(tokens: int, layer: wm.Moe) -> ExpertLoad:
    """What each expert of ``layer`` is routed and computes on a rank of ``tokens``
    tokens, by its ``overflow`` (see the module docstring)."""
    routed = routed_tokens(tokens, layer)
    if layer.overflow == "dropless":
        return ExpertLoad(routed, routed)
    each = max(routed) if layer.overflow == "pad" else capacity(tokens, layer)
    return ExpertLoad(routed, (each,) * layer.experts)
