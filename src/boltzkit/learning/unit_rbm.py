"""Training RBMs with real-valued or categorical visible units (Gaussian-Bernoulli and Potts RBMs)
by CD-k or PCD, for every unit type at once.

The gradient of the mean log-likelihood of an RBM with binary hidden units is
``-E_data[dF/dtheta] + E_model[dF/dtheta]`` with the free energy ``F(v) = -log p*(v)``
(:meth:`~boltzkit.models.unit_rbm.UnitRBM.free_energy`; Hinton 2002, and S2 Sec. 4.1 for the
persistent version). So the learner descends ``mean F(v_data) - mean F(v_model)`` with the model
samples held fixed (:meth:`UnitTrainer.set_gradients`): the unit type gives the gradients of its
self-energy and of the couplings (one product), and for Gaussian units ``log sigma`` is learned too
(in the log domain, so that sigma stays positive). The
negative samples are ``k`` block-Gibbs sweeps from the data (CD-k) or from persistent chains (PCD;
Tieleman 2008). torch.optim's SGD applies the learning rate, the momentum and the weight decay (on
the couplings only); the learning rate decays linearly to 0 when asked (S2 Sec. 5).

The visible biases start at the unit type's base-rate fit to the data (the data's means, and for
Gaussian units sigma at the data's standard deviations, floored at 5% of the largest; the log of
the smoothed frequencies for categorical units; Hinton 2010, Sec. 8, for binary units), the
couplings at ``N(0, init_scale^2)``. Gaussian-Bernoulli RBMs need small learning rates (Hinton
2010, Sec. 13.2: about 0.001 on standardised data); a diverging run stops with a clear error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import bernoulli, make_generator, resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.units import Gaussian, Params, UnitType, unit_type

METHODS = ("cd", "pcd")
M = TypeVar("M", bound=torch.nn.Module)
#: The free-energy gap of every this many minibatches (the first of each run of them) goes into the
#: epoch's record: a monitor, whose float64 softplus over the hidden inputs would otherwise cost
#: about a tenth of a CD-1 step.
MONITOR_EVERY = 10


class _Side(NamedTuple):
    """One side of a learning step: visible states, ``phi(v)``, hidden inputs and probabilities."""

    v: Tensor
    stats: Tensor
    hidden_input: Tensor
    probs: Tensor


#: Gaussian units start at the data's standard deviations, at least this fraction of the largest.
SIGMA_FLOOR = 0.05


def init_unit_rbm(
    x: Tensor,
    visible: UnitType | str,
    n_hidden: int,
    *,
    init_scale: float = 0.01,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> UnitRBM:
    """A :class:`UnitRBM` whose visible units start at the base-rate fit to ``x``."""
    units = unit_type(visible)
    x, base = visible_base(x, units)
    return UnitRBM(
        units, x.shape[1], int(n_hidden), vbias=base["bias"], sigma=base.get("sigma"), init_scale=init_scale,
        generator=generator, dtype=dtype,
    )  # fmt: skip


def visible_base(x: Tensor, units: UnitType) -> tuple[Tensor, Params]:
    """``x`` checked by ``units`` and the visible layer's starting parameters: the unit type's
    base-rate fit, Gaussian sigmas floored at :data:`SIGMA_FLOOR` of the largest (a column that
    barely varies would start at a sigma near 0 and blow up ``W / sigma``)."""
    x = torch.as_tensor(x)
    x = units.check_data(x, int(x.shape[-1]))
    base = units.fit_base(x)
    if "sigma" in base:
        base["sigma"] = base["sigma"].clamp_min(SIGMA_FLOOR * float(base["sigma"].max()))
    return x, base


def sgd_with_decay(
    couplings: list[Tensor],
    others: list[Tensor],
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
    n_examples: int,
    batch_size: int,
    epochs: int,
    lr_decay: bool,
) -> tuple[torch.optim.SGD, torch.optim.lr_scheduler.LambdaLR]:
    """torch.optim's SGD with momentum, the weight decay on the couplings only, and the learning
    rate decaying linearly to 0 over ``epochs`` epochs of updates when ``lr_decay`` (S2 Sec. 5):
    the optimizer of every unit-type trainer."""
    optimizer = torch.optim.SGD(
        [{"params": couplings, "weight_decay": float(weight_decay)}, {"params": others, "weight_decay": 0.0}],
        lr=float(lr),
        momentum=float(momentum),
    )
    total = (int(n_examples) + int(batch_size) - 1) // int(batch_size) * int(epochs)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, 1.0 - step / total) if lr_decay else 1.0
    )
    return optimizer, scheduler


def check_finite(model: torch.nn.Module, epoch: int) -> None:
    """Stop a diverged run with a clear error (a parameter no longer finite)."""
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise BoltzkitError(
            f"training diverged in epoch {epoch}: a parameter is no longer finite",
            hint="lower the learning rate (--lr), or keep sigma fixed (learn_sigma=False) for "
            "standardised data.",
        )


def prepared(
    x: Tensor, visible: UnitType | str, fresh: Callable[..., M], *, init: M | None, seed: int, device: Any
) -> tuple[M, torch.Generator, Tensor]:
    """The model to train, its generator and its data: ``init``, or ``fresh(x, units,
    generator=...)`` drawn on the CPU from ``seed``; moved to ``device``, where a generator seeded
    with ``seed`` drives the rest; ``x`` checked by the model's visible units."""
    generator = torch.Generator().manual_seed(int(seed))
    units = unit_type(visible)
    model = init or fresh(x, units, generator=generator)
    if model.visible_units != units:
        raise BoltzkitError("the model's visible units differ from --visible", got=model.visible_units.name)
    dev = resolve_device(device)
    if dev.type != "cpu":
        model = model.to(dev)
        generator = make_generator(int(seed), dev)
    return model, generator, model.check_data(torch.as_tensor(x).to(dev))


