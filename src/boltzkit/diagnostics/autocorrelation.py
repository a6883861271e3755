"""Autocorrelation functions and integrated autocorrelation times of Markov chains.

Brügge, Fischer & Igel (2013, "S3", Sec. 4.3) compare Gibbs sampling and flip-the-state by the
autocorrelation of the energy ``E(v_k, h_k)`` along a chain (S3 Eq. 16)::

    R(dt) = E[(E_k - mu)(E_{k+dt} - mu)] / sigma^2

and its integrated autocorrelation time (S3 Eq. 17)::

    tau = sum_{dt = -inf}^{inf} R(dt) = 1 + 2 sum_{dt >= 1} R(dt)

``l tau`` consecutive samples estimate a mean as well as ``l`` independent ones. Summing the
sample autocorrelations of a finite chain is noisy, so ``tau`` is estimated in three ways:

* :func:`integrated_time_ar` (what S3 uses, after Thompson 2010 and his SamplerCompare ``ar.act``):
  fit an autoregressive model AR(p) by Yule-Walker with the order chosen by AIC (R's ``ar.yw``) and
  take the model's ``tau = (1 - sum_k phi_k rho_k) / (1 - sum_k phi_k)^2``;
* :func:`integrated_time_sokal`: the windowed sum ``1 + 2 sum_{dt <= M} R(dt)`` with Sokal's
  automatic window, the smallest ``M >= c tau(M)`` (the estimator of emcee's ``integrated_time``);
* :func:`integrated_time_geyer`: Geyer's (1992) initial monotone sequence estimator.

An AR fit of bounded order holds only a decay over about as many steps as its order; a chain that
also switches slowly between modes keeps a small correlation over thousands of steps. Then
:func:`misses_slow_tail` compares the AR time with :func:`acf_sum`, the autocorrelation function
summed to its last lag, and :func:`tail_undecayed` says where that lag is too short for the check
(the autocorrelation has not died out by then).

Several chains of the same quantity (shape ``(n_chains, n_steps)``) share one estimate: their
normalised autocorrelation functions are averaged (as emcee does); the AR estimator fits each
chain and averages the times. Everything is float64 numpy. :func:`energy_trace` records the
energies of chains run by any operator.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit.errors import BoltzkitError, whole_number
from boltzkit.models.base import EnergyModel
from boltzkit.samplers.driver import run_chains
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

#: Sokal's window constant (emcee's default): the window is the smallest ``M >= c tau(M)``.
SOKAL_C = 5.0
#: A windowed estimate is trusted when the chain is at least this many ``tau`` long (emcee's tol).
RELIABLE_LENGTHS = 50.0


@dataclass(frozen=True)
class IntegratedTime:
    """An integrated autocorrelation time and how it was obtained.

    Attributes
    ----------
    tau
        The estimate (mean over chains for ``method="ar"``).
    method
        ``"ar"``, ``"sokal"`` or ``"geyer"``.
    n_steps, n_chains
        Length and number of the chains.
    window
        Lags summed (``"sokal"``, ``"geyer"``); ``None`` for ``"ar"``.
    order
        AR order chosen by AIC (``"ar"``; the largest over chains); else ``None``.
    per_chain
        ``tau`` of each chain (``"ar"`` only; the windowed estimators pool the chains).
    reliable
        Whether the chains are at least :data:`RELIABLE_LENGTHS` times ``tau`` long and, with
        several chains, their means differ no more than ``tau`` allows (:func:`between_chains`)
        and their own windowed sums no more than their length allows
        (:func:`chains_disagree_on_tau`).
    reason
        Why not, beyond the chains' length: several chains whose means sit apart
        (:func:`between_chains`) or whose own sums spread as intermittent chains' do
        (:func:`chains_disagree_on_tau`), a Sokal window that stops before the function has
        decayed or whose sum meets the length rule where an AR fit of the same function does not,
        a Geyer sequence stopped by a negative pair sum (``None`` otherwise; several
        reasons joined by ``"; and "``).
    """

    tau: float
    method: str
    n_steps: int
    n_chains: int
    window: int | None = None
    order: int | None = None
    per_chain: tuple[float, ...] = ()
    reliable: bool = True
    reason: str | None = None

    def __float__(self) -> float:
        return float(self.tau)


#: What a constant series means, said wherever one is refused.
CONSTANT_SERIES_HINT = (
    "the recorded quantity (the energy, say) never changed: either it is the same in every state "
    "(a model without couplings or biases has energy 0 everywhere; record another statistic), or the "
    "chains stayed in one state or among states of one energy. Then sample longer, start elsewhere, "
    "or use a sampler that can leave it (flip-the-state, parallel tempering)."
)


def _as_chains(x: np.ndarray | Tensor | Sequence[float], *, min_steps: int = 3) -> np.ndarray:
    """``x`` as a float64 array of shape ``(n_chains, n_steps)``, de-meaned per chain."""
    a = _as_series(x, min_steps=min_steps)
    return a - a.mean(axis=1, keepdims=True)


def _as_series(x: np.ndarray | Tensor | Sequence[float], *, min_steps: int) -> np.ndarray:
    """``x`` as a float64 array of shape ``(n_chains, n_steps)``, checked, as it is."""
    if isinstance(x, Tensor):
        x = x.detach().cpu().to(torch.float64).numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < min_steps:
        raise BoltzkitError(
            "a chain's series must have shape (n_steps,) or (n_chains, n_steps)",
            got=f"shape {a.shape}",
            expected=f"at least {min_steps} steps",
        )
    if not np.isfinite(a).all():
        raise BoltzkitError("the series holds NaN or infinite values", got=f"shape {a.shape}")
    return a


def _autocovariance(a: np.ndarray) -> np.ndarray:
    """Biased autocovariances ``(1/n) sum_k a_k a_{k+dt}`` of de-meaned rows, by FFT, ``(m, n)``."""
    n = a.shape[1]
    size = 1 << (2 * n - 1).bit_length()  # zero padding: no circular wrap-around
    f = np.fft.rfft(a, n=size, axis=1)
    return np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n] / n


#: How :func:`autocorrelation` centres several chains: each on its own mean, or all on theirs.
CENTERINGS = ("chain", "pooled")


def check_center(center: str) -> None:
    """Refuse a centering that is not one of :data:`CENTERINGS`."""
    if center not in CENTERINGS:
        raise BoltzkitError(
            "unknown centering of the chains", got=repr(center), expected=" or ".join(CENTERINGS)
        )


def autocorrelation(
    x: np.ndarray | Tensor | Sequence[float], max_lag: int | None = None, *, center: str = "chain"
) -> np.ndarray:
    """Normalised autocorrelation function ``R(dt)``, ``dt = 0 .. max_lag`` (S3 Eq. 16).

    Parameters
    ----------
    x
        A series, shape ``(n_steps,)``, or several chains of it, ``(n_chains, n_steps)``.
    max_lag
        Last lag returned (default ``n_steps - 1``).
    center
        ``"chain"`` (emcee's): each chain de-meaned and normalised on its own, the functions
        averaged. Each chain's own mean takes away about ``tau / n_steps`` at every lag, so a
        windowed sum over ``M`` lags is low by about ``2 M / n_steps`` of itself however many
        chains there are. ``"pooled"``: the chains (of one stationary process) de-meaned by their
        common mean, ``R(dt) = sum_chains sum_k x_k x_{k+dt} / sum_chains sum_k x_k^2``: the bias
        shrinks with the chains' total length, and chains stuck apart show as correlation.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(max_lag + 1,)``, ``R(0) = 1`` (``"chain"``: a constant chain contributes
        nothing).
    """
    check_center(center)
    if center == "pooled":
        raw = _as_series(x, min_steps=2)
        acov = _autocovariance(raw - raw.mean()).sum(axis=0)
        if not acov[0] > 0:
            raise BoltzkitError(
                "the series is constant: its autocorrelation is undefined",
                got=f"shape {raw.shape}",
                hint=CONSTANT_SERIES_HINT,
            )
        acf = acov / acov[0]
    else:
        a = _as_chains(x, min_steps=2)
        acov = _autocovariance(a)
        var = acov[:, :1]
        live = var[:, 0] > 0
        if not live.any():
            raise BoltzkitError(
                "the series is constant: its autocorrelation is undefined",
                got=f"shape {a.shape}",
                hint=CONSTANT_SERIES_HINT,
            )
        acf = (acov[live] / var[live]).mean(axis=0)
    if max_lag is not None:
        if isinstance(max_lag, bool) or not isinstance(max_lag, int) or max_lag < 0:
            raise BoltzkitError("max_lag must be a non-negative integer", got=repr(max_lag))
        acf = acf[: max_lag + 1]
    return acf


#: Sokal's window is unreliable where the autocorrelation at its last lag lies more than this many
#: Bartlett standard errors from zero (:func:`sokal_time_of_acf`).
WINDOW_DECAY_Z = 4.0
#: :func:`between_chains` fails ``tau`` when its chi-square statistic lies above this quantile
#: (a false alarm on 1 in 1,000 sets of chains whose ``tau`` is right).
BETWEEN_CHAINS_LEVEL = 1e-3


def between_chains(x: np.ndarray, tau: float) -> str | None:
    """Whether ``m >= 2`` chains' means differ more than ``tau`` allows; the reason if so.

    Of chains of one stationary process, ``n`` steps each, the mean of each has variance about
    ``s^2 tau / n`` (``s^2`` the variance within the chains; Sokal 1997, Eq. 2.20), so
    ``T = (m - 1) var(means) / (s^2 tau / n)`` is about chi-square with ``m - 1`` degrees of freedom
    (Gelman & Rubin's between-chain variance, 1992, against ``tau`` rather than against the
    within-chain variance alone). ``T`` above its ``1 - BETWEEN_CHAINS_LEVEL`` quantile means that
    the chains, each de-meaned on its own by the per-chain estimators, sit apart: a slow mode that
    ``tau`` leaves out, or chains stuck where they started (a chain that never moved among chains
    that did shows there when its value is improbable for them). ``x`` is the raw series, shape
    ``(m, n)``.
    """
    m, n = x.shape
    if m < 2 or not (math.isfinite(tau) and tau > 0):
        return None
    within = float(x.var(axis=1).mean())
    if within <= 0:
        return None
    from scipy.stats import chi2

    implied = n * float(x.mean(axis=1).var(ddof=1)) / within  # the tau the means' spread implies
    statistic = (m - 1) * implied / tau
    if statistic <= float(chi2.ppf(1.0 - BETWEEN_CHAINS_LEVEL, m - 1)):
        return None
    return (
        f"the {m} chains' means differ as if tau were about {implied:.3g} (beyond what this estimate "
        f"allows at the 1e-3 level of a chi-square on {m - 1} degrees of freedom): they sit apart, in "
        "modes the chains do not leave or where they started, and tau leaves that out; sample longer, "
        "start the chains elsewhere, or use a sampler that moves between modes (flip-the-state, parallel "
        "tempering)"
    )


def _initial_pairs(rho: np.ndarray) -> tuple[np.ndarray, int]:
    """Geyer's (1992) pair sums ``Gamma_k = R(2k) + R(2k + 1)`` of a normalised autocorrelation
    function and the index ``k`` of the first that is not positive (their number if none is):
    the initial positive sequence ends at lag ``2k``."""
    m = rho.size // 2
    gamma = rho[: 2 * m : 2] + rho[1 : 2 * m : 2]
    stop = np.flatnonzero(gamma <= 0)
    return gamma, int(stop[0]) if stop.size else gamma.size


def _geyer_sum(rho: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Geyer's (1992) initial monotone sequence estimate of ``tau`` from a normalised
    autocorrelation function ``rho``: the pair sums (:func:`_initial_pairs`) summed while positive,
    each capped by the one before, ``tau = -1 + 2 sum_k Gamma_k`` (1 where the first is not
    positive); also the pair sums and the index where the sequence stopped."""
    gamma, k = _initial_pairs(rho)
    mono = np.minimum.accumulate(gamma[:k]) if k else gamma[:0]
    return (float(-1.0 + 2.0 * mono.sum()) if k else 1.0), gamma, k


