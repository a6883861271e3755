"""The record every variational ``log Z`` method returns, and the warning for unconverged runs.

``variational/`` sits beside ``estimators/`` and does not import it, so its methods return this
small record; the command line turns it into the estimators' ``LogZResult`` with
``LogZResult.deterministic(...)`` (same keys: ``log_z``, ``bound``, ``converged``, ``iterations``,
``residual``, ``seconds`` and the settings), so that both print alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from torch import Tensor

from boltzkit.errors import BoltzkitWarning
from boltzkit.jsonio import dumps, to_jsonable

#: What a value says about ``log Z``: a guaranteed lower bound, a guaranteed upper bound, or neither.
BOUNDS = ("lower", "upper", "none")


class ConvergenceWarning(BoltzkitWarning, RuntimeWarning):
    """Message passing (or a fixed-point iteration) stopped before its residual reached ``tol``."""


@dataclass(frozen=True)
class VariationalResult:
    """A deterministic approximation of ``log Z``.

    Attributes
    ----------
    method
        ``"mean-field"``, ``"bethe"``, ``"trw"`` or ``"tap"``.
    log_z
        The value (float64 arithmetic throughout).
    bound
        ``"lower"`` (mean-field, any iterate), ``"upper"`` (TRW at a converged fixed point with
        ``rho`` in the spanning-tree polytope) or ``"none"`` (Bethe, TAP, or an unconverged TRW).
    converged
        Whether the final iteration's residual fell below the tolerance.
    iterations
        Sweeps of the final run (for TRW with optimised ``rho``: of the run at the final ``rho``;
        the total is in ``settings["total_sweeps"]``).
    residual
        Final residual: ``max |u_new - u_old|`` over the messages (BP, TRW; undamped update) or
        ``max |mu_new - mu_old|`` over the means (mean-field, TAP).
    seconds
        Wall-clock time.
    settings
        Everything that made the number (damping, tolerance, starts, ``rho`` and Frank-Wolfe
        details, device), JSON-ready.
    marginals
        Per layer, the node beliefs / means of the returned solution (float64), or ``None``.
    """

    method: str
    log_z: float
    bound: str
    converged: bool
    iterations: int
    residual: float
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    marginals: tuple[Tensor, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {BOUNDS}, got {self.bound!r}")

    def with_settings(self, **settings: Any) -> VariationalResult:
        return replace(self, settings={**self.settings, **settings})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``method``, ``log_z``, ``bound``, ``converged``, ``iterations``,
        ``residual``, ``seconds`` and the settings."""
        out: dict[str, Any] = {
            "method": self.method,
            "log_z": self.log_z,
            "bound": self.bound,
            "converged": self.converged,
            "iterations": self.iterations,
            "residual": self.residual,
            "seconds": self.seconds,
        }
        out.update({k: v for k, v in self.settings.items() if k not in out})
        return {k: to_jsonable(v) for k, v in out.items()}

    def to_json(self) -> str:
        return dumps(self.to_dict())


__all__ = ["BOUNDS", "ConvergenceWarning", "VariationalResult"]
