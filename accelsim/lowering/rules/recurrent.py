"""LSTM and GRU layers, unrolled over the sequence: one gates GEMM and one cell op per
time step."""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, one_input
from accelsim.workload import model as wm

LSTM_CELL_FWD_OPS = 24  # 3 sigmoids, 2 tanh, 3 multiplies, 1 add per hidden unit
LSTM_CELL_BWD_OPS = 30
GRU_CELL_FWD_OPS = 17  # 2 sigmoids, 1 tanh, 3 multiplies, 2 adds per hidden unit
GRU_CELL_BWD_OPS = 22

# Per time step: the [x_t, h_{t-1}] input, the activated gates and the cell state.
Cell = tuple[Tensor, Tensor, Tensor]


def _gates(info: LayerInfo) -> int:
    """Gates per hidden unit: an LSTM's four (input, forget, cell, output), a GRU's
    three (reset, update, new)."""
    return 3 if isinstance(info.layer, wm.Gru) else 4


@register
class LstmRule(LayerRule):
    """``lstm``: gates ``[x_t, h_{t-1}] . W`` of width 4H per step; backward through time.
    ``gru``: the same with three gates (3H; PyTorch's two products, of ``x_t`` and of
    ``h_{t-1}``, as one of their concatenation: the same MACs), no cell state (``h``
    carried instead) and PyTorch's two biases per gate."""

    kinds = ("lstm", "gru")
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Lstm | wm.Gru)
        x = one_input(layer, in_shapes, Layout.SEQUENCE)
        return Shape(Layout.SEQUENCE, (x.dims[0], layer.hidden_size))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name, n, b = info.layer.name, ctx.n, ctx.b
        steps, d = info.in_shapes[0].dims
        hidden = info.out_shape.dims[1]
        gates = _gates(info)
        weight = ctx.param(
            name, "W", gates * hidden * (d + hidden), ParamKind.WEIGHT, gates * hidden
        )
        ctx.param(name, "b", 2 * gates * hidden, ParamKind.BIAS, 2 * gates * hidden)
        gru = gates == 3
        h_prev: Tensor | None = None
        c_prev: Tensor | None = None
        cells: list[Cell] = []
        outputs = []
        for t in range(steps):
            xh = ctx.t(f"{name}.xh{t}", TensorKind.ACTIVATION, n * (d + hidden))
            b.alias(xh, [xs[0]] + ([h_prev] if h_prev is not None else []))
            pre = ctx.t(f"{name}.gates{t}", TensorKind.ACTIVATION, n * gates * hidden)
            b.gemm(
                f"{name}.fwd.t{t}",
                name,
                Phase.FWD,
                m=n,
                n=gates * hidden,
                k=d + hidden,
                count=1,
                a=xh,
                b=weight,
                c=pre,
            )
            act = ctx.t(f"{name}.act{t}", TensorKind.ACTIVATION, n * gates * hidden)
            h = ctx.t(f"{name}.h{t}", TensorKind.ACTIVATION, n * hidden)
            cell = h if gru else ctx.t(f"{name}.c{t}", TensorKind.ACTIVATION, n * hidden)
            state = h_prev if gru else c_prev
            reads = [pre] + ([state] if state is not None else [])
            b.vector(
                f"{name}.cell.t{t}",
                name,
                Phase.FWD,
                n * hidden,
                GRU_CELL_FWD_OPS if gru else LSTM_CELL_FWD_OPS,
                reads,
                [act, h] if gru else [act, h, cell],
                op_class=VectorClass.TRANSCENDENTAL,  # the gates' sigmoids and tanh
            )
            cells.append((xh, act, cell))
            outputs.append(h)
            h_prev, c_prev = h, cell
        b.alias(y, outputs)
        ctx.saved[name] = cells

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        name, n, b = info.layer.name, ctx.n, ctx.b
        steps, d = info.in_shapes[0].dims
        hidden = info.out_shape.dims[1]
        gates = _gates(info)
        weight = ctx.parameter(name, "W")
        cells: list[Cell] = ctx.saved[name]
        wants_x = ctx.wants(info)
        dgates_all = []
        dxh_parts = []
        dxh_next: Tensor | None = None
        dc_next: Tensor | None = None
        for t in reversed(range(steps)):
            _xh, act, cell = cells[t]
            dgates = ctx.t(f"{name}.dgates{t}", TensorKind.GRADIENT, n * gates * hidden)
            dc = ctx.t(f"{name}.dc{t}", TensorKind.GRADIENT, n * hidden)
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
                GRU_CELL_BWD_OPS if gates == 3 else LSTM_CELL_BWD_OPS,
                reads,
                [dgates, dc],
                op_class=VectorClass.ELEMENTWISE,  # from the saved gate outputs
            )
            dgates_all.append(dgates)
            width = (d if wants_x else 0) + (hidden if t > 0 else 0)
            dxh_next = None
            if width:
                dxh = ctx.t(f"{name}.dxh{t}", TensorKind.GRADIENT, n * width)
                b.gemm(
                    f"{name}.dx.t{t}",
                    name,
                    Phase.BWD_INPUT,
                    m=n,
                    n=width,
                    k=gates * hidden,
                    count=1,
                    a=dgates,
                    b=weight.weight,
                    c=dxh,
                )
                dxh_parts.append(dxh)
                dxh_next = dxh
            dc_next = dc
        all_dgates = b.alias(
            ctx.t(f"{name}.dgates", TensorKind.GRADIENT, n * steps * gates * hidden), dgates_all
        )
        all_xh = b.alias(
            ctx.t(f"{name}.xh", TensorKind.ACTIVATION, n * steps * (d + hidden)),
            [xh for xh, _, _ in cells],
        )
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=gates * hidden,
            n=d + hidden,
            k=n * steps,
            count=1,
            a=all_dgates,
            b=all_xh,
            c=weight.gradient,
        )
        ctx.grad_done(name, "W", op)
        ctx.bias_grad(name, "b", all_dgates)
        if wants_x:
            ctx.give(info, 0, b.alias(ctx.dx(info), dxh_parts))
