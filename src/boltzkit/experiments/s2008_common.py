"""The procedure shared by the reproductions of Salakhutdinov (2008), "S2", Tables 1 and 2.

S2 Sec. 5 trains every model the same way: minibatches of 100 cases, 100 persistent chains
updated by 5 Gibbs sweeps per parameter update (the stochastic approximation procedure, SAP,
Sec. 4.1.1), 500 epochs, an initial learning rate of 0.005 decreased to 0, and for Boltzmann
machines a damped mean-field positive phase (Sec. 4.3, Eqs. 52-54). ``log Z`` comes from AIS
(Sec. 3.2) along the path from a base-rate model fitted to the training data (Eq. 43; Sec. 4.3.1
for a BM, whose path runs over ``{v, h}``), with 1,000 / 4,000 / 5,000 betas spaced uniformly on
[0, 0.5] / [0.5, 0.9] / [0.9, 1] (Sec. 5.1: 10,000 intermediate distributions) and 100 runs.

This module holds those pieces: the declarative specs (:class:`ModelSpec`,
:class:`TrainingSettings`), the training-data conventions, the AIS schedule names, resumable
stages (:func:`train_or_load`, :func:`cached_stage`: each stage writes its output into the
experiment's folder and a rerun reuses it, refusing output of other settings), the AIS summaries,
the formatting of ``ours / paper`` cells and the plot of ``log Z_hat`` against the number of AIS
runs (S2 Fig. 3).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit.data import derive_seed, load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import ais
from boltzkit.estimators.paths import base_rate_path
from boltzkit.estimators.result import LogZResult
from boltzkit.estimators.schedules import S2_SEGMENTS, s2_betas
from boltzkit.io import load_model, save_model
from boltzkit.jsonio import save_json, to_jsonable
from boltzkit.learning import train_model
from boltzkit.models import BoltzmannMachine

#: Training images of S2 Sec. 5 (600 minibatches of 100): our ``train`` + ``valid`` splits.
MNIST_TRAIN_SPLITS = ("train", "valid")
#: Default AIS schedule spec (the CLI's default): S2's, scaled by the mode.
PAPER_BETAS = "paper"
#: Missing value in a table.
DASH = "—"


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

    @property
    def slug(self) -> str:
        return self.name.lower().replace(" ", "-").replace("(", "_").replace(")", "")


@dataclass(frozen=True)
class TrainingSettings:
    """SAP training (S2 Secs. 4.1.1, 5); the defaults are the paper's except ``epochs``.

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


#: S2 Sec. 5, to the letter.
PAPER_TRAINING = TrainingSettings(epochs=500)


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
    if settings.train_size is not None:
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
    if isinstance(betas, Tensor):
        return betas, f"custom ({betas.numel() - 1} steps)"
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


def schedule_steps(betas: str | int | Tensor) -> int | None:
    """Number of steps of a resolved schedule when known without running it."""
    return int(betas.numel()) - 1 if isinstance(betas, Tensor) else None


