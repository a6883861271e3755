"""Salakhutdinov (2008), "S2", Table 1 and Fig. 3 (top row): AIS on toy models with exact ``log Z``.

S2 Sec. 5.1 trains three toy models whose partition functions can be computed exactly: an RBM
with 784 visible and 25 hidden units on binarized MNIST, a semi-restricted Boltzmann machine
(SRBM, Sec. 4.2, Eq. 45) with 16 visible and 500 hidden units and a general Boltzmann machine
(BM, Sec. 4.3, Eq. 48) with 16 visible and 5 hidden units, both on 4 x 4 patches of MNIST. All are
trained by SAP (Sec. 4.1.1; :mod:`boltzkit.experiments.s2008_common`). For each, the experiment
computes the exact ``log Z`` (enumerating 2^25 hidden states, 2^16 visible states, 2^21 joint
states), AIS estimates with 100 runs (and the first 10 of them) along S2's 10,000-step schedule
from the base-rate model, and plots ``log Z_hat`` against the number of runs (Fig. 3, top row).
The Bethe and TRW columns come from :mod:`boltzkit.variational`: damped loopy BP, and the certified
tree-reweighted upper bound with ``rho`` optimised by conditional gradient over maximum-weight
spanning trees (S2 Sec. 5.1). A comparison of every ``log Z`` method per model (exact, AIS with its
band, mean-field, Bethe, TAP, TRW) follows the table, with its plot (``logz_methods.png``).

Every stage is one of the experiment engine's (:mod:`boltzkit.experiments.engine`) and writes into
``out_dir`` as it finishes (``models/``, ``checkpoints/``, ``results/<model>-exact.json`` and
``-ais.json``, ``variational/``), so the same command resumes an interrupted run, a finished one
only rewrites the report, and a folder whose variational records are missing gains them alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from boltzkit._numerics import resolve_device
from boltzkit.atomic import atomic_write_text
from boltzkit.experiments.engine import Context, exact_stage
from boltzkit.experiments.report import (
    AIS_CSV_COLUMNS,
    DASH,
    RunsRecord,
    Table,
    VariationalSettings,
    Verdicts,
    ais_csv_values,
    cell,
    comparison_markdown,
    fmt,
    log_z_cells,
    machine_note,
    method_rows,
    methods_csv,
    methods_panels,
    plot_ais_runs,
    plot_logz_methods,
    with_variational_overrides,
)
from boltzkit.experiments.s2008_common import (
    PAPER_BETAS,
    PAPER_TRAINING,
    ModelSpec,
    TrainingSettings,
    load_training_data,
    resolve_schedule,
    s2_ais_row,
    s2_config,
    train_or_load,
    training_differences,
    with_overrides,
    with_variational,
)
from boltzkit.experiments.s2008_common import (
    s2_stage_seed as stage_seed,
)
from boltzkit.experiments.s2008_common import (
    s2_variational as variational_stage,
)
from boltzkit.jsonio import save_json

NAME = "salakhutdinov-2008-table1"


@dataclass(frozen=True)
class PaperRow:
    """One row of S2 Table 1 (100 AIS runs, 10,000 intermediate distributions), in nats."""

    true_log_z: float
    log_z: float
    sigma_band: tuple[float, float]
    three_sigma_band: tuple[float, float]
    bethe: float
    trw: float


PAPER: dict[str, PaperRow] = {
    "RBM": PaperRow(354.88, 354.99, (354.68, 355.24), (353.28, 355.59), 350.75, 1205.26),
    "SRBM": PaperRow(116.72, 116.73, (116.68, 116.76), (116.60, 116.84), 115.90, 146.30),
    "BM": PaperRow(8.49, 8.49, (8.48, 8.51), (8.45, 8.53), 7.67, 20.28),
}

#: The AIS runs behind S2 Table 1's AIS columns (its "Runs" column).
PAPER_RUNS = 100

#: S2 Sec. 5.1.
MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("RBM", "rbm", "mnist", 25),
    ModelSpec("SRBM", "srbm", "mnist-patches", 500),
    ModelSpec("BM", "bm", "mnist-patches", 5),
)


@dataclass(frozen=True)
class Mode:
    """What a mode runs: the training settings, the factor on S2's AIS step counts and the
    variational methods' settings."""

    training: TrainingSettings
    betas_scale: float
    variational: VariationalSettings = VariationalSettings()


