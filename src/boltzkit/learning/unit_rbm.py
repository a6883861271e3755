"""Training RBMs with real-valued or categorical visible units (Gaussian-Bernoulli and Potts RBMs)
by CD-k or PCD, for every unit type at once.

The gradient of the mean log-likelihood of an RBM with binary hidden units is
``-E_data[dF/dtheta] + E_model[dF/dtheta]`` with the free energy ``F(v) = -log p*(v)``
(:meth:`~boltzkit.models.unit_rbm.UnitRBM.free_energy`; Hinton 2002, and S2 Sec. 4.1 for the
persistent version). So the learner (:class:`UnitRBMLearner`) descends ``mean F(v_data) - mean
F(v_model)`` with the model samples held fixed (:meth:`UnitRBMLearner.free_energy_gradients`): the
unit type gives the gradients of its self-energy and of the couplings (one product), and for
Gaussian units ``log sigma`` is learned too (in the log domain, so that sigma stays positive). The
negative samples are ``k`` sweeps of the transition operator's one block sweep from the data (CD-k)
or from persistent chains (PCD; Tieleman 2008). The trainer of every model
(:class:`~boltzkit.learning.trainer.Trainer`) runs the learner: torch.optim's SGD with the learning
rate, momentum and k schedules, the weight decay (on the couplings only), checkpoints and the
history.

The visible biases start at the unit type's base-rate fit to the data (the data's means, and for
Gaussian units sigma at the data's standard deviations, floored at 5% of the largest; the log of
the smoothed frequencies for categorical units; Hinton 2010, Sec. 8, for binary units), the
couplings at ``N(0, init_scale^2)``. Gaussian-Bernoulli RBMs need small learning rates (Hinton
2010, Sec. 13.2: about 0.001 on standardised data); a diverging run stops with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

from boltzkit._numerics import bernoulli, make_generator, resolve_device
from boltzkit.errors import BoltzkitError, DataError
from boltzkit.learning.phases import refuse_tempered_cd
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers.operators import TransitionOperator, UnitOperator, make_operator
from boltzkit.state import ChainState
from boltzkit.units import Params, UnitType, unit_type

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
    if x.shape[0] == 0:
        raise DataError(
            "the training data are empty", got=f"shape {tuple(x.shape)}", expected="at least one row"
        )
    base = units.fit_base(x)
    if "sigma" in base:
        largest = float(base["sigma"].max())
        if x.shape[0] < 2:
            raise DataError(
                "Gaussian units need at least 2 samples to fit a spread: the data hold one sample",
                got=f"{x.shape[0]} rows",
                hint="pass more data (sklearn's partial_fit: a first batch of several rows).",
            )
        if not float(x.to(torch.float64).std(0, unbiased=False).max()) > 0:
            raise DataError(
                "every column of the data is constant: Gaussian units have no spread to fit",
                got=f"{x.shape[0]} rows of {x.shape[-1]} columns, standard deviation 0 in each",
                hint="Gaussian units model real values that vary; check the data (a wrong file, or one row).",
            )
        base["sigma"] = base["sigma"].clamp_min(SIGMA_FLOOR * largest)
    return x, base


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
    CD/PCD rule (:class:`UnitRBMLearner`) and the DBM's (:mod:`boltzkit.learning.unit_dbm`) alike."""
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


