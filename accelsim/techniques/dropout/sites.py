"""Where approximate random dropout acts: dropout sites, the GEMM dimensions they
shrink and the weight tiles they drop.

A *site* is a dropout layer whose dropped features can be compacted away: every
layer reading it is a ``linear`` or ``lstm`` layer (a GEMM that can skip the
reduction rows of dropped features).  Its *producer* is the ``linear`` layer
whose outputs reach it through element-wise activations only, and whose output
columns can be skipped too; an LSTM or embedding producer needs every output
(recurrence, the gather), so only its consumers shrink.  A dropped neuron
removes its share of one GEMM dimension (``n`` neurons, of which ``kept`` stay):

=======  ====================================  ======================================
GEMM     producer (linear, ``n`` outputs)      consumer (``n`` inputs; LSTM: x part)
=======  ====================================  ======================================
forward  columns ``N``: ``n -> kept``           reduction ``K``: ``n -> kept``
dX       reduction ``K``: ``n -> kept``         columns ``N``: ``n -> kept``
dW       rows ``M``: ``n -> kept``              columns ``N``: ``n -> kept``
=======  ====================================  ======================================

Sensitivity-aware feature-map dropping removes input channels of a
convolution: forward reduction ``C.R.S``, dX columns ``C``, dW columns ``C.R.S``.

Tile patterns drop tiles of the consumers' weights instead (DropConnect on
blocks): in the forward GEMM the weight's input dimension is ``k`` and its output
``n``; in dX they are ``n`` and ``k``; in dW ``n`` and ``m``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.config.base import Dataflow
from accelsim.graph.ops import GemmOp, Phase
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.dropout.folds import NONE, W_IN, W_OUT
from accelsim.workload import model as wm

GEMM_LAYERS = (wm.Linear, wm.Lstm)
TRANSPARENT = (wm.Activation,)


@dataclass(frozen=True)
class Site:
    """A dropout layer whose dropped features skip GEMM work."""

    dropout: str
    units: int
    rate: float
    producer: str | None
    chain: tuple[str, ...]  # element-wise layers from the producer to the dropout (included)
    consumers: tuple[str, ...]


@dataclass(frozen=True)
class Shrink:
    """A GEMM dimension that loses ``unit`` for each of ``part`` units a site drops."""

    dim: str  # "m", "n", "k" or "count" (the GEMMs of a batched op)
    site: int
    part: int
    unit: int = 1
    contiguous: bool = False  # the dimension is contiguous in the weight B (in DRAM)
    whole: bool = False  # the whole dimension is the site's (samples times positions)

    def scaled(self, dim: np.ndarray, kept: np.ndarray) -> np.ndarray:
        """``dim`` with the site's share scaled from ``part`` to ``kept`` units.

        The site's share is the first ``part * unit`` of the dimension (an LSTM's
        ``[x, h]`` puts its recurrent inputs after it), or all of it when another
        technique has already compacted the dimension.  The share scales
        proportionally, rounded up (a share that is not empty keeps at least one
        element): an uncompacted share becomes exactly ``kept * unit``, and a
        compacted one keeps the same proportion of what is left, so compacting
        twice gives the same size in either order, to rounding.  With ``whole``, the
        share is the whole dimension (``part`` samples times positions, or a replica's
        or micro-batch's part of them), which keeps ``kept / part`` of it.  Element by
        element over arrays (one entry per step).
        """
        share = dim if self.whole else np.minimum(dim, self.part * self.unit)
        scaled: np.ndarray = dim - share - (-share * kept // self.part)
        return scaled


def find_sites(infos: Sequence[LayerInfo], rate: float | None) -> tuple[list[Site], list[str]]:
    """Compactable dropout sites, and the dropout layers that are not (a consumer
    that is not a GEMM layer, such as a residual add).  Stochastic-depth layers drop
    samples, not features: :mod:`accelsim.techniques.dropout.samples` finds theirs."""
    by_name = {i.layer.name: i for i in infos}
    readers: dict[str, list[str]] = {}
    for info in infos:
        for source in info.inputs:
            readers.setdefault(source, []).append(info.layer.name)
    sites, skipped = [], []
    for info in infos:
        layer = info.layer
        if not isinstance(layer, wm.Dropout):
            continue
        consumers = readers.get(layer.name, [])
        if not consumers or not all(isinstance(by_name[c].layer, GEMM_LAYERS) for c in consumers):
            skipped.append(layer.name)
            continue
        chain = [layer.name]
        source = info.inputs[0]
        while (
            source in by_name
            and isinstance(by_name[source].layer, TRANSPARENT)
            and len(readers.get(source, [])) == 1
        ):
            chain.insert(0, source)
            source = by_name[source].inputs[0]
        producer = (
            source
            if source in by_name
            and isinstance(by_name[source].layer, wm.Linear)
            and len(readers.get(source, [])) == 1
            else None
        )
        sites.append(
            Site(
                layer.name,
                info.out_shape.dims[-1],
                layer.rate if rate is None else rate,
                producer,
                tuple(chain),
                tuple(consumers),
            )
        )
    return sites, skipped


def lstm_wants_x(info: LayerInfo, gemms: Sequence[GemmOp]) -> bool:
    """Whether an LSTM's dX GEMMs include its input part (one dX GEMM per time step)."""
    steps = info.in_shapes[0].dims[0]
    return sum(op.phase is Phase.BWD_INPUT for op in gemms) == steps


def row_shrinks(
    sites: Sequence[Site], infos: Mapping[str, LayerInfo], gemms: Sequence[GemmOp]
) -> dict[tuple[str, Phase], list[Shrink]]:
    """The dimensions each site shrinks, by (layer, phase) of the GEMMs."""
    out: dict[tuple[str, Phase], list[Shrink]] = {}

    def add(layer: str, phase: Phase, shrink: Shrink) -> None:
        out.setdefault((layer, phase), []).append(shrink)

    for i, site in enumerate(sites):
        n = site.units
        if site.producer is not None:
            add(site.producer, Phase.FWD, Shrink("n", i, n))
            add(site.producer, Phase.BWD_INPUT, Shrink("k", i, n))
            add(site.producer, Phase.BWD_WEIGHT, Shrink("m", i, n))
        for c in site.consumers:
            # a reader's weight is kept as [outputs][inputs]: the inputs are contiguous
            add(c, Phase.FWD, Shrink("k", i, n, contiguous=True))
            add(c, Phase.BWD_WEIGHT, Shrink("n", i, n))
            mine = [op for op in gemms if op.layer == c]
            if not isinstance(infos[c].layer, wm.Lstm) or lstm_wants_x(infos[c], mine):
                add(c, Phase.BWD_INPUT, Shrink("n", i, n, contiguous=True))
    return out


def feature_map_shrinks(
    convs: Sequence[LayerInfo], first_site: int
) -> dict[tuple[str, Phase], list[Shrink]]:
    """Input-channel dropping of each conv in ``convs`` (site ``first_site + j``)."""
    out: dict[tuple[str, Phase], list[Shrink]] = {}
    for j, info in enumerate(convs):
        layer = info.layer
        assert isinstance(layer, wm.Conv2d)
        c = info.in_shapes[0].dims[0]
        taps = wm.pair(layer.kernel)[0] * wm.pair(layer.kernel)[1]
        site = first_site + j
        out[(layer.name, Phase.FWD)] = [Shrink("k", site, c, taps)]
        out[(layer.name, Phase.BWD_INPUT)] = [Shrink("n", site, c)]
        out[(layer.name, Phase.BWD_WEIGHT)] = [Shrink("n", site, c, taps)]
    return out


def droppable_convs(infos: Sequence[LayerInfo]) -> list[LayerInfo]:
    """Convolutions whose input feature maps may be dropped: ungrouped, fed by
    another layer (not a model input, such as the image), with at least two input
    channels."""
    made = {i.layer.name for i in infos}
    return [
        i
        for i in infos
        if isinstance(i.layer, wm.Conv2d)
        and i.layer.groups == 1
        and i.inputs[0] in made
        and i.in_shapes[0].dims[0] >= 2
    ]


@dataclass(frozen=True)
class TileWeight:
    """A consumer's weight under a tile pattern: its input and output dimensions and
    the input rows that may be dropped (an LSTM's recurrent rows may not)."""

    layer: str
    site: int
    w_in: int
    w_out: int
    part: int


def tile_weights(sites: Sequence[Site], infos: Mapping[str, LayerInfo]) -> dict[str, TileWeight]:
    """The tile-dropped weight of every consumer, by layer (one site per consumer)."""
    out = {}
    for i, site in enumerate(sites):
        for c in site.consumers:
            layer = infos[c].layer
            if isinstance(layer, wm.Lstm):
                h = layer.hidden_size
                out[c] = TileWeight(c, i, site.units + h, 4 * h, site.units)
            else:
                assert isinstance(layer, wm.Linear)
                out[c] = TileWeight(c, i, site.units, layer.out_features, site.units)
    return out


def weight_roles(phase: Phase) -> dict[str, int]:
    """Which GEMM dimension is the weight's input and which its output, by phase."""
    if phase is Phase.FWD:
        return {"k": W_IN, "n": W_OUT}
    if phase is Phase.BWD_INPUT:
        return {"n": W_IN, "k": W_OUT}
    return {"n": W_IN, "m": W_OUT}


# The GEMM dimensions mapped on the array's rows and columns, per dataflow.
MAPPED = {Dataflow.OS: ("m", "n"), Dataflow.WS: ("k", "n"), Dataflow.IS: ("k", "m")}


def tile_geometry(op: GemmOp, w: TileWeight | None, dataflow: Dataflow) -> tuple[int, int] | None:
    """What the op's row- and column-mapped dimensions are to its tile-dropped weight
    (``NONE``, ``W_IN`` or ``W_OUT``), or None if no tile pattern applies to it."""
    if w is None or op.phase not in (Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT):
        return None
    if op.phase is Phase.BWD_INPUT and op.n < w.part:
        return None  # an LSTM's dX without its input part
    roles = weight_roles(op.phase)
    rows, cols = MAPPED[dataflow]
    return roles.get(rows, NONE), roles.get(cols, NONE)


def shrunk_dims(
    op: GemmOp, shrinks: Sequence[Shrink], kept: np.ndarray, fetched: np.ndarray | None = None
) -> dict[str, int]:
    """The op's ``m``, ``n``, ``k`` with its shrinks applied at ``kept`` units per site
    (:meth:`Shrink.scaled`); with ``fetched``, a dimension contiguous in the weight
    takes the units its DRAM bursts move instead (the extent of B that is fetched)."""
    more = None if fetched is None else fetched[None, :]
    return {d: int(v[0]) for d, v in shrunk_steps(op, shrinks, kept[None, :], more).items()}


def shrunk_steps(
    op: GemmOp, shrinks: Sequence[Shrink], kept: np.ndarray, fetched: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """:func:`shrunk_dims` of every step at once (``kept``, ``fetched``: ``[step, site]``)."""
    steps = kept.shape[0]
    dims = {d: np.full(steps, getattr(op, d), np.int64) for d in ("m", "n", "k", "count")}
    for s in shrinks:
        units = fetched if fetched is not None and s.contiguous else kept
        dims[s.dim] = s.scaled(dims[s.dim], units[:, s.site].astype(np.int64))
    return dims
