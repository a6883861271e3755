"""RBMs whose visible units are real-valued or categorical: the Gaussian-Bernoulli RBM and the
categorical (Potts) RBM, built on the unit-type seam (:mod:`boltzkit.units`).

The energy of a visible state ``v`` and binary hidden state ``h`` is::

    E(v, h) = self_energy(v) - sum_i phi(v_i) . (W_i h) - c'h

with the visible unit type's self-energy and statistic ``phi`` (:mod:`boltzkit.units`):

* Gaussian units (``W``: n_visible x n_hidden, ``vbias``, ``sigma`` per unit):
  ``E = sum_i (v_i - b_i)^2 / (2 sigma_i^2) - sum_ij (v_i / sigma_i) W_ij h_j - c'h``
  (the Gaussian-Bernoulli RBM; Hinton & Salakhutdinov 2006, with the sigma of Cho et al. 2011's
  notation written out per unit);
* categorical units with ``Q`` states (``W``: n_visible x Q x n_hidden, ``vbias``: n_visible x Q):
  ``E = -sum_i vbias[i, v_i] - c'h - sum_ij W[i, v_i, j] h_j`` (the Potts RBM of protein-family
  models).

Summing the binary hidden units out gives ``log p*(v) = -self_energy(v) + sum_j softplus(c_j +
phi(v) . W_j)``; summing the visible units out given ``h`` gives the unit type's log-partition of
the field ``W h`` (:meth:`UnitRBM.log_marginal_hidden`), which is what exact ``log Z`` enumerates.
Binary visible units are the :class:`~boltzkit.models.rbm.RBM`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from boltzkit._numerics import resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.models.base import EnergyModel, check_fits_dtype, checked_parameter, layer_size
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, Categorical, Params, UnitType, unit_type

_BINARY = Bernoulli()

#: The model kinds by visible unit type.


def checked_alphabet(units: UnitType, alphabet: str | None) -> str | None:
    """``alphabet`` when it names each state of categorical ``units`` with one letter, else a clear
    error (``None`` passes)."""
    if alphabet is not None and (
        not isinstance(alphabet, str) or not isinstance(units, Categorical) or len(alphabet) != units.n_states
    ):
        raise BoltzkitError(
            "an alphabet names the states of categorical units, one letter each",
            got=f"{alphabet!r} for {units.name} units",
            expected="a string of one letter per state, e.g. 'ACGT' for 4 states",
        )
    return alphabet


def checked_array(name: str, value: Tensor | None, shape: tuple[int, ...], fill: float = 0.0) -> Tensor:
    """A copy of ``value`` of the given ``shape`` with finite values (``fill`` everywhere when ``None``),
    or a clear error (:func:`~boltzkit.models.base.checked_parameter`)."""
    if value is None:
        return torch.full(shape, float(fill))
    return checked_parameter(torch.as_tensor(value).detach(), tuple(shape), name).clone()


class UnitRBM(EnergyModel):
    """An RBM with visible units of a given type and binary hidden units.

    Parameters
    ----------
    visible
        The visible unit type (:class:`~boltzkit.units.Gaussian` or
        :class:`~boltzkit.units.Categorical`, or its name ``"gaussian"`` / ``"categorical:Q"``).
    n_visible, n_hidden
        Layer sizes.
    weights
        ``W``, shape ``(n_visible, n_hidden)`` or, for ``Q``-state units, ``(n_visible, Q, n_hidden)``;
        default ``N(0, init_scale^2)``.
    vbias, hbias
        Biases, shapes ``(n_visible,)`` or ``(n_visible, Q)``, and ``(n_hidden,)``; default 0.
    sigma
        Gaussian units: standard deviations, shape ``(n_visible,)``, all > 0 (default 1). Stored
        as ``log_sigma``, so that it is learned in the log domain.
    generator
        For the random initial couplings.
    alphabet
        Categorical units: the letter of each state (e.g. the 21 letters of ``protein``,
        :mod:`boltzkit.data.fasta`), so that data and samples can be read and written as sequences.
    """

    def __init__(
        self,
        visible: UnitType | str,
        n_visible: int,
        n_hidden: int,
        *,
        weights: Tensor | None = None,
        vbias: Tensor | None = None,
        hbias: Tensor | None = None,
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
                "binary visible units make an ordinary RBM", hint="use boltzkit.RBM (or --visible binary)."
            )
        self._sizes = (layer_size(n_visible), layer_size(n_hidden))
        if self.n_visible < 1 or self.n_hidden < 1:
            raise BoltzkitError(
                "an RBM needs at least one visible and one hidden unit", got=(n_visible, n_hidden)
            )
        device = resolve_device(device) if device is not None else torch.device("cpu")
        kw = {"dtype": dtype, "device": device}
        w_shape = self._w_shape()
        if weights is None:
            noise = torch.randn(
                w_shape,
                generator=generator,
                dtype=dtype,
                device=device if generator is None else generator.device,
            )
            weights = init_scale * noise
        self.W = nn.Parameter(checked_array("W", weights, w_shape).to(**kw))
        b_shape = self.visible_units.bias_shape(self.n_visible)
        self.vbias = nn.Parameter(checked_array("vbias", vbias, b_shape, 0.0).to(**kw))
        self.hbias = nn.Parameter(checked_array("hbias", hbias, (self.n_hidden,), 0.0).to(**kw))
        if self.visible_units.has_sigma:
            sigma = checked_array("sigma", sigma, (self.n_visible,), 1.0)
            if not bool((sigma > 0).all()):
                raise BoltzkitError("sigma must be positive", got=float(sigma.min()))
            self.log_sigma = nn.Parameter(torch.log(sigma.to(**kw)))
        elif sigma is not None:
            raise BoltzkitError(f"{self.visible_units.name} units take no sigma")
        check_fits_dtype(self)  # finite as given, but beyond the dtype's range once cast

    def _w_shape(self) -> tuple[int, ...]:
        return self.visible_units.coupling_shape(self.n_visible, self.n_hidden)

    # ------------------------------------------------------------------ facts
    @property
    def kind(self) -> str:
        return f"{self.visible_units.name.split(':')[0]}-rbm"  # gaussian-rbm, categorical-rbm

    @property
    def layer_sizes(self) -> tuple[int, int]:
        return self._sizes

    @property
    def n_hidden(self) -> int:
        return self._sizes[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.W.dtype

    @property
    def device(self) -> torch.device:
        return self.W.device

    @property
    def sigma(self) -> Tensor:
        return self.log_sigma.exp()

    def visible_params(self) -> Params:
        params = {"bias": self.vbias}
        if self.visible_units.has_sigma:
            params["sigma"] = self.sigma
        return params

    def _w_flat(self) -> Tensor:
        return self.W.reshape(-1, self.n_hidden)

    # ------------------------------------------------------------------ conditionals
    def hidden_input(self, v: Tensor) -> Tensor:
        """``c + phi(v) W``, shape ``(batch, n_hidden)``: the input of each hidden unit."""
        return self.hbias + self.visible_units.couple(v.to(self.dtype), self._w_flat(), self.visible_params())

    def visible_field(self, h: Tensor) -> Tensor:
        """``W h`` per visible unit, shape ``(batch, n_visible, F)``."""
        return (h.to(self.dtype) @ self._w_flat().t()).reshape(h.shape[0], self.n_visible, -1)

    def sample_visible(self, h: Tensor, generator: torch.Generator) -> Tensor:
        """A draw of ``v | h``."""
        return self.visible_units.sample(self.visible_field(h), self.visible_params(), generator)

    def sample_independent(self, n: int, generator: torch.Generator, base: Params | None = None) -> Tensor:
        """``n`` draws of the visible units with no couplings: the model's own visible parameters,
        or ``base`` (a base-rate model of the unit type)."""
        zero = torch.zeros(
            (int(n), self.n_visible, self.visible_units.n_stats), dtype=self.dtype, device=self.device
        )
        return self.visible_units.sample(zero, self.visible_params() if base is None else base, generator)

    # ------------------------------------------------------------------ the EnergyModel contract
    def blocks(self) -> tuple[Block, ...]:
        """One sweep updates the hidden layer given v, then the visible layer given h."""
        return (Block(1), Block(0))

    def layer_units(self, layer: int) -> UnitType:
        return self.visible_units if layer == 0 else _BINARY

    @staticmethod
    def _scaled(x: Tensor, beta: float | Tensor, trailing: int) -> Tensor:
        if isinstance(beta, Tensor):
            return x * beta.to(x).reshape(-1, *([1] * trailing))
        return x if beta == 1.0 else beta * x

    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        """The hidden units' logits ``beta (c + phi(v) W)``; the visible units take
        :meth:`block_field`."""
        if block.layer != 1:
            raise BoltzkitError(f"{self.visible_units.name} visible units have a field, not logits")
        logits = self._scaled(self.hidden_input(state.visible), beta, 1)
        return logits if block.units is None else logits[:, block.units]

    def block_field(
        self, state: ChainState, block: Block, beta: float | Tensor = 1.0
    ) -> tuple[Tensor, Params]:
        """The visible units' field ``beta W h`` and their parameters. Only the couplings are
        tempered (:meth:`tempered_energy`), so ``p_beta`` stays normalisable down to ``beta = 0``."""
        if block.layer != 0 or block.units is not None:
            raise BoltzkitError("the field of a unit RBM is that of its whole visible layer", got=block)
        return self._scaled(self.visible_field(state.hidden), beta, 2), self.visible_params()

    def joint_energy(self, state: ChainState) -> Tensor:
        return self.energy(state.visible, state.hidden)

    def tempered_energy(self, state: ChainState) -> Tensor:
        """``E(v, h) - self_energy(v)``: the couplings and the hidden biases. At ``beta`` the model is
        ``exp(-self_energy(v) - beta (E(v, h) - self_energy(v)))``, whose ``beta = 0`` end is the
        visible units' own independent model and uniform hidden units."""
        v = state.visible.to(self.dtype)
        return self.energy(v, state.hidden) - self.visible_units.self_energy(v, self.visible_params())

    def random_state(self, n_chains: int, generator: torch.Generator) -> ChainState:
        """Visible units from their own independent model, hidden units uniform."""
        v = self.sample_independent(n_chains, generator)
        h = (torch.rand(n_chains, self.n_hidden, generator=generator, device=self.device) < 0.5).to(
            self.dtype
        )
        return ChainState.of(v, h)

    # ------------------------------------------------------------------ energies
    def log_unnormalized(self, v: Tensor, *, hidden_input: Tensor | None = None) -> Tensor:
        """``log p*(v) = -self_energy(v) + sum_j softplus(c_j + phi(v) . W_j)``, float64
        (``hidden_input``: :meth:`hidden_input` of ``v`` when already computed)."""
        v = v.to(self.dtype)
        inp = self.hidden_input(v) if hidden_input is None else hidden_input
        return -self.visible_units.self_energy(v, self.visible_params()) + F.softplus(
            inp.to(torch.float64)
        ).sum(-1)

    def free_energy(self, v: Tensor, *, hidden_input: Tensor | None = None) -> Tensor:
        """``F(v) = -log p*(v)``, float64, shape ``(batch,)`` (the CD objective's statistic)."""
        return -self.log_unnormalized(v, hidden_input=hidden_input)

    def energy(self, v: Tensor, h: Tensor) -> Tensor:
        """``E(v, h)``, float64."""
        v, h = v.to(self.dtype), h.to(self.dtype)
        stats = self.visible_units.stats(v, self.visible_params()).reshape(v.shape[0], -1)
        coupling = ((stats @ self._w_flat()) * h).sum(-1) + h @ self.hbias
        return self.visible_units.self_energy(v, self.visible_params()) - coupling.to(torch.float64)

    def log_marginal_hidden(self, h: Tensor) -> Tensor:
        """``log sum_v exp(-E(v, h))`` (an integral for Gaussian units), float64: ``c'h`` plus the
        visible units' log-partition of the field ``W h``."""
        h = h.to(self.dtype)
        return (h @ self.hbias).to(torch.float64) + self.visible_units.log_partition(
            self.visible_field(h), self.visible_params()
        )

    def check_data(self, x: Tensor, what: str = "data") -> Tensor:
        """``x`` checked against the visible unit type, as this model's dtype and device."""
        return self.visible_units.check_data(x, self.n_visible, what).to(self.dtype).to(self.device)

    def extra_repr(self) -> str:
        return f"visible={self.visible_units.name}, n_visible={self.n_visible}, n_hidden={self.n_hidden}"


__all__ = ["UnitRBM", "checked_alphabet", "checked_array"]
