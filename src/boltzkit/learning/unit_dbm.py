"""Training DBMs with real-valued or categorical visible units (Gaussian-Bernoulli and categorical
DBMs) as S2 (Sec. 4.1) trains a DBM: a mean-field positive phase and persistent chains.

The gradient of the mean log-likelihood is ``E_data[-dE/dtheta] - E_model[-dE/dtheta]``. Its data
term is intractable for a DBM; S2 replaces ``p(h | v)`` by the mean-field ``q(h | v)``
(:func:`~boltzkit.estimators.unit_dbm.mean_field`), which makes the learning rule the gradient of
the variational lower bound of ``log p(v)`` (S2 Eq. 7). The model term comes from ``n_chains``
persistent Markov chains (stochastic approximation, S2 Sec. 4.1; Tieleman 2008), ``k`` block-Gibbs
sweeps of the one block sweep (:meth:`~boltzkit.samplers.operators.UnitOperator.step`) per update.

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

import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit.errors import BoltzkitError
from boltzkit.estimators.unit_dbm import mean_field
from boltzkit.learning.unit_rbm import (
    check_finite,
    prepared,
    set_visible_gradients,
    sgd_with_decay,
    visible_base,
)
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.samplers import make_operator
from boltzkit.state import ChainState
from boltzkit.units import Gaussian, UnitType, unit_type


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


class UnitDBMTrainer:
    """The training state of a unit DBM between epochs: the model, SGD with momentum, the
    learning-rate schedule, the persistent chains and the one random stream.

    Parameters
    ----------
    model
        The DBM to train.
    n_examples
        Examples per epoch (for the linear decay of the learning rate over ``epochs`` epochs).
    k
        Block-Gibbs sweeps of the persistent chains per update.
    mean_field_iterations
        Most mean-field sweeps of the positive phase (stopping early at a residual of 1e-4).
    sampler
        The chains' transition operator (``gibbs``; ``flip`` and blends where the visible unit
        type has a flip rule).
    lr, lr_decay, momentum, weight_decay, batch_size, n_chains, learn_sigma, epochs
        As in :func:`train_unit_dbm`.
    generator
        The source of every minibatch order and chain draw.
    """

    def __init__(
        self,
        model: UnitDBM,
        *,
        n_examples: int,
        k: int = 1,
        epochs: int = 10,
        lr: float = 0.001,
        lr_decay: bool = True,
        momentum: float = 0.5,
        weight_decay: float = 0.0,
        batch_size: int = 100,
        n_chains: int = 100,
        mean_field_iterations: int = 10,
        sampler: str = "gibbs",
        learn_sigma: bool = True,
        generator: torch.Generator,
    ) -> None:
        if int(k) < 1 or int(epochs) < 1 or int(batch_size) < 1 or int(n_chains) < 1:
            raise BoltzkitError(
                "k, epochs, batch_size and n_chains must be at least 1", got=(k, epochs, batch_size, n_chains)
            )
        self.model, self.k, self.batch_size, self.generator = model, int(k), int(batch_size), generator
        self.mean_field_iterations = int(mean_field_iterations)
        self.learn_sigma = isinstance(model.visible_units, Gaussian) and learn_sigma
        others = list(model.biases) + ([model.log_sigma] if self.learn_sigma else [])
        self.optimizer, self.scheduler = sgd_with_decay(
            list(model.weights), others, lr=lr, momentum=momentum, weight_decay=weight_decay,
            n_examples=n_examples, batch_size=batch_size, epochs=epochs, lr_decay=lr_decay,
        )  # fmt: skip
        self.operator = make_operator(sampler)
        with torch.no_grad():
            self.chains = model.random_state(int(n_chains), generator)
        self.epoch = 0

    @torch.no_grad()
    def set_gradients(self, data: Tensor, mu: Sequence[Tensor], chains: ChainState) -> None:
        """Set every parameter's ``.grad`` to the descent direction of the module docstring: the
        gradient of ``mean E(v, mu) - mean E(chains)`` (``E`` is linear in each hidden layer, so
        ``E(v, mu)`` is the mean-field expectation of the energy), with ``mu`` the data's mean-field
        marginals and ``chains`` the model's samples held fixed."""
        model = self.model
        params, w = model.visible_params(), model.w0_flat()
        units, neg = model.visible_units, chains.layers
        sides = [(x, units.stats(x, params), h1) for x, h1 in ((data, mu[0]), (neg[0], neg[1]))]
        set_visible_gradients(model, params, w, model.weights[0], *sides, learn_sigma=self.learn_sigma)
        n, m = data.shape[0], neg[0].shape[0]
        for l in range(1, model.n_layers - 1):
            grad = torch.mm(neg[l].t(), neg[l + 1])
            model.weights[l].grad = grad.addmm_(mu[l - 1].t(), mu[l], beta=1.0 / m, alpha=-1.0 / n)
        for l in range(1, model.n_layers):
            model.biases[l].grad = neg[l].mean(0) - mu[l - 1].mean(0)

    @torch.no_grad()
    def _update(self, batch: Tensor) -> int:
        """One SGD update; returns the mean-field sweeps its positive phase took."""
        model, g = self.model, self.generator
        mu, details = mean_field(model, batch, tol=1e-4, max_iter=self.mean_field_iterations)
        chains = self.chains
        for _ in range(self.k):
            chains, _ = self.operator.step(model, chains, generator=g)
        self.chains = chains
        self.set_gradients(batch, mu, chains)
        self.optimizer.step()
        self.scheduler.step()
        return int(details["mean_field_iterations"])

    def run_epoch(self, data: Tensor) -> dict[str, Any]:
        """One pass over ``data`` (checked by the model's unit type) in a random order; returns the
        epoch's record (seconds, the mean mean-field sweeps of the positive phase, the learning rate)."""
        t0 = time.perf_counter()
        n = data.shape[0]
        order = torch.randperm(n, generator=self.generator, device=self.generator.device)
        sweeps = [
            self._update(data.index_select(0, order[start : start + self.batch_size]))
            for start in range(0, n, self.batch_size)
        ]
        self.epoch += 1
        check_finite(self.model, self.epoch)
        return {
            "epoch": self.epoch,
            "seconds": time.perf_counter() - t0,
            "mean_field_sweeps": sum(sweeps) / len(sweeps),
            "lr": self.optimizer.param_groups[0]["lr"],
        }


