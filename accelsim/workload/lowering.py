"""Lower a workload to the op DAG of one training step.

Each layer becomes forward ops, backward ops (input gradient ``dX`` and
weight gradient ``dW``) and, per parameter tensor, an optimizer update; see
``DESIGN.md`` section 3 for the GEMM shapes.  Dependencies come from tensors:
an op depends on the ops that produced what it reads.  An activation read by
several layers gets its gradient summed from the partial gradients by an
explicit accumulation op.  Optimizer updates run after the whole backward
pass, as in eager ``loss.backward(); optimizer.step()``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import OptimizerKind, StridedDx
from accelsim.workload import model as wm
from accelsim.workload.model import pair
from accelsim.graph.ops import (
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    Tensor,
    TensorKind,
    TransferOp,
    VectorOp,
    whole,
)
from accelsim.workload.shapes import INPUT_NAME, LayerInfo, input_shape

# Vector-op costs per element (ops), documented in the README's modelling notes.
BATCHNORM_FWD_OPS = 6  # mean, variance, normalise, scale, shift
BATCHNORM_BWD_OPS = 8  # two reductions, then the dx formula
SOFTMAX_FWD_OPS = 5  # max, subtract, exp, sum, divide
SOFTMAX_BWD_OPS = 3  # dot(y, dy), subtract, multiply
CROSS_ENTROPY_FWD_OPS = 6  # softmax plus log and pick
DROPOUT_FWD_OPS = 3  # random draw, compare, scale
LSTM_CELL_FWD_OPS = 24  # 3 sigmoids, 2 tanh, 3 multiplies, 1 add per hidden unit
LSTM_CELL_BWD_OPS = 30


@dataclass(frozen=True)
class LayerView:
    """What a :class:`StepHooks` callback sees of one layer of one replica.

    Attributes:
        info: The layer with its shapes.
        inputs: Its input activation tensors (whole batch).
        output: Its output activation tensor.
        parameters: Its trainable tensors, with the op that finishes each gradient
            (``grad_op`` is -1 before the backward pass has computed it).
        batch: Samples of this replica.
        prefix: Name prefix of this replica's tensors.
    """

    info: LayerInfo
    inputs: tuple[Tensor, ...]
    output: Tensor
    parameters: tuple[Parameter, ...]
    batch: int
    prefix: str
    replace: Callable[[Parameter, Parameter], None] = field(repr=False, compare=False)

    def set_gradient(self, parameter: Parameter, gradient: Tensor, op_id: int) -> None:
        """Make ``gradient``, finished by op ``op_id``, the one the optimizer applies."""
        self.replace(parameter, Parameter(parameter.layer, parameter.weight, gradient, op_id))


class StepHooks:
    """Extension points of a training step's lowering; the defaults change nothing.

    A technique subclasses this.  ``backward`` false leaves the backward pass
    (and the loss gradient) out; ``after_forward`` runs right after each layer's
    forward ops, ``after_backward`` right after its backward ops, and either may
    replace a parameter's gradient with :meth:`LayerView.set_gradient` (with a
    predicted one, say).  Parameters left without a gradient op get no
    optimizer update.
    """

    backward = True

    def after_forward(self, builder: GraphBuilder, view: LayerView) -> None:
        """Called after the forward ops of every layer."""

    def after_backward(self, builder: GraphBuilder, view: LayerView) -> None:
        """Called after the backward ops of every layer that has any."""


@dataclass(frozen=True)
class StepLowering:
    """What lowering one replica's forward and backward pass produced."""

    parameters: tuple[Parameter, ...]
    backward_sinks: tuple[int, ...]


