"""Mixing evidence as engine stages: how fast a transition operator forgets, on kept grid models.

A reproduction that compares samplers (Brügge, Fischer & Igel 2013, "S3", Secs. 4.1, 4.3, 4.4)
trains models with :mod:`boltzkit.experiments.grid` (``keep_model=True``) and then measures each
model under each operator. Every measurement here is one resumable stage
(:func:`boltzkit.experiments.engine.stage`): a JSON record under the run's folder, keyed by its
settings, computed once and found again by a later run with the same settings.

* :func:`autocorrelation_stage`: the energy trace of one chain (S3's protocol) or of several
  pooled, its integrated autocorrelation time by an AR fit (Thompson 2010, as S3 Sec. 4.3) and by
  Sokal's window with its standard deviation, and its normalised autocorrelation function (S3
  Table 2, Fig. 4);
* :func:`class_change_stage`: class changes from the all-ones start and samples before the first
  change from training examples, on Artificial Modes (S3 Tables 3, 4);
* :func:`slem_stage`: the second-largest eigenvalue modulus of the exact transition matrices of
  random small RBMs (S3 Fig. 3, top);

and the summaries a report takes of them (:func:`mean_acf`, :func:`quartiles`,
:func:`finite_mean`). Seeds derive from the run's seed and the model's task id, so a record does
not depend on which other models a run includes.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from boltzkit.data import load_dataset
from boltzkit.data.registry import derive_seed
from boltzkit.data.synthetic import artificial_modes_prototypes
from boltzkit.diagnostics.autocorrelation import (
    RELIABLE_LENGTHS,
    autocorrelation,
    energy_trace,
    integrated_time_ar,
    sokal_time_of_acf,
    tail_undecayed,
    windowed_sd,
)
from boltzkit.diagnostics.class_changes import class_changes_from_ones, steps_to_first_change
from boltzkit.diagnostics.transition_matrix import slem_study
from boltzkit.errors import BoltzkitError, positive_int, whole_number
from boltzkit.experiments.engine import load_stage, stage
from boltzkit.experiments.grid import GridTask, load_task_model

#: Bartlett standard errors above zero at which an autocorrelation has not decayed.
DECAY_Z = 3.0


def autocorrelation_stage(
    out: Path,
    task: GridTask,
    operator: str,
    *,
    steps: int,
    burn_in: int,
    max_lag: int,
    seed: int,
    n_chains: int = 1,
    device: str | torch.device | None = None,
    compute_missing: bool = True,
) -> dict[str, Any] | None:
    """The energy autocorrelation of ``n_chains`` chains of ``task``'s kept model under ``operator``.

    Chains of ``steps`` steps each after ``burn_in``, from uniform starts. The record
    ``out/act/TASK_OPERATOR.json`` (one chain, S3's protocol) or ``TASK_OPERATOR_Nchains.json``
    holds

    * ``tau_ar``: the AR-fit integrated time (Thompson 2010), the mean over chains, with
      ``ar_order`` and, for several chains, each chain's in ``tau_ar_chains``;
    * ``tau_sokal``: Sokal's window estimate from the chains' pooled autocorrelation function
      (:func:`~boltzkit.diagnostics.autocorrelation.autocorrelation` with one mean for all chains),
      with ``sokal_window`` (``M``), its standard deviation ``tau_sokal_sd``
      (:func:`~boltzkit.diagnostics.autocorrelation.windowed_sd`, the chains' total length), and
      ``acf_at_window``, ``R(M)``, with ``undecayed_at_window``: whether ``R(M)`` is still more than
      three standard errors above zero (:func:`~boltzkit.diagnostics.autocorrelation.tail_undecayed`),
      so that even Sokal's time is only a lower bound;
    * ``tau_decayed``: the same sum with the window extended until the function has decayed
      (:func:`~boltzkit.diagnostics.autocorrelation.sokal_time_of_acf` with ``decay_z``
      :data:`DECAY_Z`: a slow part Sokal's window cuts off is summed), with ``decayed_window`` and
      ``tau_decayed_sd``; it equals ``tau_sokal`` where that window has decayed;
    * ``reliable`` (the chains span at least 50 AR times), ``ar_reason`` (why the AR time is
      unreliable beyond that: several chains whose means sit apart, or whose own
      windowed sums spread as rare switches between modes spread them, from 2026-12-02 later;
      ``None`` otherwise), ``acf`` (the pooled normalised
      autocorrelation function up to ``min(max_lag, steps - 1)``) and ``acf_log_lags`` /
      ``acf_log`` (the function at about 100 lags spaced evenly in log up to ``steps - 1``),
      ``max_lag`` and ``device`` (where the chains ran; both in records from 2026-12-04). A record
      that holds more lags than ``max_lag`` serves it cut (and says so in its ``max_lag``); one
      that holds fewer is refused. The device is a fact of the record, not one of the stage's
      settings: chains of one law sampled on another device serve as well, though the same seed
      gives other numbers there;

    with the ``seconds`` it took. Several chains pin a slow chain's ``tau`` down where one chain
    of S3's length cannot (docs/results.md, Table 2 on MNIST). With ``compute_missing=False`` a
    missing record is ``None`` (a look at a run in progress samples nothing).
    """
    n_chains, steps, max_lag = (
        positive_int(v, what) for v, what in ((n_chains, "n_chains"), (steps, "steps"), (max_lag, "max_lag"))
    )
    burn_in, seed = whole_number(burn_in, "burn_in", minimum=0), whole_number(seed, "seed")
    settings = {"model": task.task_id, "operator": operator, "steps": steps, "burn_in": burn_in, "seed": seed}
    name = f"{task.task_id}_{operator}"
    keys: tuple[str, ...] = ("act",)
    if n_chains > 1:  # one chain keeps S3's record name, settings and seed
        settings["n_chains"] = n_chains
        name += f"_{n_chains}chains"
        keys += (f"{n_chains}chains",)

    def compute() -> dict[str, Any]:
        t0 = time.perf_counter()
        model = load_task_model(out, task, device=device)
        g = torch.Generator(device=model.device).manual_seed(derive_seed(seed, task.task_id, *keys))
        x = energy_trace(model, operator, n_chains=n_chains, n_steps=steps, generator=g, burn_in=burn_in)
        ar = integrated_time_ar(x)
        rho = autocorrelation(x, center="pooled")  # one mean for all chains: no per-chain bias
        sokal = sokal_time_of_acf(rho, steps, n_chains=n_chains)
        decayed = sokal_time_of_acf(rho, steps, n_chains=n_chains, decay_z=DECAY_Z)
        total = n_chains * steps
        log_lags = np.unique(np.geomspace(1, max(1, steps - 1), 100).round().astype(int))
        record = {
            "tau_ar": ar.tau,
            "ar_order": ar.order,
            "tau_sokal": sokal.tau,
            "sokal_window": sokal.window,
            "tau_sokal_sd": windowed_sd(sokal.tau, sokal.window, total),
            "acf_at_window": float(rho[sokal.window]),
            "undecayed_at_window": tail_undecayed(rho[: sokal.window + 1], total, z=DECAY_Z),
            "tau_decayed": decayed.tau,
            "decayed_window": decayed.window,
            "tau_decayed_sd": windowed_sd(decayed.tau, decayed.window, total),
            # the chains span 50 AR times (what every record of the study has said); where several
            # chains' means sit apart beyond the AR time, ar_reason says so (records from 2026-12-02)
            "reliable": bool(math.isfinite(ar.tau) and steps >= RELIABLE_LENGTHS * ar.tau),
            "ar_reason": ar.reason,
            "acf": [float(v) for v in rho[: min(max_lag, steps - 1) + 1]],
            "max_lag": min(max_lag, steps - 1),
            # where the chains ran: the same seed gives other numbers on another device
            "device": str(model.device),
            "acf_log_lags": [int(v) for v in log_lags],
            "acf_log": [float(rho[v]) for v in log_lags],
            "seconds": time.perf_counter() - t0,
        }
        if n_chains > 1:
            record["tau_ar_chains"] = list(ar.per_chain)
        return record

    path = out / "act" / f"{name}.json"
    record = _stage(path, settings, compute, compute_missing)
    return None if record is None else _acf_to_lag(record, path, min(max_lag, steps - 1))


def _acf_to_lag(record: dict[str, Any], path: Path, lag: int) -> dict[str, Any]:
    """``record`` with its stored ``acf`` cut to ``lag``; an error where it stops before.

    ``max_lag`` only sets how much of the function a record keeps, so it is not among the stage's
    settings (records written before 2026-12-04 do not name it): a record that holds more lags
    serves a shorter request, and one that holds fewer is refused rather than read as if it
    reached the lag asked for (a report labels its columns with that lag)."""
    acf = record["acf"]
    if len(acf) < lag + 1:
        raise BoltzkitError(
            f"{path} holds the autocorrelation function to lag {len(acf) - 1}, and lag {lag} is asked for",
            got=f"{len(acf)} lags stored",
            expected=f"at least {lag + 1}",
            hint="delete that file to sample the chains again with the longer lag, or ask for a shorter max_lag.",
        )
    return record if len(acf) == lag + 1 else {**record, "acf": acf[: lag + 1], "max_lag": lag}


def class_change_stage(
    out: Path,
    task: GridTask,
    operator: str,
    *,
    steps: int,
    starts: int,
    max_steps: int,
    seed: int,
    data_dir: str | None = None,
    compute_missing: bool = True,
) -> dict[str, Any] | None:
    """Class changes of ``task``'s kept Artificial Modes model under ``operator`` (S3 Sec. 4.4).

    Samples are assigned to the nearest of the four modes by Hamming distance (ties discarded).
    The record ``out/classes/TASK_OPERATOR.json`` holds ``class_changes`` (changes in ``steps``
    samples from the all-ones state, S3 Table 3), ``first_change`` (per start, the samples before
    the first change from ``starts`` training examples drawn at random, S3 Table 4) and
    ``censored`` (starts with no change within ``max_steps``). With ``compute_missing=False`` a
    missing record is ``None``.
    """
    settings = {
        "model": task.task_id, "operator": operator, "steps": steps, "starts": starts,
        "max_steps": max_steps, "seed": seed,
    }  # fmt: skip

    def compute() -> dict[str, Any]:
        t0 = time.perf_counter()
        model = load_task_model(out, task)
        protos = artificial_modes_prototypes()
        g = torch.Generator().manual_seed(derive_seed(seed, task.task_id, "classes"))
        changes = class_changes_from_ones(model, operator, protos, n_steps=steps, generator=g)
        data = load_dataset(task.dataset, data_dir=data_dir, seed=task.data_seed).x
        idx = torch.randint(data.shape[0], (starts,), generator=g)
        first = steps_to_first_change(model, operator, protos, data[idx], max_steps=max_steps, generator=g)
        return {
            "class_changes": int(changes[0]),
            "first_change": first.tolist(),
            "censored": int((first > max_steps).sum()),
            "seconds": time.perf_counter() - t0,
        }

    return _stage(out / "classes" / f"{task.task_id}_{operator}.json", settings, compute, compute_missing)


def slem_stage(
    out: Path,
    *,
    sizes: Sequence[int],
    bounds: Sequence[int],
    n_models: int,
    seed: int,
    compute_missing: bool = True,
) -> list[dict[str, Any]] | None:
    """S3 Fig. 3 (top): for ``n_models`` random n x n RBMs per size and weight bound c (weights
    uniform on [-c, c], zero biases), the fraction whose flip-the-state chain has the smaller
    SLEM than Gibbs sampling (:func:`boltzkit.diagnostics.slem_study`); record ``out/slem.json``
    (``None`` when it is missing and ``compute_missing`` is false)."""
    settings = {"sizes": list(sizes), "bounds": list(bounds), "n_models": n_models, "seed": seed}

    def compute() -> dict[str, Any]:
        g = torch.Generator().manual_seed(derive_seed(seed, "slem"))
        rows = slem_study(tuple(sizes), tuple(bounds), n_models, generator=g)
        return {"rows": [asdict(r) for r in rows]}

    record = _stage(out / "slem.json", settings, compute, compute_missing)
    return None if record is None else record["rows"]


def _stage(path: Path, settings: dict[str, Any], compute, compute_missing: bool) -> dict[str, Any] | None:
    """:func:`~boltzkit.experiments.engine.stage`, or only its record (``None`` if missing)."""
    return stage(path, settings, compute) if compute_missing else load_stage(path, settings)


# ------------------------------------------------------------------------------ summaries
def finite_mean(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when there are none)."""
    finite = [v for v in values if math.isfinite(v)]
    return statistics.fmean(finite) if finite else math.nan


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """The 25 %, 50 % and 75 % quantiles (numpy's linear interpolation)."""
    q = np.quantile(np.asarray(values, dtype=float), [0.25, 0.5, 0.75])
    return float(q[0]), float(q[1]), float(q[2])


def mean_acf(
    rows: Sequence[dict[str, dict[str, Any]]], operators: Sequence[str], key: str = "acf"
) -> dict[str, list[float]]:
    """Per operator, the mean over models (``rows[i][operator]`` records of
    :func:`autocorrelation_stage`) of their autocorrelation functions (``key``: ``"acf"``, or
    ``"acf_log"`` at the records' ``acf_log_lags``), cut to the shortest."""
    out = {}
    for op in operators:
        acfs = [r[op][key] for r in rows]
        n = min(len(a) for a in acfs)
        out[op] = np.mean([a[:n] for a in acfs], axis=0).tolist()
    return out


__all__ = [
    "DECAY_Z",
    "autocorrelation_stage",
    "class_change_stage",
    "finite_mean",
    "mean_acf",
    "quartiles",
    "slem_stage",
]
