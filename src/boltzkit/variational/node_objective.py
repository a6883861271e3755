"""The TRW objective as a function of the node marginals: closed-form edge marginals, gradient,
Hessian, Newton's method, and a certified upper bound from the concavity gap over the unit box.

For fixed node marginals ``mu`` the TRW problem (S2 Eq. 15) separates over edges: each edge's
2 x 2 table with margins ``(a, b) = (mu_i, mu_j)`` maximises ``W t + rho H(table)``, whose
solution has odds ratio ``b00 b11 / (b10 b01) = exp(w)``, ``w = W / rho``, and ``t = b11`` the
root of a quadratic (Welling & Teh 2001 for ``rho = 1``). So::

    F(mu) = sum_i [theta_i mu_i + (1 - sum_j rho_ij) H(mu_i)] + sum_ij [W_ij t_ij + rho_ij H(b_ij)]

is the TRW objective maximised over the edge variables. It is concave in ``mu`` (a partial maximum
of a jointly concave function over the local polytope), ``max F = log Z_TRW >= log Z`` for ``rho``
in the spanning-tree polytope, and its gradient is (envelope theorem)::

    g_i = theta_i - (1 - sum_j rho_ij) logit(mu_i) - sum_j rho_ij log(b_ij(1, 0) / b_ij(0, 0))

Concavity gives ``F(mu') <= F(mu) + g^T (mu' - mu)`` for every ``mu'`` in the box, hence the
**certified upper bound** at any interior ``mu``::

    log Z <= log Z_TRW <= U(mu) = F(mu) + sum_i max(g_i (1 - mu_i), -g_i mu_i)

with ``U - F`` (the gap) vanishing at the optimum.

Why this is needed: on large models with small ``rho`` (an RBM of 784 x 500 units has ``rho =
1283 / 392000``) tree-reweighted message passing converges only sublinearly: messages of strongly
coupled edges (``|w| = |W| / rho`` in the tens or hundreds) drift slowly towards saturation while
the node beliefs barely move, and there ``F`` is so sharply curved (second derivatives ``~ 1 /
b_ij``, with table entries ``~ exp(-|w| / 2)``) that first-order steps cannot finish. Newton's
method on ``F`` (the Hessian is ``N x N``: node terms on the diagonal, one closed-form entry per
edge; :func:`maximise`) finishes from the message-passing beliefs in a few steps, and the gap
certifies the result.

The tables are computed so that even entries of order ``exp(-|w|)`` keep their relative accuracy
(their logarithms enter the gradient): ``t`` and ``b00`` from rationalised roots whose discriminant
is a sum of non-negative terms, the two small entries from their product (the odds ratio) and
their difference (``a - b``), all in the log domain. Negative ``w`` is handled by flipping
``x_j``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.functional import logsigmoid

from boltzkit.variational.graph import BlockGraph
from boltzkit.variational.ties import (
    TIE_DISTANCE,
    W_TIE,
    Groups,
    groups_from_ties,
    kink_distances,
    scale_of_edges,
)

LOG2 = math.log(2.0)
LOG4 = math.log(4.0)
#: Node logits are clipped to this range (marginals within ~1e-304 of 0 or 1).
Z_CLIP = 690.0
#: Newton stops when the last STALL steps neither raised F beyond rounding nor cut its gradient by 10%.
STALL = 3
#: Edge curvatures are capped at about exp(LOG_CURVATURE_CAP) (see :func:`_edge_hessian`).
LOG_CURVATURE_CAP = 69.0
#: Newton's method is used up to this many units (a dense N x N Hessian); beyond, only the gap.
NEWTON_MAX_UNITS = 6000


def _log_abs_expm1(d: Tensor) -> Tensor:
    """``log |exp(d) - 1|`` without overflow (``-inf`` at 0)."""
    pos = d + torch.log1p(-torch.exp(-d.abs()))
    neg = torch.log(-torch.expm1(-d.abs()))
    return torch.where(d > 0, pos, neg)


@dataclass(frozen=True)
class EdgeTables:
    """Log-entries of the optimal edge tables of one block (each ``(n_l, n_m)``).

    ``log_b[x_i][x_j]``; ``a_i = log(b10 / b00)`` and ``a_j = log(b01 / b00)`` are the cavity fields
    of the edge at its two ends; ``entropy`` is ``H(b_ij)``.
    """

    log_b00: Tensor
    log_b01: Tensor
    log_b10: Tensor
    log_b11: Tensor

    @property
    def a_i(self) -> Tensor:
        return self.log_b10 - self.log_b00

    @property
    def a_j(self) -> Tensor:
        return self.log_b01 - self.log_b00

    @property
    def entropy(self) -> Tensor:
        h = torch.zeros_like(self.log_b00)
        for lb in (self.log_b00, self.log_b01, self.log_b10, self.log_b11):
            h = h - torch.where(lb > -math.inf, torch.exp(lb) * lb, torch.zeros_like(lb))
        return h


def edge_tables(z_i: Tensor, z_j: Tensor, w: Tensor) -> EdgeTables:
    """Optimal tables for margins ``sigma(z_i)`` (rows) and ``sigma(z_j)`` (columns), odds ratio
    ``exp(w)``. ``z_i``: ``(n_l, 1)`` or ``(n_l, n_m)``; ``z_j``: ``(1, n_m)`` or ``(n_l, n_m)``."""
    z_i = z_i.clamp(-Z_CLIP, Z_CLIP)
    z_j = z_j.clamp(-Z_CLIP, Z_CLIP)
    flip = w < 0
    zj = torch.where(flip, -z_j, z_j)  # x_j -> 1 - x_j makes w >= 0
    aw = w.abs()
    la, l1a = logsigmoid(z_i), logsigmoid(-z_i)
    lb, l1b = logsigmoid(zj), logsigmoid(-zj)
    a, a1, b, b1 = torch.exp(la), torch.exp(l1a), torch.exp(lb), torch.exp(l1b)
    kappa = torch.exp(-aw)
    k1 = -torch.expm1(-aw)  # 1 - kappa
    # e = a - b = -sigma(z_i) sigma(-zj) expm1(zj - z_i)
    log_abs_e = la + l1b + _log_abs_expm1(zj - z_i)
    e_pos = z_i >= zj
    e2 = torch.exp(2.0 * log_abs_e)
    disc = kappa * kappa + k1 * k1 * e2 + 2.0 * kappa * k1 * (a * b1 + b * a1)
    root = torch.sqrt(disc)
    log_t = LOG2 + la + lb - torch.log(kappa + k1 * (a + b) + root)
    log_d = LOG2 + l1a + l1b - torch.log(kappa + k1 * (a1 + b1) + root)
    log_p = -aw + log_t + log_d  # log(r s), the product of the anti-diagonal entries
    log_sq = 0.5 * torch.logaddexp(2.0 * log_abs_e, LOG4 + log_p)  # log sqrt(e^2 + 4 r s)
    log_small = LOG2 + log_p - torch.logaddexp(log_abs_e, log_sq)
    log_big = torch.logaddexp(log_small, log_abs_e)
    log_r = torch.where(e_pos, log_big, log_small)  # r = b10 = a - t
    log_s = torch.where(e_pos, log_small, log_big)  # s = b01 = b - t
    # undo the flip: true b(x_i, x_j) = flipped b(x_i, 1 - x_j)
    return EdgeTables(
        log_b00=torch.where(flip, log_s, log_d),
        log_b01=torch.where(flip, log_d, log_s),
        log_b10=torch.where(flip, log_t, log_r),
        log_b11=torch.where(flip, log_r, log_t),
    )


@dataclass(frozen=True)
class NodeEvaluation:
    """``F``, its gradient (and Hessian) and the certified bound at node logits ``z``.

    Attributes
    ----------
    bound
        ``U = F + gap``: an upper bound on ``log Z_TRW`` (hence on ``log Z``) for ``rho`` in the
        spanning-tree polytope.
    value
        ``F(mu)`` (at most ``log Z_TRW``; equal at the optimum).
    gap
        ``U - F >= 0``.
    gradient
        ``dF / dmu``, flat ``(N,)`` (layers one after the other).
    marginals
        ``mu`` per layer.
    mutual_information
        ``I_ij`` per block from the closed-form tables (``-dF / drho_ij``).
    hessian
        ``d^2 F / dmu^2``, ``(N, N)``, when asked for.
    """

    bound: float
    value: float
    gap: float
    gradient: Tensor
    marginals: tuple[Tensor, ...]
    mutual_information: tuple[Tensor, ...]
    hessian: Tensor | None = None

    @property
    def gradient_norm(self) -> float:
        return float(self.gradient.abs().max()) if self.gradient.numel() else 0.0


def _block_rho(blk, r) -> Tensor:
    rr = r if isinstance(r, Tensor) else torch.full_like(blk.weights, float(r))
    if blk.lateral:
        rr = rr.clone()
        rr.fill_diagonal_(0.0)
    return rr


@torch.no_grad()
def evaluate(
    graph: BlockGraph,
    rho: tuple[float | Tensor, ...],
    logits: tuple[Tensor, ...],
    *,
    hessian: bool = False,
    groups: Groups | None = None,
) -> NodeEvaluation:
    """Evaluate ``F``, its gradient, the gap and (optionally) the Hessian at ``mu = sigma(z)``.

    ``rho`` per block as in :func:`~boltzkit.variational.bp.propagate` (numbers or matrices).
    With ``groups`` (:mod:`boltzkit.variational.ties`), an edge whose two units lie in one group
    contributes to the Hessian only its curvature along the group, ``V_aa + V_bb + 2 s V_ab`` (``s``
    the product of the units' signs), placed on the diagonal so that ``P^T H P``
    (:meth:`~boltzkit.variational.ties.Groups.reduce`) is exact: computed without cancellation
    (:func:`_edge_hessian`), whereas the three entries themselves are of order ``exp(|w| / 2)``
    on a kink.
    """
    z = [x.clamp(-Z_CLIP, Z_CLIP) for x in logits]
    mu = [torch.sigmoid(x) for x in z]
    ls = [(logsigmoid(x), logsigmoid(-x)) for x in z]
    ent = [-(torch.exp(p) * p + torch.exp(q) * q) for p, q in ls]
    degree = [torch.zeros_like(x) for x in z]  # sum_j rho_ij
    pull = [torch.zeros_like(x) for x in z]  # sum_j rho_ij A_ij (cavity field of i on edge ij)
    off = graph.offsets
    n = graph.n_nodes
    hess = torch.zeros(n, n, dtype=torch.float64, device=graph.device) if hessian else None
    total = torch.zeros((), dtype=torch.float64, device=graph.device)
    infos = []
    for blk, r in zip(graph.blocks, rho, strict=True):
        l, m = blk.key
        rr = _block_rho(blk, r)
        w = blk.weights / torch.where(rr > 0, rr, torch.ones_like(rr))
        tab = edge_tables(z[l][:, None], z[m][None, :], w)
        h_edge = tab.entropy
        info = ent[l][:, None] + ent[m][None, :] - h_edge
        if blk.lateral:
            info.fill_diagonal_(0.0)
        infos.append(info)
        total = total + blk.edge_sum(blk.weights * torch.exp(tab.log_b11) + rr * h_edge)
        degree[l] = degree[l] + rr.sum(1)
        pull[l] = pull[l] + (rr * tab.a_i).sum(1)
        if not blk.lateral:
            degree[m] = degree[m] + rr.sum(0)
            pull[m] = pull[m] + (rr * tab.a_j).sum(0)
        if hess is not None:
            rows, cols = slice(off[l], off[l + 1]), slice(off[m], off[m + 1])
            inside = None
            if groups is not None:
                lab_l, lab_m = groups.label[rows], groups.label[cols]
                inside = (lab_l[:, None] == lab_m[None, :]) & (lab_l[:, None] >= 0)
                if blk.lateral:
                    inside.fill_diagonal_(False)
                if not bool(inside.any()):
                    inside = None
            relative = None if inside is None else groups.sign[rows][:, None] * groups.sign[cols][None, :]
            v_aa, v_bb, v_ab, along = _edge_hessian(tab, rr, relative)
            d = torch.diagonal(hess)
            if inside is not None:
                zero = torch.zeros_like(v_ab)
                v_aa, v_bb, v_ab = (torch.where(inside, zero, v) for v in (v_aa, v_bb, v_ab))
                along = torch.where(inside, along, zero)
                d[rows] += (torch.triu(along, 1) if blk.lateral else along).sum(1)
            d[rows] += v_aa.sum(1)
            if blk.lateral:
                hess[rows, rows] += v_ab
            else:
                d[cols] += v_bb.sum(0)
                hess[rows, cols] += v_ab
                hess[cols, rows] += v_ab.t()
    grads, gap = [], torch.zeros((), dtype=torch.float64, device=graph.device)
    for layer, (theta, x, p, h) in enumerate(zip(graph.fields, z, mu, ent, strict=True)):
        total = total + theta @ p + ((1.0 - degree[layer]) * h).sum()
        g = theta - (1.0 - degree[layer]) * x - pull[layer]
        gap = gap + torch.where(g >= 0, g * torch.exp(ls[layer][1]), -g * p).sum()
        grads.append(g)
        if hess is not None:
            rows = slice(off[layer], off[layer + 1])
            torch.diagonal(hess)[rows] -= (1.0 - degree[layer]) / (p * torch.exp(ls[layer][1]))
    value, gap_f = float(total), float(gap)
    return NodeEvaluation(value + gap_f, value, gap_f, torch.cat(grads), tuple(mu), tuple(infos), hess)


def _edge_hessian(
    tab: EdgeTables, rr: Tensor, relative: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Second derivatives of ``V(a, b) = max_t [W t + rho H(table)]`` in the margins: with
    ``q = 1 / b`` and ``S = sum q`` (implicit differentiation of the odds-ratio condition)::

        V_aa = -rho (q00 + q10)(q01 + q11) / S,  V_bb = -rho (q00 + q01)(q10 + q11) / S,
        V_ab = rho (q01 q10 - q00 q11) / S

    The scale ``max q`` is capped at ``exp(LOG_CURVATURE_CAP)`` (edges whose smallest entry is
    below ``1e-30``; their true curvature overflows float64 once ``|w|`` is in the thousands, as
    in the far end of a Frank-Wolfe line search): Newton's method cannot move such a direction
    anyway. Where ``relative`` (``+1`` or ``-1`` per edge) is given, also the curvature along ``(1,
    relative)`` written as a sum of positive terms (the products ``q01 q10`` or ``q00 q11``, of
    order ``exp(|w|)`` on a kink, cancel analytically)::

        V_aa + V_bb + 2 V_ab = -rho [(q00 + q11)(q01 + q10) + 4 q00 q11] / S
        V_aa + V_bb - 2 V_ab = -rho [(q00 + q11)(q01 + q10) + 4 q01 q10] / S
    """
    lq = [-tab.log_b00, -tab.log_b01, -tab.log_b10, -tab.log_b11]
    top = torch.maximum(torch.maximum(lq[0], lq[1]), torch.maximum(lq[2], lq[3]))
    q00, q01, q10, q11 = (torch.exp(x - top) for x in lq)  # scaled by exp(-top): no overflow
    s = q00 + q01 + q10 + q11
    scale = torch.exp(top.clamp(max=LOG_CURVATURE_CAP))
    v_aa = -rr * (q00 + q10) * ((q01 + q11) / s) * scale
    v_bb = -rr * (q00 + q01) * ((q10 + q11) / s) * scale
    v_ab = rr * (q01 * q10 - q00 * q11) / s * scale
    along = None
    if (
        relative is not None
    ):  # in unscaled Q = 1 / b (capped): (Q00 + Q11) (q01 + q10) / s + 4 Q00 q11 / s ...
        big = [torch.exp(x.clamp(max=LOG_CURVATURE_CAP)) for x in lq]
        cross = torch.where(relative > 0, big[0] * q11, big[1] * q10) / s
        along = -rr * ((big[0] + big[3]) * ((q01 + q10) / s) + 4.0 * cross)
    return v_aa, v_bb, v_ab, along


@dataclass(frozen=True)
class NodeFit:
    """The outcome of :func:`maximise`.

    Attributes
    ----------
    evaluation
        At the final marginals (Hessian included).
    logits
        The final node log-odds per layer.
    steps
        Newton steps taken.
    ties
        Per block, the boolean mask of tied edges (:mod:`boltzkit.variational.ties`; laterals
        symmetric).
    n_ties
        Tied edges (a lateral pair counted once).
    """

    evaluation: NodeEvaluation
    logits: tuple[Tensor, ...]
    steps: int
    ties: tuple[Tensor, ...] = ()
    n_ties: int = 0


def _tie_candidates(graph: BlockGraph, rho: tuple[float | Tensor, ...]) -> list[Tensor]:
    """Per block, the edges sharp enough to be tied: ``|W / rho| >= W_TIE`` (not a lateral diagonal)."""
    out = []
    for blk, r in zip(graph.blocks, rho, strict=True):
        rr = _block_rho(blk, r)
        cand = (blk.weights.abs() >= W_TIE * rr) & (rr > 0)
        if blk.lateral:
            cand.fill_diagonal_(False)
        out.append(cand)
    return out


def _kink_is_optimal(
    graph: BlockGraph, rho: tuple[float | Tensor, ...], ev: NodeEvaluation, k: int, ii: Tensor, jj: Tensor
) -> Tensor:
    """Whether each edge ``(ii, jj)`` of block ``k`` (within ``TIE_DISTANCE`` of its kink) would stay
    on it if the rest of ``F`` were frozen: with ``u = (e_i - s e_j) / 2`` (``s = sign W``) and the
    edge's own slope ``V_u`` along ``u`` (``-rho (A_i - s A_j) / 2``), the external slope ``f = g.u -
    V_u`` must be balanced by an own slope on the kink, i.e. ``V_u(d = +delta) <= -f <= V_u(d =
    -delta)`` with ``d`` the distance to the kink and ``delta`` the tie distance (own slopes from the
    tables at ``d = +-delta``, a slightly narrower interval than the kink's: conservative)."""
    blk = graph.blocks[k]
    l, m = blk.key
    off = graph.offsets
    rr = _block_rho(blk, rho[k])[ii, jj]
    w = blk.weights[ii, jj] / rr
    s = torch.where(w >= 0, 1.0, -1.0).to(w.dtype)
    mu_i, mu_j = ev.marginals[l][ii], ev.marginals[m][jj]
    g_i, g_j = ev.gradient[off[l] + ii], ev.gradient[off[m] + jj]
    z_i = torch.logit(mu_i)

    def own(mu_b: Tensor) -> Tensor:
        tab = edge_tables(z_i, torch.logit(mu_b.clamp(1e-300, 1.0)), w)
        return -rr * (tab.a_i - s * tab.a_j) / 2.0

    external = (g_i - s * g_j) / 2.0 - own(mu_j)
    scale = torch.minimum(torch.minimum(mu_i, 1.0 - mu_i), torch.minimum(mu_j, 1.0 - mu_j))
    delta = TIE_DISTANCE * scale
    base = torch.where(w >= 0, mu_i, 1.0 - mu_i)  # mu_j on the kink
    # d = +delta: mu_j = mu_i - delta (W > 0) or 1 - mu_i + delta (W < 0)
    right = own(base - s * delta)
    left = own(base + s * delta)
    return (right <= -external) & (-external <= left)


@torch.no_grad()
def maximise(
    graph: BlockGraph,
    rho: tuple[float | Tensor, ...],
    logits: tuple[Tensor, ...],
    *,
    gap_tol: float = 1e-7,
    max_steps: int = 50,
    ties: tuple[Tensor, ...] | None = None,
) -> NodeFit:
    """Newton's method on the concave ``F(mu)`` from ``mu = sigma(logits)`` until the gap is at most
    ``gap_tol`` nats, ``F`` stops rising, or ``max_steps``.

    The steps are taken in the marginals of the tie groups (:mod:`boltzkit.variational.ties`; at the
    start every unit is its own group unless ``ties`` are given): each solves ``(-P^T H P + delta
    I) d = P^T g`` by Cholesky (``delta`` grows from 0 only if the factorisation fails), keeps
    ``mu`` inside the box (at most 99% of the way to its boundary) and halves the step until ``F``
    rises by a tenth of a per mille of the predicted amount (up to rounding). It stops when ``F``
    has been flat to rounding for ``STALL`` steps while the gradient in the group marginals has not
    shrunk by 10%. After each step, an
    edge with ``|W / rho| >= W_TIE`` that came within ``TIE_DISTANCE`` of its kink, and would stay
    there given the rest of the gradient (:func:`_kink_is_optimal`), is tied and its groups are
    merged at their mean. The gap reported here is the plain first-order one; on kinks it stays
    large even at the optimum, and :func:`boltzkit.variational.certificate.certify` computes the
    tight one.
    """
    sizes = graph.layer_sizes
    cand = _tie_candidates(graph, rho)
    tied = [torch.zeros_like(c) for c in cand] if ties is None else [t.clone() for t in ties]
    groups = groups_from_ties(graph, tied) if any(bool(t.any()) for t in tied) else Groups.singletons(graph)
    z = torch.cat([x.clamp(-Z_CLIP, Z_CLIP) for x in logits])
    if ties is not None:
        z = groups.project(torch.sigmoid(z))
    ev = evaluate(graph, rho, tuple(torch.split(z, sizes)), hessian=True, groups=groups)
    history: list[tuple[float, float]] = []
    steps = 0
    for steps in range(1, max_steps + 1):
        if ev.gap <= gap_tol or not math.isfinite(ev.value) or groups.n_groups == 0:
            steps -= 1
            break
        g_red, h_red = groups.reduce(ev.gradient, ev.hessian)
        history.append((ev.value, float(g_red.abs().max())))
        if len(history) > STALL:  # no progress: F flat to rounding and the reduced gradient not shrinking
            old_value, old_norm = history[-1 - STALL]
            if ev.value - old_value <= 1e-12 * max(1.0, abs(ev.value)) and history[-1][1] > 0.9 * old_norm:
                steps -= 1
                break
        neg = -h_red
        diag_scale = float(torch.diagonal(neg).abs().max())
        eye = torch.eye(len(neg), dtype=neg.dtype, device=neg.device)
        delta, chol = 0.0, None
        for _ in range(20):
            chol, info = torch.linalg.cholesky_ex(neg + delta * eye if delta else neg)
            if int(info) == 0:
                break
            delta = max(1e-12 * diag_scale, 10.0 * delta)
        else:
            break
        d = groups.expand(torch.cholesky_solve(g_red[:, None], chol)[:, 0])
        mu = torch.cat(ev.marginals)
        inf = torch.full_like(d, math.inf)
        room = torch.where(d > 0, (1.0 - mu) / d, torch.where(d < 0, -mu / d, inf))
        alpha = min(1.0, 0.99 * float(room.min())) if room.numel() else 1.0
        slope = float(ev.gradient @ d)
        noise = 1e-12 * max(1.0, abs(ev.value))
        new = None
        while alpha > 1e-12:
            zc = groups.project((mu + alpha * d).clamp(1e-300, 1.0))
            trial = evaluate(graph, rho, tuple(torch.split(zc, sizes)))
            if trial.value >= ev.value + 1e-4 * alpha * slope - noise:
                new = zc
                break
            alpha *= 0.5
        if new is None:
            break
        z = new
        ev = evaluate(graph, rho, tuple(torch.split(z, sizes)), hessian=True, groups=groups)
        if _add_ties(graph, rho, ev, cand, tied):
            groups = groups_from_ties(graph, tied)
            z = groups.project(torch.cat(ev.marginals))
            ev = evaluate(graph, rho, tuple(torch.split(z, sizes)), hessian=True, groups=groups)
    n_ties = sum(
        int(torch.triu(t, 1).sum()) if b.lateral else int(t.sum())
        for b, t in zip(graph.blocks, tied, strict=True)
    )
    return NodeFit(ev, tuple(torch.split(z, sizes)), steps, tuple(tied), n_ties)


def _add_ties(
    graph: BlockGraph,
    rho: tuple[float | Tensor, ...],
    ev: NodeEvaluation,
    cand: list[Tensor],
    tied: list[Tensor],
) -> bool:
    """Tie (in place) the candidate edges within ``TIE_DISTANCE`` of their kink that pass
    :func:`_kink_is_optimal`; whether any was added."""
    mu = torch.cat(ev.marginals)
    added = False
    for k, (dist, scale) in enumerate(zip(kink_distances(graph, mu), scale_of_edges(graph, mu), strict=True)):
        near = cand[k] & ~tied[k] & (dist.abs() <= TIE_DISTANCE * scale)
        if graph.blocks[k].lateral:
            near = torch.triu(near, 1)
        if not bool(near.any()):
            continue
        ii, jj = torch.nonzero(near, as_tuple=True)
        keep = _kink_is_optimal(graph, rho, ev, k, ii, jj)
        if not bool(keep.any()):
            continue
        ii, jj = ii[keep], jj[keep]
        tied[k][ii, jj] = True
        if graph.blocks[k].lateral:
            tied[k][jj, ii] = True
        added = True
    return added


__all__ = [
    "NEWTON_MAX_UNITS",
    "EdgeTables",
    "NodeEvaluation",
    "NodeFit",
    "edge_tables",
    "evaluate",
    "maximise",
]
