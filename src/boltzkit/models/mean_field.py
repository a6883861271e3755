"""Mean-field posteriors of Boltzmann machines and the variational lower bound on log p*(v).

With some layers given (the data ``v``), a fully factorised ``q(h) = prod_j mu_j^h_j (1 - mu_j)^(1 -
h_j)`` over the other units gives, by Jensen's inequality (Salakhutdinov 2008, "S2", Eqs. 52-53)::

    log p*(v) = log sum_h exp(-E(v, h)) >= -E(v, mu) + H(mu),
    H(mu) = -sum_j [mu_j log mu_j + (1 - mu_j) log(1 - mu_j)]

(``E_q[E(v, h)] = E(v, mu)`` exactly: the energy is linear in each unit and laterals have a zero
diagonal). S2's Eq. 53 prints the entropy term with the wrong sign (``+ sum mu log mu``); the bound
needs ``+ H(mu)``. The bound is maximised by the fixed-point equations (S2 Eq. 54)::

    mu_l <- sigma(b_l + sum_{m != l} mu_m W_ml + mu_l L_l)

Layers without laterals are updated a whole layer at a time (each such update is exact coordinate
ascent, so the bound never decreases); layers with laterals either all at once with damping
``mu <- damping mu_old + (1 - damping) sigma(...)`` (S2 Sec. 5: "the mean-field updates ... were
damped") or one unit at a time (``sequential``, monotone). Any ``mu`` gives a valid lower bound;
the iteration only tightens it, and stops at a stated tolerance on ``max |mu_new - mu_old|``.

:func:`unit_dbm_mean_field` and :func:`unit_dbm_mean_field_bound` are the same posterior and bound
for DBMs whose visible layer has a unit type (Gaussian or categorical), where the visible layer
enters through its coupling statistic ``phi(v)``. Both live here, below learning and estimators,
because both use them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine, binary_entropy
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.state import ChainState


@dataclass(frozen=True)
class MeanField:
    """A converged (or stopped) mean-field posterior.

    Attributes
    ----------
    means
        All layers: the given values and the means ``mu`` of the others, each ``(N, n_l)``.
    iterations
        Sweeps done.
    residual
        ``max |mu_new - mu_old|`` of the last sweep.
    converged
        Whether the residual fell below the tolerance.
    """

    means: ChainState
    iterations: int
    residual: float
    converged: bool


def _check(damping: float, tol: float, max_iter: int) -> None:
    if not 0.0 <= float(damping) < 1.0:
        raise BoltzkitError("mean-field damping must lie in [0, 1)", got=damping)
    if not float(tol) > 0.0:
        raise BoltzkitError("mean-field tolerance must be positive", got=tol)
    if isinstance(max_iter, bool) or int(max_iter) < 1:
        raise BoltzkitError("mean-field max_iter must be at least 1", got=max_iter)


def damping_acts(model: BoltzmannMachine, given: Iterable[int] = (), *, sequential: bool = False) -> bool:
    """Whether :func:`mean_field`'s ``damping`` changes anything: only a free layer (not in
    ``given``) with laterals updated all at once (not ``sequential``) is damped. The one test
    behind every record's ``damping`` (``None`` where it cannot act)."""
    given = {int(l) for l in given}
    return not sequential and any(model.has_laterals(b.layer) for b in model.blocks() if b.layer not in given)


@torch.no_grad()
def mean_field(
    model: BoltzmannMachine,
    given: Mapping[int, Tensor],
    *,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 500,
    sequential: bool = False,
    init: ChainState | None = None,
) -> MeanField:
    """Mean-field fixed point of ``q`` over the layers not in ``given`` (S2 Eq. 54).

    Parameters
    ----------
    model
        The model.
    given
        ``{layer: values}`` held fixed, each ``(N, n_l)`` (usually ``{0: v}``); may be empty when
        ``init`` is given (mean-field over the whole model: the ``log Z`` lower bound of
        ``boltzkit.variational``).
    damping
        Weight of the old value in the update of a layer with laterals (0: undamped); no effect
        without such a layer or with ``sequential`` (:func:`damping_acts`).
    tol
        Stop when ``max |mu_new - mu_old| < tol``.
    max_iter
        At most this many sweeps.
    sequential
        Update the units of layers with laterals one at a time in index order (monotone; the
        layer's inputs are kept up to date by rank-one updates, so a sweep costs about one
        product).
    init
        Start values of the free layers (default: one bottom-up pass from zeros).

    Returns
    -------
    MeanField
    """
    _check(damping, tol, max_iter)
    dtype, device = model.dtype, model.device
    given = {int(l): x.to(device=device, dtype=dtype) for l, x in given.items()}
    if not given and init is None:
        raise BoltzkitError(
            "mean_field needs given layers or an init state", hint="pass init= to approximate the whole model"
        )
    n = next(iter(given.values())).shape[0] if given else init.layers[0].shape[0]
    free = [b.layer for b in model.blocks() if b.layer not in given]
    if init is not None:
        layers = [given.get(l, init.layers[l].to(device=device, dtype=dtype)) for l in range(model.n_layers)]
    else:
        sizes = model.layer_sizes
        layers = [given.get(l, torch.zeros(n, s, dtype=dtype, device=device)) for l, s in enumerate(sizes)]
    state = ChainState(tuple(layers))
    residual, converged, it = float("inf"), False, 0
    for it in range(1, int(max_iter) + 1):
        first = it == 1 and init is None
        residual = 0.0
        for l in free:
            old = state.layers[l]
            if model.has_laterals(l) and sequential:
                new = old.clone()
                a = model.layer_input(state, l)  # kept up to date as units change (rank-one updates)
                for i in range(new.shape[1]):
                    mu_i = torch.sigmoid(a[:, i])
                    d = mu_i - new[:, i]
                    new[:, i] = mu_i
                    for scale, lateral in model.laterals(l):
                        a.addr_(d, lateral[i], alpha=scale)
            else:
                new = torch.sigmoid(model.layer_input(state, l))
                if model.has_laterals(l) and damping and not first:
                    new = damping * old + (1.0 - damping) * new
            if new.numel():
                residual = max(residual, float((new - old).abs().max()))
            state = state.with_layer(l, new)
        if residual < tol and not first:
            converged = True
            break
    return MeanField(means=state, iterations=it, residual=residual, converged=converged)


