"""Learners: a positive phase times a negative phase, written into ``param.grad``.

A :class:`Learner` turns a minibatch into the gradient of the negative log-likelihood estimate of
any member of the Boltzmann machine family (Salakhutdinov 2008, "S2", Eqs. 35, 47, 51, with the
sign flipped for minimisation)::

    W_lm.grad = <x_l x_m^T>_negative - <x_l x_m^T>_positive        (laterals: zero diagonal)
    b_l.grad  = <x_l>_negative - <x_l>_positive

so that any ``torch.optim`` optimizer descends it; weight decay, momentum and learning-rate
schedules belong to the optimizer. Gradients are direct matrix products, never autograd. The
phases are in :mod:`boltzkit.learning.phases`:

* **CD-k** (:class:`CDLearner`; Hinton 2002, S&M 2008 Eq. 7): chains started at the data.
* **PCD-k / SAP** (:class:`PCDLearner`; Tieleman 2008, S2 Sec. 4.1.1): persistent chains.
* **t-PT_k** (:class:`PTLearner`; Desjardins et al. 2010, Brügge, Fischer & Igel 2013 Sec. 4.2):
  the ``beta = 1`` replica of persistent parallel-tempering chains.
* The positive phase defaults to the exact conditional ``p(h | v)`` where the hidden units are
  independent given ``v`` (RBM, SRBM) and to damped mean-field with the data clamped otherwise
  (BM, DBM; S2 Sec. 4.3).

Chains run any transition operator (Gibbs, flip-the-state, a blend, or a composition: Brügge,
Fischer & Igel 2013, Sec. 4.2 replace Gibbs by flip-the-state in CD and PCD); the sweeps are the
operators' own (one fused kernel in :mod:`boltzkit.samplers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.learning.centering import Centering
from boltzkit.learning.phases import (
    ContrastiveDivergence,
    MeanFieldPhase,
    NegativePhase,
    Persistent,
    PositivePhase,
    TemperedChains,
    default_positive,
    sample_means,
)
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.samplers.operators import TransitionOperator
from boltzkit.state import ChainState


@dataclass(frozen=True)
class Phases:
    """The states behind one gradient estimate.

    Attributes
    ----------
    positive
        The data term's state: ``v`` and the hidden layers' conditional (or mean-field) means.
    negative
        The model term's state (Rao-Blackwellised chain states).
    reconstruction
        Sum over the minibatch of ``||v^0 - p(v = 1 | h^0, ...)||^2`` with ``h^0`` drawn from the
        positive phase (0-d tensor), or ``None`` when not tracked.
    """

    positive: ChainState
    negative: ChainState
    reconstruction: Tensor | None = None

    @property
    def v_data(self) -> Tensor:
        return self.positive.layers[0]

    @property
    def h_data(self) -> Tensor:
        """The first hidden layer of the positive phase (``p(h | v)`` for an RBM)."""
        return self.positive.layers[1]

    @property
    def v_model(self) -> Tensor:
        return self.negative.layers[0]

    @property
    def h_model(self) -> Tensor:
        return self.negative.layers[1]


@dataclass(frozen=True)
class Statistics:
    """Mean sufficient statistics of both phases (float64), keyed by parameter name.

    For a coupling ``W_lm`` the mean of ``x_l x_m^T``, for a bias the mean of ``x_l``.
    """

    data: dict[str, Tensor]
    model: dict[str, Tensor]

    @classmethod
    def from_phases(cls, model: BoltzmannMachine, phases: Phases) -> Statistics:
        def means(state: ChainState) -> dict[str, Tensor]:
            x = [t.to(torch.float64) for t in state.layers]
            n = x[0].shape[0]
            out = {}
            for l, m in model.coupling_keys:
                s = x[l].t() @ x[m] / n
                if l == m:
                    s.fill_diagonal_(0.0)
                out[model.coupling_name(l, m)] = s
            for l in range(model.n_layers):
                out[model.bias_name(l)] = x[l].mean(0)
            return out

        return cls(means(phases.positive), means(phases.negative))

    def gradients(self) -> dict[str, Tensor]:
        """Gradient of the negative log-likelihood estimate, by parameter name."""
        return {name: self.model[name] - self.data[name] for name in self.data}

    # the RBM's names, for convenience
    @property
    def vh_data(self) -> Tensor:
        return self.data["W"]

    @property
    def v_data(self) -> Tensor:
        return self.data["vbias"]

    @property
    def h_data(self) -> Tensor:
        return self.data["hbias"]

    @property
    def vh_model(self) -> Tensor:
        return self.model["W"]

    @property
    def v_model(self) -> Tensor:
        return self.model["vbias"]

    @property
    def h_model(self) -> Tensor:
        return self.model["hbias"]


class Learner:
    """Positive phase x negative phase -> ``param.grad`` (see the module docstring).

    Parameters
    ----------
    negative
        The negative phase (CD-k or persistent chains).
    positive
        The positive phase; default: chosen per model by
        :func:`~boltzkit.learning.phases.default_positive`.
    reconstruction
        Track the reconstruction error ``||v^0 - p(v | h^0)||^2`` (one extra product per update
        unless the CD-k negative phase computes it on the way).
    centering
        Optional :class:`~boltzkit.learning.centering.Centering`: offsets that follow the phases'
        means and turn the gradient into the centered one (Melchior, Fischer & Wiskott 2016),
        written in the ordinary parameters.
    """

    method: str = "learner"

    def __init__(
        self,
        negative: NegativePhase,
        positive: PositivePhase | None = None,
        *,
        reconstruction: bool = True,
        centering: Centering | None = None,
    ) -> None:
        self.negative = negative
        self.positive = positive
        self.reconstruction = bool(reconstruction)
        self.centering = centering
        self.method = negative.method

    # ------------------------------------------------------------------------- settings
    @property
    def k(self) -> int:
        return self.negative.k

    @k.setter
    def k(self, value: int) -> None:
        self.negative.k = positive_int(value, "k")

    @property
    def operator(self) -> TransitionOperator:
        return self.negative.operator

    def positive_phase(self, model: BoltzmannMachine) -> PositivePhase:
        return self.positive if self.positive is not None else default_positive(model)

    # --------------------------------------------------------------------------- public
    @torch.no_grad()
    def phases(self, model: BoltzmannMachine, v_data: Tensor, generator: torch.Generator) -> Phases:
        """Both phases for minibatch ``v_data`` (shape ``(n, n_visible)``, the model's dtype and
        device, values in {0, 1})."""
        pos_phase = self.positive_phase(model)
        positive = pos_phase(model, v_data, generator)
        recon = None
        if self.reconstruction and not isinstance(self.negative, ContrastiveDivergence):
            recon = self._reconstruction(model, v_data, positive, generator)
        negative, v_probs = self.negative(model, v_data, positive, pos_phase, generator)
        if self.reconstruction and recon is None:
            if v_probs is None:  # the CD phase did not form them on the way (e.g. an SRBM)
                v_probs = self._visible_probs(model, positive, generator)
            d = v_probs - v_data
            recon = torch.linalg.vecdot(d.flatten(), d.flatten())
        return Phases(positive, negative, recon)

    @staticmethod
    def _visible_probs(model: BoltzmannMachine, positive: ChainState, generator: torch.Generator) -> Tensor:
        state = sample_means(positive, generator, tuple(range(1, model.n_layers)))
        return model.conditional_probs(state, 0)

    def _reconstruction(
        self, model: BoltzmannMachine, v: Tensor, positive: ChainState, generator: torch.Generator
    ) -> Tensor:
        d = self._visible_probs(model, positive, generator) - v
        return torch.linalg.vecdot(d.flatten(), d.flatten())

    @torch.no_grad()
    def statistics(self, model: BoltzmannMachine, v_data: Tensor, generator: torch.Generator) -> Statistics:
        """Mean sufficient statistics of both phases (float64), from :meth:`phases`."""
        return Statistics.from_phases(model, self.phases(model, v_data, generator))

    @torch.no_grad()
    def set_gradients(
        self, model: BoltzmannMachine, v_data: Tensor, generator: torch.Generator
    ) -> Tensor | None:
        """Write the negative log-likelihood gradient estimate into ``model``'s ``.grad``
        (overwritten, not accumulated). No input checks are made here (this is the inner loop).

        Returns
        -------
        Tensor or None
            The minibatch's summed reconstruction error (0-d tensor, not synchronised).
        """
        ph = self.phases(model, v_data, generator)
        model.set_gradients(ph.positive, ph.negative)
        if self.centering is not None:
            self.centering.update(ph.positive, ph.negative)
            self.centering.transform(model)
        return ph.reconstruction

    def epoch_summary(self) -> dict[str, Any]:
        """What the learner adds to an epoch's record, called by the trainer at the end of each
        epoch (none here; a unit model's learner reports its monitor)."""
        return {}

    def setup(self, model: BoltzmannMachine, train_x: Tensor, generator: torch.Generator) -> None:
        """Called once by the trainer before the first update (persistent chains and centering
        offsets start here)."""
        if isinstance(self.negative, Persistent):
            self.negative.positive_phase = self.positive_phase(model)
        self.negative.setup(model, train_x, generator)
        if self.centering is not None:
            self.centering.setup(model, train_x)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must hold to resume (tensors and JSON-able values)."""
        state = self.negative.state_dict()
        if self.centering is not None:
            state["centering"] = self.centering.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.negative.load_state_dict(state)
        if self.centering is not None and "centering" in state:
            self.centering.load_state_dict(state["centering"])

    def describe(self) -> str:
        """Short name, e.g. ``"CD-3 (gibbs)"``."""
        extra = f", {self.negative.n_chains} chains" if isinstance(self.negative, Persistent) else ""
        if isinstance(self.positive, MeanFieldPhase):
            extra += ", mean-field positive phase"
        if isinstance(self.negative, TemperedChains):
            pt = self.negative.operator
            return f"{pt.n_temperatures}-PT-{self.k} ({pt.operator.name}, {pt.kind} ladder{extra})"
        return f"{self.method.upper()}-{self.k} ({self.operator.name}{extra})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, sampler={self.operator.name!r})"


class CDLearner(Learner):
    """Contrastive divergence CD-k with any operator (see :class:`ContrastiveDivergence`)."""

    def __init__(
        self,
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        positive: PositivePhase | None = None,
        reconstruction: bool = True,
        cd_reconstruction: str = "sample",
    ) -> None:
        negative = ContrastiveDivergence(k, sampler, reconstruction=cd_reconstruction)
        super().__init__(negative, positive, reconstruction=reconstruction)


class PCDLearner(Learner):
    """Persistent chains (PCD-k, SAP) with any operator (see :class:`Persistent`).

    Parameters
    ----------
    n_chains
        Number of persistent chains.
    k, sampler
        Sweeps per update and the operator.
    positive, reconstruction
        See :class:`Learner`.
    """

    def __init__(
        self,
        n_chains: int = 100,
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        positive: PositivePhase | None = None,
        reconstruction: bool = True,
    ) -> None:
        super().__init__(Persistent(n_chains, k, sampler), positive, reconstruction=reconstruction)

    @property
    def n_chains(self) -> int:
        return self.negative.n_chains

    @property
    def chains(self) -> ChainState | None:
        return self.negative.chains

    def init_chains(
        self, model: BoltzmannMachine, generator: torch.Generator, data: Tensor | None = None
    ) -> None:
        """Start the chains at random rows of ``data`` or uniformly at random."""
        self.negative.init_chains(model, generator, data, self.positive_phase(model))


class PTLearner(PCDLearner):
    """Parallel tempering t-PT_k with any inner operator (see :class:`TemperedChains`).

    Parameters
    ----------
    n_chains
        Chains per replica.
    n_temperatures
        Replicas ``t`` (S3 Table 1: 5, 10, 20).
    k
        Inner sweeps between swap rounds.
    sampler
        Inner operator.
    ladder, adapt_every
        Ladder kind or inverse temperatures, and the updates between moves of an adaptive one.
    positive, reconstruction
        See :class:`Learner`.
    """

    def __init__(
        self,
        n_chains: int = 100,
        n_temperatures: int = 10,
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        ladder: str | Sequence[float] | Tensor = "uniform",
        adapt_every: int = 100,
        positive: PositivePhase | None = None,
        reconstruction: bool = True,
    ) -> None:
        negative = TemperedChains(
            n_chains, n_temperatures, k, sampler, ladder=ladder, adapt_every=adapt_every
        )
        Learner.__init__(self, negative, positive, reconstruction=reconstruction)

    @property
    def swap_rates(self) -> Tensor:
        """Swap acceptance per adjacent pair in the current window, float64 ``(t - 1,)``."""
        return self.negative.monitor.swap_rates

    @property
    def round_trips(self) -> int:
        return self.negative.monitor.round_trips

    @property
    def swap_totals(self) -> tuple[Tensor, int]:
        """Acceptances per adjacent pair summed over all swap rounds so far, and the rounds
        (never reset: the rates of an epoch are the difference of two readings)."""
        monitor = self.negative.monitor
        return monitor.total_accepted.clone(), monitor.total_rounds

    @property
    def adaptive_ladder(self) -> bool:
        """Whether the ladder moves towards equal swap rates (``ladder="adaptive"``)."""
        return bool(self.negative.operator.adaptive)

    @property
    def betas(self) -> Tensor:
        return self.negative.betas


def make_learner(
    method: str,
    *,
    k: int = 1,
    sampler: str | TransitionOperator = "gibbs",
    n_chains: int = 100,
    positive: PositivePhase | None = None,
    reconstruction: bool = True,
    temperatures: int = 10,
    ladder: str | Sequence[float] | Tensor = "uniform",
    adapt_every: int = 100,
    cd_reconstruction: str = "sample",
) -> Learner:
    """``"cd"`` -> :class:`CDLearner`, ``"pcd"`` / ``"sap"`` / ``"persistent"`` -> :class:`PCDLearner`,
    ``"pt"`` -> :class:`PTLearner` (``temperatures`` replicas, ``k`` inner sweeps of ``sampler``
    between swap rounds, the ``ladder`` of inverse temperatures). ``cd_reconstruction`` is CD's
    ``"sample"`` or ``"mean"`` last visible update (:class:`ContrastiveDivergence`)."""
    name = str(method).strip().lower()
    if name in ("cd", "contrastive-divergence"):
        return CDLearner(
            k, sampler, positive=positive, reconstruction=reconstruction, cd_reconstruction=cd_reconstruction
        )
    if name in ("pcd", "sap", "persistent"):
        learner = PCDLearner(n_chains, k, sampler, positive=positive, reconstruction=reconstruction)
        learner.method = "sap" if name == "sap" else "pcd"
        return learner
    if name in ("pt", "parallel-tempering"):
        return PTLearner(
            n_chains,
            temperatures,
            k,
            sampler,
            ladder=ladder,
            adapt_every=adapt_every,
            positive=positive,
            reconstruction=reconstruction,
        )
    raise BoltzkitError(
        "unknown learning method",
        got=repr(method),
        expected="'cd' (contrastive divergence), 'pcd' (persistent contrastive divergence), 'sap' "
        "(stochastic approximation: persistent chains, S2 Sec. 4.1.1) or 'pt' (parallel tempering)",
    )


__all__ = ["CDLearner", "Learner", "PCDLearner", "PTLearner", "Phases", "Statistics", "make_learner"]
