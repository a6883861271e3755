"""Annealed importance sampling (Neal 2001; Salakhutdinov & Murray 2008, Sec. 3.1).

Given a path ``p_0, ..., p_K`` (:mod:`boltzkit.estimators.paths`) and chains started from exact
samples ``x_0 ~ p_0``, one AIS run computes (S&M 2008, Sec. 3.1, step 2)::

    log w = sum_{k=1}^{K} [ log p*_k(x_{k-1}) - log p*_{k-1}(x_{k-1}) ],   x_k ~ T_k(. | x_{k-1})

(evaluate the ratio, then move with the kernel of the *new* beta), so that
``E[w] = Z_K / Z_0`` and ``Z_K ≈ Z_0 mean(w)`` (Eq. 11) with variance ``Var(w) / M`` (Eq. 12).
Log-weights are accumulated in float64. Run with the betas reversed and started from exact samples
of ``p_K``, the same engine is reverse AIS, whose weights estimate ``Z_0 / Z_K``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.base_rate import base_rate_rbm, fit_base_rate
from boltzkit.estimators.paths import AnnealingPath, RBMPath
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.schedules import equal_length_betas, paper_betas, parse_schedule, validate_betas
from boltzkit.models.rbm import RBM
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState


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

    Returns
    -------
    AnnealRun
    """
    if int(sweeps) < 1:
        raise BoltzkitError("sweeps per beta must be at least 1", got=sweeps)
    op = make_operator(operator)
    b = [float(x) for x in betas.tolist()]
    state = init
    log_w = torch.zeros(init.n_chains, dtype=torch.float64, device=init.visible.device)
    n = len(b) - 1
    for k in tqdm(range(1, n + 1), desc=desc, disable=not progress, leave=False, mininterval=0.5):
        move = k < n or final_move
        delta, state = path.step(state, b[k - 1], b[k], op, generator, sweeps=sweeps, move=move)
        log_w += delta
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


# ------------------------------------------------------------------------------ public API
def _resolve_betas(
    betas: str | int | Tensor,
    path: AnnealingPath,
    *,
    n_chains: int,
    operator: TransitionOperator,
    sweeps: int,
    generator: torch.Generator,
    progress: bool,
) -> tuple[Tensor, str]:
    if isinstance(betas, int):
        betas = str(betas)
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


def _check_common(n_chains: int, sweeps: int) -> None:
    if int(n_chains) < 1:
        raise BoltzkitError("the number of AIS chains must be at least 1", got=n_chains)
    if int(sweeps) < 1:
        raise BoltzkitError("sweeps per beta must be at least 1", got=sweeps)


def make_base(
    rbm: RBM, *, base_rate_data: Tensor | None = None, base_vbias: Tensor | None = None
) -> tuple[RBM, str]:
    """The base-rate RBM of the path and a description of where its biases came from."""
    if base_vbias is not None:
        return base_rate_rbm(base_vbias, like=rbm), "given visible biases"
    if base_rate_data is not None:
        if base_rate_data.dim() != 2 or base_rate_data.shape[1] != rbm.n_visible:
            raise BoltzkitError(
                "base-rate data has the wrong width for this model",
                got=tuple(base_rate_data.shape),
                expected=f"(n_examples, {rbm.n_visible})",
            )
        return base_rate_rbm(fit_base_rate(base_rate_data), like=rbm), "base rates of the data"
    return base_rate_rbm(rbm.vbias.detach(), like=rbm), "model visible biases (zero weights)"


def on_device(rbm: RBM, device: str | torch.device | None) -> tuple[RBM, torch.device]:
    """``rbm`` on ``device`` (a copy when it lives elsewhere; ``None`` keeps its own device)."""
    dev = rbm.device if device is None else resolve_device(device)
    if dev == rbm.device:
        return rbm, dev
    copy = RBM(
        rbm.n_visible,
        rbm.n_hidden,
        weights=rbm.W.detach(),
        vbias=rbm.vbias.detach(),
        hbias=rbm.hbias.detach(),
        dtype=rbm.dtype,
        device=dev,
    )
    return copy, dev


def seed_label(seed: int | torch.Generator | None) -> Any:
    """How a seed is recorded in a result's settings."""
    return "generator" if isinstance(seed, torch.Generator) else seed


@dataclass
class PathSetup:
    """Everything a forward or reverse AIS run along one path needs."""

    path: RBMPath
    generator: torch.Generator
    operator: TransitionOperator
    device: torch.device
    model: RBM
    base_name: str | None
    seed_label: Any


def log_z_setup(
    rbm: RBM,
    *,
    sampler: TransitionOperator | str,
    base_rate_data: Tensor | None,
    base_vbias: Tensor | None,
    seed: int | torch.Generator | None,
    device: str | torch.device | None,
    max_bits: int = 26,
) -> PathSetup:
    """The base-rate -> ``rbm`` path (S&M 2008, Sec. 3.3) with its generator and operator."""
    model, dev = on_device(rbm, device)
    gen = make_generator(seed, dev)
    op = make_operator(sampler)
    base, base_name = make_base(model, base_rate_data=base_rate_data, base_vbias=base_vbias)
    path = RBMPath(base, model, max_bits=max_bits)
    return PathSetup(path, gen, op, dev, model, base_name, seed_label(seed))


