"""Bridge sampling of ``log Z`` (and of ``log Z_B / Z_A``).

Salakhutdinov (2008), Sec. 3.3, Eqs. 30-31: with a bridge ``p*_AB`` overlapping both ``p_A`` and
``p_B``::

    Z_B / Z_A = E_{p_A}[ p*_AB / p*_A ] / E_{p_B}[ p*_AB / p*_B ]                          (30)

and with the geometric bridge ``p*_AB = sqrt(p*_A p*_B)``::

    Z_B / Z_A = E_{p_A}[ sqrt(p*_B / p*_A) ] / E_{p_B}[ sqrt(p*_A / p*_B) ]                 (31)

estimated by the two sample means over ``v_A ~ p_A`` and ``v_B ~ p_B``. Unlike simple importance
sampling (Eq. 20) it only needs the supports to overlap. Writing ``l(v) = p*_B(v) / p*_A(v)``, the
(asymptotically) optimal bridge of Meng & Wong (1996, Eq. 4.1) is ``p*_AB ∝ p*_A p*_B /
(s_B p*_B + s_A r p*_A)`` with ``s_A = M_A / (M_A + M_B)``, ``s_B = M_B / (M_A + M_B)``, and leads
to the fixed-point iteration::

    r <- [ mean_{v ~ A} l / (s_B l + s_A r) ] / [ mean_{v ~ B} 1 / (s_B l + s_A r) ]

started at the geometric estimate. Everything is done in log space.

Error estimate: the two means ``m_A, m_B`` are independent, so by the delta method::

    Var(log r_hat) ~= Var(m_A) / m_A^2 + Var(m_B) / m_B^2,    sigma_r = r_hat * sqrt(...)

and the bands are ``log(r_hat ± k sigma_r)`` as for the other estimators. For the optimal bridge
the bridge's dependence on ``r_hat`` itself is ignored (the usual first-order approximation).
When the samples of the RBM come from Gibbs chains rather than exact enumeration, the estimate
is approximate and says so in ``settings``.

Along a path (:mod:`boltzkit.estimators.paths`) ``A`` is its start (a base-rate model, S&M 2008
Eq. 18, or a model of interest) and ``B`` its target, with ``p*_A = p*_0`` and ``p*_B = p*_1``
(summed-out units summed out): ``l(x) = p*_1(x) / p*_0(x)``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import path_settings, seed_label, sync
from boltzkit.estimators.paths import AnnealingPath, check_path
from boltzkit.estimators.probes import chain_check, probe_check
from boltzkit.estimators.reliability import assess, combine, warn_unreliable, with_checks
from boltzkit.estimators.result import BridgeEstimate, SpreadResult, effective_sample_size
from boltzkit.estimators.reverse import relax
from boltzkit.samplers.operators import TransitionOperator, make_operator

BRIDGES = ("geometric", "optimal")


# ------------------------------------------------------------------------------ the estimator
def _log_mean_exp(x: Tensor) -> float:
    return float(torch.logsumexp(x, 0)) - math.log(x.numel())


def _rel_se(log_w: Tensor) -> float:
    """``sd(w) / (sqrt(M) mean(w))`` (unbiased sd), computed with the weights shifted by their max."""
    m = log_w.numel()
    if m < 2:
        return 0.0
    w = torch.exp(log_w - log_w.max())
    return float(w.std(unbiased=True) / w.mean()) / math.sqrt(m)


def bridge_log_ratio_from_log_l(
    log_l_a: Tensor,
    log_l_b: Tensor,
    *,
    bridge: str = "geometric",
    max_iter: int = 200,
    tol: float = 1e-10,
    trivial: bool = False,
) -> BridgeEstimate:
    """Bridge-sampling estimate of ``log(Z_B / Z_A)`` from log-likelihood ratios (Eqs. 30-31).

    Parameters
    ----------
    log_l_a
        ``log p*_B(v) - log p*_A(v)`` at samples ``v ~ p_A``, shape ``(M_A,)``.
    log_l_b
        The same function at samples ``v ~ p_B``, shape ``(M_B,)``.
    bridge
        ``"geometric"`` (Eq. 31) or ``"optimal"`` (Meng & Wong 1996, iterated from the geometric
        estimate).
    max_iter, tol
        Fixed-point iterations of the optimal bridge stop when ``|Δ log r| < tol``.

    Returns
    -------
    BridgeEstimate
    """
    la = log_l_a.detach().to(torch.float64).flatten().cpu()
    lb = log_l_b.detach().to(torch.float64).flatten().cpu()
    if la.numel() == 0 or lb.numel() == 0:
        raise BoltzkitError(
            "bridge sampling needs samples of both distributions", got=(la.numel(), lb.numel())
        )
    if bridge not in BRIDGES:
        raise BoltzkitError("unknown bridge", got=bridge, expected="'geometric' or 'optimal'")
    # geometric bridge (Eq. 31): weights sqrt(l) on A samples and 1/sqrt(l) on B samples
    wa, wb = 0.5 * la, -0.5 * lb
    log_r = _log_mean_exp(wa) - _log_mean_exp(wb)
    iterations, converged = 0, True
    if bridge == "optimal":
        n_a, n_b = la.numel(), lb.numel()
        log_s_a, log_s_b = math.log(n_a / (n_a + n_b)), math.log(n_b / (n_a + n_b))
        converged = False
        for iterations in range(1, int(max_iter) + 1):  # noqa: B007 - the count is reported
            c = log_s_a + log_r
            wa = la - torch.logaddexp(log_s_b + la, torch.full_like(la, c))
            wb = -torch.logaddexp(log_s_b + lb, torch.full_like(lb, c))
            new = _log_mean_exp(wa) - _log_mean_exp(wb)
            done = abs(new - log_r) < tol
            log_r = new
            if done:
                converged = True
                break
        c = log_s_a + log_r
        wa = la - torch.logaddexp(log_s_b + la, torch.full_like(la, c))
        wb = -torch.logaddexp(log_s_b + lb, torch.full_like(lb, c))
        log_r = _log_mean_exp(wa) - _log_mean_exp(wb)
    rel = math.hypot(_rel_se(wa), _rel_se(wb))
    log_sigma = log_r + math.log(rel) if rel > 0 else -math.inf
    return BridgeEstimate(
        log_r=log_r,
        log_sigma=log_sigma,
        ess_a=effective_sample_size(wa),
        ess_b=effective_sample_size(wb),
        verdict=combine(
            {
                "samples of A": assess(wa, annealed=False, trivial=trivial),
                "samples of B": assess(wb, annealed=False, trivial=trivial),
            }
        ),
        iterations=iterations,
        converged=converged,
    )


def _check(n_chains: int, chain_steps: int, bridge: str) -> None:
    if isinstance(n_chains, bool) or int(n_chains) < 1:
        raise BoltzkitError("bridge sampling needs at least 1 sample per side", got=n_chains)
    if int(chain_steps) < 0:
        raise BoltzkitError("chain_steps must be non-negative", got=chain_steps)
    if bridge not in BRIDGES:
        raise BoltzkitError("unknown bridge", got=bridge, expected="'geometric' or 'optimal'")


@torch.no_grad()
def bridge(
    path: AnnealingPath,
    *,
    n_chains: int = 100,
    bridge: str = "geometric",
    sampler: TransitionOperator | str = "gibbs",
    chain_steps: int = 1000,
    max_iter: int = 200,
    tol: float = 1e-10,
    seed: int | torch.Generator | None = 0,
    progress: bool = False,
    check: bool = True,
) -> SpreadResult:
    """Bridge sampling between the two ends of ``path`` (S2 Eqs. 30-31).

    Parameters
    ----------
    path
        :func:`~boltzkit.estimators.paths.base_rate_path` (``log Z``) or
        :func:`~boltzkit.estimators.paths.ratio_path` (``log Z_B - log Z_A``).
    n_chains
        Samples drawn from each of ``p_0`` and ``p_1`` (``M_A = M_B = n_chains``).
    bridge
        ``"geometric"`` (``sqrt(p*_A p*_B)``, Eq. 31) or ``"optimal"`` (Meng & Wong 1996).
    sampler, chain_steps
        When the target cannot be enumerated, its samples are the end states of
        ``chain_steps`` transitions of ``sampler`` started from samples of ``p_0`` (one chain per
        sample); the record then carries a warning.
    max_iter, tol
        Of the optimal-bridge iteration.
    seed, progress
        Randomness and progress bars.
    check
        Where the target's samples are chains, also run chains of the target started away from
        the draws: chains started at ``p_0`` can share its blind spot. Their weights after 100
        sweeps against the draws' and the target chains' own
        (:func:`~boltzkit.estimators.probes.probe_check`), and 4 per target chain after as many
        transitions as those, against where those end
        (:func:`~boltzkit.estimators.probes.chain_check`; 4 times the chains' cost). The
        estimate's numbers do not change.

    Returns
    -------
    SpreadResult
        ``method="bridge"``: ``log Z_A + log r_hat`` (or the ratio), bands ``log(r_hat ± k
        sigma_hat)`` shifted alike; ``settings`` name the bridge, the samples of each side, their
        ESS and the number of iterations.
    """
    check_path(path, "bridge")
    _check(n_chains, chain_steps, bridge)
    t0 = time.perf_counter()
    gen = make_generator(seed, path.device)
    op = make_operator(sampler)
    n = int(n_chains)
    x_a = path.sample_start(n, gen)
    exact_a = path.exact_start
    if path.end_is_exact:
        x_b = path.sample_end(n, gen)
        exact_b, label_b = True, "exact samples of the target (enumeration)"
    else:
        x_b = relax(path, path.sample_start(n, gen), chain_steps, op, gen, progress)
        exact_b = False
        label_b = f"{int(chain_steps)} {op.name} sweeps of the target from start samples (approximate)"

    def log_l(x) -> Tensor:
        return path.log_f(x, 1.0) - path.log_f(x, 0.0)

    l_a, l_b = log_l(x_a), log_l(x_b)
    est = bridge_log_ratio_from_log_l(
        l_a, l_b, bridge=bridge, max_iter=max_iter, tol=tol, trivial=path.trivial
    )
    sync(path.device)
    settings: dict[str, Any] = {
        "bridge": bridge,
        **path_settings(path),
        "samples_a": "exact samples of the start" if exact_a else "Gibbs chains of the start (approximate)",
        "samples_b": label_b,
        "seed": seed_label(seed),
        "n_samples_a": n,
        "n_samples_b": n,
        "ess_a": est.ess_a,
        "ess_b": est.ess_b,
        "bridge_iterations": est.iterations,
    }
    settings.pop("start", None)
    if not (exact_a and exact_b):
        settings["sampler"] = op.name
        settings["warning"] = "some samples are approximate (Markov chains): the estimate may be biased"
    if not est.converged:
        settings["bridge_warning"] = "the optimal-bridge iteration did not converge"
    verdict = est.verdict
    if check and not exact_b and n >= 2:  # chains of the target started at p_0 may share its blind spot
        settings["checks"] = [
            probe_check(path, x_a, torch.maximum(l_a.max(), l_b.max()), gen),
            chain_check(path, x_b, int(chain_steps), op, gen),
        ]
        verdict = with_checks(verdict, settings["checks"])
    start = path.log_z_start
    estimate = (0.0 if start is None else start) + est.log_r
    if path.is_ratio:
        log_z = None if path.log_z_a is None else path.log_z_a + estimate
    else:
        log_z = estimate
    result = SpreadResult(
        method="bridge",
        log_z=log_z,
        log_z_start=float(path.offset if path.is_ratio else start),
        n_steps=1,
        is_ratio=path.is_ratio,
        reference_log_z=path.log_z_a if path.is_ratio else None,
        settings=settings,
        seconds=time.perf_counter() - t0,
        log_mean=est.log_r,
        log_sigma=est.log_sigma,
        n_samples=2 * n,
        ess_value=min(est.ess_a, est.ess_b),
        verdict=verdict,
    )
    warn_unreliable("the bridge sampling estimate of log Z", result.reliability())
    return result


__all__ = ["BRIDGES", "bridge", "bridge_log_ratio_from_log_l"]
