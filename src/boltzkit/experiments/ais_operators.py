"""Does flip-the-state inside AIS lower the variance of log Z estimates? (beyond the papers)

Brügge, Fischer & Igel (2013) show that flip-the-state (FTS) mixes faster than Gibbs sampling for
RBMs with strong couplings. AIS uses its kernels only to keep the chains close to each
intermediate distribution, so a faster-mixing kernel should lower the variance of the importance
weights at equal cost. This experiment measures it: for each model, transition operator and
schedule length K it runs R independent AIS estimates of M chains (same base model, same
betas, same number of sweeps, so the cost per estimate is equal) and reports

* the bias ``mean(log Z_hat) - log Z`` (exact ``log Z`` by enumeration),
* the spread ``sd(log Z_hat)`` over the R runs (the quantity that matters),
* the mean of the runs' own standard errors and effective sample sizes.

Models: 16 x 8 and 16 x 16 RBMs trained by PCD on 4 x 4 bars and stripes and on artificial modes
(p_mut = 0.01; well separated modes, as in Brügge et al.), and a 784 x 20 RBM trained by CD-1 on
binarized MNIST.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.ais import ais
from boltzkit.estimators.base_rate import fit_base_rate
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.paths import base_rate_path
from boltzkit.experiments.report import Table
from boltzkit.jsonio import save_json
from boltzkit.learning import train_rbm
from boltzkit.plots._backend import optional_figure, save_png

OPERATORS = ("gibbs", "flip", "blend:0.5")


def _models(quick: bool, data_dir: str | None, seed: int, device) -> list[tuple[str, Any, torch.Tensor]]:
    common = {"seed": seed, "device": device, "progress": False}
    models = []
    bas = load_dataset("bars-and-stripes").x
    rbm, _ = train_rbm(
        bas, n_hidden=8, method="pcd", n_chains=64, epochs=3000, lr=0.1, batch_size=32, **common
    )
    models.append(("bars-and-stripes 16x8 (PCD)", rbm, bas))
    modes = load_dataset("artificial-modes:0.01", seed=seed).x
    rbm, _ = train_rbm(
        modes, n_hidden=16, method="pcd", n_chains=64, epochs=30, lr=0.1, batch_size=32, **common
    )
    models.append(("artificial modes 16x16 (PCD)", rbm, modes))
    try:
        mnist = load_dataset("mnist", split="train", data_dir=data_dir).x
    except BoltzkitError:  # MNIST missing: the synthetic models alone still answer the question
        return models
    rbm, _ = train_rbm(
        mnist, n_hidden=20, method="cd", k=1, epochs=1 if quick else 10, lr=0.05, batch_size=100, **common
    )
    models.append(("MNIST 784x20 (CD-1)", rbm, mnist))
    return models


def run_ais_operators(
    *,
    out_dir: Path,
    quick: bool = False,
    data_dir: str | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    n_chains: int = 100,
) -> dict[str, Any]:
    """Run the study and write ``ais_operators.md``, ``.csv`` and ``.json`` (and a plot) into
    ``out_dir``. The schedules' lengths and the models' training are the study's own (100, 1,000
    and 10,000 steps; quick: the first two), so it takes no ``betas`` or ``epochs``."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = (100, 1000) if quick else (100, 1000, 10000)
    n_runs = 10 if quick else 20
    rows: list[dict[str, Any]] = []
    for name, rbm, data in _models(quick, data_dir, seed, device):
        exact = float(exact_log_z(rbm).log_z)  # enumerates the smaller layer
        path = base_rate_path(rbm, base_vbias=fit_base_rate(data), device=device)
        for k in lengths:
            for op in OPERATORS:
                estimates, stderrs, ess, seconds = [], [], [], 0.0
                for r in range(n_runs):
                    res = ais(
                        path,
                        n_chains=n_chains,
                        betas=k + 1,
                        sampler=op,
                        seed=seed * 1_000_003 + 7919 * r + k,
                        check=False,  # the spread of many runs is the measurement
                    )
                    estimates.append(res.log_z)
                    stderrs.append(res.log_z_stderr)
                    ess.append(res.ess)
                    seconds += res.seconds
                rows.append(
                    {
                        "model": name,
                        "n_steps": k,
                        "sampler": op,
                        "n_runs": n_runs,
                        "n_chains": n_chains,
                        "exact_log_z": exact,
                        "bias": statistics.fmean(estimates) - exact,
                        "sd_log_z": statistics.stdev(estimates),
                        "mean_stderr": statistics.fmean(stderrs),
                        "mean_ess": statistics.fmean(ess),
                        "seconds_per_run": seconds / n_runs,
                    }
                )
    table = _table(rows)
    atomic_write_text(out_dir / "ais_operators.md", _markdown(table, rows, quick, time.perf_counter() - t0))
    atomic_write_text(out_dir / "ais_operators.csv", table.csv(mode="quick" if quick else "full"))
    summary = {
        "experiment": "ais-operators",
        "quick": quick,
        "rows": rows,
        "seconds": time.perf_counter() - t0,
    }
    save_json(summary, out_dir / "ais_operators.json")
    files = ["ais_operators.md", "ais_operators.csv", "ais_operators.json"]
    if _plot(rows, out_dir / "ais_operators.png"):
        files.append("ais_operators.png")
    summary["files"] = files
    summary["report"] = "ais_operators.md"
    return summary


