"""Naive mean-field lower bound on ``log Z`` (S2 Sec. 2.3, Eqs. 7-8; ALGORITHMS.md section 10).

Over fully factorised distributions ``q(x) = prod_i mu_i^x_i (1 - mu_i)^(1 - x_i)`` Jensen's
inequality (S2 Eqs. 5-6) gives, for *every* ``mu`` in ``[0, 1]^N``::

    log Z >= -E(mu) + H(mu) = sum_{l<m} mu_l^T W_lm mu_m + 1/2 sum_l mu_l^T L_l mu_l + sum_l b_l^T mu_l
                              - sum_i [mu_i log mu_i + (1 - mu_i) log(1 - mu_i)]

(S2 Eq. 8 with ``theta_ij = W_ij``). The bound is maximised by the fixed-point updates of
:func:`boltzkit.models.mean_field.mean_field` with no layer given: a layer without laterals is
updated as a block (each block update is an exact coordinate ascent step), a layer with laterals
unit by unit (``sequential=True``, also exact coordinate ascent), so the bound never decreases
from sweep to sweep. Because the objective is not concave it has several local maxima: several
starts run side by side (row 0 from 1/2, then every layer-wise ordered corner, the others uniform
at random; :mod:`boltzkit.variational.starts`) and the best bound is kept.
"""

from __future__ import annotations

import time

import torch

from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.mean_field import damping_acts, mean_field, mean_field_bound
from boltzkit.variational.result import VariationalResult
from boltzkit.variational.starts import default_n_starts, start_means

TOL = 1e-9
MAX_ITER = 1000


@torch.no_grad()
def mean_field_log_z(
    model: BoltzmannMachine,
    *,
    n_starts: int | None = None,
    seed: int | torch.Generator | None = 0,
    sequential: bool = True,
    damping: float = 0.5,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> VariationalResult:
    """The naive mean-field lower bound on ``log Z``, best of ``n_starts`` starts.

    Parameters
    ----------
    model
        Any member of the family (evaluated in float64 on its device).
    n_starts
        Starts run side by side: all 1/2, each layer-wise ordered corner, then uniform random
        from ``seed`` (:mod:`boltzkit.variational.starts`); ``None``: all the corners (up to four
        layers) and two random ones (:func:`~boltzkit.variational.starts.default_n_starts`).
    seed
        Seed (or generator) of the random starts.
    sequential
        Layers with laterals unit by unit (monotone); ``False``: the whole layer at once, damped
        (faster per sweep, not monotone; the value is still a lower bound).
    damping
        Damping of the whole-layer update of layers with laterals (``sequential=False`` only;
        recorded as ``None`` where it cannot act).
    tol, max_iter
        Stop when ``max |mu_new - mu_old| < tol`` over all starts, or after ``max_iter`` sweeps.

    Returns
    -------
    VariationalResult
        ``bound="lower"`` (whatever the convergence); ``marginals`` are the best start's means;
        settings include every start's bound (``start_bounds``).
    """
    t0 = time.perf_counter()
    m64 = model.as_float64()
    n_starts = default_n_starts(m64) if n_starts is None else n_starts
    init = start_means(m64, n_starts, seed)
    q = mean_field(m64, {}, damping=damping, tol=tol, max_iter=max_iter, sequential=sequential, init=init)
    bounds = mean_field_bound(m64, q)
    best = int(torch.argmax(bounds))
    return VariationalResult(
        method="mean-field",
        log_z=float(bounds[best]),
        bound="lower",
        converged=q.converged,
        iterations=q.iterations,
        residual=q.residual,
        seconds=time.perf_counter() - t0,
        settings={
            "n_starts": n_starts,
            "seed": seed if isinstance(seed, int) else None,
            "sequential": sequential,
            "damping": damping if damping_acts(m64, sequential=sequential) else None,  # None: nothing damped
            "tol": tol,
            "max_iter": max_iter,
            "best_start": best,
            "start_bounds": bounds.tolist(),
            "device": str(m64.device),
        },
        marginals=tuple(x[best] for x in q.means.layers),
    )


__all__ = ["mean_field_log_z"]
