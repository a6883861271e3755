"""A model's pairwise MRF as dense blocks of edges, one block per coupling.

Every member of the family couples *whole layers*: a coupling ``W_lm`` joins every unit of layer
``l`` to every unit of layer ``m`` (a complete bipartite block) and laterals ``L_l`` join every pair
of units of one layer (a complete block). The unit-level graph of S2 Eq. 3 (Salakhutdinov 2008,
"S2") is therefore a union of dense blocks, and the variational methods keep each block as one
dense matrix: messages, edge appearance probabilities and mutual informations of an RBM's
``784 x 500`` edges are ``784 x 500`` matrices, and a sweep is a handful of elementwise operations
on them (no ``N x N`` matrix with empty blocks).

In the {0, 1} form of ALGORITHMS.md section 8, ``-E(x) = sum_l theta_l^T x_l + sum_edges W_ij x_i
x_j``: node potentials ``exp(theta_i x_i)`` (the biases) and edge potentials ``exp(W_ij x_i x_j)``
(the couplings; a lateral block's pairs ``i < j``). No +-1 conversion (and so no additive constant)
is involved.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzkit.models.boltzmann import BoltzmannMachine


@dataclass(frozen=True)
class EdgeBlock:
    """The edges between layers ``l <= m`` (``l == m``: the pairs ``i < j`` of one layer).

    Attributes
    ----------
    key
        ``(l, m)``, ``l <= m``.
    weights
        ``W_lm``, float64, shape ``(n_l, n_m)``; for laterals symmetric with a zero diagonal.
    """

    key: tuple[int, int]
    weights: Tensor

    @property
    def lateral(self) -> bool:
        return self.key[0] == self.key[1]

    @property
    def n_edges(self) -> int:
        n_l, n_m = self.weights.shape
        return n_l * (n_l - 1) // 2 if self.lateral else n_l * n_m

    def edge_sum(self, x: Tensor) -> Tensor:
        """``sum`` over this block's edges of a per-pair matrix ``x`` (``(n_l, n_m)``, for laterals
        symmetric: the pairs ``i < j`` only)."""
        return torch.triu(x, diagonal=1).sum() if self.lateral else x.sum()


@dataclass(frozen=True)
class BlockGraph:
    """The pairwise MRF of a model: node fields per layer and one :class:`EdgeBlock` per coupling.

    Attributes
    ----------
    layer_sizes
        Units per layer.
    fields
        ``theta_l`` (the biases), float64, one ``(n_l,)`` tensor per layer.
    blocks
        The couplings that have at least one edge (empty layers and one-unit laterals dropped).
    """

    layer_sizes: tuple[int, ...]
    fields: tuple[Tensor, ...]
    blocks: tuple[EdgeBlock, ...]

    @classmethod
    def from_model(cls, model: BoltzmannMachine) -> BlockGraph:
        """The graph of ``model`` in float64 on the model's device."""
        sizes = tuple(int(n) for n in model.layer_sizes)
        fields = tuple(model.bias(l).detach().to(torch.float64) for l in range(len(sizes)))
        blocks = []
        for l, m in model.coupling_keys:
            block = EdgeBlock((l, m), model.coupling(l, m).detach().to(torch.float64))
            if block.n_edges:
                blocks.append(block)
        return cls(sizes, fields, tuple(blocks))

    # ------------------------------------------------------------------------------ structure
    @property
    def device(self) -> torch.device:
        return self.fields[0].device

    @property
    def n_nodes(self) -> int:
        return sum(self.layer_sizes)

    @property
    def n_edges(self) -> int:
        return sum(b.n_edges for b in self.blocks)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Index of each layer's first unit in the concatenation of all units (visible first)."""
        out = [0]
        for n in self.layer_sizes:
            out.append(out[-1] + n)
        return tuple(out)

    def layer_groups(self) -> tuple[list[list[int]], int]:
        """Connected components at the level of layers, and the number of isolated units.

        Returns ``(groups, isolated)``: each group is a list of layers whose units form one
        connected component (blocks are dense, so a layer touched by a block is connected in
        itself), and ``isolated`` counts the units in no block (each its own component).
        """
        parent = list(range(len(self.layer_sizes)))

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        touched: set[int] = set()
        for b in self.blocks:
            l, m = b.key
            touched.update((l, m))
            parent[find(l)] = find(m)
        groups: dict[int, list[int]] = {}
        for l in sorted(touched):
            groups.setdefault(find(l), []).append(l)
        isolated = sum(n for l, n in enumerate(self.layer_sizes) if l not in touched)
        return list(groups.values()), isolated

    @property
    def n_components(self) -> int:
        """Connected components of the unit-level graph (isolated units count one each)."""
        groups, isolated = self.layer_groups()
        return len(groups) + isolated

    @property
    def n_tree_edges(self) -> int:
        """Edges of a spanning tree (a spanning forest: ``N - components``)."""
        return self.n_nodes - self.n_components

    def node_sum(self, per_layer: list[Tensor] | tuple[Tensor, ...]) -> Tensor:
        """Sum of per-unit values over all layers (a float64 scalar tensor)."""
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for x in per_layer:
            total = total + x.sum()
        return total


__all__ = ["BlockGraph", "EdgeBlock"]