def chains_disagree_on_tau(x: np.ndarray | Tensor | Sequence[float], min_window: int = 0) -> str | None:
    """Whether ``m >= 2`` chains' own windowed sums ``tau_i(M) = 1 + 2 sum_{dt=1}^{M} R_i(dt)``
    spread so much more than their length allows that ``tau`` is less precise than the length
    rule assumes; the reason if so.

    Of a process whose sample autocorrelations obey Bartlett's formula (a linear, Gaussian-like
    process: AR chains, the energy of the small RBMs tried), each chain's sum has at most about
    the standard deviation :func:`windowed_sd` ``(tau_M, M, n)`` about their mean ``tau_M``
    (Madras & Sokal 1988; about 35% above the truth for AR(1) at ``M = 5 tau``, several times for
    an oscillating AR(2); ``tau_M`` held at 1 or more, since the sums of an anticorrelated chain
    spread as a sum of independent lags does), so ``T = (m - 1) var(tau_i) / windowed_sd^2`` is
    at most about chi-square with ``m - 1`` degrees of freedom. A chain that switches rarely
    between modes breaks the formula: its correlation lives in a few switches, which some chains
    see and others do not, and the chains' sums differ several times more than their noise (10
    chains of 20,000 sweeps of a 6 x 4 RBM of exact ``tau`` 42.7: 5-8 times; every estimator
    40-90% low, docs/results.md). Where ``T`` lies above its ``1 - BETWEEN_CHAINS_LEVEL``
    quantile, the sums are ``r = sd(tau_i) / windowed_sd`` times as spread as the formula allows,
    so ``tau`` is as precise as from chains of a linear process ``n / r^2`` steps long would
    be; the check fails where that is shorter than :data:`RELIABLE_LENGTHS` ``tau_M``, the rule
    that every estimate here meets on the chains' real length. ``r`` is a property of the
    process, not of ``n``: intermittent chains that are not multimodal (stochastic volatility, a
    review found ``r`` about 1.45) need ``r^2`` times the length rule too. Chains already shorter
    than the rule are left to it. ``x`` is the raw series, shape ``(m, n)``; the lags ``M`` summed
    are the larger of ``min_window`` and the end of Geyer's initial positive sequence of the
    chains' mean function (:func:`autocorrelation`'s, each chain centred on its own mean): a slow
    part a short window leaves out is then inside it. Chains that never moved are left to
    :func:`between_chains`.
    """
    x = _as_series(x, min_steps=3)
    m, n = x.shape
    if m < 2:
        return None
    acov = _autocovariance(x - x.mean(axis=1, keepdims=True))
    live = acov[:, 0] > 0
    if int(live.sum()) < 2:
        return None
    acf = acov[live] / acov[live, :1]  # each live chain's normalised function
    _, k = _initial_pairs(acf.mean(axis=0))
    window = min(max(int(min_window), 2 * k), n - 1)
    if window < 1:
        return None
    sums = 1.0 + 2.0 * acf[:, 1 : window + 1].sum(axis=1)  # each chain's tau(M)
    tau = float(sums.mean())
    if n < RELIABLE_LENGTHS * tau:
        return None  # too short by the length rule already, where the chi-square is not calibrated
    predicted = windowed_sd(max(tau, 1.0), window, n)
    from scipy.stats import chi2

    k = sums.size
    ratio = float(sums.std(ddof=1)) / predicted
    if (k - 1) * ratio**2 <= float(chi2.ppf(1.0 - BETWEEN_CHAINS_LEVEL, k - 1)):
        return None
    effective = n / ratio**2
    if effective >= RELIABLE_LENGTHS * tau:
        return None
    return (
        f"the {k} chains' own sums of the autocorrelation to lag {window} (mean {tau:.3g}) range from "
        f"{float(sums.min()):.3g} to {float(sums.max()):.3g}, {ratio:.1f} times as spread as chains of {n} "
        f"steps of a linear process would be: tau is as precise as from chains of about {effective:.0f} such "
        f"steps, fewer than {RELIABLE_LENGTHS:.0f} tau. The chains are intermittent: most often they switch "
        "rarely between modes, which some chains saw and others did not, and tau is then most likely low; "
        "run longer chains, or a sampler that moves between modes (flip-the-state, parallel tempering)"
    )


