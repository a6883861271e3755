"""Whether an importance-weighted estimate can be trusted: Pareto k-hat, effective sample size, and
a verdict with its reason.

A band ``log(Z_hat ± 3 sigma_hat)`` is only as good as the sample variance of the weights behind it.
When the weights have a heavy right tail, a few rare, huge weights carry the estimate, the sample
variance underestimates the true one (or the true one is infinite), and the band is confidently
wrong. Pareto-smoothed importance sampling (Vehtari, Simpson, Gelman, Yao & Gabry, "Pareto smoothed
importance sampling", JMLR 25, 2024) diagnoses this by fitting a generalised Pareto distribution to
the largest weights: its shape ``k`` tells how many moments the weight distribution has (finite
variance needs ``k < 1/2``), and their empirical rule is that estimates with ``k-hat > 0.7`` are not
reliable whatever the sample size.

The fit is that of Zhang & Stephens (2009, "A new and efficient estimation method for the
generalized Pareto distribution", Technometrics 51): a posterior mean of ``b = -k / sigma`` over a
grid of candidates weighted by their profile likelihood, then ``k = mean log(1 - b x)``, shrunk
towards 1/2 by a weakly informative prior (10 pseudo-observations), as in PSIS. The tail is the
``M = min(ceil(0.2 S), ceil(3 sqrt(S)))`` largest of ``S`` weights, above the next largest.

:func:`assess` combines k-hat with the Kish effective sample size and a check for a degenerate
spread (every chain with the same weight on a path that is not trivial: the chains moved in
lockstep and the spread says nothing about the error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

#: Above this Pareto k-hat an importance-sampling estimate is unreliable (Vehtari et al. 2024).
K_HAT_THRESHOLD = 0.7
#: Below this fraction of the number of weights, the effective sample size is too small.
ESS_FRACTION = 0.1
#: Fewest weights for which k-hat is estimated.
MIN_WEIGHTS = 5
#: Fewest weights in the fitted tail: a Pareto fit to fewer says nothing (with one exceedance it
#: returns its prior's value, 0.22, whatever the weights), so below ``5 / 0.2 = 21`` weights k-hat
#: is not estimated.
MIN_TAIL = 5
#: Fewest runs whose spread is taken to bound the error: with fewer, the sample standard deviation
#: is itself too noisy for a 3-sigma band (the band of 3 runs of a model's AIS missed its exact log Z
#: by 2.7 nats, a probe of 2026-12-07), and neither k-hat (21 runs) nor the ESS fraction (an ESS of
#: at least 1 is 10% of 10) can judge the tail.
MIN_RUNS = 10
#: Above this share of the summed weights one run carries the estimate, whatever the number of
#: runs (the ESS fraction cannot show it with ten runs or fewer: an ESS is never below 1).
MAX_WEIGHT_SHARE = 0.9


def _gpd_shape(x: np.ndarray) -> float:
    """Shape ``k`` of a generalised Pareto distribution fitted to exceedances ``x > 0`` (sorted
    increasingly), by Zhang & Stephens (2009) with the weakly informative prior of PSIS."""
    n = x.size
    prior_bs, prior_k = 3.0, 10.0
    m = 30 + int(math.sqrt(n))
    bs = 1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))
    bs /= prior_bs * x[int(n / 4.0 + 0.5) - 1]
    bs += 1.0 / x[-1]
    ks = np.log1p(-bs[:, None] * x[None, :]).mean(axis=1)
    log_lik = n * (np.log(-bs / ks) - ks - 1.0)
    weights = 1.0 / np.exp(log_lik[None, :] - log_lik[:, None]).sum(axis=1)
    keep = weights >= 10 * np.finfo(float).eps  # drop negligible candidates, renormalise
    weights, bs = weights[keep], bs[keep]
    weights /= weights.sum()
    b_post = float((bs * weights).sum())
    k = float(np.log1p(-b_post * x).mean())
    return (n * k + prior_k * 0.5) / (n + prior_k)


def pareto_k_hat(log_weights: Tensor | np.ndarray) -> float:
    """Pareto shape ``k-hat`` of the largest importance weights (PSIS diagnostic).

    Parameters
    ----------
    log_weights
        Log-weights, any shape (flattened), float64 or convertible.

    Returns
    -------
    float
        ``k-hat``; ``nan`` with fewer than :data:`MIN_WEIGHTS` finite weights, a tail of fewer
        than :data:`MIN_TAIL` of them, or a tail without spread. ``k-hat < 0.5``: the weights
        have a finite variance; ``0.5 <= k-hat <= 0.7``: usable with care; above 0.7: the
        estimate is unreliable.
    """
    if isinstance(log_weights, Tensor):
        lw = log_weights.detach().to(torch.float64).flatten().cpu().numpy()
    else:
        lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = lw[np.isfinite(lw)]
    s = lw.size
    if s < MIN_WEIGHTS:
        return math.nan
    m = int(min(math.ceil(0.2 * s), math.ceil(3.0 * math.sqrt(s))))
    if m < MIN_TAIL:
        return math.nan
    lw = np.sort(lw - lw.max())
    tail = lw[-m:]
    cutoff = lw[-m - 1] if s > m else lw[0]
    x = np.exp(tail) - math.exp(cutoff)
    if not np.all(np.isfinite(x)) or x[-1] <= 0 or x[int(m / 4.0 + 0.5) - 1] <= 0:
        return math.nan
    return _gpd_shape(x)


def effective_sample_size(log_weights: Tensor) -> float:
    """Kish's ``(sum w)^2 / sum w^2`` of the importance weights."""
    lw = log_weights.detach().to(torch.float64).flatten()
    return float(torch.exp(2 * torch.logsumexp(lw, 0) - torch.logsumexp(2 * lw, 0)))


