"""The contract every energy model fulfils.

A model knows its energy, its conditionals and its blocks of conditionally independent units.
It knows nothing about sampling loops or training (DESIGN.md: models never import samplers).
Each layer holds units of one type (:mod:`boltzkit.units`); binary {0, 1} units are the default,
and a layer of another type gives its conditional as a field (:meth:`EnergyModel.block_field`).
"""

from __future__ import annotations

import numbers
from abc import abstractmethod

import torch
from torch import Tensor, nn

from boltzkit._numerics import tensors_digest
from boltzkit.errors import BoltzkitError
from boltzkit.state import Block, ChainState
from boltzkit.units import Bernoulli, Params, UnitType

_BINARY = Bernoulli()


def layer_size(value: object) -> int:
    """A number of units: a whole number (numpy's too), never a float, a string or a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, Tensor) and value.numel() == 1 and not value.is_floating_point():
            return int(value)
        raise BoltzkitError("a number of units must be a whole number", got=repr(value))
    return int(value)


def checked_parameter(value: object, shape: tuple[int, ...], name: str) -> Tensor:
    """``value`` as a tensor of ``shape`` with finite values, or a clear error naming ``name``: the
    one check of a parameter given to a model."""
    t = torch.as_tensor(value)
    if tuple(t.shape) != tuple(shape):
        raise BoltzkitError(f"model parameter {name} has the wrong shape", got=tuple(t.shape), expected=shape)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise BoltzkitError(
            f"model parameter {name} holds NaN or infinite values",
            got=f"{bad} of {t.numel()} entries",
            hint="every estimate of such a model would be NaN: check where the values came from.",
        )
    return t


def check_fits_dtype(model: nn.Module) -> None:
    """A clear error where a parameter, finite as given, overflowed the model's dtype when cast to
    it (``1e39`` in float32): every model class checks its parameters after it made them."""
    for name, param in model.named_parameters():
        if not bool(torch.isfinite(param.detach()).all()):
            raise BoltzkitError(
                f"model parameter {name} overflows {str(param.dtype).removeprefix('torch.')}",
                got=f"largest |value| {float(param.detach().abs().max()):.3g}",
                hint="use dtype=torch.float64.",
            )


class EnergyModel(nn.Module):
    """Energy model ``p(x) = exp(-E(x)) / Z`` over layers of units, {0, 1} unless a layer says
    otherwise (:meth:`layer_units`).

    Subclasses give the layer sizes, the sweep order of blocks, the logits of each binary block
    given the rest at inverse temperature ``beta`` (the field of a block of other units) and the
    joint energy. Those are all a transition operator needs, so every operator works with every
    model.

    At inverse temperature ``beta`` the model is ``p_beta(x) ∝ exp(-E_fixed(x) - beta
    E_tempered(x))``: for binary models the whole energy is tempered; a model whose units need a
    fixed part to stay normalisable at ``beta = 0`` (a Gaussian layer's self-energy) says so in
    :meth:`tempered_energy`.
    """

    @property
    @abstractmethod
    def layer_sizes(self) -> tuple[int, ...]:
        """Number of units in each layer, visible first."""

    @abstractmethod
    def blocks(self) -> tuple[Block, ...]:
        """Blocks of conditionally independent units in the order one sweep updates them."""

    @abstractmethod
    def block_logits(self, state: ChainState, block: Block, beta: float | Tensor = 1.0) -> Tensor:
        """Logits ``log p(x_i=1|rest) - log p(x_i=0|rest)`` of the block's units at ``beta``.

        Shape ``(n_chains, n_block_units)``. ``beta`` is a float or a tensor of shape
        ``(n_chains,)`` (one inverse temperature per chain).
        """

    @abstractmethod
    def joint_energy(self, state: ChainState) -> Tensor:
        """Energy ``E(x)`` of each chain's full state at ``beta = 1``, float64, shape ``(n_chains,)``."""

    def layer_units(self, layer: int) -> UnitType:
        """The type of the units of ``layer`` (binary unless a model says otherwise)."""
        return _BINARY

    def block_field(
        self, state: ChainState, block: Block, beta: float | Tensor = 1.0
    ) -> tuple[Tensor, Params]:
        """A block of non-binary units: its field at ``beta``, shape ``(n_chains, n_units, F)``,
        and its layer's parameters (:mod:`boltzkit.units`)."""
        raise BoltzkitError(f"{type(self).__name__} has binary units only: use block_logits")

    def tempered_energy(self, state: ChainState) -> Tensor:
        """The part of the energy that ``beta`` multiplies (all of it by default), float64,
        shape ``(n_chains,)``: what parallel tempering's swaps compare."""
        return self.joint_energy(state)

    @property
    def n_visible(self) -> int:
        return self.layer_sizes[0]

    @property
    def n_units(self) -> int:
        return sum(self.layer_sizes)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def random_state(self, n_chains: int, generator: torch.Generator) -> ChainState:
        """Independent uniform {0, 1} states for ``n_chains`` chains."""
        layers = tuple(
            (torch.rand(n_chains, size, generator=generator, device=self.device) < 0.5).to(self.dtype)
            for size in self.layer_sizes
        )
        return ChainState(layers)

    def fingerprint(self) -> str:
        """Identity of the model's parameters: ``"sha256:HEX"`` over its class, its layer sizes
        and each parameter's name, shape and values as float32 (so a float64 copy, or one on
        another device, has the fingerprint of the model it was made from; the same values in
        another class, an RBM and its ``BoltzmannMachine`` form, differ). A log Z record keeps
        it (``settings["model_fingerprint"]``), so that a log-probability is never taken with
        another model's log Z."""
        values = {n: p.detach().to(device="cpu", dtype=torch.float32) for n, p in self.named_parameters()}
        return "sha256:" + tensors_digest(values, prefix=f"{type(self).__name__}:{self.layer_sizes}")

    def split_units(self, x: Tensor) -> ChainState:
        """Cut a tensor of all units, shape ``(n, n_units)``, into a state."""
        return ChainState(tuple(torch.split(x, list(self.layer_sizes), dim=1)))
