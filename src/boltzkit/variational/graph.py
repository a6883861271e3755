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

The graph is the model's *own*: a pair whose coupling is exactly zero is no edge. Dense models
(every coupling nonzero, the usual case for trained machines) keep plain dense blocks. A model
with zero couplings (a lattice or a diluted spin glass written as a fully visible machine) gets a
mask of its edges per block (up to :data:`SPARSE_MAX_UNITS` units), so that spanning trees, edge
appearance probabilities and the components of the tree-reweighted bound follow its sparsity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch import Tensor

from boltzkit.models.boltzmann import BoltzmannMachine

#: Largest model whose zero couplings are read as missing edges (a mask per block and an
#: ``N x N`` Laplacian for the effective resistances); larger models are taken as dense, which
#: gives valid but looser tree-reweighted bounds.
SPARSE_MAX_UNITS = 4096


@dataclass(frozen=True)
class EdgeBlock:
    """The edges between layers ``l <= m`` (``l == m``: the pairs ``i < j`` of one layer).

    Attributes
    ----------
    key
        ``(l, m)``, ``l <= m``.
    weights
        ``W_lm``, float64, shape ``(n_l, n_m)``; for laterals symmetric with a zero diagonal.
    mask
        ``None`` when every pair is an edge (dense); else a bool ``(n_l, n_m)`` matrix of the pairs
        that are (laterals: symmetric, false on the diagonal).
    """

    key: tuple[int, int]
    weights: Tensor
    mask: Tensor | None = None

    @property
    def lateral(self) -> bool:
        return self.key[0] == self.key[1]

    @property
    def n_edges(self) -> int:
        if self.mask is not None:
            count = int(self.mask.sum())
            return count // 2 if self.lateral else count
        n_l, n_m = self.weights.shape
        return n_l * (n_l - 1) // 2 if self.lateral else n_l * n_m

    def edge_mask(self) -> Tensor:
        """Bool ``(n_l, n_m)``: the pairs that are edges (laterals: both triangles, no diagonal)."""
        if self.mask is not None:
            return self.mask
        full = torch.ones(self.weights.shape, dtype=torch.bool, device=self.weights.device)
        if self.lateral:
            full.fill_diagonal_(False)
        return full

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
        sparse_ok = sum(sizes) <= SPARSE_MAX_UNITS
        blocks = []
        for l, m in model.coupling_keys:
            weights = model.coupling(l, m).detach().to(torch.float64)
            block = EdgeBlock((l, m), weights)
            if sparse_ok and block.n_edges:
                mask = weights != 0
                if l == m:
                    mask.fill_diagonal_(False)
                if int(mask.sum()) < (2 if l == m else 1) * block.n_edges:
                    block = EdgeBlock((l, m), weights, mask)
            if block.n_edges:
                blocks.append(block)
        return cls(sizes, fields, tuple(blocks))

    @property
    def sparse(self) -> bool:
        """Whether some block misses pairs (zero couplings read as missing edges)."""
        return any(b.mask is not None for b in self.blocks)

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
        if self.sparse:
            return int(connected_components(self.adjacency(), directed=False)[0])
        groups, isolated = self.layer_groups()
        return len(groups) + isolated

    def edge_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Global unit indices ``(rows, cols)``, ``rows < cols``, of every edge, block by block."""
        off = self.offsets
        rows, cols = [], []
        for b in self.blocks:
            l, m = b.key
            mask = b.edge_mask()
            if b.lateral:
                mask = torch.triu(mask, diagonal=1)
            i, j = (x.cpu().numpy() for x in torch.nonzero(mask, as_tuple=True))
            rows.append(i + off[l])
            cols.append(j + off[m])
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(rows), np.concatenate(cols)

    def adjacency(self) -> coo_matrix:
        """The unit-level adjacency (``N x N``, each edge once) as a scipy sparse matrix."""
        rows, cols = self.edge_pairs()
        n = self.n_nodes
        return coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))

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


__all__ = ["SPARSE_MAX_UNITS", "BlockGraph", "EdgeBlock"]
