"""Stochastic depth under approximate dropout: whole samples of a residual branch dropped.

A ``stochastic_depth`` layer (Huang et al., ECCV 2016) drops a residual branch per
sample.  With a regular pattern over the batch's ``B`` samples instead of a random
draw per sample (our extension, [D]), the ``kept`` samples of a step are known
before the branch runs, so the branch runs for them alone: its work is compacted to
the kept samples, as row patterns compact the kept neurons.

A *sample site* is a stochastic-depth layer read by one ``add`` alone (the *join*,
which adds the branch to the skip path).  Its *branch* is every layer the
stochastic-depth layer's input depends on that the join's other inputs do not: the
walk back from its input stops where the branch forks from the skip path.  Every
layer of the branch must be read by the branch alone (or by the stochastic-depth
layer), and be a ``linear``, ``conv2d`` or ``matmul`` layer or a layer of vector ops,
whose work is per sample.  Each GEMM of the branch scales its share of the batch:

=======  ==============================================  ==========================
GEMM     ``linear`` and ``conv2d`` (samples x positions)  ``matmul`` (one per sample
                                                          and head)
=======  ==============================================  ==========================
forward  rows ``M``: ``B -> kept`` samples                count: ``B -> kept``
dX       rows ``M``: ``B -> kept`` samples                count: ``B -> kept``
dW       reduction ``K``: ``B -> kept`` samples           (no weight)
=======  ==============================================  ==========================

and each vector op of the branch and of the stochastic-depth layer scales its
elements and its reads and writes of activations and gradients by ``kept / B``
(rounded up); parameters, their gradients and the join stay whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accelsim.graph.ops import Access, OpGraph, Phase, VectorOp
from accelsim.lowering.shapes import LayerInfo
from accelsim.techniques.dropout.sites import Shrink
from accelsim.workload import model as wm

GEMM_LAYERS = (wm.Linear, wm.Conv2d)
BATCHED_LAYERS = (wm.MatMul,)
"""Layers whose GEMMs are one per sample and head: the batch is in their count."""
VECTOR_LAYERS = (
    wm.MaxPool,
    wm.AvgPool,
    wm.GlobalAvgPool,
    wm.AdaptiveAvgPool,
    wm.BatchNorm,
    wm.LayerNorm,
    wm.GroupNorm,
    wm.RmsNorm,
    wm.Activation,
    wm.Softmax,
    wm.Add,
    wm.Mul,
    wm.Concat,
    wm.Split,
    wm.Flatten,
    wm.Bridge,
    wm.Upsample,
    wm.Dropout,
    wm.StochasticDepth,
    wm.ScaleParameter,
    wm.AddParameter,
    wm.PrependTokens,
    wm.PositionBias,
    wm.TokenSelect,
    wm.VectorLayer,
)
"""Layers whose ops are vector ops over every sample (none of them a GEMM)."""

SAMPLE_DIMS = {Phase.FWD: "m", Phase.BWD_INPUT: "m", Phase.BWD_WEIGHT: "k"}
"""The GEMM dimension that holds the batch's samples (times positions), by phase."""


@dataclass(frozen=True)
class SampleSite:
    """A stochastic-depth layer whose dropped samples skip its residual branch."""

    layer: str
    rate: float
    branch: tuple[str, ...]  # the branch's layers, in the table's order
    join: str  # the add joining the branch to the skip path


def find_sample_sites(infos: Sequence[LayerInfo]) -> tuple[list[SampleSite], dict[str, str]]:
    """The stochastic-depth layers whose branch can run for the kept samples alone, and
    why each of the others cannot (by layer)."""
    by_name = {i.layer.name: i for i in infos}
    readers: dict[str, list[str]] = {}
    for info in infos:
        for source in info.inputs:
            readers.setdefault(source, []).append(info.layer.name)
    sites, refused = [], {}
    for info in infos:
        layer = info.layer
        if not isinstance(layer, wm.StochasticDepth):
            continue
        found = _branch(info, by_name, readers)
        if isinstance(found, str):
            refused[layer.name] = found
        else:
            sites.append(SampleSite(layer.name, layer.rate, *found))
    return sites, refused


