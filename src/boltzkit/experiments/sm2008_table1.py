"""Salakhutdinov & Murray (2008), "S1", Table 1 and Fig. 3: AIS on MNIST RBMs beside exact values.

The spec: six RBMs trained by the S1 recipes (:mod:`boltzkit.learning.recipes`: ``sm2008-cd1``,
``sm2008-cd3``, ``sm2008-cd25``) on the 60,000 training images (MNIST train + valid, S1 Sec. 5),
``log Z`` by AIS with 10 and 100 runs of S1's schedule (500 / 4,000 / 10,000 betas on [0, 0.5] /
[0.5, 0.9] / [0.9, 1], Sec. 5.1) from a base-rate model fitted to the training data (Eq. 18),
exact ``log Z`` where the 20 or 25 hidden units can be enumerated, the 500-unit models' AIS
confirmed by reverse AIS from the forward run's final states (the sandwich), and the mean train
and test log-probabilities with the AIS uncertainty carried through. Also the ratio
``log Z_CD1(20) / Z_CD1(25)`` with 10,000 uniform betas (Sec. 5.1).

CD25(500) is trained by the recipe ``sm2008-cd25``, whose negative phase ends in a sample of v
rather than in ``rbm.m``'s mean p(v | h): the mean reconstruction, which S1 followed, leaves CD25's
models with spurious modes. Full mode adds a seventh row beside it, CD25(500) with that mean
reconstruction (the recipe ``sm2008-cd25-mean``), to show what the fix is worth.

Full mode takes each trained model from the zoo when it holds it (``sm2008-cd1-25`` and so on,
trained earlier at full size by the same recipe), so a rerun never retrains; otherwise it trains
(resumable, every epoch checkpointed). Every stage is the engine's
(:mod:`boltzkit.experiments.engine`): rerunning the command resumes where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from boltzkit._numerics import resolve_device
from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.estimators import estimate_log_ratio
from boltzkit.experiments.engine import (
    Context,
    ais_stage,
    exact_stage,
    log_prob_stage,
    record_log_z,
    stage,
    train_stage,
)
from boltzkit.experiments.report import (
    AIS_CSV_COLUMNS,
    DASH,
    RunsRecord,
    Table,
    Verdicts,
    ais_csv_values,
    band,
    cell,
    fmt,
    log_z_cells,
    machine_note,
    pair,
    plot_ais_runs,
    recipe_label,
)
from boltzkit.jsonio import save_json
from boltzkit.learning.recipes import RECIPES

NAME = "salakhutdinov-murray-2008-table1"


@dataclass(frozen=True)
class PaperRow:
    """One row of S1 Table 1 (100 runs; ``None`` where the paper has no value)."""

    true_log_z: float | None
    log_z: float
    sigma_band: tuple[float, float]
    three_sigma_band: tuple[float | None, float]
    minutes: float
    test_true: float | None
    test_estimate: float
    train_true: float | None
    train_estimate: float


@dataclass(frozen=True)
class ModelSpec:
    """A model of the table: its name, hidden units, recipe, zoo name, whether quick mode runs it,
    and the S1 row it stands beside (``paper_row``; its own name by default)."""

    name: str
    n_hidden: int
    recipe: str
    zoo: str
    quick: bool = True
    paper_row: str | None = None

    @property
    def paper(self) -> str:
        """The key of its row in :data:`PAPER`."""
        return self.paper_row or self.name

    @property
    def slug(self) -> str:
        return self.name.lower().replace("(", "_").replace(")", "").replace(" ", "-")


PAPER: dict[str, PaperRow] = {
    "CD1(25)": PaperRow(255.41, 256.52, (255.00, 257.10), (None, 257.73), 3.3, -151.57, -152.68, -152.35, -153.46),
    "CD3(25)": PaperRow(307.47, 307.63, (307.44, 307.79), (306.91, 308.05), 3.3, -143.03, -143.20, -143.94, -144.11),
    "CD1(20)": PaperRow(279.59, 279.57, (279.43, 279.68), (279.12, 279.87), 3.1, -164.52, -164.50, -164.89, -164.87),
    "CD1(500)": PaperRow(None, 350.15, (350.04, 350.25), (349.77, 350.42), 10.4, None, -125.53, None, -122.86),
    "CD3(500)": PaperRow(None, 280.09, (279.99, 280.17), (279.76, 280.33), 10.4, None, -105.50, None, -102.81),
    "CD25(500)": PaperRow(None, 451.28, (451.19, 451.37), (450.97, 451.52), 10.4, None, -86.34, None, -83.10),
}  # fmt: skip
#: The AIS runs behind S1 Table 1's AIS columns (its "Runs" column).
PAPER_RUNS = 100
#: S1 Sec. 5.1: ln Z_CD1(20) / Z_CD1(25) with 100 runs and 10,000 uniform betas.
RATIO_BETAS = 10_001
#: S1 Sec. 5.1's ratio as its text gives it: true, estimate and 3-sigma band (its Table 1 gives
#: ln Z_CD1(20) - ln Z_CD1(25) = +24.18: the text's sign is that of Z_CD1(25) / Z_CD1(20)).
PAPER_RATIO = {"true": -24.18, "estimate": -24.49, "three_sigma_band": (-24.93, -24.19)}

MODELS = (
    ModelSpec("CD1(25)", 25, "sm2008-cd1", "sm2008-cd1-25"),
    ModelSpec("CD3(25)", 25, "sm2008-cd3", "sm2008-cd3-25"),
    ModelSpec("CD1(20)", 20, "sm2008-cd1", "sm2008-cd1-20"),
    ModelSpec("CD1(500)", 500, "sm2008-cd1", "sm2008-cd1-500", quick=False),
    ModelSpec("CD3(500)", 500, "sm2008-cd3", "sm2008-cd3-500", quick=False),
    ModelSpec("CD25(500)", 500, "sm2008-cd25", "sm2008-cd25-500", quick=False),
    # S1's own reconstruction, rbm.m's mean p(v | h) (the recipe ``sm2008-cd25-mean``), beside the
    # CD25(500) row: what the sampled reconstruction of ``sm2008-cd25`` is worth.
    ModelSpec(
        "CD25(500) mean",
        500,
        "sm2008-cd25-mean",
        "sm2008-cd25-500-mean",
        quick=False,
        paper_row="CD25(500)",
    ),
)
#: Quick mode: the three small models, 3 epochs each on the 50,000 training images.
QUICK_EPOCHS = 3
#: Enumerate log Z up to this many hidden units.
EXACT_MAX_BITS = 25


def _model_record(
    ctx: Context, spec: ModelSpec, data: dict[str, torch.Tensor], settings: dict[str, Any]
) -> tuple[dict[str, Any], Any]:
    """Train (or take from the zoo), exact log Z, AIS (and reverse AIS), log-probabilities; the
    record and the model."""
    recipe = RECIPES[spec.recipe]
    if settings["epochs"] is not None:
        recipe = recipe.replace(epochs=settings["epochs"])
    model, training = train_stage(
        ctx, spec.slug, recipe=recipe, kind="rbm", hidden=spec.n_hidden, train_x=data["train"],
        data=settings["data"], zoo=spec.zoo if settings["use_zoo"] else None,
    )  # fmt: skip
    config = {"model": spec.slug, "training": training.get("config") or training.get("source")}
    rec: dict[str, Any] = {
        "model": spec.name,
        "paper_row": spec.paper,
        "recipe": recipe.name,
        "n_hidden": spec.n_hidden,
        "training": training,
        "config": config,
    }
    exact = None
    if spec.n_hidden <= EXACT_MAX_BITS:
        rec["exact"] = exact_stage(ctx, spec.slug, model, config, max_bits=EXACT_MAX_BITS)
        exact = rec["exact"]["log_z"]
    reverse = settings["reverse"] and exact is None
    ais = ais_stage(
        ctx, spec.slug, model, config, base_data=data["train"], n_chains=settings["n_chains"],
        betas=settings["betas"], reverse=reverse,
    )  # fmt: skip
    rec.update({k: ais[k] for k in ("ais", "ais_10", "log_weights", "log_z_start", "ais_settings")})
    rec["reverse"] = ais.get("reverse")
    splits = {"train": data["train"], "test": data["test"]}
    rec["estimate"] = log_prob_stage(
        ctx, spec.slug, model, config, splits, record_log_z(ais), label="log-prob-ais"
    )
    if exact is not None:
        from boltzkit.estimators.result import LogZResult

        rec["true"] = log_prob_stage(
            ctx, spec.slug, model, config, splits, LogZResult.exact(exact), label="log-prob-exact"
        )
    return rec, model


def _ratio(ctx: Context, n_chains: int, betas: int, models: dict[str, Any]) -> dict[str, Any] | None:
    """ln Z_CD1(20) / Z_CD1(25) by AIS along the model-to-model path (S1 Sec. 3.2), ``betas``
    uniform betas (S1: 10,000)."""
    if "CD1(20)" not in models or not models["CD1(20)"][0].get("exact") or "CD1(25)" not in models:
        return None
    (a, model_a), (b, model_b) = models["CD1(25)"], models["CD1(20)"]

    def compute() -> dict[str, Any]:
        result = estimate_log_ratio(
            model_b, model_a, "ais", n_chains=n_chains, betas=betas, seed=ctx.seed_for("ratio"),
            device=ctx.device, progress=ctx.progress, max_bits=EXACT_MAX_BITS,
        )  # fmt: skip
        d = result.to_dict()
        return {**{k: d.get(k) for k in ("log_ratio", "log_ratio_minus_3sigma", "log_ratio_plus_3sigma", "reliable", "reliability_reason")},
                "start": result.settings.get("start"), "n_chains": n_chains}  # fmt: skip

    config = {"a": a["config"], "b": b["config"], "n_chains": n_chains, "betas": betas}
    rec = stage(ctx.path("results", "ratio_cd1_20_cd1_25.json"), config, compute)
    return {**rec, "true_log_ratio": b["exact"]["log_z"] - a["exact"]["log_z"], "betas": betas}


#: CSV columns of ``table1.csv``: ours, then the paper's.
CSV_COLUMNS = (
    "model", "runs", "true_log_z", *AIS_CSV_COLUMNS, "reliable", "ais_seconds", "reverse_log_z", "test_true",
    "test_estimate", "train_true", "train_estimate", "paper_true_log_z", "paper_log_z", "paper_log_z_minus_sigma",
    "paper_log_z_plus_sigma", "paper_log_z_minus_3sigma", "paper_log_z_plus_3sigma", "paper_test_true",
    "paper_test", "paper_train_true", "paper_train",
)  # fmt: skip


def _table(records: list[dict[str, Any]], n_chains: int, verdicts: Verdicts) -> Table:
    """Table 1, ours beside the paper's: one row per model for the first 10 AIS runs and for all
    ``n_chains`` (the estimates of the mean log-probabilities stand in the latter only, the
    paper's AIS columns only in a row of its :data:`PAPER_RUNS` runs)."""
    table = Table(
        ("AIS runs", "model", "true ln Z", "ln Ẑ", "ln (Ẑ ± σ̂)", "ln (Ẑ ± 3σ̂)", "reverse AIS ln Ẑ (heuristic upper)",
         "AIS seconds", "test true", "test estimate", "train true", "train estimate"),
        CSV_COLUMNS,
    )  # fmt: skip
    for runs in sorted({10, n_chains}):
        for rec in records:
            p = PAPER.get(rec.get("paper_row", rec["model"]))
            a = rec["ais"] if runs == n_chains else rec.get("ais_10")
            if a is None:
                continue
            full = p if runs == PAPER_RUNS else None  # the paper's AIS columns: its 100 runs, only beside 100
            what = f"{rec['model']}, ln Ẑ from {runs} runs"
            mark = verdicts.mark(what, a)
            rev = rec.get("reverse") if runs == n_chains else None
            rev_text = (
                DASH
                if rev is None
                else fmt(rev.get("log_z")) + verdicts.mark(f"{rec['model']}, reverse AIS", rev)
            )
            exact = (rec.get("exact") or {}).get("log_z")
            true, est = rec.get("true") or {}, rec["estimate"] if runs == n_chains else {}

            def lp(split: str, record: dict[str, Any]) -> float | None:
                return (record.get(split) or {}).get("mean_log_prob")

            table.add(
                [
                    str(runs), rec["model"], cell(fmt(exact), fmt(p.true_log_z if p else None)),
                    *log_z_cells(a, full and (full.log_z, full.sigma_band, full.three_sigma_band), verdicts, what),
                    rev_text,
                    cell(fmt(a["seconds"], 1), fmt(full.minutes * 60, 0) if full else DASH),
                    cell(fmt(lp("test", true)), fmt(p.test_true if p else None)),
                    cell(fmt(lp("test", est)) + (mark if est else ""), fmt(full.test_estimate) if full else DASH),
                    cell(fmt(lp("train", true)), fmt(p.train_true if p else None)),
                    cell(fmt(lp("train", est)) + (mark if est else ""), fmt(full.train_estimate) if full else DASH),
                ],
                model=rec["model"], runs=runs, true_log_z=exact, **ais_csv_values(a),
                reliable=a.get("reliable"), ais_seconds=a["seconds"], reverse_log_z=(rev or {}).get("log_z"),
                test_true=lp("test", true), test_estimate=lp("test", est), train_true=lp("train", true),
                train_estimate=lp("train", est), paper_true_log_z=p and p.true_log_z,
                paper_test_true=p and p.test_true, paper_train_true=p and p.train_true,
                **({"paper_log_z": full.log_z, "paper_log_z_minus_sigma": full.sigma_band[0],
                    "paper_log_z_plus_sigma": full.sigma_band[1], "paper_log_z_minus_3sigma": full.three_sigma_band[0],
                    "paper_log_z_plus_3sigma": full.three_sigma_band[1], "paper_test": full.test_estimate,
                    "paper_train": full.train_estimate} if full else {}),
            )  # fmt: skip
    return table


def _markdown(table: Table, verdicts: Verdicts, records, ratio, settings, seconds, note) -> str:
    lines = [
        "# Salakhutdinov & Murray (2008), Table 1 — reproduced with boltzkit",
        "",
        f"Mode: {'quick' if settings['quick'] else 'full'}. {note}",
        "",
        "Each cell reads *ours / paper* (nats). AIS: base-rate model fitted to the training data, "
        f"{settings['betas_label']}, one Gibbs sweep per beta; the 10-run rows pool the first 10 of the "
        f"{settings['n_chains']} runs. Reverse AIS starts from the forward runs' final states (approximate "
        "samples), so its upper end is heuristic.",
        "",
        *table.markdown(),
    ]
    if ratio is not None:
        lines += [
            "",
            f"## Ratio of partition functions, ln Z_CD1(20) / Z_CD1(25) ({ratio['betas'] - 1:,} uniform betas)",
            "",
            "| | true | estimate | ln (r̂ ± 3σ̂) |",
            "|---|---|---|---|",
            f"| ours | {fmt(ratio['true_log_ratio'])} | {fmt(ratio['log_ratio'])}{verdicts.mark('the ratio', ratio)} "
            f"| {band(ratio['log_ratio_minus_3sigma'], ratio['log_ratio_plus_3sigma'], ratio)} |",
            f"| paper | {fmt(PAPER_RATIO['true'])} | {fmt(PAPER_RATIO['estimate'])} | {pair(*PAPER_RATIO['three_sigma_band'])} |",
            "",
            f"Start samples: {ratio['start']} (the paper used a Markov chain of 10,000 steps between samples).",
            "",
            "Signs: ours is ln Z_CD1(20) − ln Z_CD1(25), as named. S1's text names the same ratio but gives "
            "its true value as −24.18, where its own Table 1 gives 279.59 − 255.41 = +24.18: its row is of "
            "Z_CD1(25) / Z_CD1(20) (or carries a slip of sign); compare magnitudes.",
        ]
    lines += verdicts.lines()
    lines += ["", "## Where the models come from, and what each stage cost (seconds, this machine)", "",
              "| model | source | recipe | training | AIS | reverse AIS |", "|---|---|---|---|---|---|"]  # fmt: skip
    for rec in records:
        t = rec["training"]
        source = t.get("source") or "trained in this run"
        recipe = recipe_label(rec["recipe"], t)
        rev = rec.get("reverse") or {}
        lines.append(
            f"| {rec['model']} | {source} | {recipe} | {fmt(t.get('seconds'), 0)} | "
            f"{fmt(rec['ais']['seconds'], 1)} | {fmt(rev.get('seconds'), 1)} |"
        )
    lines += [
        "",
        "## Settings that differ from the paper",
        "",
        f"- Training: {settings['training_note']}",
        "- The models are ours, so their ln Z differ from the paper's: S1's recipe details (epochs, "
        "learning-rate decay) are not given; ours are in the recipes (`boltzkit train --list-recipes`).",
        "- The AIS time is on this machine (the paper: minutes on a 3 GHz Pentium Xeon; shown in seconds).",
        "- Base-rate smoothing: symmetric pseudo-counts (boltzkit.estimators.base_rate).",
        "",
        f"This invocation took {seconds:.0f} s (stages reused from earlier runs keep their own times).",
    ]
    return "\n".join(lines) + "\n"


def run_table1(
    *,
    out_dir: Path,
    quick: bool = False,
    data_dir: str | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    n_chains: int = 100,
    betas: str | int = "paper",
    epochs: int | None = None,
    progress: bool = True,
    use_zoo: bool = True,
    reverse: bool = True,
    models: tuple[ModelSpec, ...] | None = None,
    ratio_betas: int = RATIO_BETAS,
) -> dict[str, Any]:
    """Run S1 Table 1 and write ``table1.md``, ``table1.csv``, ``table1.json`` and
    ``fig3_ais_runs.png`` (when matplotlib is installed) into ``out_dir``.

    Parameters
    ----------
    quick
        Only CD1(25), CD3(25) and CD1(20), 3 epochs each on the 50,000 training images (minutes);
        otherwise all six models at full size on the 60,000 training images.
    epochs
        Override the recipes' epochs (the models are then trained here, not taken from the zoo).
    use_zoo
        Full mode: take each model from the zoo when it is there.
    reverse
        Confirm the AIS estimates of the 500-unit models by reverse AIS (the sandwich).
    models
        Replace the paper's models (tests).
    ratio_betas
        Points of the uniform schedule of the ratio's AIS (S1 Sec. 5.1: 10,000 steps).
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(out_dir=out_dir, seed=seed, device=resolve_device(device), progress=progress)
    data_spec = "mnist" if quick else "mnist:train+valid"
    data = {
        "train": load_dataset(data_spec, split="train", data_dir=data_dir).x,
        "test": load_dataset("mnist", split="test", data_dir=data_dir).x,
    }
    settings = {
        "quick": quick, "n_chains": n_chains, "betas": betas, "reverse": reverse, "data": data_spec,
        "epochs": QUICK_EPOCHS if quick and epochs is None else epochs, "use_zoo": use_zoo and not quick and epochs is None,
        "betas_label": "S1's schedule (500/4,000/10,000 = 14,500 steps)" if betas == "paper" else f"betas {betas}",
    }  # fmt: skip
    settings["training_note"] = (
        f"the S1 recipes with {settings['epochs']} epochs on the {data['train'].shape[0]:,} training images"
        if settings["epochs"] is not None
        else "the S1 recipes as they stand ("
        + ", ".join(
            f"{name}: {RECIPES[name].epochs} epochs"
            for name in ("sm2008-cd1", "sm2008-cd3", "sm2008-cd25", "sm2008-cd25-mean")
        )
        + ") on the 60,000 training images (the paper's number)"
    )
    chosen = [s for s in (models or MODELS) if s.quick or not quick]
    records, loaded = [], {}
    for spec in chosen:
        rec, model = _model_record(ctx, spec, data, settings)
        records.append(rec)
        loaded[spec.name] = (rec, model)
    ratio = _ratio(ctx, n_chains, int(ratio_betas), loaded)
    seconds = time.perf_counter() - t0
    verdicts = Verdicts()
    table = _table(records, n_chains, verdicts)
    note = machine_note(ctx.device)
    atomic_write_text(
        out_dir / "table1.md", _markdown(table, verdicts, records, ratio, settings, seconds, note)
    )
    atomic_write_text(out_dir / "table1.csv", table.csv(mode="quick" if quick else "full"))
    summary = {
        "experiment": NAME,
        "quick": quick,
        "settings": {k: v for k, v in settings.items() if k != "training_note"},
        "paper": {k: asdict(v) for k, v in PAPER.items()},
        "models": [{k: v for k, v in r.items() if k != "log_weights"} for r in records],
        "ratio": ratio,
        "seconds": seconds,
    }
    save_json(summary, out_dir / "table1.json")
    panels = [
        RunsRecord(
            r["model"],
            r["log_weights"],
            r["log_z_start"],
            exact=(r.get("exact") or {}).get("log_z"),
            reliable=r["ais"].get("reliable"),
        )
        for r in records
    ]
    files = ["table1.md", "table1.csv", "table1.json"]
    if plot_ais_runs(panels, out_dir / "fig3_ais_runs.png", suptitle="S1 Fig. 3: ln Ẑ against AIS runs"):
        files.append("fig3_ais_runs.png")
    return {**summary, "files": files, "report": "table1.md"}


__all__ = ["MODELS", "NAME", "PAPER", "PAPER_RATIO", "ModelSpec", "PaperRow", "run_table1"]