#: Minutes on 2 CPU cores: 10 epochs at a 10x larger learning rate; the paper's AIS schedule,
#: which is cheap for these models; TRW with 30 Frank-Wolfe steps (about 40 s for the RBM on one
#: CPU thread, 1 s for the others; the mean-field, Bethe and TAP values take well under a second).
QUICK = Mode(
    TrainingSettings(epochs=10, lr=0.05), betas_scale=1.0, variational=VariationalSettings(fw_steps=30)
)
#: The paper's procedure: about 50 minutes of training on one CPU thread (RBM 2.6 s, SRBM 2.0 s,
#: BM 1.3 s an epoch), about 90 on an H100 (these small models are launch-bound on a GPU); TRW with
#: up to 100 Frank-Wolfe steps (about 2 minutes for the RBM).
FULL = Mode(PAPER_TRAINING, betas_scale=1.0, variational=VariationalSettings(fw_steps=100))
#: Largest number of units :func:`exact_log_z` may enumerate (the RBM's 25 hidden units).
EXACT_MAX_BITS = 25


def _estimate(
    spec: ModelSpec,
    settings: TrainingSettings,
    variational: VariationalSettings,
    ctx: Context,
    *,
    data_dir: str | None,
    n_chains: int,
    betas: Any,
    schedule_label: str,
) -> dict[str, Any]:
    """Train (or load) one model, then the engine's stages: exact ``log Z``
    (``results/<model>-exact.json``), AIS (``results/<model>-ais.json``) and the variational values
    (``variational/``); returns the model's row with the Bethe / TRW columns added."""
    train_x = load_training_data(spec, data_dir=data_dir, seed=ctx.seed, train_size=settings.train_size)
    model, training = train_or_load(
        spec, settings, train_x, ctx.out_dir, seed=stage_seed(ctx.seed, "train", spec), device=ctx.device,
        progress=ctx.progress,
    )  # fmt: skip
    rec = s2_ais_row(
        ctx, spec, model, training, train_x, n_chains=n_chains, betas=betas, schedule_label=schedule_label
    )
    exact = exact_stage(ctx, spec.slug, model, s2_config(spec, training), max_bits=EXACT_MAX_BITS)
    rec["exact"] = {**{k: v for k, v in exact.items() if k != "config"}, "max_bits": EXACT_MAX_BITS}
    rec["seconds"]["exact"] = exact["seconds"]
    values = variational_stage(ctx, spec, model, training, variational)
    return with_variational(rec, values)


def _ais_row(rec: dict[str, Any], runs: int) -> dict[str, Any] | None:
    return rec["ais"] if runs == rec["ais"]["n_chains"] else rec.get(f"ais_{runs}")


#: CSV columns of ``table1.csv``: ours, then the paper's.
CSV_COLUMNS = (
    "model", "runs", "true_log_z", *AIS_CSV_COLUMNS, "ais_seconds", "reliable", "bethe_log_z", "trw_log_z",
    "paper_true_log_z", "paper_log_z", "paper_log_z_minus_sigma", "paper_log_z_plus_sigma",
    "paper_log_z_minus_3sigma", "paper_log_z_plus_3sigma", "paper_bethe", "paper_trw",
)  # fmt: skip


def _table(records: Sequence[dict[str, Any]], n_chains: int, verdicts: Verdicts) -> Table:
    """Table 1, ours beside the paper's, one row per model for the first 10 AIS runs and for all
    ``n_chains`` (the paper's AIS columns only beside a row of its :data:`PAPER_RUNS` runs)."""
    table = Table(
        ("AIS runs", "model", "true ln Z", "ln Ẑ", "ln (Ẑ ± σ̂)", "ln (Ẑ ± 3σ̂)", "ln Ẑ − ln Z", "Bethe ln Z",
         "TRW ln Z"),
        CSV_COLUMNS,
    )  # fmt: skip
    for runs in sorted({10, n_chains} if n_chains > 10 else {n_chains}):
        for rec in records:
            a = _ais_row(rec, runs)
            if a is None:
                continue
            p = PAPER.get(rec["model"])
            full = p if runs == PAPER_RUNS else None  # the paper's AIS columns: its 100 runs, only beside 100
            true = rec["exact"]["log_z"]
            table.add(
                [
                    str(runs), rec["model"], cell(fmt(true), fmt(p.true_log_z) if p else DASH),
                    *log_z_cells(a, full and (full.log_z, full.sigma_band, full.three_sigma_band), verdicts,
                                 f"{rec['model']}, ln Ẑ from {runs} runs"),
                    cell(fmt(a["log_z"] - true, 3), fmt(full.log_z - full.true_log_z, 2) if full else DASH),
                    cell(fmt(rec.get("bethe_log_z")), fmt(p.bethe) if p else DASH),
                    cell(fmt(rec.get("trw_log_z")), fmt(p.trw) if p else DASH),
                ],
                model=rec["model"], runs=runs, true_log_z=true, **ais_csv_values(a),
                ais_seconds=a["seconds"], reliable=a.get("reliable"), bethe_log_z=rec.get("bethe_log_z"),
                trw_log_z=rec.get("trw_log_z"), paper_true_log_z=p and p.true_log_z, paper_bethe=p and p.bethe,
                paper_trw=p and p.trw,
                **({"paper_log_z": full.log_z, "paper_log_z_minus_sigma": full.sigma_band[0],
                    "paper_log_z_plus_sigma": full.sigma_band[1], "paper_log_z_minus_3sigma": full.three_sigma_band[0],
                    "paper_log_z_plus_3sigma": full.three_sigma_band[1]} if full else {}),
            )  # fmt: skip
    return table


