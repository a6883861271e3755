"""Salakhutdinov & Murray (2008, "S1"), Table 2 and Fig. 2: lower bounds on the log-probabilities of
deep belief networks, the transposed-initialisation experiment and the mixture-of-Bernoullis baseline.

S1 Sec. 5.2 greedily trains three DBNs with two hidden layers: 2,000 hidden units on top of the
Table 1 RBMs CD1(500), CD3(500) and CD25(500), trained by CD with T = 1, 3 and 25 (DBN-CD1,
DBN-CD3, DBN-CD25). ``log Z`` of the top RBM comes from AIS with 15,000 intermediate distributions
and 500 runs; the bound of Eq. 24 uses ``M = 5`` samples of ``q(h | v)`` per data vector. Table 2
reports the bound on the training and test sets with the Monte Carlo error of ``r_B`` (±3 std)
and the AIS error ``log(Z ± 3 sigma) - log Z``. As an extra test (Sec. 5.2) the second layer of
DBN-CD25 starts as the transposed CD25(500) RBM, so the bound starts at the RBM's log-probability
and can only improve on the training data; S1 reports -85.97 on the test set after training.
Sec. 5.1 adds mixtures of Bernoullis with 10, 100 and 500 components as a baseline (test
log-probabilities -168.95, -142.63, -137.64) and Fig. 2 shows samples of all the models.

This spec runs all of it on the experiment engine (:mod:`boltzkit.experiments.engine`) and writes
``table2.md``, ``table2.csv``, ``table2.json`` and ``fig2_samples.png`` (with matplotlib) into
``out_dir``; every stage is resumable. The bottoms are trained by the S1 recipes
(:mod:`boltzkit.learning.recipes`), the tops on samples of q redrawn every epoch. Quick mode trains
each top by its bottom's recipe from random couplings, as S1; full mode trains the DBN-CDk tops by
the recipe ``dbn-top-pcd`` (persistent chains) from the transposed bottom, because CD from random
couplings grows spurious modes in a 2,000-unit top and leaves every DBN below its own RBM
(docs/results.md); the 784-unit top of the transposed-start row, too (S1 trained it by CD25). In
full mode every model is taken from the zoo when it is there (``sm2008-cd1-500``, ...,
``sm2008-dbn-cd1``, ..., ``sm2008-dbn-cd25-transposed``), so the tops trained once at full size
are never retrained.

``--quick`` shrinks everything (100 hidden units at the bottom, 400 on top, 20,000 training
images, 5 epochs, 1,450 AIS steps; minutes on 2 CPU cores); the report names what differs from S1.
In full mode ``--chains 100`` and ``--betas paper`` (the command's defaults) mean S1's Table 2
settings for the top RBMs: 500 runs and 15,000 intermediate distributions.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import anneal
from boltzkit.estimators.dbn_bound import dbn_bound, top_layer_data
from boltzkit.estimators.paths import base_rate_path
from boltzkit.estimators.result import stored_steps
from boltzkit.estimators.schedules import paper_betas
from boltzkit.experiments.engine import (
    Context,
    ais_stage,
    log_prob_stage,
    model_stage,
    recipe_config,
    record_log_z,
    stage,
    train_stage,
    zoo_model,
)
from boltzkit.experiments.report import Table, Verdicts, cell, fmt, machine_note, tables_csv
from boltzkit.io import load_model, save_model
from boltzkit.jsonio import save_json
from boltzkit.learning import train_dbn, train_mixture
from boltzkit.learning.recipes import RECIPES, Recipe
from boltzkit.models import DBN, RBM
from boltzkit.plots.images import plot_image_panels
from boltzkit.samplers import sample, sample_dbn

EXPERIMENT = "salakhutdinov-murray-2008-table2"

# ------------------------------------------------------------------------------ the paper's numbers
#: S1 Table 2: bound, ±3 std of r_B, AIS error (log(Z - 3σ) - log Z, log(Z + 3σ) - log Z).
PAPER: dict[str, dict[str, tuple[float, float, tuple[float, float]]]] = {
    "DBN-CD1": {"test": (-100.64, 0.77, (-1.43, 0.57)), "train": (-97.67, 0.30, (-1.43, 0.57))},
    "DBN-CD3": {"test": (-98.29, 0.75, (-0.91, 0.31)), "train": (-94.86, 0.29, (-0.91, 0.31))},
    "DBN-CD25": {"test": (-86.22, 0.67, (-0.84, 0.65)), "train": (-82.47, 0.25, (-0.84, 0.65))},
}
#: S1 Table 1: the bottom RBMs' test and train log-probabilities.
PAPER_RBM = {"CD1": (-125.53, -122.86), "CD3": (-105.50, -102.81), "CD25": (-86.34, -83.10)}
#: S1 Sec. 5.2: test bound of DBN-CD25 with the second layer started as the transposed CD25(500).
PAPER_TRANSPOSED_TEST = -85.97
#: S1 Sec. 5.1: mixture of Bernoullis, test log-probabilities by number of components.
PAPER_MOB = {10: -168.95, 100: -142.63, 500: -137.64}
#: S1 Table 2: 15,000 intermediate distributions, 500 runs, M = 5.
PAPER_TOP_BETAS, PAPER_TOP_CHAINS, PAPER_M = 15_000, 500, 5


@dataclass(frozen=True)
class DBNSpec:
    """A DBN of the table: its name, the bottom RBM (S1's name), the recipe of both layers."""

    name: str
    bottom: str  # "CD1", "CD3", "CD25"
    recipe: str

    @property
    def zoo(self) -> str:
        return f"sm2008-{self.name.lower()}"

    @property
    def bottom_zoo(self) -> str:
        return f"sm2008-{self.bottom.lower()}-500"


SPECS = (
    DBNSpec("DBN-CD1", "CD1", "sm2008-cd1"),
    DBNSpec("DBN-CD3", "CD3", "sm2008-cd3"),
    DBNSpec("DBN-CD25", "CD25", "sm2008-cd25"),
)
#: The zoo name of DBN-CD25 with its second layer started as the transposed bottom.
TRANSPOSED_ZOO = "sm2008-dbn-cd25-transposed"


@dataclass(frozen=True)
class Mode:
    """Sizes and settings of a mode (``epochs`` ``None``: the recipes' own)."""

    n_bottom: int
    n_top: int
    epochs: int | None
    n_train: int | None
    top_chains: int
    top_betas_scale: float
    rbm_chains: int
    rbm_betas_scale: float
    mob_iterations: int
    sample_steps: int
    #: The recipe of the DBN-CDk tops: ``None`` is S1's procedure (the bottom's recipe from random
    #: couplings); a name, e.g. ``"dbn-top-pcd"``, trains the top by that recipe from the transposed
    #: bottom (the top must be at least as wide as the images).
    top_recipe: str | None = None


#: Full mode trains the 2,000-unit tops by persistent chains from the transposed start: S1's CD from
#: random couplings grows spurious modes and leaves every top below its RBM (docs/results.md).
FULL = Mode(
    500, 2000, None, None, PAPER_TOP_CHAINS, PAPER_TOP_BETAS / 14_500, 100, 1.0, 100, 20_000, "dbn-top-pcd"
)
QUICK = Mode(100, 400, 5, 20_000, 100, 0.1, 100, 0.1, 20, 1_000)
MOB_COMPONENTS = (10, 100, 500)


def _slug(name: str) -> str:
    return name.lower().replace("(", "_").replace(")", "").replace("-", "_")


def _recipe(name: str, mode: Mode) -> Recipe:
    recipe = RECIPES[name]
    return recipe if mode.epochs is None else recipe.replace(epochs=mode.epochs)


# ------------------------------------------------------------------------------------ stages
def _bottom(ctx: Context, spec: DBNSpec, mode: Mode, data: dict[str, Any]) -> tuple[RBM, dict[str, Any]]:
    """The bottom RBM: the zoo's Table 1 model in full mode when there, else trained here."""
    rbm, training = train_stage(
        ctx, _slug(f"{spec.bottom}({mode.n_bottom})"), recipe=_recipe(spec.recipe, mode), kind="rbm",
        hidden=mode.n_bottom, train_x=data["train"], data=data["spec"], zoo=spec.bottom_zoo if data["use_zoo"] else None,
    )  # fmt: skip
    return RBM.from_model(rbm), training


def _config(name: str, training: dict[str, Any]) -> dict[str, Any]:
    return {"model": name, "training": training.get("config") or training.get("source")}


def _paper_schedule(scale: float) -> tuple[torch.Tensor, str]:
    """S1's schedule with its segments scaled by ``scale`` (:func:`paper_betas`), and its name in
    the AIS stage's config: its number of steps, which fixes it (the name records had before
    stages named tensors by a digest, so their folders resume)."""
    betas = paper_betas(scale)
    return betas, f"{betas.numel() - 1} steps"


def _rbm_record(
    ctx: Context, name: str, rbm: RBM, training: dict[str, Any], mode: Mode, data
) -> dict[str, Any]:
    """AIS log Z and train/test log-probabilities of a bottom RBM."""
    config = _config(name, training)
    betas, label = _paper_schedule(mode.rbm_betas_scale)
    ais = ais_stage(
        ctx, _slug(name), rbm, config, base_data=data["train"], n_chains=mode.rbm_chains, betas=betas,
        schedule=label,
    )  # fmt: skip
    lp = log_prob_stage(
        ctx, _slug(name), rbm, config, {"test": data["test"], "train": data["train"]}, record_log_z(ais)
    )
    return {
        "model": name,
        "ais": ais["ais"],
        "test": lp["test"]["mean_log_prob"],
        "train": lp["train"]["mean_log_prob"],
    }


def _top(
    ctx: Context,
    name: str,
    spec: DBNSpec,
    bottom: RBM,
    bottom_training,
    n_top: int,
    transpose: bool,
    mode,
    data,
):
    """The two-layer DBN: the zoo's in full mode when there, else the second layer trained greedily on
    the frozen bottom by the bottom's recipe (samples of q redrawn every epoch; S1 Sec. 4.1)."""
    zoo = (TRANSPOSED_ZOO if transpose else spec.zoo) if data["use_zoo"] else None
    if zoo is not None:
        found = zoo_model(zoo, device=ctx.device)
        if found is not None:
            _check_same_bottom(found[0], bottom, zoo)
            return found
    recipe = _recipe(spec.recipe, mode)
    if mode.top_recipe is not None:  # boltzkit's top recipe, always from the transposed bottom
        recipe, transpose = _recipe(mode.top_recipe, mode), True
    config = {"bottom": _config(name, bottom_training), "recipe": recipe_config(recipe), "n_top": n_top,
              "transpose": transpose, "n_train": int(data["train"].shape[0]), "seed": ctx.seed}  # fmt: skip

    def train(checkpoint: Path) -> tuple[Any, dict[str, Any]]:
        dbn, _ = train_dbn(
            data["train"], [bottom.n_hidden, n_top], recipe=recipe, seed=ctx.seed, device=ctx.device,
            init_transpose=transpose, bottom=[bottom], checkpoint_dir=checkpoint.with_suffix(""), resume=True,
            progress=ctx.progress,
        )  # fmt: skip
        return dbn, {"recipe": recipe.name, "init": "transposed bottom RBM" if transpose else "random"}

    return model_stage(ctx.path("models", f"{_slug(name)}.safetensors"), config, train, device=ctx.device)


def _check_same_bottom(dbn: DBN, bottom: RBM, zoo: str) -> None:
    """Refuse a zoo DBN whose first layer is not the row's bottom RBM: its bound would then stand
    beside another RBM's (the zoo's models are float32, so they are compared in float32)."""
    first = dbn.rbms[0]
    same = first.W.shape == bottom.W.shape and all(
        torch.equal(getattr(first, p).detach().float().cpu(), getattr(bottom, p).detach().float().cpu())
        for p in ("W", "vbias", "hbias")
    )
    if not same:
        raise BoltzkitError(
            f"the zoo's {zoo} is not built on this row's bottom RBM",
            hint="publish the DBN trained on the zoo's bottom under that name, or run with --no-zoo.",
        )


def _bounds(ctx: Context, name: str, dbn: DBN, training: dict[str, Any], mode: Mode, data) -> dict[str, Any]:
    """AIS on the top RBM (from a base-rate model of the training images passed up), then the bound
    of S1 Eq. 24 on the test and training images (M = 5)."""
    config = _config(name, training)
    base = top_layer_data(dbn, data["train"])
    betas, label = _paper_schedule(mode.top_betas_scale)
    ais = ais_stage(
        ctx, f"{_slug(name)}-top", dbn.top, config, base_data=base, n_chains=data["top_chains"], betas=betas,
        schedule=label,
    )  # fmt: skip
    log_z = record_log_z(ais)

    def compute() -> dict[str, Any]:
        seed = ctx.seed_for("bound", name)
        return {
            split: dbn_bound(dbn, data[split], log_z, n_samples=PAPER_M, seed=seed).to_dict()
            for split in ("test", "train")
        }

    bounds = stage(
        ctx.path("results", f"{_slug(name)}-bound.json"),
        {**config, "log_z": log_z.log_z, "m": PAPER_M},
        compute,
    )
    return {"ais": ais["ais"], "test": bounds["test"], "train": bounds["train"]}


def _run_dbn(ctx: Context, spec: DBNSpec, mode: Mode, data) -> tuple[dict[str, Any], RBM, DBN]:
    bottom, bottom_training = _bottom(ctx, spec, mode, data)
    bottom_name = f"{spec.bottom}({mode.n_bottom})"
    rbm = _rbm_record(ctx, bottom_name, bottom, bottom_training, mode, data)
    dbn, training = _top(ctx, spec.name, spec, bottom, bottom_training, mode.n_top, False, mode, data)
    record = {
        "model": spec.name, "bottom": bottom_name, "bottom_source": bottom_training.get("source", "trained here"),
        "layer_sizes": list(dbn.layer_sizes), "training": training, "rbm": rbm,
        **_bounds(ctx, spec.name, dbn, training, mode, data),
    }  # fmt: skip
    return record, bottom, dbn


def _run_transposed(ctx: Context, mode: Mode, data) -> dict[str, Any]:
    """S1 Sec. 5.2: DBN-CD25 with its second layer started as the transposed CD25 RBM."""
    spec = SPECS[2]
    bottom, bottom_training = _bottom(ctx, spec, mode, data)
    start = DBN([bottom, bottom.swapped()])
    name = "DBN-CD25-transposed"
    record: dict[str, Any] = {"model": "DBN-CD25, transposed start", "bottom": f"CD25({mode.n_bottom})"}
    record["start"] = _bounds(ctx, f"{name}-start", start, bottom_training, mode, data)
    dbn, training = _top(ctx, name, spec, bottom, bottom_training, bottom.n_visible, True, mode, data)
    record["trained"] = {"training": training, **_bounds(ctx, name, dbn, training, mode, data)}
    return record


def _run_mixtures(ctx: Context, mode: Mode, data) -> list[dict[str, Any]]:
    out = []
    for k in MOB_COMPONENTS:

        def compute(k: int = k) -> dict[str, Any]:
            mob, hist = train_mixture(
                data["train"], k, seed=ctx.seed, max_iter=mode.mob_iterations, device=ctx.device, progress=ctx.progress
            )  # fmt: skip
            save_model(
                mob,
                ctx.path("models", f"mob_{k}.safetensors"),
                metadata={"data": data["spec"], "name": f"MoB({k})"},
            )
            return {
                "components": k, "iterations": len(hist), "converged": len(hist) < mode.mob_iterations,
                "test": float(mob.log_prob(data["test"].to(mob.device)).mean()),
                "train": float(mob.log_prob(data["train"].to(mob.device)).mean()),
            }  # fmt: skip

        config = {
            "components": k,
            "max_iter": mode.mob_iterations,
            "n_train": int(data["train"].shape[0]),
            "seed": ctx.seed,
        }
        out.append(stage(ctx.path("results", f"mob_{k}.json"), config, compute))
    return out


# ------------------------------------------------------------------------------------ figure
def _ais_course(ctx: Context, rbm: RBM, train_x, n: int, quick: bool) -> list[torch.Tensor]:
    """Visible states of ``n`` AIS runs on ``rbm`` at beta = 0, 0.5, 0.95 and 1 (S1 Fig. 2)."""
    path = base_rate_path(rbm, data=train_x, device=ctx.device)
    betas = paper_betas(0.1 if quick else 1.0)
    gen = make_generator(ctx.seed_for("fig2", "ais"), path.device)
    state = path.sample_start(n, gen)
    shots = [state.visible.clone()]
    lo = 0
    for stop in (0.5, 0.95, 1.0):
        hi = int(torch.searchsorted(betas, torch.tensor(stop, dtype=torch.float64), right=True)) - 1
        run = anneal(path, betas[lo : hi + 1], init=state, generator=gen, final_move=True)
        state, lo = run.final_state, hi
        shots.append(state.visible.clone())
    return shots


def _figure(ctx: Context, mode: Mode, data, models: dict[str, Any], quick: bool) -> bool:
    train_x = data["train"]
    gen = make_generator(ctx.seed_for("fig2", "samples"), ctx.device)
    pick = torch.randperm(train_x.shape[0], generator=torch.Generator().manual_seed(ctx.seed))[:16]
    panels: list[tuple[str, torch.Tensor]] = [("Training samples", train_x[pick])]
    mob_path = ctx.path("models", "mob_100.safetensors")
    if mob_path.is_file():
        mob, _ = load_model(mob_path, device=ctx.device)
        panels.append(("MoB (100)", mob.sample(16, gen)))
    cd25 = models.get(f"CD25({mode.n_bottom})")
    if cd25 is not None:
        for beta, shot in zip((0.0, 0.5, 0.95, 1.0), _ais_course(ctx, cd25, train_x, 16, quick), strict=True):
            panels.append((f"AIS, β = {beta:g}", shot))
    for name, model in models.items():
        if isinstance(model, DBN):
            state = sample_dbn(
                model, "gibbs", n_chains=16, n_steps=mode.sample_steps, generator=gen, visible="probs"
            )
            panels.append((name, state.visible))
        else:
            state = sample(model, "gibbs", n_chains=16, n_steps=mode.sample_steps, generator=gen)
            panels.append((name, model.prob_v_given_h(state.hidden)))
    shots = [(title, images[:16]) for title, images in panels]
    return plot_image_panels(shots, ctx.path("fig2_samples.png"), panel_cols=6) is not None


# ------------------------------------------------------------------------------------ report
#: CSV columns of ``table2.csv``: ours, then the paper's.
CSV_COLUMNS = (
    "split", "model", "bound", "mc_3std", "pooled_3std", "ais_minus", "ais_plus", "total_3std", "log_z",
    "reliable", "rbm_log_prob", "rbm_reliable", "paper_bound", "paper_3std", "paper_ais_minus", "paper_ais_plus",
    "paper_rbm_log_prob",
)  # fmt: skip


def _bound_values(b: dict[str, Any], ais: dict[str, Any]) -> dict[str, Any]:
    """The CSV values of one bound (S1 Eq. 24) and the AIS estimate of its top's ``log Z``; the
    AIS error and the total error left empty where that estimate is unreliable (no band)."""
    held = ais.get("reliable") is False
    return {
        "bound": b["mean_log_prob"], "mc_3std": b["mc_error_3std"], "pooled_3std": b["pooled_error_3std"],
        "ais_minus": None if held else b["ais_error_minus_3sigma"],
        "ais_plus": None if held else b["ais_error_plus_3sigma"],
        "total_3std": None if held else b["total_error_3std"], "log_z": b["log_z"], "reliable": ais.get("reliable"),
    }  # fmt: skip


def _table(records, verdicts: Verdicts) -> Table:
    """Table 2, ours beside the paper's: one row per split and DBN, with the RBM below it."""
    table = Table(
        ("split", "model", "bound", "MC ±3 std", "pooled ±3 std", "AIS error", "total ±3 std",
         "RBM below (test/train log p)"),
        CSV_COLUMNS,
    )  # fmt: skip
    for split in ("test", "train"):
        for rec in records:
            b, p = rec[split], PAPER[rec["model"]][split]
            paper_rbm = PAPER_RBM[rec["bottom"].split("(")[0]][0 if split == "test" else 1]
            bound, ais_err, total = _bound_cells(
                b, rec["ais"], f"{rec['model']}: ln Ẑ of the top RBM", verdicts
            )
            rbm_mark = verdicts.mark(f"{rec['bottom']}: ln Ẑ", rec["rbm"]["ais"])
            table.add(
                [
                    split, rec["model"], cell(bound, fmt(p[0])), f"±{fmt(b['mc_error_3std'])}",
                    cell(f"±{fmt(b['pooled_error_3std'])}", f"±{fmt(p[1])}"),
                    cell(ais_err, f"{fmt(p[2][0], sign=True)}, {fmt(p[2][1], sign=True)}"), total,
                    f"{rec['bottom']}: " + cell(fmt(rec["rbm"][split]) + rbm_mark, fmt(paper_rbm)),
                ],
                split=split, model=rec["model"], **_bound_values(b, rec["ais"]), rbm_log_prob=rec["rbm"][split],
                rbm_reliable=rec["rbm"]["ais"].get("reliable"), paper_bound=p[0], paper_3std=p[1], paper_ais_minus=p[2][0], paper_ais_plus=p[2][1],
                paper_rbm_log_prob=paper_rbm,
            )  # fmt: skip
    return table


def _bound_cells(
    b: dict[str, Any], ais: dict[str, Any], what: str, verdicts: Verdicts
) -> tuple[str, str, str]:
    """The bound (marked when its log Z is unreliable), its AIS error and total ±3 std (or
    ``unsupported``)."""
    mark = verdicts.mark(what, ais)
    if mark:
        return fmt(b["mean_log_prob"]) + mark, "unsupported", "unsupported"
    return (
        fmt(b["mean_log_prob"]),
        f"{fmt(b['ais_error_minus_3sigma'], sign=True)}, {fmt(b['ais_error_plus_3sigma'], sign=True)}",
        f"±{fmt(b['total_error_3std'])}",
    )


def _transposed_table(transposed: dict[str, Any], verdicts: Verdicts) -> Table:
    """The bounds of the second layer started as the transposed CD25 RBM (S1 Sec. 5.2), at the
    start and after training, on both splits: rows of the same columns as Table 2."""
    table = Table(("split", "second layer", "bound", "total ±3 std", "ln Ẑ of the top"), CSV_COLUMNS)
    for split in ("test", "train"):
        for part, label in (("start", "start"), ("trained", "after training")):
            rec = transposed[part]
            paper = PAPER_TRANSPOSED_TEST if (split, part) == ("test", "trained") else None
            what = f"transposed start, {label}: ln Ẑ"
            bound, _, total = _bound_cells(rec[split], rec["ais"], what, verdicts)
            top = fmt(rec["ais"]["log_z"]) + verdicts.mark(what, rec["ais"])
            table.add(
                [split, label, bound if paper is None else cell(bound, fmt(paper)), total, top],
                split=split, model=f"DBN-CD25 transposed ({part})", paper_bound=paper,
                **_bound_values(rec[split], rec["ais"]),
            )  # fmt: skip
    return table


#: CSV columns of ``table2-mixtures.csv`` (S1 Sec. 5.1): ours, then S1's test value.
MIXTURE_CSV_COLUMNS = (
    "components", "test_log_prob", "train_log_prob", "iterations", "converged", "paper_test_log_prob",
)  # fmt: skip


def _mixtures_table(mobs: list[dict[str, Any]]) -> Table:
    """The mixtures of Bernoullis (S1 Sec. 5.1): exact test and train log-probabilities."""
    table = Table(("components", "test log p (exact)", "train log p", "EM iterations"), MIXTURE_CSV_COLUMNS)
    for m in mobs:
        paper = PAPER_MOB.get(m["components"])
        table.add(
            [str(m["components"]), cell(fmt(m["test"]), fmt(paper)), fmt(m["train"]),
             f"{m['iterations']}{'' if m['converged'] else ' (cap)'}"],
            components=m["components"], test_log_prob=m["test"], train_log_prob=m["train"],
            iterations=m["iterations"], converged=m["converged"], paper_test_log_prob=paper,
        )  # fmt: skip
    return table


def _markdown(
    table: Table,
    verdicts: Verdicts,
    records,
    transposed: Table | None,
    mixtures: Table | None,
    mode: Mode,
    settings: dict[str, Any],
    note: str,
) -> str:
    lines = [
        "# Salakhutdinov & Murray (2008), Table 2 — reproduced with boltzkit",
        "",
        f"Mode: {'quick' if settings['quick'] else 'full'}. {note}",
        "",
        "Each cell reads *ours / paper*. Bound: S1 Eq. 24 with M = 5 samples of q(h|v) per image; log Z of the "
        "top RBM by AIS from a base-rate model fitted to the training images passed up the recognition model. "
        "MC ±3 std: the Monte Carlo error of r_B given the data set; pooled ±3 std: the standard deviation of "
        "all N·M terms over sqrt(N·M), the convention S1's column follows (its size and its 1/sqrt(N) "
        "scaling between the test and training sets match it). AIS error: log(Ẑ ± 3σ̂) − log Ẑ. Total: "
        "3·sqrt(Var r_B + Var log Ẑ) with the MC standard error.",
        "",
        *table.markdown(),
    ]

    def top_ais(r: dict[str, Any]) -> str:  # marked as the table marks its bound
        mark = verdicts.mark(f"{r['model']}: ln Ẑ of the top RBM", r["ais"])
        return (
            f"{r['model']}: ln Ẑ = {fmt(r['ais']['log_z'])}{mark} ({r['ais']['n_chains']} runs, "
            f"{stored_steps(r['ais']):,} steps, ESS {fmt(r['ais'].get('ess'), 1)}, {fmt(r['ais']['seconds'], 0)} s)"
        )

    lines += [
        "",
        "Top-RBM AIS: " + "; ".join(top_ais(r) for r in records) + ".",
        "",
        "Where the models come from: "
        + "; ".join(
            f"{r['model']}: {r['training'].get('source') or 'trained here'} (bottom {r['bottom_source']})"
            for r in records
        )
        + ".",
    ]
    if transposed is not None:
        cd25 = next((r for r in records if r["model"] == "DBN-CD25"), None)
        rbm = cd25["rbm"] if cd25 else None
        rbm_mark = verdicts.mark(f"{cd25['bottom']}: ln Ẑ", rbm["ais"]) if cd25 else ""
        lines += [
            "",
            "## Second layer started as the transposed CD25 RBM (S1 Sec. 5.2)",
            "",
            "At the start the two-layer DBN defines exactly the RBM's p(v) and q is its true posterior, so the "
            "bound equals the RBM's log-probability up to Monte Carlo and AIS error; training the second layer "
            f"can only raise the bound on the training data. The RBM: test {fmt(rbm['test'] if rbm else None)}"
            f"{rbm_mark}, train {fmt(rbm['train'] if rbm else None)}{rbm_mark}.",
            "",
            *transposed.markdown(),
        ]
    if mixtures is not None:
        lines += ["", "## Mixture of Bernoullis (S1 Sec. 5.1)", "", *mixtures.markdown()]
    lines += verdicts.lines()
    top_b = records[0]["ais"] if records else {}
    lines += [
        "",
        "## Settings that differ from the paper",
        "",
        f"- Layers: {mode.n_bottom} hidden units at the bottom and {mode.n_top} on top (S1: 500 and 2,000).",
        f"- Training: {settings['training_note']}",
        f"- AIS on the top RBM: {top_b.get('n_chains', '—')} runs, {stored_steps(top_b):,} steps "
        f"(S1: {PAPER_TOP_CHAINS} runs, {PAPER_TOP_BETAS:,} distributions); the segments of S1's schedule, scaled.",
        "- The models are ours, so the absolute numbers differ from the paper's; what carries over is the "
        "estimator, the size of its errors, and the comparisons (DBN vs the RBM below it, transposed start).",
        f"- Mixtures: EM with smoothing (pseudo-count 1 per pixel and state), at most {mode.mob_iterations} "
        "iterations, on the same training images.",
        f"- Fig. 2: {mode.sample_steps:,} Gibbs sweeps from random states for the RBMs and the DBNs' top RBMs "
        "(S1: 100,000), images show p(v | h) of the last sweep; the AIS panels follow 16 runs on "
        f"CD25({mode.n_bottom}).",
    ]
    if settings["quick"]:
        lines.append(
            "- Quick mode: small layers, few epochs, a 1,450-step AIS schedule; a smoke test of the pipeline."
        )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ runner
def run_table2(
    *,
    out_dir: Path,
    quick: bool = False,
    data_dir: str | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    n_chains: int | None = None,
    epochs: int | None = None,
    progress: bool = True,
    use_zoo: bool = True,
) -> dict[str, Any]:
    """Run S1 Table 2 and write ``table2.md``, ``table2.csv`` (the DBNs' bounds and those of the
    transposed start), ``table2-mixtures.csv``, ``table2.json`` and ``fig2_samples.png`` into
    ``out_dir``.

    Parameters
    ----------
    quick
        Small layers and few epochs on 20,000 images (minutes on 2 CPU cores); otherwise S1's sizes
        on the 60,000 training images.
    n_chains
        AIS runs on the top RBMs; default S1's 500 in full mode (with S1's 15,000 steps), 100 in
        quick mode. The bottom RBMs' AIS uses 100 runs of S1's 14,500 steps. The schedules are
        S1's segments scaled as the mode says: this spec takes no other.
    epochs
        Training epochs of every layer trained here (default: the recipes' own; then no zoo model
        is used).
    use_zoo
        Full mode: take the models from the zoo where it holds them.
    """
    t_start = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    mode = QUICK if quick else FULL
    if epochs is not None:
        mode = Mode(**{**asdict(mode), "epochs": int(epochs)})
    ctx = Context(out_dir=out_dir, seed=int(seed), device=resolve_device(device), progress=progress)
    spec = "mnist" if quick else "mnist:train+valid"
    train_x = load_dataset(spec, split="train", data_dir=data_dir).x
    if mode.n_train is not None:
        train_x = train_x[: mode.n_train]
    data = {
        "train": train_x, "test": load_dataset("mnist", split="test", data_dir=data_dir).x, "spec": spec,
        "use_zoo": use_zoo and not quick and mode.epochs is None,
        "top_chains": mode.top_chains if n_chains is None else int(n_chains),
    }  # fmt: skip
    records, bottoms, dbns = [], {}, {}
    for s in SPECS:
        record, bottoms[f"{s.bottom}({mode.n_bottom})"], dbns[s.name] = _run_dbn(ctx, s, mode, data)
        records.append(record)
    models = {**bottoms, **dbns}  # Fig. 2: the RBMs, then the DBNs
    transposed = _run_transposed(ctx, mode, data)
    mobs = _run_mixtures(ctx, mode, data)
    plotted = _figure(ctx, mode, data, models, quick)
    seconds = time.perf_counter() - t_start
    epochs_text = "the recipes' own epochs" if mode.epochs is None else f"{mode.epochs} epochs per layer"
    top_text = (
        "each top by its bottom's recipe from random couplings, as S1"
        if mode.top_recipe is None
        else f"every top by the recipe {mode.top_recipe} from the transposed bottom (S1: the DBN-CDk tops by CD "
        "from random couplings, which grows spurious modes here, and the transposed-start row by CD25)"
    )
    settings = {
        "quick": quick,
        "training_note": f"the bottoms by the S1 recipes; {top_text}, on samples of q(h|v) redrawn every epoch, "
        f"{epochs_text}, on {train_x.shape[0]:,} training images (S1: 60,000); the train bound is on those images.",
    }
    note = (
        f"{machine_note(ctx.device)}; this invocation took {seconds:.0f} s (reused stages keep their times)."
    )
    verdicts = Verdicts()
    table = _table(records, verdicts)
    transposed_table = None if transposed is None else _transposed_table(transposed, verdicts)
    mixtures = _mixtures_table(mobs) if mobs else None
    md = _markdown(table, verdicts, records, transposed_table, mixtures, mode, settings, note)
    atomic_write_text(out_dir / "table2.md", md)
    atomic_write_text(
        out_dir / "table2.csv",
        tables_csv(
            [table] + ([transposed_table] if transposed_table else []), mode="quick" if quick else "full"
        ),
    )
    if mixtures is not None:
        atomic_write_text(out_dir / "table2-mixtures.csv", mixtures.csv(mode="quick" if quick else "full"))
    summary = {
        "experiment": EXPERIMENT, "quick": quick, "mode": asdict(mode), "dbns": records, "transposed": transposed,
        "mixtures": mobs, "seconds": seconds,
        "paper": {"table2": PAPER, "rbm": PAPER_RBM, "transposed_test": PAPER_TRANSPOSED_TEST, "mob": PAPER_MOB},
    }  # fmt: skip
    save_json(summary, out_dir / "table2.json")
    summary["files"] = ["table2.md", "table2.csv", "table2.json"] + (["table2-mixtures.csv"] if mobs else [])
    summary["files"] += ["fig2_samples.png"] if plotted else []
    summary["report"] = "table2.md"
    return summary


__all__ = [
    "PAPER",
    "PAPER_MOB",
    "PAPER_RBM",
    "PAPER_TRANSPOSED_TEST",
    "SPECS",
    "DBNSpec",
    "Mode",
    "run_table2",
]
