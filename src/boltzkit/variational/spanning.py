"""Edge appearance probabilities ``rho``: points of the spanning-tree polytope of a model's graph.

The tree-reweighted bound (S2 Sec. 2.5, Eqs. 14-15) holds for ``rho_ij = sum_T rho(T) 1[(i,j) in
T]`` with ``rho(.)`` a distribution over spanning trees ``T`` of the model's own graph. Any other
``rho`` gives no bound. This module builds such points and keeps track of why they are valid:

* :func:`uniform_rho`: the edge probabilities of the *uniform* distribution over all spanning trees
  (forests, per connected component). By Kirchhoff's theorem they are the effective resistances
  ``rho_ij = R_eff(i, j)`` of the graph with unit conductances, and by Foster's theorem they sum
  to ``N - components``. On an edge-transitive graph (an RBM's complete bipartite graph; a BM whose
  units are all coupled to each other) they all equal ``(N - 1) / |E|`` (ALGORITHMS.md section 8;
  UGM's ``UGM_makeEdgeDistribution`` type 2); on an SRBM, a DBM or any other layered structure they
  differ between blocks, and the uniform ``(N - 1) / |E|`` would lie outside the polytope. Blocks are
  dense, so every permutation of the units within a layer is an automorphism of the graph and
  ``R_eff`` is constant on each block: it is computed exactly from a quotient graph with one node
  per layer (plus the two end units), a linear system of size ``n_layers + 2``.
* :func:`max_weight_spanning_tree`: the linear minimisation oracle of Frank-Wolfe
  (``scipy.sparse.csgraph.minimum_spanning_tree`` on ``c - weights``, ``c`` above the largest).
* :class:`TreeMixture`: ``rho = w_0 rho_uniform + sum_t w_t 1_{T_t}`` with the trees ``T_t`` that
  Frank-Wolfe added and weights summing to 1, and :func:`check_rho`, which verifies that a ``rho``
  is this convex combination and that every ``T_t`` is a spanning forest of the model's graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.variational.graph import BlockGraph, EdgeBlock

#: Tolerance of the polytope checks (sums of probabilities, reconstruction of ``rho``).
ATOL = 1e-9


# ------------------------------------------------------------------------------- uniform trees
def is_edge_transitive(graph: BlockGraph) -> bool:
    """Whether the graph without its isolated units is edge-transitive and connected: a single
    complete bipartite block, or a complete graph (all touched layers coupled to each other, every
    touched layer with two or more units having laterals)."""
    groups, _ = graph.layer_groups()
    if len(groups) != 1:
        return False
    if len(graph.blocks) == 1 and not graph.blocks[0].lateral:
        return True
    layers = groups[0]
    keys = {b.key for b in graph.blocks}
    for a in layers:
        if graph.layer_sizes[a] > 1 and (a, a) not in keys:
            return False
        for c in layers:
            if a < c and (a, c) not in keys:
                return False
    return True


def _quotient_resistance(graph: BlockGraph, key: tuple[int, int]) -> float:
    """Effective resistance between a unit of layer ``l`` and a unit of layer ``m`` (``key = (l,
    m)``; another unit of the same layer for laterals), unit conductances, exact.

    The potential of a unit current from ``i`` to ``j`` is constant on the other units of each layer
    (the permutations fixing ``i`` and ``j`` are automorphisms), so Kirchhoff's equations reduce to
    the quotient graph with classes ``{i}``, ``{j}`` and ``layer_k \\ {i, j}``, whose edge weights are
    ``|A| |B|`` between coupled classes.
    """
    l, m = key
    sizes = graph.layer_sizes
    coupled = {b.key for b in graph.blocks}
    layer_of = [l, m] + list(range(len(sizes)))
    count = [1, 1] + [sizes[k] - (k == l) - (k == m) for k in range(len(sizes))]
    n = len(count)
    s = np.zeros((n, n))
    for a in range(n):
        for c in range(a + 1, n):
            la, lc = sorted((layer_of[a], layer_of[c]))
            if (la, lc) in coupled and count[a] and count[c]:
                w = count[a] * count[c]
                s[a, c] = s[c, a] = -w
                s[a, a] += w
                s[c, c] += w
    rhs = np.zeros(n)
    rhs[0], rhs[1] = 1.0, -1.0
    phi = np.linalg.lstsq(s, rhs, rcond=None)[0]
    return float(phi[0] - phi[1])


def uniform_rho(graph: BlockGraph) -> tuple[float | Tensor, ...]:
    """Edge appearance probabilities of the uniform distribution over spanning trees, per block.

    ``(N - 1) / |E|`` on an edge-transitive graph, the block's effective resistance on other dense
    graphs (see the module docstring), and on a sparse graph (zero couplings are no edges:
    :attr:`BlockGraph.sparse`) the effective resistance of every edge, from the pseudo-inverse of
    the unit-level Laplacian, as a matrix per block (zero off the edges, one on a lateral block's
    diagonal). Always in the spanning-tree polytope of the model's own graph; 1 on every edge of a
    tree. On a periodic lattice this gives ``(N - 1) / |E|`` on its edges (about 1/2 on a square
    lattice) instead of the ``2 / N`` of the complete graph, so the bound depends on the couplings.
    """
    if not graph.blocks:
        return ()
    if graph.sparse:
        return _sparse_resistances(graph)
    if is_edge_transitive(graph):
        groups, _ = graph.layer_groups()
        n_touched = sum(graph.layer_sizes[l] for l in groups[0])
        r = (n_touched - 1) / graph.n_edges
        return tuple(r for _ in graph.blocks)
    return tuple(min(1.0, _quotient_resistance(graph, b.key)) for b in graph.blocks)


def _sparse_resistances(graph: BlockGraph) -> tuple[Tensor, ...]:
    """``R_eff(i, j)`` of every edge (unit conductances): ``(e_i - e_j)^T L^+ (e_i - e_j)`` with
    ``L^+`` the pseudo-inverse of the Laplacian, which handles several components at once."""
    adjacency = graph.adjacency().tocsr()
    adjacency = adjacency + adjacency.T
    degree = np.asarray(adjacency.sum(1)).ravel()
    laplacian = np.diag(degree) - adjacency.toarray()
    # L^+ = (L + P)^-1 - P with P the projector on L's null space (constant on each component);
    # P adds nothing to a resistance within a component, so (L + P)^-1 serves. A plain pinv (an
    # eigendecomposition) lost 2e-5 of Foster's sum on a dense 1,284-unit BM; the solve is exact.
    _, labels = connected_components(adjacency, directed=False)
    sizes = np.bincount(labels)
    projector = (labels[:, None] == labels[None, :]) / sizes[labels][:, None]
    pinv = np.linalg.inv(laplacian + projector)
    diag = np.diag(pinv)
    off = graph.offsets
    out = []
    for b in graph.blocks:
        l, m = b.key
        block = pinv[off[l] : off[l + 1], off[m] : off[m + 1]]
        r_eff = diag[off[l] : off[l + 1], None] + diag[None, off[m] : off[m + 1]] - 2.0 * block
        rho = torch.zeros(b.weights.shape, dtype=torch.float64)
        mask = b.edge_mask().cpu()
        rho[mask] = torch.as_tensor(np.clip(r_eff, 0.0, 1.0), dtype=torch.float64)[mask]
        if b.lateral:
            rho.fill_diagonal_(1.0)
        out.append(rho.to(graph.device))
    return tuple(out)


# ------------------------------------------------------------------------------------ trees
def _edge_coordinates(graph: BlockGraph, b: EdgeBlock) -> tuple[np.ndarray, np.ndarray]:
    """Global unit indices ``(rows, cols)``, ``rows < cols``, of a block's edges in the order of
    :func:`_block_values` (row-major; laterals: the upper triangle; only the edges of a sparse
    block)."""
    off = graph.offsets
    l, m = b.key
    i, j = (x.cpu().numpy() for x in torch.nonzero(_upper_edges(b), as_tuple=True))
    return i + off[l], j + off[m]


def _upper_edges(b: EdgeBlock) -> Tensor:
    """The block's edges as a bool matrix, a lateral block's upper triangle only."""
    mask = b.edge_mask()
    return torch.triu(mask, diagonal=1) if b.lateral else mask


def _block_values(b: EdgeBlock, x: Tensor) -> np.ndarray:
    """A per-pair matrix of a block as a vector over its edges (same order as :func:`_edge_coordinates`)."""
    x = x.detach().to(torch.float64)
    return x[_upper_edges(b).to(x.device)].cpu().numpy()


def max_weight_spanning_tree(graph: BlockGraph, weights: tuple[Tensor, ...]) -> np.ndarray:
    """A maximum-weight spanning tree (forest) for per-block edge weights, as ``(N - c, 2)`` global
    unit index pairs ``(p, q)``, ``p < q``.

    Computed by ``scipy.sparse.csgraph.minimum_spanning_tree`` on ``top + 1 - weights`` (positive,
    because scipy reads zeros as missing edges; every spanning forest has the same number of edges,
    so the shift does not change which is optimal).
    """
    rows, cols, vals = [], [], []
    for b, w in zip(graph.blocks, weights, strict=True):
        r, c = _edge_coordinates(graph, b)
        rows.append(r)
        cols.append(c)
        vals.append(_block_values(b, w))
    if not rows:
        return np.zeros((0, 2), dtype=np.int64)
    v = np.concatenate(vals)
    cost = (v.max() + 1.0) - v
    n = graph.n_nodes
    mat = coo_matrix((cost, (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)).tocsr()
    tree = minimum_spanning_tree(mat).tocoo()
    pairs = np.stack([np.minimum(tree.row, tree.col), np.maximum(tree.row, tree.col)], 1).astype(np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def tree_indicator(graph: BlockGraph, tree: np.ndarray) -> tuple[Tensor, ...]:
    """``1_T`` per block as float64 ``(n_l, n_m)`` matrices (laterals symmetric) on the graph's device.

    Raises ``BoltzkitError`` if a pair of ``tree`` is not an edge of the graph.
    """
    off = np.asarray(graph.offsets)
    p, q = tree[:, 0], tree[:, 1]
    lp = np.searchsorted(off, p, side="right") - 1
    lq = np.searchsorted(off, q, side="right") - 1
    used = np.zeros(len(tree), dtype=bool)
    out = []
    for b in graph.blocks:
        l, m = b.key
        sel = (lp == l) & (lq == m)
        used |= sel
        ind = torch.zeros(b.weights.shape, dtype=torch.float64)
        i = torch.as_tensor(p[sel] - off[l])
        j = torch.as_tensor(q[sel] - off[m])
        if b.lateral and bool((i == j).any()):
            raise BoltzkitError("a tree pairs a unit with itself", got=f"unit {int(p[sel][0])}")
        ind[i, j] = 1.0
        if b.lateral:
            ind[j, i] = 1.0
        if b.mask is not None and bool((ind.bool() & ~b.mask.cpu()).any()):
            bad = torch.nonzero(ind.bool() & ~b.mask.cpu())[0]
            raise BoltzkitError(
                "a tree uses a pair of units whose coupling is zero (no edge of the model's graph)",
                got=f"units {int(bad[0]) + off[l]} and {int(bad[1]) + off[m]}",
            )
        out.append(ind.to(graph.device))
    if not used.all():
        k = int(np.flatnonzero(~used)[0])
        raise BoltzkitError(
            "a tree uses a pair of units that the model does not couple",
            got=f"units {int(p[k])} and {int(q[k])}",
        )
    return tuple(out)


# --------------------------------------------------------------------------------- mixtures
#: A tree of a mixture with at most this weight (rounding left by a pairwise step) is dropped.
DROP_WEIGHT = 1e-12


@dataclass
class TreeMixture:
    """``rho = base_weight * base + sum_t weights[t] * 1_{trees[t]}``: a point of the spanning-tree
    polytope written as a convex combination.

    Attributes
    ----------
    base
        Per block, the uniform spanning-tree measure's ``rho`` (:func:`uniform_rho`).
    base_weight
        Its weight.
    trees
        Spanning forests, each ``(N - c, 2)`` global unit index pairs.
    weights
        Their weights.
    """

    base: tuple[float | Tensor, ...]
    base_weight: float = 1.0
    trees: list[np.ndarray] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)

    @classmethod
    def uniform(cls, graph: BlockGraph) -> TreeMixture:
        return cls(uniform_rho(graph))

    def step(self, tree: np.ndarray, gamma: float) -> None:
        """``rho <- (1 - gamma) rho + gamma 1_tree`` (a Frank-Wolfe step)."""
        self.base_weight *= 1.0 - gamma
        self.weights = [w * (1.0 - gamma) for w in self.weights]
        self._add(tree, float(gamma))

    def shift(self, away: int, tree: np.ndarray, gamma: float) -> None:
        """``rho <- rho + gamma (1_tree - atom)``: move weight ``gamma`` from atom ``away`` (``-1``: the
        base; else ``trees[away]``) to ``tree`` (a pairwise Frank-Wolfe step). A tree left without
        weight (up to rounding, ``DROP_WEIGHT``) is dropped."""
        if away < 0:
            self.base_weight = max(0.0, self.base_weight - gamma)
        else:
            self.weights[away] = max(0.0, self.weights[away] - gamma)
        self._add(tree, float(gamma))
        keep = [k for k, w in enumerate(self.weights) if w > DROP_WEIGHT]
        self.trees = [self.trees[k] for k in keep]
        self.weights = [self.weights[k] for k in keep]

    def _add(self, tree: np.ndarray, weight: float) -> None:
        """Add ``weight`` to ``tree`` (merged with an equal tree already present)."""
        for k, t in enumerate(self.trees):
            if t.shape == tree.shape and np.array_equal(t, tree):
                self.weights[k] += weight
                return
        self.trees.append(tree)
        self.weights.append(weight)

    def copy(self) -> TreeMixture:
        return TreeMixture(self.base, self.base_weight, list(self.trees), list(self.weights))

    def rho(self, graph: BlockGraph) -> tuple[float | Tensor, ...]:
        """Per block ``rho``: numbers while no tree was added, else matrices (lateral diagonal 1)."""
        if not self.trees:
            return tuple(self.base)
        out = [
            self.base_weight * r.clone()
            if isinstance(r, Tensor)
            else torch.full(b.weights.shape, self.base_weight * r, dtype=torch.float64, device=graph.device)
            for b, r in zip(graph.blocks, self.base, strict=True)
        ]
        for tree, w in zip(self.trees, self.weights, strict=True):
            for acc, ind in zip(out, tree_indicator(graph, tree), strict=True):
                acc.add_(ind, alpha=w)
        for b, acc in zip(graph.blocks, out, strict=True):
            if b.lateral:
                acc.fill_diagonal_(1.0)
        return tuple(out)

    def describe(self) -> dict[str, object]:
        return {"uniform_weight": self.base_weight, "n_trees": len(self.trees)}


def check_rho(graph: BlockGraph, mixture: TreeMixture, rho: tuple[float | Tensor, ...] | None = None) -> None:
    """Verify that ``mixture`` is a convex combination of spanning forests of ``graph`` (and of the
    uniform spanning-tree measure) and that ``rho`` equals it; raise ``BoltzkitError`` otherwise.

    Checks: weights non-negative and summing to 1; the base positive and at most 1 on the model's
    edges (zero off them), and summing over the edges to ``N - components`` (Foster's theorem,
    which the effective resistances satisfy);
    every tree has ``N - components`` edges of the graph and no cycle (it has as many connected
    components as the graph: a spanning forest); ``rho`` equals the combination on every edge.
    """
    n, c = graph.n_nodes, graph.n_components
    weights = [mixture.base_weight, *mixture.weights]
    if min(weights, default=0.0) < -ATOL or abs(sum(weights) - 1.0) > 1e-8:
        raise BoltzkitError("tree weights must be non-negative and sum to 1", got=weights)
    if len(mixture.base) != len(graph.blocks):
        raise BoltzkitError(
            "one base rho per block is needed", got=len(mixture.base), expected=len(graph.blocks)
        )
    total = 0.0
    for r, b in zip(mixture.base, graph.blocks, strict=True):
        on_edges = _upper_edges(b)
        values = r[on_edges] if isinstance(r, Tensor) else torch.tensor([float(r)], dtype=torch.float64)
        if isinstance(r, Tensor):
            off_edges = ~b.edge_mask()
            if b.lateral:
                off_edges.fill_diagonal_(False)  # a lateral block's diagonal is a placeholder
            if bool((r[off_edges] != 0).any()):
                raise BoltzkitError("the uniform spanning-tree rho must be zero off the model's edges")
        if values.numel() and not bool(((values > 0.0) & (values <= 1.0 + ATOL)).all()):
            raise BoltzkitError("the uniform spanning-tree rho must lie in (0, 1]", got=float(values.min()))
        total += float(values.sum()) if isinstance(r, Tensor) else float(r) * b.n_edges
    if abs(total - (n - c)) > 1e-8 * max(1, n):
        raise BoltzkitError(
            "the uniform spanning-tree rho does not sum to N - components over the edges",
            got=total,
            expected=n - c,
        )
    for tree in mixture.trees:
        if tree.shape != (n - c, 2):
            raise BoltzkitError(
                "a spanning forest has N - components edges", got=tree.shape, expected=(n - c, 2)
            )
        tree_indicator(graph, tree)  # every pair an edge of the graph
        adj = coo_matrix((np.ones(len(tree)), (tree[:, 0], tree[:, 1])), shape=(n, n))
        if connected_components(adj, directed=False)[0] != c:
            raise BoltzkitError("a tree has a cycle (it does not span every component)")
    if rho is None:
        return
    expect = mixture.rho(graph)
    for b, got, want in zip(graph.blocks, rho, expect, strict=True):
        g = got if isinstance(got, Tensor) else torch.full_like(b.weights, float(got))
        e = want if isinstance(want, Tensor) else torch.full_like(b.weights, float(want))
        diff = (g - e).abs()
        if b.lateral:
            diff.fill_diagonal_(0.0)
        if float(diff.max()) > ATOL:
            raise BoltzkitError(
                "rho is not the recorded convex combination of spanning trees", got=float(diff.max())
            )


__all__ = [
    "TreeMixture",
    "check_rho",
    "is_edge_transitive",
    "max_weight_spanning_tree",
    "tree_indicator",
    "uniform_rho",
]
