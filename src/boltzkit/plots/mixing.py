"""Plots of the mixing study of Brügge, Fischer & Igel (2013, "S3"): the SLEM comparison and the
learning curves of Fig. 3, and the autocorrelation functions of Fig. 4.

Each function draws one PNG (matplotlib, the ``plot`` extra) and returns its path.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from boltzkit.diagnostics.autocorrelation import autocorrelation
from boltzkit.errors import BoltzkitError
from boltzkit.plots._backend import new_figure, save_png


def plot_slem_fraction(rows: Sequence[Mapping[str, float]], out: str | os.PathLike) -> Path:
    """S3 Fig. 3 (top): fraction of random ``n x n`` RBMs for which flip-the-state has the smaller
    SLEM, against the weight bound ``c``; one line per ``n``.

    ``rows``: dicts with ``n``, ``c`` and ``fraction_b_better`` (:class:`~boltzkit.diagnostics.SlemRow`).
    """
    fig = new_figure(5.0, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    styles = ["k-", "r--", "b:", "g-."]
    for i, n in enumerate(sorted({int(r["n"]) for r in rows})):
        sel = sorted((r for r in rows if int(r["n"]) == n), key=lambda r: r["c"])
        ax.plot(
            [r["c"] for r in sel],
            [r["fraction_b_better"] for r in sel],
            styles[i % 4],
            marker="o",
            ms=3,
            label=f"{n}x{n}",
        )
    ax.set_xlabel("weight bound c (weights uniform on [-c, c])")
    ax.set_ylabel("fraction with SLEM(T) < SLEM(G)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    return save_png(fig, out)


def plot_curves_with_difference(
    updates: Sequence[int],
    curve_a: Sequence[float],
    curve_b: Sequence[float],
    out: str | os.PathLike,
    *,
    labels: tuple[str, str] = ("G (Gibbs)", "T (flip-the-state)"),
    optimum: float | None = None,
    title: str = "",
) -> Path:
    """S3 Fig. 3 (bottom): two learning curves and, inset, their difference ``b - a``; a dashed
    line at the best achievable value."""
    fig = new_figure(5.6, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(updates, curve_a, "k-", lw=1.2, label=labels[0])
    ax.plot(updates, curve_b, "r--", lw=1.2, label=labels[1])
    if optimum is not None:
        ax.axhline(optimum, color="grey", ls="--", lw=0.8, label="maximum")
    ax.set_xlabel("parameter updates")
    ax.set_ylabel("mean log-likelihood")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    inset = ax.inset_axes([0.42, 0.4, 0.33, 0.3])
    diff = np.asarray(curve_b, dtype=float) - np.asarray(curve_a, dtype=float)
    inset.plot(updates, diff, "b-", lw=0.8)
    inset.axhline(0.0, color="grey", lw=0.5)
    inset.set_title("T - G", fontsize=7)
    inset.tick_params(labelsize=6)
    return save_png(fig, out)


def plot_cell_curves(
    cells: Sequence[Mapping], out: str | os.PathLike, *, title: str = "", optimum: float | None = None
) -> Path:
    """The learning curves behind a likelihood table (S3 Tables 1, 5, 6): one panel per cell, a
    row per algorithm and a column per learning rate, each with the mean exact log-likelihood of
    the cell's runs with G and with T against the parameter updates (S3 Fig. 3, bottom, draws one
    such cell). The table keeps the maxima; the curves show how they were reached, and whether
    the runs fall away after them.

    Parameters
    ----------
    cells
        Mappings with ``algorithm`` (its label, e.g. ``"PCD_5"``), ``lr``, and the
        :func:`~boltzkit.experiments.grid.mean_curves` of the cell: ``updates``, ``gibbs``,
        ``flip`` (equal lengths), ``runs_by_operator`` and, optionally, ``end_level`` (each
        drawn curve's mean over the last quarter of the updates, given in the legend). A cell
        with only ``algorithm`` and ``lr`` has no runs yet and is an empty panel, so a table's
        row is there even before any of its cells has run.
    out
        The PNG to write.
    title
        The figure's title.
    optimum
        The best achievable mean log-likelihood, drawn dashed (Bars and Stripes).

    Each row of panels shares its y axis, from the lowest value after the first tenth of the updates
    (the first evaluations sit at the start's log-likelihood and would flatten the rest); a line
    under the panels says so.
    """
    if not any("updates" in c for c in cells):
        raise BoltzkitError("no cell has learning curves to draw", hint="run the table's tasks first")
    fig = new_figure(1.0, 1.0)  # matplotlib is there (or a clear error) before its ticker is imported
    from matplotlib.ticker import MaxNLocator

    algorithms = list(dict.fromkeys(str(c["algorithm"]) for c in cells))
    lrs = sorted({float(c["lr"]) for c in cells})
    at = {(str(c["algorithm"]), float(c["lr"])): c for c in cells}
    fig.set_size_inches(2.9 * len(lrs) + 0.6, 2.3 * len(algorithms) + 0.7)
    for i, algorithm in enumerate(algorithms):
        row_values = []
        axes = []
        for j, lr in enumerate(lrs):
            ax = fig.add_subplot(len(algorithms), len(lrs), i * len(lrs) + j + 1)
            axes.append(ax)
            cell = at.get((algorithm, lr))
            if cell is None or "updates" not in cell:
                ax.set_axis_off()
                ax.set_title(f"{algorithm}, η = {lr:g}: no runs", fontsize=8)
                continue
            updates = np.asarray(cell["updates"], dtype=float)
            runs, end = cell["runs_by_operator"], cell.get("end_level", {})
            for op, style, symbol in (("gibbs", "k-", "G"), ("flip", "r--", "T")):
                curve = np.asarray(cell[op], dtype=float)
                digits = 2 if abs(end.get(op, 0.0)) >= 100 else 3
                level = f"; last quarter {end[op]:.{digits}f}" if op in end else ""
                ax.plot(updates, curve, style, lw=1.0, label=f"{symbol} ({runs[op]} runs{level})")
                row_values.append(curve[updates >= 0.1 * updates[-1]])
            if optimum is not None:
                ax.axhline(optimum, color="grey", ls=":", lw=0.8)
            ax.set_title(f"{algorithm}, η = {lr:g}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(4))
            ax.legend(fontsize=6, loc="lower right")
            below = at.get((algorithms[i + 1], lr)) if i + 1 < len(algorithms) else None
            if below is None or "updates" not in below:  # the lowest drawn panel of its column
                ax.set_xlabel("parameter updates", fontsize=8)
            if not any(a.axison for a in axes[:-1]):  # the first drawn panel of its row
                ax.set_ylabel("mean log-likelihood", fontsize=8)
        values = np.concatenate(row_values) if row_values else np.zeros(0)
        values = values[np.isfinite(values)]
        if values.size:
            top = max(float(values.max()), optimum if optimum is not None else -np.inf)
            low = float(values.min())
            pad = 0.05 * max(top - low, 1e-3)
            for ax in axes:
                if ax.axison:
                    ax.set_ylim(low - pad, top + pad)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.supxlabel(_Y_FROM, fontsize=6, color="grey", x=0.01, ha="left")  # the layout keeps room for it
    return save_png(fig, out)


#: The note under :func:`plot_cell_curves`'s panels: where each row's y axis starts.
_Y_FROM = "Each row's y axis starts at its lowest mean after the first tenth of the updates."


def plot_autocorrelations(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    out: str | os.PathLike,
    *,
    lags: Mapping[str, Sequence[int]] | None = None,
) -> Path:
    """S3 Fig. 4: autocorrelation functions ``R(dt)`` of the energy, one panel per problem, one
    line per operator (``{"problem": {"gibbs": acf, "flip": acf}}``), at lags ``0, 1, ...``; or,
    for the panels in ``lags``, at those lags (e.g. spaced evenly in log), on a log axis."""
    names = list(panels)
    fig = new_figure(3.6 * max(1, len(names)), 3.2)
    styles = {"gibbs": ("k-", "G"), "flip": ("r:", "T")}
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        given = (lags or {}).get(name)
        for op, acf in panels[name].items():
            style, label = styles.get(op, ("b-.", op))
            x = np.arange(len(acf)) if given is None else np.asarray(given)
            ax.plot(x, acf, style, lw=1.0, label=label)
        if given is not None:
            ax.set_xscale("log")
        ax.axhline(0.0, color="grey", lw=0.5)
        ax.set_xlabel("lag (sweeps)")
        if i == 0:
            ax.set_ylabel("R(lag)")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=8)
    return save_png(fig, out)


def read_energy_traces(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The energy traces of ``boltzkit mixing --out FILE.npz``: ``{sampler: (n_chains, n_steps)}``."""
    try:
        with np.load(path, allow_pickle=False) as f:
            names = [str(n) for n in f["samplers"]]
            return {name: np.asarray(f[f"energy_{i}"], dtype=np.float64) for i, name in enumerate(names)}
    except (KeyError, ValueError, OSError, TypeError) as err:  # TypeError: a .npy holds one array
        what = err if zipfile.is_zipfile(path) else "not an .npz archive"
        raise BoltzkitError(
            "not a file of energy traces",
            got=f"{path}: {what}",
            expected="the .npz that boltzkit mixing --out writes (arrays samplers, energy_0, ...)",
        ) from None


def plot_acf(
    files: Sequence[str | os.PathLike], out: str | os.PathLike, *, max_lag: int | None = None
) -> Path:
    """Energy autocorrelation functions (S3 Fig. 4) from ``boltzkit mixing --out FILE.npz`` files:
    one panel per file, one line per sampler, lags ``0 .. max_lag`` (default: a quarter of the
    chains' length, at most 200)."""
    panels: dict[str, dict[str, list[float]]] = {}
    for path in files:
        traces = read_energy_traces(path)
        lag = max_lag
        if lag is None:
            lag = min(200, min(t.shape[1] for t in traces.values()) // 4)
        panels[Path(path).stem] = {name: list(autocorrelation(t, lag)) for name, t in traces.items()}
    return plot_autocorrelations(panels, out)


__all__ = [
    "plot_acf",
    "plot_autocorrelations",
    "plot_cell_curves",
    "plot_curves_with_difference",
    "plot_slem_fraction",
    "read_energy_traces",
]
