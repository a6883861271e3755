"""Deep Boltzmann machines whose visible units are real-valued or categorical: the
Gaussian-Bernoulli DBM (Cho, Raiko, Ilin & Karhunen 2013) and the categorical DBM, built on the
unit-type seam (:mod:`boltzkit.units`) with binary hidden layers.

The energy of a state ``(v, h_1, ..., h_L)`` is::

    E = self_energy(v) - sum_i phi(v_i) . (W_0 h_1)_i - sum_l b_l'h_l - sum_{l<L} h_l' W_l h_{l+1}

with the visible unit type's self-energy and statistic ``phi`` (for Gaussian units
``(v_i - b_i)^2 / (2 sigma_i^2)`` and ``v_i / sigma_i``; for categorical units ``-vbias[i, v_i]``
and the one-hot vector), as in :class:`~boltzkit.models.unit_rbm.UnitRBM`, whose energy is the
``L = 1`` case. Salakhutdinov & Hinton (2009) define the binary DBM; S2 Sec. 4 trains it.

Given the even layers (``v, h_2, h_4, ...``) the odd hidden layers are independent Bernoulli units,
and given the odd layers the even ones are independent too (``v`` of its own type). So summing the
odd layers out leaves::

    log f(v, h_2, ...) = -self_energy(v) + sum_{even l >= 2} b_l'h_l + sum_{odd l} sum_j softplus(a_lj)

with ``a_l = b_l + (input from layer l - 1) + (input from layer l + 1)`` (:meth:`UnitDBM.odd_inputs`):
what exact ``log Z``, exact ``log p*(v)`` and AIS use (:mod:`boltzkit.estimators.unit_dbm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from boltzkit._numerics import resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel, check_fits_dtype, layer_size
from boltzkit.models.unit_rbm import checked_alphabet, checked_array
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, Params, UnitType, unit_type

_BINARY = Bernoulli()

#: The model kinds by visible unit type.


class UnitDBM(EnergyModel):
    """A DBM with visible units of a given type and binary hidden layers.

    Parameters
    ----------
    visible
        The visible unit type (:class:`~boltzkit.units.Gaussian` or
        :class:`~boltzkit.units.Categorical`, or its name).
    layer_sizes
        ``(n_visible, n_1, ..., n_L)`` with ``L >= 2`` hidden layers (one hidden layer is a
        :class:`~boltzkit.models.unit_rbm.UnitRBM`).
    weights
        ``[W_0, ..., W_{L-1}]``: ``W_0`` of shape ``(n_visible, n_1)`` or, for ``Q``-state units,
        ``(n_visible, Q, n_1)``; ``W_l`` of shape ``(n_l, n_{l+1})``. Default ``N(0, init_scale^2)``.
    biases
        ``[vbias, b_1, ..., b_L]``: ``vbias`` of shape ``(n_visible,)`` or ``(n_visible, Q)``;
        default 0.
    sigma
        Gaussian units: standard deviations, ``(n_visible,)``, all > 0 (default 1), stored as
        ``log_sigma``.
    generator
        For the random initial couplings.
    alphabet
        Categorical units: the letter of each state, so that sequences read and write back.
    """

    def __init__(
        self,
        visible: UnitType | str,
        layer_sizes: Sequence[int],
        *,
        weights: Sequence[Tensor] | None = None,
        biases: Sequence[Tensor | None] | None = None,
        sigma: Tensor | None = None,
        init_scale: float = 0.01,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        device: Any = None,
        alphabet: str | None = None,
    ) -> None:
        super().__init__()
        self.visible_units = unit_type(visible)
        self.alphabet = checked_alphabet(self.visible_units, alphabet)
        if isinstance(self.visible_units, Bernoulli):
            raise BoltzkitError(
                "binary visible units make an ordinary DBM",
                hint="use BoltzmannMachine.dbm (or --visible binary).",
            )
        sizes = tuple(layer_size(n) for n in layer_sizes)
        if len(sizes) < 3 or min(sizes) < 1:
            raise BoltzkitError(
                "a DBM needs a visible layer and at least two hidden layers of at least one unit",
                got=sizes,
                hint="one hidden layer is an RBM: use UnitRBM (--model rbm).",
            )
        self._sizes = sizes
        device = resolve_device(device) if device is not None else torch.device("cpu")
        kw = {"dtype": dtype, "device": device}
        shapes = [self._w_shape(0)] + [(sizes[l], sizes[l + 1]) for l in range(1, len(sizes) - 1)]
        if weights is not None and len(weights) != len(shapes):
            raise BoltzkitError(
                "one weight matrix per pair of adjacent layers", got=len(weights), expected=len(shapes)
            )
        self.weights = nn.ParameterList()
        for l, shape in enumerate(shapes):
            if weights is None:
                noise = torch.randn(
                    shape,
                    generator=generator,
                    dtype=dtype,
                    device=device if generator is None else generator.device,
                )
                value = init_scale * noise
            else:
                value = checked_array(f"W_{l}", weights[l], shape)
            self.weights.append(nn.Parameter(value.to(**kw)))
        bias_shapes = [self.visible_units.bias_shape(sizes[0])] + [(n,) for n in sizes[1:]]
        if biases is not None and len(biases) != len(bias_shapes):
            raise BoltzkitError("one bias per layer", got=len(biases), expected=len(bias_shapes))
        self.biases = nn.ParameterList(
            nn.Parameter(checked_array(f"bias_{l}", None if biases is None else biases[l], shape).to(**kw))
            for l, shape in enumerate(bias_shapes)
        )
        if self.visible_units.has_sigma:
            sigma = checked_array("sigma", sigma, (sizes[0],), 1.0)
            if not bool((sigma > 0).all()):
                raise BoltzkitError("sigma must be positive", got=float(sigma.min()))
            self.log_sigma = nn.Parameter(torch.log(sigma.to(**kw)))
        elif sigma is not None:
            raise BoltzkitError(f"{self.visible_units.name} units take no sigma")
        check_fits_dtype(self)  # finite as given, but beyond the dtype's range once cast

    def _w_shape(self, l: int) -> tuple[int, ...]:
        return self.visible_units.coupling_shape(self._sizes[0], self._sizes[1])

    # ------------------------------------------------------------------ facts
    @property
    def kind(self) -> str:
        return f"{self.visible_units.name.split(':')[0]}-dbm"  # gaussian-dbm, categorical-dbm

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return self._sizes

    @property
    def n_hidden(self) -> int:
        """Hidden units in all layers."""
        return sum(self._sizes[1:])

    @property
    def n_layers(self) -> int:
        return len(self._sizes)

    @property
    def dtype(self) -> torch.dtype:
        return self.weights[0].dtype

    @property
    def device(self) -> torch.device:
        return self.weights[0].device

    @property
    def vbias(self) -> nn.Parameter:
        return self.biases[0]

    @property
    def sigma(self) -> Tensor:
        return self.log_sigma.exp()

    def visible_params(self) -> Params:
        params = {"bias": self.biases[0]}
        if self.visible_units.has_sigma:
            params["sigma"] = self.sigma
        return params

    def w0_flat(self) -> Tensor:
        """``W_0`` as ``(n_visible F, n_1)``: the visible statistics' couplings."""
        return self.weights[0].reshape(-1, self._sizes[1])

    @property
    def odd_layers(self) -> tuple[int, ...]:
        return tuple(range(1, self.n_layers, 2))

    @property
    def even_hidden_layers(self) -> tuple[int, ...]:
        return tuple(range(2, self.n_layers, 2))

    # ------------------------------------------------------------------ conditionals
    def hidden_input(self, state: ChainState, layer: int, *, visible_input: Tensor | None = None) -> Tensor:
        """``b_l`` plus the inputs of hidden layer ``l``'s neighbours, shape ``(batch, n_l)``
        (``visible_input``: ``phi(v) W_0`` when already computed)."""
        if not 1 <= layer < self.n_layers:
            raise BoltzkitError("not a hidden layer", got=layer, expected=f"1..{self.n_layers - 1}")
        if layer == 1:
            below = (
                self.visible_units.couple(
                    state.layers[0].to(self.dtype), self.w0_flat(), self.visible_params()
                )
                if visible_input is None
                else visible_input
            )
        else:
            below = state.layers[layer - 1].to(self.dtype) @ self.weights[layer - 1]
        out = below + self.biases[layer]
        if layer + 1 < self.n_layers:
            out = out + state.layers[layer + 1].to(self.dtype) @ self.weights[layer].t()
        return out

    def visible_field(self, h1: Tensor) -> Tensor:
        """``W_0 h_1`` per visible unit, shape ``(batch, n_visible, F)``."""
        return (h1.to(self.dtype) @ self.w0_flat().t()).reshape(h1.shape[0], self._sizes[0], -1)

    def odd_inputs(self, state: ChainState) -> list[Tensor]:
        """The inputs ``a_l`` of the odd layers given the even ones (one per odd layer)."""
        return [self.hidden_input(state, l) for l in self.odd_layers]

    # ------------------------------------------------------------------ the EnergyModel contract
    def blocks(self) -> tuple[Block, ...]:
        """One sweep updates the odd layers given the even ones, then the even ones (``v`` first)."""
        return tuple(Block(l) for l in self.odd_layers) + tuple(Block(l) for l in range(0, self.n_layers, 2))

    def layer_units(self, layer: int) -> UnitType:
        return self.visible_units if layer == 0 else _BINARY

    @staticmethod
    def _scaled(x: Tensor, beta: float | Tensor, trailing: int) -> Tensor:
        if isinstance(beta, Tensor):
            return x * beta.to(x).reshape(-1, *([1] * trailing))
        return x if beta == 1.0 else beta * x

    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        """A hidden layer's logits ``beta a_l``; the visible units take :meth:`block_field`."""
        if block.layer == 0:
            raise BoltzkitError(f"{self.visible_units.name} visible units have a field, not logits")
        logits = self._scaled(self.hidden_input(state, block.layer), beta, 1)
        return logits if block.units is None else logits[:, block.units]

    def block_field(
        self, state: ChainState, block: Block, beta: float | Tensor = 1.0
    ) -> tuple[Tensor, Params]:
        """The visible units' field ``beta W_0 h_1`` and their parameters; only the couplings and
        hidden biases are tempered (:meth:`tempered_energy`)."""
        if block.layer != 0 or block.units is not None:
            raise BoltzkitError("the field of a unit DBM is that of its whole visible layer", got=block)
        return self._scaled(self.visible_field(state.layers[1]), beta, 2), self.visible_params()

    def bias_term(self, state: ChainState, layers: Sequence[int]) -> Tensor:
        """``sum_{l in layers} b_l'h_l`` of hidden layers, float64, shape ``(batch,)``."""
        out = torch.zeros(state.n_chains, dtype=torch.float64, device=self.device)
        for l in layers:
            out = out + (state.layers[l].to(self.dtype) @ self.biases[l]).to(torch.float64)
        return out

    def energy(self, state: ChainState) -> Tensor:
        """``E(v, h_1, ..., h_L)``, float64, shape ``(batch,)``."""
        layers = [x.to(self.dtype) for x in state.layers]
        params = self.visible_params()
        coupling = (self.visible_units.couple(layers[0], self.w0_flat(), params) * layers[1]).sum(-1)
        for l in range(1, self.n_layers - 1):
            coupling = coupling + ((layers[l] @ self.weights[l]) * layers[l + 1]).sum(-1)
        biases = self.bias_term(state, range(1, self.n_layers))
        return self.visible_units.self_energy(layers[0], params) - coupling.to(torch.float64) - biases

    def joint_energy(self, state: ChainState) -> Tensor:
        return self.energy(state)

    def tempered_energy(self, state: ChainState) -> Tensor:
        """``E - self_energy(v)``: at ``beta`` the model is ``exp(-self_energy(v) - beta (E -
        self_energy(v)))``, whose ``beta = 0`` end is the visible units' own independent model
        and uniform hidden units."""
        v = state.layers[0].to(self.dtype)
        return self.energy(state) - self.visible_units.self_energy(v, self.visible_params())

    def sample_independent(self, n: int, generator: torch.Generator, base: Params | None = None) -> Tensor:
        """``n`` draws of the visible units with no couplings: the model's own visible parameters,
        or ``base`` (a base-rate model of the unit type)."""
        zero = torch.zeros(
            (int(n), self._sizes[0], self.visible_units.n_stats), dtype=self.dtype, device=self.device
        )
        return self.visible_units.sample(zero, self.visible_params() if base is None else base, generator)

    def uniform_hidden(self, n: int, generator: torch.Generator) -> list[Tensor]:
        """``n`` uniform draws of every hidden layer (on the generator's device, then the model's)."""
        return [
            (torch.rand((int(n), size), generator=generator, device=generator.device) < 0.5)
            .to(self.dtype)
            .to(self.device)
            for size in self._sizes[1:]
        ]

    def random_state(self, n_chains: int, generator: torch.Generator) -> ChainState:
        """Visible units from their own independent model, hidden units uniform."""
        v = self.sample_independent(n_chains, generator)
        return ChainState((v, *self.uniform_hidden(n_chains, generator)))

    def check_data(self, x: Tensor, what: str = "data") -> Tensor:
        """``x`` checked against the visible unit type, as this model's dtype and device."""
        return self.visible_units.check_data(x, self._sizes[0], what).to(self.dtype).to(self.device)

    def extra_repr(self) -> str:
        return f"visible={self.visible_units.name}, layer_sizes={self._sizes}"


__all__ = ["UnitDBM"]
