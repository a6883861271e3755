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
runs (S2 Fig. 3). It also holds the variational stage (:func:`variational_stage`: mean-field, Bethe,
TAP and TRW ``log Z`` of a model, S2 Secs. 2.3-2.5 and 5.1; one stored record per model and method)
and the comparison of every ``log Z`` method per model (:func:`method_rows`,
:func:`comparison_markdown`, :func:`plot_logz_methods`) that both tables append to their reports.
"""

from __future__ import annotations

import json
import math
import time
import warnings
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
from boltzkit.variational import ConvergenceWarning, variational_log_z

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
        lr_schedule="linear",
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


# ------------------------------------------------------------------------------ variational
#: The variational methods of the comparison, in table order (:mod:`boltzkit.variational`).
VARIATIONAL_METHODS = ("mean-field", "bethe", "tap", "trw")
#: Their column headings.
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
        Starts of mean-field and TAP (all 1/2, then random); the best is kept.
    """

    trw_rho: str = "optimized"
    fw_steps: int = 30
    n_starts: int = 5

    def options(self, method: str) -> dict[str, Any]:
        """The keyword arguments of :func:`variational_log_z` that these settings fix for ``method``."""
        if method == "trw":
            return (
                {"rho": self.trw_rho, "fw_steps": self.fw_steps}
                if self.trw_rho == "optimized"
                else {"rho": self.trw_rho}
            )
        if method in ("mean-field", "tap"):
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


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float replaced by ``None`` (strict JSON; e.g. the message residual
    of a TRW solve that skipped message passing is NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def variational_stage(
    spec: ModelSpec,
    model: BoltzmannMachine,
    training_config: dict[str, Any],
    out_dir: Path,
    settings: VariationalSettings,
    *,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """Mean-field, Bethe, TAP and TRW ``log Z`` of ``model``, each a resumable stage of its own
    (``out_dir/variational/<model>-<method>.json``; its config names only what that method uses, so
    a change of the TRW settings recomputes TRW alone). Convergence warnings are not raised: whether
    each method converged is in its record.

    Returns
    -------
    dict
        Per method, :meth:`~boltzkit.variational.VariationalResult.to_dict` (``log_z``, ``bound``,
        ``converged``, ``iterations``, ``residual``, ``seconds`` and the settings).
    """
    out: dict[str, dict[str, Any]] = {}
    start_seed = stage_seed(seed, "variational", spec)
    for method in VARIATIONAL_METHODS:
        options = settings.options(method)
        if method in ("mean-field", "tap"):
            options["seed"] = start_seed
        config = {"model": asdict(spec), "training": training_config, "method": method, "options": options}

        def compute(method: str = method, options: dict[str, Any] = options) -> dict[str, Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = variational_log_z(model, method, **options)
            return {"model": spec.name, "result": _finite(result.to_dict()), "seconds": result.seconds}

        path = out_dir / "variational" / f"{spec.slug}-{method}.json"
        out[method] = cached_stage(path, config, compute)["result"]
    return out


def with_variational(record: dict[str, Any], variational: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``record`` (an estimate stage's) with the variational results and the table's Bethe / TRW
    columns (``bethe_log_z``, ``trw_log_z``) filled in."""
    return {
        **record,
        "bethe_log_z": variational["bethe"]["log_z"],
        "trw_log_z": variational["trw"]["log_z"],
        "variational": variational,
    }


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
    n = torch.get_num_threads()
    return f"torch {torch.__version__} on {device} ({n} CPU thread{'s' if n != 1 else ''})"


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
    The counts start at 2 runs (one run has no spread to estimate).

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
        counts = [m for m in (2, 5, 10, 20, 50, 100, 200, 500, 1000) if m <= lw.numel()]
        if lw.numel() not in counts:
            counts.append(int(lw.numel()))
        mids, lows, highs = [], [], []
        undefined = False
        for m in counts:
            b = LogZResult.from_log_weights("ais", lw[:m], log_z_start=panel.log_z_start, n_betas=0).band
            mids.append(b.value)
            highs.append(b.plus_3sigma - b.value)
            lows.append(b.value - b.minus_3sigma if b.minus_3sigma is not None else highs[-1])
            if b.minus_3sigma is None:
                undefined = True
                ax.annotate("↓", (m, b.value - highs[-1]), ha="center", va="top", fontsize=9)
        ax.errorbar(counts, mids, yerr=[lows, highs], fmt="o-", ms=4, capsize=3, label="AIS, ± 3σ̂")
        if undefined:
            ax.plot([], [], ls="none", marker=r"$\downarrow$", color="k", label="Ẑ − 3σ̂ ≤ 0")
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
)


def method_rows(
    records: Sequence[dict[str, Any]], paper: dict[str, dict[str, float]] | None = None
) -> list[dict[str, Any]]:
    """One row per model and ``log Z`` method (exact when known, AIS with its ``ln(Z_hat ± 3
    sigma_hat)`` band, then the variational methods): value, bound, convergence, iterations,
    residual, seconds, the difference from the reference (exact, else AIS) and the paper's value
    (``paper[model][method]``) where it gives one. The JSON and CSV form of the comparison."""
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
                {
                    "minus_3sigma": a["log_z_minus_3sigma"],
                    "plus_3sigma": a["log_z_plus_3sigma"],
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
            rows.append(row)
    return rows


def methods_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The comparison as CSV (``logz_methods.csv``)."""
    return csv_text(METHOD_CSV_COLUMNS, [[r[c] for c in METHOD_CSV_COLUMNS] for r in rows])


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
            f"{fmt(a['log_z'])} ({pair(a['log_z_minus_3sigma'], a['log_z_plus_3sigma'])})",
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
        f"{settings.n_starts} starts (all 1/2, then random). TRW: {settings.trw_label()}"
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
    ``methods`` holds ``(label, log Z, bound, converged)``.
    """

    title: str
    reference: float
    reference_label: str
    ais: tuple[float, float | None, float | None]
    methods: Sequence[tuple[str, float, str, bool]]


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
    plt = matplotlib_pyplot()
    if plt is None or not panels:
        return False
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.9), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        ref = panel.reference
        value, lo, hi = panel.ais
        mid = value - ref
        hi_d = (hi if hi is not None else value) - ref
        lo_d = (lo - ref) if lo is not None else mid - (hi_d - mid)
        ax.axhspan(lo_d, hi_d, color="tab:blue", alpha=0.15, lw=0)
        ax.errorbar([0], [mid], yerr=[[mid - lo_d], [hi_d - mid]], fmt="s", color="tab:blue", ms=5, capsize=3)
        if lo is None:
            ax.annotate("↓", (0, lo_d), ha="center", va="top", fontsize=9)
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
        plt.Line2D([], [], color="k", ls="--", lw=1, label=" / ".join(ref_labels) + " (reference)"),
        plt.Line2D([], [], ls="none", marker="s", color="tab:blue", label="AIS, ln (Ẑ ± 3σ̂) shaded"),
        plt.Line2D([], [], ls="none", marker="^", color="tab:green", label="lower bound"),
        plt.Line2D([], [], ls="none", marker="v", color="tab:red", label="upper bound"),
        plt.Line2D([], [], ls="none", marker="o", color="tab:purple", label="no bound"),
        plt.Line2D([], [], ls="none", marker="o", mfc="none", color="gray", label="not converged"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = [
    "DASH",
    "METHOD_CSV_COLUMNS",
    "METHOD_LABELS",
    "PAPER_BETAS",
    "PAPER_TRAINING",
    "PAPER_TRAIN_CASES",
    "VARIATIONAL_METHODS",
    "MethodsPanel",
    "ModelSpec",
    "RunsPanel",
    "TrainingSettings",
    "VariationalSettings",
    "ais_record",
    "ais_summary",
    "cached_stage",
    "cell",
    "comparison_markdown",
    "csv_text",
    "first_runs",
    "fmt",
    "load_json",
    "load_training_data",
    "machine_note",
    "matplotlib_pyplot",
    "method_rows",
    "methods_csv",
    "methods_panels",
    "pair",
    "plot_ais_runs",
    "plot_logz_methods",
    "resolve_schedule",
    "run_ais",
    "stage_seed",
    "train_or_load",
    "training_differences",
    "variational_stage",
    "with_overrides",
    "with_variational",
    "with_variational_overrides",
]
