"""The contract every energy model fulfils.

A model knows its energy, its conditionals and its blocks of conditionally independent units.
It knows nothing about sampling loops or training (DESIGN.md: models never import samplers).
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from torch import Tensor, nn

from boltzkit.state import Block, ChainState


class EnergyModel(nn.Module):
    """Binary energy model ``p(x) = exp(-E(x)) / Z`` over layers of {0, 1} units.

    Subclasses give the layer sizes, the sweep order of blocks, the logits of each block given the
    rest at inverse temperature ``beta`` and the joint energy. Those four are all a transition
    operator needs, so every operator works with every model.
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

    def split_units(self, x: Tensor) -> ChainState:
        """Cut a tensor of all units, shape ``(n, n_units)``, into a state."""
        return ChainState(tuple(torch.split(x, list(self.layer_sizes), dim=1)))
