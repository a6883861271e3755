"""Frozen result records of every estimator: log Z estimates, sandwiches, bridges, log-probabilities.

An importance-sampling estimate of ``Z`` from ``M`` log-weights ``log w_i`` is (Salakhutdinov &
Murray 2008, Eqs. 11-12)::

    Z_hat = Z_0 * mean_i w_i,      sigma_hat = Z_0 * std(w) / sqrt(M)

and results are reported as ``log Z_hat``, ``log(Z_hat ± sigma_hat)`` and ``log(Z_hat ± 3 sigma_hat)``.
All of it is computed in float64 with the weights shifted by their maximum, so spreads of
thousands of nats neither overflow nor underflow. A lower band is ``None`` (JSON ``null``) when
``Z_hat - k sigma_hat <= 0``, never NaN.

For reverse (upper-bound) estimators the weights estimate ``Z_0 / Z`` instead; the record keeps
them with ``reciprocal=True`` and maps the bands through ``Z = Z_0 / r``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import log_add_exp, log_sub_exp
from boltzkit.estimators.reliability import (
    Reliability,
    assess,
    combine,
    effective_sample_size,
    with_checks,
)
from boltzkit.jsonio import dumps, to_jsonable, withhold_bands


def _log_mean_and_log_sigma(log_w: Tensor) -> tuple[float, float]:
    """``log mean(w)`` and ``log(std(w) / sqrt(M))`` (unbiased std), both shifted by the max."""
    lw = log_w.detach().to(torch.float64).flatten().cpu()
    m = lw.numel()
    if m == 0:
        raise ValueError("no log-weights")
    top = float(lw.max())
    if not math.isfinite(top):
        return top, math.nan
    w = torch.exp(lw - top)
    log_mean = top + math.log(float(w.mean()))
    if m < 2:
        return log_mean, -math.inf
    sd = float(w.std(unbiased=True))
    log_sigma = top + (math.log(sd) if sd > 0 else -math.inf) - 0.5 * math.log(m)
    return log_mean, log_sigma


@dataclass(frozen=True)
class Band:
    """``log(r_hat)``, ``log(r_hat ± sigma)`` and ``log(r_hat ± 3 sigma)`` for one quantity."""

    value: float
    minus_sigma: float | None
    plus_sigma: float | None
    minus_3sigma: float | None
    plus_3sigma: float | None

    @classmethod
    def from_log_mean(cls, log_mean: float, log_sigma: float, offset: float = 0.0) -> Band:
        def down(k: float) -> float | None:
            if log_sigma == -math.inf:
                return log_mean + offset
            d = log_sub_exp(log_mean, math.log(k) + log_sigma)
            return None if d is None else d + offset

        def up(k: float) -> float:
            if log_sigma == -math.inf:
                return log_mean + offset
            return log_add_exp(log_mean, math.log(k) + log_sigma) + offset

        return cls(log_mean + offset, down(1.0), up(1.0), down(3.0), up(3.0))

    def negated(self, offset: float) -> Band:
        """Band of ``offset - x``: the interval flips."""

        def neg(x: float | None) -> float | None:
            return None if x is None else offset - x

        # upper end of the reciprocal may be unbounded (lower end of r hit 0): report None
        return Band(
            offset - self.value,
            neg(self.plus_sigma),
            neg(self.minus_sigma),
            neg(self.plus_3sigma),
            neg(self.minus_3sigma),
        )

    def as_dict(self, prefix: str) -> dict[str, float | None]:
        return {
            prefix: self.value,
            f"{prefix}_minus_sigma": self.minus_sigma,
            f"{prefix}_plus_sigma": self.plus_sigma,
            f"{prefix}_minus_3sigma": self.minus_3sigma,
            f"{prefix}_plus_3sigma": self.plus_3sigma,
        }


def stored_steps(record: dict[str, Any]) -> int:
    """The annealing steps of a stored ``log Z`` record: ``n_steps``, or ``n_betas`` in records
    written before the field was renamed (it always held the steps, not the betas)."""
    steps = record.get("n_steps", record.get("n_betas"))
    return 0 if steps is None else int(steps)


@dataclass(frozen=True)
class LogZResult:
    """An estimate of ``log Z`` (or of ``log Z_B / Z_A``) with everything needed to judge it.

    Attributes
    ----------
    method
        ``"exact"``, ``"ais"``, ``"reverse-ais"``, ``"sis"``, ``"bridge"``, ...
    log_z
        ``log Z_hat`` of the target; ``None`` for a ratio whose reference ``log Z_A`` is unknown.
    log_weights
        Raw float64 log-weights, shape ``(n_chains,)`` (``None`` for exact results).
    log_z_start
        ``log`` of the known normalizer the weights are relative to (base model's ``log Z``, plus
        any path constant); for ratios, the additive constant of the path.
    reciprocal
        The weights estimate ``Z_start / Z`` (reverse AIS) instead of ``Z / Z_start``.
    n_steps
        Number of annealing steps (intermediate distributions); 0 for exact, 1 for simple IS.
    log_ratio_offset
        For a ratio ``log Z_B / Z_A``: the constant added to ``log mean w`` to get the ratio.
    reference_log_z
        For a ratio: ``log Z_A`` when known, so that ``log_z = reference_log_z + log_ratio``.
    settings
        Base model, schedule, operator, sweeps, seed, device, warnings: all that made the number.
    seconds
        Wall-clock time of the estimate.
    """

    method: str
    log_z: float | None
    log_weights: Tensor | None = None
    log_z_start: float = 0.0
    reciprocal: bool = False
    n_steps: int = 0
    is_ratio: bool = False
    reference_log_z: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    # ---------------------------------------------------------------------------- builders
    @classmethod
    def exact(cls, log_z: float, *, seconds: float = 0.0, **settings: Any) -> LogZResult:
        return cls(method="exact", log_z=float(log_z), seconds=seconds, settings=dict(settings))

    @classmethod
    def deterministic(
        cls,
        method: str,
        log_z: float,
        *,
        bound: str,
        converged: bool,
        iterations: int,
        residual: float,
        seconds: float = 0.0,
        **settings: Any,
    ) -> LogZResult:
        """A deterministic approximation of ``log Z`` (mean-field, Bethe, TRW, TAP: the records of
        ``boltzkit.variational``). It has no sampling band: the bands and ``log_z_stderr`` are
        ``None`` (a zero-width band would claim a precision it does not have). ``bound`` is
        ``"lower"``, ``"upper"`` or ``"none"``; it and the convergence go into the settings."""
        info = {"bound": bound, "converged": bool(converged), "iterations": int(iterations)}
        info["residual"] = residual
        return DeterministicResult(
            method=method, log_z=float(log_z), seconds=float(seconds), settings={**info, **settings}
        )

    @classmethod
    def from_variational(cls, result: Any) -> LogZResult:
        """A variational record (:class:`~boltzkit.variational.result.VariationalResult`: mean-field,
        Bethe, TRW, TAP) as a deterministic record (:meth:`deterministic`), its bound, convergence
        and settings kept: what :func:`~boltzkit.estimators.likelihood.dataset_log_prob` and
        ``boltzkit evaluate`` take."""
        return cls.deterministic(
            result.method, result.log_z, bound=result.bound, converged=result.converged,
            iterations=result.iterations, residual=result.residual, seconds=result.seconds,
            **result.settings,
        )  # fmt: skip

    @classmethod
    def from_log_weights(
        cls,
        method: str,
        log_weights: Tensor,
        *,
        log_z_start: float,
        n_steps: int,
        reciprocal: bool = False,
        is_ratio: bool = False,
        reference_log_z: float | None = None,
        seconds: float = 0.0,
        **settings: Any,
    ) -> LogZResult:
        """Estimate from log-weights: ``log Z_hat = log_z_start + log mean w`` (or minus, for a
        reciprocal estimator). For a ratio, ``log_z_start`` is the path's constant and the
        estimate is of ``log Z_B / Z_A``."""
        lw = log_weights.detach().to(torch.float64).cpu()
        log_mean, _ = _log_mean_and_log_sigma(lw)
        estimate = log_z_start - log_mean if reciprocal else log_z_start + log_mean
        if is_ratio:
            log_z = None if reference_log_z is None else reference_log_z + estimate
        else:
            log_z = estimate
        return cls(
            method=method,
            log_z=log_z,
            log_weights=lw,
            log_z_start=float(log_z_start),
            reciprocal=reciprocal,
            n_steps=int(n_steps),
            is_ratio=is_ratio,
            reference_log_z=reference_log_z,
            settings=dict(settings),
            seconds=float(seconds),
        )

    # ----------------------------------------------------------------------------- derived
    @property
    def n_chains(self) -> int:
        return 0 if self.log_weights is None else int(self.log_weights.numel())

    @property
    def ess(self) -> float | None:
        """Effective sample size of the weights (Kish)."""
        return None if self.log_weights is None else effective_sample_size(self.log_weights)

    def reliability(self) -> Reliability | None:
        """The verdict on the estimate (Pareto k-hat, ESS, degenerate spread;
        :mod:`boltzkit.estimators.reliability`), or ``None`` for a record without weights."""
        if self.log_weights is None:
            return None
        trivial = bool(self.settings.get("trivial_path", False))
        verdict = assess(self.log_weights, trivial=trivial, annealed=self.n_steps > 1)
        return with_checks(verdict, self.settings.get("checks"))

    def _band(self) -> Band:
        """Band of the estimated quantity (``log Z`` or ``log Z_B/Z_A``)."""
        if self.log_weights is None:
            v = float(self.log_z)  # exact
            return Band(v, v, v, v, v)
        log_mean, log_sigma = _log_mean_and_log_sigma(self.log_weights)
        if self.reciprocal:
            return Band.from_log_mean(log_mean, log_sigma).negated(self.log_z_start)
        return Band.from_log_mean(log_mean, log_sigma, self.log_z_start)

    @property
    def band(self) -> Band:
        """``log Z`` band; for a ratio with known reference, shifted by ``reference_log_z``."""
        b = self._band()
        if not self.is_ratio:
            return b
        if self.reference_log_z is None:
            return Band(math.nan, None, None, None, None)
        r = self.reference_log_z

        def s(x: float | None) -> float | None:
            return None if x is None else x + r

        return Band(b.value + r, s(b.minus_sigma), s(b.plus_sigma), s(b.minus_3sigma), s(b.plus_3sigma))

    @property
    def ratio_band(self) -> Band | None:
        return self._band() if self.is_ratio else None

    @property
    def log_ratio(self) -> float | None:
        return self._band().value if self.is_ratio else None

    @property
    def log_z_stderr(self) -> float:
        """Delta-method standard error of ``log Z_hat``: ``sigma_hat / Z_hat``."""
        if self.log_weights is None:
            return 0.0
        log_mean, log_sigma = _log_mean_and_log_sigma(self.log_weights)
        return math.exp(log_sigma - log_mean) if math.isfinite(log_sigma) else 0.0

    # ------------------------------------------------------------------------------- pooling
    @staticmethod
    def pool(results: Sequence[LogZResult]) -> LogZResult:
        """Pool runs of the same estimator (same start, path and schedule) into one estimate.

        The checks of every run are kept (``settings["checks"]``, each with the index of its
        ``run``; of a pooled record, also its index within that pool, ``run_within``), so a check
        that failed on any of them fails the pool, in whatever order the runs come: each was made
        against its own run's estimate, and passing checks of the others do not undo it."""
        if not results:
            raise ValueError("nothing to pool")
        first = results[0]
        for r in results[1:]:
            if (r.method, r.log_z_start, r.reciprocal, r.is_ratio, r.n_steps) != (
                first.method,
                first.log_z_start,
                first.reciprocal,
                first.is_ratio,
                first.n_steps,
            ):
                raise ValueError("can only pool results of the same estimator, base and schedule")
        if first.log_weights is None:
            return first
        weights = torch.cat([r.log_weights for r in results])
        seeds = [r.settings.get("seed") for r in results]
        settings = dict(first.settings, seed=seeds, pooled_runs=len(results))
        checks = [  # a pool of pools keeps the inner index too, as "run_within"
            {**check, "run": i, **({"run_within": check["run"]} if "run" in check else {})}
            for i, r in enumerate(results)
            for check in (r.settings.get("checks") or [])
        ]
        settings.pop("checks", None)
        if checks:
            settings["checks"] = checks
        return LogZResult.from_log_weights(
            first.method,
            weights,
            log_z_start=first.log_z_start,
            n_steps=first.n_steps,
            reciprocal=first.reciprocal,
            is_ratio=first.is_ratio,
            reference_log_z=first.reference_log_z,
            seconds=sum(r.seconds for r in results),
            **settings,
        )

    def with_settings(self, **settings: Any) -> LogZResult:
        return replace(self, settings={**self.settings, **settings})

    # ------------------------------------------------------------------------------- export
    def to_dict(self, include_weights: bool = False) -> dict[str, Any]:
        """JSON-ready dict with the keys of the command line's ``--json`` output: the bands of an
        unreliable estimate ``None``, as there (:func:`~boltzkit.jsonio.withhold_bands`; the
        :attr:`band` itself stays, for whoever asks for it knowing the verdict)."""
        out: dict[str, Any] = {"method": self.method}
        b = self.band
        out.update(b.as_dict("log_z"))
        if self.is_ratio:
            rb = self._band()
            out.update(rb.as_dict("log_ratio"))
            if self.reference_log_z is None:
                out.update({k: None for k in b.as_dict("log_z")})
        out["log_z_stderr"] = self.log_z_stderr
        out["ess"] = self.ess
        out["n_chains"] = self.n_chains
        out["n_steps"] = self.n_steps
        out["seconds"] = self.seconds
        verdict = self.reliability()
        if verdict is not None:
            out.update(verdict.as_dict())
        out.update({k: to_jsonable(v) for k, v in self.settings.items() if k not in out})
        if include_weights and self.log_weights is not None:
            out["log_weights"] = self.log_weights.tolist()
        return withhold_bands({k: to_jsonable(v) for k, v in out.items()})

    def to_json(self, include_weights: bool = False) -> str:
        return dumps(self.to_dict(include_weights))

    def __str__(self) -> str:
        """One line for ``print``: the estimate, what made it and the verdict, with the 3-sigma
        band only where the estimate supports one (as the command line prints it)."""
        name = "log(Z_B/Z_A)" if self.is_ratio and self.reference_log_z is None else "log Z"
        value = self.log_ratio if name != "log Z" else self.log_z
        head = (
            f"{name} = {value:.6g}" if value is not None and math.isfinite(value) else f"{name} = undefined"
        )
        parts = [self.method]
        if self.log_weights is not None:
            parts.append(f"{self.n_chains} runs of {self.n_steps} steps, ESS {self.ess:.3g}")
        bound = self.settings.get("bound")
        if bound in ("lower", "upper"):
            parts.append(f"{bound} bound")
        verdict = self.reliability()
        if verdict is None:
            return f"{head} ({', '.join(parts)})"
        if not verdict.reliable:
            return f"{head} ({', '.join(parts)}): UNRELIABLE, {verdict.reason} (advice: {verdict.advice})"
        band = self.band if name == "log Z" else self._band()
        if band.minus_3sigma is not None and band.plus_3sigma is not None:
            head += f" [{band.minus_3sigma:.6g}, {band.plus_3sigma:.6g}] at 3 sigma"
        return f"{head} ({', '.join(parts)}): reliable"


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
    verdict: Reliability | None = None

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

    def reliability(self) -> Reliability | None:
        return self.verdict