def ratio_setup(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    sampler: TransitionOperator | str,
    start_chain_steps: int,
    max_bits: int,
    seed: int | torch.Generator | None,
    device: str | torch.device | None,
    enumeration_dtype: torch.dtype = torch.float64,
) -> PathSetup:
    """The ``rbm_a -> rbm_b`` path (S&M 2008, Sec. 3.2) with its generator and operator."""
    model_b, dev = on_device(rbm_b, device)
    model_a, _ = on_device(rbm_a, dev)
    gen = make_generator(seed, dev)
    op = make_operator(sampler)
    path = RBMPath(
        model_a,
        model_b,
        start_chain_steps=start_chain_steps,
        max_bits=max_bits,
        enumeration_dtype=enumeration_dtype,
    )
    return PathSetup(path, gen, op, dev, model_b, None, seed_label(seed))


def ais_log_z(
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
) -> LogZResult:
    """Estimate ``log Z`` of an RBM by AIS from a base-rate model (S&M 2008, Sec. 3.3).

    Parameters
    ----------
    rbm
        The target model.
    n_chains
        Number of independent AIS runs ``M``.
    betas
        ``"paper"``, a number of linear points, ``"adaptive"`` / ``"adaptive:N"`` (pilot run, then
        a fresh run with the chosen N steps), a file path, or a tensor.
    sweeps
        Kernel sweeps per intermediate distribution.
    sampler
        Transition operator inside the kernels: ``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``.
    base_rate_data
        Data whose smoothed pixel means define the base model (Eq. 18); otherwise the base takes
        the model's own visible biases with zero weights.
    seed
        Seed or generator; same seed, same numbers.
    device
        Where to run (default: the model's device; ``"auto"`` picks CUDA when present).

    Returns
    -------
    LogZResult
        ``method="ais"``; ``settings`` record base, schedule, operator, sweeps, seed and device.
    """
    _check_common(n_chains, sweeps)
    t0 = time.perf_counter()
    s = log_z_setup(
        rbm, sampler=sampler, base_rate_data=base_rate_data, base_vbias=base_vbias, seed=seed, device=device
    )
    schedule, schedule_name = _resolve_betas(
        betas,
        s.path,
        n_chains=n_chains,
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
    )
    run = anneal(
        s.path,
        schedule,
        init=s.path.sample_start(n_chains, s.generator),
        operator=s.operator,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
    )
    if s.device.type == "cuda":
        torch.cuda.synchronize(s.device)
    n_steps = schedule.numel() - 1
    return LogZResult.from_log_weights(
        "ais",
        run.log_weights,
        log_z_start=float(s.path.log_z_zero) - s.path.log_f_one_offset,
        n_betas=n_steps,
        seconds=time.perf_counter() - t0,
        base=s.base_name,
        log_z_base=s.path.log_z_a,
        schedule=schedule_name,
        sampler=s.operator.name,
        sweeps=int(sweeps),
        total_sweeps=n_steps * int(sweeps),
        seed=s.seed_label,
        device=str(s.device),
        dtype=str(s.model.dtype).replace("torch.", ""),
    )


def ais_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = 10_001,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    start_chain_steps: int = 10_000,
    max_bits: int = 26,
    enumeration_dtype: torch.dtype = torch.float64,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
) -> LogZResult:
    """Estimate ``log(Z_B / Z_A)`` of two RBMs with different hidden layers (S&M 2008, Sec. 3.2).

    Chains start from exact samples of ``rbm_a`` when its smaller layer has at most ``max_bits``
    units; otherwise from ``start_chain_steps`` Gibbs sweeps, and the record's ``settings`` carry
    a warning that the estimate is then not exactly unbiased. The default schedule is the paper's
    10,000 uniform steps. ``enumeration_dtype`` is the arithmetic of the one enumeration of A that
    gives both ``log Z_A`` and the exact start samples (float32 is about twice as fast).

    Returns
    -------
    LogZResult
        ``is_ratio=True``; ``log_ratio`` and its bands; ``log_z`` of B when ``log Z_A`` is exact.
    """
    _check_common(n_chains, sweeps)
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
    path, op = s.path, s.operator
    schedule, schedule_name = _resolve_betas(
        betas, path, n_chains=n_chains, operator=op, sweeps=sweeps, generator=s.generator, progress=progress
    )
    run = anneal(
        path,
        schedule,
        init=path.sample_start(n_chains, s.generator),
        operator=op,
        sweeps=sweeps,
        generator=s.generator,
        progress=progress,
    )
    settings = {
        "schedule": schedule_name,
        "sampler": op.name,
        "sweeps": int(sweeps),
        "seed": s.seed_label,
        "device": str(s.device),
        "start": "exact samples of A" if path.exact_start else f"{start_chain_steps} Gibbs sweeps of A",
    }
    if not path.exact_start:
        settings["warning"] = "start samples are approximate: the estimate is not exactly unbiased"
    return LogZResult.from_log_weights(
        "ais",
        run.log_weights,
        log_z_start=path.log_ratio_offset,
        n_betas=schedule.numel() - 1,
        is_ratio=True,
        reference_log_z=path.log_z_a,
        seconds=time.perf_counter() - t0,
        **settings,
    )


__all__ = [
    "PathSetup",
    "log_z_setup",
    "on_device",
    "ratio_setup",
    "seed_label",
    "AnnealRun",
    "adaptive_betas",
    "ais_log_ratio",
    "ais_log_z",
    "anneal",
    "make_base",
]
