"""Second-order TAP (Thouless-Anderson-Palmer) approximation of ``log Z``: a non-bound estimate.

Adding the second-order (Onsager) term of the Plefka expansion to the naive mean-field free
energy gives, with ``var(m) = m - m^2`` (Gabrie, Tramel & Krzakala 2015; ALGORITHMS.md section 10,
written here for any pairwise coupling matrix ``Q`` of the family)::

    -log Z ~ min_m Gamma(m),
    Gamma(m) = -H(m) - b^T m - 1/2 m^T Q m - 1/4 var(m)^T (Q o Q) var(m)

(for an RBM the last term is ``-1/2 var(m_v)^T (W o W) var(m_h)``, paysage's
``gibbs_free_energy``). Its stationary points solve, layer by layer::

    m_l = sigma(b_l + sum_m W_lm m_m - (m_l - 1/2) o sum_m (W_lm o W_lm) var(m_m))

iterated here with damping (``m <- damping m_old + (1 - damping) m_new``), odd layers then even
layers, from several starts (1/2 and random); the converged start with the lowest ``Gamma`` is
kept. TAP is *not* a bound: it can land on either side of ``log Z`` (3x2 example of ALGORITHMS.md:
3.872160 against the exact 3.870813). At zero couplings it is exact, like mean-field.

The Onsager term reuses the model's own products: a model with the squared couplings ``W o W``
(and zero biases) gives ``sum_m (W_lm o W_lm) var_m`` as its layer input and ``-1/2 var^T (Q o Q)
var`` as its energy.
"""

from __future__ import annotations

import time
import warnings

import torch

from boltzkit.models.boltzmann import BoltzmannMachine, binary_entropy
from boltzkit.state import ChainState
from boltzkit.variational.bp import check_settings
from boltzkit.variational.result import ConvergenceWarning, VariationalResult
from boltzkit.variational.starts import start_means

N_STARTS = 5
DAMPING = 0.5
TOL = 1e-9
MAX_ITER = 1000


def _squared(model: BoltzmannMachine) -> BoltzmannMachine:
    """The model with couplings ``W o W`` and zero biases (float64)."""
    keys = model.coupling_keys
    couplings = {k: model.coupling(*k).detach().to(torch.float64) ** 2 for k in keys}
    return BoltzmannMachine(model.layer_sizes, couplings, None, dtype=torch.float64, device=model.device)


def _variances(state: ChainState) -> ChainState:
    return ChainState(tuple(x - x * x for x in state.layers))


@torch.no_grad()
def tap_free_energy(model: BoltzmannMachine, means: ChainState) -> torch.Tensor:
    """``-Gamma(m)`` of each row of ``means`` (the TAP estimate of ``log Z`` at ``m``), float64."""
    m64 = model.as_float64()
    entropy = sum(binary_entropy(x).sum(1) for x in means.layers)
    return entropy - m64.energy_of(means) - 0.5 * _squared(m64).energy_of(_variances(means))


@torch.no_grad()
def tap_log_z(
    model: BoltzmannMachine,
    *,
    n_starts: int = N_STARTS,
    seed: int | torch.Generator | None = 0,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> VariationalResult:
    """Second-order TAP estimate of ``log Z`` (``bound="none"``).

    Parameters
    ----------
    model
        Any member of the family (float64, on its device).
    n_starts, seed
        Starts run side by side: all 1/2, then uniform random from ``seed``.
    damping, tol, max_iter
        Damped block iteration of the TAP equations; a start has converged when its largest
        change ``|m_new - m_old|`` (undamped) is below ``tol``.

    Returns
    -------
    VariationalResult
        The converged start with the largest ``-Gamma`` (all starts if none converged, with a
        :class:`ConvergenceWarning`); ``marginals`` are its magnetisations.
    """
    check_settings(damping, tol, max_iter)
    t0 = time.perf_counter()
    m64 = model.as_float64()
    sq = _squared(m64)
    state = start_means(m64, n_starts, seed)
    order = [b.layer for b in m64.blocks()]
    rows = torch.full((n_starts,), float("inf"), dtype=torch.float64, device=m64.device)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the sweeps done are reported)
        rows = torch.zeros_like(rows)
        for l in order:
            old = state.layers[l]
            onsager = sq.layer_input(_variances(state), l)
            new = torch.sigmoid(m64.layer_input(state, l) - (old - 0.5) * onsager)
            rows = torch.maximum(rows, (new - old).abs().amax(1))
            state = state.with_layer(l, damping * old + (1.0 - damping) * new if damping else new)
        if float(rows.max()) < tol:
            break
    values = tap_free_energy(m64, state)
    done = rows < tol
    converged = bool(done.any())
    candidates = torch.where(done, values, torch.full_like(values, -float("inf"))) if converged else values
    best = int(torch.argmax(candidates))
    if not converged:
        warnings.warn(
            f"TAP iteration did not converge from any of {n_starts} starts (residual "
            f"{float(rows.min()):.3g} after {it} sweeps); try more damping or more sweeps",
            ConvergenceWarning,
            stacklevel=2,
        )
    return VariationalResult(
        method="tap",
        log_z=float(values[best]),
        bound="none",
        converged=converged,
        iterations=it,
        residual=float(rows[best]),
        seconds=time.perf_counter() - t0,
        settings={
            "n_starts": n_starts,
            "seed": seed if isinstance(seed, int) else None,
            "damping": damping,
            "tol": tol,
            "max_iter": max_iter,
            "best_start": best,
            "start_values": values.tolist(),
            "converged_starts": int(done.sum()),
            "device": str(m64.device),
        },
        marginals=tuple(x[best] for x in state.layers),
    )


__all__ = ["tap_free_energy", "tap_log_z"]