def _with_between(result: IntegratedTime, raw: np.ndarray) -> IntegratedTime:
    """``result`` failed by :func:`between_chains` or :func:`chains_disagree_on_tau` on the raw
    chains ``raw`` where they say so.

    An estimate is tested at the top of what it allows: each chain de-meaned on its own lowers a
    sum over ``M`` lags by about ``(2M + 1) / n`` of itself, and its own noise is
    :func:`windowed_sd` (an AR fit is held to ``M = c tau``, Sokal's window); with many chains the
    chi-square is sharp enough to see both. The chains' own sums are compared at that window or
    beyond (:func:`chains_disagree_on_tau`)."""
    tau = result.tau
    window = result.window
    if math.isfinite(tau) and tau > 0:
        # an AR fit is held to the window Sokal's rule would give it
        window = window if window is not None else math.ceil(SOKAL_C * tau)
        n = raw.shape[1]
        tau = tau * (1.0 + (2 * window + 1) / n) + 3.0 * windowed_sd(tau, window, raw.size)
    reason = between_chains(raw, tau)
    if reason is None:
        reason = chains_disagree_on_tau(raw, window or 0)
    if reason is None:
        return result
    reason = reason if result.reason is None else f"{result.reason}; and {reason}"
    return replace(result, reliable=False, reason=reason)


