"""The course of an AIS run, and ``log Z_hat`` against the number of runs.

:func:`ais_trace` runs forward AIS along a path exactly as :func:`~boltzkit.estimators.ais.ais`
does (same seed, same log-weights, same estimate) while recording, through the ``observe`` hook of
:func:`~boltzkit.estimators.ais.anneal`:

* the visible states of the first ``n_show`` chains at a few chosen betas (Salakhutdinov & Murray
  2008, Fig. 2: "the course of 16 AIS runs ... starting from a simple base-rate model and annealing
  to the final complex model"); each is taken after the transition at that beta, so it is an
  (approximate) sample of ``p_beta``, and at ``beta = 0`` an exact sample of the base model;
* at every beta, the variance over chains of the running log-weights and their effective sample
  size (Kish), which show where along the schedule the estimate loses its chains.

:meth:`AISTrace.save` writes the record as one ``.npz`` archive (arrays and a JSON ``metadata``
string; no pickle), which :meth:`AISTrace.load` reads back (``boltzkit logz --trace FILE`` writes
it, ``boltzkit plot ais-course FILE`` draws it).

:func:`log_z_by_runs` is ``log Z_hat`` from the first ``m`` runs with ``log(Z_hat ± 3 sigma_hat)``
(S&M 2008, Fig. 3; Salakhutdinov 2008, Fig. 3), for ``m`` growing to all runs.
"""

from __future__ import annotations

import json
import math
import os
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzkit._numerics import make_generator
from boltzkit.atomic import atomic_open
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import (
    ais_checks,
    anneal,
    check_runs,
    path_settings,
    record,
    resolve_betas,
    seed_label,
    sync,
)
from boltzkit.estimators.paths import AnnealingPath, check_path
from boltzkit.estimators.reliability import warn_unreliable
from boltzkit.estimators.result import LogZResult, stored_steps
from boltzkit.jsonio import to_jsonable
from boltzkit.samplers.operators import TransitionOperator, make_operator
from boltzkit.state import ChainState

#: The betas S&M 2008, Fig. 2 shows: the base model, two points of the paper's schedule where its
#: spacing changes, and the model.
DEFAULT_TRACE_BETAS = (0.0, 0.5, 0.9, 1.0)

#: ``format`` entry of a saved trace's metadata.
TRACE_FORMAT = "boltzkit-ais-trace"
TRACE_VERSION = 1

#: Numbers of runs at which :func:`log_z_by_runs` evaluates by default (those up to ``n``, and ``n``).
DEFAULT_RUN_COUNTS = (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000)


