"""Salakhutdinov & Murray (2008), Table 1 and Fig. 3: AIS on MNIST RBMs, next to exact values.

The experiment trains the paper's RBMs on binarized MNIST, estimates ``log Z`` with 10 and 100
AIS runs along the paper's schedule (500 / 4,000 / 10,000 betas on [0, 0.5] / [0.5, 0.9] /
[0.9, 1]; Sec. 5.1) from a base-rate model fitted to the training data (Eq. 18), compares with
exact ``log Z`` where the hidden layer can be enumerated, and reports mean train/test
log-probabilities with the AIS uncertainty carried through (Table 1's columns). It also runs the
ratio experiment ``log Z_CD1(20) / Z_CD1(25)`` with 10,000 uniform betas (Sec. 5.1).

Every stage writes its results into ``out_dir`` as it finishes (models as boltzkit files,
estimates as JSON), so an interrupted run picks up where it stopped when started again with the
same ``out_dir``. Settings that differ from the paper are listed in the report.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.estimators.ais import ais
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.estimators.paths import base_rate_path, ratio_path
from boltzkit.estimators.result import LogZResult
from boltzkit.io import load_model, save_model
from boltzkit.jsonio import save_json
from boltzkit.learning import train_rbm


@dataclass(frozen=True)
class PaperRow:
    """One row of S&M 2008, Table 1 (``None`` where the paper has no value)."""

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
    name: str
    n_hidden: int
    k: int = 1
    k_schedule: str | None = None
    quick: bool = True


@dataclass(frozen=True)
class TrainingSettings:
    epochs: int
    lr: float = 0.05
    momentum: float = 0.5
    weight_decay: float = 2e-4
    batch_size: int = 100


PAPER: dict[str, PaperRow] = {
    "CD1(25)": PaperRow(
        255.41, 256.52, (255.00, 257.10), (None, 257.73), 3.3, -151.57, -152.68, -152.35, -153.46
    ),
    "CD3(25)": PaperRow(
        307.47, 307.63, (307.44, 307.79), (306.91, 308.05), 3.3, -143.03, -143.20, -143.94, -144.11
    ),
    "CD1(20)": PaperRow(
        279.59, 279.57, (279.43, 279.68), (279.12, 279.87), 3.1, -164.52, -164.50, -164.89, -164.87
    ),
    "CD1(500)": PaperRow(
        None, 350.15, (350.04, 350.25), (349.77, 350.42), 10.4, None, -125.53, None, -122.86
    ),
    "CD3(500)": PaperRow(
        None, 280.09, (279.99, 280.17), (279.76, 280.33), 10.4, None, -105.50, None, -102.81
    ),
    "CD25(500)": PaperRow(None, 451.28, (451.19, 451.37), (450.97, 451.52), 10.4, None, -86.34, None, -83.10),
}
#: S&M 2008, Sec. 5.1: ln Z_CD1(20) / Z_CD1(25) with 100 runs and 10,000 uniform betas.
PAPER_RATIO = {"true": -24.18, "estimate": -24.49, "three_sigma_band": (-24.93, -24.19)}

MODELS = (
    ModelSpec("CD1(25)", 25, k=1),
    ModelSpec("CD3(25)", 25, k=3),
    ModelSpec("CD1(20)", 20, k=1),
    ModelSpec("CD1(500)", 500, k=1, quick=False),
    ModelSpec("CD3(500)", 500, k=3, quick=False),
    ModelSpec("CD25(500)", 500, k_schedule="linear:1:25", quick=False),
)

QUICK_TRAINING = TrainingSettings(epochs=3)
FULL_TRAINING = TrainingSettings(epochs=50)
EXACT_MAX_BITS = 25


def _slug(name: str) -> str:
    return name.lower().replace("(", "_").replace(")", "")


def _band_pair(result: LogZResult, k: int) -> tuple[float | None, float | None]:
    b = result.band
    return (b.minus_sigma, b.plus_sigma) if k == 1 else (b.minus_3sigma, b.plus_3sigma)


def _load_json(path: Path) -> dict[str, Any] | None:
    if path.is_file():
        return json.loads(path.read_text())
    return None


def _save_json(path: Path, obj: dict[str, Any]) -> None:
    save_json(obj, path)


def _train(spec, settings, train_x, test_x, out_dir, seed, device, progress) -> tuple[Any, dict[str, Any]]:
    model_path = out_dir / "models" / f"{_slug(spec.name)}.safetensors"
    if model_path.is_file():
        rbm, meta = load_model(model_path, device=device)
        return rbm, meta.get("training", {})
    t0 = time.perf_counter()
    checkpoint = out_dir / "checkpoints" / f"{_slug(spec.name)}.ckpt"
    rbm, history = train_rbm(
        train_x,
        n_hidden=spec.n_hidden,
        method="cd",
        k=spec.k,
        k_schedule=spec.k_schedule,
        epochs=settings.epochs,
        lr=settings.lr,
        momentum=settings.momentum,
        weight_decay=settings.weight_decay,
        batch_size=settings.batch_size,
        seed=seed,
        device=device,
        progress=progress,
        checkpoint_path=checkpoint,
        checkpoint_every=1,
        resume=checkpoint.is_file(),
    )
    training = {
        **asdict(settings),
        "k": spec.k,
        "k_schedule": spec.k_schedule,
        "seed": seed,
        "seconds": time.perf_counter() - t0,
    }
    model_path.parent.mkdir(parents=True, exist_ok=True)
    save_model(rbm, model_path, metadata={"training": training, "data": "mnist", "name": spec.name})
    return rbm, training


def _ais_record(result: LogZResult) -> dict[str, Any]:
    d = result.to_dict()
    return {
        k: d[k]
        for k in (
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
    }


def _run_model(spec, settings, data, out_dir, *, seed, device, n_chains, betas, progress, exact_dtype):
    record_path = out_dir / "results" / f"{_slug(spec.name)}.json"
    done = _load_json(record_path)
    if done is not None:
        return done
    train_x, test_x = data
    rbm, training = _train(spec, settings, train_x, test_x, out_dir, seed, device, progress)
    record: dict[str, Any] = {"model": spec.name, "n_hidden": spec.n_hidden, "training": training}
    exact = None
    if spec.n_hidden <= EXACT_MAX_BITS:
        exact = exact_log_z(rbm, max_bits=EXACT_MAX_BITS, dtype=exact_dtype)
        record["exact"] = {"log_z": exact.log_z, "seconds": exact.seconds, "dtype": str(exact_dtype)}
    ais_result = ais(
        base_rate_path(rbm, data=train_x, device=device),
        n_chains=n_chains,
        betas=betas,
        seed=seed + 1,
        progress=progress,
    )
    ais10 = LogZResult.from_log_weights(
        "ais",
        ais_result.log_weights[:10],
        log_z_start=ais_result.log_z_start,
        n_betas=ais_result.n_betas,
        seconds=ais_result.seconds * 10 / n_chains,
    )
    record["ais_100"] = _ais_record(ais_result)
    record["ais_10"] = _ais_record(ais10)
    record["ais_settings"] = {k: v for k, v in ais_result.settings.items()}
    record["log_weights"] = ais_result.log_weights.tolist()
    for split, x in (("train", train_x), ("test", test_x)):
        est = dataset_log_prob(rbm, x, ais_result)
        record[f"{split}_estimate"] = est.to_dict()
        if exact is not None:
            record[f"{split}_true"] = dataset_log_prob(rbm, x, exact).to_dict()
    record_path.parent.mkdir(parents=True, exist_ok=True)
    _save_json(record_path, record)
    return record


def _run_ratio(out_dir, *, seed, device, n_chains, progress, exact_dtype) -> dict[str, Any]:
    path = out_dir / "results" / "ratio_cd1_20_cd1_25.json"
    done = _load_json(path)
    if done is not None:
        return done
    rbm_b, _ = load_model(out_dir / "models" / f"{_slug('CD1(20)')}.safetensors", device=device)
    rbm_a, _ = load_model(out_dir / "models" / f"{_slug('CD1(25)')}.safetensors", device=device)
    res = ais(
        ratio_path(rbm_a, rbm_b, max_bits=EXACT_MAX_BITS, device=device),
        n_chains=n_chains,
        betas=10_001,
        seed=seed + 2,
        progress=progress,
    )
    d = res.to_dict()
    z_b = _load_json(out_dir / "results" / f"{_slug('CD1(20)')}.json")["exact"]["log_z"]
    z_a = _load_json(out_dir / "results" / f"{_slug('CD1(25)')}.json")["exact"]["log_z"]
    record = {
        "log_ratio": d["log_ratio"],
        "log_ratio_minus_3sigma": d["log_ratio_minus_3sigma"],
        "log_ratio_plus_3sigma": d["log_ratio_plus_3sigma"],
        "true_log_ratio": z_b - z_a,
        "n_chains": n_chains,
        "n_betas": res.n_betas,
        "start": res.settings.get("start"),
        "seconds": res.seconds,
    }
    _save_json(path, record)
    return record


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _pair(a: float | None, b: float | None) -> str:
    return f"{_fmt(a)}, {_fmt(b)}"


def _markdown(records, ratio, settings, quick, machine_note) -> str:
    lines = [
        "# Salakhutdinov & Murray (2008), Table 1 — reproduced with boltzkit",
        "",
        f"Mode: {'quick' if quick else 'full'}. {machine_note}",
        "",
        "Each cell reads *ours / paper*. AIS: base-rate model fitted to the training data, the paper's "
        "schedule (14,500 steps), one Gibbs sweep per beta; 10 runs are the first 10 of the 100 chains.",
        "",
        "| AIS runs | model | true ln Z | ln Ẑ | ln (Ẑ ± σ̂) | ln (Ẑ ± 3σ̂) | AIS seconds | test true | test estimate "
        "| train true | train estimate |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for runs in (10, 100):
        for rec in records:
            name = rec["model"]
            p = PAPER[name]
            a = rec[f"ais_{runs}"]
            true = rec.get("exact", {}).get("log_z")
            te, tr = rec["test_estimate"], rec["train_estimate"]
            te_true = rec.get("test_true", {}).get("mean_log_prob")
            tr_true = rec.get("train_true", {}).get("mean_log_prob")
            paper_cols = runs == 100
            lines.append(
                "| {runs} | {name} | {t} / {pt} | {z} / {pz} | {s} / {ps} | {s3} / {ps3} | {sec} / {pm} | "
                "{tet} / {ptet} | {tee} / {ptee} | {trt} / {ptrt} | {tre} / {ptre} |".format(
                    runs=runs,
                    name=name,
                    t=_fmt(true),
                    pt=_fmt(p.true_log_z),
                    z=_fmt(a["log_z"]),
                    pz=_fmt(p.log_z) if paper_cols else "—",
                    s=_pair(a["log_z_minus_sigma"], a["log_z_plus_sigma"]),
                    ps=_pair(*p.sigma_band) if paper_cols else "—",
                    s3=_pair(a["log_z_minus_3sigma"], a["log_z_plus_3sigma"]),
                    ps3=_pair(*p.three_sigma_band) if paper_cols else "—",
                    sec=_fmt(a["seconds"], 1),
                    pm=_fmt(p.minutes * 60, 0) if paper_cols else "—",
                    tet=_fmt(te_true),
                    ptet=_fmt(p.test_true),
                    tee=_fmt(te["mean_log_prob"] if runs == 100 else None),
                    ptee=_fmt(p.test_estimate) if paper_cols else "—",
                    trt=_fmt(tr_true),
                    ptrt=_fmt(p.train_true),
                    tre=_fmt(tr["mean_log_prob"] if runs == 100 else None),
                    ptre=_fmt(p.train_estimate) if paper_cols else "—",
                )
            )
    if ratio is not None:
        lines += [
            "",
            "## Ratio of partition functions, ln Z_CD1(20) / Z_CD1(25) (100 runs, 10,000 uniform betas)",
            "",
            "| | true | estimate | ln (r̂ ± 3σ̂) |",
            "|---|---|---|---|",
            f"| ours | {_fmt(ratio['true_log_ratio'])} | {_fmt(ratio['log_ratio'])} | "
            f"{_pair(ratio['log_ratio_minus_3sigma'], ratio['log_ratio_plus_3sigma'])} |",
            f"| paper | {_fmt(PAPER_RATIO['true'])} | {_fmt(PAPER_RATIO['estimate'])} | "
            f"{_pair(*PAPER_RATIO['three_sigma_band'])} |",
            "",
            f"Start samples: {ratio['start']} (the paper used a Markov chain of 10,000 steps between samples).",
        ]
    lines += [
        "",
        "## Settings that differ from the paper",
        "",
        f"- Training: {settings.epochs} epochs of CD with SGD (lr {settings.lr}, momentum {settings.momentum}, "
        f"weight decay {settings.weight_decay}, batch {settings.batch_size}); the paper does not state its "
        "epochs. Trained on the 50,000 training images of the standard split (the paper used 60,000).",
        "- The models are ours, so their log Z and log-probabilities differ from the paper's; the point of "
        "comparison is how close AIS lands to the exact value and how wide its error bars are.",
        "- The AIS time is on this machine (the paper: minutes on a 3 GHz Pentium Xeon; shown in seconds).",
        "- Base-rate smoothing: symmetric pseudo-counts (see boltzkit.estimators.base_rate).",
        "- Exact log Z: enumeration of the hidden states in float32 arithmetic with float64 sums.",
    ]
    if quick:
        lines.append("- Quick mode: only the three small models, and few training epochs.")
    return "\n".join(lines) + "\n"


def _csv(records) -> str:
    cols = [
        "model",
        "runs",
        "true_log_z",
        "log_z",
        "log_z_minus_sigma",
        "log_z_plus_sigma",
        "log_z_minus_3sigma",
        "log_z_plus_3sigma",
        "ais_seconds",
        "test_true",
        "test_estimate",
        "train_true",
        "train_estimate",
        "paper_true_log_z",
        "paper_log_z",
        "paper_test_estimate",
        "paper_train_estimate",
    ]
    rows = [",".join(cols)]
    for runs in (10, 100):
        for rec in records:
            p = PAPER[rec["model"]]
            a = rec[f"ais_{runs}"]
            vals = [
                rec["model"],
                runs,
                rec.get("exact", {}).get("log_z"),
                a["log_z"],
                a["log_z_minus_sigma"],
                a["log_z_plus_sigma"],
                a["log_z_minus_3sigma"],
                a["log_z_plus_3sigma"],
                a["seconds"],
                rec.get("test_true", {}).get("mean_log_prob"),
                rec["test_estimate"]["mean_log_prob"],
                rec.get("train_true", {}).get("mean_log_prob"),
                rec["train_estimate"]["mean_log_prob"],
                p.true_log_z,
                p.log_z,
                p.test_estimate,
                p.train_estimate,
            ]
            rows.append(",".join("" if v is None else str(v) for v in vals))
    return "\n".join(rows) + "\n"


def plot_runs(records, path: Path) -> bool:
    """S&M 2008, Fig. 3: log Z_hat against the number of AIS runs with 3-sigma bars."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(records), figsize=(4 * len(records), 3.2), squeeze=False)
    for ax, rec in zip(axes[0], records, strict=True):
        lw = torch.tensor(rec["log_weights"], dtype=torch.float64)
        start = rec["ais_100"]["log_z"] - float(torch.logsumexp(lw, 0) - math.log(lw.numel()))
        counts = [m for m in (1, 2, 5, 10, 20, 50, 100, 200, 500) if m <= lw.numel()]
        mids, lows, highs = [], [], []
        for m in counts:
            r = LogZResult.from_log_weights("ais", lw[:m], log_z_start=start, n_betas=0)
            b = r.band
            mids.append(b.value)
            highs.append(b.plus_3sigma - b.value)
            # Z_hat - 3 sigma <= 0 leaves log(Z_hat - 3 sigma) undefined: draw the bar as long as the upper one
            # and mark the point, instead of an arbitrary depth
            lows.append(b.value - b.minus_3sigma if b.minus_3sigma is not None else highs[-1])
            if b.minus_3sigma is None:
                ax.annotate("↓", (m, b.value - highs[-1]), ha="center", va="top", fontsize=9)
        ax.errorbar(counts, mids, yerr=[lows, highs], fmt="o-", capsize=3, label="AIS ± 3σ̂")
        if "exact" in rec:
            ax.axhline(rec["exact"]["log_z"], color="k", ls="--", lw=1, label="exact")
        ax.set_xscale("log")
        ax.set_xlabel("number of AIS runs")
        ax.set_ylabel("ln Ẑ")
        ax.set_title(rec["model"])
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


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
) -> dict[str, Any]:
    """Run the experiment and write ``table1.md``, ``table1.csv``, ``table1.json`` (and
    ``fig3_ais_runs.png`` when matplotlib is installed) into ``out_dir``.

    Parameters
    ----------
    quick
        Only CD1(25), CD3(25) and CD1(20), with few training epochs (minutes on 2 CPU cores);
        otherwise all six models. Exact values enumerate 2^25 hidden states in float32 arithmetic
        with float64 sums.
    epochs
        Override the training epochs of the mode.
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK_TRAINING if quick else FULL_TRAINING
    if epochs is not None:
        settings = TrainingSettings(
            epochs=int(epochs),
            lr=settings.lr,
            momentum=settings.momentum,
            weight_decay=settings.weight_decay,
            batch_size=settings.batch_size,
        )
    train = load_dataset("mnist", split="train", data_dir=data_dir).x
    test = load_dataset("mnist", split="test", data_dir=data_dir).x
    # float32 arithmetic, float64 sums: about twice as fast as float64, log Z within ~1e-4
    exact_dtype = torch.float32
    records = []
    for spec in MODELS:
        if quick and not spec.quick:
            continue
        records.append(
            _run_model(
                spec,
                settings,
                (train, test),
                out_dir,
                seed=seed,
                device=device,
                n_chains=n_chains,
                betas=betas,
                progress=progress,
                exact_dtype=exact_dtype,
            )
        )
    ratio = _run_ratio(
        out_dir, seed=seed, device=device, n_chains=n_chains, progress=progress, exact_dtype=exact_dtype
    )
    machine_note = f"torch {torch.__version__} on {device}; total {time.perf_counter() - t0:.0f} s."
    md = _markdown(records, ratio, settings, quick, machine_note)
    atomic_write_text(out_dir / "table1.md", md)
    atomic_write_text(out_dir / "table1.csv", _csv(records))
    summary = {
        "experiment": "salakhutdinov-murray-2008-table1",
        "quick": quick,
        "models": [{k: v for k, v in r.items() if k != "log_weights"} for r in records],
        "ratio": ratio,
        "seconds": time.perf_counter() - t0,
    }
    _save_json(out_dir / "table1.json", summary)
    plotted = plot_runs([r for r in records], out_dir / "fig3_ais_runs.png")
    summary["files"] = ["table1.md", "table1.csv", "table1.json"] + (["fig3_ais_runs.png"] if plotted else [])
    summary["report"] = "table1.md"
    return summary
