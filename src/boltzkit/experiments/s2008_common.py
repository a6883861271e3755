"""The procedure shared by the reproductions of Salakhutdinov (2008), "S2", Tables 1 and 2.

S2 Sec. 5 trains every model the same way: minibatches of 100 cases, 100 persistent chains
updated by 5 Gibbs sweeps per parameter update (the stochastic approximation procedure, SAP,
Sec. 4.1.1), 500 epochs, an initial learning rate of 0.005 decreased to 0, and for Boltzmann
machines a damped mean-field positive phase (Sec. 4.3, Eqs. 52-54): the recipe ``s2008-sap``
(:mod:`boltzkit.learning.recipes`). ``log Z`` comes from AIS (Sec. 3.2) along the path from a
base-rate model fitted to the training data (Eq. 43; Sec. 4.3.1 for a BM, whose path runs over
``{v, h}``), with 1,000 / 4,000 / 5,000 betas spaced uniformly on [0, 0.5] / [0.5, 0.9] / [0.9, 1]
(Sec. 5.1: 10,000 intermediate distributions) and 100 runs.

This module holds what is S2's: the model specs, the training settings as variants of that recipe,
the training-data conventions and the names of S2's AIS schedules. The stages (training, AIS, the
variational methods) are the engine's (:mod:`boltzkit.experiments.engine`), the cells, tables and
plots the report's (:mod:`boltzkit.experiments.report`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.schedules import S2_SEGMENTS, s2_betas
from boltzkit.experiments.engine import (
    Context,
    ais_stage,
    betas_key,
    model_stage,
    stage_seed,
    variational_stage,
    zoo_model,
)
from boltzkit.experiments.report import VariationalSettings
from boltzkit.jsonio import to_jsonable
from boltzkit.learning import train_model
from boltzkit.learning.recipes import RECIPES, Recipe
from boltzkit.models import BoltzmannMachine

#: Training images of S2 Sec. 5 (600 minibatches of 100): our ``train`` + ``valid`` splits.
MNIST_TRAIN_SPLITS = ("train", "valid")
#: Default AIS schedule spec (the CLI's default): S2's, scaled by the mode.
PAPER_BETAS = "paper"


@dataclass(frozen=True)
class ModelSpec:
    """One model of a table: its name in the paper, kind, training data and hidden units.

    ``data`` is ``"mnist"`` (binarized MNIST, 784 visible units) or ``"mnist-patches"`` (4 x 4
    patches at random positions of the MNIST images, 16 visible units; S2 Sec. 5).
    """

    name: str
    kind: str
    data: str
    n_hidden: int
    #: The zoo model that stands for this one in full mode, when the zoo holds it.
    zoo: str | None = None

    def record(self) -> dict[str, Any]:
        """The spec in stage configs: what the model is (its zoo stand-in is named by the training
        record instead, so configs of trained models do not change with it)."""
        return {"name": self.name, "kind": self.kind, "data": self.data, "n_hidden": self.n_hidden}

    @property
    def slug(self) -> str:
        return self.name.lower().replace(" ", "-").replace("(", "_").replace(")", "")


@dataclass(frozen=True)
class TrainingSettings:
    """SAP training (S2 Secs. 4.1.1, 5): the recipe ``s2008-sap`` with these values; the defaults
    are the paper's except ``epochs``.

    Attributes
    ----------
    epochs
        Passes through the training data (the paper: 500).
    lr
        Initial learning rate, decayed linearly to 0 over all updates (the paper: 0.005).
    k
        Gibbs sweeps of the persistent chains per update (the paper: 5).
    batch_size, n_chains
        Cases per minibatch and persistent chains (the paper: 100 and 100).
    damping
        Damping of the mean-field positive phase of a BM (S2 Sec. 4.3: "damped"; the paper gives
        no value).
    train_size
        Use only the first ``train_size`` training cases (``None``: all 60,000, as the paper).
    """

    epochs: int
    lr: float = 0.005
    k: int = 5
    batch_size: int = 100
    n_chains: int = 100
    damping: float = 0.5
    train_size: int | None = None

    def recipe(self) -> Recipe:
        """The recipe ``s2008-sap`` with these settings."""
        return RECIPES["s2008-sap"].replace(
            epochs=self.epochs, lr=self.lr, k=self.k, batch_size=self.batch_size, n_chains=self.n_chains
        )


#: S2 Sec. 5, to the letter.
PAPER_TRAINING = TrainingSettings(epochs=500)
#: Training cases of S2 Sec. 5 (MNIST images, or one patch of each).
PAPER_TRAIN_CASES = 60_000


def training_differences(settings: TrainingSettings) -> list[str]:
    """Sentences naming each training setting that differs from :data:`PAPER_TRAINING`."""
    notes = []
    paper = asdict(PAPER_TRAINING)
    labels = {
        "epochs": "epochs",
        "lr": "initial learning rate (decayed linearly to 0)",
        "k": "Gibbs sweeps per update",
        "batch_size": "minibatch size",
        "n_chains": "persistent chains",
    }
    for key, label in labels.items():
        ours = getattr(settings, key)
        if ours != paper[key]:
            notes.append(f"{label}: {ours:g} (the paper: {paper[key]:g})")
    if settings.train_size is not None and settings.train_size < PAPER_TRAIN_CASES:
        notes.append(f"training cases: the first {settings.train_size:,} (the paper: 60,000)")
    return notes


def with_overrides(
    settings: TrainingSettings, *, epochs: int | None = None, train_size: int | None = None
) -> TrainingSettings:
    """``settings`` with the runner's ``epochs`` / ``train_size`` overrides applied."""
    if epochs is not None:
        settings = replace(settings, epochs=int(epochs))
    if train_size is not None:
        settings = replace(settings, train_size=int(train_size))
    return settings


