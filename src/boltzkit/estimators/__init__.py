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