class UnitLearner:
    """What the learners of models with Gaussian or categorical visible units share: the method,
    ``k`` (the trainer sets it per epoch), the transition operator, the persistent chains with their
    checkpoint state, and whether sigma is learned. Subclasses write the gradient
    (``set_gradients``), start the chains (``setup``) and name their positive phase."""

    #: The methods a subclass learns by (``"sap"`` names the persistent chains, S2 Sec. 4.1.1).
    methods: tuple[str, ...] = METHODS

    def __init__(
        self, method: str, k: int, sampler: str | TransitionOperator, *, n_chains: int, learn_sigma: bool
    ) -> None:
        name = {"sap": "pcd"}.get(str(method).lower(), str(method).lower())
        if name not in self.methods:
            raise BoltzkitError(
                self.methods_text,
                got=f"method {method!r}",
                expected=" or ".join(repr(m) for m in (*self.methods, "sap")),
            )
        if isinstance(n_chains, bool) or not isinstance(n_chains, int) or n_chains < 1:
            raise BoltzkitError("n_chains must be a positive integer", got=repr(n_chains))
        self.method, self.n_chains, self.learn_sigma = name, n_chains, bool(learn_sigma)
        self.k = k
        self.operator = make_operator(sampler)
        self.chains: ChainState | None = None

    #: The error for another method.
    methods_text = "unknown learning method for these units"

    @property
    def k(self) -> int:
        return self._k

    @k.setter
    def k(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BoltzkitError("k must be a positive integer", got=repr(value), expected="an integer >= 1")
        self._k = value

    def learns_sigma(self, model: Any) -> bool:
        return model.visible_units.has_sigma and self.learn_sigma

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must hold to resume: the persistent chains."""
        out: dict[str, Any] = {"method": self.method, "k": self.k, "n_chains": self.n_chains}
        if self.chains is not None:
            out["chains"] = [x.clone() for x in self.chains.layers]
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["n_chains"]) != self.n_chains:
            raise BoltzkitError(
                "the checkpoint's persistent chains do not match this learner",
                got=f"{state['n_chains']} chains",
                expected=f"{self.n_chains} chains",
            )
        self.chains = ChainState(tuple(state["chains"])) if "chains" in state else None


class UnitRBMLearner(UnitLearner):
    """CD-k or PCD-k for an RBM with any visible unit type: the learner that
    :class:`~boltzkit.learning.trainer.Trainer` runs for a :class:`~boltzkit.models.unit_rbm.UnitRBM`,
    as :class:`~boltzkit.learning.gradients.Learner` is for the binary family. The trainer brings
    the rest (minibatches, torch.optim's SGD with the learning-rate, momentum and k schedules,
    checkpoints, the history, iterate averages).

    The negative samples are ``k`` sweeps of the transition operator from the data (CD-k: ``h^0 ~
    p(h | v^0)``, then the visible layer, then ``k - 1`` full sweeps) or from ``n_chains``
    persistent chains (PCD; Tieleman 2008), each sweep the operator's own block sweep
    (:meth:`~boltzkit.samplers.operators.UnitOperator.step`, handed the hidden inputs already
    computed): Gibbs, or flip-the-state where the unit type has a rule (Liu's Metropolized Gibbs for
    categorical units; Brügge, Fischer & Igel 2013). The gradient is that of ``mean F(data) - mean
    F(negative)`` with the samples held fixed (:meth:`free_energy_gradients`).

    Parameters
    ----------
    method
        ``"cd"``, or ``"pcd"`` (``"sap"`` names the same persistent chains, S2 Sec. 4.1.1).
    k
        Sweeps per update (the trainer sets it per epoch from a k schedule).
    sampler
        The chains' transition operator (``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``, ...).
    n_chains
        Persistent chains (PCD).
    learn_sigma
        Gaussian units: learn ``log sigma`` too (else sigma stays where it started).
    """

    def __init__(
        self,
        method: str = "cd",
        k: int = 1,
        sampler: str | TransitionOperator = "gibbs",
        *,
        n_chains: int = 100,
        learn_sigma: bool = True,
    ) -> None:
        super().__init__(method, k, sampler, n_chains=n_chains, learn_sigma=learn_sigma)
        if self.method == "cd":
            refuse_tempered_cd(self.operator)
        self._gap_sum: Tensor | None = None
        self._n_updates = self._n_monitored = 0

    def parameter_groups(self, model: UnitRBM) -> tuple[list[Tensor], list[Tensor]]:
        """The couplings (weight decay applies) and the other parameters the optimizer moves."""
        others = [model.vbias, model.hbias] + ([model.log_sigma] if self.learns_sigma(model) else [])
        return [model.W], others

    def setup(self, model: UnitRBM, train_x: Tensor, generator: torch.Generator) -> None:
        """PCD: the chains start at the visible units' own independent model (its base-rate fit
        to the data is where the visible biases started), the hidden units at 0 (the first sweep
        draws them)."""
        if self.method == "pcd" and self.chains is None:
            v = model.sample_independent(self.n_chains, generator)
            # an operator with replicas (parallel tempering) starts every replica there
            self.chains = self.operator.extend(ChainState((v, v.new_zeros(v.shape[0], model.n_hidden))))

    def _side(self, model: UnitRBM, v: Tensor, params: Params, w: Tensor) -> _Side:
        """A visible state with its statistics ``phi(v)``, its hidden inputs ``a = c + phi(v) W``
        (the unit type's own coupling, :meth:`~boltzkit.units.UnitType.couple`: a lookup of ``W``'s
        rows for categorical units) and ``p(h = 1 | v) = sigmoid(a)``, each computed once."""
        units = model.visible_units
        stats = units.stats(v, params)
        hidden_input = units.couple(v, w, params, stats=stats).add_(model.hbias)
        return _Side(v, stats, hidden_input, torch.sigmoid(hidden_input))

    def _sweep(
        self, model: UnitRBM, state: ChainState, side: _Side, generator: torch.Generator, **kw: Any
    ) -> ChainState:
        """One sweep of the operator from ``state`` whose visible layer ``side`` describes; a
        per-unit operator takes the hidden inputs already computed."""
        if isinstance(self.operator, UnitOperator):
            kw["logits"] = {1: side.hidden_input}
        return self.operator.step(model, state, generator=generator, **kw)[0]

    @torch.no_grad()
    def set_gradients(self, model: UnitRBM, v_data: Tensor, generator: torch.Generator) -> None:
        """Write the gradient estimate of a minibatch into ``model``'s ``.grad``: the negative
        samples (CD-k from the data, or the persistent chains), then :meth:`_gradients`. The
        free-energy gap of every :data:`MONITOR_EVERY`-th update of an epoch goes into its record
        (:meth:`epoch_summary`)."""
        w, params = model._w_flat(), model.visible_params()
        data = self._side(model, v_data, params, w)
        if self.method == "cd":  # h0 ~ p(h | v0), the visible layer given it, then k - 1 full sweeps
            state = ChainState((v_data, bernoulli(data.probs, generator)))
            state = self.operator.step(model, state, generator=generator, clamped=(1,))[0]
            negative = self._side(model, state.layers[0], params, w)
            for _ in range(self.k - 1):
                state = self._sweep(model, state, negative, generator)
                negative = self._side(model, state.layers[0], params, w)
        elif isinstance(self.operator, UnitOperator):
            state = self.chains
            negative = self._side(model, state.layers[0], params, w)
            for _ in range(self.k):
                state = self._sweep(model, state, negative, generator)
                negative = self._side(model, state.layers[0], params, w)
            self.chains = state
        else:  # a composition, or tempered replicas: the operator's own sweeps, then its beta = 1 chains
            state = self.chains
            for _ in range(self.k):
                state = self.operator.step(model, state, generator=generator)[0]
            self.chains = state
            negative = self._side(model, self.operator.project(state).layers[0], params, w)
        monitor = self._n_updates % MONITOR_EVERY == 0
        self._n_updates += 1
        gap = self._gradients(model, data, negative, params, w, gap=monitor)
        if gap is not None:
            self._gap_sum = gap if self._gap_sum is None else self._gap_sum + gap
            self._n_monitored += 1

    @torch.no_grad()
    def free_energy_gradients(self, model: UnitRBM, data: Tensor, negative: Tensor) -> float:
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
        w, params = model._w_flat(), model.visible_params()
        sides = (self._side(model, x.to(model.dtype), params, w) for x in (data, negative))
        return float(self._gradients(model, *sides, params, w, gap=True))

    def _gradients(
        self, model: UnitRBM, data: _Side, negative: _Side, params: Params, w: Tensor, *, gap: bool
    ) -> Tensor | None:
        """:meth:`free_energy_gradients` from both sides' statistics, inputs and probabilities;
        the gap (a 0-d float64 tensor, so that no step waits for the device) only when ``gap``."""
        units = model.visible_units
        sides = [(side.v, side.stats, side.probs) for side in (data, negative)]
        set_visible_gradients(model, params, w, model.W, *sides, learn_sigma=self.learns_sigma(model))
        model.hbias.grad = negative.probs.mean(0) - data.probs.mean(0)
        if not gap:
            return None
        free = [
            units.self_energy(side.v, params).mean()
            - F.softplus(side.hidden_input).sum(1, dtype=torch.float64).mean()
            for side in (data, negative)
        ]
        return free[0] - free[1]

    def epoch_summary(self) -> dict[str, Any]:
        """The epoch's monitor (the mean free-energy gap of data and negative samples over its
        monitored updates), then reset for the next epoch."""
        out = {"free_energy_gap": None if self._gap_sum is None else float(self._gap_sum) / self._n_monitored}
        self._gap_sum, self._n_updates, self._n_monitored = None, 0, 0
        return out

    def positive_phase(self, model: UnitRBM) -> NamedPhase:
        return NamedPhase("exact")

    def describe(self) -> str:
        chains = f", {self.n_chains} chains" if self.method == "pcd" else ""
        return f"{self.method.upper()}-{self.k} ({self.operator.name}{chains})"


class NamedPhase(NamedTuple):
    """A positive phase as the run's settings name it, with its parameters (``(key, value)``
    pairs; what :meth:`~boltzkit.learning.phases.PositivePhase.settings` gives for the binary
    family's phases)."""

    name: str
    parameters: tuple[tuple[str, Any], ...] = ()

    def settings(self) -> dict[str, Any]:
        return dict(self.parameters)


__all__ = [
    "NamedPhase",
    "UnitLearner",
    "UnitRBMLearner",
    "init_unit_rbm",
    "prepared",
    "set_visible_gradients",
    "visible_base",
]
