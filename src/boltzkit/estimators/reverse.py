"""Reverse AIS and the forward/reverse sandwich (bidirectional Monte Carlo).

Run backwards, from exact samples ``x_K ~ p_K`` of the target down to the base, the AIS engine
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

The upper bound needs *exact* samples of the target. For an RBM they come from enumerating its
smaller layer (:func:`boltzkit.estimators.exact.exact_sample`, via
:meth:`~boltzkit.estimators.paths.RBMPath.sample_end`). For larger models the start samples can
only be approximate (Gibbs chains from the end states of a forward AIS run, or from data), and
the "bound" is then heuristic: every record says which it is in ``settings["bound"]``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

from boltzkit.errors import BoltzkitError, IntractableError
from boltzkit.estimators.ais import (
    AnnealRun,
    PathSetup,
    _check_common,
    _resolve_betas,
    anneal,
    log_z_setup,
    ratio_setup,
)
from boltzkit.estimators.result import LogZResult
from boltzkit.models.rbm import RBM
from boltzkit.samplers.driver import run_chains
from boltzkit.samplers.operators import TransitionOperator
from boltzkit.state import ChainState

#: Largest smaller layer (in units) whose marginal is enumerated for exact start samples: the
#: enumeration keeps one float64 number per state (``2^26`` states: 0.5 GB).
EXACT_SAMPLE_MAX_BITS = 26

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
            "'chains' (Gibbs chains from forward-AIS end states) or 'data' (Gibbs chains from data)",
        )
    if mode == "data" and start_data is None:
        raise BoltzkitError(
            "reverse AIS with start='data' needs start_data",
            hint="pass the training data as start_data, or use start='chains'.",
        )
    if int(start_chain_steps) < 0:
        raise BoltzkitError("start_chain_steps must be non-negative", got=start_chain_steps)
    return mode


def _forward(
    s: PathSetup, schedule: Tensor, n_chains: int, sweeps: int, progress: bool, *, final_move: bool
) -> AnnealRun:
    """Forward AIS from exact base samples (same random numbers as ``ais_log_z`` for the weights)."""
    return anneal(
        s.path,
        schedule,
        init=s.path.sample_start(n_chains, s.generator),
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
        final_move=final_move,
        desc="AIS",
    )


def _relax(s: PathSetup, v: Tensor, n_steps: int, progress: bool) -> Tensor:
    """``n_steps`` sweeps of the sampler on the target, started at visible states ``v``."""
    if n_steps <= 0:
        return v
    model = s.path.rbm_b
    v = v.to(dtype=model.dtype, device=model.device)
    state = ChainState((v, model.sample_h_given_v(v, s.generator)))
    state = run_chains(
        model, s.operator, state, int(n_steps), generator=s.generator, progress=progress, desc="start chains"
    )
    return state.visible


def _pick_rows(data: Tensor, n: int, generator: torch.Generator) -> Tensor:
    """``n`` rows of ``data``: a random subset when there are enough, else drawn with replacement."""
    m = data.shape[0]
    if m >= n:
        idx = torch.randperm(m, generator=generator, device=generator.device)[:n]
    else:
        idx = torch.randint(m, (n,), generator=generator, device=generator.device)
    return data[idx.to(data.device)]


def _reverse_init(
    s: PathSetup,
    mode: str,
    *,
    n_chains: int,
    schedule: Tensor,
    sweeps: int,
    start_data: Tensor | None,
    start_chain_steps: int,
    progress: bool,
    forward: AnnealRun | None = None,
) -> tuple[ChainState, bool, str]:
    """Start states of reverse AIS (samples of ``p_1``), whether they are exact, and a label."""
    path = s.path
    width = path.m_a + path.m_b
    if mode in ("exact", "auto"):
        init = path.sample_end(n_chains, s.generator)
        if init is not None:
            return init, True, "exact samples of the target (enumerated smaller layer)"
        if mode == "exact":
            k = min(path.m_b, path.n_visible)
            raise IntractableError(
                "reverse AIS needs exact samples of the target, but its smaller layer is too large "
                f"to enumerate ({k} units)",
                expected=f"at most {path.max_bits} units in the smaller layer",
                hint="use start='chains' (Gibbs chains from forward-AIS end states) or start='data'; "
                "the upper bound is then heuristic.",
            )
        mode = "chains"
    if mode == "chains":
        if forward is None:
            forward = _forward(s, schedule, n_chains, sweeps, progress, final_move=True)
        v = _relax(s, forward.final_state.visible, start_chain_steps, progress)
        label = f"forward-AIS end states + {int(start_chain_steps)} {s.operator.name} sweeps (approximate)"
    else:
        from boltzkit.estimators.likelihood import validate_binary_data

        data = validate_binary_data(start_data, path.n_visible, what="reverse-AIS start data")
        rows = _pick_rows(data.to(device=s.device, dtype=path.dtype), n_chains, s.generator)
        v = _relax(s, rows, start_chain_steps, progress)
        label = f"data + {int(start_chain_steps)} {s.operator.name} sweeps (approximate)"
    v = v.to(dtype=path.dtype, device=s.device)
    return ChainState((v, v.new_zeros(v.shape[0], width))), False, label


def _reverse(s: PathSetup, schedule: Tensor, init: ChainState, sweeps: int, progress: bool) -> AnnealRun:
    """The AIS engine run along the reversed schedule: its weights estimate ``Z_0 / Z_1``."""
    return anneal(
        s.path,
        schedule.flip(0),
        init=init,
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
        desc="reverse AIS",
    )


def _settings(s: PathSetup, schedule: Tensor, schedule_name: str, sweeps: int) -> dict[str, Any]:
    n_steps = schedule.numel() - 1
    out: dict[str, Any] = {}
    if s.base_name is not None:
        out["base"] = s.base_name
        out["log_z_base"] = s.path.log_z_a
    out.update(
        schedule=schedule_name,
        sampler=s.operator.name,
        sweeps=int(sweeps),
        total_sweeps=n_steps * int(sweeps),
        seed=s.seed_label,
        device=str(s.device),
        dtype=str(s.model.dtype).replace("torch.", ""),
    )
    return out


def _start_settings(exact: bool, label: str) -> dict[str, Any]:
    out: dict[str, Any] = {"start": label, "bound": BOUND_EXACT if exact else BOUND_HEURISTIC}
    if not exact:
        out["warning"] = (
            "reverse AIS started from approximate samples of the target: the upper bound is heuristic"
        )
    return out


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _result(
    method: str,
    s: PathSetup,
    log_w: Tensor,
    *,
    ratio: bool,
    reciprocal: bool,
    n_betas: int,
    seconds: float,
    settings: dict[str, Any],
) -> LogZResult:
    """Record of a run along ``s.path``; for log Z the path constant folds into ``log_z_start``."""
    p = s.path
    if ratio:
        return LogZResult.from_log_weights(
            method,
            log_w,
            log_z_start=p.log_ratio_offset,
            n_betas=n_betas,
            reciprocal=reciprocal,
            is_ratio=True,
            reference_log_z=p.log_z_a,
            seconds=seconds,
            **settings,
        )
    return LogZResult.from_log_weights(
        method,
        log_w,
        log_z_start=float(p.log_z_zero) - p.log_f_one_offset,
        n_betas=n_betas,
        reciprocal=reciprocal,
        seconds=seconds,
        **settings,
    )


# ------------------------------------------------------------------------------ public API
def _reverse_estimate(
    s: PathSetup,
    mode: str,
    *,
    ratio: bool,
    betas: str | int | Tensor,
    n_chains: int,
    sweeps: int,
    start_data: Tensor | None,
    start_chain_steps: int,
    progress: bool,
    t0: float,
) -> LogZResult:
    """Resolve the schedule, draw the start states, anneal backwards and build the record."""
    schedule, schedule_name = _resolve_betas(
        betas,
        s.path,
        n_chains=n_chains,
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
    )
    init, exact, label = _reverse_init(
        s,
        mode,
        n_chains=n_chains,
        schedule=schedule,
        sweeps=sweeps,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        progress=progress,
    )
    run = _reverse(s, schedule, init, sweeps, progress)
    _sync(s.device)
    settings = {**_settings(s, schedule, schedule_name, sweeps), **_start_settings(exact, label)}
    return _result(
        "reverse-ais",
        s,
        run.log_weights,
        ratio=ratio,
        reciprocal=True,
        n_betas=schedule.numel() - 1,
        seconds=time.perf_counter() - t0,
        settings=settings,
    )


def reverse_ais_log_z(
    rbm: RBM,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = "paper",
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    base_rate_data: Tensor | None = None,
    base_vbias: Tensor | None = None,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 1000,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> LogZResult:
    """Stochastic upper bound on ``log Z`` of an RBM by reverse AIS (Grosse et al. 2015).

    Chains start from samples of the RBM and anneal along the base-rate path of
    :func:`~boltzkit.estimators.ais.ais_log_z` (S&M 2008, Sec. 3.3) backwards, ``beta: 1 -> 0``;
    the weights estimate ``Z_0 / Z`` and ``log Z_up = log Z_0 - log mean(w_rev)``.

    Parameters
    ----------
    rbm
        The target model.
    n_chains
        Number of reverse runs ``M``.
    betas, sweeps, sampler, base_rate_data, base_vbias, seed, device, progress
        As for :func:`~boltzkit.estimators.ais.ais_log_z` (same schedule grammar, same base).
    start
        ``"exact"``: exact samples of the RBM by enumerating its smaller layer (an error when it
        has more than ``max_bits`` units); ``"auto"``: exact when possible, else ``"chains"``;
        ``"chains"``: end states of a forward AIS run (same schedule) followed by
        ``start_chain_steps`` sampler sweeps; ``"data"``: rows of ``start_data`` followed by
        ``start_chain_steps`` sweeps. Only ``"exact"`` gives a true stochastic upper bound.
    start_data
        Binary data, shape ``(n_examples, n_visible)``, for ``start="data"``.
    start_chain_steps
        Sampler sweeps on the RBM applied to approximate start states.
    max_bits
        Largest smaller layer that is enumerated for exact start samples.

    Returns
    -------
    LogZResult
        ``method="reverse-ais"``, ``reciprocal=True`` (the bands are the image of the
        ``Z_0 / Z`` interval: the *upper* ``log Z`` bands are ``None`` when ``r_hat - k sigma <= 0``);
        ``settings["bound"]`` is ``"stochastic upper bound"`` or
        ``"heuristic (approximate start samples)"``, ``settings["start"]`` describes the starts.
    """
    _check_common(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    s = log_z_setup(
        rbm,
        sampler=sampler,
        base_rate_data=base_rate_data,
        base_vbias=base_vbias,
        seed=seed,
        device=device,
        max_bits=max_bits,
    )
    return _reverse_estimate(
        s,
        mode,
        ratio=False,
        betas=betas,
        n_chains=n_chains,
        sweeps=sweeps,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        progress=progress,
        t0=t0,
    )


def reverse_ais_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = 10_001,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 10_000,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> LogZResult:
    """Reverse AIS along the RBM-to-RBM path ``A -> B`` (S&M 2008, Eqs. 13-17): an estimate of
    ``log(Z_B / Z_A)`` that is a stochastic *upper* bound when the starts are exact samples of B.

    The weights estimate ``Z_0 / Z_1 = Z_A 2^{M_B} / (Z_B 2^{M_A})``, so
    ``log(Z_B / Z_A) = (M_B - M_A) log 2 - log mean(w_rev)``. Parameters as in
    :func:`reverse_ais_log_z` and :func:`~boltzkit.estimators.ais.ais_log_ratio`.

    Returns
    -------
    LogZResult
        ``method="reverse-ais"``, ``is_ratio=True``, ``reciprocal=True``; ``log_z`` of B when
        ``log Z_A`` is exactly known.
    """
    _check_common(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    s = ratio_setup(
        rbm_b,
        rbm_a,
        sampler=sampler,
        start_chain_steps=start_chain_steps,
        max_bits=max_bits,
        seed=seed,
        device=device,
    )
    return _reverse_estimate(
        s,
        mode,
        ratio=True,
        betas=betas,
        n_chains=n_chains,
        sweeps=sweeps,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        progress=progress,
        t0=t0,
    )


@dataclass(frozen=True)
class SandwichResult(LogZResult):
    """A ``method="sandwich"`` record: the forward (lower) estimate, with both halves attached.

    Attributes
    ----------
    forward
        The forward AIS record (``method="ais"``).
    reverse
        The reverse AIS record (``method="reverse-ais"``, ``reciprocal=True``).
    """

    forward: LogZResult | None = None
    reverse: LogZResult | None = None

    def to_dict(self, include_weights: bool = False) -> dict[str, Any]:
        """As :meth:`LogZResult.to_dict`; with weights, also ``reverse_log_weights``."""
        out = super().to_dict(include_weights)
        if include_weights and self.reverse is not None and self.reverse.log_weights is not None:
            out["reverse_log_weights"] = self.reverse.log_weights.tolist()
        return out


def _mean_log_w(log_w: Tensor) -> tuple[float, float]:
    """Mean of the log-weights and its standard error (``sd / sqrt(M)``; 0 for one chain)."""
    lw = log_w.detach().to(torch.float64).flatten().cpu()
    m = lw.numel()
    se = float(lw.std(unbiased=True)) / math.sqrt(m) if m > 1 else 0.0
    return float(lw.mean()), se


def _sandwich_settings(fwd: LogZResult, rev: LogZResult, ratio: bool) -> dict[str, Any]:
    """Lower/upper estimates, their bands and gaps (the BDMC diagnostic) for a sandwich record."""
    key = "log_ratio" if ratio else "log_z"
    f_band = fwd.ratio_band if ratio else fwd.band
    r_band = rev.ratio_band if ratio else rev.band
    assert f_band is not None and r_band is not None
    # single-chain bounds: E[log w_fwd] <= log(Z/Z_0) and -E[log w_rev] >= log(Z/Z_0)
    mf, sef = _mean_log_w(fwd.log_weights)
    mr, ser = _mean_log_w(rev.log_weights)
    out: dict[str, Any] = {
        f"{key}_lower": f_band.value,
        f"{key}_upper": r_band.value,
        "gap": r_band.value - f_band.value,
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


def _sandwich(
    s: PathSetup,
    *,
    ratio: bool,
    n_chains: int,
    betas: str | int | Tensor,
    sweeps: int,
    progress: bool,
    mode: str,
    start_data: Tensor | None,
    start_chain_steps: int,
    t0: float,
) -> SandwichResult:
    schedule, schedule_name = _resolve_betas(
        betas,
        s.path,
        n_chains=n_chains,
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
    )
    n_betas = schedule.numel() - 1
    # The final move only draws after the last weight update: the forward weights are those of
    # ais_log_z / ais_log_ratio with the same seed, and its end states can start approximate reverse runs.
    needs_states = mode == "chains" or (
        mode == "auto" and min(s.path.m_b, s.path.n_visible) > s.path.max_bits
    )
    t_fwd = time.perf_counter()
    fwd_run = _forward(s, schedule, n_chains, sweeps, progress, final_move=needs_states)
    t_rev = time.perf_counter()
    init, exact, label = _reverse_init(
        s,
        mode,
        n_chains=n_chains,
        schedule=schedule,
        sweeps=sweeps,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        progress=progress,
        forward=fwd_run,
    )
    rev_run = _reverse(s, schedule, init, sweeps, progress)
    _sync(s.device)
    t_end = time.perf_counter()
    common = _settings(s, schedule, schedule_name, sweeps)
    fwd = _result(
        "ais",
        s,
        fwd_run.log_weights,
        ratio=ratio,
        reciprocal=False,
        n_betas=n_betas,
        seconds=t_rev - t_fwd,
        settings=common,
    )
    rev = _result(
        "reverse-ais",
        s,
        rev_run.log_weights,
        ratio=ratio,
        reciprocal=True,
        n_betas=n_betas,
        seconds=t_end - t_rev,
        settings=common,
    )
    settings = {**common, **_start_settings(exact, label), **_sandwich_settings(fwd, rev, ratio)}
    if ratio and not s.path.exact_start:
        settings["forward_warning"] = "forward start samples of A are approximate (Gibbs chains)"
    record = _result(
        "sandwich",
        s,
        fwd_run.log_weights,
        ratio=ratio,
        reciprocal=False,
        n_betas=n_betas,
        seconds=t_end - t0,
        settings=settings,
    )
    return SandwichResult(
        **{f.name: getattr(record, f.name) for f in fields(LogZResult)}, forward=fwd, reverse=rev
    )


def sandwich_log_z(
    rbm: RBM,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = "paper",
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    base_rate_data: Tensor | None = None,
    base_vbias: Tensor | None = None,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 1000,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> SandwichResult:
    """Forward and reverse AIS with one schedule: ``log Z`` sandwiched between two stochastic bounds.

    Bidirectional Monte Carlo (Grosse et al. 2015, 2016): forward AIS (S&M 2008, Eq. 11) gives
    ``log Z_lo`` with ``E[log Z_lo] <= log Z``, reverse AIS ``log Z_up`` with
    ``E[log Z_up] >= log Z`` (exact starts). Both runs share the seed's generator (forward first,
    so the forward half equals :func:`~boltzkit.estimators.ais.ais_log_z` with the same arguments),
    the schedule (resolved once, so an adaptive schedule is chosen by one pilot run) and the base.

    Parameters
    ----------
    rbm, n_chains, betas, sweeps, sampler, base_rate_data, base_vbias, seed, device, progress
        As for :func:`~boltzkit.estimators.ais.ais_log_z`; ``n_chains`` runs in each direction.
    start, start_data, start_chain_steps, max_bits
        Start samples of the reverse runs, as for :func:`reverse_ais_log_z`; with ``"chains"``
        (or ``"auto"`` on a model too large to enumerate) they come from the forward run's end
        states.

    Returns
    -------
    LogZResult
        ``method="sandwich"``: ``log_z``, ``log_weights`` and bands are the forward (lower)
        estimate's. ``settings`` (and so ``to_dict()``) hold ``log_z_lower``, ``log_z_upper``,
        ``gap = log_z_upper - log_z_lower``, the per-chain bounds ``log_z_lower_per_chain =
        log Z_0 + mean(log w_fwd)`` and ``log_z_upper_per_chain = log Z_0 - mean(log w_rev)`` with
        their ``gap_per_chain`` (an estimate of the symmetrised KL divergence between the forward
        and reverse chains, which goes to 0 as the schedule gets finer) and its
        ``gap_per_chain_stderr``, the full ``forward`` and ``reverse`` bands, ``bound`` and
        ``start`` of the reverse half. The two halves are attached as ``forward`` and ``reverse``.
    """
    _check_common(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    s = log_z_setup(
        rbm,
        sampler=sampler,
        base_rate_data=base_rate_data,
        base_vbias=base_vbias,
        seed=seed,
        device=device,
        max_bits=max_bits,
    )
    return _sandwich(
        s,
        ratio=False,
        n_chains=n_chains,
        betas=betas,
        sweeps=sweeps,
        progress=progress,
        mode=mode,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        t0=t0,
    )


def sandwich_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = 10_001,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    start: str = "exact",
    start_data: Tensor | None = None,
    start_chain_steps: int = 10_000,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> SandwichResult:
    """Forward and reverse AIS of ``log(Z_B / Z_A)`` along the RBM-to-RBM path (S&M 2008, Sec. 3.2).

    As :func:`sandwich_log_z`, with keys ``log_ratio_lower``, ``log_ratio_upper`` and ``gap`` (and
    ``log_z_lower`` / ``log_z_upper`` of B when ``log Z_A`` is exactly known). The forward half
    equals :func:`~boltzkit.estimators.ais.ais_log_ratio` with the same arguments.
    """
    _check_common(n_chains, sweeps)
    mode = _check_start(start, start_data, start_chain_steps)
    t0 = time.perf_counter()
    s = ratio_setup(
        rbm_b,
        rbm_a,
        sampler=sampler,
        start_chain_steps=start_chain_steps,
        max_bits=max_bits,
        seed=seed,
        device=device,
    )
    return _sandwich(
        s,
        ratio=True,
        n_chains=n_chains,
        betas=betas,
        sweeps=sweeps,
        progress=progress,
        mode=mode,
        start_data=start_data,
        start_chain_steps=start_chain_steps,
        t0=t0,
    )


__all__ = [
    "BOUND_EXACT",
    "BOUND_HEURISTIC",
    "EXACT_SAMPLE_MAX_BITS",
    "START_MODES",
    "SandwichResult",
    "reverse_ais_log_ratio",
    "reverse_ais_log_z",
    "sandwich_log_ratio",
    "sandwich_log_z",
]
