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

Here ``A`` is the base-rate model of the AIS path (S&M 2008, Eq. 18) and ``B`` the RBM, with
``p*(v) = exp(-F(v))`` the visible marginals.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli, make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import make_base, on_device, seed_label
from boltzkit.estimators.base_rate import base_rate_log_z
from boltzkit.estimators.exact import exact_log_z, exact_sample
from boltzkit.estimators.result import Band, LogZResult, effective_sample_size
from boltzkit.models.rbm import RBM
from boltzkit.samplers.driver import run_chains
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

BRIDGES = ("geometric", "optimal")


@dataclass(frozen=True)
class SpreadResult(LogZResult):
    """A :class:`LogZResult` whose spread is given, not computed from one vector of weights.

    Estimators that are not a single importance-sampling mean (bridge sampling: a ratio of two
    means) carry ``log r_hat`` and ``log sigma_hat`` of the estimated ratio directly; ``log_z``,
    the bands ``log(r_hat ± k sigma_hat) + log_z_start`` and the standard error follow the same
    conventions as for weight-based records.

    Attributes
    ----------
    log_mean
        ``log r_hat`` (the estimate before adding ``log_z_start``).
    log_sigma
        ``log sigma_hat`` of ``r_hat``; ``-inf`` for an exact value.
    n_samples
        Total number of samples used (reported as ``n_chains``).
    ess_value
        Effective sample size to report (``None``: not defined).
    """

    log_mean: float = math.nan
    log_sigma: float = -math.inf
    n_samples: int = 0
    ess_value: float | None = None

    def _band(self) -> Band:
        return Band.from_log_mean(self.log_mean, self.log_sigma, self.log_z_start)

    @property
    def log_z_stderr(self) -> float:
        """Delta-method standard error of the log estimate, ``sigma_hat / r_hat``."""
        return math.exp(self.log_sigma - self.log_mean) if math.isfinite(self.log_sigma) else 0.0

    @property
    def n_chains(self) -> int:
        return int(self.n_samples)

    @property
    def ess(self) -> float | None:
        return self.ess_value


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


@dataclass(frozen=True)
class BridgeEstimate:
    """Output of :func:`bridge_log_ratio_from_log_l`.

    Attributes
    ----------
    log_r
        ``log r_hat``, the estimate of ``log(Z_B / Z_A)``.
    log_sigma
        ``log sigma_hat`` of ``r_hat`` (delta method); ``-inf`` when both spreads vanish.
    ess_a, ess_b
        Kish effective sample sizes of the bridge weights on the A and B samples.
    iterations
        Fixed-point iterations (0 for the geometric bridge).
    converged
        Whether the optimal-bridge iteration met its tolerance.
    """

    log_r: float
    log_sigma: float
    ess_a: float
    ess_b: float
    iterations: int
    converged: bool


def bridge_log_ratio_from_log_l(
    log_l_a: Tensor,
    log_l_b: Tensor,
    *,
    bridge: str = "geometric",
    max_iter: int = 200,
    tol: float = 1e-10,
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
        iterations=iterations,
        converged=converged,
    )


# ----------------------------------------------------------------------------- sampling
def _samples(
    rbm: RBM,
    n: int,
    generator: torch.Generator,
    *,
    max_bits: int,
    chain_steps: int,
    operator: TransitionOperator,
    init_v: Tensor | None,
    progress: bool,
    name: str,
) -> tuple[Tensor, bool, str]:
    """``n`` visible samples of ``rbm``: exact by enumeration when possible, else Gibbs chains."""
    if min(rbm.n_visible, rbm.n_hidden) <= max_bits:
        v = exact_sample(rbm, n, generator=generator, max_bits=max_bits).visible
        return v, True, f"exact samples of {name} (enumerated smaller layer)"
    if init_v is None:
        state = rbm.random_state(n, generator)
        origin = "uniform random states"
    else:
        v0 = init_v.to(dtype=rbm.dtype, device=rbm.device)
        state = ChainState((v0, rbm.sample_h_given_v(v0, generator)))
        origin = "base-rate samples"
    state = run_chains(rbm, operator, state, int(chain_steps), generator=generator, progress=progress)
    return (
        state.visible,
        False,
        f"{int(chain_steps)} {operator.name} sweeps of {name} from {origin} (approximate)",
    )


