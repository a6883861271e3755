"""Second-order TAP (Thouless-Anderson-Palmer) approximation of ``log Z``: a non-bound estimate.

Adding the second-order (Onsager) term of the Plefka expansion to the naive mean-field free
energy gives, with ``var(m) = m - m^2`` (Gabrie, Tramel & Krzakala 2015; ALGORITHMS.md section 10,
written here for any pairwise coupling matrix ``Q`` of the family)::

    -log Z ~ min_m Gamma(m),
    Gamma(m) = -H(m) - b^T m - 1/2 m^T Q m - 1/4 var(m)^T (Q o Q) var(m)

(for an RBM the last term is ``-1/2 var(m_v)^T (W o W) var(m_h)``, paysage's
``gibbs_free_energy``). Its stationary points solve, layer by layer::

    m_l = sigma(b_l + sum_m W_lm m_m - (m_l - 1/2) o sum_m (W_lm o W_lm) var(m_m))

solved here layer by layer (odd layers, then even layers), from several starts (1/2, the layer-wise
ordered corners and random); the converged start with the lowest ``Gamma`` is kept. Each start
runs the plain damped iteration (``m <- m + (1 - damping) (sigma(h(m)) - m)``) as long as its
largest change shrinks (tenfold every ``CHECK_EVERY`` sweeps); a start that does not switches to
a *safeguarded* iteration. There, a layer without laterals is updated by exact minimisation of
``Gamma`` over it (``sequential=True``, the default): given the other
layers its units are independent, and each one's ``Gamma`` is strictly convex in ``m_i`` (second
derivative ``1 / (m_i (1 - m_i)) + c_i``, ``c_i = sum_j Q_ij^2 var_j >= 0``), so ``u = logit m_i``
is the root of the increasing ``u - h_i + (sigma(u) - 1/2) c_i`` (safeguarded Newton). The
iteration is then block coordinate descent on ``Gamma``: ``Gamma`` never rises and it cannot
oscillate, which the plain iteration does on S2's Table 1 RBM (a change of 0.6 per sweep after
1,000 sweeps). A layer with laterals (or every layer with ``sequential=False``) takes the damped
step (``sigma(h(m)) - m`` is a descent direction of ``Gamma``), halved per start while ``Gamma``
would rise. A start that still moves after ``max_iter`` sweeps is reported as not converged.

TAP is *not* a bound: it can land on either side of ``log Z`` (3x2 example of ALGORITHMS.md:
3.872160 against the exact 3.870813). At zero couplings it is exact, like mean-field.

The Onsager term reuses the model's own products: a model with the squared couplings ``W o W``
(and zero biases) gives ``sum_m (W_lm o W_lm) var_m`` as its layer input and ``-1/2 var^T (Q o Q)
var`` as its energy.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from boltzkit.errors import warn
from boltzkit.models.boltzmann import BoltzmannMachine, binary_entropy
from boltzkit.state import ChainState
from boltzkit.variational.bp import check_settings
from boltzkit.variational.result import ConvergenceWarning, VariationalResult
from boltzkit.variational.starts import default_n_starts, start_means

DAMPING = 0.5
TOL = 1e-9
MAX_ITER = 1000
#: Halvings of a start's step per layer update before the update is skipped.
MAX_HALVINGS = 30
#: Every CHECK_EVERY sweeps, a start whose largest change has not shrunk tenfold since the last
#: check switches from the plain damped iteration to the safeguarded one.
CHECK_EVERY = 100


def _squared(model: BoltzmannMachine) -> BoltzmannMachine:
    """The model with couplings ``W o W`` and zero biases (float64)."""
    keys = model.coupling_keys
    couplings = {k: model.coupling(*k).detach().to(torch.float64) ** 2 for k in keys}
    return BoltzmannMachine(model.layer_sizes, couplings, None, dtype=torch.float64, device=model.device)


def _variances(state: ChainState) -> ChainState:
    return ChainState(tuple(x - x * x for x in state.layers))


@torch.no_grad()
def tap_free_energy(model: BoltzmannMachine, means: ChainState) -> torch.Tensor:
    """``-Gamma(m)`` of each row of ``means`` (the TAP estimate of ``log Z`` at ``m``), float64."""
    m64 = model.as_float64()
    entropy = sum(binary_entropy(x).sum(1) for x in means.layers)
    return entropy - m64.energy_of(means) - 0.5 * _squared(m64).energy_of(_variances(means))


def _minimise_layer(field: Tensor, onsager: Tensor) -> Tensor:
    """The minimiser of ``Gamma`` over a layer without laterals: per unit, ``m = sigma(u)`` with
    ``u - h + (sigma(u) - 1/2) c = 0`` (``h`` the field, ``c >= 0`` the Onsager coefficient).

    The left side is increasing (slope ``1 + c sigma'(u) >= 1``) and its root lies in ``[h - c/2, h +
    c/2]``; Newton's method from ``h`` is safeguarded as in ``rtsafe`` (Press et al., Numerical
    Recipes, Sec. 9.4): the bracket shrinks on each side of the root, and a Newton step that leaves
    it or fails to halve the step before last is replaced by bisection, so it converges (plain
    Newton can cycle between two points, since the left side has an inflection at ``u = 0``)."""
    lo, hi = field - 0.5 * onsager, field + 0.5 * onsager
    u = field.clone()
    step_old = (hi - lo).abs() + 1.0  # the step before last (rtsafe's safeguard)
    step = step_old.clone()
    for _ in range(200):
        p = torch.sigmoid(u)
        f = u - field + (p - 0.5) * onsager
        lo = torch.where(f < 0, u, lo)
        hi = torch.where(f > 0, u, hi)
        newton_step = f / (1.0 + onsager * p * (1.0 - p))
        newton = u - newton_step
        # Newton only inside the bracket and while it at least halves the step before last;
        # otherwise bisect (Newton can cycle here: f has an inflection at u = 0)
        use = (newton > lo) & (newton < hi) & (2.0 * newton_step.abs() <= step_old)
        mid = 0.5 * (lo + hi)
        u_new = torch.where(use, newton, mid)
        step_old, step = step, (u_new - u).abs()
        if bool((step <= 1e-13 * (1.0 + u.abs())).all()):
            u = u_new
            break
        u = u_new
    return torch.sigmoid(u)


def _safeguarded_step(
    model: BoltzmannMachine,
    state: ChainState,
    values: Tensor,
    layer: int,
    move: Tensor,
    step: Tensor,
    base: float,
) -> tuple[ChainState, Tensor, Tensor, int]:
    """``m_l <- m_l + step * move`` per start, where ``move = sigma(h_l(m)) - m_l`` is the undamped
    fixed-point update: a descent direction of ``Gamma`` (``grad_l Gamma = logit(m_l) - h_l(m)`` has
    the opposite sign in every coordinate). A start whose ``-Gamma`` would fall (beyond rounding)
    halves its step, up to ``MAX_HALVINGS`` times, and keeps its old ``m_l`` if none helps; a start
    whose step succeeds grows it back (x2) towards ``base = 1 - damping``. With every step accepted
    this is the plain damped iteration. Returns the new state, ``-Gamma``, steps and halvings."""
    old = state.layers[layer]
    cuts = 0
    trial_step = step.clone()
    accepted = torch.zeros_like(step, dtype=torch.bool)
    new_layer, new_values = old, values
    for _ in range(MAX_HALVINGS + 1):
        cand = torch.where(accepted[:, None], new_layer, old + trial_step[:, None] * move)
        trial = state.with_layer(layer, cand)
        v = tap_free_energy(model, trial)
        ok = (v >= values - 1e-12 * values.abs().clamp(min=1.0)) | accepted
        new_layer = torch.where(ok[:, None], cand, old)
        new_values = torch.where(ok, torch.where(accepted, new_values, v), values)
        accepted = ok
        if bool(accepted.all()):
            break
        trial_step = torch.where(accepted, trial_step, 0.5 * trial_step)
        cuts += int((~accepted).sum())
    step = torch.where(accepted, torch.clamp(2.0 * trial_step, max=base), trial_step)
    return state.with_layer(layer, new_layer), new_values, step, cuts


@torch.no_grad()
def tap_log_z(
    model: BoltzmannMachine,
    *,
    n_starts: int | None = None,
    seed: int | torch.Generator | None = 0,
    damping: float = DAMPING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    sequential: bool = True,
    within: tuple[float, float] | None = None,
) -> VariationalResult:
    """Second-order TAP estimate of ``log Z`` (``bound="none"``).

    Parameters
    ----------
    model
        Any member of the family (float64, on its device).
    n_starts, seed
        Starts run side by side: all 1/2, each layer-wise ordered corner, then uniform random
        from ``seed`` (:mod:`boltzkit.variational.starts`); ``None``: all the corners (up to four
        layers) and two random ones (:func:`~boltzkit.variational.starts.default_n_starts`).
    damping, tol, max_iter
        Damped (safeguarded) fixed-point step of layers with laterals; a start has converged when
        its largest change ``|m_new - m_old|`` of the undamped update is below ``tol``.
    sequential
        Layers without laterals by exact minimisation (module docstring); ``False``: every layer
        by the safeguarded damped step.
    within
        Where ``log Z`` certainly lies (``variational_log_z`` passes the mean-field bound and a
        certain upper bound): a converged start outside it is a spurious stationary point, and is
        kept only where no converged start lies inside (an ordered DBM's 1/2 start reached 518.28
        above the bound 150.00, where another start converged at 150.00; a review of 2026-12-07).

    Returns
    -------
    VariationalResult
        The converged start with the largest ``-Gamma`` (all starts if none converged, with a
        :class:`ConvergenceWarning`); ``marginals`` are its magnetisations.
    """
    check_settings(damping, tol, max_iter)
    t0 = time.perf_counter()
    m64 = model.as_float64()
    n_starts = default_n_starts(m64) if n_starts is None else n_starts
    sq = _squared(m64)
    state = start_means(m64, n_starts, seed)
    order = [b.layer for b in m64.blocks()]
    rows = torch.full((n_starts,), float("inf"), dtype=torch.float64, device=m64.device)
    base = 1.0 - float(damping)
    step = torch.full_like(rows, base)  # per start; below `base` only after a rise of Gamma
    guarded = torch.zeros_like(rows, dtype=torch.bool)  # starts switched to the safeguarded iteration
    checkpoint = rows.clone()
    halvings = 0
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the sweeps done are reported)
        rows = torch.zeros_like(rows)
        for l in order:
            old = state.layers[l]
            onsager = sq.layer_input(_variances(state), l)
            field = m64.layer_input(state, l)
            move = torch.sigmoid(field - (old - 0.5) * onsager) - old
            rows = torch.maximum(rows, move.abs().amax(1))
            new = old + base * move
            if bool(guarded.any()):
                if sequential and not m64.has_laterals(l):
                    safe = _minimise_layer(field, onsager)
                else:
                    values = tap_free_energy(m64, state)
                    safe_state, _, step, cut = _safeguarded_step(m64, state, values, l, move, step, base)
                    safe = safe_state.layers[l]
                    halvings += cut
                new = torch.where(guarded[:, None], safe, new)
            state = state.with_layer(l, new)
        if float(rows.max()) < tol:
            break
        if it % CHECK_EVERY == 0:  # starts whose change did not shrink tenfold switch to the safe iteration
            guarded |= (rows >= tol) & (rows > 0.1 * checkpoint)
            checkpoint = rows.clone()
    values = tap_free_energy(m64, state)
    done = rows < tol
    converged = bool(done.any())
    inside = torch.ones_like(done) if within is None else (values >= within[0]) & (values <= within[1])
    if bool((done & inside).any()):  # a converged start inside the certain bounds: the best of those
        done = done & inside
    candidates = torch.where(done, values, torch.full_like(values, -float("inf"))) if converged else values
    best = int(torch.argmax(candidates))
    if not converged:
        warn(
            f"TAP iteration did not converge from any of {n_starts} starts (residual of the start kept "
            f"{float(rows[best]):.3g} after {it} sweeps); try more damping or more sweeps",
            ConvergenceWarning,
        )
    return VariationalResult(
        method="tap",
        log_z=float(values[best]),
        bound="none",
        converged=converged,
        iterations=it,
        residual=float(rows[best]),
        seconds=time.perf_counter() - t0,
        settings={
            "n_starts": n_starts,
            "seed": seed if isinstance(seed, int) else None,
            "damping": damping,
            "tol": tol,
            "max_iter": max_iter,
            "sequential": sequential,
            "safeguarded_starts": int(guarded.sum()),
            "step_halvings": halvings,
            "best_start": best,
            "start_values": values.tolist(),
            "converged_starts": int(done.sum()),
            "device": str(m64.device),
        },
        marginals=tuple(x[best] for x in state.layers),
    )


__all__ = ["tap_free_energy", "tap_log_z"]