@dataclass(frozen=True)
class DeterministicResult(LogZResult):
    """A :class:`LogZResult` of a deterministic approximation (:meth:`LogZResult.deterministic`):
    one value, no weights, no band (``None`` bands and standard error)."""

    def _band(self) -> Band:
        return Band(float(self.log_z), None, None, None, None)

    @property
    def log_z_stderr(self) -> float | None:  # type: ignore[override]
        return None

    def reliability(self) -> Reliability | None:
        """An unreliable verdict where the value is not what it claims to be; else ``None`` (a
        deterministic value claims no sampling verdict: a converged Bethe value can be far off).
        A mean-field value is a lower bound at any iterate and TRW's an upper bound where it
        converged (``bound``); a value that is no bound (Bethe, TAP, an unconverged TRW) is
        unreliable where its iteration did not converge, or where it lies below the mean-field
        bound or above a certain upper bound (a poor stationary point,
        :func:`boltzkit.variational.api`'s check), with the reason and advice of the warning."""
        nan = math.nan
        if self.settings.get("bound") in ("lower", "upper"):
            return None
        method = self.method
        if self.settings.get("below_mean_field") or self.settings.get("above_ceiling"):
            where = (  # (no numbers: an Ising model's are shown in its own convention)
                "below the mean-field lower bound"
                if self.settings.get("below_mean_field")
                else "above a certain upper bound (trw_bound, log_z_ceiling in the record)"
            )
            return Reliability(
                False,
                f"the {method} value lies {where}: a poor stationary point",
                "take the mean-field bound (--method mean-field) or TRW's upper bound (--method trw)",
                nan,
                nan,
            )
        if not self.settings.get("converged", True):
            return Reliability(
                False,
                f"the {method} iteration did not converge (residual {self.settings.get('residual', nan):.3g} "
                f"after {self.settings.get('iterations', 0)} sweeps): the value is not that of a fixed point",
                f"more damping or more sweeps (boltzkit logz --method {method} --damping 0.8 --max-iter N)",
                nan,
                nan,
            )
        return None