class GraphBuilder:
    """Accumulates ops (of one or more replicas) into an :class:`OpGraph`.

    Args:
        words: Word size of each tensor class.
    """

    def __init__(self, words: WordBytesSpec) -> None:
        self.words = words
        self.ops: list[Op] = []
        self.processor: list[int] = []
        self.current_processor = 0
        self.placement: Callable[[str, Phase], int] | None = None
        self.split: Callable[[str, Phase], tuple[float, int] | None] | None = None
        self._producers: dict[str, tuple[int, ...]] = {}
        self._on_chip: set[str] = set()
        self._transfers: dict[tuple[str, int, int], int] = {}

    # -- tensors -------------------------------------------------------------------------
    def tensor(self, name: str, kind: TensorKind, elements: int) -> Tensor:
        """Create a tensor whose word size follows its class."""
        word = {
            TensorKind.ACTIVATION: self.words.activations,
            TensorKind.WEIGHT: self.words.weights,
            TensorKind.GRADIENT: self.words.gradients,
            TensorKind.OPTIMIZER_STATE: self.words.optimizer_state,
        }[kind]
        return Tensor(name, kind, elements, word)

    def keep_on_chip(self, tensor: Tensor) -> Tensor:
        """Declare that ``tensor`` never travels to DRAM (it is read as it is produced)."""
        self._on_chip.add(tensor.name)
        return tensor

    def alias(self, tensor: Tensor, parts: Iterable[Tensor]) -> Tensor:
        """Declare ``tensor`` a view over ``parts``: it is ready when they all are."""
        ids: set[int] = set()
        for part in parts:
            ids.update(self._producers.get(part.name, ()))
        self._producers[tensor.name] = tuple(sorted(ids))
        return tensor

    def where(self, layer: str, phase: Phase) -> int:
        """The processor an op of ``layer`` in ``phase`` goes to (``placement``, if set)."""
        return self.placement(layer, phase) if self.placement else self.current_processor

    def _deps(
        self,
        reads: Iterable[Access],
        after: Iterable[int],
        processor: int,
        layer: str,
        phase: Phase,
    ) -> tuple[int, ...]:
        """Producers of ``reads``; data made on another processor arrives by a transfer."""
        ids: set[int] = set(after)
        for access in reads:
            local: list[int] = []
            remote: dict[int, list[int]] = {}
            for producer in self._producers.get(access.tensor.name, ()):
                source = self.processor[producer]
                if source == processor:
                    local.append(producer)
                else:
                    remote.setdefault(source, []).append(producer)
            ids.update(local)
            for source, producers in remote.items():
                ids.add(self._transfer(access, source, processor, producers, layer, phase))
        return tuple(sorted(ids))

    def _transfer(
        self,
        access: Access,
        source: int,
        destination: int,
        producers: list[int],
        layer: str,
        phase: Phase,
    ) -> int:
        """Send a tensor across processors once per destination; reuse the copy after."""
        key = (access.tensor.name, source, destination)
        if key not in self._transfers:
            op = TransferOp(
                op_id=len(self.ops),
                name=f"{access.tensor.name}.to_p{destination}",
                layer=layer,
                phase=phase,
                tensor=access.tensor,
                elements=access.elements,
                source=source,
                destination=destination,
                deps=tuple(sorted(producers)),
            )
            self.ops.append(op)
            self.processor.append(source)
            self._transfers[key] = op.op_id
        return self._transfers[key]

    def _emit(self, op: Op, writes: Iterable[Tensor], partial: bool, processor: int) -> int:
        self.ops.append(op)
        self.processor.append(processor)
        for t in writes:
            before = self._producers.get(t.name, ()) if partial else ()
            self._producers[t.name] = (*before, op.op_id)
        return op.op_id

    def add_dependencies(self, op_id: int, deps: Iterable[int]) -> None:
        """Make an op also wait for earlier ops ``deps`` (e.g. a schedule's ordering)."""
        op = self.ops[op_id]
        extra = tuple(sorted(set(op.deps) | {d for d in deps if d < op_id}))
        self.ops[op_id] = dataclasses.replace(op, deps=extra)

    # -- ops -----------------------------------------------------------------------------
    def gemm(
        self,
        name: str,
        layer: str,
        phase: Phase,
        m: int,
        n: int,
        k: int,
        count: int,
        a: Tensor,
        b: Tensor,
        c: Tensor,
        a_elements: int | None = None,
        b_elements: int | None = None,
        partial: bool = False,
        unit: str = "array",
    ) -> int:
        """Add ``count`` GEMMs ``c[m x n] = a[m x k] . b[k x n]`` on array ``unit``.

        ``partial`` marks ``c`` as written piecewise by several ops.  When
        ``split`` gives ``(fraction, processor)`` for this layer and phase, that
        fraction of the rows runs on the other processor as a second op.
        """
        processor = self.where(layer, phase)
        share = self.split(layer, phase) if self.split else None
        a_fp = min(m * k, a_elements) if a_elements is not None else m * k
        if share is not None and m > 1:
            fraction, other = share
            moved = min(m - 1, max(1, round(fraction * m)))
            for rows, where, suffix in ((moved, other, ".part0"), (m - moved, processor, ".part1")):
                self._gemm_op(
                    name + suffix,
                    layer,
                    phase,
                    rows,
                    n,
                    k,
                    count,
                    a,
                    b,
                    c,
                    max(1, a_fp * rows // m),
                    b_elements,
                    True,
                    unit,
                    where,
                )
            return len(self.ops) - 1
        return self._gemm_op(
            name, layer, phase, m, n, k, count, a, b, c, a_fp, b_elements, partial, unit, processor
        )

    def _gemm_op(
        self,
        name: str,
        layer: str,
        phase: Phase,
        m: int,
        n: int,
        k: int,
        count: int,
        a: Tensor,
        b: Tensor,
        c: Tensor,
        a_elements: int,
        b_elements: int | None,
        partial: bool,
        unit: str,
        processor: int,
    ) -> int:
        a_elements = min(m * k, a_elements)
        b_elements = min(k * n, b_elements) if b_elements is not None else k * n
        deps = self._deps(
            (Access(a, a_elements * count), Access(b, b_elements * count)),
            (),
            processor,
            layer,
            phase,
        )
        op = GemmOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=phase,
            m=m,
            n=n,
            k=k,
            count=count,
            a=a,
            b=b,
            c=c,
            a_elements=a_elements,
            b_elements=b_elements,
            deps=deps,
            unit=unit,
        )
        return self._emit(op, (c,), partial, processor)

    def vector(
        self,
        name: str,
        layer: str,
        phase: Phase,
        elements: int,
        ops_per_element: int,
        reads: Sequence[Access | Tensor],
        writes: Sequence[Access | Tensor],
        after: Iterable[int] = (),
    ) -> int:
        """Add a vector-unit op; tensors given bare are accessed whole."""
        read_acc = tuple(r if isinstance(r, Access) else whole(r) for r in reads)
        write_acc = tuple(w if isinstance(w, Access) else whole(w) for w in writes)
        processor = self.where(layer, phase)
        deps = self._deps(read_acc, after, processor, layer, phase)
        op = VectorOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=phase,
            elements=elements,
            ops_per_element=ops_per_element,
            reads=read_acc,
            writes=write_acc,
            deps=deps,
        )
        return self._emit(op, (w.tensor for w in write_acc), False, processor)

    def allreduce(
        self,
        name: str,
        layer: str,
        tensor: Tensor,
        participants: tuple[int, ...],
        after: Iterable[int],
    ) -> int:
        """Add a ring all-reduce of ``tensor`` after the ops in ``after``."""
        op = CommOp(
            op_id=len(self.ops),
            name=name,
            layer=layer,
            phase=Phase.COMM,
            tensor=tensor,
            participants=participants,
            deps=tuple(sorted(set(after))),
        )
        return self._emit(op, (tensor,), False, self.current_processor)

    # -- whole steps ---------------------------------------------------------------------
    def lower_step(
        self,
        infos: Sequence[LayerInfo],
        workload: wm.Workload,
        batch: int,
        strided_dx: StridedDx,
        prefix: str = "",
        hooks: StepHooks | None = None,
    ) -> StepLowering:
        """Lower the forward and backward pass of one replica on the current processor.

        ``hooks`` let a technique add ops after each layer's forward or backward
        pass, or leave the backward pass out (see :class:`StepHooks`).
        """
        return _StepLowerer(self, workload, batch, strided_dx, prefix, hooks).run(infos)

    def add_updates(
        self,
        parameters: Sequence[Parameter],
        optimizer: OptimizerKind,
        after: Iterable[int],
        gradient_ready: dict[str, int] | None = None,
    ) -> list[int]:
        """Add one optimizer update per parameter tensor on the current processor.

        Args:
            parameters: The trainable tensors.
            optimizer: Decides the state tensors and ops per element.
            after: Ops every update waits for (the end of the backward pass).
            gradient_ready: Op that makes each gradient final, by weight name
                (an all-reduce), instead of the op that computed it.
        """
        barrier = tuple(after)
        ids = []
        for p in parameters:
            states = [
                self.tensor(
                    f"{p.weight.name}.state{j}", TensorKind.OPTIMIZER_STATE, p.weight.elements
                )
                for j in range(optimizer.state_tensors)
            ]
            ready = (gradient_ready or {}).get(p.weight.name, p.grad_op)
            ids.append(
                self.vector(
                    f"{p.weight.name.rpartition('/')[2]}.update",
                    p.layer,
                    Phase.UPDATE,
                    p.weight.elements,
                    optimizer.ops_per_element,
                    reads=[p.weight, p.gradient, *states],
                    writes=[p.weight, *states],
                    after=(*barrier, ready),
                )
            )
        return ids

    def build(self, parameters: Sequence[Parameter] = (), priority: Sequence[int] = ()) -> OpGraph:
        """Freeze the ops into an :class:`OpGraph`, marking the activations backward reads."""
        stashed = {
            a.tensor.name
            for op in self.ops
            if op.phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
            for a in reads_of(op)
            if a.tensor.kind is TensorKind.ACTIVATION
        }
        return OpGraph(
            ops=tuple(self.ops),
            processor=tuple(self.processor),
            on_chip=frozenset(self._on_chip),
            stashed=frozenset(stashed),
            parameters=tuple(parameters),
            priority=tuple(priority),
        )


