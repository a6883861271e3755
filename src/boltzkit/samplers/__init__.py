"""Transition operators, their composition, the chain driver, and DBN sampling."""

from boltzkit.samplers.dbn import sample_dbn
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
    register_spec,
)
from boltzkit.samplers.sequential import sequential_update
from boltzkit.samplers.tempering import ParallelTempering, SwapMonitor, equalize_ladder, tune_ladder

__all__ = [
    "Blend",
    "Cycle",
    "FlipTheState",
    "Gibbs",
    "ParallelTempering",
    "Repeat",
    "StepInfo",
    "SwapMonitor",
    "TransitionOperator",
    "UnitOperator",
    "equalize_ladder",
    "make_operator",
    "move_probability",
    "register_spec",
    "run_chains",
    "sample",
    "sample_dbn",
    "sequential_update",
    "tune_ladder",
]
