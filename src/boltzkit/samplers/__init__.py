"""Transition operators and the chain driver."""

from boltzkit.samplers.driver import run_chains, sample
from boltzkit.samplers.operators import (
    Blend,
    FlipTheState,
    Gibbs,
    StepInfo,
    TransitionOperator,
    make_operator,
    move_probability,
)

__all__ = [
    "Blend",
    "FlipTheState",
    "Gibbs",
    "StepInfo",
    "TransitionOperator",
    "make_operator",
    "move_probability",
    "run_chains",
    "sample",
]
