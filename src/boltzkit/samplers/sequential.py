"""Single-site (sequential) updates of a layer with lateral connections, fused over chunks of units.

A layer with laterals ``L`` (SRBM visible units, S2 Eq. 46; BM hidden units, S2 Eq. 49) has no
conditionally independent units, so one sweep updates its units one at a time in index order,
unit ``i`` with the per-unit rule of the operator applied to its input given all other units::

    a_i = b_i + sum_{m != l} (x_m W_ml)_i + sum_{j != i} L_ij x_j

Done unit by unit this costs one tiny operation per unit and chain group. Here the units are
processed in chunks of ``B``. All uniforms of the sweep are drawn at once (``u`` of shape
``(n_chains, n_units)``; unit ``i`` uses ``u[:, i]``). Within a chunk the new values ``y`` solve
the triangular system::

    y_k = rule(a_k^0 + sum_{j < k in chunk} L_kj (y_j - x_j), x_k, u_k)

(``a^0``: the inputs before the chunk, ``x``: the values before the chunk). It is solved by the
fixed-point iteration ``y <- rule(a^0 + (y - x) tril(L_cc, -1)^T, x, u)``: after ``t`` iterations
the first ``t`` units are final (forward substitution), the fixed point is unique, and the
iteration stops as soon as ``y`` no longer changes, usually after a few iterations. The result is
*exactly* the unit-by-unit sweep with the same uniforms. After the chunk, the inputs of the units
still to come are brought up to date with one product ``a[:, later] += (y - x) L[chunk, later]``,
so a sweep costs the products of half an ``(n_chains, n) x (n, n)`` multiplication (the upper
triangle) plus the small in-chunk iterations.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from boltzkit._numerics import as_beta
from boltzkit.state import ChainState


class UnitRule(Protocol):
    """What the sweep needs of an operator: its per-unit rule given uniforms
    (:meth:`boltzkit.samplers.operators.UnitOperator.decide`)."""

    def decide(self, logits: Tensor, current: Tensor, u: Tensor, layer: int) -> Tensor: ...


#: Units per chunk of the fused sequential sweep on a CPU (fastest among 16-96 for 784 units).
CHUNK = 48
#: Units per chunk on a GPU: kernel launches dominate there, so the whole layer is one chunk
#: (784 units: 1.8 ms a sweep on an H100, against 8.5 ms in chunks of 48; BENCHMARKS.md).
CUDA_CHUNK = 1024


def lateral_block(terms: tuple[tuple[float, Tensor], ...], rows: slice, cols: slice) -> Tensor:
    """``sum_t s_t L_t[rows, cols]`` of a layer's lateral terms."""
    out: Tensor | None = None
    for scale, lat in terms:
        part = lat[rows, cols]
        part = part if scale == 1.0 else part * scale
        out = part if out is None else out + part
    assert out is not None
    return out


@torch.no_grad()
def sequential_update(
    model,
    state: ChainState,
    layer: int,
    operator: UnitRule,
    *,
    beta: float | Tensor = 1.0,
    generator: torch.Generator,
    chunk: int | None = None,
) -> Tensor:
    """New values of ``layer`` after one single-site sweep of ``operator`` over its units.

    Parameters
    ----------
    model
        Gives ``layer_input(state, layer)`` (unscaled inputs, laterals included) and
        ``laterals(layer)`` (``(scale, L)`` terms).
    state
        Current state of all chains; only ``layer`` changes.
    layer
        The layer to update (units in index order).
    operator
        A per-unit rule (:meth:`~boltzkit.samplers.operators.UnitOperator.decide`).
    beta
        Inverse temperature: a float or one per chain, shape ``(n_chains,)``.
    generator
        Source of the ``(n_chains, n_units)`` uniforms of the sweep.
    chunk
        Units per chunk (any value gives the same result); default :data:`CHUNK` on a CPU,
        :data:`CUDA_CHUNK` on a GPU.

    Returns
    -------
    Tensor
        The layer's new {0, 1} values, shape ``(n_chains, n_units)``.
    """
    x = state.layers[layer].clone()
    n_units = x.shape[1]
    if chunk is None:
        chunk = CHUNK if x.device.type == "cpu" else CUDA_CHUNK
    u = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    terms = model.laterals(layer)
    if n_units == 0:
        return x
    a = model.layer_input(state, layer)  # unscaled input, updated as units change
    b = as_beta(beta, a)
    for i0 in range(0, n_units, chunk):
        i1 = min(i0 + chunk, n_units)
        rows = slice(i0, i1)
        # (y - x) tril(L_cc, -1)^T = (y - x) triu(L_cc, 1) for a symmetric L
        upper = torch.triu(lateral_block(terms, rows, rows), diagonal=1)
        a0, x0, u0 = a[:, rows], x[:, rows].clone(), u[:, rows]
        y = _decide(operator, a0, x0, u0, b, layer)
        for _ in range(i1 - i0):  # converges in at most B iterations
            z = _decide(operator, torch.addmm(a0, y - x0, upper), x0, u0, b, layer)
            if torch.equal(z, y):
                break
            y = z
        x[:, rows] = y
        if i1 == n_units:
            break
        d = y - x0
        rest = a[:, i1:]  # the units already swept need no new input
        for scale, lat in terms:
            rest.addmm_(d, lat[rows, i1:], alpha=scale)
    return x


def _decide(operator: UnitRule, inputs: Tensor, current: Tensor, u: Tensor, beta, layer: int) -> Tensor:
    """The rule's new values given the uniforms (:meth:`UnitOperator.decide`)."""
    logits = inputs if isinstance(beta, float) and beta == 1.0 else inputs * beta
    return operator.decide(logits, current, u, layer)


@torch.no_grad()
def sequential_update_reference(
    model,
    state: ChainState,
    layer: int,
    operator: UnitRule,
    *,
    beta: float | Tensor = 1.0,
    generator: torch.Generator,
) -> Tensor:
    """The same sweep computed unit by unit from the model's inputs (slow; for tests)."""
    x = state.layers[layer]
    u = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    for i in range(x.shape[1]):
        inputs = model.layer_input(state, layer)[:, i : i + 1]
        b = as_beta(beta, inputs)
        cur = state.layers[layer][:, i : i + 1]
        new = _decide(operator, inputs, cur, u[:, i : i + 1], b, layer)
        col = state.layers[layer].clone()
        col[:, i : i + 1] = new
        state = state.with_layer(layer, col)
    return state.layers[layer]


__all__ = ["CHUNK", "CUDA_CHUNK", "lateral_block", "sequential_update", "sequential_update_reference"]