def set_visible_gradients(
    model: Any,
    params: Params,
    w: Tensor,
    weight: Tensor,
    data: tuple[Tensor, Tensor, Tensor],
    negative: tuple[Tensor, Tensor, Tensor],
    *,
    learn_sigma: bool,
) -> None:
    """Set the ``.grad`` of a visible layer's couplings ``weight`` (flattened: ``w``), of its
    ``vbias`` and, when ``learn_sigma``, of its ``log_sigma``: the descent direction of ``mean
    F(data) - mean F(negative)`` through the visible layer, from each side's ``(v, phi(v), g)``
    with ``g`` the expected (or sampled) states of the first hidden layer.

    The couplings' gradient is ``phi(neg)' g_neg / m - phi(data)' g_data / n`` (two products into
    one buffer); the unit type gives its self-energy's part
    (:meth:`~boltzkit.units.UnitType.self_energy_gradients`) and what its statistics contribute
    through the couplings (:meth:`~boltzkit.units.UnitType.through_stats_gradients`): the RBM's
    CD/PCD rule (:class:`UnitTrainer`) and the DBM's (:mod:`boltzkit.learning.unit_dbm`) alike."""
    units = model.visible_units
    (x_pos, s_pos, g_pos), (x_neg, s_neg, g_neg) = data, negative
    n, m = x_pos.shape[0], x_neg.shape[0]
    grad_w = torch.mm(s_neg.flatten(1).t(), g_neg)
    grad_w.addmm_(s_pos.flatten(1).t(), g_pos, beta=1.0 / m, alpha=-1.0 / n)
    weight.grad = grad_w.view(weight.shape)
    kw = {"dtype": x_pos.dtype, "device": x_pos.device}
    own = units.self_energy_gradients(x_pos, params, torch.full((n,), 1.0 / n, **kw), stats=s_pos)
    own_neg = units.self_energy_gradients(x_neg, params, torch.full((m,), -1.0 / m, **kw), stats=s_neg)
    model.vbias.grad = (own["bias"] + own_neg["bias"]).to(model.vbias.dtype)
    if learn_sigma:  # d/dlog sigma = sigma d/dsigma
        # grad_w is the couplings' descent direction, the negative of the G of
        # through_stats_gradients, so their part enters with a plus
        through = units.through_stats_gradients(w, grad_w, params)
        model.log_sigma.grad = ((own["sigma"] + own_neg["sigma"] + through["sigma"]) * params["sigma"]).to(
            model.dtype
        )


