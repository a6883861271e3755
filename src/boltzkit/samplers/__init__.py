"""Transition operators, their composition, and the chain driver."""

from boltzkit.samplers.driver import run_chains, sample
from boltzkit.samplers.operators import (
    Blend,
    Cycle,
    FlipTheState,
    Gibbs,
    Repeat,
    StepInfo,
    TransitionOperator,
    UnitOperator,
    make_operator,
    move_probability,
)
from boltzkit.samplers.sequential import sequential_update

__all__ = [
    "Blend",
    "Cycle",
    "FlipTheState",
    "Gibbs",
    "Repeat",
    "StepInfo",
    "TransitionOperator",
    "UnitOperator",
    "make_operator",
    "move_probability",
    "run_chains",
    "sample",
    "sequential_update",
]
