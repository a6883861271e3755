"""The report side of the experiment engine: ``ours / paper`` cells that carry every estimate's
verdict, markdown tables, CSV, and the plots the reproductions share.

An estimate the library does not trust (its record says ``reliable: false``: Pareto k-hat, effective
sample size, a sandwich whose ends disagree; :mod:`boltzkit.estimators.reliability`) is never
printed as a plain number with a band: :class:`Verdicts` marks the cell with ``‡`` and numbered
footnotes give the reason and the advice, and the band columns say the band is unsupported
(:func:`band`). A reproduction builds each table once, row by row, as a :class:`Table`, which
writes both its markdown and its CSV; :func:`log_z_cells` gives an AIS estimate's cells beside
the paper's with its verdict. The comparison of every ``log Z`` method per model (exact, AIS, mean-field, Bethe,
TAP, TRW), its CSV and its plot are here too; the stages that compute them are in
:mod:`boltzkit.experiments.engine`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from boltzkit.errors import BoltzkitError
from boltzkit.experiments.engine import VARIATIONAL_METHODS
from boltzkit.plots._backend import optional_figure, require_matplotlib, save_png
from boltzkit.plots.ais import RunsRecord, plot_logz_runs

#: Missing value in a table.
DASH = "—"
#: Mark of an estimate whose verdict is ``reliable: false``.
UNRELIABLE = "‡"


# ---------------------------------------------------------------------------------- formatting
def fmt(x: float | None, digits: int = 2, *, sign: bool = False) -> str:
    """A number with ``digits`` decimals (and its sign, ``+`` too, where ``sign``), or a dash for
    a missing or non-finite value."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return DASH
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def pair(a: float | None, b: float | None) -> str:
    """``a, b`` (one band), or a dash when both ends are missing."""
    return DASH if a is None and b is None else f"{fmt(a)}, {fmt(b)}"


def cell(ours: str, paper: str) -> str:
    """An ``ours / paper`` table cell."""
    return f"{ours} / {paper}"


def recipe_label(recipe: str, training: dict[str, Any]) -> str:
    """The recipe a model was trained by: ``recipe``, followed by the settings in which the model
    departs from it (a zoo model trained with flags over a recipe; the engine's
    ``training["recipe_differences"]``), e.g. ``sm2008-cd3 (epochs 100, lr 0.05)``."""
    differences = training.get("recipe_differences") or {}
    if not differences:
        return recipe
    return f"{recipe} ({', '.join(f'{k} {v}' for k, v in differences.items())})"


