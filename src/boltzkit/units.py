"""Unit types: what a unit of a Boltzmann machine is (the seam of real-valued and categorical units).

A unit type owns everything that depends on the values a unit takes: its self-energy, the
statistic ``phi(x)`` through which it couples to other layers, its conditional given the input
from them (sampling, mean, log-partition), its states when they can be enumerated, its data check
and its base-rate fit. A layer of ``n`` units of one type has parameters ``params`` (a dict of
tensors: ``bias``, and ``sigma`` for Gaussian units) and meets the rest of the model through a
*field* ``f`` of shape ``(batch, n, F)``, ``F`` being the number of statistics per unit (1, or
``Q`` for categorical units). The energy of the layer's state ``x`` given the field is::

    E(x) = self_energy(x) - sum_i phi(x_i) . f_i

======================= =============================== ================== ==========================
type                    self-energy                     phi(x)             log-partition A(f)
======================= =============================== ================== ==========================
:class:`Bernoulli`      ``-b x``, x in {0, 1}           ``x``              ``softplus(b + f)``
:class:`Gaussian`       ``(x - b)^2 / (2 sigma^2)``     ``x / sigma``      ``b f / sigma + f^2 / 2
                                                                           + log(sigma sqrt(2 pi))``
:class:`Categorical`    ``-b[x]``, x in {0..Q-1}        one-hot of ``x``   ``logsumexp_q(b_q + f_q)``
======================= =============================== ================== ==========================

``A(f) = log sum_x exp(-self_energy(x) + phi(x) . f)`` (an integral for Gaussian units) is what
summing the layer out leaves (Salakhutdinov & Murray 2008, Eq. 12, for Bernoulli units; for
Gaussian units the Gaussian integral of Hinton & Salakhutdinov 2006; for categorical units a
softmax's normaliser). The Gaussian energy is that of the Gaussian-Bernoulli RBM with one ``sigma``
per unit, ``E = sum_i (v_i - b_i)^2 / (2 sigma_i^2) - sum_ij (v_i / sigma_i) W_ij h_j - c'h``.

Annealing between a base layer (``base`` params, no field) and the model's layer uses the
geometric mixture ``-(1 - beta) E_base(x) - beta E(x)``: every type's intermediate conditional is
an ordinary conditional of the same type with other parameters and field
(:meth:`UnitType.anneal`), so AIS's transitions are the operators' own.

Transition operators meet a unit type through :meth:`UnitType.update`: a draw of the layer's next
state given its field, its current state and the weight ``alpha`` of flip-the-state in the blend
``alpha T + (1 - alpha) G`` (0 is Gibbs). Discrete types also give the exact per-unit kernel
(:meth:`UnitType.kernel`), which the tests multiply out into full transition matrices. For
categorical units flip-the-state is Liu's (1996) Metropolized Gibbs sampler: propose a state
``y != x`` with probability ``p_y / (1 - p_x)`` and accept it with ``min(1, (1 - p_x) / (1 - p_y))``,
so ``T(x -> y) = p_y / max(1 - p_x, 1 - p_y)``; where the conditional is uniform the unit is drawn
by Gibbs instead, as Brügge, Fischer & Igel (2013, Definition 1, Eq. 2) do at a tie. With ``Q = 2``
this is exactly their binary flip-the-state operator. Gaussian units have no flip rule.

All log-partitions and self-energies are returned in float64, summed over the layer's units.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from boltzkit._numerics import bernoulli
from boltzkit.errors import BoltzkitError

Params = dict[str, Tensor]

_LOG_2PI = math.log(2.0 * math.pi)


def _f64(x: Tensor) -> Tensor:
    return x.to(torch.float64)


class UnitType(ABC):
    """What a unit is. Subclasses are stateless apart from their own constants (``Q``)."""

    #: The name in files and on the command line (``binary``, ``gaussian``, ``categorical:Q``).
    name: str
    #: Whether the unit's states can be enumerated.
    discrete: bool
    #: The parameter arrays of a layer besides ``bias`` (``sigma``: a scale per unit, which models
    #: hold and learn in the log domain).
    extra_params: tuple[str, ...] = ()
    #: The number of states of a unit (``None`` for a continuum): what enumeration takes.
    n_states: int | None = None

    @property
    def n_stats(self) -> int:
        """Statistics per unit (``F``): the width of ``phi(x)`` and of the field."""
        return 1

    def bias_shape(self, n_units: int) -> tuple[int, ...]:
        return (n_units,)

    def coupling_shape(self, n_units: int, n_next: int) -> tuple[int, ...]:
        """The shape of the couplings of ``n_units`` units of this type to ``n_next`` units: one
        row per statistic (``(n, Q, n_next)`` for categorical units)."""
        return (*self.bias_shape(n_units), n_next)

    @property
    def has_sigma(self) -> bool:
        """Whether a layer of this type has a scale per unit (Gaussian units)."""
        return "sigma" in self.extra_params

    # ------------------------------------------------------------------ energy and coupling
    @abstractmethod
    def self_energy(self, x: Tensor, params: Params) -> Tensor:
        """The layer's energy apart from its couplings, shape ``(batch,)``, float64."""

    @abstractmethod
    def self_energy_gradients(
        self, x: Tensor, params: Params, weights: Tensor, *, stats: Tensor | None = None
    ) -> Params:
        """The gradient of ``sum_b weights_b self_energy(x_b)`` with respect to each parameter of
        the layer (``bias``, and ``sigma`` for Gaussian units), in closed form: what a learning
        rule needs of the layer's own energy (:class:`~boltzkit.learning.unit_rbm.UnitRBMLearner`).
        ``stats``: ``phi(x)`` when already computed."""

    def energy_difference(self, a: Params, b: Params) -> Callable[[Tensor], Tensor]:
        """``x -> self_energy(x, a) - self_energy(x, b)`` (float64, ``(batch,)``), with what does not
        depend on ``x`` worked out once: the part of an AIS increment that the kept visible layer
        contributes between a base and a model."""
        return lambda x: self.self_energy(x, a) - self.self_energy(x, b)

    @abstractmethod
    def stats(self, x: Tensor, params: Params) -> Tensor:
        """``phi(x)``, shape ``(batch, n, F)``, in ``x``'s float dtype."""

    @abstractmethod
    def log_partition(self, field: Tensor, params: Params) -> Tensor:
        """``A(f)`` summed over the layer, shape ``(batch,)``, float64 (``field``: ``(batch, n, F)``)."""

    def couple(self, x: Tensor, weights: Tensor, params: Params, *, stats: Tensor | None = None) -> Tensor:
        """``phi(x) W``: the input the layer's state ``x`` gives the next layer through ``weights``
        (shape ``(n F, n_next)``), shape ``(batch, n_next)`` (``stats``: ``phi(x)`` when already
        computed)."""
        stats = self.stats(x, params) if stats is None else stats
        return stats.reshape(stats.shape[0], -1) @ weights

    def through_stats_gradients(self, weights: Tensor, grad_w: Tensor, params: Params) -> Params:
        """The gradient of ``sum_bj g_bj [phi(x_b) W]_j`` (``g``: ``(batch, n_next)``) with respect
        to the parameters ``phi`` depends on, from the weights' gradient ``grad_w = phi(x)' g`` (one
        product, shape of ``weights``): what a learning rule whose next layer is summed out needs
        besides ``grad_w`` (:func:`~boltzkit.learning.unit_rbm.set_visible_gradients`); none for
        most types."""
        return {}

    # ------------------------------------------------------------------ conditionals
    @abstractmethod
    def sample(self, field: Tensor, params: Params, generator: torch.Generator) -> Tensor:
        """A draw from the conditional given the field, ``exp(-self_energy(x) + phi(x) . f)``."""

    @abstractmethod
    def anneal(
        self, field: Tensor, params: Params, base: Params | None, beta: float
    ) -> tuple[Tensor, Params]:
        """The conditional ``exp(-(1 - beta) E_base(x) - beta (self_energy(x) - phi(x) . f))`` of the
        geometric path from a base of independent units (``base``) to the layer, written as an
        ordinary conditional of the same type: its field and parameters. With ``base`` ``None`` only
        the coupling is tempered (the field ``beta f``, the layer's own parameters), as a model's
        tempered distribution is; ``beta == 1`` is the layer's own conditional."""

    @abstractmethod
    def mean(self, field: Tensor, params: Params) -> Tensor:
        """``E[x | f]``, shape ``(batch, n)``."""

    def log_prob(self, x: Tensor, field: Tensor, params: Params) -> Tensor:
        """``log p(x | f) = -self_energy(x) + phi(x) . f - A(f)`` summed over the layer, float64,
        shape ``(batch,)`` (a log-density for Gaussian units): the directed layer of a belief
        network, or a conditional's score."""
        coupling = (_f64(self.stats(x, params)) * _f64(field)).sum((-2, -1))
        return -self.self_energy(x, params) + coupling - self.log_partition(field, params)

    @abstractmethod
    def entropy(self, field: Tensor, params: Params) -> Tensor:
        """The entropy of ``p(x | f)`` summed over the layer, float64, shape ``(batch,)`` (the
        differential entropy for Gaussian units): the entropy term of a factorised (mean-field)
        distribution of this type, S2 Eq. 7."""

    # ------------------------------------------------------------------ transition kernels
    #: Whether the type has a flip-the-state rule (a move that avoids the current state).
    has_flip: bool = False

    def kernel(self, field: Tensor, params: Params, current: Tensor, alpha: float) -> Tensor:
        """The exact per-unit kernel of ``alpha T + (1 - alpha) G``: the probability of each next
        state, shape ``(batch, n, n_states)`` (discrete types only)."""
        raise BoltzkitError(f"{self.name} units have no finite transition matrix")

    def update(
        self, field: Tensor, params: Params, current: Tensor, alpha: float, generator: torch.Generator
    ) -> Tensor:
        """The layer's next state under ``alpha T + (1 - alpha) G``, given the field and the current
        state (``alpha = 0``: a Gibbs draw, which ignores ``current``)."""
        if alpha == 0.0:
            return self.sample(field, params, generator)
        if not self.has_flip:
            raise BoltzkitError(
                f"flip-the-state has no rule for {self.name} units",
                got=f"flip weight {alpha:g}",
                hint="sample them by Gibbs (the sampler gibbs), or a blend with visible weight 0 "
                "(blend:0,ALPHA_HIDDEN).",
            )
        return _draw(self.kernel(field, params, current, alpha), generator).to(field.dtype)

    # ------------------------------------------------------------------ data and base rates
    @abstractmethod
    def check_data(self, x: Tensor, n_units: int, what: str = "data") -> Tensor:
        """``x`` as a float tensor of shape ``(batch, n_units)``, or a clear error."""

    @abstractmethod
    def fit_base(self, x: Tensor) -> Params:
        """The independent-units base model that fits ``x`` (the base rates of AIS)."""

    def base_of(self, params: Params) -> Params:
        """A base without data: the layer's own parameters with no couplings."""
        return {k: v.detach() for k, v in params.items()}

    def states(self, n_units: int, *, dtype: torch.dtype, device: Any = None) -> Tensor:
        """Every state of ``n_units`` units, shape ``(n_states, n_units)`` (discrete types)."""
        raise BoltzkitError(f"{self.name} units cannot be enumerated")

    def describe(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.name == getattr(other, "name", None)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _draw(probs: Tensor, generator: torch.Generator) -> Tensor:
    """One draw per row of ``probs`` (``(..., S)``, rows summing to 1) by inverting the cumulative
    distribution with one uniform each: the index of the first cumulative probability above it
    (rounding cannot step past the last state)."""
    u = torch.rand((*probs.shape[:-1], 1), generator=generator, device=probs.device, dtype=probs.dtype)
    return (probs.cumsum(-1) <= u).sum(-1).clamp_max(probs.shape[-1] - 1)


def _mixed_bias(field: Tensor, params: Params, base: Params | None, beta: float) -> tuple[Tensor, Params]:
    """The annealed conditional of a type whose self-energy is linear in its bias: the field
    ``beta f`` and the bias ``beta b + (1 - beta) b_0`` (the own bias without a base)."""
    if beta == 1.0:
        return field, params
    if base is None:
        return beta * field, params
    return beta * field, {"bias": beta * params["bias"] + (1.0 - beta) * base["bias"]}


def _needs_2d(x: Tensor, n_units: int, what: str, expected: str) -> Tensor:
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2 or x.shape[1] != n_units:
        raise BoltzkitError(
            f"{what} does not fit the model",
            got=f"shape {tuple(x.shape)}",
            expected=f"(n_examples, {n_units}) {expected}",
        )
    return x


class Bernoulli(UnitType):
    """Binary units in {0, 1}: ``p(x = 1 | f) = sigmoid(b + f)``."""

    name = "binary"
    discrete = True
    n_states = 2

    def self_energy(self, x: Tensor, params: Params) -> Tensor:
        return -(_f64(x) @ _f64(params["bias"]))

    def stats(self, x: Tensor, params: Params) -> Tensor:
        return x.unsqueeze(-1)

    def self_energy_gradients(self, x, params, weights, *, stats=None) -> Params:  # noqa: ANN001
        return {"bias": -(weights.to(x.dtype) @ x)}

    def log_partition(self, field: Tensor, params: Params) -> Tensor:
        return F.softplus(_f64(field[..., 0]) + _f64(params["bias"])).sum(-1)

    def sample(self, field: Tensor, params: Params, generator: torch.Generator) -> Tensor:
        p = torch.sigmoid(field[..., 0] + params["bias"])
        return bernoulli(p, generator)

    def anneal(
        self, field: Tensor, params: Params, base: Params | None, beta: float
    ) -> tuple[Tensor, Params]:
        """``beta f`` and the bias ``beta b + (1 - beta) b_0``."""
        return _mixed_bias(field, params, base, beta)

    def mean(self, field: Tensor, params: Params) -> Tensor:
        return torch.sigmoid(field[..., 0] + params["bias"])

    def entropy(self, field: Tensor, params: Params) -> Tensor:
        """``softplus(a) - sigmoid(a) a`` per unit with ``a = b + f``: the binary entropy, stable."""
        a = _f64(field[..., 0]) + _f64(params["bias"])
        return (F.softplus(a) - torch.sigmoid(a) * a).sum(-1)

    def check_data(self, x: Tensor, n_units: int, what: str = "data") -> Tensor:
        x = _needs_2d(torch.as_tensor(x), n_units, what, "of 0s and 1s")
        if not bool(((x == 0) | (x == 1)).all()):
            raise BoltzkitError(f"{what} is not binary", expected="values in {0, 1}")
        return x.to(torch.get_default_dtype())

    def fit_base(self, x: Tensor) -> Params:
        p = (_f64(x).sum(0) + 0.5) / (x.shape[0] + 1.0)  # S1 Eq. 18's smoothed base rates
        return {"bias": torch.log(p) - torch.log1p(-p)}

    def states(self, n_units: int, *, dtype: torch.dtype, device: Any = None) -> Tensor:
        codes = torch.arange(2**n_units, device=device).unsqueeze(1)
        return ((codes >> torch.arange(n_units, device=device)) & 1).to(dtype)


class Gaussian(UnitType):
    """Real-valued units with one ``sigma`` per unit: ``x | f ~ N(b + sigma f, sigma^2)``."""

    name = "gaussian"
    discrete = False
    extra_params = ("sigma",)

    def self_energy(self, x: Tensor, params: Params) -> Tensor:
        z = (_f64(x) - _f64(params["bias"])) / _f64(params["sigma"])
        return 0.5 * (z * z).sum(-1)

    def energy_difference(self, a: Params, b: Params) -> Callable[[Tensor], Tensor]:
        """``sum_i x_i^2 alpha_i - x_i beta_i + const``: ``alpha = (1/sigma_a^2 - 1/sigma_b^2) / 2``,
        ``beta = b_a/sigma_a^2 - b_b/sigma_b^2``, two products a call."""
        (ba, sa), (bb, sb) = ((_f64(p["bias"]).detach(), _f64(p["sigma"]).detach()) for p in (a, b))
        alpha = 0.5 * (sa.pow(-2) - sb.pow(-2))
        beta = ba / sa**2 - bb / sb**2
        const = float(0.5 * ((ba / sa) ** 2 - (bb / sb) ** 2).sum())

        def difference(x: Tensor) -> Tensor:
            x = _f64(x)
            return (x * x) @ alpha - x @ beta + const

        return difference

    def stats(self, x: Tensor, params: Params) -> Tensor:
        return (x / params["sigma"]).unsqueeze(-1)

    def self_energy_gradients(self, x, params, weights, *, stats=None) -> Params:  # noqa: ANN001
        """``-sum_b w_b z_b / sigma`` for the bias and ``-sum_b w_b z_b^2 / sigma`` for sigma, with
        ``z = (x - b) / sigma``."""
        sigma = params["sigma"]
        z = (x - params["bias"]) / sigma if stats is None else stats[..., 0] - params["bias"] / sigma
        w = weights.to(z.dtype)
        return {"bias": -(w @ z) / sigma, "sigma": -(w @ (z * z)) / sigma}

    def through_stats_gradients(self, weights: Tensor, grad_w: Tensor, params: Params) -> Params:
        """``phi(x) = x / sigma`` depends on sigma: ``d/dsigma_i sum_bj g_bj (x_bi / sigma_i) W_ij =
        -sum_j W_ij G_ij / sigma_i``, from the weights' gradient ``G`` by one row-wise dot product,
        not a second product."""
        return {"sigma": -torch.linalg.vecdot(weights, grad_w) / params["sigma"]}

    def log_partition(self, field: Tensor, params: Params) -> Tensor:
        f = _f64(field[..., 0])
        b, s = _f64(params["bias"]), _f64(params["sigma"])
        return (b * f / s + 0.5 * f * f + torch.log(s) + 0.5 * _LOG_2PI).sum(-1)

    def sample(self, field: Tensor, params: Params, generator: torch.Generator) -> Tensor:
        """``b + sigma (f + noise)``: two passes besides the noise."""
        noise = torch.randn(field.shape[:-1], generator=generator, device=field.device, dtype=field.dtype)
        return torch.addcmul(params["bias"], params["sigma"], noise.add_(field[..., 0]))

    def anneal(
        self, field: Tensor, params: Params, base: Params | None, beta: float
    ) -> tuple[Tensor, Params]:
        """The geometric mixture's precision and linear coefficient per unit, ``1 / sigma'^2 =
        (1 - beta) / sigma_0^2 + beta / sigma^2`` and ``b' / sigma'^2 = (1 - beta) b_0 / sigma_0^2 +
        beta b / sigma^2``, with the field ``beta f sigma' / sigma`` (so that ``sigma' f'`` is the
        mixture's ``beta sigma'^2 f / sigma``)."""
        if base is None or beta == 1.0:
            return (field if beta == 1.0 else beta * field), params
        b, s, b0, s0 = params["bias"], params["sigma"], base["bias"], base["sigma"]
        precision = (1.0 - beta) / s0**2 + beta / s**2
        sigma = precision.rsqrt()
        bias = ((1.0 - beta) * b0 / s0**2 + beta * b / s**2) / precision
        return field * (beta * sigma / s).unsqueeze(-1), {"bias": bias, "sigma": sigma}

    def mean(self, field: Tensor, params: Params) -> Tensor:
        return params["bias"] + params["sigma"] * field[..., 0]

    def entropy(self, field: Tensor, params: Params) -> Tensor:
        """``log sigma + log(2 pi e) / 2`` per unit, whatever the field (it only moves the mean)."""
        per_layer = (torch.log(_f64(params["sigma"])) + 0.5 * (_LOG_2PI + 1.0)).sum()
        return per_layer.expand(field.shape[0]).clone()

    def check_data(self, x: Tensor, n_units: int, what: str = "data") -> Tensor:
        x = _needs_2d(torch.as_tensor(x), n_units, what, "of real numbers")
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        if not bool(torch.isfinite(x).all()):
            bad = (~torch.isfinite(x)).nonzero()[0].tolist()
            raise BoltzkitError(
                f"{what} holds a value that is not finite",
                got=f"{x[bad[0], bad[1]].item()} at row {bad[0]}, column {bad[1]}",
                expected="finite real numbers",
            )
        return x

    def fit_base(self, x: Tensor) -> Params:
        x = _f64(x)
        std = (
            x.std(0, unbiased=False)
            if x.shape[0] > 1
            else torch.ones(x.shape[1], dtype=x.dtype, device=x.device)
        )
        return {"bias": x.mean(0), "sigma": std.clamp_min(1e-3)}


class Categorical(UnitType):
    """Units with ``Q`` states 0..Q-1 (Potts units): ``p(x = q | f) = softmax_q(b_q + f_q)``."""

    discrete = True

    def __init__(self, n_states: int) -> None:
        n_states = int(n_states)
        if n_states < 2:
            raise BoltzkitError("a categorical unit needs at least 2 states", got=n_states)
        self.n_states = n_states
        self.name = f"categorical:{n_states}"

    @property
    def n_stats(self) -> int:
        return self.n_states

    def bias_shape(self, n_units: int) -> tuple[int, ...]:
        return (n_units, self.n_states)

    def _index(self, x: Tensor) -> Tensor:
        return x.round().long() if x.is_floating_point() else x.long()

    def self_energy(self, x: Tensor, params: Params) -> Tensor:
        b = _f64(params["bias"])  # (n, Q)
        idx = self._index(x)  # (batch, n)
        return -b.gather(1, idx.t()).t().sum(-1)

    def energy_difference(self, a: Params, b: Params) -> Callable[[Tensor], Tensor]:
        """``-sum_i (a_bias - b_bias)[i, x_i]``: one gather a call."""
        table = (_f64(a["bias"]) - _f64(b["bias"])).detach()
        return lambda x: self.self_energy(x, {"bias": table})

    def self_energy_gradients(self, x, params, weights, *, stats=None) -> Params:  # noqa: ANN001
        """``-sum_b w_b onehot(x_b)`` for the bias table."""
        onehot = self.stats(x, params) if stats is None else stats
        return {
            "bias": -(weights.to(onehot.dtype) @ onehot.reshape(onehot.shape[0], -1)).reshape(
                onehot.shape[1:]
            )
        }

    def stats(self, x: Tensor, params: Params) -> Tensor:
        dtype = x.dtype if x.is_floating_point() else params["bias"].dtype
        out = torch.zeros((*x.shape, self.n_states), dtype=dtype, device=x.device)
        return out.scatter_(-1, self._index(x).unsqueeze(-1), 1.0)

    def couple(self, x: Tensor, weights: Tensor, params: Params, *, stats: Tensor | None = None) -> Tensor:
        """``onehot(x) W`` as a lookup: the sum of ``W``'s rows ``(i, x_i)`` (``torch``'s
        ``embedding_bag``), without forming the one-hot vectors or their ``n Q``-wide product."""
        idx = self._index(x)
        if idx.shape[-1] * self.n_states != weights.shape[0]:  # a lookup would not notice
            raise BoltzkitError(
                "the states do not fit the couplings",
                got=f"{idx.shape[-1]} units of {self.n_states} states",
                expected=f"{weights.shape[0] // self.n_states} units",
            )
        rows = idx + torch.arange(idx.shape[1], device=idx.device) * self.n_states
        return F.embedding_bag(rows, weights, mode="sum")

    def log_partition(self, field: Tensor, params: Params) -> Tensor:
        return torch.logsumexp(_f64(field) + _f64(params["bias"]), -1).sum(-1)

    def sample(self, field: Tensor, params: Params, generator: torch.Generator) -> Tensor:
        return _draw(torch.softmax(field + params["bias"], -1), generator).to(field.dtype)

    def anneal(
        self, field: Tensor, params: Params, base: Params | None, beta: float
    ) -> tuple[Tensor, Params]:
        """``beta f`` and the bias table ``beta b + (1 - beta) b_0``."""
        return _mixed_bias(field, params, base, beta)

    def mean(self, field: Tensor, params: Params) -> Tensor:
        """The expected one-hot vector per unit, shape ``(batch, n, Q)``."""
        return torch.softmax(field + params["bias"], -1)

    def entropy(self, field: Tensor, params: Params) -> Tensor:
        """``logsumexp(l) - softmax(l) . l`` per unit with logits ``l = b + f``."""
        logits = _f64(field) + _f64(params["bias"])
        return (torch.logsumexp(logits, -1) - (torch.softmax(logits, -1) * logits).sum(-1)).sum(-1)

    has_flip = True

    def kernel(self, field: Tensor, params: Params, current: Tensor, alpha: float) -> Tensor:
        """``alpha MG + (1 - alpha) G`` per unit, shape ``(batch, n, Q)``: Liu's (1996) Metropolized
        Gibbs ``MG(x -> y) = p_y / max(1 - p_x, 1 - p_y)`` for ``y != x`` (the rest stays at ``x``),
        replaced by Gibbs where the conditional is uniform (Brügge et al. 2013, Eq. 2's tie rule).
        Computed in float64, so that the rows sum to 1 to rounding."""
        logits = _f64(field) + _f64(params["bias"])
        gibbs = torch.softmax(logits, -1)
        if alpha == 0.0:
            return gibbs
        idx = self._index(current).unsqueeze(-1)
        p_x = gibbs.gather(-1, idx)
        moves = gibbs / torch.maximum(1.0 - p_x, 1.0 - gibbs)
        moves = moves.scatter(-1, idx, 0.0)
        flip = moves.scatter(-1, idx, (1.0 - moves.sum(-1, keepdim=True)).clamp_min(0.0))
        uniform = (logits == logits[..., :1]).all(-1, keepdim=True)
        flip = torch.where(uniform, gibbs, flip)
        return flip if alpha == 1.0 else alpha * flip + (1.0 - alpha) * gibbs

    def check_data(self, x: Tensor, n_units: int, what: str = "data") -> Tensor:
        x = _needs_2d(torch.as_tensor(x), n_units, what, f"of category indices 0..{self.n_states - 1}")
        checks = [("a category out of range", (x < 0) | (x >= self.n_states))]
        if x.is_floating_point():  # checked first: NaN is neither in nor out of range
            checks.insert(0, ("a value that is not a category index", ~torch.isfinite(x) | (x != x.round())))
        for problem, bad in checks:
            if bool(bad.any()):
                row, col = bad.nonzero()[0].tolist()
                raise BoltzkitError(
                    f"{what} holds {problem}",
                    got=f"{x[row, col].item()} at row {row}, column {col}",
                    expected=f"integers 0..{self.n_states - 1} (Q = {self.n_states})",
                )
        return x.to(torch.get_default_dtype())

    def fit_base(self, x: Tensor) -> Params:
        counts = F.one_hot(self._index(x), self.n_states).to(torch.float64).sum(0)  # (n, Q)
        freqs = (counts + 1.0 / self.n_states) / (x.shape[0] + 1.0)  # smoothed frequencies
        return {"bias": torch.log(freqs)}

    def states(self, n_units: int, *, dtype: torch.dtype, device: Any = None) -> Tensor:
        q = self.n_states
        codes = torch.arange(q**n_units, device=device).unsqueeze(1)
        powers = q ** torch.arange(n_units, device=device)
        return ((codes // powers) % q).to(dtype)


#: The unit types by name: a name ``NAME`` calls its factory with no argument, ``NAME:ARG`` with the
#: integer ``ARG`` (``categorical:Q``). A new unit type is one class registered here, plus its file
#: kinds (:mod:`boltzkit.io.unit_kinds`).
UNIT_TYPES: dict[str, Callable[..., UnitType]] = {
    "binary": Bernoulli,
    "bernoulli": Bernoulli,
    "gaussian": Gaussian,
    "categorical": Categorical,
}


def unit_type(spec: str | UnitType) -> UnitType:
    """A unit type from its name: ``binary``, ``gaussian`` or ``categorical:Q``."""
    if isinstance(spec, UnitType):
        return spec
    name, colon, arg = str(spec).strip().lower().partition(":")
    factory = UNIT_TYPES.get(name.strip())
    if factory is not None and (not colon or arg.strip().isdigit()):
        try:
            return factory(int(arg)) if colon else factory()
        except TypeError:  # an argument the type does not take, or one it needs
            pass
    raise BoltzkitError(
        "unknown unit type", got=spec, expected="binary, gaussian or categorical:Q (Q >= 2 states)"
    )


__all__ = ["UNIT_TYPES", "Bernoulli", "Categorical", "Gaussian", "Params", "UnitType", "unit_type"]