def log_prob_bound(value_bound: str, log_z: LogZResult) -> tuple[str, str | None]:
    """What ``log p(v) = log p*(v) - log Z`` is, given what ``log p*(v)`` is (``value_bound``:
    ``"exact"``, or ``"lower"`` for a mean-field or recognition-model bound) and the ``log Z``
    behind it; returns ``(bound, note)``.

    An exact ``log Z`` leaves ``value_bound`` as it is. A sampled one (AIS, SIS, bridge, ...; its
    band carries its error) makes an exact ``log p*(v)`` an ``"estimate"`` of ``log p(v)`` and
    leaves a lower bound ``"lower"`` (a bound up to the estimate's error, as S&M 2008's DBN bounds).
    A deterministic bound turns around: an upper bound on ``log Z`` (TRW) makes a lower bound on
    ``log p``, and a lower bound (mean-field) an upper one, unless ``log p*`` is itself a lower
    bound, when the two pull opposite ways and nothing is bounded (``"none"``); an approximation
    (Bethe, TAP) bounds nothing either. ``note`` says why, where the bound is not ``value_bound``.
    """
    if not isinstance(log_z, DeterministicResult):
        if value_bound == "exact" and log_z.method != "exact":
            return "estimate", f"log Z sampled by {log_z.method}, log p*(v) exact"
        return value_bound, None
    z_bound = str(log_z.settings.get("bound") or "none")
    what = f"log Z is {log_z.method}'s " + (
        f"{z_bound} bound" if z_bound in ("lower", "upper") else "approximation: no bound"
    )
    if z_bound == "upper":
        return "lower", what
    if z_bound == "lower" and value_bound == "exact":
        return "upper", what
    if z_bound == "lower":
        return "none", what + " and log p*(v) a lower bound: they pull opposite ways, no bound"
    return "none", what