def csv_text(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The rows as CSV under the header ``cols`` (empty fields for ``None``; a value holding a
    comma, quote or line break is quoted, as :mod:`csv` reads it back), lines ending in ``\\n``.

    Examples
    --------
    >>> csv_text(("variant", "test"), [["PCD-1, 100 chains", -103.6], ["CD-1", None]])
    'variant,test\\n"PCD-1, 100 chains",-103.6\\nCD-1,\\n'
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(cols)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    return out.getvalue()


def machine_note(device: torch.device) -> str:
    """torch version, device and threads of this run."""
    n = torch.get_num_threads()
    return f"torch {torch.__version__} on {device} ({n} CPU thread{'s' if n != 1 else ''})"


# ------------------------------------------------------------------------------------ verdicts
@dataclass
class Verdicts:
    """Footnotes for the unreliable estimates of one report.

    :meth:`mark` returns ``" ‡n"`` for a record whose verdict is ``reliable: false`` (and records
    the reason and advice as footnote ``n``), ``""`` otherwise; :meth:`lines` gives the footnotes.
    """

    notes: list[str] = field(default_factory=list)

    def mark(self, what: str, record: dict[str, Any] | None) -> str:
        if not record or record.get("reliable") is not False:
            return ""
        reason = record.get("reliability_reason") or record.get("reason") or "the estimate failed its checks"
        text = f"{what}: {reason}"
        if record.get("advice"):
            text += f" (advice: {record['advice']})"
        if text not in self.notes:
            self.notes.append(text)
        return f" {UNRELIABLE}{self.notes.index(text) + 1}"

    def lines(self) -> list[str]:
        if not self.notes:
            return []
        out = [
            "",
            f"{UNRELIABLE} unreliable estimates (no band that rests on one is shown: the estimate cannot support "
            "it; a ± of another term beside it, such as a bound's Monte Carlo error over the data, stands):",
        ]
        out += [f"- {UNRELIABLE}{i}: {note}" for i, note in enumerate(self.notes, 1)]
        return out + [""]


def band(lo: float | None, hi: float | None, record: dict[str, Any] | None = None) -> str:
    """A band ``lo, hi``; ``unsupported`` where the record's verdict is ``reliable: false``."""
    if record is not None and record.get("reliable") is False:
        return "unsupported"
    return pair(lo, hi)


# ------------------------------------------------------------------------ ours-vs-paper tables
@dataclass
class Table:
    """One table of a reproduction, built once row by row and written both as markdown (each cell
    as shown, e.g. ``ours / paper``) and as CSV (the raw numbers under ``csv_columns``, empty where
    missing), so that the two forms of a report cannot disagree.

    Examples
    --------
    >>> t = Table(("model", "ln Z"), ("model", "log_z", "paper_log_z"))
    >>> t.add(["RBM", cell("1.00", "2.00")], model="RBM", log_z=1.0, paper_log_z=2.0)
    >>> t.markdown()
    ['| model | ln Z |', '|---|---|', '| RBM | 1.00 / 2.00 |']
    >>> t.csv(mode="full")
    'mode,model,log_z,paper_log_z\\nfull,RBM,1.0,2.0\\n'
    """

    headings: Sequence[str]
    csv_columns: Sequence[str]
    rows: list[tuple[list[str], dict[str, Any]]] = field(default_factory=list)

    def add(self, cells: Sequence[str], **values: Any) -> None:
        """One row: its markdown ``cells`` (one per heading) and its CSV ``values`` by column."""
        if len(cells) != len(self.headings):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.headings)} columns")
        unknown = sorted(set(values) - set(self.csv_columns))
        if unknown:
            raise ValueError(f"CSV values {unknown} have no column (columns: {', '.join(self.csv_columns)})")
        self.rows.append((list(cells), values))

    def markdown(self) -> list[str]:
        """The heading line, the rule and one line per row."""
        lines = ["| " + " | ".join(self.headings) + " |", "|" + "---|" * len(self.headings)]
        return lines + ["| " + " | ".join(cells) + " |" for cells, _ in self.rows]

    def csv_rows(self) -> list[list[Any]]:
        """The CSV values of each row, in the order of ``csv_columns`` (``None`` where missing)."""
        return [[values.get(c) for c in self.csv_columns] for _, values in self.rows]

    def csv(self, *, mode: str) -> str:
        """The rows as CSV (:func:`tables_csv`), each marked with the run's ``mode``."""
        return tables_csv([self], mode=mode)


def tables_csv(tables: Sequence[Table], *, mode: str) -> str:
    """Tables of the same CSV columns (the sections of one reproduction's table) as one CSV, their
    rows in order, each row led by a ``mode`` column holding the run's mode (``"full"``,
    ``"quick"``, ``"smoke"``): a CSV read on its own says whether its numbers are full size, as the
    markdown report's heading does."""
    columns = tuple(tables[0].csv_columns)
    if any(tuple(t.csv_columns) != columns for t in tables):
        raise ValueError("tables written as one CSV need the same columns")
    return csv_text(("mode", *columns), [[mode, *row] for t in tables for row in t.csv_rows()])


#: CSV columns of an AIS estimate (keys of :func:`boltzkit.experiments.engine.log_z_summary`).
AIS_CSV_COLUMNS = (
    "log_z",
    "log_z_minus_sigma",
    "log_z_plus_sigma",
    "log_z_minus_3sigma",
    "log_z_plus_3sigma",
    "log_z_stderr",
)


def ais_csv_values(ais: dict[str, Any]) -> dict[str, Any]:
    """The :data:`AIS_CSV_COLUMNS` of an AIS record for a CSV row, with the bands and the standard
    error left empty where its verdict is ``reliable: false``: a CSV prints no band its estimate
    cannot support either (its ``reliable`` column says why; the JSON keeps every number)."""
    unreliable = ais.get("reliable") is False
    return {k: None if unreliable and k != "log_z" else ais.get(k) for k in AIS_CSV_COLUMNS}


