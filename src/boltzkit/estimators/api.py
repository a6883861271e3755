"""One entry point per question: ``log Z`` of a model, ``log Z_B / Z_A`` of two models.

The command line (``boltzkit logz``, ``boltzkit evaluate``) calls only these two functions; they
build the path (:func:`~boltzkit.estimators.paths.base_rate_path` or
:func:`~boltzkit.estimators.paths.ratio_path`) and dispatch on ``method``:

=============== ======================================================================================
``exact``       enumeration of the fewest units (:func:`~boltzkit.estimators.exact.exact_log_z`)
``ais``         annealed importance sampling along the path (S&M 2008, Sec. 3; S2 Sec. 4)
``reverse-ais`` reverse AIS, a stochastic upper bound (exact starts) or a heuristic one (chains)
``sandwich``    forward and reverse AIS with one schedule (bidirectional Monte Carlo)
``sis``         simple importance sampling from the path's start (Salakhutdinov 2008, Eq. 20)
``bridge``      bridge sampling between the path's two ends (S2 Eqs. 30-31)
=============== ======================================================================================
"""

from __future__ import annotations

import warnings
from enum import Enum

import torch
from torch import Tensor

from boltzkit._numerics import resolve_device
from boltzkit.data.registry import derive_seed
from boltzkit.errors import BoltzkitError, UnreliableEstimateWarning
from boltzkit.estimators.ais import ais
from boltzkit.estimators.bridge import bridge
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.paths import (
    EXACT_SAMPLE_MAX_BITS,
    GeometricPath,
    base_rate_path,
    field_biases,
    ratio_path,
)
from boltzkit.estimators.result import LogZResult, SpreadResult
from boltzkit.estimators.reverse import reverse_ais, sandwich
from boltzkit.estimators.schedules import parse_schedule
from boltzkit.estimators.sis import sis
from boltzkit.estimators.unit_dbm import unit_dbm_path
from boltzkit.estimators.unit_rbm import unit_base_rate_path
from boltzkit.models.boltzmann import BoltzmannMachine
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers.operators import TransitionOperator

#: Names accepted by :func:`estimate_log_z` and :func:`estimate_log_ratio`.
METHODS = ("exact", "ais", "reverse-ais", "sandwich", "sis", "bridge")

_ALIASES = {"reverse_ais": "reverse-ais", "reverse": "reverse-ais", "bdmc": "sandwich"}


def normalize_method(method: str | Enum) -> str:
    """Canonical method name (accepts enum members and ``reverse_ais``); an error for unknown names."""
    raw = method.value if isinstance(method, Enum) else method
    name = str(raw).strip().lower()
    name = _ALIASES.get(name, name)
    if name not in METHODS:
        raise BoltzkitError(
            "unknown log Z method",
            got=raw,
            expected=", ".join(repr(m) for m in METHODS),
            hint="for example method='ais' (boltzkit logz MODEL --method ais).",
        )
    return name


def _run(
    path, name: str, *, n_chains, betas, sweeps, sampler, seed, progress, start_chain_steps, check=True
) -> LogZResult:
    annealing = {
        "n_chains": n_chains,
        "betas": betas,
        "sweeps": sweeps,
        "sampler": sampler,
        "seed": seed,
        "progress": progress,
    }
    if name == "ais":
        return ais(path, **annealing, check=check)
    if name == "reverse-ais":
        return reverse_ais(path, start="auto", start_chain_steps=start_chain_steps, **annealing)
    if name == "sandwich":
        return sandwich(path, start="auto", start_chain_steps=start_chain_steps, check=check, **annealing)
    if name == "sis":
        return sis(path, n_chains=n_chains, seed=seed, check=check)
    return bridge(
        path, n_chains=n_chains, sampler=sampler, chain_steps=start_chain_steps, seed=seed, progress=progress,
        check=check,
    )  # fmt: skip


