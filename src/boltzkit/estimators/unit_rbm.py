"""Exact ``log Z``, exact samples and the AIS path of RBMs with real-valued or categorical visible
units (:class:`~boltzkit.models.unit_rbm.UnitRBM`).

Exact ``log Z`` enumerates the discrete layer with the fewest states and sums or integrates the
other out: the ``2^H`` hidden states with the visible units' log-partition of the field ``W h``
(:meth:`~boltzkit.models.unit_rbm.UnitRBM.log_marginal_hidden`; a Gaussian integral for Gaussian
units), or, for categorical units with ``Q^n_visible < 2^H``, the visible states with the hidden
units summed out (``log p*(v)``). Exact samples draw ``h`` from its enumerated marginal, then
``v | h``.

AIS anneals from a base model of independent visible units (the unit type's base-rate fit to data:
the data's means and variances for Gaussian units, smoothed frequencies for categorical units; or
the model's own visible parameters) with uniform hidden units, along S&M 2008's geometric path
(Sec. 3.3, Eqs. 16-17) with the hidden units summed out::

    log p*_beta(v) = -(1 - beta) E_base(v) - beta self_energy(v) + sum_j softplus(beta (c_j + phi(v) . W_j))

and transitions that leave ``p_beta`` invariant: the operators' own block sweep (Gibbs, or
flip-the-state where the unit type has a rule) on :class:`AnnealedModel`, ``h`` given ``v`` and
then ``v`` given ``h`` from the unit type's annealed conditional. ``log Z_0`` is the base's log-partition plus
``H log 2``. The generic drivers (:func:`~boltzkit.estimators.ais.ais`, reverse AIS, the
sandwich, SIS) run on this path unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators.exact import ExactMethod, register_exact
from boltzkit.estimators.paths import AnnealingPath, refuse_replicas
from boltzkit.estimators.result import LogZResult
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.resources import Forecast
from boltzkit.samplers.operators import TransitionOperator, UnitOperator
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, Params

#: States per chunk of the enumeration.
CHUNK = 1 << 15


def enumeration_side(model: UnitRBM) -> tuple[str, int]:
    """Which layer exact computations enumerate, and its number of states: the hidden layer
    (``2^H``), or the visible layer of categorical units when it has fewer states."""
    hidden_states = 2**model.n_hidden
    units = model.visible_units
    if units.n_states is not None:
        visible_states = units.n_states**model.n_visible
        if visible_states < hidden_states:
            return "visible", visible_states
    return "hidden", hidden_states


def _check_bits(model: UnitRBM, max_bits: int, what: str) -> tuple[str, int]:
    side, n_states = enumeration_side(model)
    if n_states > 2 ** int(max_bits):
        raise IntractableError(
            f"{what} would enumerate {n_states:.3g} states of the {side} layer",
            expected=f"at most 2^{int(max_bits)} states",
            hint="estimate log Z instead (--method ais), or raise --max-bits.",
        )
    return side, n_states


def _chunks(model: UnitRBM, side: str, n_states: int) -> Iterator[Tensor]:
    """Every state of the enumerated layer, in chunks (in the model's dtype)."""
    n_units = model.n_hidden if side == "hidden" else model.n_visible
    units = Bernoulli() if side == "hidden" else model.visible_units
    base = units.n_states
    codes_per_unit = base ** torch.arange(n_units, device=model.device)
    for start in range(0, n_states, CHUNK):
        codes = torch.arange(start, min(start + CHUNK, n_states), device=model.device).unsqueeze(1)
        yield ((codes // codes_per_unit) % base).to(model.dtype)


def _log_f(model: UnitRBM, side: str, states: Tensor) -> Tensor:
    return model.log_marginal_hidden(states) if side == "hidden" else model.log_unnormalized(states)


@torch.no_grad()
def exact_log_z_units(model: UnitRBM, *, max_bits: int = 24) -> LogZResult:
    """Exact ``log Z`` of a Gaussian-Bernoulli or categorical RBM (see the module docstring)."""
    t0 = time.perf_counter()
    side, n_states = _check_bits(model, max_bits, "exact log Z")
    forecast = Forecast(n_states, what=f"exact log Z over {n_states:,} states", hint="use --method ais.")
    acc = torch.full((), -math.inf, dtype=torch.float64, device=model.device)
    done = 0
    for states in _chunks(model, side, n_states):
        acc = torch.logaddexp(acc, torch.logsumexp(_log_f(model, side, states), 0))
        done += states.shape[0]
        forecast.update(done)
    return LogZResult.exact(
        float(acc),
        seconds=time.perf_counter() - t0,
        enumerated_layer="hidden" if side == "hidden" else f"visible ({model.visible_units.name})",
        n_states=n_states,
        device=str(model.device),
    )


@torch.no_grad()
def exact_sample_units(
    model: UnitRBM, n_samples: int, generator: torch.Generator, *, max_bits: int = 20
) -> ChainState:
    """Exact samples ``(v, h)``: ``h`` from its enumerated marginal, then ``v | h``."""
    if model.n_hidden > int(max_bits):
        raise IntractableError(
            "exact samples would enumerate the hidden layer",
            got=f"2^{model.n_hidden} states",
            expected=f"at most 2^{int(max_bits)}",
        )
    n_states = 2**model.n_hidden
    # the marginal of h chunk by chunk: the visible field of every hidden state at once would hold
    # 2^n_hidden x n_visible x F numbers
    log_w = torch.cat([model.log_marginal_hidden(h) for h in _chunks(model, "hidden", n_states)])
    idx = torch.multinomial(torch.softmax(log_w, 0), int(n_samples), replacement=True, generator=generator)
    codes = idx.to(model.device).unsqueeze(1)
    h = ((codes >> torch.arange(model.n_hidden, device=model.device)) & 1).to(model.dtype)
    return ChainState.of(model.sample_visible(h, generator), h)


def _softplus_increment(a: Tensor, beta_from: float, beta_to: float) -> tuple[Tensor, Tensor]:
    """``sum_j softplus(beta_to a_j) - softplus(beta_from a_j)`` per row, float64, and
    ``sigmoid(beta_to a)`` (``p(h = 1 | v)`` at ``beta_to``, which the step's draw of ``h`` takes).

    Where every ``|(beta_to - beta_from) a_j| <= 1`` (any schedule of more than a few steps) each
    term is ``-log1p(sigmoid(beta_to a_j) expm1(-(beta_to - beta_from) a_j))``: a well-conditioned
    function of the step itself (the argument of ``log1p`` stays above ``e^-1 - 1``), accurate to
    the input's relative precision without the cancellation of two large softplus values, and
    summed in float64. Otherwise both softplus values are taken in float64."""
    step = beta_to - beta_from
    probs = torch.sigmoid(a if beta_to == 1.0 else beta_to * a)
    low, high = torch.aminmax(a)
    if abs(step) * float(torch.maximum(-low, high)) <= 1.0:  # one read of the device
        terms = torch.expm1(a * -step).mul_(probs).log1p_()
        return terms.sum(-1, dtype=torch.float64).neg_(), probs
    a = a.to(torch.float64)
    return (F.softplus(beta_to * a) - F.softplus(beta_from * a)).sum(-1), probs


def _uniform_hidden(model: UnitRBM, n: int, generator: torch.Generator) -> Tensor:
    u = torch.rand((n, model.n_hidden), generator=generator, device=generator.device)
    return (u < 0.5).to(model.dtype).to(model.device)


class AnnealedModel:
    """A model with Gaussian or categorical visible units as the transition operators see the
    intermediate distributions of its AIS path, ``exp(-(1 - beta) E_base(v) - beta E(v, h))``: the
    visible units' conditional is their unit type's annealed one towards the base
    (:meth:`~boltzkit.units.UnitType.anneal`), everything else the model's own at ``beta``. So AIS
    moves by the operators' one block sweep, flip-the-state included where the unit type has a
    rule (:meth:`~boltzkit.samplers.operators.UnitOperator.step`)."""

    def __init__(self, model: UnitRBM | Any, base: Params) -> None:
        self.model, self.base = model, base

    def __getattr__(self, name: str) -> Any:
        """Everything but the visible field is the model's (blocks, layer units, the hidden
        layers' logits at ``beta``, sizes, device)."""
        if name in ("model", "base"):  # not yet set (copying): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def block_field(
        self, state: ChainState, block: Block, beta: float | Tensor = 1.0
    ) -> tuple[Tensor, Params]:
        field, params = self.model.block_field(state, block, 1.0)
        return self.model.layer_units(block.layer).anneal(field, params, self.base, float(beta))


class UnitBaseRatePath(AnnealingPath):
    """The geometric path from a base of independent visible units (uniform hidden units) to a
    :class:`~boltzkit.models.unit_rbm.UnitRBM`, with the hidden units summed out."""

    is_ratio = False
    exact_start = True
    offset = 0.0
    default_betas = "paper"

    def __init__(self, model: UnitRBM, base: Params, base_name: str, *, max_bits: int = 20) -> None:
        self.model = model
        kw = {"dtype": model.dtype, "device": model.device}
        self.base = {k: v.detach().to(**kw) for k, v in base.items()}
        self.base_name = base_name
        self.max_bits = int(max_bits)
        self.device, self.dtype, self.n_visible = model.device, model.dtype, model.n_visible
        units = model.visible_units
        # E_model(v) - E_base(v) of the visible layer, the kept part of every AIS increment
        self._energy_gap = units.energy_difference(model.visible_params(), self.base)
        zero_field = torch.zeros((1, model.n_visible, units.n_stats), **kw)
        # the base's log-partition and n_hidden uniform binary units (all hidden layers of a DBM)
        self.log_z_a = float(units.log_partition(zero_field, self.base)[0]) + model.n_hidden * math.log(2.0)

    def log_f(self, state: ChainState, beta: float) -> Tensor:
        model, units = self.model, self.model.visible_units
        v = state.visible
        out = -beta * units.self_energy(v, model.visible_params())
        if beta != 1.0:
            out = out - (1.0 - beta) * units.self_energy(v, self.base)
        return out + F.softplus(beta * model.hidden_input(v).to(torch.float64)).sum(-1)

    @property
    def summed_layers(self) -> tuple[int, ...]:
        """The layers the path sums out: their values carried from one step to the next are no
        chain state of the next target, so a transition's first sweep draws them fresh."""
        return (1,)

    @torch.no_grad()
    def step(self, state, beta_from, beta_to, operator, generator, *, sweeps=1, move=True):  # noqa: ANN001
        """Fused AIS step: the hidden input of ``v`` serves both ends of the log-weight increment
        ``-(b' - b)(E_model(v) - E_base(v)) + sum_j softplus(b' a_j) - softplus(b a_j)`` and the
        first draw of ``h`` at ``b'``, so a step costs one product each way (S1 Eq. 15's
        increment with the hidden units summed out)."""
        beta_from, beta_to = float(beta_from), float(beta_to)
        v = state.visible
        gap, inp = self._energy_gap(v), self.model.hidden_input(v)
        increment, _ = _softplus_increment(inp, beta_from, beta_to)
        delta = increment.sub_(gap, alpha=beta_to - beta_from)
        if not move:
            return delta, state
        logits = {1: inp if beta_to == 1.0 else beta_to * inp}
        return delta, self.transition(state, beta_to, operator, generator, sweeps=sweeps, logits=logits)

    def transition(
        self,
        state: ChainState,
        beta: float,
        operator: TransitionOperator,
        generator: torch.Generator,
        *,
        sweeps: int = 1,
        logits: dict[int, Tensor] | None = None,
    ) -> ChainState:
        """``sweeps`` sweeps of ``operator`` at ``beta`` on the path's intermediate model
        (:class:`AnnealedModel`: the visible units' conditional annealed towards the base), the
        summed-out layers drawn fresh in the first; ``logits``: their logits at ``beta`` for that
        sweep, when already known (a per-unit operator takes them instead of asking the model)."""
        refuse_replicas(operator)
        target = AnnealedModel(self.model, self.base)
        for sweep in range(int(sweeps)):
            hooks = {"logits": logits} if sweep == 0 and logits and isinstance(operator, UnitOperator) else {}
            state, _ = operator.step(
                target, state, beta=beta, generator=generator,
                fresh_layers=self.summed_layers if sweep == 0 else (), **hooks,
            )  # fmt: skip
        return state

    def sample_start(self, n_chains: int, generator: torch.Generator) -> ChainState:
        v = self.model.sample_independent(n_chains, generator, base=self.base)
        return ChainState.of(v, _uniform_hidden(self.model, n_chains, generator))

    def sample_end(self, n_chains: int, generator: torch.Generator) -> ChainState | None:
        if self.model.n_hidden > self.max_bits:
            return None
        return exact_sample_units(self.model, n_chains, generator, max_bits=self.max_bits)

    @property
    def end_is_exact(self) -> bool:
        return self.model.n_hidden <= self.max_bits

    def from_visible(self, v: Tensor, generator: torch.Generator) -> ChainState:
        v = self.model.check_data(v, "start data")
        return ChainState.of(v, _uniform_hidden(self.model, v.shape[0], generator))


#: The most a Gaussian base-rate fit may stray from the model's visible units (its mean's distance
#: plus its spread, over the model's reach ``sigma (1 + sum_j |W_ij|)``), unit by unit: beyond it
#: the data are not the model's (another scale, a stray value) and AIS from them gives nonsense.
BASE_SCALE_LIMIT = 1e6


def _check_base_scale(model: UnitRBM, base: Params) -> None:
    """Refuse a Gaussian base-rate fit far outside the model's own scale (:data:`BASE_SCALE_LIMIT`)."""
    if "sigma" not in base:
        return
    own = model.visible_params()
    w = model.w0_flat() if hasattr(model, "w0_flat") else model._w_flat()
    b, s = own["bias"].detach().double(), own["sigma"].detach().double()
    reach = s * (1.0 + w.detach().double().abs().sum(1))
    mu, sd = base["bias"].double(), base["sigma"].double()
    ratio = ((mu - b).abs() + sd) / reach
    i = int(ratio.argmax())
    if not float(ratio[i]) <= BASE_SCALE_LIMIT:
        raise BoltzkitError(
            "the base-rate data lie far outside the model's scale: AIS from their base rates cannot work",
            got=f"visible unit {i}: data mean {float(mu[i]):.3g}, spread {float(sd[i]):.3g}; the model's "
            f"bias {float(b[i]):.3g}, reach ±{float(reach[i]):.3g}",
            expected=f"data within {BASE_SCALE_LIMIT:.0e} times the model's reach",
            hint="pass the model's training data, scaled as for training (a stray huge value?), or drop "
            "--base-rate-data to start from the model's own visible parameters.",
        )


def unit_base_rate_path(
    model: UnitRBM,
    *,
    data: Tensor | None = None,
    max_bits: int = 20,
    path_class: type[UnitBaseRatePath] = UnitBaseRatePath,
) -> UnitBaseRatePath:
    """The AIS path of ``model`` from the unit type's base-rate fit to ``data`` (the data's means
    and variances for Gaussian units, smoothed frequencies for categorical ones), or, without data,
    from the model's own visible parameters with no couplings (``path_class``: the path of another
    model with such visible units, e.g. a DBM's). A Gaussian fit far outside the model's scale
    (:data:`BASE_SCALE_LIMIT`) is refused."""
    units = model.visible_units
    if data is not None:
        x = model.check_data(data, "base-rate data")
        base = units.fit_base(x)
        _check_base_scale(model, base)
        return path_class(model, base, "base rates of the data", max_bits=max_bits)
    own = units.base_of(model.visible_params())
    return path_class(model, own, "model visible parameters (no couplings)", max_bits=max_bits)


@torch.no_grad()
def log_prob_units(model: UnitRBM, x: Tensor, log_z: float) -> Tensor:
    """``log p(v) = log p*(v) - log Z`` per row (a log-density for Gaussian units), float64."""
    return model.log_unnormalized(model.check_data(x)) - float(log_z)


register_exact(UnitRBM, ExactMethod(lambda m: math.log2(enumeration_side(m)[1]), exact_log_z_units))

__all__ = [
    "UnitBaseRatePath",
    "enumeration_side",
    "exact_log_z_units",
    "exact_sample_units",
    "log_prob_units",
    "unit_base_rate_path",
]