def integrated_time_sokal(
    x: np.ndarray | Tensor | Sequence[float], *, c: float = SOKAL_C, center: str = "chain"
) -> IntegratedTime:
    """``tau`` by the windowed sum ``1 + 2 sum_{dt=1}^{M} R(dt)`` with Sokal's automatic window.

    ``M`` is the smallest lag with ``M >= c tau(M)`` (Sokal 1997; Goodman & Weare 2010; emcee's
    ``integrated_time``); the estimate is flagged unreliable when the chain is shorter than
    :data:`RELIABLE_LENGTHS` ``tau``. Several chains pool their autocorrelation functions
    (:func:`autocorrelation`, centred as ``center`` says); :func:`sokal_time_of_acf` does the same
    from a function at hand.
    """
    a = _as_series(x, min_steps=3)
    result = sokal_time_of_acf(autocorrelation(a, center=center), a.shape[1], n_chains=a.shape[0], c=c)
    return _with_between(result, a)


def sokal_time_of_acf(
    acf: Sequence[float] | np.ndarray,
    n_steps: int,
    *,
    n_chains: int = 1,
    c: float = SOKAL_C,
    decay_z: float | None = None,
) -> IntegratedTime:
    """Sokal's windowed ``tau`` (:func:`integrated_time_sokal`) of a normalised autocorrelation
    function ``acf`` (``R(0) = 1`` to ``R(L)``, e.g. :func:`autocorrelation` of ``n_chains``
    chains of ``n_steps`` each). Without a lag ``M >= c tau(M)`` up to ``L`` the window is ``L``.

    With ``decay_z``, the window must also lie where the function has decayed: ``R(M)`` at most
    ``decay_z`` Bartlett standard errors above zero (:func:`tail_undecayed`, with the chains'
    total length). A chain that switches slowly between modes under a fast local decay meets
    ``M >= c tau(M)`` while its slow part is still well above zero, and Sokal's window then cuts
    that part off (S3's problems with separated modes, docs/results.md); the extended window sums
    it. Where Sokal's window has decayed the two are the same.

    A function that alternates in sign (an antithetic sampler, e.g. flip-the-state on a small
    model) can meet ``M >= c tau(M)`` at a lag where the sum is zero or negative; such an estimate
    is returned with ``reliable=False`` (Geyer's initial sequences, :func:`integrated_time_geyer`,
    pair the lags and stay positive). More generally, a window whose last autocorrelation ``R(M)``
    lies more than :data:`WINDOW_DECAY_Z` Bartlett standard errors from zero has cut off lags that
    carry more than noise: that estimate is ``reliable=False`` with the reason (an alternating
    function whose partial sums dip below 1 met ``M >= c tau(M)`` at ``M = 3`` with ``R(3) =
    -0.24``; a probe found it 30 standard errors low). The length rule is met only where the time
    of the AR model that AIC picks for the same function (as :func:`integrated_time_ar`) meets it
    too: a window chosen by its own sum runs low on chains too short, and passed the rule on that
    low sum (15% of AR(1) chains 20 ``tau`` long, each 40-70% low; under 1% with both, for
    ``phi >= 0.9``; on chains short in steps the AR fit is as noisy: 5% pass at ``phi = 0.5``, 18% at
    35 ``tau``, docs/results.md). Geyer's
    initial sequence was tried for the check and not kept: on an oscillating chain it stops at the
    first negative pair and sums one lobe, and it failed 94 of 100 good estimates.
    """
    if not float(c) > 0:
        raise BoltzkitError("Sokal's window constant c must be positive", got=c)
    r = np.asarray(acf, dtype=float)
    taus = 2.0 * np.cumsum(r) - 1.0
    ok = np.arange(taus.size) >= float(c) * taus
    if decay_z is not None:
        ok &= r <= float(decay_z) * bartlett_sd(r, int(n_steps) * int(n_chains))
    window = int(np.argmax(ok)) if ok.any() else taus.size - 1
    tau = float(taus[window])
    reason = None
    se = float(bartlett_sd(r[: window + 1], int(n_steps) * int(n_chains))[window]) if window >= 1 else 0.0
    # a chain de-meaned on its own lowers every lag by about tau / n_steps (a bias, not noise)
    bias = abs(tau) / max(1, int(n_steps))
    if window >= 1 and abs(float(r[window])) > WINDOW_DECAY_Z * se + bias:
        # Sokal's rule met where the function has not decayed: an alternating function whose
        # partial sum dips below 1 (so c tau(M) is small), or a slow part under a fast decay
        reason = (
            f"Sokal's window stopped at lag {window}, where the autocorrelation {float(r[window]):.3g} is "
            f"still {(abs(float(r[window])) - bias) / se:.0f} standard errors from zero: the lags left out "
            "carry more of tau than its noise; use the AR or Geyer estimate (or decay_z)"
        )
    long_enough = n_steps >= RELIABLE_LENGTHS * tau
    if tau > 0.0 and long_enough and reason is None:
        # Sokal's window is chosen by its own sum: on a chain too short, a sum that came out low
        # stops the window early, which cuts the sum lower still, and the length rule then passes
        # on the low sum (AR(1) chains 20 tau long: 15% passed, every one of them 40-70% low). The
        # rule is also held to the AR fit of the same function, which does not feed
        # back on itself (of those chains under 1% pass both; docs/results.md, "Short chains")
        ar_tau = _ar_time_of_acf(r, int(n_steps) * int(n_chains))
        if n_steps < RELIABLE_LENGTHS * ar_tau:
            long_enough = False
            reason = (
                f"Sokal's window sum {tau:.3g} meets the length rule ({RELIABLE_LENGTHS:.0f} tau within "
                f"{int(n_steps)} steps), but an AR fit of the same autocorrelation function (the "
                "chains' pooled one, not the mean of each chain's own AR fit) gives "
                f"{ar_tau:.3g}, which does not: on chains this short Sokal's self-chosen window runs low; "
                "run longer chains"
            )
    return IntegratedTime(
        tau=tau,
        method="sokal",
        n_steps=int(n_steps),
        n_chains=int(n_chains),
        window=window,
        # a sum that is not positive stopped inside an oscillating function: no estimate of tau
        reliable=bool(tau > 0.0 and long_enough and reason is None),
        reason=reason,
    )


