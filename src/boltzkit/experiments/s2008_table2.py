"""Salakhutdinov (2008), "S2", Table 2 and Fig. 4: RBM, SRBM and BM with 500 hidden units on MNIST.

S2 Sec. 5.2 trains an RBM (Sec. 4.1), a semi-restricted Boltzmann machine (SRBM, Sec. 4.2, Eq. 45)
and a fully connected Boltzmann machine (BM, Sec. 4.3, Eq. 48), each with 500 hidden units, on
binarized MNIST by SAP (Sec. 4.1.1; :mod:`boltzkit.experiments.s2008_common`), estimates their
``log Z`` by AIS with 100 runs along the 10,000-step schedule of Sec. 5.1 from the same base-rate
model (Eq. 43; for the BM the path runs over ``{v, h}``, Sec. 4.3.1), and reports the average
train and test log-probabilities (Table 2). For the RBM and SRBM the hidden units sum out, so
``log p*(v)`` is exact and only ``log Z`` is estimated; for the BM, ``log p*(v)`` is replaced by
the mean-field lower bound of Eq. 53 (``bound="lower"``), as in the paper. Fig. 4 shows
training images next to samples of each model, drawn by Gibbs sampling from random states of all
units (100,000 sweeps in the paper). The Bethe column comes from :mod:`boltzkit.variational`
(damped loopy BP), and a comparison of every ``log Z`` method per model (AIS with its band,
mean-field, Bethe, TAP and the tree-reweighted upper bound, for which S2 gives no numbers here:
"TRW did not provide any meaningful upper bounds") follows the table, with its plot
(``logz_methods.png``).

Every stage is one of the experiment engine's (:mod:`boltzkit.experiments.engine`) and writes into
``out_dir`` as it finishes (``models/``, ``checkpoints/``, ``results/<model>-ais.json`` and
``-log-prob.json``, ``variational/``, ``samples/<model>.npy``), so the same command resumes an
interrupted run, and a folder whose variational records are missing gains them alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from boltzkit._numerics import resolve_device
from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.experiments.engine import Context, log_prob_stage, record_log_z, samples_stage
from boltzkit.experiments.report import (
    AIS_CSV_COLUMNS,
    DASH,
    RunsRecord,
    Table,
    VariationalSettings,
    Verdicts,
    ais_csv_values,
    band,
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
from boltzkit.models import BoltzmannMachine
from boltzkit.plots.images import plot_image_panels
from boltzkit.samplers import sample

NAME = "salakhutdinov-2008-table2"


@dataclass(frozen=True)
class PaperRow:
    """One row of S2 Table 2 (100 AIS runs, 10,000 intermediate distributions), in nats.

    ``test_text``: the value the text of Sec. 5.2 gives where it differs from the table.
    """

    log_z: float
    sigma_band: tuple[float, float]
    three_sigma_band: tuple[float, float]
    test: float
    train: float
    bethe: float
    test_text: float | None = None


PAPER: dict[str, PaperRow] = {
    "RBM": PaperRow(390.76, (390.56, 390.92), (389.99, 391.19), -86.90, -84.67, 378.98),
    "SRBM": PaperRow(159.63, (159.42, 159.80), (158.82, 160.07), -86.06, -83.39, 148.11),
    "BM": PaperRow(220.17, (219.88, 220.40), (218.74, 220.74), -85.59, -82.96, 197.26, test_text=-85.68),
}

#: S2 Sec. 5.2, with the zoo models that stand for them in full mode: the RBM trained by S2's SAP
#: recipe to the letter (500 epochs), the SRBM and BM by 30 epochs of the same recipe started from
#: the zoo's best RBM (a GPU run; S2's 500 epochs from random weights would take hours there and days
#: on a CPU). ``--no-zoo`` trains all three here by S2's recipe.
MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("RBM", "rbm", "mnist", 500, zoo="s2008-rbm-500"),
    ModelSpec("SRBM", "srbm", "mnist", 500, zoo="s2008-srbm-500"),
    ModelSpec("BM", "bm", "mnist", 500, zoo="s2008-bm-500"),
)


@dataclass(frozen=True)
class Mode:
    """What a mode runs: training, the factor on S2's AIS step counts, the Fig. 4 chains and the
    variational methods' settings."""

    training: TrainingSettings
    betas_scale: float
    sample_chains: int
    sample_sweeps: int
    variational: VariationalSettings = VariationalSettings()


