"""EM for mixtures of factorial Bernoulli distributions (the baseline of S1, Sec. 5.1).

One EM iteration over the training data ``x`` (``n`` rows, ``D`` pixels, ``K`` components):

* E step: responsibilities ``r_nk = p(k | x_n)`` (:meth:`MixtureOfBernoullis.responsibilities`);
* M step with smoothing (the posterior mode under a symmetric Beta prior on every pixel
  probability and a symmetric Dirichlet prior on the weights)::

      N_k   = sum_n r_nk
      mu_ki = (sum_n r_nk x_ni + a) / (N_k + 2 a)          (a = smoothing)
      pi_k  = (N_k + b) / (n + K b)                        (b = weight_smoothing)

  With ``a > 0`` no pixel probability is ever 0 or 1, so every binary vector keeps a positive
  probability (a test image with a pixel never seen on in training does not get ``log p = -inf``).

Iterations stop after ``max_iter`` or when the smoothed objective (mean log-likelihood plus the
log priors, per example) rises by less than ``tol`` nats. The products run in ``dtype`` (float32
by default, for speed); responsibilities, sums and log-likelihoods are float64. The initial
pixel probabilities are ``(m + x_r) / 2`` for ``K`` distinct random training rows ``x_r`` and the
smoothed data mean ``m``; the weights start equal.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.learning.history import History, history_paths
from boltzkit.models.mixture import MixtureOfBernoullis


def _e_step(x: Tensor, log_mu: Tensor, log_1m_mu: Tensor, log_pi: Tensor, chunk: int):
    """Sufficient statistics ``N_k``, ``S_k = sum_n r_nk x_n`` (float64) and the summed log-likelihood."""
    logit = (log_mu - log_1m_mu).to(x.dtype).t().contiguous()
    const = log_1m_mu.sum(1) + log_pi  # float64 (K,)
    k = log_mu.shape[0]
    n_k = torch.zeros(k, dtype=torch.float64, device=x.device)
    s_k = torch.zeros(k, x.shape[1], dtype=torch.float64, device=x.device)
    total = 0.0
    for start in range(0, x.shape[0], chunk):
        xb = x[start : start + chunk]
        logp = (xb @ logit).to(torch.float64) + const
        norm = torch.logsumexp(logp, dim=1, keepdim=True)
        total += float(norm.sum())
        r = torch.exp(logp - norm)
        n_k += r.sum(0)
        s_k += (r.to(x.dtype).t() @ xb).to(torch.float64)
    return n_k, s_k, total


def train_mixture(
    train_x: Tensor,
    n_components: int,
    *,
    seed: int = 0,
    max_iter: int = 100,
    tol: float = 1e-4,
    smoothing: float = 1.0,
    weight_smoothing: float = 1.0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "auto",
    valid_x: Tensor | None = None,
    chunk: int = 10_000,
    progress: bool = True,
    history_path: str | os.PathLike | None = None,
) -> tuple[MixtureOfBernoullis, History]:
    """Fit a mixture of ``n_components`` factorial Bernoullis to binary data by EM with smoothing.

    Parameters
    ----------
    train_x
        Binary training data ``(n, D)``.
    n_components
        ``K`` (S1 used 10, 100 and 500).
    seed
        Seeds the choice of the initial rows.
    max_iter, tol
        At most ``max_iter`` EM iterations; stop earlier when the objective per example rises by
        less than ``tol`` nats.
    smoothing, weight_smoothing
        Pseudo-counts ``a > 0`` (pixels) and ``b > 0`` (weights) of the M step.
    dtype
        Of the products (float32 or float64); everything else is float64. The model is returned
        in float64.
    device
        Where to compute (``"auto"``: CUDA when present).
    valid_x
        Optional held-out data, scored every iteration (``valid_log_lik``).
    chunk
        Rows per E-step product.
    progress, history_path
        Progress bar; write the per-iteration records to ``PATH.csv`` / ``PATH.json``.

    Returns
    -------
    (MixtureOfBernoullis, History)
        The model and one record per iteration (``iteration``, ``train_log_lik``, ``objective``,
        ``valid_log_lik``, ``seconds``).
    """
    n_components = positive_int(n_components, "n_components")
    if not (math.isfinite(smoothing) and smoothing > 0):
        raise BoltzkitError(
            "smoothing must be positive", got=smoothing, hint="without it a pixel probability can be 0 or 1."
        )
    if not (math.isfinite(weight_smoothing) and weight_smoothing > 0):
        raise BoltzkitError(
            "weight_smoothing must be positive", got=weight_smoothing, hint="without it a weight can be 0."
        )
    if int(max_iter) < 1:
        raise BoltzkitError("max_iter must be at least 1", got=max_iter)
    dev = resolve_device(device)
    x = check_binary(train_x, source="training data").to(device=dev, dtype=dtype)
    n, d = x.shape
    if n_components > n:
        raise BoltzkitError("more components than training examples", got=f"{n_components} > {n}")
    vx = None
    if valid_x is not None:
        vx = check_binary(valid_x, source="validation data", n_visible=d).to(device=dev, dtype=dtype)
    gen = make_generator(int(seed), dev)
    rows = torch.randperm(n, generator=gen, device=dev)[:n_components]
    mean = (x.sum(0, dtype=torch.float64) + 1.0) / (n + 2.0)
    mu = (mean + x[rows].to(torch.float64)) / 2.0
    pi = torch.full((n_components,), 1.0 / n_components, dtype=torch.float64, device=dev)
    a, b = float(smoothing), float(weight_smoothing)
    history = History()
    previous = -math.inf
    t_start = time.perf_counter()
    bar = tqdm(range(1, int(max_iter) + 1), desc="EM", disable=not progress, leave=False)
    for it in bar:
        t0 = time.perf_counter()
        log_mu, log_1m_mu, log_pi = torch.log(mu), torch.log1p(-mu), torch.log(pi)
        n_k, s_k, total = _e_step(x, log_mu, log_1m_mu, log_pi, int(chunk))
        log_lik = total / n
        log_prior = a * float((log_mu + log_1m_mu).sum()) + b * float(log_pi.sum())
        objective = log_lik + log_prior / n
        record: dict[str, Any] = {"iteration": it, "train_log_lik": log_lik, "objective": objective}
        if vx is not None:
            _, _, v_total = _e_step(vx, log_mu, log_1m_mu, log_pi, int(chunk))
            record["valid_log_lik"] = v_total / vx.shape[0]
        # M step
        mu = (s_k + a) / (n_k[:, None] + 2 * a)
        pi = (n_k + b) / (n + n_components * b)
        pi = pi / pi.sum()
        record["seconds"] = time.perf_counter() - t0
        record["elapsed"] = time.perf_counter() - t_start
        history.append(record)
        bar.set_postfix(log_lik=f"{log_lik:.3f}")
        if objective - previous < tol:
            break
        previous = objective
    bar.close()
    if history_path is not None:
        csv_path, json_path = history_paths(history_path)
        history.to_csv(csv_path)
        history.to_json(json_path)
    # a pixel never on (or always on) in a component's data sits at a / (N_k + 2a): strictly inside (0, 1)
    return MixtureOfBernoullis(pi, mu, dtype=torch.float64, device=dev), history


__all__ = ["train_mixture"]