def _markdown(
    table: Table,
    verdicts: Verdicts,
    records: Sequence[dict[str, Any]],
    settings: TrainingSettings,
    variational: VariationalSettings,
    schedule_label: str,
    n_chains: int,
    quick: bool,
    note: str,
) -> str:
    lines = [
        "# Salakhutdinov (2008), Table 1 — reproduced with boltzkit",
        "",
        f"Mode: {'quick' if quick else 'full'}. {note}",
        "",
        "Each cell reads *ours / paper* (nats). The paper's values (100 AIS runs) stand beside our "
        f"estimate from all {n_chains} runs; the 10-run row pools the first 10 of them. AIS: base-rate "
        f"model of the training data (S2 Eq. 43), {schedule_label}, one Gibbs sweep per beta. Bethe: "
        "damped loopy BP; TRW: the certified tree-reweighted upper bound, "
        f"{variational.trw_label()} (boltzkit.variational). The variational columns do not depend on "
        "the AIS runs: they repeat in the 10-run rows.",
        "",
        *table.markdown(),
        *verdicts.lines(),
    ]
    lines += ["", *comparison_markdown(records, variational)]
    lines += [
        "## Time per stage (seconds, this machine)",
        "",
        "| model | layer sizes | training | exact ln Z | AIS | mean-field + Bethe + TAP + TRW |",
        "|---|---|---|---|---|---|",
    ]
    for rec in records:
        s = rec["seconds"]
        sizes = " x ".join(str(n) for n in rec["layer_sizes"])
        var_seconds = sum(v["seconds"] for v in (rec.get("variational") or {}).values())
        lines.append(
            f"| {rec['model']} | {sizes} | {fmt(s['train'], 1)} | {fmt(s['exact'], 1)} | {fmt(s['ais'], 1)} "
            f"| {fmt(var_seconds, 1)} |"
        )
    lines += ["", "## Settings that differ from the paper", ""]
    diffs = training_differences(settings)
    if diffs:
        lines.append("- Training (SAP, S2 Sec. 5): " + "; ".join(diffs) + ".")
    else:
        lines.append("- Training: the paper's SAP procedure (S2 Sec. 5), 500 epochs.")
    if n_chains != 100:
        lines.append(f"- AIS runs: {n_chains} (the paper: 100).")
    if not schedule_label.startswith("S2 1,000/4,000/5,000"):
        lines.append(f"- AIS schedule: {schedule_label} (the paper: 1,000/4,000/5,000 = 10,000 steps).")
    lines += [
        "- Training data: our MNIST `train` + `valid` splits (60,000 images, the paper's training set size) "
        "with the fixed binarization of Salakhutdinov & Murray (2008); the paper binarized stochastically "
        "(its own draw). The 4 x 4 patches sit at random positions (seeded), one per training image.",
        "- The mean-field damping of the BM's positive phase is 0.5 (the paper says only 'damped').",
        "- Base-rate smoothing: symmetric pseudo-counts (boltzkit.estimators.base_rate); the paper does not "
        "give its smoothing.",
        "- The models are ours, so their log Z differ from the paper's; what compares is how close AIS lands "
        "to the exact value and how wide its error bars are.",
        "- Bethe and TRW: the paper ran damped loopy BP and TRW message passing without giving the "
        "damping, tolerances or number of conditional-gradient steps; ours: damping 0.5, "
        f"{variational.trw_label()}. Our TRW value is the certified bound (TRW objective plus its "
        "concavity gap), an upper bound even where the solver stopped early.",
        "- Mean-field and TAP are not in the paper's table; they are in the comparison above.",
    ]
    if quick:
        lines.append("- Quick mode: few epochs at a larger learning rate (see above).")
    return "\n".join(lines) + "\n"


