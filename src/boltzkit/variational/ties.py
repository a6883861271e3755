"""Kink ties: node marginals held equal (or complementary) along edges that sit on their kink.

An edge whose effective coupling ``w = W / rho`` is large makes the TRW objective over node
marginals (:mod:`boltzkit.variational.node_objective`) *almost* non-differentiable: its optimal
table has odds ratio ``exp(w)``, so near ``mu_i = mu_j`` (``w > 0``; ``mu_i + mu_j = 1`` for ``w <
0``) two of its four entries are of order ``exp(-|w| / 2)``, and ``F`` behaves like ``W min(mu_i,
mu_j)`` smoothed over a width ``exp(-|w| / 2)`` (``1e-130`` for ``w = 600``, which an SRBM's
laterals reach with the uniform spanning-tree ``rho``). The optimum often lies on such kinks, at a
distance from them that float64 cannot represent; Newton's method then approaches the kink
geometrically, each step cut short by the curvature ``rho / |d|`` of the distance ``d``.

A *tie* puts the edge exactly on its kink: ``mu_j = mu_i`` (``w > 0``) or ``mu_j = 1 - mu_i`` (``w <
0``). Tied edges join units into *groups* with one free marginal each (a unit's marginal is ``m``
or ``1 - m`` of its group's ``m``, by its *sign*); a group closed by a cycle with an odd number of
complementary ties is *frustrated* and fixed at ``1/2``. Newton's method then runs on the group
marginals (:func:`reduce`), with each tied edge's curvature along its group taken from the stable
formula of :func:`boltzkit.variational.node_objective.evaluate` (no cancellation of the
``exp(|w| / 2)`` terms). How the split of a tied edge's table balances the gradient is left to the
certificate (:mod:`boltzkit.variational.certificate`), which also certifies the bound when a tie was
wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch import Tensor

from boltzkit.variational.graph import BlockGraph

#: Edges with ``|W / rho|`` at least this may be tied (their kink is sharper than ``exp(-30)``).
W_TIE = 60.0
#: An edge is tied once its distance to the kink is below this fraction of its marginals' scale.
TIE_DISTANCE = 1e-9


@dataclass(frozen=True)
class Groups:
    """Units grouped by ties.

    Attributes
    ----------
    label
        Group index per unit, ``(N,)`` long; ``-1`` for units of a frustrated group (fixed at 1/2).
    sign
        ``+1`` if the unit's marginal is its group's ``m``, ``-1`` if it is ``1 - m``; ``(N,)``
        float64.
    n_groups
        Number of free groups (the dimension of Newton's method).
    """

    label: Tensor
    sign: Tensor
    n_groups: int

    @property
    def fixed(self) -> Tensor:
        return self.label < 0

    @classmethod
    def singletons(cls, graph: BlockGraph) -> Groups:
        n = graph.n_nodes
        dev = graph.device
        return cls(torch.arange(n, device=dev), torch.ones(n, dtype=torch.float64, device=dev), n)

    def reduce(self, gradient: Tensor, hessian: Tensor) -> tuple[Tensor, Tensor]:
        """Gradient and Hessian with respect to the group marginals: ``P^T g`` and ``P^T H P`` with
        ``P[i, label_i] = sign_i`` (fixed units dropped); ``(n_groups,)`` and ``(n_groups,
        n_groups)``."""
        free = ~self.fixed
        lab, sg = self.label[free], self.sign[free]
        k = self.n_groups
        g = torch.zeros(k, dtype=gradient.dtype, device=gradient.device).index_add_(
            0, lab, gradient[free] * sg
        )
        h = hessian[free][:, free] * sg[:, None] * sg[None, :]
        rows = torch.zeros(k, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, lab, h)
        red = torch.zeros(k, k, dtype=h.dtype, device=h.device).index_add_(1, lab, rows)
        return g, red

    def expand(self, step: Tensor) -> Tensor:
        """A step of the group marginals as a step of the unit marginals ``(N,)`` (0 on fixed units)."""
        out = torch.zeros(self.label.shape, dtype=step.dtype, device=step.device)
        free = ~self.fixed
        out[free] = self.sign[free] * step[self.label[free]]
        return out

    def project(self, mu: Tensor) -> Tensor:
        """Logits ``(N,)`` of the nearest tie-consistent marginals: each group at the mean of its
        units' ``m`` (``mu`` or ``1 - mu`` by sign), frustrated groups at 1/2; units of one group get
        exactly equal or opposite logits."""
        free = ~self.fixed
        lab, sg = self.label[free], self.sign[free]
        m = torch.where(sg > 0, mu[free], 1.0 - mu[free])
        total = torch.zeros(self.n_groups, dtype=mu.dtype, device=mu.device).index_add_(0, lab, m)
        count = torch.zeros_like(total).index_add_(0, lab, torch.ones_like(m))
        zg = torch.logit(total / count)
        z = torch.zeros_like(mu)
        z[free] = sg * zg[lab]
        return z


def groups_from_ties(graph: BlockGraph, ties: list[Tensor]) -> Groups:
    """Groups of the tie graph with each unit's sign, and the frustrated groups.

    ``ties[k]`` is a boolean ``(n_l, n_m)`` mask of block ``k`` (laterals symmetric). A tie of an
    edge with ``W > 0`` says ``mu_i = mu_j``, with ``W < 0`` ``mu_i = 1 - mu_j``. Computed as the
    connected components of the doubled graph on ``(unit, +)`` and ``(unit, -)``: a unit whose two
    copies are connected lies on a frustrated cycle.
    """
    n = graph.n_nodes
    off = graph.offsets
    rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for blk, tie in zip(graph.blocks, ties, strict=True):
        if not bool(tie.any()):
            continue
        l, m = blk.key
        mask = torch.triu(tie, 1) if blk.lateral else tie
        i, j = torch.nonzero(mask, as_tuple=True)
        same = (blk.weights[i, j] > 0).cpu().numpy()
        gi = i.cpu().numpy() + off[l]
        gj = j.cpu().numpy() + off[m]
        rows += [gi, gi + n]
        cols += [np.where(same, gj, gj + n), np.where(same, gj + n, gj)]
    r, c = np.concatenate(rows), np.concatenate(cols)
    adj = coo_matrix((np.ones(len(r)), (r, c)), shape=(2 * n, 2 * n))
    _, comp = connected_components(adj, directed=False)
    plus, minus = comp[:n], comp[n:]
    fixed = plus == minus
    sign = np.where(plus < minus, 1.0, -1.0)
    key = np.minimum(plus, minus)[~fixed]
    uniq, label_free = np.unique(key, return_inverse=True)
    label = np.full(n, -1, dtype=np.int64)
    label[~fixed] = label_free
    dev = graph.device
    return Groups(
        torch.as_tensor(label, device=dev), torch.as_tensor(sign, dtype=torch.float64, device=dev), len(uniq)
    )


def kink_distances(graph: BlockGraph, mu: Tensor) -> list[Tensor]:
    """Per block, each edge's signed distance to its kink: ``mu_i - mu_j`` (``W >= 0``) or ``mu_i +
    mu_j - 1`` (``W < 0``), ``(n_l, n_m)``; ``mu`` flat ``(N,)``."""
    off = graph.offsets
    out = []
    for blk in graph.blocks:
        l, m = blk.key
        a = mu[off[l] : off[l + 1]][:, None]
        b = mu[off[m] : off[m + 1]][None, :]
        out.append(torch.where(blk.weights >= 0, a - b, a + b - 1.0))
    return out


def scale_of_edges(graph: BlockGraph, mu: Tensor) -> list[Tensor]:
    """Per block, ``min(mu_i, 1 - mu_i, mu_j, 1 - mu_j)`` of each edge, ``(n_l, n_m)``."""
    off = graph.offsets
    s = torch.minimum(mu, 1.0 - mu)
    out = []
    for blk in graph.blocks:
        l, m = blk.key
        out.append(torch.minimum(s[off[l] : off[l + 1]][:, None], s[off[m] : off[m + 1]][None, :]))
    return out


__all__ = [
    "TIE_DISTANCE",
    "W_TIE",
    "Groups",
    "groups_from_ties",
    "kink_distances",
    "scale_of_edges",
]
