"""Reverse AIS and the forward/reverse sandwich (bidirectional Monte Carlo), along any path.

Run backwards, from exact samples ``x_K ~ p_K`` of the target down to the start, the AIS engine
(:func:`boltzkit.estimators.ais.anneal` with the betas reversed) accumulates (Grosse, Ghahramani &
Adams 2015, "Sandwiching the marginal likelihood using bidirectional Monte Carlo")::

    log w_rev = sum_{k=K}^{1} [ log p*_{k-1}(x_k) - log p*_k(x_k) ],   x_{k-1} ~ T_{k-1}(. | x_k)

with ``E[w_rev] = Z_0 / Z_K``. Hence::

    log Z_up = log Z_0 - log mean(w_rev)

is a *stochastic upper bound* on ``log Z`` (Jensen: ``E[log Z_up] >= log Z``; Markov:
``P(log Z_up < log Z - t) <= exp(-t)``), just as forward AIS (S&M 2008, Eq. 11) gives a stochastic
lower bound. Run together with the same schedule, the two sandwich ``log Z``; their gap shrinks as
the number of intermediate distributions grows and is the convergence diagnostic of bidirectional
Monte Carlo (Grosse, Ancha & Roy 2016).

The upper bound needs *exact* samples of the target: they come from enumeration
(:meth:`~boltzkit.estimators.paths.AnnealingPath.sample_end`). For larger models the start
samples can only be approximate (chains from the end states of a forward AIS run, or from data),
and the "bound" is then heuristic: every record says which it is in ``settings["bound"]``.
"""

from __future__ import annotations

import math
import time
from dataclasses import fields
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator
from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators.ais import (
    AnnealRun,
    anneal,
    check_runs,
    gap_check,
    path_settings,
    record,
    resolve_betas,
    seed_label,
    sync,
)
from boltzkit.estimators.paths import AnnealingPath, check_path
from boltzkit.estimators.probes import start_check
from boltzkit.estimators.reliability import warn_unreliable
from boltzkit.estimators.result import LogZResult, SandwichResult
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

#: Start modes of reverse AIS.
START_MODES = ("exact", "auto", "chains", "data")

BOUND_EXACT = "stochastic upper bound"
BOUND_HEURISTIC = "heuristic (approximate start samples)"


# ------------------------------------------------------------------------------ plumbing
def _check_start(start: str, start_data: Tensor | None, start_chain_steps: int) -> str:
    mode = str(start).strip().lower()
    if mode not in START_MODES:
        raise BoltzkitError(
            "unknown start mode for reverse AIS",
            got=start,
            expected="'exact' (enumerated target samples), 'auto' (exact when possible, else chains), "
            "'chains' (chains from forward-AIS end states) or 'data' (chains from data)",
        )
    if mode == "data" and start_data is None:
        raise BoltzkitError(
            "reverse AIS with start='data' needs start_data",
            hint="pass the training data as start_data, or use start='chains'.",
        )
    if int(start_chain_steps) < 0:
        raise BoltzkitError("start_chain_steps must be non-negative", got=start_chain_steps)
    return mode


def relax(
    path: AnnealingPath,
    state: ChainState,
    n_steps: int,
    operator: TransitionOperator,
    generator: torch.Generator,
    progress: bool = False,
) -> ChainState:
    """``n_steps`` transitions of the path's target (``beta = 1``) started at ``state``."""
    from tqdm.auto import tqdm

    for _ in tqdm(range(int(n_steps)), desc="start chains", disable=not progress, leave=False):
        state = path.transition(state, 1.0, operator, generator)
    return state


def _pick_rows(data: Tensor, n: int, generator: torch.Generator) -> Tensor:
    """``n`` rows of ``data``: a random subset when there are enough, else drawn with replacement."""
    m = data.shape[0]
    if m >= n:
        idx = torch.randperm(m, generator=generator, device=generator.device)[:n]
    else:
        idx = torch.randint(m, (n,), generator=generator, device=generator.device)
    return data[idx.to(data.device)]