#: Minutes on 2 CPU cores: 10,000 training images, 5 epochs (500 updates) at a 20x larger
#: learning rate, a tenth of the paper's AIS steps, 1,000 Gibbs sweeps for the samples, and TRW at
#: the uniform ``rho`` (no Frank-Wolfe steps: on one CPU thread one step costs about 20 s for the
#: RBM, and the solve alone 12 s for the RBM and 40 s each for the SRBM and BM).
QUICK = Mode(
    TrainingSettings(epochs=5, lr=0.1, train_size=10_000),
    0.1,
    20,
    1_000,
    VariationalSettings(trw_rho="uniform"),
)
#: The paper's procedure with 100 instead of 500 epochs (``--epochs 500`` for the paper's), the
#: paper's AIS schedule and 100,000 sampling sweeps. Training takes about 3 h on one CPU thread
#: (RBM ~12 s, SRBM ~40 s, BM ~60 s an epoch) and about 35 min on an H100 (1.7, 8 and 11 s an
#: epoch); sampling about 20 min on a CPU thread. TRW with up to 10 Frank-Wolfe steps (a few
#: minutes per model on a CPU thread).
FULL = Mode(TrainingSettings(epochs=100), 1.0, 20, 100_000, VariationalSettings(fw_steps=10))


def _load_test(data_dir: str | None, test_size: int | None) -> torch.Tensor:
    """The MNIST test images, or ``test_size`` of them evenly spaced through the set (the test
    file is sorted by digit, so its first images are not a fair sample)."""
    x = load_dataset("mnist", split="test", data_dir=data_dir).x
    if test_size is None or int(test_size) >= x.shape[0]:
        return x
    return x[torch.linspace(0, x.shape[0] - 1, int(test_size)).round().long()]


def _estimate(
    ctx: Context,
    spec: ModelSpec,
    model: BoltzmannMachine,
    training: dict[str, Any],
    train_x: torch.Tensor,
    test_x: torch.Tensor,
    *,
    n_chains: int,
    betas: Any,
    schedule_label: str,
) -> dict[str, Any]:
    """AIS ``log Z`` (the engine's AIS stage, ``results/<model>-ais.json``) and the train and test
    log-probabilities that subtract it, lower bounds for a BM (``results/<model>-log-prob.json``),
    gathered into the model's row."""
    row = s2_ais_row(
        ctx, spec, model, training, train_x, n_chains=n_chains, betas=betas, schedule_label=schedule_label
    )
    splits = {"train": train_x, "test": test_x}
    lp = log_prob_stage(ctx, spec.slug, model, s2_config(spec, training), splits, record_log_z(row))
    row.update(train=lp["train"], test=lp["test"], bound=lp["test"]["bound"])
    row["seconds"]["log_prob"] = lp["seconds"]
    return row


def _samples(
    ctx: Context,
    spec: ModelSpec,
    model: BoltzmannMachine,
    training: dict[str, Any],
    *,
    n_chains: int,
    n_sweeps: int,
) -> dict[str, Any]:
    """Fig. 4: the visible states of ``n_chains`` Gibbs chains after ``n_sweeps`` sweeps from
    uniformly random states of all units (S2 Sec. 5.2); the engine's samples stage
    (``samples/<model>.npy``)."""
    config = {**s2_config(spec, training), "chains": n_chains, "sweeps": n_sweeps}

    def draw(generator: torch.Generator) -> torch.Tensor:
        state = sample(
            model, "gibbs", n_chains=n_chains, n_steps=n_sweeps, generator=generator, progress=ctx.progress
        )
        return state.visible

    visible, record = samples_stage(ctx, spec.slug, draw, config, seed=stage_seed(ctx.seed, "samples", spec))
    return {"model": spec.name, "visible": visible, "sweeps": n_sweeps, "seconds": record["seconds"]}


