"""What moves the likelihood: training choices compared by exact test log-likelihood at equal cost.

A spec on the experiment engine (:mod:`boltzkit.experiments.engine`): one seeded task per variant
(a recipe, or a recipe with one setting changed), all on the same RBM size and data, each trained
for the same number of epochs and scored by its *exact* mean log-probability on the MNIST test
images (the hidden layer is small enough to enumerate, so no estimator stands between the recipe
and the number), its wall time, and the mean activity of long Gibbs chains started at random (a
model whose chains collapse to near-blank images has a spurious mode that CD never visits).

The variants: boltzkit's plain defaults; the S1 CD-1 recipe (Hinton & Salakhutdinov's
reconstruction, momentum, weight decay, initialisation, learning-rate decay) and that recipe
without the decay, with centered gradients (Melchior, Fischer & Wiskott 2016), or with sampled
reconstructions; persistent chains (PCD-1 with 100 and with 1,000 chains, Tieleman 2008, the latter
also with an exponential moving average of the iterates as the trained model, with the learning
rate decayed or held constant: Polyak & Juditsky 1992, Swersky et al. 2010), PCD with
flip-the-state (Brügge, Fischer & Igel 2013) and parallel tempering (10 replicas) in the negative
phase.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from boltzkit.atomic import atomic_write_text
from boltzkit.data import load_dataset
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.experiments.engine import run_tasks
from boltzkit.experiments.report import Table, fmt, machine_note
from boltzkit.jsonio import save_json
from boltzkit.learning import train_model
from boltzkit.learning.recipes import RECIPES
from boltzkit.samplers import sample

NAME = "learning-recipes"

#: The variants: a recipe and the settings changed in it.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "plain CD-1 (boltzkit's defaults)": ("default", {}),
    "S1 CD-1 recipe": ("sm2008-cd1", {}),
    "  without learning-rate decay": ("sm2008-cd1", {"lr_schedule": "constant"}),
    "  with sampled reconstructions": ("sm2008-cd1", {"reconstruction": "sample"}),
    "  with centered gradients": ("sm2008-cd1", {"centering": "average"}),
    "PCD-1, 100 chains": ("sm2008-cd1", {"method": "pcd", "reconstruction": "sample", "lr": 0.01}),
    "PCD-1, 1,000 chains": ("sm2008-cd1", {"method": "pcd", "reconstruction": "sample", "lr": 0.01, "n_chains": 1000}),
    "  with an EMA of the iterates": ("sm2008-cd1", {"method": "pcd", "reconstruction": "sample", "lr": 0.01, "n_chains": 1000, "average": "ema:0.999"}),
    "  constant lr, EMA of the iterates": ("sm2008-cd1", {"method": "pcd", "reconstruction": "sample", "lr": 0.01, "n_chains": 1000, "lr_schedule": "constant", "average": "ema:0.999"}),
    "PCD-1, flip-the-state": ("sm2008-cd1", {"method": "pcd", "reconstruction": "sample", "lr": 0.01, "sampler": "flip"}),
    "PT (10 replicas, 1 sweep)": ("sm2008-cd1", {"method": "pt", "reconstruction": "sample", "lr": 0.01, "temperatures": 10}),
}  # fmt: skip


@dataclass(frozen=True)
class StudyTask:
    """One variant's training run (the engine's task protocol: ``key`` and ``identity()``)."""

    variant: str
    hidden: int
    epochs: int
    seed: int
    data_dir: str | None = None

    @property
    def key(self) -> str:
        slug = "".join(c if c.isalnum() else "-" for c in self.variant.strip().lower()).strip("-")
        return f"{slug}-h{self.hidden}-e{self.epochs}-s{self.seed}"

    def identity(self) -> dict[str, Any]:
        recipe, changes = VARIANTS[self.variant]
        return {
            **{k: v for k, v in asdict(self).items() if k != "data_dir"},
            "recipe": recipe,
            "changes": changes,
        }


def run_variant(task: StudyTask) -> dict[str, Any]:
    """Train the variant, then its exact train and test log-likelihoods and long-chain activity."""
    recipe_name, changes = VARIANTS[task.variant]
    recipe = RECIPES[recipe_name].replace(epochs=task.epochs, **changes)
    train_x = load_dataset("mnist", data_dir=task.data_dir).x
    test_x = load_dataset("mnist", split="test", data_dir=task.data_dir).x
    t0 = time.perf_counter()
    model, history = train_model(
        train_x, hidden=task.hidden, recipe=recipe, seed=task.seed, device="cpu", progress=False
    )
    seconds = time.perf_counter() - t0
    log_z = exact_log_z(model, max_bits=max(task.hidden, 20))
    g = torch.Generator().manual_seed(task.seed)
    chains = sample(model, "gibbs", n_chains=64, n_steps=5000, generator=g).visible
    return {
        "variant": task.variant,
        "recipe": recipe.to_dict(),
        "train_seconds": seconds,
        "seconds_per_epoch": seconds / task.epochs,
        "log_z": log_z.log_z,
        "test": dataset_log_prob(model, test_x, log_z).mean_log_prob,
        "train": dataset_log_prob(model, train_x, log_z).mean_log_prob,
        "chain_activity": float(chains.mean()),
        "data_activity": float(train_x.mean()),
    }


def run_learning_study(
    *,
    out_dir: Path,
    quick: bool = False,
    data_dir: str | None = None,
    seed: int = 0,
    epochs: int | None = None,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 1,
    address: str | None = None,
) -> dict[str, Any]:
    """Run every variant (resumable tasks) and write ``learning.md``, ``learning.csv`` and
    ``learning.json`` into ``out_dir``. Quick: 5 epochs; full: 20 (784 x 25 RBMs, exact scores).
    Every variant trains on the CPU: the models are small, and the tasks run side by side."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_epochs = epochs or (5 if quick else 20)
    tasks = [StudyTask(v, 25, n_epochs, seed, data_dir) for v in VARIANTS]
    run = run_tasks(
        tasks,
        run_variant,
        out_dir / "tasks",
        executor=executor,
        workers=workers,
        address=address,
        progress=progress,
    )
    rows = run.records
    best = max(r["test"] for r in rows)
    cols = ("variant", "test", "train", "log_z", "seconds_per_epoch", "chain_activity")
    table = Table(("variant", "test log p", "train log p", "log Z", "s / epoch", "chain activity"), cols)
    for r in rows:
        table.add(
            [r["variant"], fmt(r["test"]) + (" (best)" if r["test"] == best else ""), fmt(r["train"]),
             fmt(r["log_z"], 1), fmt(r["seconds_per_epoch"], 2), fmt(r["chain_activity"], 3)],
            **{c: r[c] for c in cols},
        )  # fmt: skip
    lines = [
        "# What moves the likelihood: training choices at equal cost",
        "",
        f"784 x 25 RBMs on the 50,000 MNIST training images, {n_epochs} epochs each, batch 100, seed {seed}; "
        "exact log Z (2^25 hidden states) and exact mean log-probabilities; chain activity: the mean of the "
        "visible units after 5,000 Gibbs sweeps of 64 chains started at random (the data's: "
        f"{fmt(rows[0]['data_activity'], 3)}). {machine_note(torch.device('cpu'))}.",
        "",
        *table.markdown(),
    ]
    lines += [
        "",
        f"This invocation took {time.perf_counter() - t0:.0f} s ({run.ran} runs trained now, {run.skipped} reused).",
    ]
    atomic_write_text(out_dir / "learning.md", "\n".join(lines) + "\n")
    atomic_write_text(out_dir / "learning.csv", table.csv(mode="quick" if quick else "full"))
    summary = {
        "experiment": NAME,
        "quick": quick,
        "epochs": n_epochs,
        "rows": rows,
        "seconds": time.perf_counter() - t0,
    }
    save_json(summary, out_dir / "learning.json")
    return {**summary, "files": ["learning.md", "learning.csv", "learning.json"], "report": "learning.md"}


__all__ = ["NAME", "VARIANTS", "StudyTask", "run_learning_study", "run_variant"]
