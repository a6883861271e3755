"""Simple importance sampling (SIS) along a path: the start model is the proposal.

Salakhutdinov (2008), Sec. 3.1, Eq. 20: with independent draws ``x_i ~ p_A`` from a tractable
proposal whose ``Z_A`` is known::

    Z_B / Z_A = E_{p_A}[ p*_B(x) / p*_A(x) ] ~= (1/M) sum_i w_i,    w_i = p*_B(x_i) / p*_A(x_i)

Along a path, ``p*_A = p*_0`` and ``p*_B = p*_1``: a base-rate model (S&M 2008, Eq. 18) as the
proposal for ``log Z`` of a model, or one model as the proposal for another
(``log Z_B - log Z_A``). This is AIS with the two-point schedule ``[0, 1]`` (with ``K = 1`` the AIS
weight of S2 Eq. 29 is ``p*_1(x_1) / p*_0(x_1)``; the same holds for any ``K`` with "dumb" kernels
``T_k = identity``, Sec. 3.2), and uses the same random numbers as
:func:`~boltzkit.estimators.ais.ais` with ``betas=2`` and the same seed. The variance of ``w`` is
huge (or infinite) unless ``p_A`` is close to ``p_B``, which is why AIS exists; SIS is the
baseline.
"""

from __future__ import annotations

import time

import torch

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import path_settings, record, reverse_check, seed_label, sync
from boltzkit.estimators.paths import AnnealingPath, check_path
from boltzkit.estimators.probes import probe_check
from boltzkit.estimators.reliability import warn_unreliable
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.schedules import linear_betas
from boltzkit.samplers.operators import make_operator


@torch.no_grad()
def sis(
    path: AnnealingPath, *, n_chains: int = 100, seed: int | torch.Generator | None = 0, check: bool = True
) -> LogZResult:
    """Simple importance sampling with the path's start as proposal (S2 Eq. 20).

    Parameters
    ----------
    path
        :func:`~boltzkit.estimators.paths.base_rate_path` (``log Z``) or
        :func:`~boltzkit.estimators.paths.ratio_path` (``log Z_B - log Z_A``).
    n_chains
        Number of independent proposal draws ``M``.
    seed
        Seed or generator; same seed, same numbers.
    check
        Where the target can be sampled exactly (a model small enough to enumerate), also run the
        reverse estimate from as many exact samples (:func:`~boltzkit.estimators.ais.reverse_check`
        with the two-point schedule): proposal draws that never reach part of the target's mass
        give healthy-looking weights and an estimate far too low, and only the reverse end shows
        it. Otherwise the target's own chains look for mass the draws missed
        (:func:`~boltzkit.estimators.probes.probe_check`: ``n_chains`` chains of 100 sweeps, far
        more than the estimate's own cost). The main estimate's numbers do not change.

    Returns
    -------
    LogZResult
        ``method="sis"``, ``n_steps=1``; ``log_weights[i] = log p*_1(x_i) - log p*_0(x_i)``,
        float64, shape ``(n_chains,)``.
    """
    check_path(path, "sis")
    if isinstance(n_chains, bool) or int(n_chains) < 1:
        raise BoltzkitError("the number of importance samples must be at least 1", got=n_chains)
    t0 = time.perf_counter()
    gen = make_generator(seed, path.device)
    x = path.sample_start(int(n_chains), gen)
    log_w = path.log_f(x, 1.0) - path.log_f(x, 0.0)
    sync(path.device)
    settings = path_settings(path)
    settings["proposal"] = (
        "base-rate model (independent units)"
        if not path.is_ratio
        else ("exact samples of A" if path.exact_start else "Gibbs chains of A (approximate)")
    )
    if path.is_ratio and not path.exact_start:
        settings["warning"] = "proposal samples are approximate: the estimate is not exactly unbiased"
    settings["seed"] = seed_label(seed)
    if check and not path.end_is_exact and int(n_chains) >= 2:
        settings["checks"] = [probe_check(path, x, log_w, gen)]
    result = record("sis", path, log_w, n_steps=1, seconds=time.perf_counter() - t0, **settings)
    if check and path.end_is_exact:
        two_points = linear_betas(2).to(path.device)
        reverse = reverse_check(path, two_points, result, int(n_chains), make_operator("gibbs"), 1, gen)
        if not reverse["passed"]:
            reverse["advice"] = (
                "use AIS instead (--method ais): annealing reaches mass that independent draws miss"
            )
        settings["checks"] = [reverse]
        result = record("sis", path, log_w, n_steps=1, seconds=time.perf_counter() - t0, **settings)
    warn_unreliable("the simple importance sampling estimate of log Z", result.reliability())
    return result


__all__ = ["sis"]
