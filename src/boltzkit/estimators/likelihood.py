"""Average log-probability of a data set under an RBM, with the uncertainty of ``log Z`` carried in.

For an RBM the hidden units sum out (S&M 2008, Eq. 3), so with an estimate ``log Z_hat``::

    log p(v) = -F(v) - log Z_hat,        mean_n log p(v_n) = mean_n(-F(v_n)) - log Z_hat

(the "Avg. Test/Train log-prob." columns of Salakhutdinov & Murray 2008, Table 1). The free
energies are exact, so all of the estimator's uncertainty is in ``log Z_hat``; its interval
``log(Z_hat ± k sigma_hat)`` maps to the log-probability interval with the ends swapped (a larger
``log Z`` means a smaller log-probability)::

    mean_log_prob_minus_3sigma = mean(-F) - log(Z_hat + 3 sigma_hat)
    mean_log_prob_plus_3sigma  = mean(-F) - log(Z_hat - 3 sigma_hat)     (None when Z_hat - 3 sigma_hat <= 0)

Because forward AIS underestimates ``log Z`` on average (a stochastic lower bound), the resulting
log-probabilities tend to be optimistic; with a sandwich record the reverse-AIS upper bound also
gives the conservative value ``mean_log_prob_conservative``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError, DataError
from boltzkit.estimators.result import Band, LogZResult
from boltzkit.models.rbm import RBM


def validate_binary_data(x: Tensor | np.ndarray, n_visible: int, *, what: str = "data") -> Tensor:
    """Check that ``x`` is a non-empty 2-D array of 0/1 values with ``n_visible`` columns.

    Parameters
    ----------
    x
        Tensor or NumPy array, shape ``(n, n_visible)``, any numeric or boolean dtype.
    n_visible
        Required width.
    what
        Name used in error messages.

    Returns
    -------
    Tensor
        ``x`` as a tensor (not copied when it already is one).

    Raises
    ------
    DataError
        Wrong type, dimensionality, width, emptiness, or values other than 0 and 1.
    """
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, Tensor):
        raise DataError(f"{what} must be a tensor or a NumPy array", got=type(x).__name__)
    if x.dim() != 2:
        raise DataError(
            f"{what} must be a 2-D array of examples",
            got=f"shape {tuple(x.shape)}",
            expected=f"(n_examples, {n_visible})",
        )
    if x.shape[1] != n_visible:
        raise DataError(
            f"{what} has the wrong width for this model",
            got=f"{x.shape[1]} columns",
            expected=f"{n_visible} (the model's visible units)",
        )
    if x.shape[0] == 0:
        raise DataError(f"{what} has no examples", got=f"shape {tuple(x.shape)}")
    if x.dtype != torch.bool and not bool(((x == 0) | (x == 1)).all()):
        bad = x[(x != 0) & (x != 1)]
        raise DataError(
            f"{what} must be binary",
            got=f"{bad.numel()} values other than 0 and 1 (e.g. {bad.flatten()[0].item()!r})",
            expected="values in {0, 1}",
            hint="binarize the data first (e.g. threshold at 0.5 or sample with the pixel intensities).",
        )
    return x


@dataclass(frozen=True)
class LogProbResult:
    """Mean log-probability of a data set, with the interval implied by the ``log Z`` estimate.

    Attributes
    ----------
    mean_log_prob
        ``mean_n(-F(v_n)) - log Z_hat``.
    mean_log_prob_minus_sigma, mean_log_prob_plus_sigma
        ``mean(-F) - log(Z_hat ± sigma_hat)`` (note the swap: the *minus* end uses ``Z + sigma``);
        ``None`` where the ``log Z`` band is ``None``.
    mean_log_prob_minus_3sigma, mean_log_prob_plus_3sigma
        The same at ``3 sigma`` (S&M 2008, Table 1).
    mean_neg_free_energy
        ``mean_n(-F(v_n))``, exact.
    data_stderr
        Standard error of the mean over examples, ``sd_n(log p(v_n)) / sqrt(n)``: the sampling
        variability of the data set, not part of the ``log Z`` interval.
    n
        Number of examples.
    log_z
        The ``log Z_hat`` used.
    log_z_method
        Its estimator (``"exact"``, ``"ais"``, ...).
    log_z_band
        Its band ``log(Z_hat ± k sigma_hat)``.
    mean_log_prob_conservative
        ``mean(-F) - log Z_up`` when the record is a sandwich with a reverse-AIS upper estimate,
        else ``None``.
    per_example
        ``log p(v_n)``, float64, shape ``(n,)``, when asked for; else ``None``.
    """

    mean_log_prob: float
    mean_log_prob_minus_sigma: float | None
    mean_log_prob_plus_sigma: float | None
    mean_log_prob_minus_3sigma: float | None
    mean_log_prob_plus_3sigma: float | None
    mean_neg_free_energy: float
    data_stderr: float
    n: int
    log_z: float
    log_z_method: str
    log_z_band: Band
    mean_log_prob_conservative: float | None = None
    per_example: Tensor | None = None

    def to_dict(self, include_per_example: bool = False) -> dict[str, Any]:
        """JSON-ready dict (``None`` for undefined bands; per-example values only when asked)."""

        def clean(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)

        out: dict[str, Any] = {
            "mean_log_prob": clean(self.mean_log_prob),
            "mean_log_prob_minus_sigma": clean(self.mean_log_prob_minus_sigma),
            "mean_log_prob_plus_sigma": clean(self.mean_log_prob_plus_sigma),
            "mean_log_prob_minus_3sigma": clean(self.mean_log_prob_minus_3sigma),
            "mean_log_prob_plus_3sigma": clean(self.mean_log_prob_plus_3sigma),
            "mean_log_prob_conservative": clean(self.mean_log_prob_conservative),
            "mean_neg_free_energy": clean(self.mean_neg_free_energy),
            "data_stderr": clean(self.data_stderr),
            "n": self.n,
            "log_z_method": self.log_z_method,
        }
        out.update({k: clean(v) for k, v in self.log_z_band.as_dict("log_z").items()})
        if include_per_example and self.per_example is not None:
            out["per_example"] = self.per_example.tolist()
        return out


def _minus(offset: float, x: float | None) -> float | None:
    return None if x is None else offset - x


@torch.no_grad()
def dataset_log_prob(
    rbm: RBM,
    x: Tensor | np.ndarray,
    log_z: LogZResult | float,
    *,
    per_example: bool = False,
    batch_size: int = 10_000,
) -> LogProbResult:
    """Mean ``log p(v)`` of the rows of ``x`` under ``rbm`` given an estimate of ``log Z``.

    Parameters
    ----------
    rbm
        The model.
    x
        Binary data, shape ``(n, n_visible)`` (tensor or NumPy array).
    log_z
        A :class:`LogZResult` (exact, AIS, reverse AIS, sandwich, ...; for a ratio record, its
        ``log Z`` of B must be known), or a plain number taken as exact.
    per_example
        Also return every ``log p(v_n)`` (float64, on the CPU).
    batch_size
        Rows per free-energy evaluation.

    Returns
    -------
    LogProbResult
        See the module docstring for the bands; S&M 2008, Table 1 reports ``mean_log_prob``.
    """
    if not isinstance(log_z, LogZResult):
        value = float(log_z)
        if not math.isfinite(value):
            raise BoltzkitError("log Z must be a finite number", got=log_z)
        log_z = LogZResult.exact(value, source="given number")
    if log_z.log_z is None or not math.isfinite(float(log_z.log_z)):
        raise BoltzkitError(
            "this log Z record has no log Z of the model",
            got=f"method {log_z.method!r}, log_z={log_z.log_z}",
            hint="a log-ratio record needs an exactly known reference log Z_A; estimate log Z itself.",
        )
    if int(batch_size) < 1:
        raise BoltzkitError("batch_size must be at least 1", got=batch_size)
    data = validate_binary_data(x, rbm.n_visible)
    n = data.shape[0]
    parts = []
    for start in range(0, n, int(batch_size)):
        xb = data[start : start + int(batch_size)].to(device=rbm.device, dtype=rbm.dtype)
        parts.append(rbm.log_unnormalized_visible(xb).to(torch.float64).cpu())
    neg_f = torch.cat(parts)
    mean_neg_f = float(neg_f.mean())
    value = float(log_z.log_z)
    band = log_z.band
    sd = float(neg_f.std(unbiased=True)) if n > 1 else 0.0
    conservative = None
    upper = log_z.settings.get("log_z_upper") if log_z.method == "sandwich" else None
    if upper is not None:
        conservative = mean_neg_f - float(upper)
    return LogProbResult(
        mean_log_prob=mean_neg_f - value,
        mean_log_prob_minus_sigma=_minus(mean_neg_f, band.plus_sigma),
        mean_log_prob_plus_sigma=_minus(mean_neg_f, band.minus_sigma),
        mean_log_prob_minus_3sigma=_minus(mean_neg_f, band.plus_3sigma),
        mean_log_prob_plus_3sigma=_minus(mean_neg_f, band.minus_3sigma),
        mean_neg_free_energy=mean_neg_f,
        data_stderr=sd / math.sqrt(n),
        n=int(n),
        log_z=value,
        log_z_method=log_z.method,
        log_z_band=band,
        mean_log_prob_conservative=conservative,
        per_example=(neg_f - value) if per_example else None,
    )


__all__ = ["LogProbResult", "dataset_log_prob", "validate_binary_data"]