def train_unit_dbm(
    x: Tensor,
    visible: UnitType | str,
    hidden: Sequence[int],
    *,
    k: int = 1,
    epochs: int = 10,
    lr: float = 0.001,
    lr_decay: bool = True,
    momentum: float = 0.5,
    weight_decay: float = 0.0,
    batch_size: int = 100,
    n_chains: int = 100,
    mean_field_iterations: int = 10,
    sampler: str = "gibbs",
    learn_sigma: bool = True,
    init_scale: float = 0.01,
    seed: int = 0,
    init: UnitDBM | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> tuple[UnitDBM, list[dict[str, Any]]]:
    """Train a Gaussian or categorical DBM on ``x`` (real values or category indices).

    Parameters
    ----------
    x
        Training data, ``(n_examples, n_visible)``.
    visible
        The visible unit type (``"gaussian"``, ``"categorical:Q"``).
    hidden
        Sizes of the hidden layers (at least two).
    k, n_chains, sampler
        Sweeps per update of ``n_chains`` persistent chains, and their operator.
    epochs, lr, lr_decay, momentum, weight_decay, batch_size
        SGD settings; the learning rate decays linearly to 0 over the updates when ``lr_decay``.
    mean_field_iterations
        Most mean-field sweeps per positive phase.
    learn_sigma
        Gaussian units: learn ``log sigma`` too.
    seed
        One generator for the initial couplings, the minibatch order and every chain draw.
    init
        A model to train further instead of a fresh one.
    device
        Where to train; on a GPU a generator there, seeded with ``seed``, drives all but the
        initial couplings.

    Returns
    -------
    (model, history)
        The trained model and one record per epoch (:meth:`UnitDBMTrainer.run_epoch`).
    """

    def fresh(x: Tensor, units: UnitType, *, generator: torch.Generator) -> UnitDBM:
        return init_unit_dbm(x, units, hidden, init_scale=init_scale, generator=generator)

    if init is not None and list(init.layer_sizes[1:]) != [int(n) for n in hidden]:
        raise BoltzkitError(
            "the model to train further has other hidden layers",
            got=list(init.layer_sizes[1:]),
            expected=list(hidden),
        )
    model, generator, data = prepared(x, visible, fresh, init=init, seed=seed, device=device)
    trainer = UnitDBMTrainer(
        model, n_examples=data.shape[0], k=k, epochs=epochs, lr=lr, lr_decay=lr_decay, momentum=momentum,
        weight_decay=weight_decay, batch_size=batch_size, n_chains=n_chains,
        mean_field_iterations=mean_field_iterations, sampler=sampler, learn_sigma=learn_sigma,
        generator=generator,
    )  # fmt: skip
    history = [trainer.run_epoch(data) for _ in tqdm(range(int(epochs)), desc="epochs", disable=not progress)]
    return model, history


__all__ = ["UnitDBMTrainer", "init_unit_dbm", "train_unit_dbm"]
