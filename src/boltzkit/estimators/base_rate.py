"""The base-rate model: an RBM with no weights whose visible biases match the data's pixel means.

Salakhutdinov & Murray (2008), Eq. 18: an RBM with ``W = 0`` and visible biases ``b_A`` has
``Z_A = 2^{M_A} prod_i (1 + exp(b_A_i))`` and independent, exactly sampled visible units
``p_A(v_i = 1) = sigma(b_A_i)``. Its biases are "set by maximum likelihood, then smoothed to ensure
that p(v) > 0" (S&M 2008, Sec. 5). Here the hidden units of the base are dropped (``M_A = 0``):
they are uniform and add the same constant ``M_A log 2`` to both ends of the path.

Smoothing is symmetric, ``p_i = (count_i + a) / (N + 2 a)``, unlike the reference MATLAB code,
which adds pseudo-counts towards 1 only (ALGORITHMS.md section 1).
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzkit._numerics import softplus
from boltzkit.errors import BoltzkitError
from boltzkit.models.rbm import RBM

#: Default pseudo-count, as a fraction of the number of examples, added to each pixel's on and
#: off counts: probabilities are kept in [0.005/1.01, 1.005/1.01].
DEFAULT_SMOOTHING = 0.005


def fit_base_rate(data: Tensor, *, smoothing: float = DEFAULT_SMOOTHING) -> Tensor:
    """Smoothed maximum-likelihood visible biases ``b_A = logit(p)`` of independent pixels.

    Parameters
    ----------
    data
        Binary training data, shape ``(n, n_visible)``.
    smoothing
        Pseudo-count per pixel and per state as a fraction of ``n``: ``a = smoothing * n``.

    Returns
    -------
    Tensor
        ``b_A``, shape ``(n_visible,)``, float64.
    """
    if data.dim() != 2 or data.shape[0] == 0:
        raise BoltzkitError(
            "base-rate data must be a non-empty 2-D array of examples",
            got=tuple(data.shape),
            expected="(n_examples, n_visible)",
        )
    if not smoothing > 0:
        raise BoltzkitError("base-rate smoothing must be positive", got=smoothing)
    x = data.to(torch.float64)
    n = x.shape[0]
    a = smoothing * n
    p = (x.sum(0) + a) / (n + 2 * a)
    return torch.log(p) - torch.log1p(-p)


def base_rate_rbm(vbias: Tensor, *, like: RBM | None = None) -> RBM:
    """An RBM with no hidden units and visible biases ``vbias`` (the base of the AIS path)."""
    dtype = like.dtype if like is not None else torch.float64
    device = like.device if like is not None else vbias.device
    return RBM(vbias.numel(), 0, vbias=vbias.to(dtype=dtype, device=device), dtype=dtype, device=device)


def base_rate_log_z(vbias: Tensor) -> float:
    """``log Z_A = sum_i softplus(b_A_i)`` of the hidden-free base model (S&M 2008, Eq. 18)."""
    return float(softplus(vbias.to(torch.float64)).sum())