def windowed_sd(tau: float, window: int, n_steps: int) -> float:
    """Standard deviation of a windowed sum ``tau = 1 + 2 sum_{dt=1}^{M} R(dt)`` (window ``M``) of
    chains ``n_steps`` long in all: ``|tau| sqrt(2 (2M + 1) / n_steps)`` (Madras & Sokal 1988;
    Sokal 1997, Eq. 3.19)."""
    if n_steps < 1:
        return math.inf
    return abs(float(tau)) * math.sqrt(2.0 * (2 * int(window) + 1) / n_steps)


def integrated_time_geyer(
    x: np.ndarray | Tensor | Sequence[float], *, center: str = "chain"
) -> IntegratedTime:
    """``tau`` by Geyer's (1992) initial monotone sequence estimator.

    The sums of adjacent pairs ``Gamma_k = R(2k) + R(2k + 1)`` of a reversible chain are
    positive and decreasing; sum them while positive, each capped by the one before, and take
    ``tau = -1 + 2 sum_k Gamma_k``. Several chains pool their autocorrelation functions, centred as
    ``center`` says (:func:`autocorrelation`).
    """
    a = _as_series(x, min_steps=3)
    rho = autocorrelation(a, center=center)
    tau, gamma, k = _geyer_sum(rho)
    reason = None
    if k < gamma.size and 2 * k + 1 < rho.size:
        # the pair sums of a reversible chain are positive: one negative beyond its noise means a
        # chain that is not reversible (the library's sweeps are not), where the sequence's
        # stopping rule cuts off lags that count (a probe found it 10 standard errors high). The
        # pair's error is up to twice one lag's (adjacent lags' estimates are correlated), and a
        # chain de-meaned on its own lowers the pair by about 2 tau / n_steps
        se = 2.0 * float(bartlett_sd(rho[: 2 * k + 2], a.size)[2 * k + 1])
        bias = 2.0 * abs(tau) / a.shape[1]
        if float(gamma[k]) < -(WINDOW_DECAY_Z * se + bias):
            reason = (
                f"Geyer's sequence stopped at the pair of lags {2 * k} and {2 * k + 1}, whose sum "
                f"{float(gamma[k]):.3g} is negative by {(abs(float(gamma[k])) - bias) / se:.0f} standard "
                "errors: the chain is not reversible, and there the sequence's rule does not hold; use the "
                "AR or Sokal estimate"
            )
    result = IntegratedTime(
        tau=tau,
        method="geyer",
        n_steps=a.shape[1],
        n_chains=a.shape[0],
        window=2 * k,
        reliable=bool(tau > 0.0 and a.shape[1] >= RELIABLE_LENGTHS * tau and reason is None),
        reason=reason,
    )
    return _with_between(result, a)


