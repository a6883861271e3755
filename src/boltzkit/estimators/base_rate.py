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

import numpy as np
import torch
from torch import Tensor

from boltzkit._numerics import softplus
from boltzkit.errors import BoltzkitError, DataError
from boltzkit.models.rbm import RBM

#: Default pseudo-count, as a fraction of the number of examples, added to each pixel's on and
#: off counts: probabilities are kept in [0.005/1.01, 1.005/1.01].
DEFAULT_SMOOTHING = 0.005
_INTEGER_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_base_rate_data(data: Tensor | np.ndarray | object, n_visible: int | None = None) -> Tensor:
    """The data a base rate is fitted to, as a tensor: a non-empty 2-D array (a tensor, NumPy
    array or nested list) of ``n_visible`` columns when given, every value in ``[0, 1]``: binary
    images, or probabilities (a DBN's recognition probabilities passed up to its top). Anything
    else is refused as data (a value of 2 or NaN was blamed on the model's biases, a value of
    -1e9 too; a review of 2026-12-07), with its row and column."""
    try:
        x = data if isinstance(data, Tensor) else torch.as_tensor(np.asarray(data))
    except (TypeError, ValueError) as exc:
        raise DataError("base-rate data must be an array of numbers", got=type(data).__name__) from exc
    if x.dtype == torch.bool or not x.is_floating_point():
        if x.is_complex() or x.dtype not in _INTEGER_DTYPES:
            raise DataError("base-rate data must be real numbers in [0, 1]", got=str(x.dtype))
        x = x.to(torch.float64)
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise DataError(
            "base-rate data must be a non-empty 2-D array of examples",
            got=tuple(x.shape),
            expected="(n_examples, n_visible)",
        )
    if n_visible is not None and x.shape[1] != n_visible:
        raise DataError(
            "base-rate data has the wrong width for this model",
            got=tuple(x.shape),
            expected=f"(n_examples, {n_visible})",
        )
    bad = ~((x >= 0) & (x <= 1))  # NaN fails both
    if bool(bad.any()):
        row, col = (int(i) for i in bad.nonzero()[0])
        raise DataError(
            "base-rate data must hold values in [0, 1] (binary images, or probabilities)",
            got=f"{float(x[row, col])} at row {row}, column {col}",
            hint="pass the training images (0/1) the model was fitted to; a +-1 array maps by (x + 1) / 2.",
        )
    return x


def fit_base_rate(
    data: Tensor | np.ndarray, *, smoothing: float = DEFAULT_SMOOTHING, n_visible: int | None = None
) -> Tensor:
    """Smoothed maximum-likelihood visible biases ``b_A = logit(p)`` of independent pixels.

    Parameters
    ----------
    data
        Training data, shape ``(n, n_visible)``: binary, or probabilities
        (:func:`check_base_rate_data`).
    smoothing
        Pseudo-count per pixel and per state as a fraction of ``n``: ``a = smoothing * n``.
    n_visible
        When given, the width the data must have (the model's visible units).

    Returns
    -------
    Tensor
        ``b_A``, shape ``(n_visible,)``, float64.
    """
    data = check_base_rate_data(data, n_visible)
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