def run_table1(
    *,
    out_dir: Path,
    quick: bool = False,
    data_dir: str | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    n_chains: int = 100,
    betas: str | int | torch.Tensor = PAPER_BETAS,
    epochs: int | None = None,
    progress: bool = True,
    models: Sequence[ModelSpec] | None = None,
    train_size: int | None = None,
    fw_steps: int | None = None,
    trw_rho: str | None = None,
) -> dict[str, Any]:
    """Run S2 Table 1 and write ``table1.md``, ``table1.csv``, ``table1.json``, the comparison of
    ``log Z`` methods ``logz_methods.csv``, and the plots ``fig3_top_ais_runs.png`` and
    ``logz_methods.png`` (when matplotlib is installed) into ``out_dir``.

    Parameters
    ----------
    out_dir
        Output folder; models, checkpoints, per-model results and variational values go to its
        ``models/``, ``checkpoints/``, ``results/`` and ``variational/``, and are reused when the
        command is run again.
    quick
        10 training epochs at learning rate 0.05 instead of the paper's 500 at 0.005 (minutes on 2
        CPU cores) and 30 instead of 100 Frank-Wolfe steps for TRW; the AIS schedule is the
        paper's in both modes.
    data_dir
        Where the MNIST files are (default: ``BOLTZKIT_DATA_DIR`` or the cache).
    seed
        Base seed of patch positions, training, and AIS (each stage and model derives its own).
    device
        ``"auto"``, ``"cpu"``, ``"cuda"``.
    n_chains
        AIS runs per model (the paper: 100).
    betas
        ``"paper"``: S2's 1,000/4,000/5,000 steps (Sec. 5.1); ``"s2:SCALE"`` scales its step
        counts; else any schedule :func:`~boltzkit.estimators.ais.ais` accepts.
    epochs, train_size
        Override the mode's training epochs / use only the first ``train_size`` training cases.
    progress
        Progress bars on stderr.
    models
        Replace the paper's three models (:data:`MODELS`), e.g. by smaller ones in tests.
    fw_steps, trw_rho
        Override the mode's Frank-Wolfe steps of TRW / its ``rho`` (``"optimized"`` or
        ``"uniform"``).

    Returns
    -------
    dict
        JSON-ready summary: the per-model records (without log-weights), the comparison rows
        (``logz_methods``), ``files`` and ``report``.
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = resolve_device(device)
    mode = QUICK if quick else FULL
    settings = with_overrides(mode.training, epochs=epochs, train_size=train_size)
    variational = with_variational_overrides(mode.variational, fw_steps=fw_steps, trw_rho=trw_rho)
    schedule, schedule_label = resolve_schedule(betas, mode.betas_scale)
    ctx = Context(out_dir=out_dir, seed=seed, device=dev, progress=progress)
    records = [
        _estimate(
            spec,
            settings,
            variational,
            ctx,
            data_dir=data_dir,
            n_chains=n_chains,
            betas=schedule,
            schedule_label=schedule_label,
        )  # fmt: skip
        for spec in (MODELS if models is None else models)
    ]
    seconds = time.perf_counter() - t0
    note = (
        f"{machine_note(dev)}; this invocation took {seconds:.0f} s "
        "(stages reused from earlier runs keep their times)."
    )
    verdicts = Verdicts()
    table = _table(records, n_chains, verdicts)
    atomic_write_text(
        out_dir / "table1.md",
        _markdown(table, verdicts, records, settings, variational, schedule_label, n_chains, quick, note),
    )
    atomic_write_text(out_dir / "table1.csv", table.csv(mode="quick" if quick else "full"))
    paper_values = {
        k: {"exact": v.true_log_z, "ais": v.log_z, "bethe": v.bethe, "trw": v.trw} for k, v in PAPER.items()
    }
    rows = method_rows(records, paper_values)
    atomic_write_text(out_dir / "logz_methods.csv", methods_csv(rows, mode="quick" if quick else "full"))
    summary: dict[str, Any] = {
        "experiment": NAME,
        "quick": quick,
        "training": asdict(settings),
        "variational": asdict(variational),
        "schedule": schedule_label,
        "n_chains": n_chains,
        "paper": {k: asdict(v) for k, v in PAPER.items()},
        "models": [{k: v for k, v in r.items() if k != "log_weights"} for r in records],
        "logz_methods": rows,
        "seconds": seconds,
    }
    save_json(summary, out_dir / "table1.json")
    panels = [
        RunsRecord(
            f"{r['model']} ({' x '.join(str(n) for n in r['layer_sizes'])})",
            r["log_weights"],
            r["log_z_start"],
            exact=r["exact"]["log_z"],
            reliable=r["ais"].get("reliable"),
        )
        for r in records
    ]
    plotted = plot_ais_runs(
        panels, out_dir / "fig3_top_ais_runs.png", suptitle=f"S2 Fig. 3 (top): AIS, {schedule_label}"
    )
    files = ["table1.md", "table1.csv", "table1.json", "logz_methods.csv"]
    if plotted:
        files.append("fig3_top_ais_runs.png")
    if plot_logz_methods(
        methods_panels(records),
        out_dir / "logz_methods.png",
        suptitle="S2 Table 1 models: ln Z by every method",
    ):
        files.append("logz_methods.png")
    summary["files"] = files
    summary["report"] = "table1.md"
    return summary


__all__ = ["FULL", "MODELS", "NAME", "PAPER", "QUICK", "Mode", "PaperRow", "run_table1"]