def reads_of(op: Op) -> tuple[Access, ...]:
    """Every tensor access an op reads (GEMM operands by unique footprint)."""
    if isinstance(op, GemmOp):
        return (Access(op.a, op.a_elements * op.count), Access(op.b, op.b_elements * op.count))
    if isinstance(op, VectorOp):
        return op.reads
    if isinstance(op, TransferOp):
        return (Access(op.tensor, op.elements),)
    return (whole(op.tensor),)


def writes_of(op: Op) -> tuple[Access, ...]:
    """Every tensor access an op writes (a transfer makes a copy, not a new tensor)."""
    if isinstance(op, GemmOp):
        return (Access(op.c, op.m * op.n * op.count),)
    if isinstance(op, VectorOp):
        return op.writes
    if isinstance(op, TransferOp):
        return ()
    return (whole(op.tensor),)


def strided_dx_shapes(
    h: int,
    w: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
) -> list[tuple[int, int, int]]:
    """Sub-convolutions of a strided conv's input gradient that skip inserted zeros.

    Input positions fall into ``stride_h * stride_w`` phases by ``(i + pad) mod
    stride``; each phase sees only the filter taps ``r`` with ``r * dilation``
    in the same residue class.  Returns ``(positions, taps, multiplicity)`` per
    distinct phase shape, where positions is the phase's ``h_a * w_b`` and taps
    its ``r_a * s_b``.
    """

    def per_dim(size: int, k: int, s: int, p: int, d: int) -> list[tuple[int, int]]:
        out = []
        for a in range(s):
            positions = sum(1 for i in range(size) if (i + p) % s == a)
            taps = sum(1 for r in range(k) if (r * d) % s == a)
            out.append((positions, taps))
        return out

    rows = per_dim(h, kernel[0], stride[0], padding[0], dilation[0])
    cols = per_dim(w, kernel[1], stride[1], padding[1], dilation[1])
    shapes: dict[tuple[int, int], int] = {}
    for pos_r, taps_r in rows:
        for pos_c, taps_c in cols:
            if pos_r * pos_c and taps_r * taps_c:
                key = (pos_r * pos_c, taps_r * taps_c)
                shapes[key] = shapes.get(key, 0) + 1
    return [(pos, taps, mult) for (pos, taps), mult in sorted(shapes.items(), reverse=True)]