def log_z_cells(
    ais: dict[str, Any],
    paper: tuple[float, tuple[float, float], tuple[float, float]] | None,
    verdicts: Verdicts,
    what: str,
) -> list[str]:
    """The cells ``ln Ẑ``, ``ln (Ẑ ± σ̂)`` and ``ln (Ẑ ± 3σ̂)`` of an AIS record (S1 Eq. 12's
    ``ln(Ẑ ± σ̂)`` convention) beside the paper's ``(log_z, sigma_band, three_sigma_band)``, or a
    dash where ``paper`` is ``None``. Where the record's verdict is ``reliable: false`` the estimate
    carries :class:`Verdicts`' mark and both bands read ``unsupported``."""
    mark = verdicts.mark(what, ais)
    return [
        cell(fmt(ais["log_z"]) + mark, fmt(paper[0]) if paper else DASH),
        cell(
            band(ais["log_z_minus_sigma"], ais["log_z_plus_sigma"], ais), pair(*paper[1]) if paper else DASH
        ),
        cell(
            band(ais["log_z_minus_3sigma"], ais["log_z_plus_3sigma"], ais), pair(*paper[2]) if paper else DASH
        ),
    ]


#: Column headings of the log Z methods.
METHOD_LABELS = {
    "exact": "exact",
    "ais": "AIS",
    "mean-field": "mean-field",
    "bethe": "Bethe",
    "tap": "TAP",
    "trw": "TRW",
}


@dataclass(frozen=True)
class VariationalSettings:
    """The deterministic ``log Z`` methods beside AIS: naive mean-field (a lower bound, S2 Sec.
    2.3), the Bethe approximation by damped loopy BP (Sec. 2.4), second-order TAP (not in S2) and
    the tree-reweighted upper bound (Sec. 2.5) with the edge appearance probabilities ``rho``
    optimised by conditional gradient over maximum-weight spanning trees (Sec. 5.1), or uniform.
    Everything else is :func:`~boltzkit.variational.variational_log_z`'s default (damping 0.5).

    Attributes
    ----------
    trw_rho
        ``"optimized"`` (the paper's) or ``"uniform"`` (the uniform spanning-tree distribution).
    fw_steps
        Frank-Wolfe steps at most with ``"optimized"`` (the paper gives no number).
    n_starts
        Starts of mean-field and TAP (all 1/2, the layer-wise ordered corners, then random;
        ``None``: the library's default set); the best is kept.
    """

    trw_rho: str = "optimized"
    fw_steps: int = 30
    n_starts: int | None = None

    def options(self, method: str) -> dict[str, Any]:
        """The keyword arguments of :func:`variational_log_z` that these settings fix for ``method``."""
        if method == "trw":
            return (
                {"rho": self.trw_rho, "fw_steps": self.fw_steps}
                if self.trw_rho == "optimized"
                else {"rho": self.trw_rho}
            )
        if method in ("mean-field", "tap") and self.n_starts is not None:
            return {"n_starts": self.n_starts}
        return {}

    def trw_label(self) -> str:
        """How ``rho`` was chosen, for the reports."""
        if self.trw_rho == "optimized":
            return f"ρ optimised by conditional gradient (at most {self.fw_steps} Frank-Wolfe steps)"
        return "uniform ρ (the uniform distribution over spanning trees, no Frank-Wolfe steps)"


def with_variational_overrides(
    settings: VariationalSettings, *, fw_steps: int | None = None, trw_rho: str | None = None
) -> VariationalSettings:
    """``settings`` with the runner's ``fw_steps`` / ``trw_rho`` overrides applied."""
    if trw_rho is not None:
        if trw_rho not in ("optimized", "uniform"):
            raise BoltzkitError("unknown TRW rho", got=trw_rho, expected="'optimized' or 'uniform'")
        settings = replace(settings, trw_rho=trw_rho)
    if fw_steps is not None:
        if int(fw_steps) < 0:
            raise BoltzkitError("the number of Frank-Wolfe steps must be non-negative", got=fw_steps)
        settings = replace(settings, fw_steps=int(fw_steps))
    return settings


# -------------------------------------------------------------------------------------- plots
def plot_ais_runs(panels: Sequence[RunsRecord], path: Path, *, suptitle: str | None = None) -> bool:
    """S1 Fig. 3 / S2 Fig. 3 of a reproduction: :func:`boltzkit.plots.plot_logz_runs` of its
    models, or ``False`` (writing nothing) where matplotlib is missing, for a report goes on
    without its figures."""
    try:
        require_matplotlib()
    except BoltzkitError:
        return False
    plot_logz_runs(list(panels), path, title=suptitle)
    return True


# ------------------------------------------------------------------- comparison of methods
def _reference(rec: dict[str, Any]) -> tuple[float, str]:
    """The value the methods are compared with: the exact ``log Z`` when known, else AIS's."""
    exact = (rec.get("exact") or {}).get("log_z")
    return (float(exact), "exact") if exact is not None else (float(rec["ais"]["log_z"]), "AIS")


