"""Loopy belief propagation and its tree-reweighted form, with messages as log-ratios; the Bethe
(and reweighted-Bethe) approximation of ``log Z``.

The model is a binary pairwise MRF in {0, 1} form (:mod:`boltzkit.variational.graph`): node fields
``theta_i`` (biases) and edge couplings ``W_ij``. A message is the log-ratio ``u_{i->j} = log
m_{i->j}(1) / m_{i->j}(0)`` (ALGORITHMS.md section 8). With edge appearance probabilities
``rho_ij`` (``rho = 1``: ordinary BP; Wainwright, Jaakkola & Willsky 2005 for ``rho < 1``)::

    cavity   A_{i\\j} = theta_i + sum_{k in N(i)} rho_ki u_{k->i} - u_{j->i}
    message  u_{i->j} = softplus(A_{i\\j} + W_ij / rho_ij) - softplus(A_{i\\j})
    damping  u <- damping u_old + (1 - damping) u_new        (in the log domain)

At a fixed point the node beliefs are ``b_i = sigma(theta_i + sum_k rho_ki u_{k->i})`` and the edge
beliefs ``b_ij(x_i, x_j) ∝ exp(A_{i\\j} x_i + A_{j\\i} x_j + W_ij x_i x_j / rho_ij)``, and the
value of the variational problem (S2 Eqs. 13 and 15; ALGORITHMS.md section 8) is::

    log Z_rho = sum_i theta_i b_i + sum_ij W_ij b_ij(1,1) + sum_i H(b_i) - sum_ij rho_ij I_ij,
    I_ij = H(b_i) + H(b_j) - H(b_ij)

which is the Bethe approximation for ``rho = 1`` (S2 Eqs. 10-13; exact on trees, neither bound in
general) and the tree-reweighted upper bound for ``rho`` in the spanning-tree polytope (S2 Eqs.
14-15; :mod:`boltzkit.variational.trw`). ``I_ij`` is also the negative gradient of the bound with
respect to ``rho_ij`` (used by Frank-Wolfe).

Messages are stored per coupling block as dense matrices aligned with ``W_lm``: ``forward[i, j] =
u_{i->j}`` (``i`` in layer ``l``, ``j`` in layer ``m``) and ``backward[i, j] = u_{j->i}``; a
lateral block has one matrix ``U[i, j] = u_{i->j}`` (its reverse messages are ``U^T``). A sweep
updates, layer by layer (0, 1, ...), all messages *out of* that layer: for an RBM, all
visible-to-hidden messages, then all hidden-to-visible ones. Every update is a few elementwise
operations on ``n_l x n_m`` matrices and one reduction; nothing is ``N x N``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzkit._numerics import softplus
from boltzkit.errors import BoltzkitError, warn
from boltzkit.models.boltzmann import BoltzmannMachine, binary_entropy
from boltzkit.variational.graph import BlockGraph
from boltzkit.variational.result import ConvergenceWarning, VariationalResult

#: Default settings of loopy BP and TRW message passing.
DAMPING = 0.5
TOL = 1e-9
MAX_ITER = 2000
CHECK_EVERY_GPU = 8

#: Edge appearance probabilities per block: a number (the same on every edge of the block) or an
#: ``(n_l, n_m)`` tensor (laterals: symmetric; the diagonal is not an edge and must be positive).
Rho = tuple[float | Tensor, ...]


@dataclass
class Messages:
    """Messages per block (see the module docstring); ``backward`` is ``None`` for laterals."""

    forward: list[Tensor]
    backward: list[Tensor | None]

    @classmethod
    def zeros(cls, graph: BlockGraph) -> Messages:
        fwd = [torch.zeros_like(b.weights) for b in graph.blocks]
        bwd = [None if b.lateral else torch.zeros_like(b.weights) for b in graph.blocks]
        return cls(fwd, bwd)

    @classmethod
    def from_means(cls, graph: BlockGraph, means: tuple[Tensor, ...]) -> Messages:
        """The messages a factorised distribution of ``means`` per layer would send: ``u_{i->j}
        = log(1 - m_i + m_i e^{W_ij})``, the message of unit ``i`` held at its mean (the
        message kernel at the cavity ``logit m_i``). A start of BP in the basin of a mean-field
        fixed point: an ordered model's modes, which zero messages may not reach."""
        eps = 1e-9
        logits = [torch.logit(m.to(torch.float64).clamp(eps, 1 - eps)) for m in means]

        def sent(cavity: Tensor, w: Tensor) -> Tensor:  # the message kernel, its cavity the sender's logit
            kernel = _MessageKernel(w)
            kernel.buffer.copy_(cavity.expand_as(w))
            return kernel.message()

        fwd, bwd = [], []
        for b in graph.blocks:
            l, m = b.key
            fwd.append(sent(logits[l][:, None], b.weights))
            bwd.append(None if b.lateral else sent(logits[m][None, :], b.weights))
        return cls(fwd, bwd)

    def clone(self) -> Messages:
        return Messages(
            [u.clone() for u in self.forward], [None if u is None else u.clone() for u in self.backward]
        )