# ------------------------------------------------------------------------------------- data
def load_training_data(spec: ModelSpec, *, data_dir: str | None, seed: int, train_size: int | None) -> Tensor:
    """The training cases of ``spec``: binarized MNIST (our ``train`` + ``valid`` splits, the
    paper's 60,000 training images) or one 4 x 4 patch of each of them (S2 Sec. 5), first
    ``train_size`` rows when given."""
    if spec.data == "mnist":
        x = torch.cat([load_dataset("mnist", split=s, data_dir=data_dir).x for s in MNIST_TRAIN_SPLITS])
    elif spec.data == "mnist-patches":
        x = load_dataset("mnist-patches", split="train", data_dir=data_dir, seed=seed).x
    else:
        raise BoltzkitError("unknown training data of a model spec", got=spec.data)
    return x if train_size is None else x[: int(train_size)]


# ---------------------------------------------------------------------------- AIS schedules
def resolve_schedule(betas: str | int | Tensor, default_scale: float) -> tuple[str | int | Tensor, str]:
    """The schedule that ``betas`` names, and its label for the report and the stage configs.

    ``"paper"`` (the command line's default) is S2's schedule (Sec. 5.1) with every segment's
    number of steps multiplied by the mode's ``default_scale``; ``"s2"`` is S2's schedule and
    ``"s2:SCALE"`` a scaled copy of it; anything else goes to :func:`~boltzkit.estimators.ais.ais`
    unchanged (``N`` linear points, ``adaptive:N``, a file).
    """
    if isinstance(betas, Tensor):  # named by its values' digest: equal lengths are not the same schedule
        return betas, f"custom ({betas_key(betas)})"
    text = str(betas).strip().lower()
    scale: float | None = None
    if text == PAPER_BETAS:
        scale = float(default_scale)
    elif text == "s2":
        scale = 1.0
    elif text.startswith("s2:"):
        try:
            scale = float(text[3:])
        except ValueError:
            scale = math.nan
        if not (math.isfinite(scale) and scale > 0):
            raise BoltzkitError("the scale of an s2 schedule must be a positive number", got=betas)
    if scale is None:
        return betas, str(betas)
    counts = [max(1, round(n * scale)) for _, _, n in S2_SEGMENTS]
    label = "S2 {}/{}/{} = {:,} steps".format(*(f"{c:,}" for c in counts), sum(counts))
    if scale != 1.0:
        label += f" (the paper's x {scale:g})"
    return s2_betas(scale), label


