"""Run Markov chains with a transition operator, observers and a progress bar."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.models.base import EnergyModel
from boltzkit.samplers.operators import StepInfo, TransitionOperator, make_operator
from boltzkit.state import ChainState

Observer = Callable[[int, ChainState, StepInfo], None]


@torch.no_grad()
def run_chains(
    model: EnergyModel,
    operator: TransitionOperator | str,
    state: ChainState,
    n_steps: int,
    *,
    generator: torch.Generator | int,
    beta: float | Tensor = 1.0,
    clamped: tuple[int, ...] = (),
    observers: Sequence[Observer] = (),
    progress: bool = False,
    desc: str = "sampling",
) -> ChainState:
    """Apply ``n_steps`` sweeps of ``operator`` to ``state``.

    Parameters
    ----------
    model, operator
        Target and kernel; ``operator`` may be a spec such as ``"flip"``.
    state
        Initial state of all chains, shape ``(n_chains, n_units)`` per layer.
    n_steps
        Number of sweeps.
    generator
        Source of randomness, a ``torch.Generator`` or a seed (same seed, same chains).
    beta, clamped
        Passed to :meth:`TransitionOperator.step`.
    observers
        Called as ``observer(step, state, info)`` after every sweep (``step`` counts from 1);
        when any is given, flip rates are tracked in ``info``.
    progress
        Show a tqdm bar on stderr.

    Returns
    -------
    ChainState
        The state after the last sweep.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 0:
        raise BoltzkitError("the number of sweeps must be a whole number >= 0", got=repr(n_steps))
    operator = make_operator(operator)
    generator = make_generator(generator, state.layers[0].device)
    track = bool(observers)
    for step in tqdm(range(1, n_steps + 1), desc=desc, disable=not progress, leave=False):
        state, info = operator.step(
            model, state, beta=beta, generator=generator, clamped=clamped, track=track
        )
        for observe in observers:
            observe(step, state, info)
    return state


def check_chains(n_chains: int, init: ChainState | None) -> int:
    """``n_chains`` as a positive whole number that agrees with ``init``'s rows, or a clear error."""
    n = positive_int(n_chains, "the number of chains")
    if init is not None and init.layers[0].shape[0] != n:
        raise BoltzkitError(
            "the initial state holds another number of chains",
            got=f"{init.layers[0].shape[0]} rows in init, n_chains={n}",
            hint="pass n_chains equal to the rows of init.",
        )
    return n


@torch.no_grad()
def sample(
    model: EnergyModel,
    operator: TransitionOperator | str = "gibbs",
    *,
    n_chains: int,
    n_steps: int,
    generator: torch.Generator | int,
    init: ChainState | None = None,
    beta: float | Tensor = 1.0,
    progress: bool = False,
) -> ChainState:
    """Run ``n_chains`` chains from ``init`` (uniform random states when omitted) and return their
    final states at the target (for parallel tempering: the ``beta = 1`` replica). ``generator``:
    a ``torch.Generator`` or a seed. With ``init``, its rows are the chains (``n_chains`` must
    equal their number)."""
    op = make_operator(operator)
    generator = make_generator(generator, model.device)
    n_chains = check_chains(n_chains, init)
    state = model.random_state(n_chains, generator) if init is None else init
    state = run_chains(
        model, op, op.extend(state), n_steps, generator=generator, beta=beta, progress=progress
    )
    return op.project(state)
