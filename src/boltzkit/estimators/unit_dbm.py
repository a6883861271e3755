"""Exact ``log Z``, exact ``log p*(v)``, exact samples, the mean-field bound and the AIS path of DBMs
with real-valued or categorical visible units (:class:`~boltzkit.models.unit_dbm.UnitDBM`).

Exact computations enumerate the odd hidden layers (``h_1, h_3, ...``): given them, the visible
units and the even hidden layers are independent, and sum out in closed form (the visible unit
type's log-partition of the field ``W_0 h_1``, a Gaussian integral for Gaussian units; softplus for
binary units)::

    log p*(odd) = sum_{odd l} b_l'h_l + A_v(W_0 h_1)
                  + sum_{even l >= 2} sum_j softplus(b_l + h_{l-1} W_{l-1} + W_l h_{l+1})

``log Z`` is the log-sum over the odd states; ``log p*(v)`` fixes ``v`` and sums the odd states
with the even hidden layers summed out; an exact sample draws the odd layers from their enumerated
marginal, then the even ones given them.

Where enumeration is out of reach, ``log p*(v)`` has the mean-field lower bound of S2 (Eq. 7; the
DBM's as in Salakhutdinov & Hinton 2009): with ``q(h) = prod_l prod_j mu_lj^h (1 - mu_lj)^(1-h)``,
``log p*(v) >= -self_energy(v) + phi(v) W_0 mu_1 + sum_l b_l'mu_l + sum_l mu_l'W_l mu_{l+1} + sum_l
H(mu_l)``, maximised by updating the odd layers given the even ones and back (each layer's
update is the exact maximiser given its neighbours, so the bound never falls).

AIS anneals from a base of independent visible units (the unit type's base-rate fit to data, or
the model's own visible parameters) with uniform hidden units, along S1's geometric path with the
odd layers summed out (S1 Eqs. 16-17; the DBM's path of Salakhutdinov & Hinton 2009)::

    log p*_beta(v, h_2, ...) = -(1 - beta) E_base(v) - beta self_energy(v) + beta sum_{even l >= 2} b_l'h_l
                               + sum_{odd l} sum_j softplus(beta a_lj)

with block-Gibbs transitions that leave ``p_beta`` invariant. ``log Z_0`` is the base's
log-partition plus ``(n_1 + ... + n_L) log 2``.
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
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.unit_rbm import UnitBaseRatePath, _softplus_increment, unit_base_rate_path
from boltzkit.models.mean_field import unit_dbm_mean_field as mean_field
from boltzkit.models.mean_field import unit_dbm_mean_field_bound as mean_field_log_unnormalized
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.resources import Forecast
from boltzkit.samplers.operators import Gibbs
from boltzkit.state import ChainState

#: Odd-layer states per chunk of the enumeration.
CHUNK = 1 << 12
#: Most units ``method="exact"`` enumerates for ``log p*(v)``.
EXACT_MAX_BITS = 24


def odd_bits(model: UnitDBM) -> int:
    """Units exact computations enumerate: all of the odd hidden layers."""
    return sum(model.layer_sizes[l] for l in model.odd_layers)


def _check_bits(model: UnitDBM, max_bits: int, what: str) -> int:
    bits = odd_bits(model)
    if bits > int(max_bits):
        raise IntractableError(
            f"{what} would enumerate 2^{bits} states of the odd hidden layers",
            expected=f"at most 2^{int(max_bits)} states",
            hint="estimate log Z instead (--method ais) and use the mean-field bound of log p(v).",
        )
    return bits


def _odd_chunks(model: UnitDBM, bits: int) -> Iterator[list[Tensor]]:
    """Every joint state of the odd layers, in chunks, as one tensor per odd layer."""
    for start in range(0, 2**bits, CHUNK):
        yield _odd_layers_of(
            model, torch.arange(start, min(start + CHUNK, 2**bits), device=model.device), bits
        )


def _odd_layers_of(model: UnitDBM, codes: Tensor, bits: int) -> list[Tensor]:
    """The joint odd-layer states numbered ``codes`` (bit ``i``: unit ``i`` of the odd layers in
    order), one tensor per odd layer."""
    states = ((codes.unsqueeze(1) >> torch.arange(bits, device=codes.device)) & 1).to(model.dtype)
    return list(torch.split(states, [model.layer_sizes[l] for l in model.odd_layers], dim=1))


def _odd_state(model: UnitDBM, odd: list[Tensor]) -> ChainState:
    """A state holding the odd layers (the even ones zero: they are summed out, never read)."""
    n = odd[0].shape[0]
    layers = []
    for l, size in enumerate(model.layer_sizes):
        if l % 2 == 1:
            layers.append(odd[l // 2])
        else:
            layers.append(torch.zeros((n, size), dtype=model.dtype, device=model.device))
    return ChainState(tuple(layers))


def _even_hidden_log_sum(model: UnitDBM, state: ChainState) -> Tensor:
    """``sum_{odd l} b_l'h_l + sum_{even l >= 2} sum_j softplus(a_l)`` of odd states, float64: every
    part of ``log p*(odd)`` but the visible layer's."""
    out = model.bias_term(state, model.odd_layers)
    for l in model.even_hidden_layers:
        out = out + F.softplus(model.hidden_input(state, l).to(torch.float64)).sum(-1)
    return out