@dataclass(frozen=True)
class Reliability:
    """The verdict on an importance-weighted estimate.

    Attributes
    ----------
    reliable
        Whether the band can be trusted.
    reason
        What is wrong (``None`` when nothing is).
    advice
        What to do about it (``None`` when nothing is wrong).
    k_hat
        Pareto shape of the largest weights (``nan`` when it cannot be estimated).
    ess_fraction
        Effective sample size over the number of weights.
    """

    reliable: bool
    reason: str | None
    advice: str | None
    k_hat: float
    ess_fraction: float

    def as_dict(self) -> dict[str, object]:
        return {
            "reliable": self.reliable,
            "reliability_reason": self.reason,
            "advice": self.advice,
            "k_hat": None if not math.isfinite(self.k_hat) else self.k_hat,
        }


def assess(log_weights: Tensor, *, trivial: bool = False, annealed: bool = True) -> Reliability:
    """The verdict on one vector of importance log-weights.

    Parameters
    ----------
    log_weights
        The estimate's log-weights, shape ``(M,)``.
    trivial
        The path is trivial (its two ends are the same distribution), so equal weights are right.
    annealed
        The weights come from annealing (the advice then suggests more betas; otherwise a better
        proposal).

    Returns
    -------
    Reliability
    """
    lw = log_weights.detach().to(torch.float64).flatten().cpu()
    n = lw.numel()
    k_hat = pareto_k_hat(lw)
    ess = effective_sample_size(lw) if n else 0.0
    frac = ess / n if n else 0.0
    more = "more intermediate distributions (--betas)" if annealed else "AIS instead (--method ais)"
    problems: list[str] = []
    n_nan, n_inf = int(torch.isnan(lw).sum()), int((lw == math.inf).sum())
    if n and (n_nan or n_inf or not bool((lw > -math.inf).any())):
        problems.append(
            f"the weights are not numbers to average ({n_nan} NaN, {n_inf} infinite, "
            f"{int((lw == -math.inf).sum())} of zero weight, of {n}): the estimate is undefined "
            "(a numerical overflow, or a path whose target the runs never reach)"
        )
    if n < 2 and not trivial:
        problems.append(
            f"{'one weight' if n == 1 else 'no weights'}: a single sample has no spread to measure the "
            "error by, so the zero-width band says nothing about it"
        )
    elif n < MIN_RUNS and not trivial:
        problems.append(
            f"only {n} runs: too few for their spread to bound the error (at least {MIN_RUNS}; the "
            "heavy-tail check needs 21)"
        )
    if (
        n >= 2
        and not trivial
        and bool(torch.isfinite(lw).all())  # (a weight of zero beside others is no lockstep)
        and float(lw.max() - lw.min()) <= 1e-9 * max(1.0, float(lw.abs().max()))
    ):
        problems.append(
            f"all {n} weights are equal although the path's two ends differ: the chains moved in "
            "lockstep (a start model with its mass on one state, or too few steps), so the zero-width "
            "band says nothing about the error"
        )
    if math.isfinite(k_hat) and k_hat > K_HAT_THRESHOLD:
        problems.append(
            f"the largest weights have a heavy tail (Pareto k-hat {k_hat:.2f} > {K_HAT_THRESHOLD}): a "
            "few chains carry the estimate and the band is too narrow"
        )
    if n >= 2 and frac < ESS_FRACTION:
        problems.append(f"the effective sample size is {ess:.1f} of {n} (below {ESS_FRACTION:.0%})")
    elif (
        n >= 2
        and not trivial
        and (share := float(torch.exp(lw.max() - torch.logsumexp(lw, 0)))) > MAX_WEIGHT_SHARE
    ):
        problems.append(
            f"one run carries the estimate ({share:.0%} of the summed weights; effective sample size "
            f"{ess:.1f} of {n}): the runs' spread says nothing about its error"
        )
    if not problems:
        return Reliability(True, None, None, k_hat, frac)
    advice = f"use {more}, more chains (--chains), or a base model closer to the target (--base-rate-data)"
    return Reliability(False, "; ".join(problems), advice, k_hat, frac)