METHOD_CSV_COLUMNS = (
    "model",
    "layer_sizes",
    "method",
    "log_z",
    "minus_3sigma",
    "plus_3sigma",
    "bound",
    "converged",
    "iterations",
    "residual",
    "seconds",
    "reference",
    "minus_reference",
    "paper_log_z",
    "reliable",
)


def method_rows(
    records: Sequence[dict[str, Any]], paper: dict[str, dict[str, float]] | None = None
) -> list[dict[str, Any]]:
    """One row per model and ``log Z`` method (exact when known, AIS with its ``ln(Z_hat ± 3
    sigma_hat)`` band, then the variational methods): value, bound, convergence, iterations,
    residual, seconds, the difference from the reference (exact, else AIS), the paper's value
    (``paper[model][method]``) where it gives one, and AIS's verdict (``reliable``; its band holds
    only where that is true). The JSON and CSV form of the comparison."""
    rows: list[dict[str, Any]] = []
    for rec in records:
        ref, ref_name = _reference(rec)
        given = (paper or {}).get(rec["model"], {})
        base = {"model": rec["model"], "layer_sizes": "x".join(str(n) for n in rec["layer_sizes"])}
        entries: list[tuple[str, float | None, dict[str, Any]]] = []
        if ref_name == "exact":
            entries.append(("exact", ref, {"bound": "exact", "seconds": rec["exact"].get("seconds")}))
        a = rec["ais"]
        entries.append(
            (
                "ais",
                a["log_z"],
                {  # no band for an unreliable estimate
                    "minus_3sigma": None if a.get("reliable") is False else a["log_z_minus_3sigma"],
                    "plus_3sigma": None if a.get("reliable") is False else a["log_z_plus_3sigma"],
                    "bound": "none",
                    "seconds": a["seconds"],
                },
            )
        )
        for method, v in (rec.get("variational") or {}).items():
            keys = ("bound", "converged", "iterations", "residual", "seconds")
            entries.append((method, v["log_z"], {k: v[k] for k in keys}))
        for method, log_z, extra in entries:
            row = {**base, "method": method, "log_z": log_z}
            row.update({c: extra.get(c) for c in METHOD_CSV_COLUMNS[4:11]})
            diff = None if log_z is None else log_z - ref
            row.update(reference=ref_name, minus_reference=diff, paper_log_z=given.get(method))
            row["reliable"] = a.get("reliable") if method == "ais" else None  # AIS's verdict on its band
            rows.append(row)
    return rows


def methods_csv(rows: Sequence[dict[str, Any]], *, mode: str) -> str:
    """The comparison as CSV (``logz_methods.csv``), each row led by the run's ``mode``."""
    return csv_text(
        ("mode", *METHOD_CSV_COLUMNS), [[mode, *(r[c] for c in METHOD_CSV_COLUMNS)] for r in rows]
    )


def _signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def _sci(x: float | None) -> str:
    return DASH if x is None else f"{x:.1e}"


def _method_note(method: str, v: dict[str, Any]) -> str:
    if method == "trw":
        note = f"ρ {v.get('rho')}"
        if v.get("rho") == "optimized":
            note += f", {v.get('fw_steps')} Frank-Wolfe steps (stop: {v.get('fw_stop')})"
        gap = v.get("gap")
        if gap is not None:
            note += f"; certified gap {gap:.2g} nats"
        return note
    if method in ("mean-field", "tap"):
        return f"best of {v.get('n_starts')} starts"
    return "damped loopy BP" if method == "bethe" else ""


def _starts_label(n_starts: int | None) -> str:
    """The starts of mean-field and TAP, in words, for a report's notes."""
    which = "all 1/2, each layer all on or all off, then random"
    return f"the library's starts ({which})" if n_starts is None else f"{n_starts} starts ({which})"