def plot_samples(
    train_x: torch.Tensor, samples: Sequence[dict[str, Any]], path: Path, *, sweeps: int
) -> bool:
    """S2 Fig. 4: training images beside the samples of each model (visible states, white = 1).
    Returns ``False`` when matplotlib is missing or the images are not 28 x 28."""
    if train_x.shape[1] != 784 or not samples:
        return False
    n = len(samples[0]["visible"])
    idx = np.linspace(0, train_x.shape[0] - 1, n).astype(int)
    panels = [("training images", train_x[idx].numpy())]
    panels += [(f"{s['model']} samples", np.asarray(s["visible"], dtype=float)) for s in samples]
    title = f"S2 Fig. 4: {sweeps:,} Gibbs sweeps from random states of all units"
    return plot_image_panels(panels, path, cols=5 if n <= 25 else 10, suptitle=title) is not None


#: CSV columns of ``table2.csv``: ours, then the paper's.
CSV_COLUMNS = (
    "model", "runs", *AIS_CSV_COLUMNS, "reliable", "test_log_prob", "train_log_prob", "bound", "bethe_log_z",
    "ais_seconds", "paper_log_z", "paper_log_z_minus_sigma", "paper_log_z_plus_sigma", "paper_log_z_minus_3sigma",
    "paper_log_z_plus_3sigma", "paper_test_log_prob", "paper_train_log_prob", "paper_bethe",
)  # fmt: skip


def _table(records: Sequence[dict[str, Any]], verdicts: Verdicts) -> Table:
    """Table 2, ours beside the paper's; the average log-probabilities carry the mark of the
    ``ln Ẑ`` they subtract."""
    table = Table(
        ("AIS runs", "model", "ln Ẑ", "ln (Ẑ ± σ̂)", "ln (Ẑ ± 3σ̂)", "test", "train", "log-prob is", "Bethe ln Z"),
        CSV_COLUMNS,
    )  # fmt: skip
    for rec in records:
        a, p = rec["ais"], PAPER.get(rec["model"])
        what = f"{rec['model']}: ln Ẑ"
        paper_test = DASH
        if p is not None:
            paper_test = fmt(p.test) + (f" (text: {fmt(p.test_text)})" if p.test_text is not None else "")
        test, train = rec["test"]["mean_log_prob"], rec["train"]["mean_log_prob"]
        table.add(
            [
                str(a["n_chains"]), rec["model"],
                *log_z_cells(a, p and (p.log_z, p.sigma_band, p.three_sigma_band), verdicts, what),
                cell(fmt(test) + verdicts.mark(what, a), paper_test),
                cell(fmt(train) + verdicts.mark(what, a), fmt(p.train) if p else DASH),
                "lower bound" if rec["bound"] == "lower" else "exact",  # "estimate": exact log p*, AIS ln Ẑ
                cell(fmt(rec.get("bethe_log_z")), fmt(p.bethe) if p else DASH),
            ],
            model=rec["model"], runs=a["n_chains"], **ais_csv_values(a), reliable=a.get("reliable"),
            test_log_prob=test, train_log_prob=train, bound=rec["bound"], bethe_log_z=rec.get("bethe_log_z"),
            ais_seconds=a["seconds"],
            **({"paper_log_z": p.log_z, "paper_log_z_minus_sigma": p.sigma_band[0],
                "paper_log_z_plus_sigma": p.sigma_band[1], "paper_log_z_minus_3sigma": p.three_sigma_band[0],
                "paper_log_z_plus_3sigma": p.three_sigma_band[1], "paper_test_log_prob": p.test,
                "paper_train_log_prob": p.train, "paper_bethe": p.bethe} if p else {}),
        )  # fmt: skip
    return table


