"""The tensor-parallel collectives a plan's passes wait for one after the other, with
the GEMMs between them, and the least cycles they take: the part of
:mod:`accelsim.planner.bound` that counts communication.

A tensor-parallel group of ``t`` ranks (:mod:`accelsim.lowering.tensor_parallel`)
all-reduces the output of each layer of ``reduced_outputs`` after its forward, and
every later op reading that output waits for it; it all-reduces the gradient of the
output of each layer of ``reduced_gradients`` before its backward reads it.  With
sequence parallelism (:mod:`accelsim.lowering.sequence_parallel`) the forward
all-gathers a shared input before the layer of a gathered role that reads it and
reduce-scatters each ``reduced_outputs`` layer's output; the backward all-gathers the
gradient of each ``reduced_outputs`` layer's output and reduce-scatters the gradient
of each gathered input.  Each collective waits for the ops that make its tensor, and
the ops that read its result wait for it.

So along a path ``L1 -> L2 -> ...`` of the layer table (each layer reading the one
before; a layer's forward ops made from its input and making its output), a forward
pass runs the forward collectives of ``L1``, then of ``L2``, and so on, one after the
other, and each layer's forward GEMMs between its own collectives (a gather before
them, a reduction after); a backward pass runs their backward collectives in the
reverse order, each layer's input-gradient GEMMs after its own (they read the
gradient it reduces or gathers) and before the collectives of the layers it reads
(they make the gradient those reduce).  So every GEMM counted waits for, or is waited
for by, every collective counted: the GEMMs between two collectives run in the gap
between them, one at a time on the arrays, each at least its MACs at peak.  A
collective takes at least :func:`~accelsim.timing.sends.least_cycles` for the group
the pass runs on, ranks ``0 .. t - 1`` (the engines book a step's sends after what
the links already carry, so traffic only delays it).  A pass therefore takes at least
the heaviest path of its chunk's layers, each weighing its collectives' least cycles
and its GEMMs' MACs at peak (a rank's at least ``1 / t`` of one processor's):
:func:`pass_chains`, the forward chain and the backward chain.  Left out: the
collectives and GEMMs a recomputation adds to the backward and the weight-gradient
GEMMs (they need wait for none of the chain), the vocabulary-parallel loss's
all-reduces and a sequence-parallel backward's gathers again of a layer's input.
``tests/planner/test_chain.py`` walks the 4-block GPT's lowered passes to check it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from accelsim.lowering.sequence_parallel import GATHERED
from accelsim.lowering.shapes import LayerInfo, Shape
from accelsim.lowering.tensor_parallel import TensorPlan
from accelsim.network.collectives import Collective

Timed = Callable[[Collective, int], int]
"""The least cycles of a collective of so many bytes over the plan's tensor group."""


@dataclass(frozen=True)
class LayerCollectives:
    """One layer's tensor-parallel collectives on a chain, each as its kind and its
    elements per sample: those of its ``forward`` pass and of its ``backward``."""

    forward: tuple[tuple[Collective, int], ...]
    backward: tuple[tuple[Collective, int], ...]


def _elements(shape: Shape, degree: int, sequence: bool) -> int:
    """A tensor of ``shape``'s elements per sample, whole (under sequence parallelism
    gathered from shares of ``dims[0] // degree`` rows)."""
    if not sequence:
        return math.prod(shape.dims)
    return shape.dims[0] // degree * degree * math.prod(shape.dims[1:])


def chain_collectives(infos: Sequence[LayerInfo], plan: TensorPlan) -> dict[str, LayerCollectives]:
    """The collectives of each layer of ``infos`` that lie on the chains of its passes
    under ``plan`` (the module's), by layer name (layers with none left out)."""
    by_name = {info.layer.name: info for info in infos}
    t, sequence = plan.degree, plan.sequence

    def size(name: str) -> int:
        return _elements(by_name[name].out_shape, t, sequence)

    def shared(name: str) -> bool:
        return name in by_name and (name not in plan.roles or name in plan.reduced_outputs)

    gathered = {
        info.inputs[0]
        for info in infos
        if plan.roles.get(info.layer.name) in GATHERED and info.inputs and shared(info.inputs[0])
    }
    out: dict[str, LayerCollectives] = {}
    for info in infos:
        name = info.layer.name
        forward: list[tuple[Collective, int]] = []
        backward: list[tuple[Collective, int]] = []
        if not sequence:
            if name in plan.reduced_outputs:
                forward.append((Collective.ALL_REDUCE, size(name)))
            if name in plan.reduced_gradients:
                backward.append((Collective.ALL_REDUCE, size(name)))
        else:
            if plan.roles.get(name) in GATHERED and info.inputs and shared(info.inputs[0]):
                forward.append((Collective.ALL_GATHER, size(info.inputs[0])))
            if name in plan.reduced_outputs:
                forward.append((Collective.REDUCE_SCATTER, size(name)))
            if name in gathered:
                backward.append((Collective.REDUCE_SCATTER, size(name)))
            elif name in plan.reduced_outputs:
                backward.append((Collective.ALL_GATHER, size(name)))
        if forward or backward:
            out[name] = LayerCollectives(tuple(forward), tuple(backward))
    return out


def layer_weights(
    collectives: Mapping[str, LayerCollectives],
    gemms: Mapping[str, tuple[int, int]],
    scale: int,
    samples: int,
    timed: Timed,
    word_bytes: tuple[int, int],
) -> dict[str, tuple[int, int]]:
    """Each layer's least cycles on its forward chain and on its backward chain for
    ``samples`` samples, times ``scale`` (whole numbers): ``gemms`` its MACs on the
    chains for ``scale`` cycles a sample each, and its collectives' least cycles
    (``word_bytes``: an activation's and a gradient's)."""
    out: dict[str, tuple[int, int]] = {}
    for name in gemms.keys() | collectives.keys():
        forward, backward = (samples * macs for macs in gemms.get(name, (0, 0)))
        found = collectives.get(name)
        if found is not None:
            for kind, n in found.forward:
                forward += scale * timed(kind, samples * n * word_bytes[0])
            for kind, n in found.backward:
                backward += scale * timed(kind, samples * n * word_bytes[1])
        out[name] = (forward, backward)
    return out


def heaviest(
    infos: Mapping[str, LayerInfo],
    layers: Sequence[str],
    weights: Mapping[str, tuple[int, int]],
    which: int,
) -> tuple[int, int]:
    """The heaviest path among ``layers`` (in the layer table's order; each reading the
    one before it), each layer weighing ``weights[name][which]`` (0 when absent): the
    path into the last of ``layers`` and the heaviest of all."""
    kept = set(layers)
    into: dict[str, int] = {}
    for name in layers:
        before = [into[i] for i in infos[name].inputs if i in kept and i in into]
        into[name] = weights.get(name, (0, 0))[which] + max(before, default=0)
    last = into.get(layers[-1], 0) if layers else 0
    return last, max(into.values(), default=0)


def pass_chains(
    infos: Mapping[str, LayerInfo],
    layers: Sequence[str],
    weights: Mapping[str, tuple[int, int]],
    scale: int,
) -> tuple[Fraction, Fraction, Fraction]:
    """The least cycles of the forward chain into the last of ``layers``, of the
    heaviest forward chain and of the heaviest backward chain (``weights`` from
    :func:`layer_weights` for ``scale``)."""
    into, forward = heaviest(infos, layers, weights, 0)
    _, backward = heaviest(infos, layers, weights, 1)
    return Fraction(into, scale), Fraction(forward, scale), Fraction(backward, scale)