def comparison_markdown(records: Sequence[dict[str, Any]], settings: VariationalSettings) -> list[str]:
    """The report's section comparing every ``log Z`` method per model: one table of values (each
    with its difference from the exact value, or from AIS where none is known), one of convergence
    and time, and how they were run."""
    if not any(rec.get("variational") for rec in records):
        return []
    exact_known = all(_reference(rec)[1] == "exact" for rec in records)
    versus = "the exact ln Z" if exact_known else "AIS ln Ẑ"
    lines = [
        "## ln Z by every method",
        "",
        f"In parentheses: the difference from {versus} (nats). Mean-field is a lower bound on ln Z "
        "whatever its convergence; TRW reports the certified bound (TRW objective plus its concavity "
        "gap), an upper bound on ln Z whether or not its solver converged; Bethe and TAP are neither. "
        "† : the method stopped before its tolerance (see below).",
        "",
        "| model | exact ln Z | AIS ln Ẑ (ln (Ẑ ± 3σ̂)) | mean-field (lower bound) | Bethe | TAP "
        "| TRW (upper bound) |",
        "|---|---|---|---|---|---|---|",
    ]
    for rec in records:
        ref, _ = _reference(rec)
        var = rec.get("variational") or {}
        a = rec["ais"]
        exact = (rec.get("exact") or {}).get("log_z")
        cells = [
            f"{rec['model']} ({' x '.join(str(n) for n in rec['layer_sizes'])})",
            fmt(exact),
            f"{fmt(a['log_z'])} ({band(a['log_z_minus_3sigma'], a['log_z_plus_3sigma'], a)})",
        ]
        for method in VARIATIONAL_METHODS:
            v = var.get(method)
            if v is None:
                cells.append(DASH)
                continue
            if v["log_z"] is None:
                cells.append(DASH + " (failed)")
                continue
            text = f"{fmt(v['log_z'])} ({_signed(v['log_z'] - ref)})"
            expected = {"mean-field": "lower", "trw": "upper"}.get(method, "none")
            if v["bound"] != expected:
                text += f" [bound: {v['bound']}]"
            cells.append(text + (" †" if not v["converged"] else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| model | method | bound | converged | iterations | final residual | seconds | how |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:
        for method, v in (rec.get("variational") or {}).items():
            lines.append(
                f"| {rec['model']} | {METHOD_LABELS.get(method, method)} | {v['bound']} "
                f"| {'yes' if v['converged'] else 'no'} | {v['iterations']} | {_sci(v['residual'])} "
                f"| {fmt(v['seconds'], 1)} | {_method_note(method, v)} |"
            )
    lines += [
        "",
        "Iterations: sweeps of the final run (TRW: message-passing sweeps of the final solve, 0 where "
        "Newton's method was warm-started from an earlier solve); residual: the largest change of a "
        "message (BP, TRW) or mean (mean-field, TAP) in the last sweep. Mean-field and TAP: "
        f"{_starts_label(settings.n_starts)}. TRW: {settings.trw_label()}"
        + (", from the uniform spanning-tree distribution" if settings.trw_rho == "optimized" else "")
        + ". All at the library's defaults otherwise (damping 0.5).",
        "",
    ]
    return lines


@dataclass(frozen=True)
class MethodsPanel:
    """One panel of the comparison plot: a model's reference value, AIS band and method values.

    ``reference_label`` is ``"exact ln Z"`` or ``"AIS ln Ẑ"``; ``ais`` is ``(ln Z_hat, ln(Z_hat
    - 3 sigma_hat), ln(Z_hat + 3 sigma_hat))`` (the lower end ``None`` where undefined);
    ``methods`` holds ``(label, log Z, bound, converged)``. An AIS estimate whose verdict is
    unreliable (``ais_reliable`` false) is drawn as a hollow point without its band.
    """

    title: str
    reference: float
    reference_label: str
    ais: tuple[float, float | None, float | None]
    methods: Sequence[tuple[str, float, str, bool]]
    ais_reliable: bool = True


def methods_panels(records: Sequence[dict[str, Any]]) -> list[MethodsPanel]:
    """The panels of :func:`plot_logz_methods` for the records of a table."""
    panels = []
    for rec in records:
        ref, ref_name = _reference(rec)
        a = rec["ais"]
        var = rec.get("variational") or {}
        panels.append(
            MethodsPanel(
                f"{rec['model']} ({' x '.join(str(n) for n in rec['layer_sizes'])})",
                ref,
                "exact ln Z" if ref_name == "exact" else "AIS ln Ẑ",
                (a["log_z"], a["log_z_minus_3sigma"], a["log_z_plus_3sigma"]),
                [
                    (METHOD_LABELS[m], var[m]["log_z"], var[m]["bound"], bool(var[m]["converged"]))
                    for m in VARIATIONAL_METHODS
                    if m in var and var[m]["log_z"] is not None
                ],
                ais_reliable=a.get("reliable") is not False,
            )
        )
    return panels


_BOUND_MARKERS = {"lower": "^", "upper": "v", "none": "o"}


def plot_logz_methods(panels: Sequence[MethodsPanel], path: Path, *, suptitle: str | None = None) -> bool:
    """Every ``log Z`` method per model, one panel per model: AIS as a point with its ``ln(Z_hat
    ± 3 sigma_hat)`` band (bar and shading), each variational method as a point marked by what it
    says about ``log Z`` (▲ lower bound, ▼ upper bound, ● neither; hollow where it did not
    converge) and labelled with its value, the reference (exact, else AIS) as a dashed line. The
    y-axis is the difference from the reference on a symmetric log scale (linear within ±1 nat), so
    that errors of a few nats and loose bounds of hundreds show on one panel. Returns ``False``
    (and writes nothing) when matplotlib is missing."""
    fig = optional_figure(4.2 * len(panels), 3.9) if panels else None
    if fig is None:
        return False
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        ref = panel.reference
        value, lo, hi = panel.ais
        mid = value - ref
        hi_d = (hi if hi is not None else value) - ref
        lo_d = (lo - ref) if lo is not None else mid - (hi_d - mid)
        if panel.ais_reliable:
            ax.axhspan(lo_d, hi_d, color="tab:blue", alpha=0.15, lw=0)
            ax.errorbar(
                [0], [mid], yerr=[[mid - lo_d], [hi_d - mid]], fmt="s", color="tab:blue", ms=5, capsize=3
            )
            if lo is None:
                ax.annotate("↓", (0, lo_d), ha="center", va="top", fontsize=9)
        else:  # an unreliable estimate supports no band
            ax.scatter([0], [mid], marker="s", s=30, color="none", edgecolors="tab:blue", zorder=3)
            ax.annotate(f"{UNRELIABLE} unreliable", (0, mid), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=7)  # fmt: skip
            lo_d = hi_d = mid
        ax.axhline(0.0, color="k", ls="--", lw=1)
        labels, ys = ["AIS"], [lo_d, hi_d]
        for i, (label, log_z, bound, converged) in enumerate(panel.methods, start=1):
            labels.append(label)
            d = log_z - ref
            ys.append(d)
            color = {"lower": "tab:green", "upper": "tab:red"}.get(bound, "tab:purple")
            ax.scatter(
                [i],
                [d],
                marker=_BOUND_MARKERS.get(bound, "o"),
                s=46,
                color=color if converged else "none",
                edgecolors=color,
                zorder=3,
            )
            offset = (0, 7) if d >= 0 else (0, -12)
            ax.annotate(
                f"{log_z:.1f}", (i, d), textcoords="offset points", xytext=offset, ha="center", fontsize=7
            )
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(min(-1.0, *ys) * 3.0, max(1.0, *ys) * 3.0)  # half a decade of room for labels
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:+g}" if y else "0"))
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.set_ylabel(f"ln Z − {panel.reference_label} (nats)")
        ax.set_title(f"{panel.title}\n{panel.reference_label} = {ref:.2f}", fontsize=9)
        ax.grid(axis="y", alpha=0.3, lw=0.5)
    ref_labels = sorted({p.reference_label for p in panels})
    handles = [
        Line2D([], [], color="k", ls="--", lw=1, label=" / ".join(ref_labels) + " (reference)"),
        Line2D([], [], ls="none", marker="s", color="tab:blue", label="AIS, ln (Ẑ ± 3σ̂) shaded"),
        Line2D([], [], ls="none", marker="^", color="tab:green", label="lower bound"),
        Line2D([], [], ls="none", marker="v", color="tab:red", label="upper bound"),
        Line2D([], [], ls="none", marker="o", color="tab:purple", label="no bound"),
        Line2D([], [], ls="none", marker="o", mfc="none", color="gray", label="not converged"),
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=len(handles) if len(panels) >= 3 else 3,
        fontsize=8,
        frameon=False,
    )
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    save_png(fig, path)
    return True


__all__ = [
    "AIS_CSV_COLUMNS",
    "DASH",
    "METHOD_CSV_COLUMNS",
    "METHOD_LABELS",
    "MethodsPanel",
    "RunsRecord",
    "Table",
    "UNRELIABLE",
    "VariationalSettings",
    "Verdicts",
    "ais_csv_values",
    "band",
    "cell",
    "comparison_markdown",
    "csv_text",
    "fmt",
    "log_z_cells",
    "machine_note",
    "method_rows",
    "methods_csv",
    "methods_panels",
    "pair",
    "plot_ais_runs",
    "plot_logz_methods",
    "recipe_label",
    "tables_csv",
    "with_variational_overrides",
]
