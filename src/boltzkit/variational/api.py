"""One entry point: ``variational_log_z(model, method)``, the dispatch the command line uses.

=============== =================================================================================
``mean-field``  naive mean-field lower bound (S2 Sec. 2.3), best of several starts
``bethe``       Bethe approximation by damped loopy BP (S2 Sec. 2.4); exact on trees, no bound
``trw``         tree-reweighted upper bound (S2 Sec. 2.5), ``rho`` uniform or optimised by
                Frank-Wolfe (S2 Sec. 5.1); a bound only when converged
``tap``         second-order TAP estimate (Gabrie et al. 2015); no bound
=============== =================================================================================
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from enum import Enum

import torch

from boltzkit._numerics import resolve_device
from boltzkit.errors import BoltzkitError, warn
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.variational import bp, mean_field, tap, trw
from boltzkit.variational.graph import BlockGraph
from boltzkit.variational.result import ConvergenceWarning, VariationalResult

#: TAP and Bethe values are also checked against TRW's certified bound at uniform rho on graphs of
#: at most this many edges (a fraction of a second there; the loose ceiling alone above).
TRW_CHECK_MAX_EDGES = 5_000

#: Names accepted by :func:`variational_log_z`.
METHODS = ("mean-field", "bethe", "trw", "tap")

_ALIASES = {"mf": "mean-field", "mean_field": "mean-field", "meanfield": "mean-field", "bp": "bethe",
            "loopy-bp": "bethe", "tap2": "tap"}  # fmt: skip


def normalize_method(method: str | Enum) -> str:
    """Canonical method name; an error for unknown names."""
    raw = method.value if isinstance(method, Enum) else method
    name = str(raw).strip().lower()
    name = _ALIASES.get(name, name)
    if name not in METHODS:
        raise BoltzkitError(
            "unknown variational log Z method", got=raw, expected=", ".join(repr(m) for m in METHODS)
        )
    return name


def variational_log_z(
    model: BoltzmannMachine,
    method: str | Enum,
    *,
    damping: float | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    rho: str = "optimized",
    n_starts: int | None = None,
    seed: int | None = 0,
    fw_steps: int | None = None,
    fw_tol: float | None = None,
    device: torch.device | str | None = None,
) -> VariationalResult:
    """A variational approximation (or bound) of ``log Z`` of any member of the family.

    Parameters
    ----------
    model
        RBM, SRBM, BM or DBM (evaluated in float64).
    method
        ``"mean-field"``, ``"bethe"``, ``"trw"`` or ``"tap"``.
    damping, max_iter, tol
        Iteration settings (``None``: each method's default). ``damping`` is the weight of the
        old value (messages for BP/TRW, magnetisations for TAP, lateral layers of mean-field when
        not sequential).
    rho
        TRW only: ``"uniform"`` or ``"optimized"`` (Frank-Wolfe).
    n_starts, seed
        Mean-field and TAP starts (``None``: 1/2, every layer-wise ordered corner of a model of
        up to four layers, else all on and all off, and two random ones;
        :mod:`boltzkit.variational.starts`).
    fw_steps, fw_tol
        TRW with ``rho="optimized"``: Frank-Wolfe steps and duality-gap tolerance.
    device
        Run on this device (default: the model's).

    Returns
    -------
    VariationalResult
        With ``bound`` ``"lower"``, ``"upper"`` or ``"none"``.
    """
    name = normalize_method(method)
    if not isinstance(model, BoltzmannMachine):  # the Ising form needs binary units
        units = getattr(getattr(model, "visible_units", None), "name", type(model).__name__)
        raise BoltzkitError(
            f"{name} works on the Ising form of binary units, not on {units} units",
            hint="use --method exact (when the binary layer can be enumerated), ais or sandwich.",
        )
    if device is not None:
        dev = resolve_device(device)
        if dev != model.device:
            model = model.detached_copy(device=dev)
    opts: dict = {}
    if damping is not None:
        opts["damping"] = float(damping)
    if max_iter is not None:
        opts["max_iter"] = int(max_iter)
    if tol is not None:
        opts["tol"] = float(tol)
    if name in ("mean-field", "tap"):
        if n_starts is not None:
            opts["n_starts"] = int(n_starts)
        opts["seed"] = seed
        if name == "mean-field":
            return mean_field.mean_field_log_z(model, **opts)
    if name in ("tap", "bethe"):  # each start judged against the certain bounds first
        interval = _certain_interval(model, seed)
        within = (interval.lower.log_z - interval.slack, interval.upper + interval.slack)
        if name == "tap":
            result = tap.tap_log_z(model, within=within, **opts)
        else:  # BP starts at zero messages and at mean-field's fixed point too
            result = bp.bethe_log_z(model, means=interval.lower.marginals, within=within, **opts)
        return _not_below_mean_field(result, model, interval)
    if fw_steps is not None:
        opts["fw_steps"] = int(fw_steps)
    if fw_tol is not None:
        opts["fw_tol"] = float(fw_tol)
    return trw.trw_log_z(model, rho=rho, **opts)


@torch.no_grad()
def log_z_ceiling(model: BoltzmannMachine) -> float:
    """A certain, cheap upper bound on ``log Z``: ``N log 2 + max_x(-E(x))`` with the maximum
    bounded by taking every positive term, ``sum b_i^+ + sum_{i<j} Q_ij^+``. Loose, but a value
    above it is certainly wrong (a spurious TAP or Bethe stationary point of a strongly coupled
    model)."""
    m64 = model.as_float64()
    top = sum(float(m64.bias(l).detach().clamp(min=0).sum()) for l in range(m64.n_layers))
    for l, m in m64.coupling_keys:
        positive = float(m64.coupling(l, m).detach().clamp(min=0).sum())
        top += 0.5 * positive if l == m else positive  # laterals: each pair appears twice in L
    return sum(m64.layer_sizes) * math.log(2.0) + top


@dataclass(frozen=True)
class _CertainInterval:
    """Where ``log Z`` certainly lies: above the mean-field bound ``lower``, below ``upper``
    (:func:`log_z_ceiling`, or TRW's bound at uniform rho where that is lower; named by
    ``upper_name``), up to ``slack``; ``checks`` are the numbers as a record's settings keep them."""

    lower: VariationalResult
    upper: float
    upper_name: str
    slack: float
    checks: dict


def _certain_interval(model: BoltzmannMachine, seed: int | None) -> _CertainInterval:
    """The certain bounds an approximation (Bethe, TAP) is judged against: the mean-field lower
    bound and :func:`log_z_ceiling`, or on a graph of at most :data:`TRW_CHECK_MAX_EDGES` edges
    TRW's certified bound at uniform rho where that is lower."""
    bound = mean_field.mean_field_log_z(model, seed=seed)
    ceiling, ceiling_name = log_z_ceiling(model), "N log 2 + the largest possible -E"
    checks = {"mean_field_bound": bound.log_z, "log_z_ceiling": ceiling}
    if BlockGraph.from_model(model).n_edges <= TRW_CHECK_MAX_EDGES:  # a tighter certain bound, cheaply
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # certified whether or not converged
            upper = trw.trw_log_z(model, rho="uniform")
        if upper.bound == "upper" and math.isfinite(upper.log_z):
            checks["trw_bound"] = upper.log_z
            if upper.log_z < ceiling:
                ceiling, ceiling_name = upper.log_z, "TRW's bound at uniform rho"
    return _CertainInterval(bound, ceiling, ceiling_name, 1e-9 * max(1.0, abs(bound.log_z)), checks)


def _not_below_mean_field(
    result: VariationalResult, model: BoltzmannMachine, interval: _CertainInterval
) -> VariationalResult:
    """An approximation (Bethe, TAP) below the naive mean-field *lower bound* on ``log Z``, or
    above a certain upper bound (:func:`_certain_interval`), sits on a poor stationary point (the
    disordered one of an ordered model, say; at strong couplings TAP's Onsager term makes the
    point at 1/2 look best): it is returned with ``converged=False``, the bound in its settings and
    a :class:`ConvergenceWarning`, never silently. The methods themselves prefer a start inside
    the interval (their ``within``), so this is what is left when none lies there."""
    bound, ceiling, ceiling_name = interval.lower, interval.upper, interval.upper_name
    checks, slack = interval.checks, interval.slack
    if bound.log_z - slack <= result.log_z <= ceiling + slack:
        return result.with_settings(**checks)
    below = result.log_z < bound.log_z - slack
    shown = getattr(model, "log_z_constant", 0.0)  # an Ising model's values in its +-1 convention
    where = (
        f"below the mean-field lower bound {bound.log_z + shown:.6g}"
        if below
        else f"above {ceiling + shown:.6g}, a certain upper bound ({ceiling_name})"
    )
    warn(
        f"the {result.method} value {result.log_z + shown:.6g} lies {where}: it sits on a poor stationary "
        f"point (reported as not converged); the mean-field bound {bound.log_z + shown:.6g} is the better "
        "value"
        + ("" if below or "TRW" in ceiling_name else ", and --method trw gives a tighter upper bound"),
        ConvergenceWarning,
    )
    settings = {**result.settings, **checks}
    settings["below_mean_field" if below else "above_ceiling"] = True
    return replace(result, converged=False, settings=settings)


__all__ = ["METHODS", "log_z_ceiling", "normalize_method", "variational_log_z"]
