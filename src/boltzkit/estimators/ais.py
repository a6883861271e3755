"""Annealed importance sampling (Neal 2001; Salakhutdinov & Murray 2008, Sec. 3.1).

Given a path ``p_0, ..., p_K`` (:mod:`boltzkit.estimators.paths`) and chains started from exact
samples ``x_0 ~ p_0``, one AIS run computes (S&M 2008, Sec. 3.1, step 2)::

    log w = sum_{k=1}^{K} [ log p*_k(x_{k-1}) - log p*_{k-1}(x_{k-1}) ],   x_k ~ T_k(. | x_{k-1})

(evaluate the ratio, then move with the kernel of the *new* beta), so that
``E[w] = Z_K / Z_0`` and ``Z_K ≈ Z_0 mean(w)`` (Eq. 11) with variance ``Var(w) / M`` (Eq. 12).
Log-weights are accumulated in float64. Run with the betas reversed and started from exact samples
of ``p_K``, the same engine is reverse AIS, whose weights estimate ``Z_0 / Z_K``.

:func:`ais` is the estimator: it takes any path (:mod:`boltzkit.estimators.paths`: base-rate ->
model gives ``log Z``, model A -> model B gives ``log Z_B - log Z_A``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError, positive_int
from boltzkit.estimators.paths import AnnealingPath, check_path
from boltzkit.estimators.probes import PROBES_PER_START, start_check
from boltzkit.estimators.reliability import warn_unreliable
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.schedules import equal_length_betas, paper_betas, parse_schedule, validate_betas
from boltzkit.resources import Forecast, require_memory
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

#: Working memory of one beta in :func:`anneal`: its float64 entry and a Python float in a list.
BYTES_PER_BETA = 8 + 32


@dataclass(frozen=True)
class AnnealRun:
    """Output of :func:`anneal`: float64 log-weights ``(n_chains,)`` and the final chain states."""

    log_weights: Tensor
    final_state: ChainState


@torch.no_grad()
def anneal(
    path: AnnealingPath,
    betas: Tensor,
    *,
    init: ChainState,
    operator: TransitionOperator | str = "gibbs",
    sweeps: int = 1,
    generator: torch.Generator,
    progress: bool = False,
    final_move: bool = False,
    desc: str = "AIS",
    observe: Callable[[int, float, Tensor, ChainState], None] | None = None,
) -> AnnealRun:
    """Anneal chains ``init`` along ``betas`` and return their log-weights.

    Parameters
    ----------
    path
        The family of distributions and its transitions.
    betas
        Float64 betas, shape ``(K + 1,)``; increasing for AIS, decreasing for reverse AIS.
    init
        Samples of ``p_{betas[0]}`` (exact for an unbiased estimate).
    operator
        Transition operator used inside the path's kernels (``"gibbs"``, ``"flip"``,
        ``"blend:ALPHA"``).
    sweeps
        Sweeps of the kernel per intermediate distribution.
    generator
        Source of all random numbers.
    final_move
        Also apply the kernel of the last beta (gives samples of ``p_{betas[-1]}``, no effect on
        the weights).
    observe
        Optional observer ``observe(k, beta_k, log_weights, state)``, called with ``k = 0`` before
        the first step and after each step ``k = 1..K`` (the running float64 log-weights, and the
        state after the move at ``beta_k``; at ``k = K`` moved only with ``final_move``). It must
        not modify its arguments; :func:`boltzkit.estimators.trace.ais_trace` uses it.

    Returns
    -------
    AnnealRun
    """
    if int(sweeps) < 1:
        raise BoltzkitError("sweeps per beta must be at least 1", got=sweeps)
    op = make_operator(operator)
    require_memory(
        BYTES_PER_BETA * betas.numel(),
        what=f"an AIS schedule of {betas.numel():,} betas",
        hint="a schedule of 10,000-100,000 steps suffices for most models; see --betas adaptive.",
    )
    b = [float(x) for x in betas.tolist()]
    state = init
    log_w = torch.zeros(init.n_chains, dtype=torch.float64, device=init.visible.device)
    n = len(b) - 1
    forecast = Forecast(
        n,
        what=f"AIS with {init.n_chains:,} chains and {n:,} steps",
        hint="use fewer betas or chains, or a GPU (--device cuda).",
    )
    if observe is not None:
        observe(0, b[0], log_w, state)
    for k in tqdm(range(1, n + 1), desc=desc, disable=not progress, leave=False, mininterval=0.5):
        move = k < n or final_move
        delta, state = path.step(state, b[k - 1], b[k], op, generator, sweeps=sweeps, move=move)
        log_w += delta
        forecast.update(k)
        if observe is not None:
            observe(k, b[k], log_w, state)
    return AnnealRun(log_weights=log_w, final_state=state)


# ------------------------------------------------------------------------- adaptive schedules
@torch.no_grad()
def adaptive_betas(
    path: AnnealingPath,
    n_steps: int,
    *,
    n_chains: int = 100,
    operator: TransitionOperator | str = "gibbs",
    sweeps: int = 1,
    generator: torch.Generator,
    pilot_scale: float = 0.1,
    progress: bool = False,
) -> Tensor:
    """Choose ``n_steps`` betas so that every AIS step adds about the same log-weight variance.

    A pilot AIS run along the paper's schedule shape (``pilot_scale`` times its step counts)
    records, at each pilot beta, the importance-weighted standard deviation over chains of
    ``d log p*_beta / d beta``; :func:`~boltzkit.estimators.schedules.equal_length_betas` then
    spaces the betas at equal thermodynamic length. Use fresh randomness for the estimate itself.
    """
    op = make_operator(operator)
    grid = paper_betas(pilot_scale)
    state = path.sample_start(n_chains, generator)
    log_w = torch.zeros(n_chains, dtype=torch.float64, device=state.visible.device)
    speeds = torch.empty(grid.numel(), dtype=torch.float64)
    g = [float(x) for x in grid.tolist()]
    for k in tqdm(range(len(g)), desc="AIS pilot", disable=not progress, leave=False, mininterval=0.5):
        if k > 0:
            delta, state = path.step(state, g[k - 1], g[k], op, generator, sweeps=sweeps)
            log_w += delta
        d = path.d_log_f(state, g[k])
        w = torch.softmax(log_w, 0)
        mean = (w * d).sum()
        speeds[k] = torch.sqrt(((w * (d - mean) ** 2).sum()).clamp_min(0.0)).cpu()
    return equal_length_betas(grid, speeds, n_steps)


# ------------------------------------------------------------------------------ plumbing
def resolve_betas(
    betas: str | int | Tensor | None,
    path: AnnealingPath,
    *,
    n_chains: int,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
    progress: bool,
) -> tuple[Tensor, str]:
    """The schedule a spec names (``None``: the path's default), resolving ``"adaptive"`` by a
    pilot run along ``path``."""
    if betas is None:
        betas = path.default_betas
    schedule, name = parse_schedule(betas)
    if schedule is not None:
        return schedule, name
    _, _, tail = str(betas).partition(":")
    n_steps = int(tail) if tail.strip().isdigit() else 14_500
    schedule = adaptive_betas(
        path,
        n_steps,
        n_chains=n_chains,
        operator=operator,
        sweeps=sweeps,
        generator=generator,
        progress=progress,
    )
    return validate_betas(schedule), f"adaptive ({n_steps} steps, equal thermodynamic length)"


def check_runs(n_chains: int, sweeps: int = 1) -> None:
    """Validate the number of chains and of sweeps per beta of an AIS-type estimate: whole
    numbers of at least 1 (:func:`~boltzkit.errors.positive_int`; 2.5 chains are refused, not
    rounded)."""
    positive_int(n_chains, "the number of AIS chains")
    positive_int(sweeps, "sweeps per beta")


def seed_label(seed: int | torch.Generator | None) -> Any:
    """How a seed is recorded in a result's settings."""
    return "generator" if isinstance(seed, torch.Generator) else seed


def path_settings(path: AnnealingPath) -> dict[str, Any]:
    """What a record says about its path: base (or start model), device, dtype."""
    out: dict[str, Any] = {}
    if not path.is_ratio:
        out["base"] = getattr(path, "base_name", None) or "base model"
        out["log_z_base"] = path.log_z_a
    else:
        out["start"] = (
            "exact samples of A"
            if path.exact_start
            else (f"{getattr(path, 'start_chain_steps', 0)} Gibbs sweeps of A")
        )
        if not path.exact_start:
            out["warning"] = "start samples are approximate: the estimate is not exactly unbiased"
    out["device"] = str(path.device)
    out["dtype"] = str(path.dtype).replace("torch.", "")
    if path.trivial:
        out["trivial_path"] = True
    return out


def record(
    method: str,
    path: AnnealingPath,
    log_weights: Tensor,
    *,
    n_steps: int,
    reciprocal: bool = False,
    seconds: float,
    **settings: Any,
) -> LogZResult:
    """The result of a run along ``path``: ``log Z`` (base path) or ``log Z_B - log Z_A``."""
    if path.is_ratio:
        return LogZResult.from_log_weights(
            method,
            log_weights,
            log_z_start=path.offset,
            n_steps=n_steps,
            reciprocal=reciprocal,
            is_ratio=True,
            reference_log_z=path.log_z_a,
            seconds=seconds,
            **settings,
        )
    return LogZResult.from_log_weights(
        method,
        log_weights,
        log_z_start=float(path.log_z_start),
        n_steps=n_steps,
        reciprocal=reciprocal,
        seconds=seconds,
        **settings,
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------------------ estimator
#: Sweeps of the probe chains behind plain AIS's check of its final states (the sandwich's default
#: start-chain length), capped so that they cost at most what the run did.
END_PROBE_SWEEPS = 1000


def ais(
    path: AnnealingPath,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    progress: bool = False,
    check: bool = True,
) -> LogZResult:
    """Annealed importance sampling along ``path`` (S&M 2008, Sec. 3.1; S2 Sec. 3.2).

    Parameters
    ----------
    path
        :func:`~boltzkit.estimators.paths.base_rate_path` (estimates ``log Z`` of the model) or
        :func:`~boltzkit.estimators.paths.ratio_path` (estimates ``log Z_B - log Z_A``, and
        ``log Z_B`` when ``log Z_A`` is exactly known).
    n_chains
        Number of independent AIS runs ``M``.
    betas
        ``"paper"`` (14,500 steps, S&M 2008), a number of linear points, ``"adaptive"`` /
        ``"adaptive:N"`` (a pilot run, then a fresh run with the chosen N steps), a file path, or
        a tensor; ``None``: the path's default (``"paper"``, or the 10,000 uniform steps of a
        model-to-model path).
    sweeps
        Kernel sweeps per intermediate distribution.
    sampler
        Transition operator inside the kernels: ``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``, a
        cycle ``"flip+gibbs"`` or a repeat ``"gibbs*5"``.
    seed
        Seed or generator (on the path's device); same seed, same numbers.
    progress
        Show a progress bar.
    check
        Run the checks that the weights' spread cannot make (the default, as in every estimator
        of :mod:`boltzkit.estimators`; ``False`` only where many runs are compared, or a caller
        checks otherwise: the verdict then rests on the weights alone, and a too short schedule
        or a mode every run missed can pass as reliable): :func:`schedule_check` (a control run
        along half the steps with half the chains, a quarter of the cost: an estimate that moves
        beyond its noise when the schedule is halved is ``reliable: false``) and, where exact
        samples of the target exist,
        :func:`reverse_check` (reverse AIS from them with as many chains: an upper estimate above
        the forward band makes the estimate ``reliable: false``); where none exist,
        :func:`~boltzkit.estimators.probes.start_check` of the final states (4 chains per run
        started away from them, :data:`END_PROBE_SWEEPS` sweeps or a quarter of the run's,
        longer while they still relax, at most the run's cost again: probes that settle as
        probably elsewhere show a mode every run missed). The main estimate's numbers do not change.

    Returns
    -------
    LogZResult
        ``method="ais"``; ``settings`` record base, schedule, operator, sweeps, seed and device
        (and ``checks``).
    """
    check_path(path, "ais")
    check_runs(n_chains, sweeps)
    t0 = time.perf_counter()
    op = make_operator(sampler)
    gen = make_generator(seed, path.device)
    schedule, schedule_name = resolve_betas(
        betas, path, n_chains=n_chains, operator=op, sweeps=sweeps, generator=gen, progress=progress
    )
    run = anneal(
        path,
        schedule,
        init=path.sample_start(int(n_chains), gen),
        operator=op,
        sweeps=sweeps,
        generator=gen,
        progress=progress,
    )
    sync(path.device)
    n_steps = schedule.numel() - 1
    settings = {
        **path_settings(path),
        "schedule": schedule_name,
        "sampler": op.name,
        "sweeps": int(sweeps),
        "total_sweeps": n_steps * int(sweeps),
        "seed": seed_label(seed),
    }
    if check:
        main = record("ais", path, run.log_weights, n_steps=n_steps, seconds=0.0, **settings)
        settings["checks"] = ais_checks(path, schedule, main, run.final_state, op, sweeps, gen)
    sync(path.device)
    result = record(
        "ais", path, run.log_weights, n_steps=n_steps, seconds=time.perf_counter() - t0, **settings
    )
    warn_unreliable("the AIS estimate of log Z", result.reliability())
    return result


def ais_checks(
    path: AnnealingPath,
    schedule: Tensor,
    main: LogZResult,
    final_state: ChainState,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
) -> list[dict[str, Any]]:
    """The checks of a forward AIS estimate ``main`` (see :func:`ais`, ``check``): the schedule
    check where the schedule has at least 4 steps, then the reverse check where exact samples of
    the target exist, else the probe chains started away from the runs' ``final_state``."""
    n_chains, n_steps = int(main.n_chains), schedule.numel() - 1
    checks = (
        [schedule_check(path, schedule, main, n_chains, operator, sweeps, generator)] if n_steps >= 4 else []
    )
    if path.end_is_exact:
        checks.append(reverse_check(path, schedule, main, n_chains, operator, sweeps, generator))
    else:  # chains that all missed a mode give equal weights: only chains from elsewhere show it
        probe_sweeps = min(END_PROBE_SWEEPS, max(1, n_steps * int(sweeps) // PROBES_PER_START))
        cost = n_chains * n_steps * int(sweeps)  # relaxing probes may run on to the run's cost
        checks.append(
            start_check(
                path, final_state, probe_sweeps, operator, generator, forward=True, budget_chain_sweeps=cost
            )
        )
    return checks


#: Ends of a sandwich further apart than this many standard errors of their gap disagree.
GAP_SIGMAS = 3.0


def gap_check(gap: float, gap_se: float) -> dict[str, Any]:
    """Whether a forward estimate (a stochastic lower bound) and a reverse one (an upper bound,
    from exact samples) agree within their noise (a check of the record).

    The truth lies between the two ends; a gap of more than :data:`GAP_SIGMAS` standard errors
    means neither end has converged (the schedule is too short, or the forward chains miss part of
    the distribution: a mode the base does not lead to), and ends that cross beyond noise mean the
    reverse start samples were not samples of the model. A gap with a zero standard error (one
    weight per direction) cannot be judged: the check fails and says so, blaming neither end.
    """
    bound = GAP_SIGMAS * gap_se
    passed = -bound <= gap <= bound
    reason = advice = None
    where = "above the forward (lower) one" if gap > 0 else "below the forward one"
    if not passed and gap_se == 0.0:  # one weight per direction: a gap, and no noise to judge it by
        reason = (
            f"the reverse (upper) estimate is {abs(gap):.3g} nats {where}, and their weights have no "
            "spread to judge that gap by (one weight per direction, or equal weights)"
        )
        advice = "run more chains (a band needs their spread: 100 or more)"
    elif gap > bound:
        reason = (
            f"the reverse (upper) estimate is {gap:.3g} nats {where}, {gap / gap_se:.1f} standard "
            "errors: the truth lies between the ends, but the forward estimate has not converged (a too "
            "short schedule, or chains that miss part of the distribution)"
        )
        advice = (
            "lengthen the schedule (--betas N or adaptive:N), or start from a base fitted to data "
            "(--base-rate-data), until the ends agree"
        )
    elif gap < -bound:
        reason = f"the reverse (upper) estimate is {-gap:.3g} nats {where}, beyond noise"
        advice = "check the reverse start samples (they must be samples of the model); use more chains"
    return {"name": "forward and reverse agree", "passed": passed, "reason": reason, "advice": advice}


def reverse_check(
    path: AnnealingPath,
    schedule: Tensor,
    main: LogZResult,
    n_chains: int,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
) -> dict[str, Any]:
    """Reverse AIS from exact samples of the target (as many chains, the same schedule) against
    the forward estimate: what the forward weights cannot see.

    With exact start samples the reverse estimate is a stochastic *upper* bound and the forward
    one a lower bound (bidirectional Monte Carlo, Grosse et al. 2015), so the truth lies between.
    When the reverse estimate lies above the forward estimate's own ``+3 sigma`` end, the truth may
    lie outside the forward band (the chains missed part of the distribution, or the schedule is
    too short): the check fails; it also fails when the two cross beyond their noise. On a
    converged estimate it fails about 1 time in 60 (the reverse estimate's own noise). Only where
    the path's end can be sampled exactly (a model small enough to enumerate), so the doubled cost
    falls on small models only.
    """
    init = path.sample_end(int(n_chains), generator)
    run = anneal(path, schedule.flip(0), init=init, operator=operator, sweeps=sweeps, generator=generator)
    reverse = record(
        "reverse-ais", path, run.log_weights, n_steps=schedule.numel() - 1, reciprocal=True, seconds=0.0
    )
    f_band = main.ratio_band if path.is_ratio else main.band
    r_band = reverse.ratio_band if path.is_ratio else reverse.band
    gap = r_band.value - f_band.value
    gap_se = math.hypot(main.log_z_stderr or 0.0, reverse.log_z_stderr or 0.0)
    out = {
        **gap_check(gap, gap_se),
        "name": "exact reverse run",
        "log_z": r_band.value,
        "n_chains": int(n_chains),
    }
    top = f_band.plus_3sigma
    if out["passed"] and top is not None and r_band.value > top:
        out.update(
            passed=False,
            reason=f"reverse AIS from exact samples gives {r_band.value:.6g}, {r_band.value - top:.2g} nats "
            f"above the forward band's upper end {top:.6g}: log Z may lie outside the band (chains that miss "
            "part of the distribution, or a too short schedule)",
            advice="use --method sandwich (its band spans both ends), a longer schedule, or a base fitted to "
            "data (--base-rate-data)",
        )
    return {**out, "gap": gap, "gap_stderr": gap_se}


#: The control run of :func:`schedule_check` uses this fraction of the chains (at least 10).
CHECK_CHAINS = 0.5
#: ... and flags a difference beyond this many of its standard errors (2.5: a false alarm on about
#: 1 in 80 converged estimates, for power against biases of a few of the estimate's own sigmas).
CHECK_SIGMAS = 2.5


def schedule_check(
    path: AnnealingPath,
    schedule: Tensor,
    main: LogZResult,
    n_chains: int,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
) -> dict[str, Any]:
    """Whether the schedule has converged: a control run along every other beta (half the steps)
    with half the chains, compared with the main estimate.

    AIS's bias shrinks as the schedule gets finer (roughly as one over its length, Neal 2001), so
    when halving the schedule moves the estimate by ``d`` beyond the noise of the two estimates,
    the main estimate still holds a bias of about ``d``: every chain is biased the same way, the
    weights look healthy, and only this comparison shows it. Costs a quarter of the main run.

    Returns
    -------
    dict
        A check for the record (:func:`~boltzkit.estimators.reliability.with_checks`): ``passed``,
        ``reason``, ``advice``, the control run's ``log_z`` and ``n_steps``, the ``difference``
        (main minus control) and its ``difference_stderr``.
    """
    half = schedule[::2] if schedule.numel() % 2 == 1 else torch.cat([schedule[:-1:2], schedule[-1:]])
    m = max(10, int(n_chains * CHECK_CHAINS))
    control_run = anneal(
        path,
        half,
        init=path.sample_start(m, generator),
        operator=operator,
        sweeps=sweeps,
        generator=generator,
    )
    control = record("ais", path, control_run.log_weights, n_steps=half.numel() - 1, seconds=0.0)
    est, ctl = (
        (main.ratio_band if path.is_ratio else main.band),
        (control.ratio_band if path.is_ratio else control.band),
    )
    diff = est.value - ctl.value
    se = math.hypot(main.log_z_stderr or 0.0, control.log_z_stderr or 0.0)
    passed = abs(diff) <= CHECK_SIGMAS * se
    out: dict[str, Any] = {
        "name": "schedule halved",
        "passed": passed,
        "reason": None,
        "advice": None,
        "log_z": ctl.value,
        "n_steps": int(half.numel() - 1),
        "n_chains": m,
        "difference": diff,
        "difference_stderr": se,
    }
    if not passed:
        out["reason"] = (
            f"halving the schedule ({half.numel() - 1} steps) moves the estimate by {diff:+.3g} nats, "
            f"{abs(diff) / se if se > 0 else math.inf:.1f} standard errors: it has not converged and "
            f"still holds a bias of about {abs(diff):.2g} nats"
        )
        out["advice"] = (
            f"use a longer schedule (--betas {2 * (schedule.numel() - 1)} or "
            f"adaptive:{2 * (schedule.numel() - 1)}) until halving it no longer moves the estimate"
        )
    return out


__all__ = [
    "AnnealRun",
    "adaptive_betas",
    "ais",
    "anneal",
    "check_runs",
    "path_settings",
    "record",
    "resolve_betas",
    "CHECK_CHAINS",
    "GAP_SIGMAS",
    "gap_check",
    "reverse_check",
    "CHECK_SIGMAS",
    "schedule_check",
    "seed_label",
]