def _log_marginal_odd(model: UnitDBM, state: ChainState) -> Tensor:
    """``log p*(odd)`` (the module docstring), float64."""
    field = model.visible_field(state.layers[1])
    return _even_hidden_log_sum(model, state) + model.visible_units.log_partition(
        field, model.visible_params()
    )


@torch.no_grad()
def exact_log_z_unit_dbm(model: UnitDBM, *, max_bits: int = 24) -> LogZResult:
    """Exact ``log Z`` of a Gaussian or categorical DBM (the module docstring)."""
    t0 = time.perf_counter()
    bits = _check_bits(model, max_bits, "exact log Z")
    forecast = Forecast(2**bits, what=f"exact log Z over 2^{bits} odd-layer states", hint="use --method ais.")
    acc = torch.full((), -math.inf, dtype=torch.float64, device=model.device)
    done = 0
    for odd in _odd_chunks(model, bits):
        acc = torch.logaddexp(acc, torch.logsumexp(_log_marginal_odd(model, _odd_state(model, odd)), 0))
        done += odd[0].shape[0]
        forecast.update(done)
    return LogZResult.exact(
        float(acc),
        seconds=time.perf_counter() - t0,
        enumerated_layer="odd hidden layers " + ", ".join(str(l) for l in model.odd_layers),
        n_states=2**bits,
        device=str(model.device),
    )


@torch.no_grad()
def exact_log_unnormalized(model: UnitDBM, v: Tensor, *, max_bits: int = 24) -> Tensor:
    """Exact ``log p*(v)`` per row, float64: the odd layers enumerated, the even hidden layers
    summed out (``-self_energy(v) + log sum_odd exp(phi(v) W_0 h_1 + rest(odd))``)."""
    bits = _check_bits(model, max_bits, "exact log p*(v)")
    v = v.to(model.dtype)
    params = model.visible_params()
    visible_input = model.visible_units.couple(v, model.w0_flat(), params).to(torch.float64)  # (batch, n_1)
    acc = torch.full((v.shape[0],), -math.inf, dtype=torch.float64, device=model.device)
    for odd in _odd_chunks(model, bits):
        rest = _even_hidden_log_sum(model, _odd_state(model, odd))  # (states,)
        acc = torch.logaddexp(acc, torch.logsumexp(visible_input @ odd[0].to(torch.float64).t() + rest, 1))
    return acc - model.visible_units.self_energy(v, params)


@torch.no_grad()
def exact_sample_unit_dbm(
    model: UnitDBM, n_samples: int, generator: torch.Generator, *, max_bits: int = 20
) -> ChainState:
    """Exact samples: the odd layers from their enumerated marginal, then the even layers given them."""
    bits = _check_bits(model, max_bits, "exact samples")
    log_w = torch.cat([_log_marginal_odd(model, _odd_state(model, odd)) for odd in _odd_chunks(model, bits)])
    idx = torch.multinomial(torch.softmax(log_w, 0), int(n_samples), replacement=True, generator=generator)
    state = _odd_state(model, _odd_layers_of(model, idx.to(model.device), bits))
    # the even layers given the odd ones: the operators' block sweep with the odd layers clamped
    return Gibbs().step(model, state, generator=generator, clamped=model.odd_layers)[0]