# --------------------------------------------------------------------------- resumable stages
def _normalized(config: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(to_jsonable(config)))


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` when the file does not exist."""
    return json.loads(path.read_text()) if path.is_file() else None


def _check_config(path: Path, stored: Any, config: dict[str, Any]) -> None:
    if stored != config:
        diff = sorted(k for k in set(stored or {}) | set(config) if (stored or {}).get(k) != config.get(k))
        raise BoltzkitError(
            f"{path} was made with other settings ({', '.join(diff) or 'unknown'})",
            got=json.dumps({k: (stored or {}).get(k) for k in diff}),
            expected=json.dumps({k: config.get(k) for k in diff}),
            hint="write into a fresh --out folder, or delete that file to recompute it.",
        )


def cached_stage(path: Path, config: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Return the record in ``path`` when it was made with ``config``; else ``compute()`` it, add
    ``config`` and the stage's wall time (``"seconds"`` unless the record has its own) and save it
    atomically. A record of other settings raises a :class:`BoltzkitError` (no silent mixing)."""
    config = _normalized(config)
    done = load_json(path)
    if done is not None:
        _check_config(path, done.get("config"), config)
        return done
    t0 = time.perf_counter()
    record = compute()
    record = {"config": config, **record}
    record.setdefault("seconds", time.perf_counter() - t0)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_json(record, path)
    return record


def train_or_load(
    spec: ModelSpec,
    settings: TrainingSettings,
    train_x: Tensor,
    out_dir: Path,
    *,
    seed: int,
    device: torch.device,
    progress: bool,
) -> tuple[BoltzmannMachine, dict[str, Any]]:
    """Train ``spec`` by S2's SAP procedure, or load it from ``out_dir/models`` when done.

    Training checkpoints after every epoch into ``out_dir/checkpoints`` and resumes from there,
    so an interrupted run loses at most one epoch. The model file's metadata keep the settings
    (a model of other settings is refused) and the training time.

    Returns
    -------
    (model, training)
        ``training`` holds the settings, seed, training time and the last epoch's record.
    """
    config = _normalized(
        {"model": asdict(spec), "training": asdict(settings), "seed": seed, "n_train": int(train_x.shape[0])}
    )
    model_path = out_dir / "models" / f"{spec.slug}.safetensors"
    if model_path.is_file():
        model, meta = load_model(model_path, device=device)
        training = meta.get("training", {})
        _check_config(model_path, training.get("config"), config)
        return model, training  # type: ignore[return-value]
    checkpoint = out_dir / "checkpoints" / f"{spec.slug}.ckpt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, history = train_model(
        train_x,
        kind=spec.kind,
        hidden=spec.n_hidden,
        method="sap",
        k=settings.k,
        epochs=settings.epochs,
        lr=settings.lr,
        lr_decay=True,
        batch_size=settings.batch_size,
        n_chains=settings.n_chains,
        positive="auto",
        damping=settings.damping,
        seed=seed,
        device=device,
        progress=progress,
        checkpoint_path=checkpoint,
        checkpoint_every=1,
        resume=checkpoint.is_file(),
    )
    records = list(history)
    training = {
        "config": config,
        "seconds": time.perf_counter() - t0,
        "positive": "damped mean-field" if spec.kind == "bm" else "exact p(h | v)",
        "last_epoch": to_jsonable(records[-1]) if records else None,
    }
    model_path.parent.mkdir(parents=True, exist_ok=True)
    save_model(model, model_path, metadata={"training": training, "name": spec.name, "data": spec.data})
    return model, training  # type: ignore[return-value]


def stage_seed(seed: int, stage: str, spec: ModelSpec) -> int:
    """Independent seeds per stage and model, derived from the run's ``seed``."""
    return derive_seed(seed, "s2008", stage, spec.name) % (2**62)


# ------------------------------------------------------------------------------------- AIS
def run_ais(
    model: BoltzmannMachine,
    base_data: Tensor,
    *,
    n_chains: int,
    betas: str | int | Tensor,
    seed: int,
    device: torch.device,
    progress: bool,
) -> LogZResult:
    """AIS from the base-rate model of ``base_data`` (S2 Eq. 43, smoothed) to ``model``."""
    return ais(
        base_rate_path(model, data=base_data, device=device),
        n_chains=n_chains,
        betas=betas,
        seed=seed,
        progress=progress,
    )


def first_runs(result: LogZResult, n: int) -> LogZResult:
    """The estimate from the first ``n`` of ``result``'s AIS runs (S2 Fig. 3, Table 1's 10 runs)."""
    assert result.log_weights is not None
    return LogZResult.from_log_weights(
        result.method,
        result.log_weights[:n],
        log_z_start=result.log_z_start,
        n_betas=result.n_betas,
        seconds=result.seconds * n / max(1, result.n_chains),
    )


AIS_KEYS = (
    "log_z",
    "log_z_minus_sigma",
    "log_z_plus_sigma",
    "log_z_minus_3sigma",
    "log_z_plus_3sigma",
    "log_z_stderr",
    "ess",
    "n_chains",
    "n_betas",
    "seconds",
)


def ais_summary(result: LogZResult) -> dict[str, Any]:
    """The Table columns of an AIS estimate: ``log Z_hat``, ``log(Z_hat ± sigma)``, ``log(Z_hat ±
    3 sigma)`` (``None`` where ``Z_hat <= k sigma``), standard error, ESS, runs, steps, seconds."""
    d = result.to_dict()
    return {k: d.get(k) for k in AIS_KEYS}


def ais_record(result: LogZResult, *, runs: Sequence[int] = (10,)) -> dict[str, Any]:
    """What an estimate stage stores: the summary of all runs, of the first ``runs`` runs, the
    settings, and the raw log-weights (for the plot of S2 Fig. 3)."""
    rec: dict[str, Any] = {"ais": ais_summary(result)}
    for n in runs:
        rec[f"ais_{n}"] = ais_summary(first_runs(result, n)) if result.n_chains > n else None
    rec["ais_settings"] = to_jsonable(result.settings)
    rec["log_z_start"] = result.log_z_start
    rec["log_weights"] = result.log_weights.tolist() if result.log_weights is not None else []
    return rec


# -------------------------------------------------------------------------------- formatting
def fmt(x: float | None, digits: int = 2) -> str:
    """A number with ``digits`` decimals, or a dash for a missing or non-finite value."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return DASH
    return f"{x:.{digits}f}"


def pair(a: float | None, b: float | None) -> str:
    """``a, b`` (one band), or a dash when both ends are missing."""
    return DASH if a is None and b is None else f"{fmt(a)}, {fmt(b)}"


def cell(ours: str, paper: str) -> str:
    """An ``ours / paper`` table cell."""
    return f"{ours} / {paper}"


def csv_text(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Comma-separated lines (empty fields for ``None``); values hold no commas."""
    lines = [",".join(cols)]
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def machine_note(device: torch.device) -> str:
    """torch version, device and threads of this run."""
    return f"torch {torch.__version__} on {device} ({torch.get_num_threads()} CPU threads)"


# -------------------------------------------------------------------------------------- plots
def matplotlib_pyplot() -> Any | None:
    """``matplotlib.pyplot`` with the Agg backend, or ``None`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