def levinson_durbin(acov: np.ndarray, order: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Yule-Walker AR coefficients of every order ``1 .. order`` from autocovariances.

    Parameters
    ----------
    acov
        ``r(0), r(1), ..., r(order)`` (at least ``order + 1`` values, ``r(0) > 0``).
    order
        Largest order.

    Returns
    -------
    (list of numpy.ndarray, numpy.ndarray)
        ``phi[p - 1]`` of shape ``(p,)`` for ``p = 1 .. order``, and the innovation variances
        ``v_p = r(0) prod_{j <= p} (1 - kappa_j^2)`` for ``p = 0 .. order``, shape ``(order + 1,)``.
    """
    r = np.asarray(acov, dtype=np.float64)
    phis: list[np.ndarray] = []
    var = np.empty(order + 1)
    var[0] = r[0]
    phi = np.zeros(0)
    for p in range(1, order + 1):
        kappa = (r[p] - phi @ r[p - 1 : 0 : -1]) / var[p - 1] if p > 1 else r[1] / r[0]
        phi = np.concatenate([phi - kappa * phi[::-1], [kappa]])
        var[p] = var[p - 1] * (1.0 - kappa * kappa)
        phis.append(phi)
    return phis, var


def ar_time(phi: np.ndarray, rho: np.ndarray) -> float:
    """``tau`` of an AR(p) model: ``(1 - sum_k phi_k rho_k) / (1 - sum_k phi_k)^2`` (Thompson 2010),
    with ``rho_k`` its autocorrelations at lags ``1 .. p`` (the sample ones under Yule-Walker)."""
    denominator = (1.0 - float(np.sum(phi))) ** 2
    if denominator <= 0:
        return math.inf
    return (1.0 - float(phi @ rho[1 : phi.size + 1])) / denominator


def _ar_time_of_acf(rho: np.ndarray, n_total: int) -> float:
    """``tau`` of the AR model that AIC picks (as :func:`integrated_time_ar`) for a normalised
    autocorrelation function ``rho`` of chains ``n_total`` steps long in all, orders up to
    ``floor(10 log10 n_total)`` and the function's last lag."""
    if rho.size < 2:
        return 1.0
    return ar_time(_ar_fit_of_acf(rho, n_total), rho)


def _ar_one(a: np.ndarray, order_max: int | None) -> tuple[float, int]:
    n = a.size
    top = min(n - 1, int(math.floor(10.0 * math.log10(n)))) if order_max is None else int(order_max)
    top = max(1, min(top, n - 1))
    acov = _autocovariance(a[None, :])[0, : top + 1]
    phis, var = levinson_durbin(acov, top)
    with np.errstate(divide="ignore"):
        aic = n * np.log(np.maximum(var[1:], 1e-300)) + 2.0 * np.arange(1, top + 1)
    p = int(np.argmin(aic)) + 1  # order >= 1, as Thompson's ar.act forces
    return ar_time(phis[p - 1], acov / acov[0]), p


def integrated_time_ar(
    x: np.ndarray | Tensor | Sequence[float], *, order_max: int | None = None
) -> IntegratedTime:
    """``tau`` of an AR(p) model fitted by Yule-Walker, ``p`` by AIC (Thompson 2010; S3 Sec. 4.3).

    As R's ``ar.yw``: the series is de-meaned, the biased autocovariances give the Yule-Walker
    coefficients of every order up to ``order_max`` (default ``floor(10 log10 n)``) by the
    Levinson-Durbin recursion, and the order minimising ``n log v_p + 2 p`` (``v_p`` the innovation
    variance) is taken, at least 1. A Yule-Walker fit is always stationary, so ``tau`` is finite.

    Parameters
    ----------
    x
        Shape ``(n_steps,)`` or ``(n_chains, n_steps)``; each chain is fitted on its own.
    order_max
        Largest AR order tried.

    Returns
    -------
    IntegratedTime
        The mean of the chains' times (of those that moved: a series with none is refused),
        each chain's time, and the largest chosen order.
    """
    if order_max is not None and (
        isinstance(order_max, bool) or not isinstance(order_max, int) or order_max < 1
    ):
        raise BoltzkitError("order_max must be a positive integer", got=repr(order_max))
    raw = _as_series(x, min_steps=3)
    a = raw - raw.mean(axis=1, keepdims=True)
    live = a.var(axis=1) > 0
    if not live.any():
        raise BoltzkitError(
            "the series is constant: its autocorrelation time is undefined",
            got=f"shape {a.shape}",
            hint=CONSTANT_SERIES_HINT,
        )
    fits = [_ar_one(row, order_max) for row in a[live]]  # a chain that never moved has no fit
    taus = tuple(float(t) for t, _ in fits)
    tau = float(np.mean(taus))
    result = IntegratedTime(
        tau=tau,
        method="ar",
        n_steps=a.shape[1],
        n_chains=a.shape[0],
        order=max(p for _, p in fits),
        per_chain=taus,
        reliable=bool(math.isfinite(tau) and a.shape[1] >= RELIABLE_LENGTHS * tau),
    )
    return _with_between(result, raw)


def acf_sum(acf: Sequence[float] | np.ndarray) -> float:
    """``1 + 2 sum_{dt=1}^{L} R(dt)``: the integrated time of a normalised autocorrelation function
    ``acf`` (``R(0) = 1``, ..., ``R(L)``) summed to its last lag ``L`` (Sokal's windowed sum, S3 Eq.
    17, with the window at ``L``). What a chain's correlations up to lag ``L`` alone add up to: a
    model of the chain (an AR fit) whose ``tau`` lies far below it misses a slow component."""
    return float(1.0 + 2.0 * np.sum(np.asarray(acf, dtype=float)[1:]))


#: :func:`misses_slow_tail` fails an AR time where the chains' summed autocorrelations exceed the
#: fit's own by more than this many standard errors at some window (at 3, 0.7% of sets of chains
#: whose AR model is right fail; at 4, 0.07%).
SLOW_TAIL_Z = 4.0
#: The smallest window :func:`slow_tail_excess` tests (windows halve from the last lag down to it).
SLOW_TAIL_MIN_WINDOW = 16


def _ar_fit_of_acf(rho: np.ndarray, n_total: int) -> np.ndarray:
    """The coefficients of the AR model that AIC picks (as :func:`integrated_time_ar`) for a
    normalised autocorrelation function ``rho`` of chains ``n_total`` steps long in all, orders up
    to ``floor(10 log10 n_total)`` and the function's last lag."""
    top = max(1, min(rho.size - 1, int(math.floor(10.0 * math.log10(max(n_total, 2))))))
    phis, var = levinson_durbin(rho[: top + 1], top)
    with np.errstate(divide="ignore"):
        aic = n_total * np.log(np.maximum(var[1:], 1e-300)) + 2.0 * np.arange(1, top + 1)
    return phis[int(np.argmin(aic))]


def ar_model_acf(phi: np.ndarray, rho: np.ndarray, max_lag: int) -> np.ndarray:
    """The autocorrelation function of an AR(p) model to lag ``max_lag``: ``rho``'s values at lags
    ``0 .. p`` (a Yule-Walker fit reproduces them), then ``R(k) = sum_i phi_i R(k - i)`` (the
    Yule-Walker equations), shape ``(max_lag + 1,)``."""
    p = phi.size
    out = np.empty(max_lag + 1)
    head = min(p, max_lag) + 1
    out[:head] = rho[:head]
    for k in range(p + 1, max_lag + 1):
        out[k] = float(phi @ out[k - 1 : k - p - 1 : -1])  # R(k - 1) .. R(k - p)
    return out


def slow_tail_excess(tau: float, acf: Sequence[float] | np.ndarray, n_steps: int) -> tuple[float, int]:
    """How far the chains' autocorrelations, summed to a window ``M``, lie above what the AR model
    behind ``tau`` sums to at ``M``, in standard errors, at the worst of the windows ``L, L/2, L/4,
    ...`` down to :data:`SLOW_TAIL_MIN_WINDOW` (``L`` the last lag of ``acf``; ``L`` alone where it
    is shorter); and that ``M``.

    The model is the AR fit that AIC picks for ``acf`` itself (as :func:`integrated_time_ar`), its
    autocorrelations past its order by the Yule-Walker recursion (:func:`ar_model_acf`). ``tau``,
    the mean of the chains' own fits, may differ from that model's whole time ``tau_m``
    (:func:`ar_time`); the difference is spread over the windows as the model's absolute
    correlations accrue: the expected sum at ``M`` is ``S_m(M) + (tau - tau_m) A(M) / A(L)``, ``S_m``
    the model's windowed sums and ``A(M) = sum_{dt <= M} |R_m(dt)|``. (For a positive function this
    scales the model to ``tau``; unlike a scale, it stays finite where the model's correlations
    cancel to a time near 1, as under flip-the-state.) If the model is right, the chains' windowed
    sum ``1 + 2 sum_{dt=1}^{M} R(dt)`` of chains ``n_steps`` long in all scatters about it with
    standard deviation about ``tau_abs sqrt(2 (2M + 1) / n_steps)`` (Madras & Sokal 1988, for ``M``
    well past the decay; conservative before it), ``tau_abs`` the larger of ``|tau|`` and
    ``1 + 2 A(L) + tau - tau_m`` (the model's absolute sum moved to ``tau``: an oscillating
    function, whose sums cancel, is not held to a smaller spread than its terms make). A slow
    component the model does not hold (slow switching between modes under a fast local decay) puts
    the sums above it at windows past the fast decay, where the spread is still small.

    ``(-inf, 0)`` where ``acf`` has no lag beyond 0 or ``tau`` is infinite (nothing it could fall
    short of); a ``tau`` that is NaN, an ``acf`` that is not one finite row from ``R(0) = 1``, or an
    ``n_steps`` shorter than its lags is refused.
    """
    r = np.asarray(acf, dtype=float)
    if r.ndim != 1 or r.size < 1 or not np.isfinite(r).all() or abs(r[0] - 1.0) > 1e-9:
        raise BoltzkitError(
            "the autocorrelation function must be one finite row starting at R(0) = 1",
            got=f"shape {r.shape}" if r.ndim != 1 or r.size < 1 else f"R(0) = {r[0]:.6g}, {r.size} lags",
            hint="pass autocorrelation(x) as it returns it.",
        )
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real) or math.isnan(tau):
        raise BoltzkitError("tau must be a number", got=repr(tau))
    lags = r.size - 1
    n_steps = whole_number(
        n_steps,
        "n_steps",
        minimum=max(1, lags + 1),
        hint="chains n_steps long in all have lags up to n_steps - 1.",
    )
    if lags < 1 or math.isinf(tau):
        return -math.inf, 0
    phi = _ar_fit_of_acf(r, n_steps)
    model = ar_model_acf(phi, r, lags)
    summed = 1.0 + 2.0 * np.cumsum(r[1:])  # the windowed sum at M = 1 .. L
    model_summed = 1.0 + 2.0 * np.cumsum(model[1:])
    accrued = np.cumsum(np.abs(model[1:]))
    total = ar_time(phi, r)  # the model's whole time (its sum to L falls short where it decays slowly)
    share = accrued / accrued[-1] if accrued[-1] > 0 else np.ones(lags)
    shift = float(tau) - total if math.isfinite(total) else 0.0
    expected = model_summed + shift * share
    tau_abs = max(abs(float(tau)), 1.0 + 2.0 * float(accrued[-1]) + shift)  # the model moved to tau
    worst, at = -math.inf, 0
    window = lags
    while True:
        z = float(summed[window - 1] - expected[window - 1]) / windowed_sd(tau_abs, window, n_steps)
        if z > worst:
            worst, at = z, window
        window //= 2
        if window < SLOW_TAIL_MIN_WINDOW:
            break
    return worst, at