def unit_dbm_log_unnormalized(
    model: UnitDBM, v: Tensor, *, method: str = "auto", max_bits: int = 16, **mean_field_options: Any
) -> tuple[Tensor, str, dict[str, Any]]:
    """``log p*(v)`` per row and whether it is ``"exact"`` (the odd layers enumerated; ``"auto"``
    when at most ``max_bits`` units are) or a ``"lower"`` bound (mean-field), with the mean-field
    record."""
    if method not in ("auto", "exact", "mean-field"):
        raise BoltzkitError("unknown log p*(v) method", got=method, expected="auto, exact or mean-field")
    if method == "exact" or (method == "auto" and odd_bits(model) <= int(max_bits)):
        limit = int(max_bits) if method == "auto" else max(int(max_bits), EXACT_MAX_BITS)
        return exact_log_unnormalized(model, v, max_bits=limit), "exact", {}
    values, details = mean_field_log_unnormalized(model, v, **mean_field_options)
    return values, "lower", details


# ---------------------------------------------------------------------- AIS
class UnitDBMPath(UnitBaseRatePath):
    """The geometric path from a base of independent visible units (uniform hidden units) to a
    :class:`~boltzkit.models.unit_dbm.UnitDBM`, with the odd layers summed out (the base, its
    ``log Z_0`` and the operator check are the unit RBM path's)."""

    @torch.no_grad()
    def log_f(self, state: ChainState, beta: float) -> Tensor:
        model, units = self.model, self.model.visible_units
        v = state.layers[0].to(self.dtype)
        out = beta * (
            model.bias_term(state, model.even_hidden_layers) - units.self_energy(v, model.visible_params())
        )
        if beta != 1.0:
            out = out - (1.0 - beta) * units.self_energy(v, self.base)
        for a in model.odd_inputs(state):
            out = out + F.softplus(beta * a.to(torch.float64)).sum(-1)
        return out

    @property
    def summed_layers(self) -> tuple[int, ...]:
        return self.model.odd_layers

    @torch.no_grad()
    def step(self, state, beta_from, beta_to, operator, generator, *, sweeps=1, move=True):  # noqa: ANN001
        """Fused AIS step: the odd layers' inputs serve both ends of the log-weight increment and
        the first draw of the odd layers at ``beta_to``."""
        beta_from, beta_to = float(beta_from), float(beta_to)
        step, model = beta_to - beta_from, self.model
        delta = (model.bias_term(state, model.even_hidden_layers) - self._energy_gap(state.layers[0])) * step
        logits = {}
        for l, a in zip(model.odd_layers, model.odd_inputs(state), strict=True):
            increment, _ = _softplus_increment(a, beta_from, beta_to)
            delta = delta + increment
            logits[l] = a if beta_to == 1.0 else beta_to * a
        if not move:
            return delta, state
        return delta, self.transition(state, beta_to, operator, generator, sweeps=sweeps, logits=logits)

    def sample_start(self, n_chains: int, generator: torch.Generator) -> ChainState:
        return self._with_uniform_hidden(
            self.model.sample_independent(n_chains, generator, base=self.base), generator
        )

    def _with_uniform_hidden(self, v: Tensor, generator: torch.Generator) -> ChainState:
        return ChainState((v, *self.model.uniform_hidden(v.shape[0], generator)))

    def sample_end(self, n_chains: int, generator: torch.Generator) -> ChainState | None:
        if odd_bits(self.model) > self.max_bits:
            return None
        return exact_sample_unit_dbm(self.model, n_chains, generator, max_bits=self.max_bits)

    @property
    def end_is_exact(self) -> bool:
        return odd_bits(self.model) <= self.max_bits

    def from_visible(self, v: Tensor, generator: torch.Generator) -> ChainState:
        return self._with_uniform_hidden(self.model.check_data(v, "start data"), generator)


def unit_dbm_path(model: UnitDBM, *, data: Tensor | None = None, max_bits: int = 20) -> UnitDBMPath:
    """The AIS path of ``model`` from the unit type's base-rate fit to ``data``, or, without data,
    from the model's own visible parameters with no couplings."""
    return unit_base_rate_path(model, data=data, max_bits=max_bits, path_class=UnitDBMPath)


register_exact(UnitDBM, ExactMethod(lambda m: float(odd_bits(m)), exact_log_z_unit_dbm))

__all__ = [
    "UnitDBMPath",
    "exact_log_unnormalized",
    "exact_log_z_unit_dbm",
    "exact_sample_unit_dbm",
    "mean_field",
    "mean_field_log_unnormalized",
    "odd_bits",
    "unit_dbm_log_unnormalized",
    "unit_dbm_path",
]