@dataclass(frozen=True)
class BPState:
    """The outcome of one message-passing run.

    Attributes
    ----------
    log_z
        ``log Z_rho`` from the final messages (Bethe for ``rho = 1``).
    beliefs
        Node beliefs ``b_i(1)`` per layer, float64.
    logits
        Their log-odds ``theta_i + sum_k rho_ki u_{k->i}`` per layer.
    mutual_information
        ``I_ij`` per block, shape ``(n_l, n_m)`` (laterals symmetric, zero diagonal).
    messages
        The final messages (to warm-start another run).
    iterations, residual, converged
        Sweeps done, ``max |u_new - u_old|`` of the last sweep (undamped update), and whether it
        fell below ``tol``.
    """

    log_z: float
    beliefs: tuple[Tensor, ...]
    mutual_information: tuple[Tensor, ...]
    messages: Messages
    iterations: int
    residual: float
    converged: bool
    logits: tuple[Tensor, ...] = ()


def check_settings(damping: float, tol: float, max_iter: int) -> None:
    """Refuse settings that cannot work: damping outside ``[0, 1)``, ``tol <= 0``, ``max_iter < 1``."""
    if not (isinstance(damping, (int, float)) and 0.0 <= float(damping) < 1.0):
        raise BoltzkitError("damping must lie in [0, 1)", got=damping, hint="0.5 is a safe choice.")
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and float(tol) > 0.0):
        raise BoltzkitError("the tolerance must be a positive number", got=tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise BoltzkitError("max_iter must be a positive integer", got=max_iter)


def check_every(device: torch.device) -> int:
    """Sweeps between convergence checks: every sweep on the CPU; every 8th on a GPU, where reading
    the residual back to the host stalls the queue of small kernels (at most 7 extra sweeps)."""
    return 1 if device.type == "cpu" else CHECK_EVERY_GPU


def unit_rho(graph: BlockGraph) -> Rho:
    """``rho = 1`` on every edge (loopy BP)."""
    return tuple(1.0 for _ in graph.blocks)


def _effective_weights(graph: BlockGraph, rho: Rho) -> list[Tensor]:
    out = []
    for b, r in zip(graph.blocks, rho, strict=True):
        if isinstance(r, Tensor):
            if r.shape != b.weights.shape:
                raise BoltzkitError(
                    "rho has the wrong shape", got=tuple(r.shape), expected=tuple(b.weights.shape)
                )
            w = b.weights / torch.where(r > 0, r, torch.ones_like(r))  # no edge: W = 0, rho = 0
        else:
            if not float(r) > 0.0:
                raise BoltzkitError("edge appearance probabilities must be positive", got=r)
            w = b.weights if float(r) == 1.0 else b.weights / float(r)
        out.append(w)
    return out


def _weighted_sum(u: Tensor, r: float | Tensor, dim: int) -> Tensor:
    """``sum_dim rho * u``."""
    if isinstance(r, Tensor):
        return (u * r).sum(dim)
    s = u.sum(dim)
    return s if r == 1.0 else s * r


class _MessageKernel:
    """``u = softplus(A + w) - softplus(A)`` for a fixed ``w = W / rho``, in the form

        u = min(w, 0) + log1p(sigma(sign(w) A) * expm1(|w|))

    (for ``w >= 0``: ``log((1 + e^{A+w}) / (1 + e^A)) = log1p(sigma(A) (e^w - 1))``; for ``w < 0``
    the same with ``A -> -A`` after taking ``e^w`` out). The argument of ``log1p`` is never
    negative, so the result is accurate to a few ulps of ``|w|`` (better than the difference of two
    softplus, whose error grows with ``|A|``), and it costs one sigmoid and one ``log1p`` per edge
    instead of two softplus. ``sign(w)``, ``expm1(|w|)`` and ``min(w, 0)`` are computed once per
    run. Edges with ``|w| > 700`` (``expm1`` would overflow; only for tiny ``rho``) are recomputed
    as the softplus difference. The cavity fields are written into :attr:`buffer` by the caller.
    """

    BIG = 700.0

    def __init__(self, w: Tensor) -> None:
        self.w = w
        self.sign = torch.where(w < 0, -1.0, 1.0).to(w.dtype)
        self.gain = torch.expm1(w.abs().clamp(max=self.BIG))
        self.offset = w.clamp(max=0.0)
        big = (w.abs() > self.BIG).flatten()
        self.big = torch.nonzero(big).flatten() if bool(big.any()) else None
        self.buffer = torch.empty_like(w)

    def message(self) -> Tensor:
        """New messages from the cavity fields in :attr:`buffer` (overwritten and returned)."""
        a = self.buffer
        a_big = a.flatten()[self.big].clone() if self.big is not None else None
        a.mul_(self.sign)
        torch.sigmoid(a, out=a)
        a.mul_(self.gain)
        torch.log1p(a, out=a)
        a.add_(self.offset)
        if a_big is not None:
            w_big = self.w.flatten()[self.big]
            a.view(-1)[self.big] = softplus(a_big + w_big) - softplus(a_big)
        return a


class MessagePassing:
    """One message-passing run: messages, their ``rho``-weighted sums per layer, and the sweep.

    ``MessagePassing(graph, rho, messages).sweep(damping)`` updates every message once and returns
    the largest change as a 0-d tensor; :meth:`free_energy` evaluates ``log Z_rho``. :func:`propagate`
    drives it to convergence; the benchmark times :meth:`sweep` alone.
    """

    def __init__(self, graph: BlockGraph, rho: Rho, messages: Messages | None) -> None:
        self.graph = graph
        self.rho = rho
        self.weff = _effective_weights(graph, rho)
        self.kernels = [_MessageKernel(w) for w in self.weff]
        self.msgs = messages.clone() if messages is not None else Messages.zeros(graph)
        # contributions of each block to the incoming sums of each of its layers
        n = len(graph.layer_sizes)
        self.out_of: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # layer -> (block, side)
        for k, b in enumerate(graph.blocks):
            l, m = b.key
            if b.lateral:
                self.out_of[l].append((k, 2))
            else:
                self.out_of[l].append((k, 0))
                self.out_of[m].append((k, 1))
        self.contrib: dict[tuple[int, int], Tensor] = {}
        for k in range(len(graph.blocks)):
            for side in self._sides(k):
                self.contrib[(k, side)] = self._incoming(k, side)
        self.sums = [self._layer_sum(l) for l in range(n)]

    def _sides(self, k: int) -> tuple[int, ...]:
        return (2,) if self.graph.blocks[k].lateral else (0, 1)

    def _incoming(self, k: int, side: int) -> Tensor:
        """``sum rho u`` into the units of one side of block ``k`` (0: layer l, 1: layer m, 2: lateral)."""
        r = self.rho[k]
        if side == 0:
            return _weighted_sum(self.msgs.backward[k], r, 1)
        return _weighted_sum(self.msgs.forward[k], r, 0)

    def _layer_sum(self, layer: int) -> Tensor:
        parts = []
        for k, b in enumerate(self.graph.blocks):
            l, m = b.key
            if b.lateral and l == layer:
                parts.append(self.contrib[(k, 2)])
            elif not b.lateral and l == layer:
                parts.append(self.contrib[(k, 0)])
            elif not b.lateral and m == layer:
                parts.append(self.contrib[(k, 1)])
        if not parts:
            return torch.zeros_like(self.graph.fields[layer])
        total = parts[0]
        for x in parts[1:]:
            total = total + x
        return total

    def cavities(self, k: int) -> tuple[Tensor, Tensor]:
        """``A_{i\\j}`` and ``A_{j\\i}`` for every edge of block ``k``, each ``(n_l, n_m)``."""
        b = self.graph.blocks[k]
        l, m = b.key
        cav_l = self.graph.fields[l] + self.sums[l]
        if b.lateral:
            u = self.msgs.forward[k]
            return cav_l[:, None] - u.t(), cav_l[None, :] - u
        cav_m = self.graph.fields[m] + self.sums[m]
        return cav_l[:, None] - self.msgs.backward[k], cav_m[None, :] - self.msgs.forward[k]

    def sweep(self, damping: float, check: bool = True) -> Tensor | None:
        """One sweep; returns ``max |u_new - u_old|`` as a 0-d tensor (no host synchronisation), or
        ``None`` with ``check=False`` (then the damped update is a single ``lerp``: fewer kernels,
        which is what matters on a GPU)."""
        residual = torch.zeros((), dtype=torch.float64, device=self.graph.device) if check else None
        keep = 1.0 - damping
        for layer, outs in enumerate(self.out_of):
            if not outs:
                continue
            cav = self.graph.fields[layer] + self.sums[layer]
            touched: set[int] = set()
            for k, side in outs:
                b = self.graph.blocks[k]
                kern = self.kernels[k]
                if side == 0:  # l -> m: cavity at i in l without u_{j->i} = backward[i, j]
                    target = self.msgs.forward[k]
                    torch.sub(cav[:, None], self.msgs.backward[k], out=kern.buffer)
                elif side == 1:  # m -> l: cavity at j in m without u_{i->j} = forward[i, j]
                    target = self.msgs.backward[k]
                    torch.sub(cav[None, :], self.msgs.forward[k], out=kern.buffer)
                else:  # lateral i -> j: without u_{j->i} = U[j, i]
                    target = self.msgs.forward[k]
                    torch.sub(cav[:, None], self.msgs.forward[k].t(), out=kern.buffer)
                if check:
                    delta = kern.message().sub_(target)  # u_new - u_old
                    lo, hi = torch.aminmax(delta)  # one pass, no temporary
                    residual = torch.maximum(residual, torch.maximum(hi, -lo))
                    target.add_(delta, alpha=keep)
                else:
                    target.lerp_(kern.message(), keep)
                l, m = b.key
                if side == 0:
                    self.contrib[(k, 1)] = self._incoming(k, 1)
                    touched.add(m)
                elif side == 1:
                    self.contrib[(k, 0)] = self._incoming(k, 0)
                    touched.add(l)
                else:
                    self.contrib[(k, 2)] = self._incoming(k, 2)
                    touched.add(l)
            for m in touched:
                self.sums[m] = self._layer_sum(m)
        return residual

    def free_energy(self) -> tuple[float, tuple[Tensor, ...], tuple[Tensor, ...]]:
        """``log Z_rho``, node beliefs and mutual informations from the current messages."""
        g = self.graph
        beliefs, entropies = [], []
        total = torch.zeros((), dtype=torch.float64, device=g.device)
        for layer, theta in enumerate(g.fields):
            b = torch.sigmoid(theta + self.sums[layer])
            h = binary_entropy(b)
            beliefs.append(b)
            entropies.append(h)
            total = total + theta @ b + h.sum()
        infos = []
        for k, blk in enumerate(g.blocks):
            l, m = blk.key
            a_i, a_j = self.cavities(k)
            e11 = a_i + a_j + self.weff[k]
            log_terms = torch.stack((torch.zeros_like(e11), a_i, a_j, e11))
            lz = torch.logsumexp(log_terms, 0)
            p = torch.exp(log_terms - lz)
            h_edge = lz - (p * log_terms).sum(0)
            info = entropies[l][:, None] + entropies[m][None, :] - h_edge
            if blk.lateral:
                info.fill_diagonal_(0.0)
            infos.append(info)
            r = self.rho[k]
            weighted = info * r if isinstance(r, Tensor) else info * float(r)
            total = total + blk.edge_sum(blk.weights * p[3]) - blk.edge_sum(weighted)
        return float(total), tuple(beliefs), tuple(infos)


@torch.no_grad()
def propagate(
    graph: BlockGraph,
    rho: Rho | None = None,
    *,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    messages: Messages | None = None,
) -> BPState:
    """Run (tree-reweighted) belief propagation to a fixed point and evaluate ``log Z_rho``.

    Parameters
    ----------
    graph
        The model's graph (:meth:`BlockGraph.from_model`).
    rho
        Edge appearance probabilities per block (default: 1, loopy BP). Only ``rho`` in the
        spanning-tree polytope makes the value an upper bound (:mod:`boltzkit.variational.trw`).
    damping
        Weight of the old message in each update, in ``[0, 1)``.
    tol
        Stop when the largest change of an (undamped) message update is below ``tol``.
    max_iter
        At most this many sweeps.
    messages
        Start messages (copied), e.g. those of a previous run; default zeros.

    Returns
    -------
    BPState
    """
    check_settings(damping, tol, max_iter)
    rho = unit_rho(graph) if rho is None else tuple(rho)
    if len(rho) != len(graph.blocks):
        raise BoltzkitError("one rho per coupling block is needed", got=len(rho), expected=len(graph.blocks))
    engine = MessagePassing(graph, rho, messages)
    residual, converged, it = 0.0, True, 0
    every = check_every(graph.device)
    if graph.blocks:
        converged = False
        for it in range(1, max_iter + 1):  # noqa: B007 (the sweeps done are reported)
            if it % every and it < max_iter:
                engine.sweep(float(damping), check=False)
                continue
            residual = float(engine.sweep(float(damping)))
            if not math.isfinite(residual):
                break
            if residual < tol:
                converged = True
                break
    log_z, beliefs, infos = engine.free_energy()
    logits = tuple(theta + s for theta, s in zip(graph.fields, engine.sums, strict=True))
    return BPState(log_z, beliefs, infos, engine.msgs, it, residual, converged, logits)


def warn_unconverged(what: str, state: BPState, damping: float, max_iter: int) -> None:
    warn(
        f"{what} did not converge: residual {state.residual:.3g} after {state.iterations} sweeps "
        f"(damping {damping}, max_iter {max_iter}); the value is unreliable. Try "
        + ("more damping (e.g. --damping 0.8) or " if damping < 0.8 else "")
        + "more sweeps (--max-iter).",
        ConvergenceWarning,
    )


@torch.no_grad()
def bethe_log_z(
    model: BoltzmannMachine,
    *,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    means: tuple[Tensor, ...] | None = None,
    within: tuple[float, float] | None = None,
) -> VariationalResult:
    """The Bethe approximation of ``log Z`` by damped loopy BP (S2 Sec. 2.4, Eqs. 10-13).

    Exact on tree-structured models; in general neither a lower nor an upper bound
    (``bound="none"``). A :class:`ConvergenceWarning` is issued when BP did not converge.

    BP starts from zero messages and, given ``means`` (the marginals of a mean-field fixed
    point), also from the messages those means send (:meth:`Messages.from_means`); of the runs that
    converge, the one of largest value (least Bethe free energy) is kept (where none converges, the
    one of smallest residual, with a :class:`ConvergenceWarning`). An ordered model has
    several BP fixed points, and zero messages can settle in a minor mode's: a 3-3-3 DBM whose mode
    has layers on and off (log Z 150) gave 122.08 from zero messages, 150.00 from the mean-field
    start (a review of 2026-12-07).

    Parameters
    ----------
    model
        Any member of the family (float64 arithmetic whatever its dtype; on its device).
    damping, tol, max_iter
        See :func:`propagate`.
    means
        Mean-field marginals per layer (``variational_log_z`` passes the best of mean-field's
        starts); ``None``: zero messages only.
    within
        Where ``log Z`` certainly lies (the mean-field bound and a certain upper bound): runs
        inside it are preferred, converged or not, to runs outside.

    Returns
    -------
    VariationalResult
        ``marginals`` holds the node beliefs per layer.
    """
    t0 = time.perf_counter()
    graph = BlockGraph.from_model(model)
    runs = {"zero messages": propagate(graph, damping=damping, tol=tol, max_iter=max_iter)}
    if graph.blocks and means is not None:  # a second start, in a mean-field fixed point's basin
        start = Messages.from_means(graph, means)
        runs["mean-field means"] = propagate(
            graph, damping=damping, tol=tol, max_iter=max_iter, messages=start
        )
    if within is not None:  # runs at a value that cannot be log Z's are kept only if all are there
        inside = {name: s for name, s in runs.items() if within[0] <= s.log_z <= within[1]}
        judged = inside or runs
    else:
        judged = runs
    converged = {name: s for name, s in judged.items() if s.converged and math.isfinite(s.log_z)}
    # the Bethe approximation is the stationary point of least Bethe free energy: the largest value
    if converged:
        best = max(converged, key=lambda name: converged[name].log_z)
    else:  # none converged (said so below): the run nearest a fixed point
        residuals = {n: r.residual if math.isfinite(r.residual) else math.inf for n, r in judged.items()}
        best = min(residuals, key=residuals.__getitem__)
    state = runs[best]
    if not state.converged:
        warn_unconverged("loopy belief propagation", state, damping, max_iter)
    return VariationalResult(
        method="bethe",
        log_z=state.log_z,
        bound="none",
        converged=state.converged,
        iterations=state.iterations,
        residual=state.residual,
        seconds=time.perf_counter() - t0,
        settings={
            "damping": damping,
            "tol": tol,
            "max_iter": max_iter,
            "device": str(graph.device),
            "start": best,
            "start_values": {name: s.log_z for name, s in runs.items()},
            "start_residuals": {name: s.residual for name, s in runs.items()},
            "start_converged": {name: s.converged for name, s in runs.items()},
        },  # fmt: skip
        marginals=state.beliefs,
    )


__all__ = [
    "BPState",
    "MessagePassing",
    "Messages",
    "Rho",
    "bethe_log_z",
    "check_settings",
    "propagate",
    "unit_rho",
]