def misses_slow_tail(tau: float, acf: Sequence[float] | np.ndarray, n_steps: int) -> bool:
    """Whether the chains' autocorrelations (``acf``, as :func:`autocorrelation` returns it: ``R(0)``
    to ``R(L)``, of chains ``n_steps`` long in all) sum to more than the AR model of ``tau`` holds,
    by more than :data:`SLOW_TAIL_Z` standard errors at some window (:func:`slow_tail_excess`): the
    chains are correlated beyond what the fitted model holds (for example slow switching between
    modes under a fast local decay), and ``tau`` understates how slowly they mix.

    Until 2026-12-06 the check compared ``tau`` with the sum to the last lag alone, with the spread of
    that sum's own size: on a 6 x 4 RBM of two slow modes (exact Gibbs ``tau`` 150.2 from its
    transition matrix) AR times of 53-78 from ten chains of 30,000 sweeps passed it; each is failed
    now (4.1-7.7 standard errors, at the window of 500). On chains whose AR model is right it fails
    about 1 set in 1,000 or fewer (5 of 7,200 sets of white noise, AR(1) and AR(2) chains; none of
    6,400 anticorrelated and oscillating ones; docs/results.md).
    """
    return slow_tail_excess(tau, acf, n_steps)[0] > SLOW_TAIL_Z