def with_checks(verdict: Reliability, checks: list[dict[str, object]] | None) -> Reliability:
    """``verdict`` with the failed checks of a record folded in.

    A check is a dict ``{"name", "passed", "reason", "advice"}`` that an estimator adds to its
    record's ``settings["checks"]`` for what the weights cannot show: a schedule that moves the
    estimate when halved (:func:`boltzkit.estimators.ais.ais`), two ends of a sandwich that
    disagree beyond their noise (:func:`boltzkit.estimators.reverse.sandwich`).
    """
    failed = [c for c in (checks or []) if not c.get("passed", True)]
    if not failed:
        return verdict
    reasons = [str(c["reason"]) for c in failed]
    if not verdict.reliable and verdict.reason:
        reasons.insert(0, verdict.reason)
    advice = "; ".join(str(c["advice"]) for c in failed if c.get("advice")) or verdict.advice
    return Reliability(False, "; ".join(reasons), advice, verdict.k_hat, verdict.ess_fraction)


#: The command line's options that a verdict's advice names, and the keywords of the Python
#: functions (``estimate_log_z``, ``ais``, ...) that set the same things.
PYTHON_KEYWORDS = {
    "--betas": "betas=",
    "--chains": "n_chains=",
    "--base-rate-data": "base_rate_data= (or base_rate_path(model, data=...))",
    "--start-chain-steps": "start_chain_steps=",
    "--method": "method= (estimate_log_z) or the estimator's function",
    "--max-bits": "max_bits=",
    "--device": "device=",
}


def warn_unreliable(what: str, verdict: Reliability | None) -> None:
    """Raise an :class:`~boltzkit.errors.UnreliableEstimateWarning` when ``verdict`` is unreliable
    (at the caller's line: :func:`boltzkit.errors.warn`). The advice names the command line's
    options; a Python caller is told the keywords that set the same things (:data:`PYTHON_KEYWORDS`;
    the command line prints the verdict itself and ignores this warning)."""
    if verdict is None or verdict.reliable:
        return
    from boltzkit.errors import UnreliableEstimateWarning, warn

    named = [
        f"{flag}: {keyword}" for flag, keyword in PYTHON_KEYWORDS.items() if flag in (verdict.advice or "")
    ]
    warn(
        f"{what} is unreliable: {verdict.reason} (advice: {verdict.advice}"
        + (f"; in Python {', '.join(named)}" if named else "")
        + ")",
        UnreliableEstimateWarning,
    )


def combine(verdicts: dict[str, Reliability]) -> Reliability:
    """One verdict from several labelled ones (e.g. the two sides of bridge sampling): reliable
    when all are, reasons prefixed by their label, the largest k-hat and smallest ESS fraction."""
    bad = {name: v for name, v in verdicts.items() if not v.reliable}
    k_hats = [v.k_hat for v in verdicts.values() if math.isfinite(v.k_hat)]
    k_hat = max(k_hats) if k_hats else math.nan
    frac = min(v.ess_fraction for v in verdicts.values())
    if not bad:
        return Reliability(True, None, None, k_hat, frac)
    reason = "; ".join(f"{name}: {v.reason}" for name, v in bad.items())
    return Reliability(False, reason, next(iter(bad.values())).advice, k_hat, frac)


__all__ = [
    "ESS_FRACTION",
    "K_HAT_THRESHOLD",
    "MAX_WEIGHT_SHARE",
    "MIN_TAIL",
    "Reliability",
    "assess",
    "combine",
    "effective_sample_size",
    "pareto_k_hat",
    "warn_unreliable",
    "with_checks",
]