class UnitTrainer:
    """The training state of a unit RBM between epochs: the model, torch.optim's SGD (momentum),
    the learning-rate schedule, the persistent chains of PCD and the one random stream, so that
    training can go on epoch by epoch (scikit-learn's ``partial_fit``) with the same numbers as one
    run of :func:`train_unit_rbm`.

    Parameters
    ----------
    model
        The RBM to train (its visible unit type decides the data it takes).
    n_examples
        Examples per epoch, for the linear decay of the learning rate over ``epochs`` epochs.
    method, k, epochs, lr, lr_decay, momentum, weight_decay, batch_size, n_chains, learn_sigma
        As in :func:`train_unit_rbm`.
    generator
        The source of every minibatch order and Gibbs draw.
    chains
        PCD: persistent chains to go on from (default: fresh draws from the visible units' own
        independent model).
    """

    def __init__(
        self,
        model: UnitRBM,
        *,
        n_examples: int,
        method: str = "cd",
        k: int = 1,
        epochs: int = 10,
        lr: float = 0.001,
        lr_decay: bool = True,
        momentum: float = 0.5,
        weight_decay: float = 0.0,
        batch_size: int = 100,
        n_chains: int = 100,
        learn_sigma: bool = True,
        generator: torch.Generator,
        chains: Tensor | None = None,
    ) -> None:
        method = str(method).lower()
        if method not in METHODS:
            raise BoltzkitError(
                "unknown learning method for these units", got=method, expected=" or ".join(METHODS)
            )
        if int(k) < 1 or int(epochs) < 1 or int(batch_size) < 1:
            raise BoltzkitError("k, epochs and batch_size must be at least 1", got=(k, epochs, batch_size))
        self.model, self.k, self.batch_size, self.generator = model, int(k), int(batch_size), generator
        self.learn_sigma = isinstance(model.visible_units, Gaussian) and learn_sigma
        others = [model.vbias, model.hbias] + ([model.log_sigma] if self.learn_sigma else [])
        self.optimizer, self.scheduler = sgd_with_decay(
            [model.W], others, lr=lr, momentum=momentum, weight_decay=weight_decay, n_examples=n_examples,
            batch_size=batch_size, epochs=epochs, lr_decay=lr_decay,
        )  # fmt: skip
        if method == "pcd" and chains is None:
            chains = model.sample_independent(int(n_chains), generator)
        self.chains = chains if method == "pcd" else None
        self.epoch = 0

    def _side(self, v: Tensor, params: Params, w: Tensor) -> _Side:
        """A visible state with its statistics ``phi(v)``, its hidden inputs ``a = c + phi(v) W``
        (the unit type's own coupling, :meth:`~boltzkit.units.UnitType.couple`: a lookup of ``W``'s
        rows for categorical units) and ``p(h = 1 | v) = sigmoid(a)``, each computed once."""
        units = self.model.visible_units
        stats = units.stats(v, params)
        hidden_input = units.couple(v, w, params, stats=stats).add_(self.model.hbias)
        return _Side(v, stats, hidden_input, torch.sigmoid(hidden_input))

    def _sweep(self, side: _Side, params: Params, w: Tensor) -> _Side:
        """One block-Gibbs sweep: ``h ~ p(h | v)``, then ``v' ~ p(v | h)``."""
        model, g, p = self.model, self.generator, side.probs
        h = bernoulli(p, g)
        field = torch.mm(h, w.t()).view(h.shape[0], model.n_visible, -1)
        return self._side(model.visible_units.sample(field, params, g), params, w)

    def _update(self, batch: Tensor, monitor: bool) -> Tensor | None:
        """One SGD update on a minibatch: the negative samples (CD-k from the data, or the
        persistent chains), the gradients (:meth:`_set_gradients`), the step. Returns the
        minibatch's free-energy gap when ``monitor`` (a 0-d float64 tensor, so that no step waits
        for the device)."""
        w = self.model._w_flat()
        with torch.no_grad():
            params = self.model.visible_params()
            data = self._side(batch, params, w)
            if self.chains is None:  # CD-k: k sweeps from the data
                negative = self._sweep(data, params, w)
                for _ in range(self.k - 1):
                    negative = self._sweep(negative, params, w)
            else:  # PCD: k sweeps of the persistent chains
                negative = self._side(self.chains, params, w)
                for _ in range(self.k):
                    negative = self._sweep(negative, params, w)
                self.chains = negative.v
            gap = self._set_gradients(data, negative, params, w, gap=monitor)
        self.optimizer.step()
        self.scheduler.step()
        return gap

    @torch.no_grad()
    def set_gradients(self, data: Tensor, negative: Tensor) -> float:
        """Set every parameter's ``.grad`` to the gradient of ``mean F(data) - mean F(negative)``
        and return that gap.

        The gradient is ``sum_b w_b [d self_energy(x_b) - sum_j sigmoid(a_bj) d a_bj]`` over the
        data (``w = 1/n``) and the negative samples (``w = -1/m``), ``a`` being the hidden inputs:
        the unit type gives the self-energy's part
        (:meth:`~boltzkit.units.UnitType.self_energy_gradients`, elementwise) and what its
        statistics contribute through the couplings
        (:meth:`~boltzkit.units.UnitType.through_stats_gradients`); the couplings' gradient is
        ``phi(neg)' sigmoid(a_neg) / m - phi(data)' sigmoid(a_data) / n`` (two products into one
        buffer), so the products of a step are those of CD itself (the hidden inputs, the visible
        field, the gradient) and no autograd graph is built."""
        model = self.model
        w, params = model._w_flat(), model.visible_params()
        sides = (self._side(x.to(model.dtype), params, w) for x in (data, negative))
        return float(self._set_gradients(*sides, params, w, gap=True))

    def _set_gradients(
        self, data: _Side, negative: _Side, params: Params, w: Tensor, *, gap: bool
    ) -> Tensor | None:
        """:meth:`set_gradients` from both sides' statistics, inputs and probabilities; the gap
        only when ``gap``."""
        model, units = self.model, self.model.visible_units
        sides = [(side.v, side.stats, side.probs) for side in (data, negative)]
        set_visible_gradients(model, params, w, model.W, *sides, learn_sigma=self.learn_sigma)
        model.hbias.grad = negative.probs.mean(0) - data.probs.mean(0)
        if not gap:
            return None
        free = [
            units.self_energy(side.v, params).mean()
            - F.softplus(side.hidden_input).sum(1, dtype=torch.float64).mean()
            for side in (data, negative)
        ]
        return free[0] - free[1]

    def run_epoch(self, data: Tensor) -> dict[str, Any]:
        """One pass over ``data`` (checked by the model's unit type) in a random order; returns the
        epoch's record (seconds, the mean free-energy gap of every :data:`MONITOR_EVERY`-th minibatch,
        the learning rate)."""
        model = self.model
        t0 = time.perf_counter()
        n = data.shape[0]
        order = torch.randperm(n, generator=self.generator, device=self.generator.device)
        gap_sum = torch.zeros((), dtype=torch.float64, device=data.device)
        n_monitored = 0
        for i, start in enumerate(range(0, n, self.batch_size)):
            monitor = i % MONITOR_EVERY == 0
            gap = self._update(data.index_select(0, order[start : start + self.batch_size]), monitor)
            if monitor:
                gap_sum += gap
                n_monitored += 1
        self.epoch += 1
        check_finite(model, self.epoch)
        return {
            "epoch": self.epoch,
            "seconds": time.perf_counter() - t0,
            "free_energy_gap": float(gap_sum) / n_monitored,
            "lr": self.optimizer.param_groups[0]["lr"],
        }