def reverse_start(
    path: AnnealingPath,
    mode: str,
    *,
    n_chains: int,
    schedule: Tensor,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
    start_data: Tensor | None,
    start_chain_steps: int,
    progress: bool,
    forward: AnnealRun | None = None,
) -> tuple[ChainState, bool, str]:
    """Start states of reverse AIS (samples of ``p_1``), whether they are exact, and a label."""
    if mode in ("exact", "auto"):
        init = path.sample_end(n_chains, generator)
        if init is not None:
            return init, True, "exact samples of the target (enumeration)"
        if mode == "exact":
            raise IntractableError(
                "reverse AIS needs exact samples of the target, but it has too many units to enumerate",
                expected=f"at most {getattr(path, 'max_bits', '?')} enumerated units",
                hint="use start='chains' (chains from forward-AIS end states) or start='data'; "
                "the upper bound is then heuristic.",
            )
        mode = "chains"
    if mode == "chains":
        if forward is None:
            forward = anneal(
                path,
                schedule,
                init=path.sample_start(n_chains, generator),
                operator=operator,
                sweeps=sweeps,
                generator=generator,
                progress=progress,
                final_move=True,
            )
        state = relax(path, forward.final_state, start_chain_steps, operator, generator, progress)
        label = f"forward-AIS end states + {int(start_chain_steps)} {operator.name} sweeps (approximate)"
    else:
        from boltzkit.data.dataset import check_binary

        data = check_binary(start_data, source="reverse-AIS start data", n_visible=path.n_visible)
        rows = _pick_rows(data.to(device=path.device, dtype=path.dtype), n_chains, generator)
        state = relax(
            path, path.from_visible(rows, generator), start_chain_steps, operator, generator, progress
        )
        label = f"data + {int(start_chain_steps)} {operator.name} sweeps (approximate)"
    return state, False, label


def _reverse_leg(
    path: AnnealingPath,
    mode: str,
    *,
    schedule: Tensor,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
    progress: bool,
    **start: Any,
) -> tuple[AnnealRun, ChainState, bool, str]:
    """The reverse half of :func:`reverse_ais` and :func:`sandwich`: start states of ``p_1``
    (:func:`reverse_start`, which takes ``start``'s keywords), then the schedule run backwards.
    Returns the run, its start states, whether they were exact, and their label."""
    init, exact, label = reverse_start(
        path, mode, schedule=schedule, operator=operator, sweeps=sweeps, generator=generator,
        progress=progress, **start,
    )  # fmt: skip
    run = anneal(
        path, schedule.flip(0), init=init, operator=operator, sweeps=sweeps, generator=generator,
        progress=progress, desc="reverse AIS",
    )  # fmt: skip
    return run, init, exact, label


def _start_settings(exact: bool, label: str) -> dict[str, Any]:
    out: dict[str, Any] = {"start": label, "bound": BOUND_EXACT if exact else BOUND_HEURISTIC}
    if not exact:
        out["warning"] = (
            "reverse AIS started from approximate samples of the target: the upper bound is heuristic"
        )
    return out


def _common_settings(
    path: AnnealingPath, schedule_name: str, n_steps: int, op: TransitionOperator, sweeps: int, seed
) -> dict[str, Any]:
    out = path_settings(path)
    out.pop("warning", None)
    out.pop("start", None)
    out.update(
        schedule=schedule_name,
        sampler=op.name,
        sweeps=int(sweeps),
        total_sweeps=n_steps * int(sweeps),
        seed=seed_label(seed),
    )
    return out


