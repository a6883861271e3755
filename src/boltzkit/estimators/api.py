"""One entry point per question: ``log Z`` of a model, ``log Z_B / Z_A`` of two models.

The command line (``boltzkit logz``, ``boltzkit evaluate``) calls only these two functions; they
dispatch on ``method`` to the estimators of this package:

=============== ======================================================================================
``exact``       enumeration of the smaller layer (:func:`~boltzkit.estimators.exact.exact_log_z`)
``ais``         annealed importance sampling from the base-rate model (S&M 2008, Sec. 3.3)
``reverse-ais`` reverse AIS, a stochastic upper bound (exact starts) or a heuristic one (chains)
``sandwich``    forward and reverse AIS with one schedule (bidirectional Monte Carlo)
``sis``         simple importance sampling from the base-rate model (Salakhutdinov 2008, Eq. 20)
``bridge``      geometric-bridge sampling between the base-rate model and the RBM (Eqs. 30-31)
=============== ======================================================================================
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import Tensor

from boltzkit._numerics import resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import ais_log_ratio, ais_log_z
from boltzkit.estimators.bridge import bridge_log_ratio, bridge_log_z
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.reverse import (
    EXACT_SAMPLE_MAX_BITS,
    reverse_ais_log_ratio,
    reverse_ais_log_z,
    sandwich_log_ratio,
    sandwich_log_z,
)
from boltzkit.estimators.sis import sis_log_ratio, sis_log_z
from boltzkit.models.rbm import RBM
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


def _sample_bits(max_bits: int) -> int:
    """Enumeration limit for exact *samples* (all states are held at once, unlike exact log Z)."""
    return min(int(max_bits), EXACT_SAMPLE_MAX_BITS)


def estimate_log_z(
    rbm: RBM,
    method: str = "ais",
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = "paper",
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    base_rate_data: Tensor | None = None,
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    max_bits: int = 30,
) -> LogZResult:
    """Estimate ``log Z`` of an RBM with the named method.

    Parameters
    ----------
    rbm
        The model.
    method
        ``"exact"``, ``"ais"``, ``"reverse-ais"``, ``"sandwich"``, ``"sis"`` or ``"bridge"``.
    n_chains
        AIS / reverse-AIS runs (each direction for the sandwich), importance samples for SIS,
        samples per side for bridge sampling.
    betas, sweeps
        Annealing schedule and sweeps per beta (AIS-type methods; ignored by exact, SIS, bridge).
    sampler
        Transition operator (AIS-type methods; bridge sampling's chains when the RBM cannot be
        enumerated).
    base_rate_data
        Data whose smoothed pixel means define the base model (S&M 2008, Eq. 18); default: the
        model's visible biases with zero weights.
    seed, device, progress
        Randomness (same seed, same numbers), where to run, progress bars.
    max_bits
        Exact enumeration limit: ``exact`` refuses beyond ``2^max_bits`` states; reverse AIS and
        bridge sampling draw exact samples of the RBM when its smaller layer has at most
        ``min(max_bits, 22)`` units, and otherwise fall back to Gibbs chains (the record says so:
        reverse AIS's ``settings["bound"]`` becomes ``"heuristic (approximate start samples)"``).

    Returns
    -------
    LogZResult
        With ``method`` set to the canonical name.

    Raises
    ------
    BoltzkitError
        Unknown method; :class:`~boltzkit.errors.IntractableError` for ``exact`` on a model too
        large to enumerate.
    """
    name = normalize_method(method)
    common = {"n_chains": n_chains, "seed": seed, "device": device}
    annealing = {**common, "betas": betas, "sweeps": sweeps, "sampler": sampler, "progress": progress}
    if name == "exact":
        return exact_log_z(rbm, max_bits=max_bits, device=None if device is None else resolve_device(device))
    if name == "ais":
        return ais_log_z(rbm, base_rate_data=base_rate_data, **annealing)
    if name == "reverse-ais":
        return reverse_ais_log_z(
            rbm, base_rate_data=base_rate_data, start="auto", max_bits=_sample_bits(max_bits), **annealing
        )
    if name == "sandwich":
        return sandwich_log_z(
            rbm, base_rate_data=base_rate_data, start="auto", max_bits=_sample_bits(max_bits), **annealing
        )
    if name == "sis":
        return sis_log_z(rbm, base_rate_data=base_rate_data, **common)
    return bridge_log_z(
        rbm,
        base_rate_data=base_rate_data,
        sampler=sampler,
        max_bits=_sample_bits(max_bits),
        progress=progress,
        **common,
    )


def estimate_log_ratio(
    rbm_b: RBM,
    rbm_a: RBM,
    method: str = "ais",
    *,
    n_chains: int = 100,
    betas: str | int | Tensor = 10_001,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    device: str | torch.device | None = None,
    progress: bool = False,
    max_bits: int = EXACT_SAMPLE_MAX_BITS,
    start_chain_steps: int = 10_000,
) -> LogZResult:
    """Estimate ``log(Z_B / Z_A)`` of two RBMs over the same visible units (S&M 2008, Sec. 3.2).

    Parameters
    ----------
    rbm_b, rbm_a
        The model of interest and the reference.
    method
        As for :func:`estimate_log_z`. ``"exact"`` enumerates both models; ``"ais"``,
        ``"reverse-ais"`` and ``"sandwich"`` anneal along the RBM-to-RBM path (default schedule:
        the paper's 10,000 uniform steps); ``"sis"`` draws from ``A``; ``"bridge"`` from both.
    max_bits
        Exact samples and exact ``log Z_A`` when the smaller layer has at most this many units
        (for ``"exact"``, the enumeration limit).
    start_chain_steps
        Gibbs sweeps that stand in for exact samples of a model too large to enumerate (the
        record then carries a warning).

    Returns
    -------
    LogZResult
        ``is_ratio=True``: ``log_ratio`` and its bands, and ``log_z`` of B when ``log Z_A`` is
        exactly known.
    """
    name = normalize_method(method)
    if rbm_a.n_visible != rbm_b.n_visible:
        raise BoltzkitError(
            "the two RBMs of a log-ratio estimate must share their visible units",
            got=f"{rbm_b.n_visible} (B) and {rbm_a.n_visible} (A) visible units",
        )
    common = {"n_chains": n_chains, "seed": seed, "device": device}
    annealing = {**common, "betas": betas, "sweeps": sweeps, "sampler": sampler, "progress": progress}
    if name == "exact":
        return _exact_ratio(rbm_b, rbm_a, max_bits=max_bits, device=device)
    if name == "ais":
        return ais_log_ratio(
            rbm_b, rbm_a, start_chain_steps=start_chain_steps, max_bits=max_bits, **annealing
        )
    if name == "reverse-ais":
        return reverse_ais_log_ratio(
            rbm_b, rbm_a, start="auto", start_chain_steps=start_chain_steps, max_bits=max_bits, **annealing
        )
    if name == "sandwich":
        return sandwich_log_ratio(
            rbm_b, rbm_a, start="auto", start_chain_steps=start_chain_steps, max_bits=max_bits, **annealing
        )
    if name == "sis":
        return sis_log_ratio(rbm_b, rbm_a, start_chain_steps=start_chain_steps, max_bits=max_bits, **common)
    return bridge_log_ratio(
        rbm_b,
        rbm_a,
        sampler=sampler,
        chain_steps=start_chain_steps,
        max_bits=max_bits,
        progress=progress,
        **common,
    )


def _exact_ratio(rbm_b: RBM, rbm_a: RBM, *, max_bits: int, device: str | torch.device | None) -> LogZResult:
    """``log Z_B - log Z_A`` by enumerating both models, as a ratio record with zero spread."""
    from boltzkit.estimators.bridge import SpreadResult

    dev = None if device is None else resolve_device(device)
    a = exact_log_z(rbm_a, max_bits=max_bits, device=dev)
    b = exact_log_z(rbm_b, max_bits=max_bits, device=dev)
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


__all__ = ["METHODS", "estimate_log_ratio", "estimate_log_z", "normalize_method"]
