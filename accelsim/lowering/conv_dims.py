"""The GEMM dimensions of a convolution (im2col), for the conv rule and ``accelsim layer``.

On its own so that a single-layer query does not load every layer rule and the
workload specs they read.
"""

from __future__ import annotations

from accelsim.graph.ops import Phase


def conv_gemm_dims(
    phase: Phase,
    batch: int,
    channels: tuple[int, int],
    size: tuple[int, int, int, int],
    kernel: tuple[int, int],
    groups: int = 1,
) -> tuple[int, int, int]:
    """``(m, n, k)`` of one of a convolution's ``groups`` GEMMs in ``phase`` (im2col).

    Args:
        channels: Input and output channels ``(C, K)``.
        size: Input and output sizes ``(H, W, P, Q)``.
        kernel: Filter size ``(R, S)``.

    ``dX`` is the dense transposed convolution (stride 1, or zero-inserted);
    :func:`~accelsim.lowering.rules.conv.strided_dx_shapes` splits a strided one.
    """
    (c, k_out), (h, w, p, q), (r, s) = channels, size, kernel
    cg, kg = c // groups, k_out // groups
    if phase is Phase.FWD:
        return batch * p * q, kg, cg * r * s
    if phase is Phase.BWD_INPUT:
        return batch * h * w, cg, kg * r * s
    return kg, cg * r * s, batch * p * q
