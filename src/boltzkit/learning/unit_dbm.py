"""Training DBMs with real-valued or categorical visible units (Gaussian-Bernoulli and categorical
DBMs) as S2 (Sec. 4.1) trains a DBM: a mean-field positive phase and persistent chains.

The gradient of the mean log-likelihood is ``E_data[-dE/dtheta] - E_model[-dE/dtheta]``. Its data
term is intractable for a DBM; S2 replaces ``p(h | v)`` by the mean-field ``q(h | v)``
(:func:`~boltzkit.models.mean_field.unit_dbm_mean_field`), which makes the learning rule the gradient of
the variational lower bound of ``log p(v)`` (S2 Eq. 7). The model term comes from ``n_chains``
persistent Markov chains (stochastic approximation, S2 Sec. 4.1; Tieleman 2008), ``k`` sweeps of the
operator's one block sweep (:meth:`~boltzkit.samplers.operators.UnitOperator.step`) per update,
computed by :class:`UnitDBMLearner` and run by the trainer of every model
(:class:`~boltzkit.learning.trainer.Trainer`).

Per parameter (the descent direction; ``mu`` the mean-field marginals of the data, ``h`` the chains'
states)::

    W_0:  phi(v_model)' h_1 / m - phi(v_data)' mu_1 / n          (and the visible layer's own terms:
                                                                 learning.unit_rbm.set_visible_gradients)
    W_l:  h_l' h_{l+1} / m - mu_l' mu_{l+1} / n
    b_l:  mean h_l - mean mu_l

torch.optim's SGD applies the learning rate (decaying linearly to 0, S2 Sec. 5), the momentum and
the weight decay (on the couplings only). The visible biases start at the unit type's base-rate
fit to the data, the couplings at ``N(0, init_scale^2)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzkit.learning.unit_rbm import NamedPhase, UnitLearner, set_visible_gradients, visible_base
from boltzkit.models.mean_field import unit_dbm_mean_field as mean_field
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.samplers.operators import TransitionOperator
from boltzkit.state import ChainState
from boltzkit.units import UnitType, unit_type


def init_unit_dbm(
    x: Tensor,
    visible: UnitType | str,
    hidden: Sequence[int],
    *,
    init_scale: float = 0.01,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> UnitDBM:
    """A :class:`UnitDBM` whose visible units start at the base-rate fit to ``x``."""
    units = unit_type(visible)
    x, base = visible_base(x, units)
    biases = [base["bias"]] + [None] * len(hidden)
    return UnitDBM(
        units, (x.shape[1], *[int(n) for n in hidden]), biases=biases, sigma=base.get("sigma"),
        init_scale=init_scale, generator=generator, dtype=dtype,
    )  # fmt: skip


#: Tolerance of the positive phase's mean field (largest change of a mean between sweeps).
MEAN_FIELD_TOL = 1e-4


class UnitDBMLearner(UnitLearner):
    """S2's learning rule for a DBM with any visible unit type (module docstring): the learner that
    :class:`~boltzkit.learning.trainer.Trainer` runs for a :class:`~boltzkit.models.unit_dbm.UnitDBM`,
    which brings the rest (minibatches, SGD with its schedules, checkpoints, the history).

    Parameters
    ----------
    method
        ``"pcd"`` or ``"sap"`` (the same persistent chains; a DBM does not learn by CD).
    k
        Sweeps of the persistent chains per update (the trainer sets it per epoch).
    sampler
        The chains' transition operator (``gibbs``; ``flip`` and blends where the visible unit
        type has a flip rule; ``pt:T``, whose beta = 1 replicas give the negative statistics).
    n_chains
        Persistent chains.
    learn_sigma
        Gaussian units: learn ``log sigma`` too.
    mean_field_iterations
        Most mean-field sweeps of the positive phase (stopping early at a residual of 1e-4).
    """

    methods = ("pcd",)
    methods_text = "a DBM learns by persistent chains (S2 Sec. 4.1)"

    def __init__(
        self,
        method: str = "pcd",
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        n_chains: int = 100,
        learn_sigma: bool = True,
        mean_field_iterations: int = 10,
    ) -> None:
        super().__init__(method, k, sampler, n_chains=n_chains, learn_sigma=learn_sigma)
        self.mean_field_iterations = int(mean_field_iterations)
        self._sweeps: list[int] = []

    def parameter_groups(self, model: UnitDBM) -> tuple[list[Tensor], list[Tensor]]:
        """The couplings (weight decay applies) and the other parameters the optimizer moves."""
        others = list(model.biases) + ([model.log_sigma] if self.learns_sigma(model) else [])
        return list(model.weights), others

    def setup(self, model: UnitDBM, train_x: Tensor, generator: torch.Generator) -> None:
        """The chains start at the visible units' own model and uniform hidden layers."""
        if self.chains is None:
            with torch.no_grad():
                self.chains = self.operator.extend(model.random_state(self.n_chains, generator))

    @torch.no_grad()
    def set_gradients(self, model: UnitDBM, v_data: Tensor, generator: torch.Generator) -> None:
        """One update's gradient: the mean-field marginals of the minibatch, ``k`` sweeps of the
        chains, then :meth:`mean_field_gradients`."""
        mu, details = mean_field(model, v_data, tol=MEAN_FIELD_TOL, max_iter=self.mean_field_iterations)
        chains = self.chains
        for _ in range(self.k):
            chains, _ = self.operator.step(model, chains, generator=generator)
        self.chains = chains
        self.mean_field_gradients(model, v_data, mu, self.operator.project(chains))
        self._sweeps.append(int(details["mean_field_iterations"]))

    @torch.no_grad()
    def mean_field_gradients(
        self, model: UnitDBM, data: Tensor, mu: Sequence[Tensor], chains: ChainState
    ) -> None:
        """Set every parameter's ``.grad`` to the descent direction of the module docstring: the
        gradient of ``mean E(v, mu) - mean E(chains)`` (``E`` is linear in each hidden layer, so
        ``E(v, mu)`` is the mean-field expectation of the energy), with ``mu`` the data's mean-field
        marginals and ``chains`` the model's samples held fixed."""
        params, w = model.visible_params(), model.w0_flat()
        units, neg = model.visible_units, chains.layers
        sides = [(x, units.stats(x, params), h1) for x, h1 in ((data, mu[0]), (neg[0], neg[1]))]
        set_visible_gradients(
            model, params, w, model.weights[0], *sides, learn_sigma=self.learns_sigma(model)
        )
        n, m = data.shape[0], neg[0].shape[0]
        for l in range(1, model.n_layers - 1):
            grad = torch.mm(neg[l].t(), neg[l + 1])
            model.weights[l].grad = grad.addmm_(mu[l - 1].t(), mu[l], beta=1.0 / m, alpha=-1.0 / n)
        for l in range(1, model.n_layers):
            model.biases[l].grad = neg[l].mean(0) - mu[l - 1].mean(0)

    def epoch_summary(self) -> dict[str, Any]:
        """The epoch's mean number of mean-field sweeps per positive phase, then reset."""
        out = {"mean_field_sweeps": sum(self._sweeps) / len(self._sweeps) if self._sweeps else None}
        self._sweeps = []
        return out

    def positive_phase(self, model: UnitDBM) -> NamedPhase:
        return NamedPhase("mean-field", (("tol", MEAN_FIELD_TOL), ("max_iter", self.mean_field_iterations)))

    def describe(self) -> str:
        return f"PCD-{self.k} ({self.operator.name}, {self.n_chains} chains, mean-field positive phase)"


__all__ = ["UnitDBMLearner", "init_unit_dbm"]
