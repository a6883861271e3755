"""Samples of a deep belief network: Gibbs chains in the top RBM, then one directed pass down.

A DBN's joint is ``p(x_0 | x_1) ... p(x_(L-2) | x_(L-1)) p(x_(L-1), x_L)`` (S1 Sec. 4.2), so an
exact sample is a sample of the top RBM followed by ancestral draws down the directed part. The top
RBM is sampled with any transition operator (:func:`~boltzkit.samplers.driver.run_chains`); the
chains start uniformly at random, or where the caller says (for example at the recognition
model's states of some data).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError
from boltzkit.models.dbn import DBN
from boltzkit.samplers.driver import Observer, check_chains, run_chains
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState


@torch.no_grad()
def sample_dbn(
    dbn: DBN,
    operator: TransitionOperator | str = "gibbs",
    *,
    n_chains: int,
    n_steps: int,
    generator: torch.Generator,
    init: ChainState | None = None,
    visible: str = "sample",
    progress: bool = False,
    observers: Sequence[Observer] = (),
) -> ChainState:
    """Draw ``n_chains`` samples of ``dbn``.

    Parameters
    ----------
    dbn
        The DBN.
    operator
        Transition operator of the top RBM's chains (``"gibbs"``, ``"flip"``, ``"blend:A"``,
        ``"pt:T"``, ...). Parallel tempering runs every replica in the top RBM and passes down
        only the ``beta = 1`` chains.
    n_chains, n_steps
        Chains and sweeps in the top RBM.
    generator
        Source of every random number: a ``torch.Generator`` or a seed (same seed, same samples).
    init
        Initial states of the top RBM (layers ``L - 1`` and ``L``, ``n_chains`` rows; a tempering
        operator starts every replica there); uniform when omitted.
    visible
        ``"sample"`` (binary visible states) or ``"probs"`` (``p(v = 1 | x_1)``).
    progress
        Show a progress bar.
    observers
        Called after every sweep of the top RBM's chains (:func:`run_chains`), e.g. a
        :class:`~boltzkit.samplers.tempering.SwapMonitor`.

    Returns
    -------
    ChainState
        All layers ``x_0, ..., x_L`` of every sample, visible first.
    """
    if int(n_steps) < 0:
        raise BoltzkitError("n_steps must be >= 0", got=n_steps)
    n_chains = check_chains(n_chains, init)
    top = dbn.top
    generator = make_generator(generator, top.device)
    state = top.random_state(n_chains, generator) if init is None else init
    if state.layers[0].shape[1] != top.n_visible or len(state.layers) != 2:
        raise BoltzkitError(
            "the initial state must be a state of the top RBM",
            got=[tuple(t.shape) for t in state.layers],
            expected=f"two layers of {top.n_visible} and {top.n_hidden} units",
        )
    op = make_operator(operator)
    state = run_chains(
        top, op, op.extend(state), int(n_steps), generator=generator, observers=observers, progress=progress
    )
    state = op.project(state)
    lower = dbn.generate_down(state.visible, generator=generator, visible=visible, top_hidden=state.hidden)
    return ChainState((*lower, state.hidden))


__all__ = ["sample_dbn"]