@dataclass(frozen=True)
class SandwichResult(LogZResult):
    """A ``method="sandwich"`` record: the forward (lower) estimate, with both halves attached.

    Attributes
    ----------
    forward
        The forward AIS record (``method="ais"``).
    reverse
        The reverse AIS record (``method="reverse-ais"``, ``reciprocal=True``).
    """

    forward: LogZResult | None = None
    reverse: LogZResult | None = None

    def reliability(self) -> Reliability | None:
        """Both halves' verdicts; the ends crossing beyond noise is a problem too."""
        if self.forward is None or self.reverse is None:
            return super().reliability()
        verdict = combine({"forward": self.forward.reliability(), "reverse": self.reverse.reliability()})
        return with_checks(verdict, self.settings.get("checks"))

    def _band(self) -> Band:
        """Both ends: from the forward (lower) estimate's lower bands to the reverse (upper)
        estimate's upper bands; the value is the forward estimate (the conservative end)."""
        if self.forward is None or self.reverse is None:
            return super()._band()
        f = self.forward.ratio_band if self.is_ratio else self.forward.band
        r = self.reverse.ratio_band if self.is_ratio else self.reverse.band
        if f is None or r is None:
            return super()._band()

        def top(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else max(a, b)

        return Band(
            f.value,
            f.minus_sigma,
            top(f.plus_sigma, r.plus_sigma),
            f.minus_3sigma,
            top(f.plus_3sigma, r.plus_3sigma),
        )

    def to_dict(self, include_weights: bool = False) -> dict[str, Any]:
        """As :meth:`LogZResult.to_dict`; with weights, also ``reverse_log_weights``."""
        out = super().to_dict(include_weights)
        if include_weights and self.reverse is not None and self.reverse.log_weights is not None:
            out["reverse_log_weights"] = self.reverse.log_weights.tolist()
        return out


@dataclass(frozen=True)
class BridgeEstimate:
    """A bridge-sampling estimate of ``log(Z_B / Z_A)`` from two sets of log-likelihood ratios.

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
    verdict
        Reliability of the two sides' bridge weights (:mod:`boltzkit.estimators.reliability`).
    """

    log_r: float
    log_sigma: float
    ess_a: float
    ess_b: float
    iterations: int
    converged: bool
    verdict: Reliability | None = None


#: Why a record of one example has no ``data_stderr``.
ONE_EXAMPLE_NOTE = "one example: a standard error over the examples needs at least two"


@dataclass(frozen=True)
class LogProbResult:
    """Mean log-probability of a data set, with the interval implied by the ``log Z`` estimate.

    Attributes
    ----------
    mean_log_prob
        ``mean_n log p*(v_n) - log Z_hat``.
    mean_log_prob_minus_sigma, mean_log_prob_plus_sigma
        ``mean log p* - log(Z_hat ± sigma_hat)`` (note the swap: the *minus* end uses
        ``Z + sigma``); ``None`` where the ``log Z`` band is ``None``.
    mean_log_prob_minus_3sigma, mean_log_prob_plus_3sigma
        The same at ``3 sigma`` (S&M 2008, Table 1).
    mean_neg_free_energy
        ``mean_n log p*(v_n)`` (``-F(v)``), exact or its mean-field lower bound (see ``bound``).
    data_stderr
        Standard error of the mean over examples, ``sd_n(log p(v_n)) / sqrt(n)``: the sampling
        variability of the data set, not part of the ``log Z`` interval; ``None`` for one example
        (:data:`ONE_EXAMPLE_NOTE`).
    n
        Number of examples.
    log_z
        The ``log Z_hat`` used.
    log_z_method
        Its estimator (``"exact"``, ``"ais"``, ...).
    log_z_band
        Its band ``log(Z_hat ± k sigma_hat)``.
    bound
        ``"exact"`` when ``log p*(v)`` is exact (hidden units summed out or enumerated) and
        ``log Z`` exact, ``"estimate"`` when ``log p*(v)`` is exact and ``log Z`` sampled (its band
        carries its error), ``"lower"`` when ``log p*(v)`` is
        the mean-field lower bound (Salakhutdinov 2008, Eq. 53) or ``log Z`` an upper bound
        (TRW), ``"upper"`` when ``log Z`` is a lower bound (mean-field) and ``log p*`` exact,
        ``"none"`` otherwise (:func:`log_prob_bound`; ``details["bound_note"]`` says why).
    mean_log_prob_conservative
        ``mean log p* - log Z_up`` when the record is a sandwich with a reverse-AIS upper
        estimate, else ``None``.
    per_example
        ``log p(v_n)``, float64, shape ``(n,)``, when asked for; else ``None``.
    details
        How ``log p*`` was obtained (e.g. the mean-field iterations and residual).
    """

    mean_log_prob: float
    mean_log_prob_minus_sigma: float | None
    mean_log_prob_plus_sigma: float | None
    mean_log_prob_minus_3sigma: float | None
    mean_log_prob_plus_3sigma: float | None
    mean_neg_free_energy: float
    data_stderr: float | None
    n: int
    log_z: float
    log_z_method: str
    log_z_band: Band
    bound: str = "exact"
    mean_log_prob_conservative: float | None = None
    per_example: Tensor | None = None
    details: dict[str, Any] = field(default_factory=dict)

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
            "data_stderr": clean(self.data_stderr) if self.n > 1 else None,
            "n": self.n,
            "bound": self.bound,
            "log_z_method": self.log_z_method,
        }
        if self.n < 2:
            out["data_stderr_note"] = ONE_EXAMPLE_NOTE
        out.update({k: clean(v) for k, v in self.log_z_band.as_dict("log_z").items()})
        out.update({k: to_jsonable(v) for k, v in self.details.items() if k not in out})
        if include_per_example and self.per_example is not None:
            out["per_example"] = self.per_example.tolist()
        return withhold_bands(out)


