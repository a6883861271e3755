"""The tree-reweighted upper bound on ``log Z`` and the optimisation of its edge probabilities.

For edge appearance probabilities ``rho`` in the spanning-tree polytope of the model's graph, the
tree-reweighted entropy ``H~(mu) = sum_i H_i - sum_ij rho_ij I_ij`` bounds the entropy from above,
and its variational problem over the local polytope bounds ``log Z`` from above (S2 Sec. 2.5, Eqs.
14-15; Wainwright, Jaakkola & Willsky 2005). The problem is convex. It is solved in two stages:

1. tree-reweighted message passing (:func:`boltzkit.variational.bp.propagate` with ``rho``; damped,
   messages as log-ratios), whose fixed point is the optimum;
2. Newton's method on the same objective written as a concave function of the node marginals
   (:mod:`boltzkit.variational.node_objective`), started from the message-passing beliefs; it
   finishes what message passing cannot on large models with small ``rho`` (sublinear drift of
   saturating messages), and its concavity gap *certifies* the bound.

The reported value is the certified ``U = F(mu) + gap`` (``gap`` = first-order concavity gap over
the unit box), which is an upper bound on ``log Z`` (up to rounding) at *any* ``mu``; the run is
``converged`` when ``gap <= gap_tol`` nats, i.e. when ``U`` is within ``gap_tol`` of the TRW
optimum for this ``rho``. ALGORITHMS.md section 8 warns that the message-passing value is a bound
only at the converged optimum; the certificate removes that caveat, and the gap and the
message-passing residual are both reported.

The bound is convex in ``rho`` with gradient ``-I_ij`` (mutual informations of the optimal edge
tables), so ``rho`` is optimised by conditional gradient (Frank-Wolfe) over the polytope, as S2
Sec. 5.1 did: the linear minimisation is a maximum-weight spanning tree on the weights ``I_ij``
(:func:`~boltzkit.variational.spanning.max_weight_spanning_tree`), the step ``rho <- (1 - gamma) rho
+ gamma 1_T`` keeps ``rho`` a convex combination of spanning trees, and ``gamma`` comes from a line
search (regula falsi on the derivative ``-sum I(gamma) (1_T - rho)``); a step is taken only if the
objective went down, and the reported bound is the smallest certified ``U`` met, so it decreases
monotonically. The start is the uniform distribution over spanning trees
(:func:`~boltzkit.variational.spanning.uniform_rho`): ``(N - 1) / |E|`` on edge-transitive graphs,
the block effective resistances otherwise. The Frank-Wolfe duality gap ``sum I (1_T - rho)`` bounds
how far the bound is above its optimum over ``rho``; steps stop when it is below ``fw_tol``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.variational.bp import DAMPING, TOL, Messages, check_settings, propagate
from boltzkit.variational.graph import BlockGraph
from boltzkit.variational.node_objective import NEWTON_MAX_UNITS, evaluate, maximise
from boltzkit.variational.result import ConvergenceWarning, VariationalResult
from boltzkit.variational.spanning import (
    TreeMixture,
    check_rho,
    is_edge_transitive,
    max_weight_spanning_tree,
    tree_indicator,
)

#: ``rho`` choices of :func:`trw_log_z`.
RHO_CHOICES = ("uniform", "optimized")

#: Message sweeps before Newton takes over (messages that converge stop earlier).
MAX_ITER = 500
#: Certified gap (nats) at which a TRW solve counts as converged; Newton steps per solve.
GAP_TOL = 1e-6
NEWTON_STEPS = 30
#: Frank-Wolfe defaults: at most this many steps, stop when the duality gap (nats) is below FW_TOL.
FW_STEPS = 30
FW_TOL = 1e-3
#: Evaluations of the bound per line search, and the largest step (keeps every rho_ij > 0).
LINE_SEARCH_EVALS = 8
GAMMA_MAX = 0.999
#: Newton steps per line-search solve (warm-started next to a solved point).
LINE_SEARCH_NEWTON_STEPS = 10


@dataclass(frozen=True)
class TRWSolution:
    """TRW at one ``rho``.

    Attributes
    ----------
    bound
        The certified upper bound ``U = F + gap``.
    value
        ``F(mu)`` at the final node marginals (at most the TRW optimum).
    gap
        ``U - F``.
    converged
        ``gap <= gap_tol``.
    logits
        Node log-odds per layer (to warm-start another solve).
    mutual_information
        ``I_ij`` per block (``-d bound / d rho``).
    marginals
        Node marginals per layer.
    messages, sweeps, residual
        Message passing: final messages (``None`` when skipped), sweeps, final residual.
    newton_steps
        Newton steps taken.
    """

    bound: float
    value: float
    gap: float
    converged: bool
    logits: tuple[Tensor, ...]
    mutual_information: tuple[Tensor, ...]
    marginals: tuple[Tensor, ...]
    messages: Messages | None
    sweeps: int
    residual: float
    newton_steps: int


@torch.no_grad()
def solve(
    graph: BlockGraph,
    rho: tuple[float | Tensor, ...],
    *,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    gap_tol: float = GAP_TOL,
    newton_steps: int = NEWTON_STEPS,
    logits: tuple[Tensor, ...] | None = None,
    messages: Messages | None = None,
) -> TRWSolution:
    """TRW at ``rho``: message passing (unless ``logits`` are given: a warm start for Newton), then
    Newton's method on the node marginals (models of at most ``NEWTON_MAX_UNITS`` units), then the
    certificate.

    Parameters
    ----------
    graph, rho
        The model's graph and the edge appearance probabilities per block (in the polytope for the
        result to be a bound: :mod:`boltzkit.variational.spanning`).
    damping, tol, max_iter
        Message passing (:func:`~boltzkit.variational.bp.propagate`).
    gap_tol, newton_steps
        Newton stops at a certified gap of ``gap_tol`` nats or after ``newton_steps`` steps.
    logits, messages
        Warm starts: node log-odds (skip message passing) or messages.
    """
    sweeps, residual, msgs = 0, math.nan, None
    if logits is None or graph.n_nodes > NEWTON_MAX_UNITS:
        state = propagate(graph, rho, damping=damping, tol=tol, max_iter=max_iter, messages=messages)
        logits, sweeps, residual, msgs = state.logits, state.iterations, state.residual, state.messages
    steps = 0
    if graph.n_nodes <= NEWTON_MAX_UNITS and graph.blocks:
        fit = maximise(graph, rho, logits, gap_tol=gap_tol, max_steps=newton_steps)
        ev, logits, steps = fit.evaluation, fit.logits, fit.steps
    else:
        ev = evaluate(graph, rho, logits)
    converged = math.isfinite(ev.bound) and ev.gap <= gap_tol
    return TRWSolution(
        ev.bound, ev.value, ev.gap, converged, logits, ev.mutual_information, ev.marginals, msgs, sweeps,
        residual, steps,
    )  # fmt: skip


@dataclass
class FrankWolfeFit:
    """The outcome of :func:`frank_wolfe`.

    Attributes
    ----------
    solution
        TRW at the best ``rho`` (smallest certified bound).
    rho
        That ``rho`` per block.
    mixture
        ``rho`` as a convex combination of the uniform spanning-tree measure and trees.
    history
        The best certified bound after each accepted step (``history[0]``: at the start); never
        increases.
    gaps
        The Frank-Wolfe duality gap at each step's start.
    runs, total_sweeps, newton_steps
        TRW solves (line-search evaluations included), their message sweeps and Newton steps.
    stop
        Why the iterations ended: ``"gap"``, ``"steps"``, ``"no decrease"`` or ``"start failed"``.
    """

    solution: TRWSolution
    rho: tuple[float | Tensor, ...]
    mixture: TreeMixture
    history: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    runs: int = 0
    total_sweeps: int = 0
    newton_steps: int = 0
    stop: str = ""


def _edge_dot(graph: BlockGraph, a: tuple[Tensor, ...], b: tuple[Tensor, ...]) -> float:
    return float(sum(blk.edge_sum(x * y) for blk, x, y in zip(graph.blocks, a, b, strict=True)))


def _as_tensors(graph: BlockGraph, rho: tuple[float | Tensor, ...]) -> tuple[Tensor, ...]:
    out = []
    for b, r in zip(graph.blocks, rho, strict=True):
        t = r.clone() if isinstance(r, Tensor) else torch.full_like(b.weights, float(r))
        if b.lateral:
            t.fill_diagonal_(1.0)
        out.append(t)
    return tuple(out)


def _move(
    graph: BlockGraph, rho: tuple[Tensor, ...], d: tuple[Tensor, ...], gamma: float
) -> tuple[Tensor, ...]:
    out = []
    for b, r, x in zip(graph.blocks, rho, d, strict=True):
        t = r + gamma * x
        if b.lateral:
            t.fill_diagonal_(1.0)
        out.append(t)
    return tuple(out)


@torch.no_grad()
def frank_wolfe(
    graph: BlockGraph,
    *,
    steps: int = FW_STEPS,
    fw_tol: float = FW_TOL,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    gap_tol: float = GAP_TOL,
    line_search_evals: int = LINE_SEARCH_EVALS,
    start: TreeMixture | None = None,
) -> FrankWolfeFit:
    """Minimise the TRW bound over ``rho`` by conditional gradient (S2 Sec. 5.1).

    Parameters
    ----------
    graph
        The model's graph.
    steps
        At most this many Frank-Wolfe steps (0: solve at the start only).
    fw_tol
        Stop when the duality gap falls below this (nats).
    damping, tol, max_iter, gap_tol
        TRW solves (:func:`solve`); line-search evaluations are warm-started from the nearest
        evaluated point's node marginals (Newton only).
    line_search_evals
        TRW solves per line search.
    start
        The starting mixture (default: the uniform spanning-tree measure).

    Returns
    -------
    FrankWolfeFit
    """
    check_settings(damping, tol, max_iter)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise BoltzkitError("the number of Frank-Wolfe steps must be a non-negative integer", got=steps)
    mixture = start if start is not None else TreeMixture.uniform(graph)
    check_rho(graph, mixture)
    rho: tuple[float | Tensor, ...] = mixture.rho(graph)
    kw = {"damping": damping, "tol": tol, "max_iter": max_iter, "gap_tol": gap_tol}
    sol = solve(graph, rho, **kw)
    fit = FrankWolfeFit(sol, rho, mixture, [sol.bound], [], 1, sol.sweeps, sol.newton_steps)
    if not math.isfinite(sol.value):
        fit.stop = "start failed"
        return fit
    fit.stop = "steps"
    best, best_rho = sol, rho
    best_weights = (mixture.base_weight, list(mixture.weights), len(mixture.trees))
    for _ in range(steps):
        tree = max_weight_spanning_tree(graph, sol.mutual_information)
        s = tree_indicator(graph, tree)
        r = _as_tensors(graph, rho)
        d = tuple(a - b for a, b in zip(s, r, strict=True))
        gap = _edge_dot(graph, sol.mutual_information, d)
        fit.gaps.append(gap)
        if gap <= fw_tol:
            fit.stop = "gap"
            break
        gamma, new, runs, sweeps, newton = _line_search(graph, r, d, sol, gap, line_search_evals, kw)
        fit.runs += runs
        fit.total_sweeps += sweeps
        fit.newton_steps += newton
        if gamma <= 0.0:
            fit.stop = "no decrease"
            break
        rho = _move(graph, r, d, gamma)
        mixture.step(tree, gamma)
        sol = new
        if sol.bound < best.bound:
            best, best_rho = sol, rho
            best_weights = (mixture.base_weight, list(mixture.weights), len(mixture.trees))
        fit.history.append(best.bound)
    if best_weights[2] < len(mixture.trees):  # the best rho came before the last step
        base_weight, weights, n_trees = best_weights
        mixture = TreeMixture(mixture.base, base_weight, mixture.trees[:n_trees], weights)
    fit.solution, fit.rho, fit.mixture = best, best_rho, mixture
    check_rho(graph, mixture, best_rho)
    return fit


def usable(sol: TRWSolution) -> bool:
    """A solve whose value can guide Frank-Wolfe: converged, or at least finite with a gap far below
    the value (on large models with small ``rho`` the certified gap stalls at a small fraction of a
    nat while ``F`` itself has converged)."""
    return sol.converged or (math.isfinite(sol.value) and sol.gap <= 1e-3 * max(1.0, abs(sol.value)))


def _line_search(graph, rho, d, sol0: TRWSolution, gap: float, evals: int, kw):
    """Minimise ``F`` along ``rho + gamma d``, ``0 < gamma <= GAMMA_MAX``: regula falsi (Illinois) on
    the derivative ``-sum I(gamma) d``, which is ``-gap < 0`` at 0. Returns the best converged point
    that lowers ``F`` (``gamma = 0`` if none), with the solves, sweeps and Newton steps used."""
    best_gamma, best = 0.0, sol0
    tried: list[tuple[float, TRWSolution]] = [(0.0, sol0)]
    used = [0, 0, 0]

    def evaluate_at(gamma: float) -> tuple[TRWSolution, float]:
        nonlocal best_gamma, best
        warm = min(tried, key=lambda t: abs(t[0] - gamma))[1]
        st = solve(
            graph, _move(graph, rho, d, gamma), logits=warm.logits, messages=warm.messages,
            newton_steps=LINE_SEARCH_NEWTON_STEPS, **kw,
        )  # fmt: skip
        used[0] += 1
        used[1] += st.sweeps
        used[2] += st.newton_steps
        if usable(st):
            tried.append((gamma, st))
            if st.value < best.value:
                best_gamma, best = gamma, st
        return st, -_edge_dot(graph, st.mutual_information, d)

    lo, dlo = 0.0, -gap
    hi = GAMMA_MAX
    st, dhi = evaluate_at(hi)
    if usable(st) and dhi <= 0.0:
        return best_gamma, best, *used
    if not usable(st):
        dhi = abs(dlo)
    side = 0
    for _ in range(max(0, evals - 1)):
        width = hi - lo
        g = (lo * dhi - hi * dlo) / (dhi - dlo)
        g = min(max(g, lo + 1e-3 * width), hi - 1e-3 * width)
        st, dg = evaluate_at(g)
        if not usable(st):  # treat as past the minimum
            hi, dhi, side = g, abs(dlo), 0
            continue
        if abs(dg) <= 1e-3 * gap or width < 1e-9:
            break
        if dg < 0.0:
            lo, dlo = g, dg
            if side == -1:
                dhi *= 0.5
            side = -1
        else:
            hi, dhi = g, dg
            if side == 1:
                dlo *= 0.5
            side = 1
    return best_gamma, best, *used


@torch.no_grad()
def trw_log_z(
    model: BoltzmannMachine,
    *,
    rho: str = "optimized",
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    gap_tol: float = GAP_TOL,
    fw_steps: int = FW_STEPS,
    fw_tol: float = FW_TOL,
    line_search_evals: int = LINE_SEARCH_EVALS,
) -> VariationalResult:
    """Tree-reweighted upper bound on ``log Z`` (S2 Sec. 2.5, Eq. 15), certified.

    Parameters
    ----------
    model
        Any member of the family (float64 arithmetic; on the model's device).
    rho
        ``"uniform"``: the uniform distribution over spanning trees (``(N - 1) / |E|`` on an RBM
        or a fully coupled BM, the block effective resistances on other structures);
        ``"optimized"``: that start improved by Frank-Wolfe (:func:`frank_wolfe`).
    damping, tol, max_iter
        Message passing.
    gap_tol
        Convergence: the certified gap (nats) to the TRW optimum at the final ``rho``.
    fw_steps, fw_tol, line_search_evals
        Frank-Wolfe (``rho="optimized"`` only).

    Returns
    -------
    VariationalResult
        ``log_z`` is the certified bound ``U``; ``bound="upper"`` when it is finite (it bounds
        ``log Z`` whether or not the solver converged); ``converged`` when ``gap <= gap_tol``
        (else a :class:`ConvergenceWarning`); ``iterations`` and ``residual`` are the message
        sweeps and residual of the final solve. Settings: ``gap``, ``primal_value`` (``F``),
        ``newton_steps``, ``rho``, ``rho_start`` and, for ``"optimized"``, ``fw_steps``, ``fw_gap``,
        ``fw_stop``, ``fw_history``, ``trw_runs``, ``total_sweeps``.
    """
    if rho not in RHO_CHOICES:
        raise BoltzkitError("unknown rho", got=rho, expected=" or ".join(repr(r) for r in RHO_CHOICES))
    t0 = time.perf_counter()
    graph = BlockGraph.from_model(model)
    fit = frank_wolfe(
        graph,
        steps=fw_steps if rho == "optimized" else 0,
        fw_tol=fw_tol,
        damping=damping,
        tol=tol,
        max_iter=max_iter,
        gap_tol=gap_tol,
        line_search_evals=line_search_evals,
    )
    sol = fit.solution
    if not sol.converged:
        warnings.warn(
            f"TRW did not converge to the requested gap: the certified bound is up to {sol.gap:.3g} nats "
            f"above the TRW optimum (message residual {sol.residual:.3g} after {sol.sweeps} sweeps, "
            f"{sol.newton_steps} Newton steps); it is still an upper bound on log Z",
            ConvergenceWarning,
            stacklevel=3,
        )
    base = fit.mixture.base
    alike = is_edge_transitive(graph) or (len(base) > 0 and max(base) - min(base) <= 1e-12 * max(base))
    start = (
        "(N-1)/|E| (uniform over spanning trees, alike on all edges)"
        if alike
        else ("uniform over spanning trees (block effective resistances)")
    )
    settings = {
        "rho": rho,
        "rho_start": start,
        "gap": sol.gap,
        "gap_tol": gap_tol,
        "primal_value": sol.value,
        "newton_steps": sol.newton_steps,
        "damping": damping,
        "tol": tol,
        "max_iter": max_iter,
        "device": str(graph.device),
        "trw_runs": fit.runs,
        "total_sweeps": fit.total_sweeps,
    }
    if rho == "optimized":
        settings.update(
            fw_steps=len(fit.history) - 1,
            fw_gap=fit.gaps[-1] if fit.gaps else None,
            fw_stop=fit.stop,
            fw_history=fit.history,
            uniform_weight=fit.mixture.base_weight,
        )
    return VariationalResult(
        method="trw",
        log_z=sol.bound,
        bound="upper" if math.isfinite(sol.bound) else "none",
        converged=sol.converged,
        iterations=sol.sweeps,
        residual=sol.residual,
        seconds=time.perf_counter() - t0,
        settings=settings,
        marginals=sol.marginals,
    )


__all__ = [
    "FW_STEPS",
    "FW_TOL",
    "RHO_CHOICES",
    "FrankWolfeFit",
    "TRWSolution",
    "frank_wolfe",
    "solve",
    "trw_log_z",
]