def _branch(
    info: LayerInfo, by_name: Mapping[str, LayerInfo], readers: Mapping[str, list[str]]
) -> tuple[tuple[str, ...], str] | str:
    """The branch and the join of a stochastic-depth layer, or why it has none."""
    name = info.layer.name
    mine = readers.get(name, [])
    if len(mine) != 1 or not isinstance(by_name[mine[0]].layer, wm.Add):
        return f"it is read by {mine or 'no layer'}, not by one add joining a skip path"
    join = by_name[mine[0]]
    skip = [s for s in join.inputs if s != name]
    if not skip:
        return f"{join.layer.name} adds nothing but its branch"
    shared = set().union(*(_ancestors(s, by_name) for s in skip))
    branch = _ancestors(info.inputs[0], by_name) - shared
    order = tuple(i.layer.name for i in by_name.values() if i.layer.name in branch)
    for layer in order:
        outside = [r for r in readers.get(layer, []) if r not in branch and r != name]
        if outside:
            return f"{layer} of its branch is also read by {outside[0]}, outside the branch"
        kind = by_name[layer].layer
        if not isinstance(kind, GEMM_LAYERS + BATCHED_LAYERS + VECTOR_LAYERS):
            return (
                f"its branch has {layer}, a {kind.kind} layer whose work is not scaled by"
                " sample (linear, conv2d, matmul and vector layers are)"
            )
    return order, join.layer.name


def _ancestors(name: str, by_name: Mapping[str, LayerInfo]) -> set[str]:
    """``name`` and every layer it depends on (model inputs are not layers)."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        layer = stack.pop()
        if layer in seen or layer not in by_name:
            continue
        seen.add(layer)
        stack.extend(by_name[layer].inputs)
    return seen


def sample_shrinks(
    sites: Sequence[SampleSite], infos: Mapping[str, LayerInfo], first_site: int, batch: int
) -> dict[tuple[str, Phase], list[Shrink]]:
    """The batch dimension of every GEMM of each site's branch (site ``first_site + j``),
    scaled whole from ``batch`` samples to the kept ones: a matmul's count (samples
    times heads), a linear or conv2d layer's samples times positions."""
    out: dict[tuple[str, Phase], list[Shrink]] = {}
    for j, site in enumerate(sites):
        for layer in site.branch:
            kind = infos[layer].layer
            if not isinstance(kind, GEMM_LAYERS + BATCHED_LAYERS):
                continue
            for phase, dim in SAMPLE_DIMS.items():
                batched = "count" if isinstance(kind, BATCHED_LAYERS) else dim
                shrink = Shrink(batched, first_site + j, batch, whole=True)
                out.setdefault((layer, phase), []).append(shrink)
    return out


def parameter_names(graph: OpGraph) -> frozenset[str]:
    """The names of the graph's parameters and their gradients: what a branch's vector
    op reads or writes whole, whatever its samples."""
    return frozenset(t.name for p in graph.parameters for t in (p.weight, p.gradient))


def scaled_samples(op: VectorOp, kept: int, batch: int, params: frozenset[str]) -> VectorOp:
    """``op`` for ``kept`` of the ``batch`` samples: its elements and its accesses of
    tensors other than ``params`` scaled by ``kept / batch``, rounded up."""

    def scale(count: int) -> int:
        return -(-count * kept // batch)

    def acc(a: Access) -> Access:
        return a if a.tensor.name in params else Access(a.tensor, scale(a.elements))

    return dataclasses.replace(
        op,
        elements=scale(op.elements),
        reads=tuple(map(acc, op.reads)),
        writes=tuple(map(acc, op.writes)),
    )
