"""Repeated learning experiments as a grid of independent, seeded, resumable tasks.

Brügge, Fischer & Igel (2013, "S3", Sec. 4.2) train RBMs with every combination of data set,
algorithm (CD_k, PCD_k, t-PT_k), learning rate and transition operator (Gibbs G, flip-the-state
T), repeat each 25 times, record the exact log-likelihood every 100 of 20,000 updates, and compare
G with T by the median over repetitions of each run's maximum log-likelihood and a Wilcoxon
signed-rank test (S3 Tables 1, 5, 6). This module runs such a grid:

* a :class:`GridTask` is one training run; its seed depends on the data set, algorithm, learning
  rate and repetition but **not** on the operator, so G and T of one repetition start from the
  same weights and see the same minibatches (paired samples for the signed-rank test);
* :func:`run_task` trains and returns the task's record (the curve of exact log-likelihoods);
* :func:`run_grid` runs the tasks not yet done and writes each record atomically to
  ``OUT/tasks/<task_id>.json`` (the one JSON encoder of :mod:`boltzkit.jsonio`), so a killed sweep
  resumes where it stopped and finished tasks are never rerun. Executors: ``"inline"`` (this
  process, the default), ``"processes"`` (``workers`` local processes, each with
  ``cores // workers`` torch threads: two default-threaded torch processes on two cores run many
  times slower) and ``"ray"`` (a Ray cluster at ``address``, or a local one; the driver writes the
  records, so workers need no shared file system). With the first two, a task's training
  checkpoints to ``OUT/checkpoints/<task_id>.ckpt`` every few minutes and a killed task resumes
  from there bit for bit (:func:`train_task`);
* :func:`aggregate` turns records into cells (median maximum log-likelihood) and G-vs-T
  comparisons with the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``) and S3's star.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from boltzkit._numerics import resolve_device, sparse_products, sparse_products_as
from boltzkit.data import load_dataset
from boltzkit.data.registry import derive_seed
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.experiments.engine import EXECUTORS, TaskRun, load_json, normalized, run_tasks
from boltzkit.learning.api import visible_bias_from_data
from boltzkit.learning.checkpoint import (
    generator_state,
    load_checkpoint,
    restore_generator,
    save_checkpoint,
    state_to,
)
from boltzkit.learning.gradients import Learner, PTLearner, make_learner
from boltzkit.learning.trainer import sgd_optimizer
from boltzkit.models.rbm import RBM

#: Significance level of the signed-rank test (S3: p < 0.05).
ALPHA = 0.05
#: Version of the task record layout.
RECORD_VERSION = 1


# ------------------------------------------------------------------------------- algorithms
def parse_algorithm(spec: str) -> dict[str, Any]:
    """``"cd:K"``, ``"pcd:K"`` or ``"pt:T:K"`` (t-PT_k) as ``{"method", "k", "temperatures"}``."""
    parts = str(spec).strip().lower().split(":")
    try:
        if parts[0] in ("cd", "pcd") and len(parts) == 2:
            k = int(parts[1])
            if k >= 1:
                return {"method": parts[0], "k": k, "temperatures": None}
        if parts[0] == "pt" and len(parts) == 3:
            t, k = int(parts[1]), int(parts[2])
            if t >= 2 and k >= 1:
                return {"method": "pt", "k": k, "temperatures": t}
    except ValueError:
        pass
    raise BoltzkitError(
        "cannot read the learning algorithm",
        got=repr(spec),
        expected="'cd:K', 'pcd:K' or 'pt:T:K' (T temperatures, K sweeps between swaps), e.g. 'pt:20:1'",
    )


def algorithm_label(spec: str) -> str:
    """S3's name of an algorithm: ``CD_5``, ``PCD_10``, ``20-PT_1``."""
    a = parse_algorithm(spec)
    if a["method"] == "pt":
        return f"{a['temperatures']}-PT_{a['k']}"
    return f"{a['method'].upper()}_{a['k']}"