@dataclass(frozen=True)
class DBNBoundResult:
    """Lower bound on the mean log-probability a DBN assigns to a data set, with its error split
    as Salakhutdinov & Murray (2008, "S1") report it in Table 2.

    The estimate is ``r_bound = r_B - log Z_hat`` (S1 Eq. 24), where ``r_B`` averages over the
    ``n`` data vectors the Monte Carlo estimate of ``E_q[log p*(v, h)]`` from ``M`` samples of
    the recognition model ``q`` (S1 Eq. 23) plus the exact entropy of ``q(h_1 | v)``, and
    ``log Z_hat`` is the top RBM's. ``Var(r_bound) = Var(r_B) + Var(log Z_hat)`` (S1 Sec. 5.2).

    Attributes
    ----------
    mean_bound
        ``r_bound``; a lower bound on the mean ``log p(v)`` up to the Monte Carlo error and the
        error of ``log Z_hat``.
    r_b
        ``r_B``.
    mean_expected_log_joint
        Mean over the data of ``(1/M) sum_i log p*(v, h^(i))`` (with the deeper layers' terms
        for ``L >= 3``).
    mean_entropy
        Mean over the data of ``H(q(h_1 | v))``.
    mc_stderr
        Monte Carlo standard error of ``r_B`` given the data set:
        ``sqrt(sum_n s_n^2 / M) / n`` with ``s_n^2`` the variance over the ``M`` samples of
        example ``n`` (``None`` for ``M = 1``; 0 for a one-layer DBN, which needs no samples).
    pooled_stderr
        The standard deviation of all ``n * M`` per-sample terms over ``sqrt(n * M)``: the
        convention S1 Table 2's "±3 std" column follows (it scales as ``1/sqrt(n M)``, S1 Sec.
        4.2, and includes the spread between data vectors).
    data_stderr
        ``sd_n(B(v_n)) / sqrt(n)``: the sampling variability of the data set (``None`` for one
        data vector).
    n, n_samples
        Data vectors and samples of ``q`` per vector (``M``).
    layer_sizes
        Of the DBN.
    log_z, log_z_method, log_z_band, log_z_stderr
        The top RBM's ``log Z_hat``, its estimator, its band ``log(Z_hat ± k sigma_hat)`` and
        delta-method standard error.
    bound
        ``"lower"`` (for a one-layer DBN, an RBM, whose value is exact given log Z: ``"exact"``
        with an exact log Z, ``"estimate"`` with a sampled one),
        turned by a deterministic ``log Z`` as :func:`log_prob_bound` says.
    per_example
        The bound of every data vector, ``B(v_n)``, float64, when asked for.
    seconds, settings
        Wall-clock time and what made the number (samples, seed, batch size, log Z settings).
    """

    mean_bound: float
    r_b: float
    mean_expected_log_joint: float
    mean_entropy: float
    mc_stderr: float | None
    pooled_stderr: float | None
    data_stderr: float | None
    n: int
    n_samples: int
    layer_sizes: tuple[int, ...]
    log_z: float
    log_z_method: str
    log_z_band: Band
    log_z_stderr: float | None
    bound: str = "lower"
    per_example: Tensor | None = None
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def mc_error_3std(self) -> float | None:
        """``± 3`` Monte Carlo standard errors of ``r_B`` (given the data)."""
        return None if self.mc_stderr is None else 3.0 * self.mc_stderr

    @property
    def pooled_error_3std(self) -> float | None:
        """``± 3 std`` in S1 Table 2's convention (:attr:`pooled_stderr`; ``None`` when that is
        undefined: one data vector and one sample)."""
        return None if self.pooled_stderr is None else 3.0 * self.pooled_stderr

    @property
    def ais_error(self) -> tuple[float | None, float | None]:
        """``log(Z_hat - 3 sigma_hat) - log Z_hat`` and ``log(Z_hat + 3 sigma_hat) - log Z_hat``
        (S1 Table 2's "AIS error" column; the first is ``None`` when ``Z_hat <= 3 sigma_hat``)."""
        b = self.log_z_band
        lo = None if b.minus_3sigma is None else b.minus_3sigma - self.log_z
        hi = None if b.plus_3sigma is None else b.plus_3sigma - self.log_z
        return lo, hi

    def total_3std(self, stderr: float | None = None) -> float | None:
        """``3 sqrt(Var(r_B) + Var(log Z_hat))`` (S1 Sec. 5.2) with ``stderr`` the standard error of
        ``r_B`` (default :attr:`mc_stderr`)."""
        se = self.mc_stderr if stderr is None else stderr
        if se is None or self.log_z_stderr is None:  # (a deterministic log Z has no standard error)
            return None
        return 3.0 * math.sqrt(se**2 + self.log_z_stderr**2)

    def interval(self, stderr: float | None = None) -> tuple[float | None, float | None]:
        """The bound's range with both errors added at ``3 sigma``: ``r_B ± 3 se`` against
        ``log(Z_hat ± 3 sigma_hat)`` (the lower end uses ``Z_hat + 3 sigma_hat``)."""
        se = self.mc_stderr if stderr is None else stderr
        if se is None:
            return None, None
        b = self.log_z_band
        lo = None if b.plus_3sigma is None else self.r_b - 3.0 * se - b.plus_3sigma
        hi = None if b.minus_3sigma is None else self.r_b + 3.0 * se - b.minus_3sigma
        return lo, hi

    def to_dict(self, include_per_example: bool = False) -> dict[str, Any]:
        """JSON-ready dict: the bound, its error split and the settings."""

        def clean(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)

        ais_lo, ais_hi = self.ais_error
        lo, hi = self.interval()
        out: dict[str, Any] = {
            "mean_log_prob": clean(self.mean_bound),
            "bound": self.bound,
            "r_b": clean(self.r_b),
            "mean_expected_log_joint": clean(self.mean_expected_log_joint),
            "mean_entropy": clean(self.mean_entropy),
            "mc_stderr": clean(self.mc_stderr),
            "mc_error_3std": clean(self.mc_error_3std),
            "pooled_stderr": clean(self.pooled_stderr),
            "pooled_error_3std": clean(self.pooled_error_3std),
            "data_stderr": clean(self.data_stderr) if self.n > 1 else None,
            "ais_error_minus_3sigma": clean(ais_lo),
            "ais_error_plus_3sigma": clean(ais_hi),
            "total_error_3std": clean(self.total_3std()),
            "total_error_3std_pooled": None
            if self.pooled_stderr is None
            else clean(self.total_3std(self.pooled_stderr)),
            "mean_log_prob_minus_3sigma": clean(lo),
            "mean_log_prob_plus_3sigma": clean(hi),
            "n": self.n,
            "n_samples": self.n_samples,
            "layer_sizes": list(self.layer_sizes),
            "log_z_method": self.log_z_method,
            "log_z_stderr": clean(self.log_z_stderr),
            "seconds": self.seconds,
        }
        if self.n < 2:
            out["data_stderr_note"] = ONE_EXAMPLE_NOTE
        out.update({k: clean(v) for k, v in self.log_z_band.as_dict("log_z").items()})
        out.update({k: to_jsonable(v) for k, v in self.settings.items() if k not in out})
        if include_per_example and self.per_example is not None:
            out["per_example"] = self.per_example.tolist()
        return withhold_bands(out)

    def to_json(self, include_per_example: bool = False) -> str:
        return dumps(self.to_dict(include_per_example))
