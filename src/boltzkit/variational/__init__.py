"""Variational approximations and bounds of ``log Z`` on the pairwise form of any model.

:func:`variational_log_z` dispatches on a method name; the methods are :func:`mean_field_log_z`
(lower bound), :func:`bethe_log_z` (loopy BP, no bound), :func:`trw_log_z` (tree-reweighted upper
bound with ``rho`` uniform or optimised by :func:`frank_wolfe`) and :func:`tap_log_z` (no bound).
Each returns a :class:`VariationalResult` saying which kind of value it is. ``variational/`` imports
``models/`` and below only (never ``estimators/``).
"""

from boltzkit.variational.api import METHODS, normalize_method, variational_log_z
from boltzkit.variational.bp import BPState, Messages, bethe_log_z, propagate
from boltzkit.variational.graph import BlockGraph, EdgeBlock
from boltzkit.variational.mean_field import mean_field_log_z
from boltzkit.variational.result import BOUNDS, ConvergenceWarning, VariationalResult
from boltzkit.variational.spanning import (
    TreeMixture,
    check_rho,
    is_edge_transitive,
    max_weight_spanning_tree,
    tree_indicator,
    uniform_rho,
)
from boltzkit.variational.tap import tap_free_energy, tap_log_z
from boltzkit.variational.trw import RHO_CHOICES, FrankWolfeFit, TRWSolution, frank_wolfe, trw_log_z

__all__ = [
    "BOUNDS",
    "METHODS",
    "RHO_CHOICES",
    "BPState",
    "BlockGraph",
    "ConvergenceWarning",
    "EdgeBlock",
    "FrankWolfeFit",
    "Messages",
    "TRWSolution",
    "TreeMixture",
    "VariationalResult",
    "bethe_log_z",
    "check_rho",
    "frank_wolfe",
    "is_edge_transitive",
    "max_weight_spanning_tree",
    "mean_field_log_z",
    "normalize_method",
    "propagate",
    "tap_free_energy",
    "tap_log_z",
    "tree_indicator",
    "trw_log_z",
    "uniform_rho",
    "variational_log_z",
]