# ------------------------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class GridTask:
    """One training run of the grid.

    Attributes
    ----------
    dataset
        A :func:`~boltzkit.data.load_dataset` spec (``"bars-and-stripes"``,
        ``"artificial-modes:0.1"``, ``"mnist"``).
    algorithm
        ``"cd:K"``, ``"pcd:K"`` or ``"pt:T:K"`` (:func:`parse_algorithm`).
    lr
        SGD learning rate (no momentum, no weight decay: S3 Sec. 4.2).
    operator
        The transition operator inside the chains (``"gibbs"``, ``"flip"``, ``"blend:A"``).
    repetition
        Index of the repetition (0-based).
    n_hidden
        Hidden units (S3: 16 on the toy problems, 10 on MNIST).
    n_updates
        Parameter updates (S3: 20,000).
    eval_every
        Updates between exact log-likelihood evaluations (S3: 100).
    batch_size
        Examples per update; ``None`` is batch learning (S3: Bars and Stripes); chains per
        update (CD, PCD, each PT replica) equal the batch size, as in S3.
    seed
        Base seed of the grid.
    data_seed
        Seed of random data sets (the same data for every task).
    init_scale
        Standard deviation of the initial weights and biases (S3: 0.01).
    init_vbias
        ``"normal"`` (S3 Sec. 4.2: the visible biases ~ N(0, init_scale^2) like the rest) or
        ``"data"``: they start at the log-odds of the training data's means (Hinton 2010, "A
        practical guide to training RBMs", Sec. 8), the weights and hidden biases as before (the
        same draws). Sparse data such as MNIST need it: from S3's start every PCD run of a 784 x 10
        RBM ends at the base-rate model (docs/results.md).
    device, dtype
        Where and in what precision to train (``"cpu"``/``"auto"``/``"cuda"``; ``"float64"`` or
        ``"float32"``); log-likelihoods are always float64.
    keep_model
        Also keep the trained model: :func:`run_grid` writes it to ``OUT/models/<task_id>.safetensors``
        (the studies of autocorrelation and class changes sample from these models).
    """

    dataset: str
    algorithm: str
    lr: float
    operator: str
    repetition: int
    n_hidden: int = 16
    n_updates: int = 20_000
    eval_every: int = 100
    batch_size: int | None = None
    seed: int = 0
    data_seed: int = 0
    init_scale: float = 0.01
    init_vbias: str = "normal"
    device: str = "cpu"
    dtype: str = "float64"
    keep_model: bool = False

    def __post_init__(self) -> None:
        parse_algorithm(self.algorithm)
        for name in ("n_hidden", "n_updates", "eval_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BoltzkitError(f"a grid task's {name} must be a positive integer", got=repr(v))
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise BoltzkitError("batch_size must be a positive integer or None", got=repr(self.batch_size))
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise BoltzkitError("the learning rate must be a positive number", got=repr(self.lr))
        if self.dtype not in ("float32", "float64"):
            raise BoltzkitError("a grid task's dtype must be 'float32' or 'float64'", got=repr(self.dtype))
        if self.init_vbias not in ("normal", "data"):
            raise BoltzkitError(
                "a grid task's init_vbias must be 'normal' or 'data'",
                got=repr(self.init_vbias),
                hint="'normal' draws the visible biases as S3 does; 'data' starts them at the data's log-odds.",
            )

    @property
    def cell(self) -> tuple[str, str, float, str]:
        """The grid cell: ``(dataset, algorithm, lr, operator)``."""
        return (self.dataset, self.algorithm, float(self.lr), self.operator)

    @property
    def pair_seed(self) -> int:
        """Seed of the run: shared by every operator of one repetition (paired comparisons)."""
        return derive_seed(
            self.seed,
            self.dataset,
            self.algorithm,
            repr(float(self.lr)),
            str(self.repetition),
            str(self.n_hidden),
        )

    @property
    def key(self) -> str:
        """The task's record name (the engine's task protocol)."""
        return self.task_id

    @property
    def task_id(self) -> str:
        """File-name-safe identity; settings beyond the cell go into a short hash.

        Everything :meth:`identity` compares goes into the name, so two runs that differ only in
        ``dtype`` or ``device`` keep two records instead of overwriting one (float64 on the CPU,
        the default, keeps the names its records were made with)."""
        settings = (
            self.n_hidden,
            self.n_updates,
            self.eval_every,
            self.batch_size,
            self.seed,
            self.data_seed,
            self.init_scale,
        )
        if self.init_vbias != "normal":  # S3's start keeps the identities its records were made with
            settings = (*settings, self.init_vbias)
        if (self.dtype, self.device) != ("float64", "cpu"):  # a float32 or GPU run is another record
            settings = (*settings, self.dtype, self.device)
        tag = f"{derive_seed(0, repr(settings)) % 16**6:06x}"
        raw = f"{self.dataset}_{self.algorithm}_lr{float(self.lr):g}_{self.operator}_r{self.repetition}_{tag}"
        return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in raw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """What makes two tasks the same run (everything but ``keep_model``; ``init_vbias`` only
        where it is not S3's, so the records made before it existed still match)."""
        out = self.to_dict()
        out.pop("keep_model")
        if out["init_vbias"] == "normal":
            out.pop("init_vbias")
        return out


def make_grid(
    datasets: Iterable[str],
    algorithms: Iterable[str],
    lrs: Iterable[float],
    operators: Iterable[str] = ("gibbs", "flip"),
    repetitions: int = 25,
    **settings: Any,
) -> list[GridTask]:
    """The full grid: every combination, repetitions innermost but one (operator innermost).

    ``settings`` are the remaining :class:`GridTask` fields (``n_hidden``, ``n_updates``, ...),
    or a callable ``settings(dataset) -> dict`` under the key ``per_dataset``.
    """
    per_dataset: Callable[[str], dict[str, Any]] | None = settings.pop("per_dataset", None)
    tasks = []
    for d in datasets:
        extra = dict(settings, **(per_dataset(d) if per_dataset else {}))
        for a in algorithms:
            for lr in lrs:
                for r in range(int(repetitions)):
                    for op in operators:
                        tasks.append(GridTask(d, a, float(lr), op, r, **extra))
    return tasks


# ------------------------------------------------------------------------------- one task
@functools.lru_cache(maxsize=8)
def _data(spec: str, data_dir: str | None, data_seed: int) -> torch.Tensor:
    return load_dataset(spec, split="train", data_dir=data_dir, seed=data_seed).x


def _init_model(
    x: torch.Tensor, n_hidden: int, scale: float, generator: torch.Generator, dtype: torch.dtype, vbias: str
) -> RBM:
    """S3 Sec. 4.2: weights and biases ~ N(0, scale^2) (drawn in float64, then cast); with
    ``vbias="data"`` the visible biases are then set to the log-odds of the means of ``x``
    (:func:`~boltzkit.learning.api.visible_bias_from_data`), the other draws unchanged."""
    dev = generator.device
    kw = {"generator": generator, "dtype": torch.float64, "device": dev}
    weights = scale * torch.randn(x.shape[1], n_hidden, **kw)
    visible = scale * torch.randn(x.shape[1], **kw)
    hidden = scale * torch.randn(n_hidden, **kw)
    if vbias == "data":
        visible = visible_bias_from_data(x).to(visible)
    return RBM(x.shape[1], n_hidden, weights=weights, vbias=visible, hbias=hidden, dtype=dtype, device=dev)


def _learner(task: GridTask, n_chains: int) -> Learner:
    a = parse_algorithm(task.algorithm)
    kw: dict[str, Any] = {
        "k": a["k"],
        "sampler": task.operator,
        "n_chains": n_chains,
        "reconstruction": False,
    }
    if a["method"] == "pt":
        kw["temperatures"] = a["temperatures"]
    return make_learner(a["method"], **kw)


#: Seconds of training between two checkpoints of a task (:func:`train_task`).
CHECKPOINT_SECONDS = 300.0


@torch.no_grad()
def train_task(
    task: GridTask,
    x: torch.Tensor,
    *,
    on_eval: Callable[[int, RBM], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
) -> tuple[RBM, dict[str, Any]]:
    """Train the task's RBM on ``x`` (``(n, n_visible)``); returns it and its record.

    The update loop: minibatches of a fresh permutation each pass (or the whole set), the
    learner's gradient, one SGD step. The exact mean log-likelihood of ``x`` is measured at update
    0 and every ``eval_every`` updates (and after the last); ``None`` where it is intractable.

    With ``checkpoint``, the state after an update (parameters, optimizer, the learner's
    persistent chains and swap statistics, the generator, the minibatch order, the curve so far and
    the seconds spent) is written there atomically once ``checkpoint_seconds`` have passed since
    the last write (:mod:`boltzkit.learning.checkpoint`), and a file already there is resumed
    from: the run then continues bit for bit, so an interrupted 784 x 10 MNIST training (S3
    Table 2, the better part of an hour on one thread) loses at most that many seconds. The
    record's ``seconds`` count the time of every part. The caller removes the file once the
    record is kept (:func:`run_grid` does).
    """
    t0 = time.perf_counter()
    dev = resolve_device(task.device)
    dtype = torch.float64 if task.dtype == "float64" else torch.float32
    g = torch.Generator(device=dev).manual_seed(task.pair_seed)
    x = x.to(device=dev, dtype=dtype)
    n = x.shape[0]
    bs = n if task.batch_size is None else min(task.batch_size, n)
    rbm = _init_model(x, task.n_hidden, task.init_scale, g, dtype, task.init_vbias)
    learner = _learner(task, bs)
    # one group of every parameter, as the task checkpoints of earlier versions hold it
    optimizer = sgd_optimizer(list(rbm.parameters()), [], lr=task.lr, momentum=0.0, weight_decay=0.0)
    learner.setup(rbm, x, g)
    updates: list[int] = []
    curve: list[float | None] = []

    def evaluate(u: int) -> None:
        updates.append(u)
        value = exact_log_likelihoods(rbm, {"train": x}).get("train_log_lik")
        curve.append(None if value is None or not math.isfinite(value) else float(value))
        if on_eval is not None:
            on_eval(u, rbm)

    def state(u: int, perm: torch.Tensor, pos: int) -> dict[str, Any]:
        return {
            "task": normalized(task.identity()),
            "update": u,
            "model": {k: v.detach() for k, v in rbm.state_dict().items()},
            "optimizer": optimizer.state_dict(),
            "learner": learner.state_dict(),
            "generator": generator_state(g),
            "sparse_products": products,
            "perm": perm,
            "pos": pos,
            "updates": list(updates),
            "curve": list(curve),
            "seconds": done_before + time.perf_counter() - t0,
            "device": dev.type,
        }

    done_before, start = 0.0, 1
    saved = None if checkpoint is None else _saved_state(checkpoint, task, dev)
    # the products of sparse states as this process takes them, or as the interrupted run took them
    # (a checkpoint without the key was written by a version that took the lookup wherever it
    # applied, 2026-11-26 to 12-02)
    products = sparse_products() if saved is None else bool(saved.get("sparse_products", True))
    with sparse_products_as(products):
        if saved is not None:
            rbm.load_state_dict({k: v.to(dev) for k, v in saved["model"].items()})
            optimizer.load_state_dict(saved["optimizer"])
            learner.load_state_dict(state_to(saved["learner"], dev, dtype))
            restore_generator(g, saved["generator"])
            perm, pos = saved["perm"].to(dev), int(saved["pos"])
            updates, curve = list(saved["updates"]), list(saved["curve"])
            done_before, start = float(saved["seconds"]), int(saved["update"]) + 1
        else:
            evaluate(0)
            perm, pos = torch.randperm(n, generator=g, device=dev), 0
        last_save = time.perf_counter()
        for u in range(start, task.n_updates + 1):
            if bs == n:
                batch = x
            else:
                if pos + bs > n:
                    perm, pos = torch.randperm(n, generator=g, device=dev), 0
                batch = x.index_select(0, perm[pos : pos + bs])
                pos += bs
            learner.set_gradients(rbm, batch, g)
            optimizer.step()
            if u % task.eval_every == 0 or u == task.n_updates:
                evaluate(u)
            if (
                checkpoint is not None
                and u < task.n_updates
                and time.perf_counter() - last_save >= checkpoint_seconds
            ):
                save_checkpoint(checkpoint, state(u, perm, pos))
                last_save = time.perf_counter()
    finite = [v for v in curve if v is not None]
    record: dict[str, Any] = {
        "version": RECORD_VERSION,
        "task": task.to_dict(),
        "task_id": task.task_id,
        "label": algorithm_label(task.algorithm),
        "updates": updates,
        "log_lik": curve,
        "max_log_lik": max(finite) if finite else None,
        "final_log_lik": curve[-1],
        "n_train": n,
        "seconds": done_before + time.perf_counter() - t0,
        "torch": torch.__version__,
    }
    if isinstance(learner, PTLearner):
        record["swap_rates"] = [float(r) for r in learner.swap_rates]
        record["round_trips"] = learner.round_trips
    return rbm, record


def _saved_state(checkpoint: str | os.PathLike, task: GridTask, dev: torch.device) -> dict[str, Any] | None:
    """The state in ``checkpoint`` when the file is there (``None`` when it is not, or was removed
    meanwhile by a sweep that finished the task); refuses another task's or another device's."""
    try:
        saved = load_checkpoint(checkpoint)
    except ModelFileError:
        if Path(checkpoint).is_file():
            raise
        return None
    if saved.get("task") != normalized(task.identity()):
        raise BoltzkitError(
            "the checkpoint belongs to another grid task",
            got=str(checkpoint),
            expected=f"a checkpoint of {task.task_id}",
            hint="delete the file to train this task from the start.",
        )
    if saved.get("device", dev.type) != dev.type:
        raise BoltzkitError(
            "the checkpoint was written on another kind of device",
            got=f"{saved['device']} ({checkpoint})",
            expected=dev.type,
            hint="resume it where it was written (its generator state is the device's), or delete it to start over.",
        )
    return saved


def run_task(
    task: GridTask, data_dir: str | None = None, checkpoint_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Load the task's data and train (:func:`train_task`); returns the record, with the model's
    parameters (CPU tensors) under ``"parameters"`` when the task keeps its model. With
    ``checkpoint_dir``, the training checkpoints to and resumes from
    ``checkpoint_dir/<task_id>.ckpt``."""
    x = _data(task.dataset, data_dir, task.data_seed)
    checkpoint = None if checkpoint_dir is None else checkpoint_path(checkpoint_dir, task)
    rbm, record = train_task(task, x, checkpoint=checkpoint)
    if task.keep_model:
        record["parameters"] = {k: v.detach().cpu() for k, v in rbm.state_dict().items()}
    return record


# ------------------------------------------------------------------------------ the sweep
def task_path(out_dir: str | os.PathLike, task: GridTask) -> Path:
    return Path(out_dir) / "tasks" / f"{task.task_id}.json"


def checkpoint_path(checkpoint_dir: str | os.PathLike, task: GridTask) -> Path:
    """The task's training checkpoint in ``checkpoint_dir`` (``OUT/checkpoints`` for :func:`run_grid`)."""
    return Path(checkpoint_dir) / f"{task.task_id}.ckpt"


def model_path(out_dir: str | os.PathLike, task: GridTask) -> Path:
    """Where :func:`run_grid` keeps the trained model of a ``keep_model`` task."""
    return Path(out_dir) / "models" / f"{task.task_id}.safetensors"


def load_task_model(out_dir: str | os.PathLike, task: GridTask, *, device: str | torch.device | None = None):
    """The kept model of a finished task (:func:`boltzkit.io.load_model`)."""
    from boltzkit.io import load_model

    return load_model(model_path(out_dir, task), device=device)[0]


def load_record(out_dir: str | os.PathLike, task: GridTask) -> dict[str, Any] | None:
    """The task's finished record, or ``None`` (missing, damaged or of other settings)."""
    record = load_json(task_path(out_dir, task))
    if record is None or record.get("config") != normalized(task.identity()):
        return None
    if task.keep_model and not model_path(out_dir, task).is_file():
        return None
    return record


#: What :func:`run_grid` returns (the engine's record of a run of tasks).
GridRun = TaskRun


def run_grid(
    tasks: Sequence[GridTask],
    out_dir: str | os.PathLike,
    *,
    executor: str = "inline",
    workers: int = 1,
    address: str | None = None,
    data_dir: str | None = None,
    progress: bool = True,
    ray_init: dict[str, Any] | None = None,
) -> TaskRun:
    """Run the tasks not yet finished in ``out_dir`` and return every record: the engine's
    :func:`~boltzkit.experiments.engine.run_tasks` over :func:`run_task`, the records in
    ``OUT/tasks/<task_id>.json`` and the kept models in ``OUT/models/`` (a model is written before
    the record that promises it).

    Parameters
    ----------
    tasks
        The grid (:func:`make_grid`); task ids must be unique.
    out_dir
        Folder of the records.
    executor, workers, address, ray_init
        As for :func:`~boltzkit.experiments.engine.run_tasks`: ``"inline"``, ``"processes"``
        (``workers`` local processes) or ``"ray"`` (a cluster at ``address``).
    data_dir
        Folder of the MNIST files, passed to every task.
    progress
        A tqdm bar of tasks done and left.
    """
    out = Path(out_dir)
    checkpoints = out / "checkpoints"
    _remove_finished_checkpoints(tasks, out, checkpoints)
    kept = [t for t in tasks if t.keep_model and not model_path(out, t).is_file()]
    for task in kept:  # a record without its model is not finished
        task_path(out, task).unlink(missing_ok=True)

    def save_model_first(task: GridTask, record: dict[str, Any]) -> None:
        params = record.pop("parameters", None)
        if params is None:
            return
        from boltzkit.io import save_model

        (out / "models").mkdir(parents=True, exist_ok=True)
        rbm = RBM(
            params["W"].shape[0], params["W"].shape[1], weights=params["W"], vbias=params["vbias"],
            hbias=params["hbias"], dtype=params["W"].dtype,
        )  # fmt: skip
        save_model(rbm, model_path(out, task), metadata={"training": task.to_dict(), "data": task.dataset})

    local = None if executor == "ray" else str(checkpoints)  # Ray's workers may share no disk
    return run_tasks(
        tasks, run_task, out / "tasks", args=(data_dir, local), executor=executor, workers=workers,
        address=address, ray_init=ray_init, progress=progress, before_save=save_model_first,
        after_save=lambda task: checkpoint_path(checkpoints, task).unlink(missing_ok=True),
    )  # fmt: skip


def _remove_finished_checkpoints(tasks: Sequence[GridTask], out: Path, checkpoints: Path) -> None:
    """Delete the training checkpoints of tasks whose records are kept (a run killed between
    writing a record and removing its checkpoint leaves one behind)."""
    for task in tasks:
        path = checkpoint_path(checkpoints, task)
        if path.is_file() and load_record(out, task) is not None:
            path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------- aggregation
@dataclass(frozen=True)
class Comparison:
    """Operator ``a`` (Gibbs) vs ``b`` (flip-the-state) in one ``(dataset, algorithm, lr)`` cell.

    Attributes
    ----------
    dataset, algorithm, lr
        The cell.
    median_a, median_b
        Median over repetitions of each run's maximum log-likelihood.
    n_pairs
        Repetitions with both operators finished.
    p_value
        Two-sided Wilcoxon signed-rank test of the paired maxima (``None`` when fewer than two
        pairs or all differences are zero).
    better
        ``"a"`` or ``"b"`` when ``p_value < alpha`` (S3's star): the operator the signed-rank test
        favours (the larger sum of ranks of the paired differences; S3 Table 6 stars a T whose
        median is the lower one, so the star follows the pairs, not the medians); else ``None``.
    """

    dataset: str
    algorithm: str
    lr: float
    median_a: float
    median_b: float
    n_pairs: int
    p_value: float | None
    better: str | None

    @property
    def label(self) -> str:
        return algorithm_label(self.algorithm)

    def marked(self, which: str, digits: int = 6) -> str:
        """The median of ``which`` (``"a"``/``"b"``) with S3's star when it is significantly better."""
        value = self.median_a if which == "a" else self.median_b
        text = f"{value:.{digits}g}" if math.isfinite(value) else "n/a"
        return text + ("*" if self.better == which else "")


def aggregate(
    records: Iterable[dict[str, Any]], *, a: str = "gibbs", b: str = "flip", alpha: float = ALPHA
) -> list[Comparison]:
    """Median maximum log-likelihoods of ``a`` and ``b`` per cell, with the signed-rank test.

    Repetitions are paired by index (same initial weights and minibatches). The medians are taken
    over the paired repetitions (each operator's own finished ones where no pair exists yet), so
    that a cell whose grid is still running compares like with like. Cells appear in the order of
    the records.
    """
    by_cell: dict[tuple[str, str, float], dict[str, dict[int, float]]] = {}
    for rec in records:
        t = rec["task"]
        key = (t["dataset"], t["algorithm"], float(t["lr"]))
        value = rec.get("max_log_lik")
        by_cell.setdefault(key, {}).setdefault(t["operator"], {})[int(t["repetition"])] = (
            math.nan if value is None else float(value)
        )
    out = []
    for (dataset, algorithm, lr), ops in by_cell.items():
        ra, rb = ops.get(a, {}), ops.get(b, {})
        reps = sorted(set(ra) & set(rb))
        xa = [ra[r] for r in reps]
        xb = [rb[r] for r in reps]
        fa = [v for v in (xa if reps else ra.values()) if math.isfinite(v)]
        fb = [v for v in (xb if reps else rb.values()) if math.isfinite(v)]
        med_a = statistics.median(fa) if fa else math.nan
        med_b = statistics.median(fb) if fb else math.nan
        p, better = signed_rank_test(xa, xb, alpha=alpha)
        out.append(Comparison(dataset, algorithm, lr, med_a, med_b, len(reps), p, better))
    return out


def signed_rank_test(
    xa: Sequence[float], xb: Sequence[float], *, alpha: float = ALPHA
) -> tuple[float | None, str | None]:
    """The Wilcoxon signed-rank test of paired values (``scipy.stats.wilcoxon``): its two-sided
    p-value (``None`` with fewer than two pairs, no difference or a value that is not finite) and
    which side is larger, ``"a"`` or ``"b"`` by the ranks' sums, where ``p < alpha`` (else ``None``)."""
    from scipy.stats import rankdata, wilcoxon

    diffs = [y - x for x, y in zip(xa, xb, strict=True)]
    if len(diffs) < 2 or not any(d != 0 for d in diffs) or not all(math.isfinite(d) for d in diffs):
        return None, None
    p = float(wilcoxon(list(xb), list(xa)).pvalue)
    if p >= alpha:
        return p, None
    nonzero = [d for d in diffs if d != 0]
    ranks = rankdata([abs(d) for d in nonzero])
    r_plus = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    return p, "b" if r_plus > ranks.sum() / 2 else "a"


def mean_curves(
    records: Iterable[dict[str, Any]],
    *,
    dataset: str,
    algorithm: str,
    lr: float,
    a: str = "gibbs",
    b: str = "flip",
) -> dict[str, Any] | None:
    """The mean learning curves (exact log-likelihood at each evaluation) of one cell's runs with
    ``a`` and with ``b``: ``{"updates", a, b, "runs", "runs_by_operator", "end_level"}``
    (``runs``: those with ``a``), or ``None`` while either has no run or the runs were evaluated
    at different updates.

    As in :func:`aggregate`, only the repetitions that both operators finished count, where there
    are any. A missing evaluation (``None``, an intractable or non-finite value) is left out of the
    mean at its update. ``end_level[op]`` is the drawn curve's mean over the last quarter of the
    updates (evaluations after 3/4 of the last update): the level the runs hold, beside the maximum
    that S3's tables keep, which on a noisy curve is the best of many fluctuations."""
    sel: dict[str, dict[int, dict[str, Any]]] = {a: {}, b: {}}
    for rec in records:
        t = rec["task"]
        if (
            t["dataset"] == dataset
            and t["algorithm"] == algorithm
            and float(t["lr"]) == lr
            and t["operator"] in sel
        ):
            sel[t["operator"]][int(t["repetition"])] = rec
    if not sel[a] or not sel[b]:
        return None
    paired = set(sel[a]) & set(sel[b])
    runs_of = {
        op: [r for rep, r in sorted(rs.items()) if not paired or rep in paired] for op, rs in sel.items()
    }
    updates = runs_of[a][0]["updates"]
    if any(r["updates"] != updates for rs in runs_of.values() for r in rs):
        return None
    last = np.asarray(updates, dtype=float) > 0.75 * float(updates[-1])
    means, end = {}, {}
    with warnings.catch_warnings():  # an update where every run's value is missing: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        for op, rs in runs_of.items():
            curve = np.nanmean(np.array([r["log_lik"] for r in rs], dtype=float), axis=0)
            means[op] = curve.tolist()
            end[op] = float(np.nanmean(curve[last]))
    runs = {op: len(rs) for op, rs in runs_of.items()}
    return {"updates": updates, **means, "runs": runs[a], "runs_by_operator": runs, "end_level": end}


def min_significant_pairs(alpha: float = ALPHA) -> int:
    """Fewest pairs with which the exact two-sided signed-rank test can reach ``p < alpha``
    (``2 / 2^n < alpha``): 6 at 0.05."""
    n = 1
    while 2.0 / 2**n >= alpha:
        n += 1
    return n


__all__ = [
    "ALPHA",
    "EXECUTORS",
    "Comparison",
    "GridRun",
    "GridTask",
    "aggregate",
    "algorithm_label",
    "load_record",
    "load_task_model",
    "model_path",
    "make_grid",
    "mean_curves",
    "min_significant_pairs",
    "parse_algorithm",
    "run_grid",
    "checkpoint_path",
    "run_task",
    "signed_rank_test",
    "task_path",
    "train_task",
]
