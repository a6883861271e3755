"""Diagnostics of samplers: exact transition matrices on tiny models and their SLEM."""

from boltzkit.diagnostics.transition_matrix import (
    SlemRow,
    StationaryCheck,
    all_states,
    block_kernel,
    block_kernels,
    eigenvalue_moduli,
    format_slem_table,
    slem,
    slem_study,
    stationary_check,
    stationary_distribution,
    transition_matrix,
)

__all__ = [
    "SlemRow",
    "StationaryCheck",
    "all_states",
    "block_kernel",
    "block_kernels",
    "eigenvalue_moduli",
    "format_slem_table",
    "slem",
    "slem_study",
    "stationary_check",
    "stationary_distribution",
    "transition_matrix",
]
