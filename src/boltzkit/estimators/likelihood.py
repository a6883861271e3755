"""Average log-probability of a data set, with the uncertainty of ``log Z`` carried in.

With an estimate ``log Z_hat``::

    log p(v) = log p*(v) - log Z_hat,        mean_n log p(v_n) = mean_n log p*(v_n) - log Z_hat

(the "Avg. Test/Train log-prob." columns of Salakhutdinov & Murray 2008, Table 1, and of
Salakhutdinov 2008, "S2", Table 2). ``log p*(v)`` is

* exact in closed form when the hidden units sum out (RBM: S&M 2008 Eq. 3; SRBM: S2 Sec. 4.2);
* exact by enumerating the hidden units that do not sum out, when there are few
  (:func:`~boltzkit.estimators.exact.exact_log_unnormalized_visible`);
* otherwise (BM, DBM) the mean-field lower bound ``-E(v, mu) + H(mu)`` (S2 Eq. 53; see
  :mod:`boltzkit.models.mean_field`), and the record says ``bound="lower"`` (asked of a model
  whose hidden units sum out, an RBM or SRBM, mean-field's ``q(h)`` is ``p(h | v)`` and the value
  exact: ``bound="exact"``).

All of the estimator's uncertainty is in ``log Z_hat``; its interval ``log(Z_hat ± k sigma_hat)``
maps to the log-probability interval with the ends swapped (a larger ``log Z`` means a smaller
log-probability)::

    mean_log_prob_minus_3sigma = mean log p* - log(Z_hat + 3 sigma_hat)
    mean_log_prob_plus_3sigma  = mean log p* - log(Z_hat - 3 sigma_hat)   (None when Z_hat <= 3 sigma_hat)

Because forward AIS underestimates ``log Z`` on average (a stochastic lower bound), the resulting
log-probabilities tend to be optimistic; with a sandwich record the reverse-AIS upper bound also
gives the conservative value ``mean_log_prob_conservative``.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.exact import (
    enumeration_bits,
    enumeration_plan,
    exact_log_z,
    log_unnormalized_marginal,
)
from boltzkit.estimators.result import LogProbResult, LogZResult, log_prob_bound
from boltzkit.estimators.unit_dbm import unit_dbm_log_unnormalized
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.mean_field import damping_acts, mean_field, mean_field_bound
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM

#: ``log p*(v)`` methods of :func:`log_unnormalized_visible`.
VISIBLE_METHODS = ("auto", "exact", "mean-field")

#: Most hidden units enumerated per example by ``method="auto"`` (2^16 states per row).
AUTO_ENUMERATION_BITS = 16


@torch.no_grad()
def log_unnormalized_visible(
    model: BoltzmannMachine,
    v: Tensor,
    *,
    method: str = "auto",
    max_bits: int = AUTO_ENUMERATION_BITS,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> tuple[Tensor, str, dict[str, Any]]:
    """``log p*(v)`` of each row (float64) or its mean-field lower bound.

    Parameters
    ----------
    model, v
        The model and binary data ``(n, n_visible)`` on the model's device.
    method
        ``"auto"``: exact when the hidden units sum out or at most ``max_bits`` of them must be
        enumerated, else the mean-field bound; ``"exact"``: exact (an error beyond ``max_bits``);
        ``"mean-field"``: the bound (exact, and said so, where no hidden unit is left to
        enumerate).
    max_bits, damping, tol, max_iter
        Enumeration limit; mean-field settings (:func:`~boltzkit.models.mean_field.mean_field`).

    Returns
    -------
    (values, bound, details)
        ``bound`` is ``"exact"`` or ``"lower"``; ``details`` says how (enumerated units, or the
        mean-field iterations, residual and convergence, and ``damping``: ``None`` where no free
        layer has laterals to damp).
    """
    v = check_binary(v, source="v", n_visible=model.n_visible).to(device=model.device, dtype=model.dtype)
    return _log_unnormalized_visible(model, v, method, max_bits, damping, tol, max_iter)


def _log_unnormalized_visible(
    model: BoltzmannMachine, v: Tensor, method: str, max_bits: int, damping: float, tol: float, max_iter: int
) -> tuple[Tensor, str, dict[str, Any]]:
    """:func:`log_unnormalized_visible` of states already checked (a batch of
    :func:`dataset_log_prob`'s data, checked once as a whole)."""
    if method not in VISIBLE_METHODS:
        raise BoltzkitError("unknown log p*(v) method", got=method, expected=", ".join(VISIBLE_METHODS))
    n_bits = enumeration_plan(model, given=(0,)).n_bits
    if method == "exact" or (method == "auto" and n_bits <= max_bits):
        values = log_unnormalized_marginal(model, {0: v}, max_bits=max_bits)
        return values, "exact", {"enumerated_hidden_units": n_bits}
    q = mean_field(model, {0: v}, damping=damping, tol=tol, max_iter=max_iter)
    details = {
        "mean_field_iterations": q.iterations,
        "mean_field_residual": q.residual,
        "mean_field_converged": q.converged,
        "damping": damping if damping_acts(model, given=(0,)) else None,  # None: no laterals to damp
    }
    # where no hidden unit is left to enumerate (an RBM, an SRBM), the hidden units are independent
    # given v and mean-field's q(h) is p(h | v) itself: the "bound" is log p*(v), exact
    return mean_field_bound(model, q), "exact" if n_bits == 0 else "lower", details


def _is_variational(record: object) -> bool:
    """Whether ``record`` is a variational record (its fields, not its class: the variational
    layer sits beside this one)."""
    return not isinstance(record, LogZResult) and all(
        hasattr(record, name) for name in ("method", "log_z", "bound", "converged", "iterations", "residual")
    )


def _minus(offset: float, x: float | None) -> float | None:
    return None if x is None else offset - x


@torch.no_grad()
def dataset_log_prob(
    model: BoltzmannMachine,
    x: Tensor | np.ndarray,
    log_z: LogZResult | float,
    *,
    per_example: bool = False,
    batch_size: int = 10_000,
    method: str = "auto",
    max_bits: int = AUTO_ENUMERATION_BITS,
    damping: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> LogProbResult:
    """Mean ``log p(v)`` of the rows of ``x`` under ``model`` given an estimate of ``log Z``.

    Parameters
    ----------
    model
        Any member of the Boltzmann machine family.
    x
        Binary data, shape ``(n, n_visible)`` (tensor or NumPy array).
    log_z
        A :class:`LogZResult` (exact, AIS, reverse AIS, sandwich, ...; for a ratio record, its
        ``log Z`` of B must be known), a variational record (``variational_log_z``: its bound
        carried over, a lower bound of ``log Z`` giving an upper one of ``log p``), or a plain
        number taken as exact.
    per_example
        Also return every ``log p(v_n)`` (float64, on the CPU).
    batch_size
        Rows per evaluation.
    method, max_bits, damping, tol, max_iter
        How ``log p*(v)`` is obtained (:func:`log_unnormalized_visible`).

    Returns
    -------
    LogProbResult
        ``bound="exact"`` or ``"lower"`` (mean-field); see the module docstring for the bands.
    """
    if _is_variational(log_z):  # mean-field, Bethe, TRW, TAP: a bound (or none), no band
        log_z = LogZResult.from_variational(log_z)
    if not isinstance(log_z, LogZResult):
        one = (isinstance(log_z, Tensor) and log_z.numel() == 1) or (
            isinstance(log_z, np.ndarray) and log_z.size == 1
        )  # a number held in an array
        if isinstance(log_z, bool) or not (one or isinstance(log_z, (numbers.Real, np.number))):
            raise BoltzkitError(
                "log_z must be a log Z record or a number",
                got=type(log_z).__name__,
                expected="a LogZResult (exact_log_z, estimate_log_z, ais, sandwich, ...), a "
                "VariationalResult (variational_log_z) or a float taken as exact",
            )
        value = float(log_z.item() if one else log_z)
        if not math.isfinite(value):
            raise BoltzkitError("log Z must be a finite number", got=log_z)
        log_z = LogZResult.exact(value, source="given number")
    if log_z.log_z is None or not math.isfinite(float(log_z.log_z)):
        raise BoltzkitError(
            "this log Z record has no log Z of the model",
            got=f"method {log_z.method!r}, log_z={log_z.log_z}",
            hint="a log-ratio record needs an exactly known reference log Z_A; estimate log Z itself.",
        )
    if isinstance(batch_size, bool) or int(batch_size) < 1:
        raise BoltzkitError("batch_size must be at least 1", got=batch_size)
    if not isinstance(model, (BoltzmannMachine, UnitRBM, UnitDBM)):
        raise BoltzkitError(
            "dataset_log_prob takes a Boltzmann machine (RBM, SRBM, BM, DBM, or with Gaussian or "
            "categorical visible units)",
            got=type(model).__name__,
            hint="a DBN's log p(v) is bounded by dbn_bound (S1 Eqs. 22-24); a mixture of Bernoullis "
            "gives it exactly by model.log_prob(x).",
        )
    recorded = log_z.settings.get("model_fingerprint")
    if recorded is not None and recorded != model.fingerprint():
        raise BoltzkitError(
            "this log Z record is of another model",
            got=f"a record of the model {str(recorded)[:19]}..., given {model.fingerprint()[:19]}...",
            hint="estimate log Z of this model (exact_log_z or estimate_log_z), or pass the model the "
            "record was made for; a plain number is taken as this model's exact log Z unchecked.",
        )
    units = isinstance(model, (UnitRBM, UnitDBM))  # real-valued or categorical visible units
    if units:
        data = model.check_data(torch.as_tensor(x))
    else:
        data = check_binary(x, source="data", n_visible=model.n_visible)
    n = data.shape[0]
    parts, bound, details = [], "exact", {}
    iterations, converged, residual = 0, True, 0.0
    for start in range(0, n, int(batch_size)):
        xb = data[start : start + int(batch_size)].to(device=model.device, dtype=model.dtype)
        if isinstance(model, UnitDBM):  # exact (odd layers enumerated) or the mean-field bound
            values, bound, details = unit_dbm_log_unnormalized(
                model, xb, method=method, max_bits=max_bits, tol=tol, max_iter=max_iter
            )
        elif units:
            with torch.no_grad():
                values = model.log_unnormalized(xb)
        else:
            values, bound, details = _log_unnormalized_visible(
                model, xb, method, max_bits, damping, tol, max_iter
            )
        parts.append(values.to(torch.float64).cpu())
        if bound == "lower":
            iterations = max(iterations, details["mean_field_iterations"])
            residual = max(residual, details["mean_field_residual"])
            converged = converged and details["mean_field_converged"]
    if bound == "lower":
        details = {
            "mean_field_iterations": iterations,
            "mean_field_residual": residual,
            "mean_field_converged": converged,
            "damping": details.get("damping"),
        }
    verdict = log_z.reliability()
    if verdict is not None:  # the log-probabilities are as trustworthy as the log Z behind them
        details = {**details, **verdict.as_dict()}
    bound, note = log_prob_bound(bound, log_z)  # a deterministic log Z turns the bound around
    if note is not None:
        details = {**details, "bound_note": note}
    neg_f = torch.cat(parts)
    mean_neg_f = float(neg_f.mean())
    value = float(log_z.log_z)
    band = log_z.band
    data_se = float(neg_f.std(unbiased=True)) / math.sqrt(n) if n > 1 else None  # undefined for one
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
        data_stderr=data_se,
        n=int(n),
        log_z=value,
        log_z_method=log_z.method,
        log_z_band=band,
        bound=bound,
        mean_log_prob_conservative=conservative,
        per_example=(neg_f - value) if per_example else None,
        details=details,
    )


@torch.no_grad()
def exact_log_likelihoods(
    model: BoltzmannMachine,
    datasets: dict[str, Tensor],
    *,
    max_bits: int = 20,
    batch_size: int = 8192,
) -> dict[str, float]:
    """Exact ``log Z`` and mean log-likelihood of each data set, when tractable; else ``{}``.

    The monitor that training records each epoch (``{"log_z", "train_log_lik", "valid_log_lik"}``
    for ``datasets = {"train": x, "valid": y}``): ``log Z`` enumerates the fewest units
    (:func:`~boltzkit.estimators.exact.exact_log_z`), ``log p*(v)`` is exact (closed form or the
    hidden units that do not sum out enumerated). Nothing is measured when more than ``max_bits``
    units would be enumerated by either. A model with Gaussian or categorical visible units
    enumerates its layers of fewer states (:func:`~boltzkit.estimators.exact.enumeration_bits`);
    where its ``log p(v)`` is a mean-field lower bound (a DBM), the record says
    ``"log_lik_bound": "lower"``.
    """
    if not isinstance(model, BoltzmannMachine):
        return _unit_log_likelihoods(model, datasets, max_bits=max_bits, batch_size=batch_size)
    if enumeration_plan(model).n_bits > max_bits or enumeration_plan(model, given=(0,)).n_bits > max_bits:
        return {}
    m64 = model.as_float64()
    log_z = float(exact_log_z(m64, max_bits=max_bits).log_z)
    out: dict[str, float] = {"log_z": log_z}
    for name, x in datasets.items():
        total = 0.0
        for start in range(0, x.shape[0], batch_size):
            chunk = x[start : start + batch_size].to(device=m64.device, dtype=torch.float64)
            total += float(
                log_unnormalized_marginal(m64, {0: chunk}, max_bits=max_bits).sum()
            )  # trusted data
        out[f"{name}_log_lik"] = total / max(1, x.shape[0]) - log_z
    return out


def _unit_log_likelihoods(
    model: Any, datasets: dict[str, Tensor], *, max_bits: int, batch_size: int
) -> dict[str, Any]:
    """:func:`exact_log_likelihoods` of an RBM or DBM with Gaussian or categorical visible units."""
    if enumeration_bits(model) > max_bits:
        return {}
    m64 = copy.deepcopy(model).double()
    log_z = exact_log_z(m64, max_bits=max_bits)
    out: dict[str, Any] = {"log_z": float(log_z.log_z)}
    for name, x in datasets.items():
        result = dataset_log_prob(
            m64, x.to(device=m64.device, dtype=torch.float64), log_z, batch_size=batch_size
        )
        out[f"{name}_log_lik"] = result.mean_log_prob
        if result.bound == "lower":
            out["log_lik_bound"] = "lower"
    return out


__all__ = ["VISIBLE_METHODS", "dataset_log_prob", "exact_log_likelihoods", "log_unnormalized_visible"]