def _markdown(
    table: Table,
    verdicts: Verdicts,
    records: Sequence[dict[str, Any]],
    samples: Sequence[dict[str, Any]],
    settings: TrainingSettings,
    variational: VariationalSettings,
    mode: Mode,
    schedule_label: str,
    n_chains: int,
    n_test: int,
    quick: bool,
    note: str,
) -> str:
    lines = [
        "# Salakhutdinov (2008), Table 2 — reproduced with boltzkit",
        "",
        f"Mode: {'quick' if quick else 'full'}. {note}",
        "",
        f"Each cell reads *ours / paper* (nats). AIS: {n_chains} runs, base-rate model of the training data "
        f"(S2 Eq. 43), {schedule_label}, one Gibbs sweep per beta (the paper: 100 runs, 10,000 steps). "
        "Average log-probabilities: exact log p*(v) minus ln Ẑ for the RBM and SRBM; for the BM the "
        "mean-field lower bound (S2 Eq. 53) minus ln Ẑ. Bethe: damped loopy BP (boltzkit.variational).",
        "",
        *table.markdown(),
    ]
    lines += [
        "",
        "Log-probability bands from the AIS uncertainty alone (ln(Ẑ ∓ 3σ̂) carried through; test set):",
        "",
    ]
    for rec in records:
        t = rec["test"]
        lines.append(
            f"- {rec['model']}: {band(t['mean_log_prob_minus_3sigma'], t['mean_log_prob_plus_3sigma'], rec['ais'])} "
            f"(sampling error of the test mean: ± {fmt(t['data_stderr'], 3)})"
        )
    lines += [*verdicts.lines(), "", *comparison_markdown(records, variational)]
    lines += [
        "S2 gives no TRW values for these models (“TRW did not provide any meaningful upper bounds”).",
        "",
        "## Time per stage (seconds, this machine)",
        "",
        "| model | training | AIS | train + test log-prob | mean-field + Bethe + TAP + TRW | samples |",
        "|---|---|---|---|---|---|",
    ]
    by_name = {s["model"]: s for s in samples}
    for rec in records:
        s = rec["seconds"]
        smp = by_name.get(rec["model"], {}).get("seconds")
        var_seconds = sum(v["seconds"] for v in (rec.get("variational") or {}).values())
        lines.append(
            f"| {rec['model']} | {fmt(s['train'], 1)} | {fmt(s['ais'], 1)} | {fmt(s['log_prob'], 1)} "
            f"| {fmt(var_seconds, 1)} | {fmt(smp, 1)} |"
        )
    lines += ["", "## Settings that differ from the paper", ""]
    zoo_records = [r for r in records if str(r["training"].get("source", "")).startswith("zoo:")]
    for rec in zoo_records:
        t = rec["training"]
        lines.append(f"- {rec['model']}: the zoo's `{t['source'][4:]}`, trained by `{t.get('command')}`.")
    if len(zoo_records) < len(records):
        diffs = training_differences(settings)
        lines.append(
            "- Training (SAP, S2 Sec. 5): " + "; ".join(diffs) + "."
            if diffs
            else "- Training: the paper's SAP procedure (S2 Sec. 5), 500 epochs."
        )
    if n_chains != 100:
        lines.append(f"- AIS runs: {n_chains} (the paper: 100).")
    if not schedule_label.startswith("S2 1,000/4,000/5,000"):
        lines.append(f"- AIS schedule: {schedule_label} (the paper: 1,000/4,000/5,000 = 10,000 steps).")
    if n_test != 10_000:
        lines.append(f"- Test set: {n_test:,} test images evenly spaced through the set (the paper: 10,000).")
    n_sweeps = samples[0]["sweeps"] if samples else mode.sample_sweeps
    if n_sweeps != 100_000:
        lines.append(f"- Fig. 4 samples: {n_sweeps:,} Gibbs sweeps from random states (the paper: 100,000).")
    lines += [
        "- Training data: our MNIST `train` + `valid` splits (the paper's 60,000 training images) with the "
        "fixed binarization of Salakhutdinov & Murray (2008); the paper binarized stochastically (its own "
        "draw). The train log-probability is over the training cases used.",
        "- The mean-field damping of the BM's positive phase is 0.5 (the paper says only 'damped'); the BM's "
        "lower bound uses damped mean-field (damping 0.5, tolerance 1e-6).",
        "- Base-rate smoothing: symmetric pseudo-counts (boltzkit.estimators.base_rate).",
        "- Fig. 4 shows the sampled binary visible states; the paper does not say whether it shows states or "
        "probabilities.",
        "- Bethe: the paper ran damped loopy BP without giving the damping or tolerance; ours: damping 0.5.",
        f"- TRW (not in the paper's table): {variational.trw_label()}"
        + (
            "; the paper optimised ρ by conditional gradient (Sec. 5.1)."
            if variational.trw_rho != "optimized"
            else "."
        ),
        "- Mean-field and TAP are not in the paper's table; they are in the comparison above.",
    ]
    return "\n".join(lines) + "\n"