def _check(n_chains: int, chain_steps: int, bridge: str) -> None:
    if int(n_chains) < 1:
        raise BoltzkitError("bridge sampling needs at least 1 sample per side", got=n_chains)
    if int(chain_steps) < 0:
        raise BoltzkitError("chain_steps must be non-negative", got=chain_steps)
    if bridge not in BRIDGES:
        raise BoltzkitError("unknown bridge", got=bridge, expected="'geometric' or 'optimal'")


def _record(
    est: BridgeEstimate,
    *,
    n_a: int,
    n_b: int,
    log_z_start: float,
    is_ratio: bool,
    reference_log_z: float | None,
    seconds: float,
    settings: dict[str, Any],
) -> SpreadResult:
    estimate = log_z_start + est.log_r
    if is_ratio:
        log_z = None if reference_log_z is None else reference_log_z + estimate
    else:
        log_z = estimate
    settings = {
        **settings,
        "n_samples_a": n_a,
        "n_samples_b": n_b,
        "ess_a": est.ess_a,
        "ess_b": est.ess_b,
        "bridge_iterations": est.iterations,
    }
    if not est.converged:
        settings["bridge_warning"] = "the optimal-bridge iteration did not converge"
    return SpreadResult(
        method="bridge",
        log_z=log_z,
        log_z_start=float(log_z_start),
        n_betas=1,
        is_ratio=is_ratio,
        reference_log_z=reference_log_z,
        settings=settings,
        seconds=float(seconds),
        log_mean=est.log_r,
        log_sigma=est.log_sigma,
        n_samples=n_a + n_b,
        ess_value=min(est.ess_a, est.ess_b),
    )