#: CSV columns of ``ais_operators.csv``: one row per model, schedule and sampler.
CSV_COLUMNS = (
    "model", "n_steps", "sampler", "n_runs", "n_chains", "exact_log_z", "bias", "sd_log_z", "mean_stderr",
    "mean_ess", "seconds_per_run",
)  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        ("model", "steps", "sampler", "bias of log Ẑ", "sd of log Ẑ over runs", "mean reported stderr",
         "mean ESS", "s/run"),
        CSV_COLUMNS,
    )  # fmt: skip
    for r in rows:
        table.add(
            [r["model"], str(r["n_steps"]), r["sampler"], f"{r['bias']:+.4f}", f"{r['sd_log_z']:.4f}",
             f"{r['mean_stderr']:.4f}", f"{r['mean_ess']:.1f}", f"{r['seconds_per_run']:.2f}"],
            **{c: r[c] for c in CSV_COLUMNS},
        )  # fmt: skip
    return table


def _markdown(table: Table, rows: list[dict[str, Any]], quick: bool, seconds: float) -> str:
    lines = [
        "# Flip-the-state inside AIS: variance of log Z estimates at equal cost",
        "",
        f"Mode: {'quick' if quick else 'full'}; {seconds:.0f} s. Each row: independent AIS estimates "
        "(100 chains each, one sweep per beta, base rates of the training data) against exact log Z.",
        "",
        *table.markdown(),
    ]
    lines += [
        "",
        "Ratio of the spread to Gibbs's at the same model and schedule (< 1: the sampler helps):",
        "",
    ]
    for r in rows:
        if r["sampler"] == "gibbs":
            continue
        ref = next(
            g
            for g in rows
            if g["model"] == r["model"] and g["n_steps"] == r["n_steps"] and g["sampler"] == "gibbs"
        )
        ratio = r["sd_log_z"] / ref["sd_log_z"] if ref["sd_log_z"] > 0 else math.nan
        lines.append(f"- {r['model']}, {r['n_steps']} steps, {r['sampler']}: {ratio:.2f}")
    return "\n".join(lines) + "\n"


def _plot(rows, path: Path) -> bool:
    models = sorted({r["model"] for r in rows})
    fig = optional_figure(5 * len(models), 3.5) if models else None
    if fig is None:
        return False
    axes = fig.subplots(1, len(models), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        for op in OPERATORS:
            sel = [r for r in rows if r["model"] == model and r["sampler"] == op]
            ax.plot([r["n_steps"] for r in sel], [r["sd_log_z"] for r in sel], "o-", label=op)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("AIS steps")
        ax.set_ylabel("sd of log Ẑ over runs")
        ax.set_title(model)
        ax.legend(fontsize=8)
    save_png(fig, path, dpi=120)
    return True