def estimate_log_z(
    model: BoltzmannMachine,
    method: str = "ais",
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    base_rate_data: Tensor | None = None,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    max_bits: int = 30,
    start_chain_steps: int = 1000,
    check: bool = True,
) -> LogZResult:
    """Estimate ``log Z`` of any member of the Boltzmann machine family with the named method.

    Parameters
    ----------
    model
        The model.
    method
        ``"exact"``, ``"ais"``, ``"reverse-ais"``, ``"sandwich"``, ``"sis"`` or ``"bridge"``.
    n_chains
        AIS / reverse-AIS runs (each direction for the sandwich), importance samples for SIS,
        samples per side for bridge sampling.
    betas, sweeps
        Annealing schedule (default: the paper's 14,500 steps) and sweeps per beta.
    sampler
        Transition operator (AIS-type methods; bridge sampling's chains when the model cannot be
        enumerated).
    base_rate_data
        Data whose smoothed pixel means define the base model (S&M 2008, Eq. 18); without data,
        AIS-type methods choose between the model's own visible biases and its Ising fields by a
        pilot run (:func:`choose_base`; the record's ``base_choice`` says which and why).
    seed, device, progress
        Randomness (same seed, same numbers), where to run, progress bars.
    max_bits
        Exact enumeration limit: ``exact`` refuses beyond ``2^max_bits`` states; reverse AIS and
        bridge sampling draw exact samples of the model when at most ``min(max_bits, 26)`` units
        must be enumerated, and otherwise fall back to chains (the record says so: reverse AIS's
        ``settings["bound"]`` becomes ``"heuristic (approximate start samples)"``).
    start_chain_steps
        Transitions that stand in for exact samples of a model too large to enumerate.
    check
        AIS also runs its schedule check (:func:`~boltzkit.estimators.ais.schedule_check`: a
        control run along half the steps with half the chains, a quarter of the cost; an estimate
        that moves beyond its noise is ``reliable: false``); SIS and bridge sampling their reverse
        or probe checks, and a sandwich whose reverse starts are approximate its probe chains
        (:func:`~boltzkit.estimators.probes.start_check`). The estimate's numbers do not change.

    Returns
    -------
    LogZResult
        With ``method`` set to the canonical name.
    """
    name = normalize_method(method)
    if name == "exact":
        return exact_log_z(
            model, max_bits=max_bits, device=None if device is None else resolve_device(device)
        )  # (its record keeps the model's fingerprint)
    bits = min(int(max_bits), EXACT_SAMPLE_MAX_BITS)
    if isinstance(model, UnitRBM):  # real-valued or categorical visible units: their own path
        if name == "bridge":
            raise BoltzkitError(
                f"bridge sampling does not take {model.visible_units.name} visible units yet",
                hint="use --method ais, reverse-ais, sandwich or sis.",
            )
        path, choice = unit_base_rate_path(model, data=base_rate_data, max_bits=bits), None
    elif isinstance(model, UnitDBM):  # a DBM over real-valued or categorical data: its own path
        if name == "bridge":
            raise BoltzkitError(
                f"bridge sampling does not take a {model.kind} yet",
                hint="use --method ais, reverse-ais, sandwich or sis.",
            )
        path, choice = unit_dbm_path(model, data=base_rate_data, max_bits=bits), None
    elif base_rate_data is None and name in ("ais", "reverse-ais", "sandwich"):
        path, choice = choose_base(
            model, n_chains=n_chains, betas=betas, sweeps=sweeps, sampler=sampler, seed=seed, device=device,
            max_bits=bits,
        )  # fmt: skip
    elif base_rate_data is None and (symmetric := symmetric_base(model, device=device, max_bits=bits)):
        path, choice = symmetric  # SIS and bridge sampling start there too
    else:
        path = base_rate_path(model, data=base_rate_data, device=device, max_bits=bits)
        choice = None
    result = _run(
        path,
        name,
        n_chains=n_chains,
        betas=betas,
        sweeps=sweeps,
        sampler=sampler,
        seed=seed,
        progress=progress,
        start_chain_steps=start_chain_steps,
        check=check,
    )
    result = result.with_settings(model_fingerprint=model.fingerprint())  # whose log Z it is
    return result if choice is None else result.with_settings(base_choice=choice)


