"""Simple importance sampling (SIS) of ``log Z`` from the base-rate model.

Salakhutdinov (2008), Sec. 3.1, Eq. 20: with independent draws ``v_i ~ p_A`` from a tractable
proposal whose ``Z_A`` is known::

    Z_B / Z_A = E_{p_A}[ p*_B(v) / p*_A(v) ] ~= (1/M) sum_i w_i,    w_i = p*_B(v_i) / p*_A(v_i)

Here ``p_A`` is the base-rate model of the AIS path (S&M 2008, Eq. 18: ``W = 0``, visible biases
``b_A``, ``p*_A(v) = exp(b_A^T v)``, ``log Z_A = sum_i softplus(b_A_i)``) and ``p*_B(v) =
exp(-F_B(v))`` is the RBM's visible marginal. This is AIS with the two-point schedule ``[0, 1]``
(with ``K = 1`` the AIS weight of Salakhutdinov 2008, Eq. 29, is ``p*_B(x_1) / p*_A(x_1)``; the
same holds for any ``K`` with "dumb" kernels ``T_k = identity``, Sec. 3.2). The proposal draws
use the same random numbers as :func:`~boltzkit.estimators.ais.ais_log_z` with ``betas=2`` and
the same seed, so the two estimates agree to rounding. The variance of ``w`` is
huge (or infinite) unless ``p_A`` is close to ``p_B``, which is why AIS exists; SIS is the
baseline.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli, make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import make_base, on_device, seed_label
from boltzkit.estimators.base_rate import base_rate_log_z
from boltzkit.estimators.paths import RBMPath
from boltzkit.estimators.result import LogZResult
from boltzkit.models.rbm import RBM


def _check_chains(n_chains: int) -> None:
    if int(n_chains) < 1:
        raise BoltzkitError("the number of importance samples must be at least 1", got=n_chains)


@torch.no_grad()
def sis_log_z(
    rbm: RBM,
    *,
    n_chains: int = 100,
    base_rate_data: Tensor | None = None,
    base_vbias: Tensor | None = None,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
) -> LogZResult:
    """Estimate ``log Z`` of an RBM by simple importance sampling from the base-rate model (Eq. 20).

    Parameters
    ----------
    rbm
        The target model ``B``.
    n_chains
        Number of independent proposal draws ``M``.
    base_rate_data, base_vbias
        The proposal, as for :func:`~boltzkit.estimators.ais.ais_log_z`: smoothed pixel means of
        the data (S&M 2008, Eq. 18), given visible biases, or by default the model's own visible
        biases with zero weights.
    seed
        Seed or generator; same seed, same numbers.
    device
        Where to run (default: the model's device; ``"auto"`` picks CUDA when present).

    Returns
    -------
    LogZResult
        ``method="sis"``, ``n_betas=1``; ``log_weights[i] = log p*_B(v_i) - log p*_A(v_i)``, float64,
        shape ``(n_chains,)``, and ``log_z_start = log Z_A``.
    """
    _check_chains(n_chains)
    t0 = time.perf_counter()
    model, dev = on_device(rbm, device)
    gen = make_generator(seed, dev)
    base, base_name = make_base(model, base_rate_data=base_rate_data, base_vbias=base_vbias)
    b_a = base.vbias.detach()
    # v ~ p_A: independent pixels; the same draw as RBMPath.sample_start for the AIS path
    v = bernoulli(torch.sigmoid(b_a).expand(int(n_chains), -1), gen)
    log_f_a = v.to(torch.float64) @ b_a.to(torch.float64)
    log_w = model.log_unnormalized_visible(v) - log_f_a
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    log_z_a = base_rate_log_z(b_a)
    return LogZResult.from_log_weights(
        "sis",
        log_w,
        log_z_start=log_z_a,
        n_betas=1,
        seconds=time.perf_counter() - t0,
        base=base_name,
        log_z_base=log_z_a,
        proposal="base-rate model (independent pixels)",
        seed=seed_label(seed),
        device=str(dev),
        dtype=str(model.dtype).replace("torch.", ""),
    )


@torch.no_grad()
def sis_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    n_chains: int = 100,
    start_chain_steps: int = 10_000,
    max_bits: int = 22,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
) -> LogZResult:
    """Estimate ``log(Z_B / Z_A)`` of two RBMs by simple importance sampling with proposal ``p_A``.

    ``w_i = exp(F_A(v_i) - F_B(v_i))`` with ``v_i ~ p_A`` (Eq. 20 with ``p*(v) = exp(-F(v))``).
    Draws are exact when ``A``'s smaller layer has at most ``max_bits`` units; otherwise they come
    from ``start_chain_steps`` Gibbs sweeps and ``settings["warning"]`` says the estimate is not
    exactly unbiased. The draws are those of :func:`~boltzkit.estimators.ais.ais_log_ratio` with
    ``betas=2`` and the same seed.

    Returns
    -------
    LogZResult
        ``method="sis"``, ``is_ratio=True``, ``n_betas=1``; ``log_z`` of B when ``log Z_A`` is exact.
    """
    _check_chains(n_chains)
    t0 = time.perf_counter()
    rbm_b, dev = on_device(rbm_b, device)
    rbm_a, _ = on_device(rbm_a, dev)
    gen = make_generator(seed, dev)
    path = RBMPath(rbm_a, rbm_b, start_chain_steps=start_chain_steps, max_bits=max_bits)
    v = path.sample_start(int(n_chains), gen).visible
    log_w = rbm_b.log_unnormalized_visible(v) - rbm_a.log_unnormalized_visible(v)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    settings: dict[str, object] = {
        "proposal": "exact samples of A" if path.exact_start else f"{start_chain_steps} Gibbs sweeps of A",
        "seed": seed_label(seed),
        "device": str(dev),
    }
    if not path.exact_start:
        settings["warning"] = "proposal samples are approximate: the estimate is not exactly unbiased"
    return LogZResult.from_log_weights(
        "sis",
        log_w,
        log_z_start=0.0,
        n_betas=1,
        is_ratio=True,
        reference_log_z=path.log_z_a,
        seconds=time.perf_counter() - t0,
        **settings,
    )


__all__ = ["sis_log_ratio", "sis_log_z"]
