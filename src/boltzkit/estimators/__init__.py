"""Log partition functions and likelihoods; every estimator returns a LogZResult."""

from boltzkit.estimators.exact import (
    exact_joint_distribution,
    exact_log_prob,
    exact_log_z,
    exact_sample,
    layer_log_probs,
    log_z_brute_force,
)
from boltzkit.estimators.result import Band, LogZResult, effective_sample_size

__all__ = [
    "Band",
    "LogZResult",
    "effective_sample_size",
    "exact_joint_distribution",
    "exact_log_prob",
    "exact_log_z",
    "exact_sample",
    "layer_log_probs",
    "log_z_brute_force",
]

# Beyond AIS (reverse AIS / sandwich, SIS, bridge), likelihoods and the dispatching entry points.
from boltzkit.estimators.api import METHODS, estimate_log_ratio, estimate_log_z  # noqa: E402
from boltzkit.estimators.bridge import SpreadResult, bridge_log_ratio, bridge_log_z  # noqa: E402
from boltzkit.estimators.likelihood import LogProbResult, dataset_log_prob  # noqa: E402
from boltzkit.estimators.reverse import (  # noqa: E402
    SandwichResult,
    reverse_ais_log_ratio,
    reverse_ais_log_z,
    sandwich_log_ratio,
    sandwich_log_z,
)
from boltzkit.estimators.sis import sis_log_ratio, sis_log_z  # noqa: E402

__all__ += [
    "METHODS",
    "LogProbResult",
    "SandwichResult",
    "SpreadResult",
    "bridge_log_ratio",
    "bridge_log_z",
    "dataset_log_prob",
    "estimate_log_ratio",
    "estimate_log_z",
    "reverse_ais_log_ratio",
    "reverse_ais_log_z",
    "sandwich_log_ratio",
    "sandwich_log_z",
    "sis_log_ratio",
    "sis_log_z",
]
