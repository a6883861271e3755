"""Log partition functions and likelihoods; every estimator returns a record of
:mod:`boltzkit.estimators.result`.

Stochastic estimators take an annealing path (:func:`base_rate_path` for ``log Z`` of a model,
:func:`ratio_path` for ``log Z_B - log Z_A``): :func:`ais`, :func:`reverse_ais`, :func:`sandwich`,
:func:`sis`, :func:`bridge`. :func:`estimate_log_z` and :func:`estimate_log_ratio` build the path
and dispatch on a method name (the command line's entry points). :func:`dbn_bound` is the lower
bound on a DBN's log-probabilities (S&M 2008, Eqs. 22-24).
"""

from boltzkit.estimators.ais import adaptive_betas, ais, anneal
from boltzkit.estimators.api import METHODS, estimate_log_ratio, estimate_log_z
from boltzkit.estimators.bridge import bridge
from boltzkit.estimators.dbn_bound import dbn_bound, dbn_exact_bound, dbn_exact_log_prob, dbn_top_log_z
from boltzkit.estimators.exact import (
    ExactMethod,
    enumeration_plan,
    exact_joint_distribution,
    exact_log_prob,
    exact_log_unnormalized_visible,
    exact_log_z,
    exact_sample,
    layer_log_probs,
    log_z_brute_force,
    register_exact,
)
from boltzkit.estimators.likelihood import dataset_log_prob, log_unnormalized_visible
from boltzkit.estimators.paths import AnnealingPath, GeometricPath, base_rate_path, ratio_path
from boltzkit.estimators.result import (
    Band,
    BridgeEstimate,
    DBNBoundResult,
    LogProbResult,
    LogZResult,
    SandwichResult,
    SpreadResult,
    effective_sample_size,
)
from boltzkit.estimators.reverse import reverse_ais, sandwich
from boltzkit.estimators.sis import sis
from boltzkit.estimators.trace import AISTrace, RunsCurve, ais_trace, log_z_by_runs

__all__ = [
    "METHODS",
    "AISTrace",
    "ExactMethod",
    "RunsCurve",
    "ais_trace",
    "log_z_by_runs",
    "AnnealingPath",
    "Band",
    "BridgeEstimate",
    "DBNBoundResult",
    "GeometricPath",
    "LogProbResult",
    "LogZResult",
    "SandwichResult",
    "SpreadResult",
    "adaptive_betas",
    "ais",
    "anneal",
    "base_rate_path",
    "bridge",
    "dataset_log_prob",
    "dbn_bound",
    "dbn_exact_bound",
    "dbn_exact_log_prob",
    "dbn_top_log_z",
    "effective_sample_size",
    "enumeration_plan",
    "estimate_log_ratio",
    "estimate_log_z",
    "exact_joint_distribution",
    "exact_log_prob",
    "exact_log_unnormalized_visible",
    "exact_log_z",
    "exact_sample",
    "layer_log_probs",
    "log_unnormalized_visible",
    "log_z_brute_force",
    "register_exact",
    "ratio_path",
    "reverse_ais",
    "sandwich",
    "sis",
]