# ------------------------------------------------------------------------------ estimators
def reverse_ais(
    path: AnnealingPath,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 1000,
) -> LogZResult:
    """Stochastic upper bound on ``log Z`` (or on ``log Z_B - log Z_A``) by reverse AIS along
    ``path`` (Grosse et al. 2015): the weights estimate ``Z_0 / Z_1``.

    Parameters
    ----------
    path, n_chains, betas, sweeps, sampler, seed, progress
        As for :func:`~boltzkit.estimators.ais.ais` (same schedule grammar).
    start
        ``"exact"``: exact samples of the target by enumeration (an error when it has too many
        units); ``"auto"``: exact when possible, else ``"chains"``; ``"chains"``: end states of a
        forward AIS run (same schedule) followed by ``start_chain_steps`` transitions;
        ``"data"``: rows of ``start_data`` followed by ``start_chain_steps`` transitions. Only
        exact starts give a true stochastic upper bound.
    start_data
        Binary data, shape ``(n_examples, n_visible)``, for ``start="data"``.
    start_chain_steps
        Transitions at ``beta = 1`` applied to approximate start states.

    Returns
    -------
    LogZResult
        ``method="reverse-ais"``, ``reciprocal=True`` (the bands are the image of the ``Z_0 / Z``
        interval: the *upper* ``log Z`` bands are ``None`` when ``r_hat - k sigma <= 0``);
        ``settings["bound"]`` is ``"stochastic upper bound"`` or
        ``"heuristic (approximate start samples)"``, ``settings["start"]`` describes the starts.
    """
    check_path(path, "reverse_ais")
    check_runs(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    op = make_operator(sampler)
    gen = make_generator(seed, path.device)
    schedule, schedule_name = resolve_betas(
        betas, path, n_chains=n_chains, operator=op, sweeps=sweeps, generator=gen, progress=progress
    )
    run, _, exact, label = _reverse_leg(
        path, mode, n_chains=int(n_chains), schedule=schedule, operator=op, sweeps=sweeps, generator=gen,
        start_data=start_data, start_chain_steps=start_chain_steps, progress=progress,
    )  # fmt: skip
    sync(path.device)
    n_steps = schedule.numel() - 1
    settings = {
        **_common_settings(path, schedule_name, n_steps, op, sweeps, seed),
        **_start_settings(exact, label),
    }
    if not exact:
        settings["checks"] = [
            {
                "name": "exact start samples",
                "passed": False,
                "reason": "reverse AIS started from approximate samples of the model (Markov chains), so its "
                "upper bound is only heuristic and can lie below log Z (chains that miss part of the "
                "distribution miss it in both directions)",
                "advice": "use --method sandwich (its forward end is a true stochastic lower bound, and the "
                "ends are compared), or reverse AIS on a model small enough to enumerate",
            }
        ]
    result = record(
        "reverse-ais",
        path,
        run.log_weights,
        n_steps=n_steps,
        reciprocal=True,
        seconds=time.perf_counter() - t0,
        **settings,
    )
    warn_unreliable("the reverse AIS estimate of log Z", result.reliability())
    return result


def _mean_log_w(log_w: Tensor) -> tuple[float, float]:
    """Mean of the log-weights and its standard error (``sd / sqrt(M)``; 0 for one chain)."""
    lw = log_w.detach().to(torch.float64).flatten().cpu()
    m = lw.numel()
    se = float(lw.std(unbiased=True)) / math.sqrt(m) if m > 1 else 0.0
    return float(lw.mean()), se


def _sandwich_note(gap: float, gap_se: float) -> str:
    """Plain words on the gap between the reverse (upper) and forward (lower) estimates."""
    if gap_se == 0.0 and gap != 0.0:  # one chain per direction
        side = "above" if gap > 0 else "below"
        return (
            f"the reverse (upper) estimate is {abs(gap):.3g} nats {side} the forward (lower) one; with "
            "one chain per direction there is no standard error to judge the gap by"
        )
    if gap >= 0:
        return (
            f"the reverse (upper) estimate is {gap:.3g} nats above the forward (lower) one "
            f"(standard error of the gap {gap_se:.2g})"
        )
    within = -gap <= 3 * gap_se
    return (
        f"the two ends cross: the reverse (upper) estimate is {-gap:.3g} nats below the forward (lower) "
        f"one, {'within' if within else 'beyond'} 3 standard errors of the gap ({gap_se:.2g}); "
        + (
            "each is a stochastic bound and the schedule is fine enough for both to agree within noise"
            if within
            else "this should not happen with exact reverse starts: check the start samples and use more "
            "chains"
        )
    )


def _sandwich_settings(fwd: LogZResult, rev: LogZResult, ratio: bool) -> dict[str, Any]:
    """Lower/upper estimates, their bands and gaps (the BDMC diagnostic) for a sandwich record."""
    key = "log_ratio" if ratio else "log_z"
    f_band = fwd.ratio_band if ratio else fwd.band
    r_band = rev.ratio_band if ratio else rev.band
    assert f_band is not None and r_band is not None
    # single-chain bounds: E[log w_fwd] <= log(Z/Z_0) and -E[log w_rev] >= log(Z/Z_0)
    mf, sef = _mean_log_w(fwd.log_weights)
    mr, ser = _mean_log_w(rev.log_weights)
    gap = r_band.value - f_band.value
    gap_se = math.hypot(fwd.log_z_stderr, rev.log_z_stderr)
    out: dict[str, Any] = {
        f"{key}_lower": f_band.value,
        f"{key}_upper": r_band.value,
        "gap": gap,
        "gap_stderr": gap_se,
        "ends_cross": gap < 0,
        "sandwich_note": _sandwich_note(gap, gap_se),
        f"{key}_lower_per_chain": fwd.log_z_start + mf,
        f"{key}_upper_per_chain": rev.log_z_start - mr,
        "gap_per_chain": -(mf + mr),
        "gap_per_chain_stderr": math.hypot(sef, ser),
    }
    if ratio and fwd.reference_log_z is not None:
        out["log_z_lower"] = fwd.band.value
        out["log_z_upper"] = rev.band.value
    out["forward"] = {**f_band.as_dict(key), "stderr": fwd.log_z_stderr, "ess": fwd.ess}
    out["reverse"] = {**r_band.as_dict(key), "stderr": rev.log_z_stderr, "ess": rev.ess}
    return out


def sandwich(
    path: AnnealingPath,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 1000,
    check: bool = True,
) -> SandwichResult:
    """Forward and reverse AIS along ``path`` with one schedule: the estimate sandwiched between
    two stochastic bounds (bidirectional Monte Carlo; Grosse et al. 2015, 2016).

    Forward AIS (S&M 2008, Eq. 11) gives ``log Z_lo`` with ``E[log Z_lo] <= log Z``, reverse AIS
    ``log Z_up`` with ``E[log Z_up] >= log Z`` (exact starts). Both runs share the seed's generator
    (forward first, so the forward half equals :func:`~boltzkit.estimators.ais.ais` with the same
    arguments), the schedule (resolved once, so an adaptive schedule is chosen by one pilot run)
    and the path.

    Parameters
    ----------
    path, n_chains, betas, sweeps, sampler, seed, progress
        As for :func:`~boltzkit.estimators.ais.ais`; ``n_chains`` runs in each direction.
    start, start_data, start_chain_steps
        Start samples of the reverse runs, as for :func:`reverse_ais`; with ``"chains"`` (or
        ``"auto"`` on a model too large to enumerate) they come from the forward run's end states.
    check
        Where the reverse starts are approximate, also run four chains of the target per start,
        started away from them, for ``start_chain_steps`` transitions, and fail the estimate when
        they end elsewhere (:func:`~boltzkit.estimators.probes.start_check`): reverse runs started from a
        forward run that missed a mode miss it too, and the ends agree about the wrong answer. It
        costs four times the start chains; probes still relaxing run on, up to the cost of the
        two runs. The estimate's numbers do not change.

    Returns
    -------
    SandwichResult
        ``method="sandwich"``: ``log_z``, ``log_weights`` and bands are the forward (lower)
        estimate's. ``settings`` (and so ``to_dict()``) hold ``log_z_lower``, ``log_z_upper``
        (``log_ratio_lower`` / ``log_ratio_upper`` for a ratio path), ``gap``, the per-chain bounds
        ``log Z_0 + mean(log w_fwd)`` and ``log Z_0 - mean(log w_rev)`` with their
        ``gap_per_chain`` (an estimate of the symmetrised KL divergence between the forward and
        reverse chains, which goes to 0 as the schedule gets finer) and its
        ``gap_per_chain_stderr``, the full ``forward`` and ``reverse`` bands, and ``bound`` and
        ``start`` of the reverse half. The two halves are attached as ``forward`` and ``reverse``.
    """
    check_path(path, "sandwich")
    check_runs(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    op = make_operator(sampler)
    gen = make_generator(seed, path.device)
    schedule, schedule_name = resolve_betas(
        betas, path, n_chains=n_chains, operator=op, sweeps=sweeps, generator=gen, progress=progress
    )
    n_steps = schedule.numel() - 1
    # The final move only draws after the last weight update: the forward weights are those of
    # ais() with the same seed, and its end states can start approximate reverse runs.
    needs_states = mode == "chains" or (mode == "auto" and not path.end_is_exact)
    t_fwd = time.perf_counter()
    fwd_run = anneal(
        path,
        schedule,
        init=path.sample_start(int(n_chains), gen),
        operator=op,
        sweeps=sweeps,
        generator=gen,
        progress=progress,
        final_move=needs_states,
    )
    t_rev = time.perf_counter()
    rev_run, rev_init, exact, label = _reverse_leg(
        path, mode, n_chains=int(n_chains), schedule=schedule, operator=op, sweeps=sweeps, generator=gen,
        start_data=start_data, start_chain_steps=start_chain_steps, progress=progress, forward=fwd_run,
    )  # fmt: skip
    sync(path.device)
    t_end = time.perf_counter()
    common = _common_settings(path, schedule_name, n_steps, op, sweeps, seed)
    fwd = record("ais", path, fwd_run.log_weights, n_steps=n_steps, seconds=t_rev - t_fwd, **common)
    rev = record(
        "reverse-ais",
        path,
        rev_run.log_weights,
        n_steps=n_steps,
        reciprocal=True,
        seconds=t_end - t_rev,
        **common,
    )
    settings = {**common, **_start_settings(exact, label), **_sandwich_settings(fwd, rev, path.is_ratio)}
    settings["lower_bound"] = "stochastic lower bound (forward AIS)"
    settings["upper_bound"] = settings.pop("bound") + " (reverse AIS)"
    settings["checks"] = [gap_check(settings["gap"], settings["gap_stderr"])]
    if not exact and check:  # after both legs: their numbers do not change
        cost = 2 * int(n_chains) * n_steps * int(sweeps)  # relaxing probes may run on to both legs' cost
        settings["checks"].append(
            start_check(path, rev_init, int(start_chain_steps), op, gen, budget_chain_sweeps=cost)
        )
    if path.is_ratio and not path.exact_start:
        settings["forward_warning"] = "forward start samples of A are approximate (Gibbs chains)"
    rec = record("sandwich", path, fwd_run.log_weights, n_steps=n_steps, seconds=t_end - t0, **settings)
    result = SandwichResult(
        **{f.name: getattr(rec, f.name) for f in fields(LogZResult)}, forward=fwd, reverse=rev
    )
    warn_unreliable("the sandwich estimate of log Z", result.reliability())
    return result


__all__ = [
    "BOUND_EXACT",
    "BOUND_HEURISTIC",
    "START_MODES",
    "relax",
    "reverse_ais",
    "reverse_start",
    "sandwich",
]