def run_table2(
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
    test_size: int | None = None,
    sample_chains: int | None = None,
    sample_sweeps: int | None = None,
    fw_steps: int | None = None,
    trw_rho: str | None = None,
    use_zoo: bool = True,
) -> dict[str, Any]:
    """Run S2 Table 2 and Fig. 4 and write ``table2.md``, ``table2.csv``, ``table2.json``, the
    comparison of ``log Z`` methods ``logz_methods.csv``, and the plots ``fig4_samples.png``,
    ``fig3_bottom_ais_runs.png`` and ``logz_methods.png`` (when matplotlib is installed) into
    ``out_dir``.

    Parameters
    ----------
    out_dir
        Output folder; models, checkpoints, per-model results, variational values and samples go
        to its ``models/``, ``checkpoints/``, ``results/``, ``variational/`` and ``samples/`` and
        are reused when run again.
    quick
        The first 10,000 training images, 5 epochs at learning rate 0.1, a tenth of the paper's
        AIS steps, 1,000 sampling sweeps and TRW at the uniform ``rho`` (minutes on 2 CPU cores);
        else 100 epochs at the paper's 0.005 on all 60,000 images, the paper's schedule, 100,000
        sweeps and TRW with ``rho`` optimised by up to 10 Frank-Wolfe steps.
    data_dir, seed, device, n_chains, betas, progress
        As for :func:`boltzkit.experiments.s2008_table1.run_table1` (``"paper"`` betas: S2's
        schedule scaled by the mode).
    epochs, train_size
        Override the mode's training epochs and number of training cases.
    models
        Replace the paper's three models (:data:`MODELS`), e.g. by smaller ones in tests.
    test_size
        Use only ``test_size`` test images, evenly spaced through the set (it is sorted by digit).
    sample_chains, sample_sweeps
        Override the number of Fig. 4 chains per model and their Gibbs sweeps.
    fw_steps, trw_rho
        Override the mode's Frank-Wolfe steps of TRW / its ``rho`` (``"optimized"`` or
        ``"uniform"``).
    use_zoo
        Full mode without ``epochs`` / ``train_size``: take each model from the zoo where it holds
        the one that stands for it (:data:`MODELS`); the report names them and their commands.

    Returns
    -------
    dict
        JSON-ready summary: per-model records (without log-weights), the comparison rows
        (``logz_methods``), ``files``, ``report``.
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = resolve_device(device)
    mode = QUICK if quick else FULL
    settings = with_overrides(mode.training, epochs=epochs, train_size=train_size)
    variational = with_variational_overrides(mode.variational, fw_steps=fw_steps, trw_rho=trw_rho)
    n_sample_chains = mode.sample_chains if sample_chains is None else int(sample_chains)
    n_sweeps = mode.sample_sweeps if sample_sweeps is None else int(sample_sweeps)
    schedule, schedule_label = resolve_schedule(betas, mode.betas_scale)
    test_x = _load_test(data_dir, test_size)
    records, samples = [], []
    train_x = None
    ctx = Context(out_dir=out_dir, seed=seed, device=dev, progress=progress)
    from_zoo = use_zoo and not quick and epochs is None and train_size is None
    for spec in MODELS if models is None else tuple(models):
        train_x = load_training_data(spec, data_dir=data_dir, seed=seed, train_size=settings.train_size)
        model, training = train_or_load(
            spec,
            settings,
            train_x,
            out_dir,
            seed=stage_seed(seed, "train", spec),
            device=dev,
            progress=progress,
            use_zoo=from_zoo,
        )
        rec = _estimate(
            ctx, spec, model, training, train_x, test_x, n_chains=n_chains, betas=schedule,
            schedule_label=schedule_label,
        )  # fmt: skip
        values = variational_stage(ctx, spec, model, training, variational)
        records.append(with_variational(rec, values))
        samples.append(_samples(ctx, spec, model, training, n_chains=n_sample_chains, n_sweeps=n_sweeps))
    seconds = time.perf_counter() - t0
    note = (
        f"{machine_note(dev)}; this invocation took {seconds:.0f} s "
        "(stages reused from earlier runs keep their times)."
    )
    verdicts = Verdicts()
    table = _table(records, verdicts)
    md = _markdown(
        table,
        verdicts,
        records,
        samples,
        settings,
        variational,
        mode,
        schedule_label,
        n_chains,
        int(test_x.shape[0]),
        quick,
        note,
    )
    atomic_write_text(out_dir / "table2.md", md)
    atomic_write_text(out_dir / "table2.csv", table.csv(mode="quick" if quick else "full"))
    rows = method_rows(records, {k: {"ais": v.log_z, "bethe": v.bethe} for k, v in PAPER.items()})
    atomic_write_text(out_dir / "logz_methods.csv", methods_csv(rows, mode="quick" if quick else "full"))
    summary: dict[str, Any] = {
        "experiment": NAME,
        "quick": quick,
        "training": asdict(settings),
        "schedule": schedule_label,
        "n_chains": n_chains,
        "samples": {"chains": n_sample_chains, "sweeps": n_sweeps},
        "variational": asdict(variational),
        "paper": {k: asdict(v) for k, v in PAPER.items()},
        "models": [{k: v for k, v in r.items() if k != "log_weights"} for r in records],
        "logz_methods": rows,
        "seconds": seconds,
    }
    save_json(summary, out_dir / "table2.json")
    files = ["table2.md", "table2.csv", "table2.json", "logz_methods.csv"]
    if train_x is not None and plot_samples(train_x, samples, out_dir / "fig4_samples.png", sweeps=n_sweeps):
        files.append("fig4_samples.png")
    panels = [
        RunsRecord(
            f"{r['model']} ({' x '.join(str(n) for n in r['layer_sizes'])})",
            r["log_weights"],
            r["log_z_start"],
            reliable=r["ais"].get("reliable"),
        )
        for r in records
    ]
    if plot_ais_runs(
        panels, out_dir / "fig3_bottom_ais_runs.png", suptitle=f"S2 Fig. 3 (bottom): AIS, {schedule_label}"
    ):
        files.append("fig3_bottom_ais_runs.png")
    if plot_logz_methods(
        methods_panels(records),
        out_dir / "logz_methods.png",
        suptitle="S2 Table 2 models: ln Z by every method",
    ):
        files.append("logz_methods.png")
    summary["files"] = files
    summary["report"] = "table2.md"
    return summary


__all__ = ["FULL", "MODELS", "NAME", "PAPER", "QUICK", "Mode", "PaperRow", "plot_samples", "run_table2"]
