"""Chain state: a typed record of layer tensors.

Every model and every transition operator exchanges states as :class:`ChainState`, a frozen
record of one tensor per layer, each of shape ``(n_chains, n_units)`` with values in {0, 1}.
Layer 0 is the visible layer; layers 1.. are hidden layers (one for an RBM, several for a DBM).
This module sits below models and samplers: it holds data, not behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Block:
    """A group of units updated together by one step of a transition operator.

    Normally the units are conditionally independent given all other units, so they can be drawn
    at once; a ``sequential`` block is updated unit by unit instead.

    Attributes
    ----------
    layer
        Index of the layer the units belong to (0 = visible).
    units
        The units of that layer in the block; ``None`` means the whole layer (the usual case for
        layered models).
    sequential
        The units of the block are *not* conditionally independent (a layer with lateral
        connections): one update of the block updates its units one at a time, in index order,
        each given all the others (single-site updates).
    """

    layer: int
    units: slice | None = None
    sequential: bool = False

    def units_of(self, n_units: int) -> range:
        """Indices of the block's units in a layer of ``n_units`` units."""
        return range(n_units)[self.units] if self.units is not None else range(n_units)


@dataclass(frozen=True)
class ChainState:
    """States of ``n_chains`` Markov chains, one tensor per layer.

    Attributes
    ----------
    layers
        ``layers[l]`` has shape ``(n_chains, n_units_l)``; layer 0 is visible.
    """

    layers: tuple[Tensor, ...]

    @classmethod
    def of(cls, *layers: Tensor) -> ChainState:
        """Build a state from layer tensors given in order (visible first)."""
        return cls(tuple(layers))

    @property
    def visible(self) -> Tensor:
        """Visible states, shape ``(n_chains, n_visible)``."""
        return self.layers[0]

    @property
    def hidden(self) -> Tensor:
        """States of the first hidden layer, shape ``(n_chains, n_hidden)``."""
        return self.layers[1]

    @property
    def n_chains(self) -> int:
        return int(self.layers[0].shape[0])

    def with_layer(self, layer: int, value: Tensor) -> ChainState:
        """A new state whose layer ``layer`` is ``value`` (others shared, not copied)."""
        layers = list(self.layers)
        layers[layer] = value
        return ChainState(tuple(layers))

    def with_block(self, block: Block, value: Tensor) -> ChainState:
        """A new state with the units of ``block`` set to ``value``."""
        if block.units is None:
            return self.with_layer(block.layer, value)
        full = self.layers[block.layer].clone()
        full[:, block.units] = value
        return self.with_layer(block.layer, full)

    def block_values(self, block: Block) -> Tensor:
        """Current values of the units in ``block``."""
        x = self.layers[block.layer]
        return x if block.units is None else x[:, block.units]

    def to(self, *args, **kwargs) -> ChainState:
        """``Tensor.to`` applied to every layer."""
        return ChainState(tuple(x.to(*args, **kwargs) for x in self.layers))

    def clone(self) -> ChainState:
        return ChainState(tuple(x.clone() for x in self.layers))

    def concat(self) -> Tensor:
        """All layers side by side, shape ``(n_chains, sum of layer sizes)``."""
        return torch.cat(self.layers, dim=1)