class _StepLowerer:
    """Lowers one replica's forward and backward pass into a :class:`GraphBuilder`."""

    def __init__(
        self,
        builder: GraphBuilder,
        workload: wm.Workload,
        batch: int,
        strided_dx: StridedDx,
        prefix: str,
        hooks: StepHooks | None,
    ) -> None:
        self.hooks = hooks or StepHooks()
        self.b = builder
        self.workload = workload
        self.n = batch
        self.strided_dx = strided_dx
        self.prefix = prefix
        self.acts: dict[str, Tensor] = {}
        self.requires_grad: set[str] = set()
        self.partials: dict[str, list[Tensor]] = {}
        self.params: list[Parameter] = []
        self.stash_extra: dict[str, Tensor] = {}
        self.lstm_cells_of: dict[str, list[tuple[Tensor, Tensor, Tensor]]] = {}
        self.attention_of: dict[str, tuple[Tensor, Tensor, Tensor]] = {}

    def t(self, name: str, kind: TensorKind, elements: int) -> Tensor:
        return self.b.tensor(self.prefix + name, kind, elements)

    def run(self, infos: Sequence[LayerInfo]) -> StepLowering:
        shape = input_shape(self.workload.input)
        self.acts[INPUT_NAME] = self.t(INPUT_NAME, TensorKind.ACTIVATION, self.n * shape.numel)
        for info in infos:
            self.forward(info)
            self.hooks.after_forward(self.b, self._view(info))
            if _has_params(info.layer) or any(i in self.requires_grad for i in info.inputs):
                self.requires_grad.add(info.layer.name)
        first_bwd = len(self.b.ops)
        if self.hooks.backward:
            for info in reversed(infos):
                before = len(self.b.ops)
                self.backward(info)
                if len(self.b.ops) > before:
                    self.hooks.after_backward(self.b, self._view(info))
        bwd = range(first_bwd, len(self.b.ops))
        used = {d for i in bwd for d in self.b.ops[i].deps}
        sinks = tuple(i for i in bwd if i not in used)
        trained = tuple(p for p in self.params if p.grad_op >= 0)
        return StepLowering(trained, sinks)

    def _view(self, info: LayerInfo) -> LayerView:
        return LayerView(
            info=info,
            inputs=tuple(self.acts[i] for i in info.inputs),
            output=self.acts[info.layer.name],
            parameters=tuple(p for p in self.params if p.layer == info.layer.name),
            batch=self.n,
            prefix=self.prefix,
            replace=self._replace_param,
        )

    def _replace_param(self, old: Parameter, new: Parameter) -> None:
        self.params[self.params.index(old)] = new

    # -- forward ---------------------------------------------------------------------------
    def forward(self, info: LayerInfo) -> None:
        layer, name, n = info.layer, info.layer.name, self.n
        xs = [self.acts[i] for i in info.inputs]
        x = xs[0]
        out_elems = n * info.out_shape.numel
        y = self.t(f"{name}.out", TensorKind.ACTIVATION, out_elems)
        self.acts[name] = y
        b = self.b
        if isinstance(layer, wm.Conv2d):
            c, h, w = info.in_shapes[0].dims
            k_out, p, q = info.out_shape.dims
            r, s = pair(layer.kernel)
            g = layer.groups
            weight = self.param(name, "W", k_out * (c // g) * r * s)
            b.gemm(
                f"{name}.fwd",
                name,
                Phase.FWD,
                m=n * p * q,
                n=k_out // g,
                k=(c // g) * r * s,
                count=g,
                a=x,
                b=weight,
                c=y,
                a_elements=n * (c // g) * h * w,
            )
            if layer.bias:
                self.param(name, "b", k_out)
        elif isinstance(layer, wm.Linear):
            rows = n * math.prod(info.in_shapes[0].dims[:-1])
            fan_in = info.in_shapes[0].dims[-1]
            weight = self.param(name, "W", fan_in * layer.out_features)
            b.gemm(
                f"{name}.fwd",
                name,
                Phase.FWD,
                m=rows,
                n=layer.out_features,
                k=fan_in,
                count=1,
                a=x,
                b=weight,
                c=y,
            )
            if layer.bias:
                self.param(name, "b", layer.out_features)
        elif isinstance(layer, (wm.MaxPool, wm.AvgPool)):
            r, s = pair(layer.kernel)
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, r * s, [x], [y])
        elif isinstance(layer, wm.GlobalAvgPool):
            b.vector(f"{name}.fwd", name, Phase.FWD, x.elements, 1, [x], [y])
        elif isinstance(layer, (wm.BatchNorm, wm.LayerNorm)):
            affine = self.param(name, "affine", 2 * info.in_shapes[0].channels)
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, BATCHNORM_FWD_OPS, [x, affine], [y])
        elif isinstance(layer, wm.Activation):
            b.vector(
                f"{name}.fwd", name, Phase.FWD, out_elems, layer.function.forward_ops, [x], [y]
            )
        elif isinstance(layer, wm.Softmax):
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, SOFTMAX_FWD_OPS, [x], [y])
        elif isinstance(layer, wm.Dropout):
            # The mask is kept bit-packed: one bit per element.
            mask = Tensor(f"{self.prefix}{name}.mask", TensorKind.ACTIVATION, -(-out_elems // 8), 1)
            self.stash_extra[name] = mask
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, DROPOUT_FWD_OPS, [x], [y, mask])
        elif isinstance(layer, wm.TokenSelect):
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, 1, [Access(x, out_elems)], [y])
        elif isinstance(layer, wm.CrossEntropy):
            probs = self.t(f"{name}.probs", TensorKind.ACTIVATION, x.elements)
            self.stash_extra[name] = probs
            b.vector(
                f"{name}.fwd", name, Phase.FWD, x.elements, CROSS_ENTROPY_FWD_OPS, [x], [probs, y]
            )
        elif isinstance(layer, wm.Add):
            b.vector(f"{name}.fwd", name, Phase.FWD, out_elems, len(xs) - 1, xs, [y])
        elif isinstance(layer, (wm.Concat, wm.Flatten)):
            b.alias(y, xs)
        elif isinstance(layer, wm.Embedding):
            table = self.param(name, "W", layer.num_embeddings * layer.embedding_dim)
            b.vector(
                f"{name}.fwd", name, Phase.FWD, out_elems, 1, [x, Access(table, out_elems)], [y]
            )
        elif isinstance(layer, wm.Lstm):
            self.lstm_forward(info, x, y)
        elif isinstance(layer, wm.Attention):
            self.attention_forward(info, x, y)
        else:
            raise AssertionError(f"unhandled layer kind {layer.kind}")

    def param(self, layer: str, suffix: str, elements: int) -> Tensor:
        weight = self.t(f"{layer}.{suffix}", TensorKind.WEIGHT, elements)
        grad = self.t(f"{layer}.d{suffix}", TensorKind.GRADIENT, elements)
        self.params.append(Parameter(layer, weight, grad, grad_op=-1))
        return weight

    def _param(self, layer: str, suffix: str) -> Parameter:
        wanted = f"{self.prefix}{layer}.{suffix}"
        return next(p for p in self.params if p.weight.name == wanted)

    def _grad_done(self, layer: str, suffix: str, op_id: int) -> Tensor:
        p = self._param(layer, suffix)
        self._replace_param(p, Parameter(p.layer, p.weight, p.gradient, op_id))
        return p.gradient

    def lstm_forward(self, info: LayerInfo, x: Tensor, y: Tensor) -> None:
        name, n, b = info.layer.name, self.n, self.b
        steps, d = info.in_shapes[0].dims
        hidden = info.out_shape.dims[1]
        weight = self.param(name, "W", 4 * hidden * (d + hidden))
        self.param(name, "b", 8 * hidden)
        h_prev: Tensor | None = None
        c_prev: Tensor | None = None
        cells = []
        outputs = []
        for t in range(steps):
            xh = self.t(f"{name}.xh{t}", TensorKind.ACTIVATION, n * (d + hidden))
            b.alias(xh, [x] + ([h_prev] if h_prev is not None else []))
            gates = self.t(f"{name}.gates{t}", TensorKind.ACTIVATION, n * 4 * hidden)
            b.gemm(
                f"{name}.fwd.t{t}",
                name,
                Phase.FWD,
                m=n,
                n=4 * hidden,
                k=d + hidden,
                count=1,
                a=xh,
                b=weight,
                c=gates,
            )
            act = self.t(f"{name}.act{t}", TensorKind.ACTIVATION, n * 4 * hidden)
            h = self.t(f"{name}.h{t}", TensorKind.ACTIVATION, n * hidden)
            cell = self.t(f"{name}.c{t}", TensorKind.ACTIVATION, n * hidden)
            reads = [gates] + ([c_prev] if c_prev is not None else [])
            b.vector(
                f"{name}.cell.t{t}",
                name,
                Phase.FWD,
                n * hidden,
                LSTM_CELL_FWD_OPS,
                reads,
                [act, h, cell],
            )
            cells.append((xh, act, cell))
            outputs.append(h)
            h_prev, c_prev = h, cell
        b.alias(y, outputs)
        self.lstm_cells_of[name] = cells

    def attention_forward(self, info: LayerInfo, x: Tensor, y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention)
        name, n, b = layer.name, self.n, self.b
        steps, d = info.in_shapes[0].dims
        heads = layer.heads
        dh = d // heads
        wqkv = self.param(name, "Wqkv", 3 * d * d)
        wo = self.param(name, "Wo", d * d)
        if layer.bias:
            self.param(name, "bqkv", 3 * d)
            self.param(name, "bo", d)
        qkv = self.t(f"{name}.qkv", TensorKind.ACTIVATION, n * steps * 3 * d)
        scores = self.t(f"{name}.scores", TensorKind.ACTIVATION, n * heads * steps * steps)
        probs = self.t(f"{name}.probs", TensorKind.ACTIVATION, n * heads * steps * steps)
        ctx = self.t(f"{name}.ctx", TensorKind.ACTIVATION, n * steps * d)
        b.gemm(
            f"{name}.qkv.fwd",
            name,
            Phase.FWD,
            m=n * steps,
            n=3 * d,
            k=d,
            count=1,
            a=x,
            b=wqkv,
            c=qkv,
        )
        b.gemm(
            f"{name}.qk.fwd",
            name,
            Phase.FWD,
            m=steps,
            n=steps,
            k=dh,
            count=n * heads,
            a=qkv,
            b=qkv,
            c=scores,
        )
        b.vector(
            f"{name}.softmax.fwd",
            name,
            Phase.FWD,
            scores.elements,
            SOFTMAX_FWD_OPS,
            [scores],
            [probs],
        )
        b.gemm(
            f"{name}.av.fwd",
            name,
            Phase.FWD,
            m=steps,
            n=dh,
            k=steps,
            count=n * heads,
            a=probs,
            b=qkv,
            c=ctx,
        )
        b.gemm(f"{name}.out.fwd", name, Phase.FWD, m=n * steps, n=d, k=d, count=1, a=ctx, b=wo, c=y)
        self.attention_of[name] = (qkv, probs, ctx)

    # -- backward --------------------------------------------------------------------------
    def out_grad(self, info: LayerInfo) -> Tensor | None:
        name = info.layer.name
        parts = self.partials.get(name, [])
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        grad = self.t(f"{name}.grad", TensorKind.GRADIENT, parts[0].elements)
        self.b.vector(
            f"{name}.grad_accum",
            name,
            Phase.BWD_INPUT,
            grad.elements,
            len(parts) - 1,
            parts,
            [grad],
        )
        return grad

    def give(self, info: LayerInfo, index: int, grad: Tensor) -> None:
        """Hand a partial gradient to the layer's ``index``-th input."""
        self.partials.setdefault(info.inputs[index], []).append(grad)

    def wants(self, info: LayerInfo, index: int = 0) -> bool:
        return info.inputs[index] in self.requires_grad

    def dx(self, info: LayerInfo, index: int = 0) -> Tensor:
        source = self.acts[info.inputs[index]]
        return self.t(
            f"{info.inputs[index]}.grad<-{info.layer.name}", TensorKind.GRADIENT, source.elements
        )

    def backward(self, info: LayerInfo) -> None:
        layer, name, n, b = info.layer, info.layer.name, self.n, self.b
        if name not in self.requires_grad:
            return
        x = self.acts[info.inputs[0]]
        y = self.acts[name]
        if isinstance(layer, wm.CrossEntropy):
            if self.wants(info):
                grad = self.dx(info)
                b.vector(
                    f"{name}.bwd",
                    name,
                    Phase.BWD_INPUT,
                    x.elements,
                    1,
                    [self.stash_extra[name]],
                    [grad],
                )
                self.give(info, 0, grad)
            return
        g = self.out_grad(info)
        if g is None:
            return
        if isinstance(layer, wm.Conv2d):
            self.conv_backward(info, layer, x, g)
        elif isinstance(layer, wm.Linear):
            rows = n * math.prod(info.in_shapes[0].dims[:-1])
            fan_in = info.in_shapes[0].dims[-1]
            weight = self._param(name, "W").weight
            if self.wants(info):
                grad = self.dx(info)
                b.gemm(
                    f"{name}.dx",
                    name,
                    Phase.BWD_INPUT,
                    m=rows,
                    n=fan_in,
                    k=layer.out_features,
                    count=1,
                    a=g,
                    b=weight,
                    c=grad,
                )
                self.give(info, 0, grad)
            dw = self._param(name, "W").gradient
            op = b.gemm(
                f"{name}.dw",
                name,
                Phase.BWD_WEIGHT,
                m=layer.out_features,
                n=fan_in,
                k=rows,
                count=1,
                a=g,
                b=x,
                c=dw,
            )
            self._grad_done(name, "W", op)
            if layer.bias:
                self.bias_grad(name, "b", g)
        elif isinstance(layer, (wm.MaxPool, wm.AvgPool, wm.GlobalAvgPool)):
            if self.wants(info):
                grad = self.dx(info)
                reads = [g, x] if isinstance(layer, wm.MaxPool) else [g]
                b.vector(f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, 1, reads, [grad])
                self.give(info, 0, grad)
        elif isinstance(layer, (wm.BatchNorm, wm.LayerNorm)):
            affine = self._param(name, "affine")
            dx = self.dx(info) if self.wants(info) else None
            writes = [affine.gradient] if dx is None else [affine.gradient, dx]
            op = b.vector(
                f"{name}.bwd",
                name,
                Phase.BWD_INPUT,
                x.elements,
                BATCHNORM_BWD_OPS,
                [g, x, affine.weight],
                writes,
            )
            self._grad_done(name, "affine", op)
            if dx is not None:
                self.give(info, 0, dx)
        elif isinstance(layer, (wm.Activation, wm.Softmax)):
            if self.wants(info):
                grad = self.dx(info)
                if isinstance(layer, wm.Softmax):
                    ops, saved = SOFTMAX_BWD_OPS, y
                else:
                    ops = layer.function.backward_ops
                    by_output = layer.function in (
                        wm.ActivationFunction.RELU,
                        wm.ActivationFunction.RELU6,
                        wm.ActivationFunction.SIGMOID,
                        wm.ActivationFunction.TANH,
                    )
                    saved = y if by_output else x
                b.vector(f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, ops, [g, saved], [grad])
                self.give(info, 0, grad)
        elif isinstance(layer, wm.Dropout):
            if self.wants(info):
                grad = self.dx(info)
                mask = self.stash_extra[name]
                b.vector(f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, 1, [g, mask], [grad])
                self.give(info, 0, grad)
        elif isinstance(layer, wm.TokenSelect):
            if self.wants(info):
                grad = self.dx(info)  # zero everywhere but the selected token
                b.vector(f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, 1, [g], [grad])
                self.give(info, 0, grad)
        elif isinstance(layer, (wm.Add, wm.Flatten)):
            for i in range(len(info.inputs)):
                if self.wants(info, i):
                    self.give(info, i, g)
        elif isinstance(layer, wm.Concat):
            for i, source in enumerate(info.inputs):
                if self.wants(info, i):
                    part = self.t(f"{g.name}[{i}]", TensorKind.GRADIENT, self.acts[source].elements)
                    self.give(info, i, b.alias(part, [g]))
        elif isinstance(layer, wm.Embedding):
            table = self._param(name, "W")
            op = b.vector(
                f"{name}.dw",
                name,
                Phase.BWD_WEIGHT,
                y.elements,
                1,
                [g, x],
                [Access(table.gradient, y.elements)],
            )
            self._grad_done(name, "W", op)
        elif isinstance(layer, wm.Lstm):
            self.lstm_backward(info, x, g)
        elif isinstance(layer, wm.Attention):
            self.attention_backward(info, x, g)
        else:
            raise AssertionError(f"unhandled layer kind {layer.kind}")

    def bias_grad(self, layer: str, suffix: str, g: Tensor) -> None:
        p = self._param(layer, suffix)
        op = self.b.vector(
            f"{layer}.d{suffix}", layer, Phase.BWD_WEIGHT, g.elements, 1, [g], [p.gradient]
        )
        self._grad_done(layer, suffix, op)

    def conv_backward(self, info: LayerInfo, layer: wm.Conv2d, x: Tensor, g: Tensor) -> None:
        name, n, b = layer.name, self.n, self.b
        c, h, w = info.in_shapes[0].dims
        k_out, p, q = info.out_shape.dims
        r, s = pair(layer.kernel)
        stride, dil = pair(layer.stride), pair(layer.dilation)
        groups = layer.groups
        cg, kg = c // groups, k_out // groups
        weight = self._param(name, "W")
        dy_per_group = n * kg * p * q
        if self.wants(info):
            grad = self.dx(info)
            if stride == (1, 1) or self.strided_dx is StridedDx.ZERO_INSERT:
                shapes = [(h * w, r * s, 1)]
            else:
                shapes = strided_dx_shapes(h, w, (r, s), stride, pair(layer.padding), dil)
            for i, (positions, taps, mult) in enumerate(shapes):
                suffix = f".{i}" if len(shapes) > 1 else ""
                b.gemm(
                    f"{name}.dx{suffix}",
                    name,
                    Phase.BWD_INPUT,
                    m=n * positions,
                    n=cg,
                    k=kg * taps,
                    count=groups * mult,
                    a=g,
                    b=weight.weight,
                    c=grad,
                    a_elements=dy_per_group,
                    partial=True,
                )
            self.give(info, 0, grad)
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=kg,
            n=cg * r * s,
            k=n * p * q,
            count=groups,
            a=g,
            b=x,
            c=weight.gradient,
            b_elements=n * cg * h * w,
        )
        self._grad_done(name, "W", op)
        if layer.bias:
            self.bias_grad(name, "b", g)

    def lstm_backward(self, info: LayerInfo, x: Tensor, g: Tensor) -> None:
        name, n, b = info.layer.name, self.n, self.b
        steps, d = info.in_shapes[0].dims
        hidden = info.out_shape.dims[1]
        weight = self._param(name, "W")
        cells = self.lstm_cells_of[name]
        wants_x = self.wants(info)
        dgates_all = []
        dxh_parts = []
        dxh_next: Tensor | None = None
        dc_next: Tensor | None = None
        for t in reversed(range(steps)):
            _xh, act, cell = cells[t]
            dgates = self.t(f"{name}.dgates{t}", TensorKind.GRADIENT, n * 4 * hidden)
            dc = self.t(f"{name}.dc{t}", TensorKind.GRADIENT, n * hidden)
            reads: list[Access | Tensor] = [Access(g, n * hidden), act, cell]
            if t > 0:
                reads.append(cells[t - 1][2])
            if dxh_next is not None and dc_next is not None:
                reads += [Access(dxh_next, n * hidden), dc_next]
            b.vector(
                f"{name}.cell.bwd.t{t}",
                name,
                Phase.BWD_INPUT,
                n * hidden,
                LSTM_CELL_BWD_OPS,
                reads,
                [dgates, dc],
            )
            dgates_all.append(dgates)
            width = (d if wants_x else 0) + (hidden if t > 0 else 0)
            dxh_next = None
            if width:
                dxh = self.t(f"{name}.dxh{t}", TensorKind.GRADIENT, n * width)
                b.gemm(
                    f"{name}.dx.t{t}",
                    name,
                    Phase.BWD_INPUT,
                    m=n,
                    n=width,
                    k=4 * hidden,
                    count=1,
                    a=dgates,
                    b=weight.weight,
                    c=dxh,
                )
                dxh_parts.append(dxh)
                dxh_next = dxh
            dc_next = dc
        all_dgates = b.alias(
            self.t(f"{name}.dgates", TensorKind.GRADIENT, n * steps * 4 * hidden), dgates_all
        )
        all_xh = b.alias(
            self.t(f"{name}.xh", TensorKind.ACTIVATION, n * steps * (d + hidden)),
            [xh for xh, _, _ in cells],
        )
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=4 * hidden,
            n=d + hidden,
            k=n * steps,
            count=1,
            a=all_dgates,
            b=all_xh,
            c=weight.gradient,
        )
        self._grad_done(name, "W", op)
        self.bias_grad(name, "b", all_dgates)
        if wants_x:
            self.give(info, 0, b.alias(self.dx(info), dxh_parts))

    def attention_backward(self, info: LayerInfo, x: Tensor, g: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention)
        name, n, b = layer.name, self.n, self.b
        steps, d = info.in_shapes[0].dims
        heads = layer.heads
        dh = d // heads
        qkv, probs, ctx = self.attention_of[name]
        wqkv, wo = self._param(name, "Wqkv"), self._param(name, "Wo")
        dctx = self.t(f"{name}.dctx", TensorKind.GRADIENT, ctx.elements)
        b.gemm(
            f"{name}.out.dx",
            name,
            Phase.BWD_INPUT,
            m=n * steps,
            n=d,
            k=d,
            count=1,
            a=g,
            b=wo.weight,
            c=dctx,
        )
        op = b.gemm(
            f"{name}.out.dw",
            name,
            Phase.BWD_WEIGHT,
            m=d,
            n=d,
            k=n * steps,
            count=1,
            a=g,
            b=ctx,
            c=wo.gradient,
        )
        self._grad_done(name, "Wo", op)
        if layer.bias:
            self.bias_grad(name, "bo", g)
        dprobs = self.t(f"{name}.dprobs", TensorKind.GRADIENT, probs.elements)
        dscores = self.t(f"{name}.dscores", TensorKind.GRADIENT, probs.elements)
        dqkv = self.t(f"{name}.dqkv", TensorKind.GRADIENT, qkv.elements)
        b.gemm(
            f"{name}.av.dprobs",
            name,
            Phase.BWD_INPUT,
            m=steps,
            n=steps,
            k=dh,
            count=n * heads,
            a=dctx,
            b=qkv,
            c=dprobs,
        )
        b.gemm(
            f"{name}.av.dv",
            name,
            Phase.BWD_INPUT,
            m=steps,
            n=dh,
            k=steps,
            count=n * heads,
            a=probs,
            b=dctx,
            c=dqkv,
            partial=True,
        )
        b.vector(
            f"{name}.softmax.bwd",
            name,
            Phase.BWD_INPUT,
            probs.elements,
            SOFTMAX_BWD_OPS,
            [dprobs, probs],
            [dscores],
        )
        b.gemm(
            f"{name}.qk.dq",
            name,
            Phase.BWD_INPUT,
            m=steps,
            n=dh,
            k=steps,
            count=n * heads,
            a=dscores,
            b=qkv,
            c=dqkv,
            partial=True,
        )
        b.gemm(
            f"{name}.qk.dk",
            name,
            Phase.BWD_INPUT,
            m=steps,
            n=dh,
            k=steps,
            count=n * heads,
            a=dscores,
            b=qkv,
            c=dqkv,
            partial=True,
        )
        if self.wants(info):
            grad = self.dx(info)
            b.gemm(
                f"{name}.qkv.dx",
                name,
                Phase.BWD_INPUT,
                m=n * steps,
                n=d,
                k=3 * d,
                count=1,
                a=dqkv,
                b=wqkv.weight,
                c=grad,
            )
            self.give(info, 0, grad)
        op = b.gemm(
            f"{name}.qkv.dw",
            name,
            Phase.BWD_WEIGHT,
            m=3 * d,
            n=d,
            k=n * steps,
            count=1,
            a=dqkv,
            b=x,
            c=wqkv.gradient,
        )
        self._grad_done(name, "Wqkv", op)
        if layer.bias:
            self.bias_grad(name, "bqkv", dqkv)


def _has_params(layer: wm.Layer) -> bool:
    return isinstance(
        layer,
        (wm.Conv2d, wm.Linear, wm.BatchNorm, wm.LayerNorm, wm.Embedding, wm.Lstm, wm.Attention),
    )