def tail_undecayed(acf: Sequence[float] | np.ndarray, n_steps: int, *, z: float = 3.0) -> bool:
    """Whether the autocorrelation at the last recorded lag ``L`` is still more than ``z`` standard
    errors above zero: the chain has not decorrelated within ``L`` steps.

    ``acf`` as :func:`autocorrelation` returns it (``R(0)`` to ``R(L)``), of chains of ``n_steps`` in
    all. Under the hypothesis that the true autocorrelation vanishes from lag ``L`` on, the sample
    ``R(L)`` has variance about ``(1 + 2 sum_{dt=1}^{L-1} R(dt)^2) / n_steps`` (Bartlett 1946; Box &
    Jenkins' test of a moving-average order). Where the hypothesis fails, :func:`acf_sum` is only a
    lower bound on ``tau``, and :func:`misses_slow_tail`, which compares an AR time with that sum,
    cannot see a slow component that lives beyond lag ``L``: an AR time is then unverified, and
    Sokal's window over the whole chain (:func:`integrated_time_sokal`) is the check to trust.
    """
    r = np.asarray(acf, dtype=float)
    lags = r.size - 1
    if lags < 1 or n_steps < 1:
        return False  # no lag beyond 0: nothing to test
    return bool(r[lags] > z * bartlett_sd(r, n_steps)[lags])


def bartlett_sd(acf: Sequence[float] | np.ndarray, n_steps: int) -> np.ndarray:
    """The standard error of each sample ``R(L)`` of ``acf`` (``R(0)`` to ``R(L_max)``, of chains
    ``n_steps`` long in all) if the true autocorrelation vanished from lag ``L`` on:
    ``sqrt((1 + 2 sum_{dt=1}^{L-1} R(dt)^2) / n_steps)`` (Bartlett 1946), shape ``acf``'s."""
    r = np.asarray(acf, dtype=float)
    summed = np.cumsum(np.concatenate(([0.0], r[1:] ** 2)))  # sum_{dt=1}^{j} R(dt)^2 at j
    squares = np.concatenate(([0.0], summed[:-1]))  # ... to L - 1 at L
    return np.sqrt((1.0 + 2.0 * squares) / max(1, int(n_steps)))


#: Estimators by name.
ESTIMATORS = {"ar": integrated_time_ar, "sokal": integrated_time_sokal, "geyer": integrated_time_geyer}


def integrated_time(
    x: np.ndarray | Tensor | Sequence[float], method: str = "ar", *, center: str = "chain"
) -> IntegratedTime:
    """``tau`` by ``method``: ``"ar"`` (S3's; each chain fitted on its own), ``"sokal"`` or
    ``"geyer"`` (several chains' autocorrelation functions pooled, centred as ``center`` says:
    :func:`autocorrelation`)."""
    if method not in ESTIMATORS:
        raise BoltzkitError(
            "unknown autocorrelation-time estimator", got=repr(method), expected=", ".join(ESTIMATORS)
        )
    check_center(center)
    return integrated_time_ar(x) if method == "ar" else ESTIMATORS[method](x, center=center)


@torch.no_grad()
def energy_trace(
    model: EnergyModel,
    operator: TransitionOperator | str,
    *,
    n_chains: int,
    n_steps: int,
    generator: torch.Generator,
    burn_in: int = 0,
    init: ChainState | None = None,
    progress: bool = False,
) -> Tensor:
    """The joint energy ``E(v, h)`` of chains after every sweep (the series of S3 Eq. 16).

    Parameters
    ----------
    model, operator
        Target and kernel (parallel tempering: the ``beta = 1`` replica's energies).
    n_chains, n_steps
        Chains and recorded sweeps.
    generator
        Source of randomness.
    burn_in
        Sweeps run first and not recorded.
    init
        Start (default: uniform random states).
    progress
        Show a progress bar.

    Returns
    -------
    Tensor
        float64, shape ``(n_chains, n_steps)``, on the CPU.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise BoltzkitError("n_steps must be a positive integer", got=repr(n_steps))
    op = make_operator(operator)
    state = op.extend(model.random_state(n_chains, generator) if init is None else init)
    if burn_in:
        state = run_chains(model, op, state, burn_in, generator=generator)
    out = torch.empty(n_steps, n_chains, dtype=torch.float64, device=state.layers[0].device)
    # the energies from a float64 copy of the parameters, made once (the same numbers as converting
    # them at every step, which beside other work more than doubled a float32 784 x 500 chain's cost)
    scorer = model if model.dtype == torch.float64 else copy.deepcopy(model).double()
    for step in tqdm(range(n_steps), desc="energy trace", disable=not progress, leave=False):
        state, _ = op.step(model, state, generator=generator)  # no flip-rate tracking: no host syncs
        out[step] = scorer.joint_energy(op.project(state)).to(torch.float64)
    return out.t().contiguous().cpu()


__all__ = [
    "CENTERINGS",
    "ESTIMATORS",
    "RELIABLE_LENGTHS",
    "SOKAL_C",
    "IntegratedTime",
    "acf_sum",
    "ar_time",
    "autocorrelation",
    "bartlett_sd",
    "check_center",
    "energy_trace",
    "integrated_time",
    "integrated_time_ar",
    "integrated_time_geyer",
    "integrated_time_sokal",
    "levinson_durbin",
    "misses_slow_tail",
    "sokal_time_of_acf",
    "tail_undecayed",
    "windowed_sd",
]