# ------------------------------------------------------------------------------ public API
@torch.no_grad()
def bridge_log_z(
    rbm: RBM,
    *,
    n_chains: int = 100,
    bridge: str = "geometric",
    base_rate_data: Tensor | None = None,
    base_vbias: Tensor | None = None,
    sampler: TransitionOperator | str = "gibbs",
    chain_steps: int = 1000,
    max_bits: int = 22,
    max_iter: int = 200,
    tol: float = 1e-10,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> SpreadResult:
    """Estimate ``log Z`` of an RBM by bridge sampling from the base-rate model (Eqs. 30-31).

    Parameters
    ----------
    rbm
        The target ``B``.
    n_chains
        Samples drawn from each of ``p_A`` and ``p_B`` (``M_A = M_B = n_chains``).
    bridge
        ``"geometric"`` (``sqrt(p*_A p*_B)``, Eq. 31) or ``"optimal"`` (Meng & Wong 1996).
    base_rate_data, base_vbias
        The base model ``A``, as for :func:`~boltzkit.estimators.ais.ais_log_z`.
    sampler, chain_steps
        When the RBM's smaller layer has more than ``max_bits`` units, its samples are the end
        states of ``chain_steps`` sweeps of ``sampler`` started from base-rate samples (one chain
        per sample); the record then carries a warning.
    max_bits
        Largest smaller layer enumerated for exact samples of the RBM.
    max_iter, tol
        Of the optimal-bridge iteration.
    seed, device, progress
        As for :func:`~boltzkit.estimators.ais.ais_log_z`.

    Returns
    -------
    SpreadResult
        ``method="bridge"``: ``log_z = log Z_A + log r_hat``, bands ``log Z_A + log(r_hat ± k
        sigma_hat)``; ``settings`` name the bridge, the samples of each side, their ESS and the
        number of iterations.
    """
    _check(n_chains, chain_steps, bridge)
    t0 = time.perf_counter()
    model, dev = on_device(rbm, device)
    gen = make_generator(seed, dev)
    op = make_operator(sampler)
    base, base_name = make_base(model, base_rate_data=base_rate_data, base_vbias=base_vbias)
    b_a = base.vbias.detach()
    p_a = torch.sigmoid(b_a).expand(int(n_chains), -1)
    b_a64 = b_a.to(torch.float64)
    v_a = bernoulli(p_a, gen)
    v_b, exact_b, label_b = _samples(
        model,
        int(n_chains),
        gen,
        max_bits=max_bits,
        chain_steps=chain_steps,
        operator=op,
        init_v=bernoulli(p_a, gen) if min(model.n_visible, model.n_hidden) > max_bits else None,
        progress=progress,
        name="the RBM",
    )
    log_l_a = model.log_unnormalized_visible(v_a) - v_a.to(torch.float64) @ b_a64
    log_l_b = model.log_unnormalized_visible(v_b) - v_b.to(torch.float64) @ b_a64
    est = bridge_log_ratio_from_log_l(log_l_a, log_l_b, bridge=bridge, max_iter=max_iter, tol=tol)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    log_z_a = base_rate_log_z(b_a)
    settings: dict[str, Any] = {
        "bridge": bridge,
        "base": base_name,
        "log_z_base": log_z_a,
        "samples_a": "exact samples of the base-rate model",
        "samples_b": label_b,
        "seed": seed_label(seed),
        "device": str(dev),
        "dtype": str(model.dtype).replace("torch.", ""),
    }
    if not exact_b:
        settings["sampler"] = op.name
        settings["warning"] = "samples of the RBM are approximate (Gibbs chains): the estimate may be biased"
    return _record(
        est,
        n_a=int(n_chains),
        n_b=int(n_chains),
        log_z_start=log_z_a,
        is_ratio=False,
        reference_log_z=None,
        seconds=time.perf_counter() - t0,
        settings=settings,
    )


@torch.no_grad()
def bridge_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    n_chains: int = 100,
    bridge: str = "geometric",
    sampler: TransitionOperator | str = "gibbs",
    chain_steps: int = 10_000,
    max_bits: int = 22,
    max_iter: int = 200,
    tol: float = 1e-10,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> SpreadResult:
    """Estimate ``log(Z_B / Z_A)`` of two RBMs over the same visible units by bridge sampling.

    ``l(v) = exp(F_A(v) - F_B(v))``; samples of each RBM are exact when its smaller layer has at
    most ``max_bits`` units, else the end states of ``chain_steps`` sweeps from uniform random
    states (labelled approximate). ``log Z_A`` is computed exactly when ``A`` can be enumerated,
    and then ``log_z`` is ``log Z_B``.

    Returns
    -------
    SpreadResult
        ``method="bridge"``, ``is_ratio=True``.
    """
    _check(n_chains, chain_steps, bridge)
    if rbm_a.n_visible != rbm_b.n_visible:
        raise BoltzkitError(
            "bridge sampling between two RBMs needs the same visible units",
            got=f"{rbm_a.n_visible} and {rbm_b.n_visible} visible units",
        )
    t0 = time.perf_counter()
    rbm_b, dev = on_device(rbm_b, device)
    rbm_a, _ = on_device(rbm_a, dev)
    gen = make_generator(seed, dev)
    op = make_operator(sampler)
    kw = {
        "max_bits": max_bits,
        "chain_steps": chain_steps,
        "operator": op,
        "init_v": None,
        "progress": progress,
    }
    v_a, exact_a, label_a = _samples(rbm_a, int(n_chains), gen, name="A", **kw)
    v_b, exact_b, label_b = _samples(rbm_b, int(n_chains), gen, name="B", **kw)

    def log_l(v: Tensor) -> Tensor:
        return rbm_b.log_unnormalized_visible(v) - rbm_a.log_unnormalized_visible(v)

    est = bridge_log_ratio_from_log_l(log_l(v_a), log_l(v_b), bridge=bridge, max_iter=max_iter, tol=tol)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    reference = None
    if min(rbm_a.n_visible, rbm_a.n_hidden) <= max_bits:
        reference = float(exact_log_z(rbm_a, max_bits=max_bits).log_z)
    settings: dict[str, Any] = {
        "bridge": bridge,
        "samples_a": label_a,
        "samples_b": label_b,
        "seed": seed_label(seed),
        "device": str(dev),
    }
    if not (exact_a and exact_b):
        settings["sampler"] = op.name
        settings["warning"] = "some samples are approximate (Gibbs chains): the estimate may be biased"
    return _record(
        est,
        n_a=int(n_chains),
        n_b=int(n_chains),
        log_z_start=0.0,
        is_ratio=True,
        reference_log_z=reference,
        seconds=time.perf_counter() - t0,
        settings=settings,
    )


__all__ = [
    "BRIDGES",
    "BridgeEstimate",
    "SpreadResult",
    "bridge_log_ratio",
    "bridge_log_ratio_from_log_l",
    "bridge_log_z",
]