@dataclass(frozen=True)
class RunsPanel:
    """One panel of S2 Fig. 3: a model's AIS log-weights and, when known, its exact ``log Z``."""

    title: str
    log_weights: Sequence[float]
    log_z_start: float
    exact: float | None = None


def plot_ais_runs(panels: Sequence[RunsPanel], path: Path, *, suptitle: str | None = None) -> bool:
    """S2 Fig. 3: ``log Z_hat`` against the number of AIS runs (the first ``m`` runs pooled), with
    error bars ``log(Z_hat ± 3 sigma_hat)``, one panel per model, the exact value as a dashed line.

    Where ``Z_hat <= 3 sigma_hat`` the lower end ``log(Z_hat - 3 sigma_hat)`` is undefined: the
    bar is drawn as long as the upper one and marked with an arrow. Returns ``False`` (and writes
    nothing) when matplotlib is missing.
    """
    plt = matplotlib_pyplot()
    if plt is None or not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.3), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        lw = torch.tensor(list(panel.log_weights), dtype=torch.float64)
        counts = [m for m in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if m <= lw.numel()]
        if lw.numel() not in counts:
            counts.append(int(lw.numel()))
        mids, lows, highs = [], [], []
        for m in counts:
            b = LogZResult.from_log_weights("ais", lw[:m], log_z_start=panel.log_z_start, n_betas=0).band
            mids.append(b.value)
            highs.append(b.plus_3sigma - b.value)
            lows.append(b.value - b.minus_3sigma if b.minus_3sigma is not None else highs[-1])
            if b.minus_3sigma is None:
                ax.annotate("↓", (m, b.value - highs[-1]), ha="center", va="top", fontsize=9)
        ax.errorbar(counts, mids, yerr=[lows, highs], fmt="o-", ms=4, capsize=3, label="AIS, ± 3σ̂")
        if panel.exact is not None:
            ax.axhline(panel.exact, color="k", ls="--", lw=1, label="exact")
        ax.set_xscale("log")
        ax.set_xlabel("number of AIS runs")
        ax.set_ylabel("ln Ẑ (nats)")
        ax.set_title(panel.title)
        ax.legend(fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = [
    "DASH",
    "PAPER_BETAS",
    "PAPER_TRAINING",
    "ModelSpec",
    "RunsPanel",
    "TrainingSettings",
    "ais_record",
    "ais_summary",
    "cached_stage",
    "cell",
    "csv_text",
    "first_runs",
    "fmt",
    "load_json",
    "load_training_data",
    "machine_note",
    "matplotlib_pyplot",
    "pair",
    "plot_ais_runs",
    "resolve_schedule",
    "run_ais",
    "schedule_steps",
    "stage_seed",
    "train_or_load",
    "training_differences",
    "with_overrides",
]
