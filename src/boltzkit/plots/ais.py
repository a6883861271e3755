"""Plots of AIS runs: the course of one run, and ``log Z_hat`` against the number of runs.

:func:`plot_ais_course` draws an :class:`~boltzkit.estimators.trace.AISTrace` (``boltzkit logz
--method ais --trace FILE.npz``) as Salakhutdinov & Murray (2008), Fig. 2 shows it: the states of a
few chains at chosen betas, from the base-rate model to the model; below, the variance over chains
of the running log-weights (and their effective sample size) along beta.

:func:`plot_logz_runs` draws S&M 2008, Fig. 3 (and Salakhutdinov 2008, Fig. 3): ``log Z_hat`` from
the first ``m`` runs with bars ``log(Z_hat ± 3 sigma_hat)``, from records that keep their raw
log-weights (``boltzkit logz --out FILE.json --keep-weights``, or an experiment's per-model record).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from boltzkit.errors import BoltzkitError
from boltzkit.estimators.reliability import MIN_RUNS
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.trace import AISTrace, log_z_by_runs
from boltzkit.plots._backend import new_figure, require_matplotlib, save_png
from boltzkit.plots.images import grid_layout, image_grid, image_shape_of, parse_image_shape


# ------------------------------------------------------------------------------ the course
def course_title(result: LogZResult, n_show: int) -> str:
    """The title of :func:`plot_ais_course`: ``ln Ẑ`` with its ±3σ band, or, where the estimate's
    verdict is unreliable, with the reason instead of a band it cannot support."""
    band, verdict = result.band, result.reliability()
    if verdict is not None and not verdict.reliable:
        shown = f"{band.value:.3f}, unreliable: {verdict.reason}"
    else:
        low, high = ("n/a" if x is None else f"{x:.3f}" for x in (band.minus_3sigma, band.plus_3sigma))
        shown = f"{band.value:.3f} [{low}, {high}] (±3σ)"
    return f"AIS: ln Ẑ = {shown}, {result.n_chains} chains ({n_show} shown), {result.n_steps} steps"


def plot_ais_course(
    trace: AISTrace | str | os.PathLike,
    out: str | os.PathLike,
    *,
    image_shape: str | Sequence[int] | None = None,
    title: str | None = None,
) -> Path:
    """Draw the course of an AIS run (see the module docstring) as a PNG.

    Parameters
    ----------
    trace
        The trace, or its ``.npz`` file.
    out
        The PNG to write.
    image_shape
        Shape of one image (``"28x28"``); default: the trace's ``image_shape`` metadata, else a
        square ``n_visible``, else each state is drawn as one row of units.
    title
        Figure title (default: the estimate).
    """
    require_matplotlib()
    tr = trace if isinstance(trace, AISTrace) else AISTrace.load(trace)
    n_visible = tr.n_visible
    shape = parse_image_shape(image_shape, n_visible) or image_shape_of(tr.metadata, n_visible)
    shape, cols = grid_layout(n_visible, shape)
    n_snap, n_show = tr.snapshots.shape[:2]
    fig = new_figure(max(6.0, 2.2 * n_snap), 5.6)
    grid_spec = fig.add_gridspec(2, n_snap, height_ratios=[1.25, 1.0])
    for j in range(n_snap):
        ax = fig.add_subplot(grid_spec[0, j])
        img = image_grid(tr.snapshots[j].astype(np.float64), shape, n_show, cols=cols, upscale=False)
        ax.imshow(img, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
        ax.set_title(f"β = {tr.snapshot_betas[j]:.4g}", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    ax = fig.add_subplot(grid_spec[1, :])
    ax.plot(tr.betas, tr.log_weight_var, color="C0", lw=1.2, label="Var(log w) over chains")
    for b in tr.snapshot_betas:
        ax.axvline(float(b), color="0.6", ls=":", lw=1)
    ax.set_xlabel("β")
    ax.set_ylabel("variance of log-weights", color="C0")
    ax.set_xlim(float(tr.betas.min()), float(tr.betas.max()))
    ax.grid(alpha=0.3)
    ess_ax = ax.twinx()
    ess_ax.plot(tr.betas, tr.ess, color="C1", lw=1.0, ls="--", label="ESS")
    ess_ax.set_ylabel("effective sample size", color="C1")
    ess_ax.set_ylim(0, max(1.0, float(np.nanmax(tr.ess))) * 1.05)
    r = tr.result
    fig.suptitle(title or course_title(r, n_show), fontsize=10)
    return save_png(fig, out)


# ------------------------------------------------------------------------ log Z vs runs
@dataclass(frozen=True)
class RunsRecord:
    """One panel of :func:`plot_logz_runs`: a record's log-weights, what they are relative to,
    the exact value when known, and the verdict of the estimate from all the runs (``reliable``;
    ``None`` when the record has none)."""

    title: str
    log_weights: np.ndarray | Sequence[float]
    log_z_start: float
    reciprocal: bool = False
    exact: float | None = None
    ratio: bool = False
    reliable: bool | None = None


def _find_records(obj: Any) -> list[dict[str, Any]]:
    """Dicts holding ``log_weights``, in document order (not looking inside those)."""
    if isinstance(obj, dict):
        if "log_weights" in obj:
            return [obj]
        return [r for v in obj.values() for r in _find_records(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in _find_records(v)]
    return []


def _estimate(rec: dict[str, Any]) -> float | None:
    """The record's own estimate from all its weights: ``log_z`` (or ``log_ratio``), possibly nested
    under ``ais`` / ``ais_100`` as the experiments write it."""
    for key in ("log_z", "log_ratio"):
        if isinstance(rec.get(key), (int, float)):
            return float(rec[key])
    for key in ("ais", "ais_100"):
        sub = rec.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("log_z"), (int, float)):
            return float(sub["log_z"])
    return None


def _exact(rec: dict[str, Any]) -> float | None:
    for key in ("exact", "exact_log_z", "true_log_z"):
        v = rec.get(key)
        if isinstance(v, dict):
            v = v.get("log_z")
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            return float(v)
    return None


def runs_record(rec: dict[str, Any], title: str) -> RunsRecord:
    """A :class:`RunsRecord` from one JSON record with ``log_weights``."""
    lw = np.asarray(rec.get("log_weights") or [], dtype=np.float64)
    if lw.ndim != 1 or lw.size == 0:
        raise BoltzkitError(
            "this log Z record keeps no log-weights",
            got=title,
            hint="rerun boltzkit logz with --out FILE.json --keep-weights.",
        )
    if bool(np.isnan(lw).any() | np.isposinf(lw).any()):  # (a weight of 0, log-weight -inf, is one)
        bad = int((np.isnan(lw) | np.isposinf(lw)).sum())
        raise BoltzkitError(
            f"{bad} of this record's {lw.size} log-weights are NaN or +inf: the curve has no meaning",
            got=title,
            hint="the record was damaged or written by a run that overflowed; estimate log Z again.",
        )
    method = str(rec.get("method", "ais"))
    reciprocal = bool(rec.get("reciprocal", method == "reverse-ais"))
    ratio = rec.get("log_ratio") is not None or bool(rec.get("is_ratio", False))
    if isinstance(rec.get("log_z_start"), (int, float)):
        start = float(rec["log_z_start"])
    else:
        value = _estimate(rec)
        if value is None:
            raise BoltzkitError(
                "this record has log-weights but neither log_z_start nor its log Z estimate",
                got=title,
                hint="rerun boltzkit logz with --out FILE.json --keep-weights.",
            )
        lme = float(torch.logsumexp(torch.from_numpy(lw), 0)) - math.log(lw.size)
        start = value + lme if reciprocal else value - lme
    verdict = rec.get("reliable")
    return RunsRecord(
        title, lw, start, reciprocal, _exact(rec), ratio, verdict if isinstance(verdict, bool) else None
    )


def read_logz_runs(source: str | os.PathLike | dict[str, Any] | LogZResult | RunsRecord) -> list[RunsRecord]:
    """Every record with log-weights in a JSON file (or a dict, a :class:`LogZResult`, or a
    :class:`RunsRecord` as it is)."""
    if isinstance(source, RunsRecord):
        return [source]
    if isinstance(source, LogZResult):
        if source.log_weights is None:
            raise BoltzkitError("this log Z result has no log-weights", got=source.method)
        return [
            RunsRecord(
                source.method,
                source.log_weights.numpy(),
                source.log_z_start,
                source.reciprocal,
                None,
                source.is_ratio,
                _verdict(source),
            )
        ]
    if isinstance(source, dict):
        name, doc = str(source.get("model", source.get("name", "record"))), source
    else:
        p = Path(source)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BoltzkitError(
                "this log Z record is not valid JSON",
                got=f"{p} ({exc})",
                expected="the JSON that boltzkit logz --out FILE.json --keep-weights writes",
            ) from None
        name = p.stem
    records = _find_records(doc)
    if not records:
        raise BoltzkitError(
            "no log-weights found in this record",
            got=name,
            hint="write the record with boltzkit logz MODEL --method ais --out FILE.json --keep-weights.",
        )
    out = []
    for i, rec in enumerate(records):
        title = str(rec.get("model") or rec.get("name") or name)
        if len(records) > 1 and not (rec.get("model") or rec.get("name")):
            title = f"{name} [{i}]"
        try:
            out.append(runs_record(rec, Path(title).name))
        except BoltzkitError:
            raise  # its own message, not wrapped in "not numbers"
        except (TypeError, ValueError) as exc:
            raise BoltzkitError("this record's log-weights are not numbers", got=f"{title}: {exc}") from None
    return out


def _verdict(result: LogZResult) -> bool | None:
    verdict = result.reliability()
    return None if verdict is None else bool(verdict.reliable)


def plot_logz_runs(
    sources: str | os.PathLike | dict[str, Any] | LogZResult | RunsRecord | Sequence[Any],
    out: str | os.PathLike,
    *,
    counts: Sequence[int] | None = None,
    title: str | None = None,
) -> Path:
    """Draw ``log Z_hat`` against the number of runs with ``±3 sigma`` bars, one panel per record.

    Parameters
    ----------
    sources
        JSON files (or dicts, :class:`LogZResult` or :class:`RunsRecord` objects) with
        log-weights; every record with ``log_weights`` in them becomes a panel. Panels go in rows of
        four. Where a record's estimate from all its runs is unreliable (``reliable: false``), that
        point is drawn alone in red, without the band it cannot support.
    out
        The PNG to write.
    counts
        Numbers of runs to pool (default: 2, 5, 10, 20, 50, ... up to all).
    title
        Figure title.
    """
    require_matplotlib()
    if isinstance(sources, (str, os.PathLike, dict, LogZResult, RunsRecord)):
        sources = [sources]
    panels = [r for s in sources for r in read_logz_runs(s)]
    if not panels:
        raise BoltzkitError("nothing to plot: no records with log-weights were given")
    n_cols, n_rows = min(len(panels), 4), -(-len(panels) // 4)
    fig = new_figure(4.2 * n_cols, 3.4 * n_rows)
    axes = list(fig.subplots(n_rows, n_cols, squeeze=False).flat)
    for ax in axes[len(panels) :]:
        ax.remove()
    for ax, panel in zip(axes, panels, strict=False):
        curve = log_z_by_runs(
            panel.log_weights, panel.log_z_start, counts=counts, reciprocal=panel.reciprocal
        )
        highs = curve.plus_3sigma - curve.log_z
        # where Z_hat <= 3 sigma_hat, log(Z_hat - 3 sigma_hat) is undefined: draw the bar as long as
        # the upper one and mark it with an arrow
        undefined = ~np.isfinite(curve.minus_3sigma)
        lows = np.where(undefined, highs, curve.log_z - curve.minus_3sigma)
        # fewer runs than MIN_RUNS support no band (estimators.reliability): their points get no bar
        too_few = np.asarray(curve.counts) < MIN_RUNS
        lows, highs = np.where(too_few, 0.0, lows), np.where(too_few, 0.0, highs)
        undefined &= ~too_few
        # the estimate from all the runs gets no band where its verdict is unreliable
        n_runs = np.asarray(panel.log_weights).size
        last_unreliable = panel.reliable is False and int(curve.counts[-1]) == n_runs
        shown = slice(0, len(curve.counts) - 1 if last_unreliable else len(curve.counts))
        ax.errorbar(
            curve.counts[shown], curve.log_z[shown], yerr=[lows[shown], highs[shown]], fmt="o-", ms=4,
            capsize=3, label="AIS, ±3σ̂",
        )  # fmt: skip
        if last_unreliable:
            ax.plot(
                curve.counts[-1:], curve.log_z[-1:], "X", color="tab:red", ms=8, label="‡ unreliable: no band"
            )
        marked = undefined.copy()
        marked[shown.stop :] = False  # the unbanded point has no bar to mark
        for m, v, h in zip(curve.counts[marked], curve.log_z[marked], highs[marked], strict=True):
            ax.annotate("↓", (float(m), float(v - h)), ha="center", va="top", fontsize=9)
        if marked.any():
            ax.plot([], [], ls="none", marker=r"$\downarrow$", color="k", label="Ẑ − 3σ̂ ≤ 0")
        if too_few.any():
            ax.plot([], [], ls="none", label=f"no bar: fewer than {MIN_RUNS} runs")
        if panel.exact is not None:
            ax.axhline(panel.exact, color="k", ls="--", lw=1, label="exact")
        if len(curve.counts) > 1 and curve.counts[-1] / max(1, curve.counts[0]) >= 10:
            ax.set_xscale("log")
            ax.minorticks_off()
        ax.set_xticks([int(m) for m in curve.counts], [str(int(m)) for m in curve.counts])
        ax.set_xlabel("number of AIS runs")
        ax.set_ylabel("ln Ẑ_B/Z_A (nats)" if panel.ratio else "ln Ẑ (nats)")
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_png(fig, out)


__all__ = ["RunsRecord", "plot_ais_course", "plot_logz_runs", "read_logz_runs", "runs_record"]
