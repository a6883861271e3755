"""The tree-reweighted upper bound on ``log Z`` and the optimisation of its edge probabilities.

For edge appearance probabilities ``rho`` in the spanning-tree polytope of the model's graph, the
tree-reweighted entropy ``H~(mu) = sum_i H_i - sum_ij rho_ij I_ij`` bounds the entropy from above,
and its variational problem over the local polytope bounds ``log Z`` from above (S2 Sec. 2.5, Eqs.
14-15; Wainwright, Jaakkola & Willsky 2005). The problem is convex. It is solved in three stages:

1. tree-reweighted message passing (:func:`boltzkit.variational.bp.propagate` with ``rho``; damped,
   messages as log-ratios) for a start: its fixed point is the optimum, but on large models with
   small ``rho`` it does not converge (the residual of S2's Table 1 SRBM stays at 0.02);
2. Newton's method on the same objective written as a concave function ``F`` of the node marginals
   (:mod:`boltzkit.variational.node_objective`), with the edges that reach their kink tied
   (:mod:`boltzkit.variational.ties`), which finishes what message passing cannot;
3. the certificate: the plain first-order one of ``F``, and where it is not tight (the optimum
   sits on kinks, where ``F``'s gradient is one of two one-sided slopes) the dual certificate of
   :mod:`boltzkit.variational.certificate`, which balances the slopes with the edges' own
   linearisation points.

The reported value is the certified ``U`` (``U - F`` is the gap), an upper bound on ``log Z`` (up
to rounding) at *any* ``mu``; the run is ``converged`` when the gap is at most ``gap_tol`` nats
(default: ``max(GAP_TOL, REL_GAP_TOL |F|)``), i.e. ``U`` is within that of the TRW optimum for this
``rho``. ALGORITHMS.md section 8
warns that the message-passing value is a bound only at the converged optimum; the certificate
removes that caveat, and the gap and the message-passing residual are both reported.

The bound is convex in ``rho`` with gradient ``-I_ij`` (mutual informations of the optimal edge
tables), so ``rho`` is optimised by conditional gradient (Frank-Wolfe) over the polytope, as S2 Sec.
5.1 did: the linear minimisation is a maximum-weight spanning tree on the weights ``I_ij``
(:func:`~boltzkit.variational.spanning.max_weight_spanning_tree`). ``rho`` is kept as a convex
combination of spanning trees (and the start), and each step moves weight to the new tree ``T``: by
default a pairwise step ``rho <- rho + gamma (1_T - A)`` from the atom ``A`` of the combination with
the smallest ``sum I A`` (Lacoste-Julien & Jaggi 2015: on a polytope, pairwise steps converge
linearly for strongly convex objectives, where classic ones are sublinear; on the 3 x 2 reference
model they reach the optimum in 7 steps, where 15 classic steps leave the bound 2.3e-3 nats above
it), or S2's classic step ``rho <- (1 - gamma) rho + gamma 1_T`` where that is steeper. ``gamma``
comes from a line search (regula falsi on the derivative ``-sum I(gamma) d``) up to the atom's
weight (0.999 of the start's, so that every ``rho_ij`` stays positive); a step is taken only if the
objective went down, and the reported bound is the smallest certified ``U`` met, so it decreases
monotonically. The start is the uniform distribution over spanning trees
(:func:`~boltzkit.variational.spanning.uniform_rho`): ``(N - 1) / |E|`` on edge-transitive graphs,
the block effective resistances otherwise. The Frank-Wolfe duality gap ``sum I (1_T - rho)`` bounds
how far the bound is above its optimum over ``rho``; steps stop when it is below ``fw_tol``. The
solves inside a step need the bound and ``I_ij`` only to a fraction of that duality gap, so they are
certified to ``max(gap_tol, FW_INNER * duality gap)`` (a solve that misses it is not used), and the
best ``rho`` is solved once more to ``gap_tol`` at the end.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError, warn
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.variational.bp import DAMPING, TOL, Messages, check_settings, propagate
from boltzkit.variational.certificate import Certificate, certify
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
MAX_ITER = 200
#: Certified gap (nats) at which a TRW solve counts as converged, or this fraction of ``|F|`` if
#: larger (rounding-level precision: ``F`` sums ``|E|`` terms); Newton steps per solve.
GAP_TOL = 1e-6
REL_GAP_TOL = 1e-7
NEWTON_STEPS = 100
#: Rounds of tying the edges whose certificate shifts cost most (``|W / rho| >= W_SNAP``, more than
#: ``STRAIN`` of the allowance each), then Newton and the certificate again; kept if the bound drops.
SNAP_ROUNDS = 3
W_SNAP = 20.0
STRAIN = 1e-3
#: Snapping is skipped on graphs with more edges than this: there each round costs a Newton solve
#: and a far larger certificate program (on S2's Table 2 SRBM, 700,000 edges, one round took 170 s
#: and raised the gap from 0.13 to 2.8 nats; on its Table 1 SRBM, 8,120 edges, one round took 0.1 s
#: and closed the gap from 0.015 nats to 7e-6).
SNAP_MAX_EDGES = 100_000
#: Frank-Wolfe defaults: at most this many steps, stop when the duality gap (nats) is below FW_TOL.
FW_STEPS = 30
FW_TOL = 1e-3
#: Evaluations of the bound per line search, and the largest step (keeps every rho_ij > 0).
LINE_SEARCH_EVALS = 8
GAMMA_MAX = 0.999
#: Inner solves of a Frank-Wolfe step are certified to this fraction of its duality gap; their
#: Newton steps at most (warm-started next to a solved point; the far end of a line search, a
#: nearly single tree, needs many more and is usually past the minimum anyway).
FW_INNER = 1e-3
LINE_SEARCH_NEWTON_STEPS = 20


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
        ``gap <= tolerance``.
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
    tolerance
        The gap at which it counts as converged (:func:`tolerance`).
    ties
        Edges tied on their kink by Newton's method.
    certificate
        The dual certificate (:func:`~boltzkit.variational.certificate.certify`) where the plain
        first-order gap was above ``gap_tol``, else ``None``.
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
    tolerance: float = GAP_TOL
    ties: int = 0
    certificate: Certificate | None = None


@torch.no_grad()
def solve(
    graph: BlockGraph,
    rho: tuple[float | Tensor, ...],
    *,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    gap_tol: float | None = None,
    newton_steps: int = NEWTON_STEPS,
    logits: tuple[Tensor, ...] | None = None,
    messages: Messages | None = None,
    snap_rounds: int = SNAP_ROUNDS,
) -> TRWSolution:
    """TRW at ``rho``: message passing (unless ``logits`` are given: a warm start for Newton), then
    Newton's method on the node marginals (models of at most ``NEWTON_MAX_UNITS`` units), then the
    certificate (the dual one where the plain gap is above ``gap_tol``).

    Parameters
    ----------
    graph, rho
        The model's graph and the edge appearance probabilities per block (in the polytope for the
        result to be a bound: :mod:`boltzkit.variational.spanning`).
    damping, tol, max_iter
        Message passing (:func:`~boltzkit.variational.bp.propagate`).
    gap_tol, newton_steps
        Newton stops at a plain gap of ``gap_tol`` nats, when ``F`` stops rising, or after
        ``newton_steps`` steps; the certificate stops refining, and the solve counts as converged,
        at a gap of ``gap_tol`` (default ``None``: :func:`tolerance`).
    logits, messages
        Warm starts: node log-odds (skip message passing) or messages.
    snap_rounds
        Rounds of tying the edges that strain the certificate (``SNAP_ROUNDS``; none on graphs
        with more than ``SNAP_MAX_EDGES`` edges).
    """
    sweeps, residual, msgs = 0, math.nan, None
    if logits is None or graph.n_nodes > NEWTON_MAX_UNITS:
        state = propagate(graph, rho, damping=damping, tol=tol, max_iter=max_iter, messages=messages)
        logits, sweeps, residual, msgs = state.logits, state.iterations, state.residual, state.messages
    steps, ties, fit = 0, 0, None
    if graph.n_nodes <= NEWTON_MAX_UNITS and graph.blocks:
        fit = maximise(
            graph, rho, logits, gap_tol=GAP_TOL if gap_tol is None else gap_tol, max_steps=newton_steps
        )
        ev, logits, steps, ties = fit.evaluation, fit.logits, fit.steps, fit.n_ties
    else:
        ev = evaluate(graph, rho, logits)
    bound, cert = ev.bound, None
    target = tolerance(gap_tol, ev.value)
    if math.isfinite(ev.value) and ev.gap > target:
        cert = certify(graph, rho, logits, ev, gap_tol=target)
        bound = min(bound, cert.bound)
    rounds = snap_rounds if fit is not None and graph.n_edges <= SNAP_MAX_EDGES else 0
    for _ in range(rounds):
        if cert is None or bound - ev.value <= target or not cert.strain:
            break
        snap = _strained(graph, rho, cert, fit.ties)
        if snap is None:
            break
        trial = maximise(graph, rho, fit.logits, gap_tol=target, max_steps=newton_steps, ties=snap)
        trial_cert = certify(graph, rho, trial.logits, trial.evaluation, gap_tol=target)
        trial_bound = min(trial.evaluation.bound, trial_cert.bound)
        if not trial_bound < bound:
            break
        fit, ev, cert, bound = trial, trial.evaluation, trial_cert, trial_bound
        logits, steps, ties = fit.logits, steps + fit.steps, fit.n_ties
    gap = bound - ev.value
    converged = math.isfinite(bound) and gap <= target
    return TRWSolution(
        bound, ev.value, gap, converged, logits, ev.mutual_information, ev.marginals, msgs, sweeps,
        residual, steps, target, ties, cert,
    )  # fmt: skip


def _strained(
    graph: BlockGraph, rho: tuple[float | Tensor, ...], cert: Certificate, tied: tuple[Tensor, ...]
) -> tuple[Tensor, ...] | None:
    """``tied`` plus the sharp edges (``|W / rho| >= W_SNAP``) on which the certificate's shifts cost
    more than ``STRAIN`` of its allowance, or ``None`` if there is none to add."""
    out, added = [], False
    threshold = STRAIN * cert.allowance
    for blk, r, strain, t in zip(graph.blocks, rho, cert.strain, tied, strict=True):
        rr = r if isinstance(r, Tensor) else torch.full_like(blk.weights, float(r))
        new = (strain > threshold) & (blk.weights.abs() >= W_SNAP * rr) & (rr > 0) & ~t
        if blk.lateral:
            new = new | new.t()
            new.fill_diagonal_(False)
        added = added or bool(new.any())
        out.append(t | new)
    return tuple(out) if added else None


def tolerance(gap_tol: float | None, value: float) -> float:
    """The gap (nats) at which a solve with objective ``value`` counts as converged: ``gap_tol``,
    or by default ``max(GAP_TOL, REL_GAP_TOL |value|)``."""
    if gap_tol is not None:
        return float(gap_tol)
    return max(GAP_TOL, REL_GAP_TOL * abs(value)) if math.isfinite(value) else GAP_TOL


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
    gap_tol: float | None = None,
    line_search_evals: int = LINE_SEARCH_EVALS,
    start: TreeMixture | None = None,
    pairwise: bool = True,
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
        evaluated point's node marginals (Newton only) and certified to ``max(tolerance, FW_INNER
        * duality gap)``.
    line_search_evals
        TRW solves per line search.
    start
        The starting mixture (default: the uniform spanning-tree measure).
    pairwise
        Pairwise steps (default): move weight from the mixture's worst atom to the new tree.
        ``False``: S2's classic steps towards the new tree (for reproducing its trajectory).

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
    best, best_rho, best_mixture = sol, rho, mixture.copy()
    base_spent = False  # a pairwise step took all but GAMMA_MAX of the base: no longer an away atom
    for _ in range(steps):
        info = sol.mutual_information
        tree = max_weight_spanning_tree(graph, info)
        s = tree_indicator(graph, tree)
        r = _as_tensors(graph, rho)
        d = tuple(a - b for a, b in zip(s, r, strict=True))
        gap = _edge_dot(graph, info, d)
        fit.gaps.append(gap)
        if gap <= fw_tol:
            fit.stop = "gap"
            break
        away, gamma_max, slope = None, GAMMA_MAX, gap
        if pairwise and (mixture.trees or not base_spent):
            k, atom, weight = _away_atom(graph, mixture, info, with_base=not base_spent)
            d_pair = tuple(a - b for a, b in zip(s, atom, strict=True))
            pair_slope = _edge_dot(graph, info, d_pair)
            if pair_slope > gap:  # steeper than the classic step (always, while the base may be used)
                away, d, slope = k, d_pair, pair_slope
                gamma_max = weight * (GAMMA_MAX if k < 0 else 1.0)  # the base keeps every rho_ij > 0
        inner = {**kw, "gap_tol": max(tolerance(gap_tol, sol.value), FW_INNER * gap)}
        gamma, new, runs, sweeps, newton = _line_search(
            graph, r, d, sol, slope, line_search_evals, inner, gamma_max
        )
        fit.runs += runs
        fit.total_sweeps += sweeps
        fit.newton_steps += newton
        if gamma <= 0.0:
            fit.stop = "no decrease"
            break
        rho = _move(graph, r, d, gamma)
        if away is None:
            mixture.step(tree, gamma)
        else:
            mixture.shift(away, tree, gamma)
            base_spent = base_spent or (away < 0 and gamma >= gamma_max)
        sol = new
        if sol.bound < best.bound:
            best, best_rho, best_mixture = sol, rho, mixture.copy()
        fit.history.append(best.bound)
    if (
        best.gap > tolerance(gap_tol, best.value) and best is not fit.solution
    ):  # certified to a Frank-Wolfe step's tolerance only
        final = solve(graph, best_rho, logits=best.logits, **kw)
        fit.runs += 1
        fit.newton_steps += final.newton_steps
        if final.bound < best.bound:
            best = final
            fit.history[-1] = min(fit.history[-1], best.bound)
        target = tolerance(gap_tol, best.value)
        best = replace(best, tolerance=target, converged=math.isfinite(best.bound) and best.gap <= target)
    fit.solution, fit.rho, fit.mixture = best, best_rho, best_mixture
    check_rho(graph, best_mixture, best_rho)
    return fit


def usable(sol: TRWSolution, gap_tol: float) -> bool:
    """A solve whose value can guide Frank-Wolfe: finite and certified to ``gap_tol``."""
    return math.isfinite(sol.value) and math.isfinite(sol.bound) and sol.gap <= gap_tol


def _away_atom(
    graph: BlockGraph, mixture: TreeMixture, info: tuple[Tensor, ...], *, with_base: bool
) -> tuple[int, tuple[Tensor, ...], float]:
    """The atom of ``mixture`` (the base only ``with_base``) whose ``sum I_ij atom_ij`` is smallest:
    the one a pairwise step moves weight from. Its index (``-1``: the base), ``rho`` per block and
    weight."""
    best = None
    if with_base and mixture.base_weight > 0.0:
        base = _as_tensors(graph, mixture.base)
        best = (_edge_dot(graph, info, base), -1, base, mixture.base_weight)
    for k, (tree, weight) in enumerate(zip(mixture.trees, mixture.weights, strict=True)):
        ind = tree_indicator(graph, tree)
        score = _edge_dot(graph, info, ind)
        if best is None or score < best[0]:
            best = (score, k, ind, weight)
    assert best is not None, "a mixture has weight on some atom"
    return best[1], best[2], best[3]


def _line_search(graph, rho, d, sol0: TRWSolution, gap: float, evals: int, kw, gamma_max: float):
    """Minimise ``F`` along ``rho + gamma d``, ``0 < gamma <= gamma_max``: regula falsi (Illinois) on
    the derivative ``-sum I(gamma) d``, which is ``-gap < 0`` at 0. Returns the best point certified
    to ``kw["gap_tol"]`` that lowers ``F`` (``gamma = 0`` if none), with the solves, sweeps and
    Newton steps used."""
    best_gamma, best = 0.0, sol0
    tried: list[tuple[float, TRWSolution]] = [(0.0, sol0)]
    used = [0, 0, 0]

    def evaluate_at(gamma: float) -> tuple[float, bool]:
        """Solve at ``gamma`` (kept if usable); the derivative there and whether it was usable."""
        nonlocal best_gamma, best
        warm = min(tried, key=lambda t: abs(t[0] - gamma))[1]
        st = solve(
            graph, _move(graph, rho, d, gamma), logits=warm.logits, messages=warm.messages,
            newton_steps=LINE_SEARCH_NEWTON_STEPS, snap_rounds=0, **kw,
        )  # fmt: skip
        used[0] += 1
        used[1] += st.sweeps
        used[2] += st.newton_steps
        ok = usable(st, kw["gap_tol"])
        if ok:
            tried.append((gamma, st))
            if st.value < best.value:
                best_gamma, best = gamma, st
        return -_edge_dot(graph, st.mutual_information, d), ok

    lo, dlo = 0.0, -gap
    hi = gamma_max
    dhi, ok = evaluate_at(hi)
    if ok and dhi <= 0.0:
        return best_gamma, best, *used
    if not ok:
        dhi = abs(dlo)
    side = 0
    for _ in range(max(0, evals - 1)):
        width = hi - lo
        g = (lo * dhi - hi * dlo) / (dhi - dlo)
        g = min(max(g, lo + 1e-3 * width), hi - 1e-3 * width)
        dg, ok = evaluate_at(g)
        if not ok:  # treat as past the minimum
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
    gap_tol: float | None = None,
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
        Convergence: the certified gap (nats) to the TRW optimum at the final ``rho``; default
        ``max(1e-6, 1e-7 |F|)`` (:func:`tolerance`).
    fw_steps, fw_tol, line_search_evals
        Frank-Wolfe (``rho="optimized"`` only).

    Returns
    -------
    VariationalResult
        ``log_z`` is the certified bound ``U``; ``bound="upper"`` when it is finite (it bounds
        ``log Z`` whether or not the solver converged); ``converged`` when ``gap <= gap_tol``
        and, for ``"optimized"``, the Frank-Wolfe steps stopped at their duality-gap tolerance (or
        found no decrease), not at ``fw_steps`` (else a :class:`ConvergenceWarning`);
        ``iterations`` and ``residual`` are the message
        sweeps and residual of the final solve. The two parts of ``converged`` are also given
        apart, since the bound holds whatever they say: ``solve_converged`` (the solve at the final
        ``rho`` met ``gap_tol``) and ``rho_optimal`` (the Frank-Wolfe steps stopped at their
        duality-gap tolerance; ``None`` for a fixed ``rho``). Settings: ``gap``, ``gap_tol`` (the tolerance
        applied), ``primal_value`` (``F``), ``newton_steps``, ``ties``, ``certificate`` (the dual
        certificate's ``balance``, ``allowance``, ``shifted`` edges, LP ``columns`` and ``seconds``,
        or ``None``), ``rho``, ``rho_start`` and, for ``"optimized"``, ``fw_steps``, ``fw_gap``,
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
    # an optimisation of rho cut off at its step limit (or whose start failed) has not converged,
    # even where the last solve met its own tolerance
    fw_done = rho != "optimized" or fit.stop in ("gap", "no decrease")
    if sol.converged and not fw_done:
        warn(
            f"the Frank-Wolfe optimisation of rho stopped at {fit.stop!r} with a duality gap of "
            f"{fit.gaps[-1] if fit.gaps else float('nan'):.3g} nats: the bound holds but is not the optimum "
            "over rho (raise --fw-steps)",
            ConvergenceWarning,
        )
    if not sol.converged:
        warn(
            f"TRW did not converge to the requested gap: the certified bound is up to {sol.gap:.3g} nats "
            f"above the TRW optimum (message residual {sol.residual:.3g} after {sol.sweeps} sweeps, "
            f"{sol.newton_steps} Newton steps); it is still an upper bound on log Z",
            ConvergenceWarning,
        )
    base = fit.mixture.base
    if graph.sparse:
        start = "uniform over spanning trees of the model's own edges (effective resistances)"
    elif is_edge_transitive(graph) or (len(base) > 0 and max(base) - min(base) <= 1e-12 * max(base)):
        start = "(N-1)/|E| (uniform over spanning trees, alike on all edges)"
    else:
        start = "uniform over spanning trees (block effective resistances)"
    settings = {
        "rho": rho,
        "rho_start": start,
        "gap": sol.gap,
        "gap_tol": sol.tolerance,
        "primal_value": sol.value,
        "newton_steps": sol.newton_steps,
        "ties": sol.ties,
        "certificate": None
        if sol.certificate is None
        else {
            "balance": sol.certificate.balance,
            "allowance": sol.certificate.allowance,
            "shifted": sol.certificate.shifted,
            "columns": sol.certificate.columns,
            "seconds": sol.certificate.seconds,
        },
        "damping": damping,
        "tol": tol,
        "max_iter": max_iter,
        "device": str(graph.device),
        "trw_runs": fit.runs,
        "total_sweeps": fit.total_sweeps,
        # the two parts of ``converged``, apart: the bound is certified whatever they say
        "solve_converged": sol.converged,
        "rho_optimal": fw_done if rho == "optimized" else None,
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
        converged=sol.converged and fw_done,
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