def train_unit_rbm(
    x: Tensor,
    visible: UnitType | str,
    n_hidden: int,
    *,
    method: str = "cd",
    k: int = 1,
    epochs: int = 10,
    lr: float = 0.001,
    lr_decay: bool = True,
    momentum: float = 0.5,
    weight_decay: float = 0.0,
    batch_size: int = 100,
    n_chains: int = 100,
    learn_sigma: bool = True,
    init_scale: float = 0.01,
    seed: int = 0,
    init: UnitRBM | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> tuple[UnitRBM, list[dict[str, Any]]]:
    """Train a Gaussian-Bernoulli or categorical RBM on ``x`` (real values or category indices).

    Parameters
    ----------
    x
        Training data, ``(n_examples, n_visible)``.
    visible
        The visible unit type (``"gaussian"``, ``"categorical:Q"``).
    method, k
        ``"cd"`` (CD-k from the data) or ``"pcd"`` (``n_chains`` persistent chains, ``k`` sweeps
        per update).
    epochs, lr, lr_decay, momentum, weight_decay, batch_size
        SGD settings; the learning rate decays linearly to 0 over the updates when ``lr_decay``.
    learn_sigma
        Gaussian units: learn ``log sigma`` too (else sigma stays at the data's standard deviations).
    seed
        One generator for the initial couplings, the minibatch order and every Gibbs draw.
    init
        A model to train further instead of a fresh one.
    device
        Where to train (``"cpu"``, ``"cuda"``, ``"auto"``). The initial couplings are drawn on the
        CPU from ``seed``; on another device a generator there, seeded with ``seed``, drives the
        rest.

    Returns
    -------
    (model, history)
        The trained model and one record per epoch (:meth:`UnitTrainer.run_epoch`).
    """

    def fresh(x: Tensor, units: UnitType, *, generator: torch.Generator) -> UnitRBM:
        return init_unit_rbm(x, units, n_hidden, init_scale=init_scale, generator=generator)

    model, generator, data = prepared(x, visible, fresh, init=init, seed=seed, device=device)
    trainer = UnitTrainer(
        model, n_examples=data.shape[0], method=method, k=k, epochs=epochs, lr=lr, lr_decay=lr_decay,
        momentum=momentum, weight_decay=weight_decay, batch_size=batch_size, n_chains=n_chains,
        learn_sigma=learn_sigma, generator=generator,
    )  # fmt: skip
    history = [trainer.run_epoch(data) for _ in tqdm(range(int(epochs)), desc="epochs", disable=not progress)]
    return model, history


__all__ = [
    "UnitTrainer",
    "check_finite",
    "init_unit_rbm",
    "prepared",
    "set_visible_gradients",
    "sgd_with_decay",
    "train_unit_rbm",
    "visible_base",
]