# ------------------------------------------------------------------------------ the record
@dataclass(frozen=True)
class AISTrace:
    """The course of one AIS run (see the module docstring).

    Attributes
    ----------
    result
        The estimate itself (``method="ais"``), identical to :func:`~boltzkit.estimators.ais.ais`
        with the same arguments.
    betas
        The schedule, float64 ``(K + 1,)``.
    log_weight_var
        Variance over chains of the running log-weights at each beta, float64 ``(K + 1,)`` (0 at
        ``beta_0``).
    ess
        Effective sample size of the running weights at each beta, float64 ``(K + 1,)``.
    snapshot_steps
        Indices ``k`` into ``betas`` where states were kept, int64 ``(S,)``, increasing.
    snapshots
        Visible states of the first ``n_show`` chains at those betas, uint8
        ``(S, n_show, n_visible)``.
    metadata
        Free-form JSON-able description (model file, ``image_shape``, ...).
    """

    result: LogZResult
    betas: np.ndarray
    log_weight_var: np.ndarray
    ess: np.ndarray
    snapshot_steps: np.ndarray
    snapshots: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def snapshot_betas(self) -> np.ndarray:
        """The betas of :attr:`snapshots`."""
        return self.betas[self.snapshot_steps]

    @property
    def n_visible(self) -> int:
        return int(self.snapshots.shape[2])

    def with_metadata(self, **metadata: Any) -> AISTrace:
        """A copy with entries added to :attr:`metadata`."""
        return AISTrace(
            self.result,
            self.betas,
            self.log_weight_var,
            self.ess,
            self.snapshot_steps,
            self.snapshots,
            {**self.metadata, **metadata},
        )

    # ------------------------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> Path:
        """Write the trace atomically as an ``.npz`` archive (no pickled objects); returns the path."""
        r = self.result
        meta = {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "method": r.method,
            "log_z_start": r.log_z_start,
            "reciprocal": r.reciprocal,
            "n_steps": r.n_steps,
            "is_ratio": r.is_ratio,
            "reference_log_z": r.reference_log_z,
            "seconds": r.seconds,
            "settings": r.settings,
            "summary": r.to_dict(),
            "metadata": self.metadata,
        }
        arrays = {
            "betas": np.asarray(self.betas, dtype=np.float64),
            "log_weight_var": np.asarray(self.log_weight_var, dtype=np.float64),
            "ess": np.asarray(self.ess, dtype=np.float64),
            "snapshot_steps": np.asarray(self.snapshot_steps, dtype=np.int64),
            "snapshots": np.asarray(self.snapshots, dtype=np.uint8),
            "log_weights": r.log_weights.numpy() if r.log_weights is not None else np.zeros(0),
            "metadata": np.array(json.dumps(to_jsonable(meta), allow_nan=False)),
        }
        p = Path(path)
        with atomic_open(p, "wb") as f:
            np.savez_compressed(f, **arrays)
        return p

    @classmethod
    def load(cls, path: str | os.PathLike) -> AISTrace:
        """Read a trace written by :meth:`save`; a clear error for any other file."""
        p = Path(path)
        try:
            with np.load(p, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise
        except (OSError, ValueError, TypeError) as exc:  # TypeError: a .npy holds one array
            raise BoltzkitError(
                "cannot read this file as an AIS trace",
                got=f"{p} ({exc if zipfile.is_zipfile(p) else 'not an .npz archive'})",
                expected="an .npz archive written by boltzkit logz --trace",
            ) from None
        try:
            meta = json.loads(str(arrays["metadata"]))
            if meta.get("format") != TRACE_FORMAT:
                raise KeyError("format")
            result = LogZResult.from_log_weights(
                meta["method"],
                torch.from_numpy(np.asarray(arrays["log_weights"], dtype=np.float64)),
                log_z_start=float(meta["log_z_start"]),
                n_steps=stored_steps(meta),
                reciprocal=bool(meta.get("reciprocal", False)),
                is_ratio=bool(meta.get("is_ratio", False)),
                reference_log_z=meta.get("reference_log_z"),
                seconds=float(meta.get("seconds", 0.0)),
                **dict(meta.get("settings") or {}),
            )
            return cls(
                result=result,
                betas=np.asarray(arrays["betas"], dtype=np.float64),
                log_weight_var=np.asarray(arrays["log_weight_var"], dtype=np.float64),
                ess=np.asarray(arrays["ess"], dtype=np.float64),
                snapshot_steps=np.asarray(arrays["snapshot_steps"], dtype=np.int64),
                snapshots=np.asarray(arrays["snapshots"], dtype=np.uint8),
                metadata=dict(meta.get("metadata") or {}),
            )
        except (KeyError, TypeError, ValueError, json.JSONDecodeError):
            raise BoltzkitError(
                "this .npz archive is not an AIS trace",
                got=f"{p} (arrays: {', '.join(sorted(arrays)) or 'none'})",
                expected="an archive written by boltzkit logz --trace (AISTrace.save)",
            ) from None


# ------------------------------------------------------------------------------ recording
def _snapshot_steps(betas: Sequence[float], at: Sequence[float]) -> list[int]:
    """Indices of the schedule's betas nearest to each requested beta (sorted, without repeats)."""
    grid = np.asarray(betas, dtype=np.float64)
    steps = set()
    for a in at:
        value = float(a)
        if not math.isfinite(value):
            raise BoltzkitError("trace betas must be finite numbers", got=a)
        steps.add(int(np.argmin(np.abs(grid - value))))
    return sorted(steps)


@torch.no_grad()
def ais_trace(
    path: AnnealingPath,
    *,
    n_chains: int = 100,
    betas: str | int | Tensor | None = None,
    sweeps: int = 1,
    sampler: TransitionOperator | str = "gibbs",
    seed: int | torch.Generator | None = 0,
    at: Sequence[float] = DEFAULT_TRACE_BETAS,
    n_show: int = 16,
    progress: bool = False,
    check: bool = True,
) -> AISTrace:
    """Run AIS along ``path`` and record its course (see the module docstring).

    Parameters
    ----------
    path, n_chains, betas, sweeps, sampler, seed, progress
        As for :func:`~boltzkit.estimators.ais.ais`; the estimate (``trace.result``) is the one
        :func:`~boltzkit.estimators.ais.ais` returns for the same arguments.
    at
        Betas at which to keep the states of the shown chains; each is rounded to the nearest beta
        of the schedule (default: 0, 0.5, 0.9 and 1, as in S&M 2008, Fig. 2).
    n_show
        Chains whose states are kept (the first ``n_show``; at most ``n_chains``).
    check
        As for :func:`~boltzkit.estimators.ais.ais`: run its checks on the estimate (schedule
        check, reverse check or probe chains; after the traced run, so the trace is unchanged), so
        that a traced estimate is judged as an untraced one is (``logz --trace`` does).

    Returns
    -------
    AISTrace
    """
    check_path(path, "ais_trace")
    check_runs(n_chains, sweeps)
    if isinstance(n_show, bool) or int(n_show) < 1:
        raise BoltzkitError("the number of chains to show must be at least 1", got=n_show)
    if len(at) == 0:
        raise BoltzkitError("give at least one beta at which to keep the chains' states", got=list(at))
    t0 = time.perf_counter()
    op = make_operator(sampler)
    gen = make_generator(seed, path.device)
    schedule, schedule_name = resolve_betas(
        betas, path, n_chains=n_chains, operator=op, sweeps=sweeps, generator=gen, progress=progress
    )
    grid = [float(b) for b in schedule.tolist()]
    steps = _snapshot_steps(grid, at)
    slot = {k: j for j, k in enumerate(steps)}
    show = min(int(n_show), int(n_chains))
    n = len(grid)
    var = torch.zeros(n, dtype=torch.float64, device=path.device)
    log_ess = torch.zeros(n, dtype=torch.float64, device=path.device)
    kept: list[Tensor | None] = [None] * len(steps)

    def observe(k: int, beta: float, log_w: Tensor, state: ChainState) -> None:
        var[k] = log_w.var(correction=0)
        log_ess[k] = 2.0 * torch.logsumexp(log_w, 0) - torch.logsumexp(2.0 * log_w, 0)
        j = slot.get(k)
        if j is not None:
            kept[j] = state.visible[:show].detach().round().to(device="cpu", dtype=torch.uint8)

    run = anneal(
        path,
        schedule,
        init=path.sample_start(int(n_chains), gen),
        operator=op,
        sweeps=sweeps,
        generator=gen,
        progress=progress,
        final_move=True,  # the states at the last beta are samples of the model; weights unchanged
        observe=observe,
    )
    sync(path.device)
    n_steps = n - 1
    settings: dict[str, Any] = {
        **path_settings(path),
        "schedule": schedule_name,
        "sampler": op.name,
        "sweeps": int(sweeps),
        "total_sweeps": n_steps * int(sweeps),
        "seed": seed_label(seed),
    }
    if check:  # the checks of ais(): a traced estimate is judged as an untraced one is
        main = record("ais", path, run.log_weights, n_steps=n_steps, seconds=0.0, **settings)
        settings["checks"] = ais_checks(path, schedule, main, run.final_state, op, sweeps, gen)
    sync(path.device)
    result = record(
        "ais", path, run.log_weights, n_steps=n_steps, seconds=time.perf_counter() - t0, **settings
    )
    warn_unreliable("the AIS estimate of log Z", result.reliability())
    snapshots = torch.stack([t for t in kept if t is not None]).numpy()
    return AISTrace(
        result=result,
        betas=np.asarray(grid, dtype=np.float64),
        log_weight_var=var.cpu().numpy(),
        ess=log_ess.exp().cpu().numpy(),
        snapshot_steps=np.asarray(steps, dtype=np.int64),
        snapshots=snapshots,
    )


# ------------------------------------------------------------------------ runs and log Z
@dataclass(frozen=True)
class RunsCurve:
    """``log Z_hat`` from the first ``counts[i]`` runs, with ``log(Z_hat ± 3 sigma_hat)``.

    ``minus_3sigma`` is NaN where ``Z_hat <= 3 sigma_hat`` (the lower end is undefined there).
    """

    counts: np.ndarray
    log_z: np.ndarray
    minus_3sigma: np.ndarray
    plus_3sigma: np.ndarray


def log_z_by_runs(
    log_weights: Tensor | np.ndarray | Sequence[float],
    log_z_start: float,
    *,
    counts: Sequence[int] | None = None,
    reciprocal: bool = False,
) -> RunsCurve:
    """``log Z_hat`` and its 3-sigma band from the first ``m`` runs, for each ``m`` in ``counts``.

    Parameters
    ----------
    log_weights
        All runs' log-weights (float64), in the order they were drawn.
    log_z_start
        What the weights are relative to (:attr:`LogZResult.log_z_start`).
    counts
        Numbers of runs (default: 2, 5, 10, 20, 50, ... up to all of them, and all of them).
    reciprocal
        The weights estimate ``Z_start / Z`` (reverse AIS).
    """
    lw = torch.as_tensor(np.asarray(log_weights, dtype=np.float64))
    if lw.dim() != 1 or lw.numel() == 0:
        raise BoltzkitError("log-weights must be a non-empty vector", got=tuple(lw.shape))
    n = int(lw.numel())
    if counts is None:
        chosen = [m for m in DEFAULT_RUN_COUNTS if m < n] + [n]
    else:
        chosen = sorted({int(m) for m in counts if 1 <= int(m) <= n})
        if not chosen:
            raise BoltzkitError("no number of runs between 1 and the runs there are", got=list(counts))
    mids, lows, highs = [], [], []
    for m in chosen:
        band = LogZResult.from_log_weights(
            "ais", lw[:m], log_z_start=float(log_z_start), n_steps=0, reciprocal=reciprocal
        ).band
        mids.append(band.value)
        lows.append(math.nan if band.minus_3sigma is None else band.minus_3sigma)
        highs.append(math.nan if band.plus_3sigma is None else band.plus_3sigma)
    return RunsCurve(
        counts=np.asarray(chosen, dtype=np.int64),
        log_z=np.asarray(mids, dtype=np.float64),
        minus_3sigma=np.asarray(lows, dtype=np.float64),
        plus_3sigma=np.asarray(highs, dtype=np.float64),
    )


__all__ = [
    "DEFAULT_TRACE_BETAS",
    "AISTrace",
    "RunsCurve",
    "ais_trace",
    "log_z_by_runs",
]
