"""The two phases of Boltzmann machine learning, for every member of the family.

The gradient of the mean log-likelihood is a difference of expectations of the sufficient
statistics (Salakhutdinov 2008, "S2", Eqs. 35, 47, 51)::

    d <log p(v)>_data / d theta = E_data[T(x)] - E_model[T(x)]

with ``T`` the products ``x_l x_m^T`` of coupled layers and the units ``x_l`` themselves. A
*positive phase* turns a minibatch into the data term (hidden units replaced by their exact
conditional means, by mean-field means, or by clamped chains); a *negative phase* turns it into
the model term (samples of Markov chains). Both return a :class:`~boltzkit.state.ChainState`
whose layers hold samples or means; :meth:`BoltzmannMachine.set_gradients` forms the statistics.

Positive phases
    :class:`ExactConditional` (RBM, SRBM: ``p(h | v)`` is factorial, S2 Sec. 4.2),
    :class:`MeanFieldPhase` (BM, DBM: damped mean-field with the data clamped, S2 Sec. 4.3,
    Eq. 54), :class:`ClampedChains` (Hinton & Sejnowski: chains with the data clamped).
Negative phases
    :class:`ContrastiveDivergence` (CD-k: chains started at the data, S&M 2008 Eq. 7),
    :class:`Persistent` (PCD / SAP: persistent chains, S2 Sec. 4.1.1) and
    :class:`TemperedChains` (t-PT_k: the ``beta = 1`` replica of persistent parallel-tempering
    chains, Brügge, Fischer & Igel 2013, Sec. 4.2).

Chains use any transition operator (Gibbs, flip-the-state, a blend, compositions); layers that sum
out given the others are Rao-Blackwellised in the statistics (their conditional means replace the
samples), which is exact because the statistics are linear in each of those units.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import bernoulli
from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.mean_field import mean_field
from boltzkit.samplers.operators import TransitionOperator, UnitOperator, make_operator
from boltzkit.samplers.tempering import ParallelTempering, SwapMonitor, check_betas
from boltzkit.state import ChainState


def sample_means(state: ChainState, generator: torch.Generator, layers: tuple[int, ...]) -> ChainState:
    """Replace ``layers`` of a state of means by Bernoulli draws from them."""
    for l in layers:
        state = state.with_layer(l, bernoulli(state.layers[l], generator))
    return state


# ----------------------------------------------------------------------------- positive
class PositivePhase(ABC):
    """Turns a data minibatch into a state whose statistics are the data term."""

    name: str = "positive"

    @abstractmethod
    def __call__(self, model: BoltzmannMachine, v: Tensor, generator: torch.Generator) -> ChainState:
        """The data term's state for minibatch ``v`` (shape ``(n, n_visible)``, the model's dtype)."""

    def sampled_layers(self, model: BoltzmannMachine) -> tuple[int, ...]:
        """Hidden layers whose values in the returned state are exact conditional means given
        ``v`` (so a Bernoulli draw from them is an exact sample of ``p(h | v)``)."""
        return ()

    def settings(self) -> dict[str, Any]:
        """The phase's parameters, JSON-able (a run records them, and a checkpoint resumes only
        under the same): none for the exact phase."""
        return {}


class ExactConditional(PositivePhase):
    """``h ~ p(h | v)`` summed out exactly: the hidden layers hold ``p(h = 1 | v)`` (RBM: S&M 2008
    Eq. 5; SRBM: S2 Eq. 46, exact because the hidden units have no laterals)."""

    name = "exact"

    @torch.no_grad()
    def __call__(self, model, v, generator):
        if not model.hidden_summable():
            raise BoltzkitError(
                f"the exact positive phase needs hidden units independent given v, not a {model.kind}",
                hint="use the mean-field positive phase (MeanFieldPhase) for BMs and DBMs.",
            )
        state = model.state_from_visible(v)
        for l in range(1, model.n_layers):
            state = state.with_layer(l, model.conditional_probs(state, l))
        return state

    def sampled_layers(self, model):
        return tuple(range(1, model.n_layers))


class MeanFieldPhase(PositivePhase):
    """Mean-field means of the hidden units with the data clamped (S2 Sec. 4.3, Eq. 54).

    Parameters
    ----------
    damping, tol, max_iter
        Of :func:`~boltzkit.models.mean_field.mean_field` (S2 Sec. 5: damped updates).
    """

    name = "mean-field"

    def __init__(self, damping: float = 0.5, tol: float = 1e-4, max_iter: int = 50) -> None:
        self.damping, self.tol, self.max_iter = float(damping), float(tol), int(max_iter)

    @torch.no_grad()
    def __call__(self, model, v, generator):
        return mean_field(model, {0: v}, damping=self.damping, tol=self.tol, max_iter=self.max_iter).means

    def settings(self) -> dict[str, Any]:
        return {"damping": self.damping, "tol": self.tol, "max_iter": self.max_iter}


class ClampedChains(PositivePhase):
    """Markov chains with the data clamped (Hinton & Sejnowski 1983): ``n_steps`` sweeps from
    uniform hidden states, the final state Rao-Blackwellised.

    Parameters
    ----------
    n_steps
        Sweeps per minibatch.
    sampler
        Transition operator.
    """

    name = "clamped-chains"

    def __init__(self, n_steps: int = 10, sampler: TransitionOperator | str = "gibbs") -> None:
        self.n_steps = positive_int(n_steps, "n_steps")
        self.operator = make_operator(sampler)

    @torch.no_grad()
    def __call__(self, model, v, generator):
        state = model.random_state(v.shape[0], generator).with_layer(0, v)
        for _ in range(self.n_steps):
            state, _ = self.operator.step(model, state, generator=generator, clamped=(0,))
        return model.rao_blackwellize(state, [l for l in model.default_sum_out() if l != 0])

    def settings(self) -> dict[str, Any]:
        return {"n_steps": self.n_steps, "sampler": self.operator.name}


def default_positive(model: BoltzmannMachine, *, damping: float = 0.5) -> PositivePhase:
    """Exact conditionals when the hidden units are independent given ``v``, else mean-field
    (with ``damping``)."""
    return ExactConditional() if model.hidden_summable() else MeanFieldPhase(damping=damping)


# ----------------------------------------------------------------------------- negative
class NegativePhase(ABC):
    """Turns a minibatch (and its positive phase) into a state whose statistics are the model term.

    Parameters
    ----------
    k
        Sweeps of the sampler per update (the trainer may change it between updates).
    sampler
        Transition operator or spec.
    """

    method: str = "negative"

    def __init__(self, k: int = 1, sampler: TransitionOperator | str = "gibbs") -> None:
        self.k = positive_int(k, "k")
        self.operator = make_operator(sampler)

    @abstractmethod
    def __call__(
        self,
        model: BoltzmannMachine,
        v: Tensor,
        positive: ChainState,
        positive_phase: PositivePhase,
        generator: torch.Generator,
    ) -> tuple[ChainState, Tensor | None]:
        """The model term's state and, when the phase computes it on the way, the visible
        probabilities of the first reconstruction (else ``None``)."""

    def setup(self, model: BoltzmannMachine, data: Tensor, generator: torch.Generator) -> None:  # noqa: B027
        """Called once before the first update (persistent chains start here)."""

    def state_dict(self) -> dict[str, Any]:
        return {"k": self.k}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.k = int(state["k"])


def refuse_tempered_cd(operator: TransitionOperator) -> None:
    """CD's chains start at the data each update: there are no tempered replicas to keep, so an
    operator with replicas (parallel tempering) is refused for CD, binary or not."""
    if operator.keeps_replicas:
        raise BoltzkitError(
            "CD's chains start at the data, not at tempered replicas",
            got=f"sampler {operator.name!r} with method 'cd'",
            hint="use persistent chains (method 'pcd', or 'pt' for tempering in the negative phase), "
            "or a sampler without replicas (gibbs, flip, blend:A).",
        )


#: What CD's last visible update contributes to the negative statistics.
RECONSTRUCTIONS = ("sample", "mean")


class ContrastiveDivergence(NegativePhase):
    """CD-k (Hinton 2002; S&M 2008, Eq. 7): chains started at the data.

    The chain starts at ``v^0`` with the hidden layers drawn from the positive phase (an exact
    ``h^0 ~ p(h | v^0)`` for RBMs and SRBMs, a draw from the mean-field means otherwise). When the
    hidden draw is exact, the first sweep only updates the visible layer given ``h^0`` (CD-1 with
    Gibbs is exactly ``v^0 -> h^0 -> v^1 -> p(h | v^1)``; flip-the-state moves from ``v^0``); then
    ``k - 1`` full sweeps follow.

    Parameters
    ----------
    k, sampler
        See :class:`NegativePhase`.
    reconstruction
        ``"sample"``: the negative statistics use the last visible state of the chain, a binary
        sample. ``"mean"``: the last visible update is replaced by its Gibbs conditional mean
        ``p(v = 1 | h)`` given the chain's last hidden state, and the hidden means are taken given
        that mean — the reconstruction of Hinton & Salakhutdinov's RBM code (2006), which S&M 2008
        and S2 trained with, and of Hinton's practical guide (2010, Sec. 3.2: "use the
        probabilities ... for the reconstruction", less sampling noise in the statistics). Needs a
        visible layer without laterals (its conditional mean is then a product of Bernoullis).
    """

    method = "cd"

    def __init__(
        self, k: int = 1, sampler: TransitionOperator | str = "gibbs", *, reconstruction: str = "sample"
    ) -> None:
        super().__init__(k, sampler)
        refuse_tempered_cd(self.operator)
        if reconstruction not in RECONSTRUCTIONS:
            raise BoltzkitError(
                "unknown CD reconstruction", got=repr(reconstruction), expected="'sample' or 'mean'"
            )
        self.reconstruction = reconstruction

    @torch.no_grad()
    def __call__(self, model, v, positive, positive_phase, generator):
        exact = positive_phase.sampled_layers(model)
        hidden = tuple(range(1, model.n_layers))
        mean = self.reconstruction == "mean"
        if mean and model.has_laterals(0):
            raise BoltzkitError(
                "CD's mean reconstruction needs a visible layer without laterals",
                got=f"a {model.kind} with visible laterals",
                hint="use reconstruction='sample' (--reconstruction sample) for SRBMs and BMs.",
            )
        state = sample_means(positive, generator, hidden)
        v_probs = None
        sweeps = self.k
        op = self.operator
        if exact:
            visible_block = next((b for b in model.blocks() if b.layer == 0), None)
            if isinstance(op, UnitOperator) and visible_block is not None and not visible_block.sequential:
                # the operator's own sweep of the visible layer; its logits give the reconstruction
                seen: dict[int, Tensor] = {}
                state, _ = op.step(
                    model,
                    state,
                    generator=generator,
                    clamped=hidden,
                    means=(0,) if mean and sweeps == 1 else (),
                    observe=lambda block, logits, new: seen.__setitem__(block.layer, logits),
                )
                v_probs = torch.sigmoid(seen[0])
            else:
                state, _ = op.step(model, state, generator=generator, clamped=hidden)
                if mean and sweeps == 1:
                    state = state.with_layer(0, model.conditional_probs(state, 0))
            sweeps -= 1
        for sweep in range(sweeps):
            if mean and sweep == sweeps - 1:  # the last sweep: hidden units drawn, visible mean
                state, _ = op.step(model, state, generator=generator, clamped=(0,))
                state = state.with_layer(0, model.conditional_probs(state, 0))
            else:
                state, _ = op.step(model, state, generator=generator)
        return model.rao_blackwellize(state), v_probs

    def state_dict(self):
        return {**super().state_dict(), "reconstruction": self.reconstruction}


class Persistent(NegativePhase):
    """Persistent chains: PCD-k (Tieleman 2008), the stochastic approximation procedure of S2
    Sec. 4.1.1 (SAP; S2 Sec. 5: 100 chains, 5 Gibbs sweeps per update).

    ``n_chains`` chains persist across updates; each update advances them ``k`` sweeps at the
    current parameters. They start at training examples drawn with replacement, with the hidden
    layers drawn from the positive phase (:meth:`setup`), or at uniform random states.

    Parameters
    ----------
    n_chains
        Number of persistent chains.
    k, sampler
        See :class:`NegativePhase`.
    """

    method = "pcd"

    def __init__(self, n_chains: int = 100, k: int = 1, sampler: TransitionOperator | str = "gibbs") -> None:
        super().__init__(k, sampler)
        self.n_chains = positive_int(n_chains, "n_chains")
        self.chains: ChainState | None = None
        self.positive_phase: PositivePhase | None = None

    @torch.no_grad()
    def init_chains(
        self,
        model: BoltzmannMachine,
        generator: torch.Generator,
        data: Tensor | None = None,
        positive_phase: PositivePhase | None = None,
    ) -> None:
        """Start the chains at random rows of ``data`` (hidden layers drawn from the positive
        phase) or uniformly at random."""
        if data is None or data.shape[0] == 0:
            self.chains = self.operator.extend(model.random_state(self.n_chains, generator))
            return
        idx = torch.randint(data.shape[0], (self.n_chains,), generator=generator, device=data.device)
        v = data.index_select(0, idx).to(device=model.device, dtype=model.dtype)
        phase = positive_phase or self.positive_phase or default_positive(model)
        state = sample_means(phase(model, v, generator), generator, tuple(range(1, model.n_layers)))
        # an operator with replicas (parallel tempering) starts every replica there
        self.chains = self.operator.extend(state)

    def setup(self, model, data, generator):
        if self.chains is None:
            self.init_chains(model, generator, data)

    @torch.no_grad()
    def __call__(self, model, v, positive, positive_phase, generator):
        self.positive_phase = positive_phase
        if self.chains is None:
            self.init_chains(model, generator)
        state = self.chains
        for _ in range(self.k):
            state, _ = self.operator.step(model, state, generator=generator)
        self.chains = state
        return model.rao_blackwellize(self.operator.project(state)), None

    def state_dict(self):
        out = super().state_dict()
        out["n_chains"] = self.n_chains
        if self.chains is not None:
            out["chains"] = [x.clone() for x in self.chains.layers]
        return out

    def load_state_dict(self, state):
        super().load_state_dict(state)
        if int(state["n_chains"]) != self.n_chains:
            raise BoltzkitError(
                "the checkpoint's persistent chains do not match this learner",
                got=f"{state['n_chains']} chains",
                expected=f"{self.n_chains} chains",
                hint="resume with the same --chains as the interrupted run.",
            )
        chains = state.get("chains")
        self.chains = None if chains is None else ChainState(tuple(x.clone() for x in chains))


class TemperedChains(Persistent):
    """Persistent parallel-tempering chains, t-PT_k (Desjardins et al. 2010; Cho, Raiko & Ilin
    2010; Brügge, Fischer & Igel 2013, "S3", Sec. 4.2): the negative phase is the ``beta = 1``
    replica of ``n_chains`` persistent PT chains.

    Each update runs one PT step (:class:`~boltzkit.samplers.tempering.ParallelTempering`): ``k``
    sweeps of the inner operator in each of the ``t`` replicas, then a swap round of adjacent
    replicas (even pairs, then odd), and returns the Rao-Blackwellised ``beta = 1`` chains. S3
    spaces the inverse temperatures uniformly on [0, 1]. Swap rates and round trips are counted
    (:attr:`monitor`); with ``ladder="adaptive"`` the ladder moves every ``adapt_every`` updates
    towards equal swap rates (:func:`~boltzkit.samplers.tempering.equalize_ladder`).

    Parameters
    ----------
    n_chains
        Chains per replica (S3: as many as examples in a minibatch).
    n_temperatures
        Replicas ``t``.
    k
        Sweeps of the inner operator between swap rounds (the ``k`` of t-PT_k).
    sampler
        Inner operator (``"gibbs"``, ``"flip"``, ``"blend:A"``, ...).
    ladder
        ``"uniform"`` (S3), ``"geometric"`` or ``"adaptive"``; or the inverse temperatures.
    adapt_every
        Updates between ladder moves (``ladder="adaptive"`` only).
    """

    method = "pt"

    def __init__(
        self,
        n_chains: int = 100,
        n_temperatures: int = 10,
        k: int = 1,
        sampler: TransitionOperator | str = "gibbs",
        *,
        ladder: str | Sequence[float] | Tensor = "uniform",
        adapt_every: int = 100,
    ) -> None:
        if isinstance(ladder, str):
            pt = ParallelTempering(n_temperatures, sampler, k=positive_int(k, "k"), kind=ladder)
        else:
            pt = ParallelTempering(betas=ladder, operator=sampler, k=positive_int(k, "k"))
        self.operator = pt
        self.n_chains = positive_int(n_chains, "n_chains")
        self.adapt_every = positive_int(adapt_every, "adapt_every")
        self.chains = None
        self.positive_phase = None
        self.monitor = SwapMonitor(pt.n_temperatures, self.n_chains)
        self.updates = 0

    @property
    def k(self) -> int:  # type: ignore[override]
        """Inner sweeps between swap rounds (the learner's ``k``; a k schedule sets it)."""
        return self.operator.k

    @k.setter
    def k(self, value: int) -> None:
        self.operator.k = positive_int(value, "k")

    @property
    def betas(self) -> Tensor:
        return self.operator.betas

    @torch.no_grad()
    def __call__(self, model, v, positive, positive_phase, generator):
        self.positive_phase = positive_phase
        if self.chains is None:
            self.init_chains(model, generator)
        state, info = self.operator.step(model, self.chains, generator=generator)
        self.chains = state
        if self.monitor.walker.device != state.layers[0].device:
            self.monitor = SwapMonitor(self.operator.n_temperatures, self.n_chains, state.layers[0].device)
        self.monitor(self.updates, state, info)
        self.updates += 1
        if self.operator.adaptive and self.updates % self.adapt_every == 0:
            self.operator.adapt(self.monitor.swap_rates)
            self.monitor.reset_rates()
        return model.rao_blackwellize(self.operator.project(state)), None

    def state_dict(self):
        out = super().state_dict()
        out["betas"] = [float(b) for b in self.operator.betas]
        out["updates"] = self.updates
        out["monitor"] = self.monitor.state_dict()
        return out

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.operator.betas = check_betas(state["betas"])
        self.updates = int(state["updates"])
        device = self.chains.layers[0].device if self.chains is not None else "cpu"
        self.monitor = SwapMonitor(self.operator.n_temperatures, self.n_chains, device)
        self.monitor.load_state_dict(state["monitor"])


__all__ = [
    "ClampedChains",
    "ContrastiveDivergence",
    "ExactConditional",
    "MeanFieldPhase",
    "NegativePhase",
    "Persistent",
    "PositivePhase",
    "RECONSTRUCTIONS",
    "TemperedChains",
    "default_positive",
    "sample_means",
]