#: Chains of each pilot run of :func:`choose_base` (a fifth of the main run's, at least 10) and the
#: fraction of the schedule's steps it takes (at least 20 steps).
PILOT_CHAINS, PILOT_STEPS = 0.2, 0.1


#: How the record names the base of a model symmetric under flipping every unit.
UNIFORM_BASE = "uniform (the model is symmetric under flipping every unit)"


def symmetric_base(
    model: BoltzmannMachine,
    *,
    device: str | torch.device | None = None,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> tuple[GeometricPath, dict[str, object]] | None:
    """The uniform base, for a model symmetric under flipping every unit (zero Ising fields,
    :func:`~boltzkit.estimators.paths.field_biases`), else ``None``: a symmetric base reaches each
    mirror image of such a model as often as the other, for AIS, SIS and bridge sampling alike
    (see :func:`choose_base`)."""
    form = model.pairwise()
    every_field = form.ising_fields  # of every unit, hidden ones too
    # zero up to the rounding of the parameters' own dtype (float32 fields of a zero-field model
    # come out at 1e-7, not 1e-16): eps times the magnitudes that were summed into each field
    size = form.couplings.abs().sum(1) + form.biases.abs()
    if bool((every_field.abs() > 64 * torch.finfo(model.dtype).eps * (1.0 + size)).any()):
        return None
    zeros = torch.zeros(model.n_visible, dtype=model.dtype, device=model.device)
    path = base_rate_path(model, base_vbias=zeros, device=device, max_bits=max_bits, base_name=UNIFORM_BASE)
    return path, {"chosen": UNIFORM_BASE, "pilot": None}


def choose_base(
    model: BoltzmannMachine,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
) -> tuple[GeometricPath, dict[str, object]]:
    """The base of AIS for a model given without data: its own visible biases (S&M 2008) or its
    Ising fields (:func:`~boltzkit.estimators.paths.field_biases`), whichever gives the larger
    estimate in a short pilot run (a fifth of the chains, a tenth of the steps: about 4% of the
    main run's cost); for a model symmetric under flipping every unit (zero Ising fields) the
    uniform base, without a pilot.

    AIS is a stochastic lower bound: a start that leads its chains away from part of the
    distribution (one mirror-image mode of a ferromagnet, the mode a small field favours) gives a
    *lower* estimate with weights that look healthy, so the larger pilot estimate marks the start
    that misses less. The main run then starts afresh from the chosen base (an unbiased estimate).
    A symmetric model is not put to that vote: the uniform base is symmetric too, so at every
    beta the chains reach each mirror image as often as the other, while a base of the model's
    own biases can lose one image whole (log 2 low with healthy weights). A short pilot from the
    uniform base on a sharp model is low by its own noise and lost the vote to that base on 2 of
    12 seeds (an 8 x 6 RBM, W = 3: 0.001 against the exact 0.694, reported reliable).

    Returns
    -------
    (GeometricPath, dict)
        The path, and the pilot estimates with the choice (for the record's settings).
    """
    symmetric = symmetric_base(model, device=device, max_bits=max_bits)
    if symmetric is not None:
        return symmetric
    fields = field_biases(model)
    candidates = {"model visible biases": model.bias(0).detach(), "Ising fields": fields}
    paths = {
        name: base_rate_path(model, base_vbias=b, device=device, max_bits=max_bits, base_name=name)
        for name, b in candidates.items()
    }
    if len(paths) == 1 or torch.allclose(*[b.to(torch.float64) for b in candidates.values()]):
        name = next(iter(paths))
        return paths[name], {"chosen": name, "pilot": None}
    schedule, _ = parse_schedule(betas if betas is not None else "paper")
    n_steps = (schedule.numel() - 1) if schedule is not None else 14_500
    pilot_betas = max(21, int(n_steps * PILOT_STEPS) + 1)
    pilot_seed = derive_seed(seed if isinstance(seed, int) else 0, "base pilot")
    estimates = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        for name, path in paths.items():
            run = ais(path, n_chains=max(10, int(n_chains * PILOT_CHAINS)), betas=pilot_betas, sweeps=sweeps,
                      sampler=sampler, seed=pilot_seed, check=False)  # fmt: skip
            estimates[name] = float(run.log_z)
    chosen = max(estimates, key=estimates.__getitem__)
    return paths[chosen], {"chosen": chosen, "pilot": estimates, "pilot_steps": pilot_betas - 1}


def estimate_log_ratio(
    model_b: BoltzmannMachine,
    model_a: BoltzmannMachine,
    method: str = "ais",
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
    start_chain_steps: int = 10_000,
    enumeration_dtype: torch.dtype = torch.float64,
    check: bool = True,
) -> LogZResult:
    """Estimate ``log(Z_B / Z_A)`` of two models over the same visible units (S&M 2008, Sec. 3.2).

    Parameters
    ----------
    model_b, model_a
        The model of interest and the reference.
    method
        As for :func:`estimate_log_z`. ``"exact"`` enumerates both models; the others run along
        :func:`~boltzkit.estimators.paths.ratio_path` (default schedule: the paper's 10,000
        uniform steps); ``"sis"`` draws from ``A``, ``"bridge"`` from both.
    max_bits
        Exact samples and exact ``log Z_A`` when at most this many units must be enumerated (for
        ``"exact"``, the enumeration limit).
    start_chain_steps
        Gibbs sweeps that stand in for exact samples of a model too large to enumerate (the
        record then carries a warning).
    enumeration_dtype
        Arithmetic of the enumeration of A (float64 or float32; sums are float64).
    check
        As for :func:`estimate_log_z`.

    Returns
    -------
    LogZResult
        ``is_ratio=True``: ``log_ratio`` and its bands, and ``log_z`` of B when ``log Z_A`` is
        exactly known.
    """
    name = normalize_method(method)
    if model_a.n_visible != model_b.n_visible:
        raise BoltzkitError(
            "the two models of a log-ratio estimate must share their visible units",
            got=f"{model_b.n_visible} (B) and {model_a.n_visible} (A) visible units",
        )
    if name == "exact":
        return _exact_ratio(model_b, model_a, max_bits=max_bits, device=device)
    path = ratio_path(
        model_a,
        model_b,
        start_chain_steps=start_chain_steps,
        max_bits=max_bits,
        enumeration_dtype=enumeration_dtype,
        device=device,
    )
    return _run(
        path,
        name,
        n_chains=n_chains,
        betas=betas,
        sweeps=sweeps,
        sampler=sampler,
        seed=seed,
        progress=progress,
        start_chain_steps=start_chain_steps,
        check=check,
    )


def _exact_ratio(
    model_b: BoltzmannMachine, model_a: BoltzmannMachine, *, max_bits: int, device: str | torch.device | None
) -> LogZResult:
    """``log Z_B - log Z_A`` by enumerating both models, as a ratio record with zero spread."""
    dev = None if device is None else resolve_device(device)
    a = exact_log_z(model_a, max_bits=max_bits, device=dev)
    b = exact_log_z(model_b, max_bits=max_bits, device=dev)
    log_r = float(b.log_z) - float(a.log_z)
    return SpreadResult(
        method="exact",
        log_z=float(b.log_z),
        is_ratio=True,
        reference_log_z=float(a.log_z),
        seconds=a.seconds + b.seconds,
        settings={"log_z_a": float(a.log_z), "log_z_b": float(b.log_z)},
        log_mean=log_r,
        log_sigma=float("-inf"),
    )


__all__ = [
    "METHODS",
    "UNIFORM_BASE",
    "choose_base",
    "estimate_log_ratio",
    "estimate_log_z",
    "normalize_method",
    "symmetric_base",
]