@torch.no_grad()
def mean_field_bound(model: BoltzmannMachine, posterior: MeanField) -> Tensor:
    """``-E(v, mu) + H(mu)``: a lower bound on ``log p*(v)`` for each row, float64 (S2 Eq. 53 with
    the entropy's sign corrected)."""
    means = posterior.means
    entropy = sum(binary_entropy(x).sum(1) for x in means.layers)  # 0 for the given 0/1 layers
    return -model.energy_of(means) + entropy


@torch.no_grad()
def unit_dbm_mean_field(
    model: UnitDBM, v: Tensor, *, tol: float = 1e-6, max_iter: int = 100, mu: list[Tensor] | None = None
) -> tuple[list[Tensor], dict[str, Any]]:
    """The mean-field marginals ``mu_1, ..., mu_L`` of ``q(h | v)`` in a DBM with a visible unit
    type (:class:`~boltzkit.models.unit_dbm.UnitDBM`; S2 Eq. 7, the DBM's as in Salakhutdinov &
    Hinton 2009): the odd layers given the even ones, then the even ones, until no marginal moves by
    more than ``tol``. Each layer's update is the exact maximiser of the bound given its neighbours,
    so the bound never falls. ``mu``: a start (default: one bottom-up pass, each layer from the one
    below alone). Used by learning (the positive phase) and by the estimators (the bound)."""
    v = v.to(model.dtype)
    visible_input = model.visible_units.couple(v, model.w0_flat(), model.visible_params())
    if mu is None:
        mu, below = [], visible_input
        for l in range(1, model.n_layers):
            mu.append(torch.sigmoid(below + model.biases[l]))
            if l + 1 < model.n_layers:
                below = mu[-1] @ model.weights[l]
    mu = [m.clone() for m in mu]
    residual, iterations = math.inf, 0
    for iterations in range(1, int(max_iter) + 1):  # noqa: B007
        residual = 0.0
        for parity in (1, 0):
            for l in range(1, model.n_layers):
                if l % 2 != parity:
                    continue
                state = ChainState((v, *mu))
                new = torch.sigmoid(
                    model.hidden_input(state, l, visible_input=visible_input if l == 1 else None)
                )
                residual = max(residual, float((new - mu[l - 1]).abs().max()))
                mu[l - 1] = new
        if residual <= tol:
            break
    return mu, {
        "mean_field_iterations": iterations,
        "mean_field_residual": residual,
        "mean_field_converged": residual <= tol,
    }


@torch.no_grad()
def unit_dbm_mean_field_bound(model: UnitDBM, v: Tensor, **kwargs: Any) -> tuple[Tensor, dict[str, Any]]:
    """The mean-field lower bound of ``log p*(v)`` per row in a unit-type DBM,
    ``-self_energy(v) + phi(v) W_0 mu_1 + sum_l b_l'mu_l + sum_l mu_l'W_l mu_{l+1} + sum_l H(mu_l)``
    (S2 Eq. 7), and the fixed point's record (:func:`unit_dbm_mean_field`)."""
    v = v.to(model.dtype)
    mu, details = unit_dbm_mean_field(model, v, **kwargs)
    state = ChainState((v, *mu))
    # -E at the marginals is the bound's energy term (E is linear in each layer's units)
    bound = -model.energy(state)
    for m in mu:
        bound = bound + binary_entropy(m).sum(-1)
    return bound, details


__all__ = [
    "MeanField",
    "damping_acts",
    "mean_field",
    "mean_field_bound",
    "unit_dbm_mean_field",
    "unit_dbm_mean_field_bound",
]