# ---------------------------------------------------------------------------------- stages
def train_or_load(
    spec: ModelSpec,
    settings: TrainingSettings,
    train_x: Tensor,
    out_dir: Path,
    *,
    seed: int,
    device: torch.device,
    progress: bool,
    use_zoo: bool = False,
) -> tuple[BoltzmannMachine, dict[str, Any]]:
    """Train ``spec`` by S2's SAP recipe, or load it from ``out_dir/models`` when done (the
    engine's :func:`~boltzkit.experiments.engine.model_stage`: checkpoints every epoch, resumes,
    refuses a model of other settings). With ``use_zoo``, zoo model ``spec.zoo`` stands for it when
    the zoo holds it (trained once, at full size; its card says how), and ``training["config"]``
    names it, so the later stages' records are its own.

    Returns
    -------
    (model, training)
        ``training`` holds the config, the recipe, the training time and the last epoch's record.
    """
    if use_zoo and spec.zoo is not None:
        found = zoo_model(spec.zoo, device=device)
        if found is not None:
            model, training = found
            return model, {**training, "config": {"model": spec.record(), "zoo": spec.zoo}}
    recipe = settings.recipe()
    config = {
        "model": spec.record(),
        "training": asdict(settings),
        "seed": seed,
        "n_train": int(train_x.shape[0]),
    }

    def train(checkpoint: Path) -> tuple[Any, dict[str, Any]]:
        model, history = train_model(
            train_x, kind=spec.kind, hidden=spec.n_hidden, recipe=recipe, positive="auto",
            damping=settings.damping, seed=seed, device=device, progress=progress,
            checkpoint_path=checkpoint, checkpoint_every=1, resume=checkpoint.is_file(),
        )  # fmt: skip
        records = list(history)
        return model, {
            "recipe": recipe.name,
            "positive": "damped mean-field" if spec.kind == "bm" else "exact p(h | v)",
            "last_epoch": to_jsonable(records[-1]) if records else None,
        }

    return model_stage(out_dir / "models" / f"{spec.slug}.safetensors", config, train, device=device)


def s2_stage_seed(seed: int, stage: str, spec: ModelSpec) -> int:
    """Independent seeds per stage (training, AIS, samples) and model, derived from the run's
    ``seed``: the numbers of S2's reproductions since their first runs."""
    return stage_seed(seed, "s2008", stage, spec.name)


def s2_config(spec: ModelSpec, training: dict[str, Any]) -> dict[str, Any]:
    """What every stage of one of S2's models is keyed on: the model and its training settings."""
    return {"model": spec.record(), "training": training["config"]}


def s2_ais_row(
    ctx: Context,
    spec: ModelSpec,
    model: BoltzmannMachine,
    training: dict[str, Any],
    train_x: Tensor,
    *,
    n_chains: int,
    betas: str | int | Tensor,
    schedule_label: str,
) -> dict[str, Any]:
    """AIS on one of S2's models from the base-rate model of its training data (S2 Eq. 43; the
    engine's AIS stage with S2's seed) as the start of the model's table row: name, kind, layer
    sizes, training, the AIS record (which :func:`~boltzkit.experiments.engine.record_log_z` reads
    back) and the seconds of training and AIS."""
    ais = ais_stage(
        ctx, spec.slug, model, s2_config(spec, training), base_data=train_x, n_chains=n_chains, betas=betas,
        schedule=schedule_label, seed=s2_stage_seed(ctx.seed, "ais", spec),
    )  # fmt: skip
    return {
        "model": spec.name,
        "kind": spec.kind,
        "layer_sizes": list(model.layer_sizes),
        "training": training,
        **{k: v for k, v in ais.items() if k not in ("config", "seconds")},
        "seconds": {"train": training.get("seconds"), "ais": ais["ais"]["seconds"]},
    }


def s2_variational(
    ctx: Context,
    spec: ModelSpec,
    model: BoltzmannMachine,
    training: dict[str, Any],
    settings: VariationalSettings,
) -> dict[str, dict[str, Any]]:
    """The engine's variational stage for one of S2's models (records in ``variational/``)."""
    return variational_stage(ctx, spec.slug, model, s2_config(spec, training), settings.options)


def with_variational(record: dict[str, Any], variational: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``record`` (an estimate stage's) with the variational results and the table's Bethe / TRW
    columns (``bethe_log_z``, ``trw_log_z``) filled in."""
    return {
        **record,
        "bethe_log_z": variational["bethe"]["log_z"],
        "trw_log_z": variational["trw"]["log_z"],
        "variational": variational,
    }


__all__ = [
    "MNIST_TRAIN_SPLITS",
    "PAPER_BETAS",
    "PAPER_TRAINING",
    "PAPER_TRAIN_CASES",
    "ModelSpec",
    "TrainingSettings",
    "load_training_data",
    "resolve_schedule",
    "s2_ais_row",
    "s2_config",
    "s2_stage_seed",
    "s2_variational",
    "train_or_load",
    "training_differences",
    "with_overrides",
    "with_variational",
]
