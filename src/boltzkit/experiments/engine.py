"""The experiment engine: resumable stages, seeded tasks on executors, and the stages every paper
reproduction shares.

Every reproduction (``boltzkit reproduce NAME``) is a spec module that names its models, its
settings and the paper's numbers, and runs them through this engine:

Resuming
    One mechanism: :func:`stage`. A stage's record is a JSON file holding the ``config`` that made
    it; a rerun with the same config reads it back instead of computing, a record of another
    config is refused (no silent mixing of settings), and a missing or damaged file is computed.
    Records are written atomically (:mod:`boltzkit.jsonio`), so a killed run loses at most the
    stage it was in. Trained models are stages too (:func:`model_stage`): the model file holds its
    config, and training checkpoints every epoch, so a killed training resumes mid-way.
Tasks
    :func:`run_tasks` runs many independent seeded tasks (each a frozen value with a ``key`` and an
    ``identity()``, and a module-level function computing its record) in this process, on local
    processes (``cores // workers`` torch threads each) or on a Ray cluster, skipping the ones
    whose records exist; each record is saved as a stage the moment it arrives.
Shared stages
    :func:`train_stage` (a model from a :class:`~boltzkit.learning.recipes.Recipe`, or taken from
    the zoo), :func:`exact_stage`, :func:`ais_stage` (AIS, optionally with the reverse run: the
    sandwich), :func:`log_prob_stage`, :func:`variational_stage` and :func:`samples_stage`.
    The report side (``ours / paper`` cells that carry every estimate's verdict, tables, CSV,
    plots) is :mod:`boltzkit.experiments.report`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit._numerics import make_generator
from boltzkit.atomic import atomic_open
from boltzkit.data import derive_seed
from boltzkit.errors import BoltzkitError, terminate_as_interrupt
from boltzkit.estimators import estimate_log_z
from boltzkit.estimators.exact import exact_log_z
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.estimators.result import LogZResult, stored_steps
from boltzkit.io import load_model, save_model
from boltzkit.io.zoo import names as zoo_names
from boltzkit.io.zoo import read_card
from boltzkit.jsonio import save_json, to_jsonable
from boltzkit.learning import train_model
from boltzkit.learning.recipes import Recipe, recipe_differences, recipe_settings
from boltzkit.models import BoltzmannMachine
from boltzkit.variational import ConvergenceWarning, variational_log_z

#: Executors of :func:`run_tasks`.
EXECUTORS = ("inline", "processes", "ray")


# ------------------------------------------------------------------------------------ stages
def normalized(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as it reads back from JSON (tuples as lists, tensors and paths as JSON values)."""
    return json.loads(json.dumps(to_jsonable(config)))


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` when the file is missing or damaged."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def comparable(config: Any) -> Any:
    """``config`` as :func:`check_config` compares it: every recipe in it (a ``"recipe"`` dict, at
    any depth) by :func:`recipe_config`, so that stages written when configs held the whole
    recipe (its summary and sources too; before 2026-12-03) stay valid under the same settings."""
    if isinstance(config, list):
        return [comparable(v) for v in config]
    if not isinstance(config, dict):
        return config
    out = {k: comparable(v) for k, v in config.items()}
    recipe = out.get("recipe")
    if isinstance(recipe, dict) and {"summary", "sources"} & set(recipe):
        try:
            out["recipe"] = normalized(recipe_config(Recipe.from_dict(recipe)))
        except (BoltzkitError, TypeError, ValueError):  # not a recipe this version knows: as written
            pass
    return out


def check_config(path: Path, stored: Any, config: dict[str, Any]) -> None:
    """Refuse a stored record or model made with other settings than ``config`` (both as
    :func:`comparable` has them)."""
    stored, config = comparable(stored), comparable(config)
    if stored != config:
        diff = sorted(k for k in set(stored or {}) | set(config) if (stored or {}).get(k) != config.get(k))
        raise BoltzkitError(
            f"{path} was made with other settings ({', '.join(diff) or 'unknown'})",
            got=json.dumps({k: (stored or {}).get(k) for k in diff}, default=str),
            expected=json.dumps({k: config.get(k) for k in diff}, default=str),
            hint="write into a fresh --out folder, or delete that file to recompute it.",
        )


def load_stage(path: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    """The record in ``path`` when it was made with ``config``; ``None`` when there is none (or
    it is damaged); an error when it was made with other settings."""
    done = load_json(path)
    if done is None:
        return None
    check_config(path, done.get("config"), normalized(config))
    return done


def save_stage(path: Path, config: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Write ``record`` with its ``config`` to ``path`` atomically; returns what was written."""
    record = {"config": normalized(config), **{k: v for k, v in record.items() if k != "config"}}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_json(record, path)
    return record


def stage(path: Path, config: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The one resume mechanism: the record in ``path`` when made with ``config``, else
    ``compute()`` saved with its config and wall time (``"seconds"`` unless it has its own)."""
    done = load_stage(path, config)
    if done is not None:
        return done
    t0 = time.perf_counter()
    record = dict(compute())
    record.setdefault("seconds", time.perf_counter() - t0)
    return save_stage(path, config, record)


def stage_seed(seed: int, *keys: str) -> int:
    """An independent seed for one stage of one model, derived from the run's ``seed``."""
    return derive_seed(seed, *keys) % (2**62)


# ------------------------------------------------------------------------------------- tasks
def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_for(workers: int) -> int:
    """Torch threads of each of ``workers`` local processes: the cores shared out."""
    return max(1, cores() // max(1, workers))


def _init_worker(threads: int) -> None:
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def _call(fn: Callable[..., dict[str, Any]], task: Any, args: tuple, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    return fn(task, *args)


@dataclass
class TaskRun:
    """What :func:`run_tasks` did: every record (in task order), tasks run and found done, wall time."""

    records: list[dict[str, Any]]
    ran: int
    skipped: int
    seconds: float
    executor: str = "inline"
    workers: int = 1

    @property
    def tasks_per_minute(self) -> float:
        return 60.0 * self.ran / self.seconds if self.seconds > 0 else math.nan


def run_tasks(
    tasks: Sequence[Any],
    fn: Callable[..., dict[str, Any]],
    folder: Path,
    *,
    args: tuple = (),
    executor: str = "inline",
    workers: int = 1,
    address: str | None = None,
    ray_init: dict[str, Any] | None = None,
    progress: bool = True,
    before_save: Callable[[Any, dict[str, Any]], None] | None = None,
    after_save: Callable[[Any], None] | None = None,
) -> TaskRun:
    """Run ``fn(task, *args)`` for every task whose record is not yet in ``folder``.

    Inline, each task's record is looked for again just before it runs, so that several runs may
    share one folder (two processes on one machine, or sessions one after another): a task another
    run finished meanwhile is taken from its record, not computed twice (a task both start at once
    is still computed by both; the records are written atomically, and the last one stays).

    Parameters
    ----------
    tasks
        Frozen, picklable values with a file-safe ``key`` and an ``identity()`` dict (the config
        of their record); keys must be unique.
    fn
        A module-level function returning the task's record (picklable for the other executors).
    folder
        Where the records go: ``folder/<key>.json``, each written as it arrives (:func:`save_stage`).
    executor, workers
        ``"inline"`` (this process), ``"processes"`` (``workers`` local processes with
        ``cores // workers`` torch threads each: two default-threaded torch processes on two cores
        run many times slower) or ``"ray"`` (a cluster at ``address``, else a local one; the
        driver writes the records, so workers need no shared file system).
    ray_init
        Extra keyword arguments of ``ray.init``.
    progress
        A bar of tasks done and left.
    before_save
        ``before_save(task, record)`` runs before a record is written (e.g. to save a model the
        record promises; it may pop what should not go into the JSON).
    after_save
        ``after_save(task)`` runs once the task's record is written (e.g. to remove the task's
        training checkpoint, which the record now makes redundant).
    """
    if executor not in EXECUTORS:
        raise BoltzkitError("unknown executor", got=repr(executor), expected=", ".join(EXECUTORS))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BoltzkitError("workers must be a positive integer", got=repr(workers))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise BoltzkitError("the same task is given twice", got=f"{len(keys) - len(set(keys))} duplicates")
    t0 = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict[str, Any]] = {}
    todo = []
    for task in tasks:
        rec = _finished_record(folder, task)
        if rec is not None:
            records[task.key] = rec
        else:
            todo.append(task)
    skipped = len(records)
    bar = tqdm(
        total=len(tasks), initial=skipped, desc="tasks", unit="task", disable=not progress, leave=False
    )

    def finish(task: Any, record: dict[str, Any]) -> None:
        if before_save is not None:
            before_save(task, record)
        records[task.key] = save_stage(folder / f"{task.key}.json", task.identity(), record)
        if after_save is not None:
            after_save(task)
        bar.update(1)

    failed: list[BaseException] = []  # of the other executors: each task's error, the rest still saved

    def finish_or_keep(task: Any, result: Callable[[], dict[str, Any]]) -> None:
        try:
            record = result()
        except Exception as exc:  # noqa: BLE001 - raised below, once the other tasks are saved
            failed.append(exc)
            return
        finish(task, record)

    try:
        if todo and executor == "inline":
            for task in todo:
                # another run on the same folder (a second process, another session) may have
                # finished it meanwhile: take its record rather than compute it again
                rec = _finished_record(folder, task)
                if rec is not None:
                    records[task.key] = rec
                    skipped += 1
                    bar.update(1)
                    continue
                finish(task, fn(task, *args))
        elif todo and executor == "processes":
            import multiprocessing

            threads = threads_for(workers)
            ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no forked thread pools
            with (
                ProcessPoolExecutor(
                    max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(threads,)
                ) as pool,
                terminate_as_interrupt(),
            ):
                futures = {pool.submit(_call, fn, t, args, threads): t for t in todo}
                try:
                    for fut in as_completed(futures):
                        finish_or_keep(futures[fut], fut.result)
                except BaseException:  # interrupted (Ctrl-C, SIGTERM): stop the workers, not wait for them
                    _stop_workers(pool)
                    raise
        elif todo:
            _run_ray(todo, fn, args, address, ray_init or {}, finish_or_keep)
    finally:
        bar.close()
    if failed:  # a task that failed stops the run only once every other task's record is saved
        first = failed[0]
        first.add_note(
            f"{len(failed)} of {len(todo)} tasks failed; the records of the others are saved in {folder}, "
            "and the same command again computes only the tasks without one"
        )
        raise first
    return TaskRun(
        records=[records[t.key] for t in tasks if t.key in records],
        ran=len(tasks) - skipped,
        skipped=skipped,
        seconds=time.perf_counter() - t0,
        executor=executor,
        workers=workers if executor == "processes" else 1,
    )


def _finished_record(folder: Path, task: Any) -> dict[str, Any] | None:
    """The task's record in ``folder`` when it is there and written for this very task."""
    rec = load_json(folder / f"{task.key}.json")
    return rec if rec is not None and rec.get("config") == normalized(task.identity()) else None


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel the tasks not started and end the worker processes now (their tasks resume from the
    records and checkpoints they wrote)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    # A SIGTERM that reaches a worker still starting (between its fork and its exec) is lost: a
    # worker not gone after a few seconds is killed outright.
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(timeout=5.0)


def _run_ray(todo, fn, args, address, ray_init, finish) -> None:
    try:
        import ray
    except ImportError:
        raise BoltzkitError(
            "the Ray executor needs ray, which is not installed",
            hint='pip install "boltzkit[cluster]" (or pip install ray), or use --workers N for local processes.',
        ) from None
    started = False
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, **ray_init)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_call)
        pending = {remote.remote(fn, t, args, 1): t for t in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                finish(pending.pop(ref), lambda ref=ref: ray.get(ref))
    finally:
        if started:
            ray.shutdown()


# ------------------------------------------------------------------------------------- context
@dataclass(frozen=True)
class Context:
    """Where and how a reproduction runs: its folder, seed, device and progress bars."""

    out_dir: Path
    seed: int = 0
    device: torch.device = torch.device("cpu")
    progress: bool = False

    def path(self, *parts: str) -> Path:
        """``OUT/parts...``, its folder made if it is not there yet: a stage may be the first to
        write into it (a full run whose models all come from the zoo has written no model before
        its mixtures)."""
        path = Path(self.out_dir).joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def seed_for(self, *keys: str) -> int:
        return stage_seed(self.seed, *keys)


# -------------------------------------------------------------------------------------- models
def model_stage(
    path: Path,
    config: dict[str, Any],
    train: Callable[[Path], tuple[Any, dict[str, Any]]],
    *,
    device: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """A trained model as a stage: loaded from ``path`` when its metadata hold ``config``, else
    ``train(checkpoint_path)`` (which should checkpoint there and resume from it) and saved with
    ``config`` and the training record under ``metadata["training"]``. Returns the model and that
    training record."""
    config = normalized(config)
    if path.is_file():
        model, meta = load_model(path, device=device)
        training = meta.get("training", {})
        check_config(path, training.get("config"), config)
        return model, training
    checkpoint = path.parent.parent / "checkpoints" / f"{path.stem}.ckpt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, training = train(checkpoint)
    training = {"config": config, "seconds": time.perf_counter() - t0, **training}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(
        model, path, metadata={"training": to_jsonable(training), "training_seconds": training["seconds"]}
    )
    checkpoint.unlink(missing_ok=True)
    return model, training


def zoo_model(name: str, *, device: Any = None) -> tuple[Any, dict[str, Any]] | None:
    """Zoo model ``name`` and a training record built from its card, or ``None`` when the zoo
    has no such model."""
    if name not in zoo_names():
        return None
    card = read_card(name)
    model, _ = load_model(f"zoo:{name}", device=device)
    training = {
        "source": f"zoo:{name}",
        "command": card.get("command"),
        "recipe": card.get("recipe"),
        "seconds": card.get("training_seconds"),
        "machine": card.get("machine"),
        "settings": card.get("training"),
    }
    return model, training


def recipe_config(recipe: Recipe) -> dict[str, Any]:
    """The part of a stage's ``config`` that says how it trains: the recipe's name and the
    settings a run records (:func:`~boltzkit.learning.recipes.recipe_settings`), not its summary
    or sources, so that rewording a recipe's documentation leaves the stages it trained valid."""
    return {"name": recipe.name, **recipe_settings(recipe)}


def train_stage(
    ctx: Context,
    name: str,
    *,
    recipe: Recipe,
    kind: str,
    hidden: int | Sequence[int],
    train_x: Tensor,
    data: str,
    zoo: str | None = None,
) -> tuple[BoltzmannMachine, dict[str, Any]]:
    """Model ``name`` of a reproduction: zoo model ``zoo`` when the zoo holds it (trained earlier
    by the same recipe at full size: work done once is never redone), else trained by ``recipe``
    (resumable; ``models/NAME.safetensors`` in the run's folder).

    A zoo model's training record says where its card's settings differ from ``recipe``'s, under
    ``"recipe_differences"`` (``{setting: the card's value}``; empty when it was trained by
    ``recipe``'s settings, whatever name its command gave them)."""
    if zoo is not None:
        found = zoo_model(zoo, device=ctx.device)
        if found is not None:
            model, training = found
            training["recipe_differences"] = recipe_differences(recipe, training.get("settings") or {})
            return model, training
    config = {"kind": kind, "hidden": hidden, "recipe": recipe_config(recipe), "data": data,
              "n_train": int(train_x.shape[0]), "seed": ctx.seed}  # fmt: skip

    def train(checkpoint: Path) -> tuple[Any, dict[str, Any]]:
        model, history = train_model(
            train_x, kind=kind, hidden=hidden, recipe=recipe, seed=ctx.seed, device=ctx.device,
            progress=ctx.progress, checkpoint_path=checkpoint, checkpoint_every=1, resume=checkpoint.is_file(),
        )  # fmt: skip
        last = history.records[-1] if history.records else None
        return model, {
            "recipe": recipe.name,
            "settings": recipe_settings(recipe),
            "last_epoch": to_jsonable(last),
        }

    return model_stage(ctx.path("models", f"{name}.safetensors"), config, train, device=ctx.device)


# ---------------------------------------------------------------------------------- estimates
def log_z_summary(result: LogZResult) -> dict[str, Any]:
    """An estimate's table columns and verdict: ``log Z_hat``, its bands, standard error, ESS,
    runs, steps, seconds, ``reliable`` with the reason and advice (the bands' lower ends ``None``
    where undefined)."""
    d = result.to_dict()
    keys = ("method", "log_z", "log_z_minus_sigma", "log_z_plus_sigma", "log_z_minus_3sigma",
            "log_z_plus_3sigma", "log_z_stderr", "ess", "n_chains", "n_steps", "seconds", "reliable",
            "reliability_reason", "advice", "log_z_lower", "log_z_upper", "gap", "gap_stderr", "bound")  # fmt: skip
    return {k: d.get(k) for k in keys if k in d or k in ("reliable", "reliability_reason")}


def first_runs(result: LogZResult, n: int, *, checks: Sequence[dict[str, Any]] | None = None) -> LogZResult:
    """The estimate from the first ``n`` of ``result``'s AIS runs (Table 1's 10 runs, Fig. 3).

    Its verdict rests on its own weights and on what the whole run showed: the checks of the
    whole run (``checks``, default ``result``'s own: a halved schedule, a reverse end or probe
    chains that disagree judge the schedule and the modes the first ``n`` runs share) and the
    verdict of all its weights (the first ``n`` are draws of the same law, and fewer of them
    cannot show a heavy tail that all of them show). What failed there fails the subset too, its
    reason saying it was of all the runs. Without them a 10-run row stood "reliable" where the run
    it came from did not (a review of 2026-12-07)."""
    assert result.log_weights is not None
    whole = result.settings.get("checks") if checks is None else checks
    kept = [
        c if c.get("passed", True) else {**c, "reason": f"(all {result.n_chains} runs) {c.get('reason')}"}
        for c in whole or []
    ]
    trivial = {"trivial_path": True} if result.settings.get("trivial_path") else {}  # equal weights are right
    weights = LogZResult.from_log_weights(
        "ais", result.log_weights, log_z_start=result.log_z_start, n_steps=result.n_steps, **trivial
    ).reliability()
    if weights is not None and not weights.reliable:
        kept.append({"name": "weights of all runs", "passed": False, "advice": weights.advice,
                     "reason": f"(all {result.n_chains} runs) {weights.reason}"})  # fmt: skip
    return LogZResult.from_log_weights(
        "ais", result.log_weights[:n], log_z_start=result.log_z_start, n_steps=result.n_steps,
        seconds=result.seconds * n / max(1, result.n_chains), **({"checks": kept} if kept else {}), **trivial,
    )  # fmt: skip


def ais_record(result: LogZResult, *, runs: Sequence[int] = (10,)) -> dict[str, Any]:
    """What an AIS stage stores: the summary of all runs (``"ais"``), of the first ``runs`` runs,
    the settings, and the raw log-weights (for the plots of log Z_hat against runs). A sandwich
    also stores its reverse half (``"reverse"``) with its own verdict, settings and log-weights, so
    that :func:`record_log_z` rebuilds the estimate with its band and verdict."""
    forward = getattr(result, "forward", None) or result
    rec: dict[str, Any] = {"ais": log_z_summary(result)}
    checks = [
        *(forward.settings.get("checks") or []),
        *((result.settings.get("checks") or []) if result is not forward else []),
    ]
    for n in runs:
        rec[f"ais_{n}"] = (
            log_z_summary(first_runs(forward, n, checks=checks)) if forward.n_chains > n else None
        )
    reverse = getattr(result, "reverse", None)
    rec["ais_settings"] = to_jsonable(result.settings)
    rec["log_z_start"] = forward.log_z_start
    rec["log_weights"] = forward.log_weights.tolist() if forward.log_weights is not None else []
    if reverse is not None:
        rec["reverse"] = log_z_summary(reverse)
        rec["reverse_settings"] = to_jsonable(reverse.settings)
        rec["reverse_log_z_start"] = reverse.log_z_start
        rec["reverse_log_weights"] = reverse.log_weights.tolist() if reverse.log_weights is not None else []
    return rec


def exact_stage(
    ctx: Context, name: str, model: Any, config: dict[str, Any], *, max_bits: int = 25
) -> dict[str, Any]:
    """Exact ``log Z`` of ``model`` (``results/NAME-exact.json``), with the seconds and what was
    enumerated (:attr:`LogZResult.settings`)."""

    def compute() -> dict[str, Any]:
        result = exact_log_z(model, max_bits=max_bits)
        return {"log_z": result.log_z, "seconds": result.seconds, **to_jsonable(result.settings)}

    return stage(ctx.path("results", f"{name}-exact.json"), {**config, "max_bits": max_bits}, compute)


def ais_stage(
    ctx: Context,
    name: str,
    model: Any,
    config: dict[str, Any],
    *,
    base_data: Tensor | None,
    n_chains: int,
    betas: str | int | Tensor,
    reverse: bool = False,
    runs: Sequence[int] = (10,),
    schedule: str | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """AIS on ``model`` from the base-rate model of ``base_data`` (S&M 2008 Eq. 18), with the
    reverse run started from the forward run's final states when ``reverse`` (the sandwich);
    ``results/NAME-ais.json``. Its seed is ``seed``, or derives from the run's seed and ``name``.

    The record's config names the schedule by ``schedule`` when given (a reproduction's label),
    else by ``betas`` itself; a tensor of betas by its length and a digest of its values, so that
    two schedules of the same length are never taken for each other."""
    settings = {"n_chains": n_chains, "betas": schedule if schedule is not None else betas_key(betas),
                "reverse": reverse, "seed": ctx.seed_for("ais", name) if seed is None else int(seed)}  # fmt: skip

    def compute() -> dict[str, Any]:
        result = estimate_log_z(
            model, "sandwich" if reverse else "ais", base_rate_data=base_data, n_chains=n_chains, betas=betas,
            seed=settings["seed"], device=ctx.device, progress=ctx.progress,
        )  # fmt: skip
        return ais_record(result, runs=runs)

    return stage(ctx.path("results", f"{name}-ais.json"), {**config, **settings}, compute)


def betas_key(betas: str | int | Tensor) -> str | int:
    """How a stage config names a schedule: a name or a count as given; a tensor by its number of
    steps and the first 12 hex digits of the SHA-256 of its float64 values."""
    if not isinstance(betas, Tensor):
        return betas
    values = betas.detach().to("cpu", torch.float64).contiguous().numpy().tobytes()
    return f"{betas.numel() - 1} steps, sha256 {hashlib.sha256(values).hexdigest()[:12]}"


#: The settings a rebuilt estimate needs for its verdict (:meth:`LogZResult.reliability`).
_VERDICT_SETTINGS = ("trivial_path", "checks")


def _weights_result(
    method: str,
    log_weights: list[float],
    log_z_start: float,
    n_steps: int,
    settings: dict[str, Any],
    **kw: Any,
) -> LogZResult:
    return LogZResult.from_log_weights(
        method, torch.tensor(log_weights, dtype=torch.float64), log_z_start=float(log_z_start), n_steps=n_steps,
        **kw, **settings,
    )  # fmt: skip


def _verdict_settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k in _VERDICT_SETTINGS}


def record_log_z(record: dict[str, Any]) -> LogZResult:
    """A stored AIS stage (:func:`ais_stage`) as a :class:`LogZResult` again, from its weights,
    with the estimate's band and verdict: the checks the weights cannot show (a schedule that moved
    the estimate when halved; the ends of a sandwich that disagree) come back with it, and a
    sandwich comes back whole, its band spanning both ends and its settings (both ends, the gap)
    as stored. A log-probability stage that subtracts it (:func:`log_prob_stage`) then carries the
    same band and verdict as the ``log Z`` record."""
    settings = record.get("ais_settings") or {}
    n_steps = stored_steps(record["ais"])
    seconds = float(record["ais"].get("seconds") or 0.0)
    weights, start = record["log_weights"], record["log_z_start"]
    if not record.get("reverse_log_weights"):  # plain AIS (or a sandwich stored before its halves)
        return _weights_result("ais", weights, start, n_steps, _verdict_settings(settings), seconds=seconds)
    from dataclasses import fields

    from boltzkit.estimators.result import SandwichResult

    forward = _weights_result(
        "ais", weights, start, n_steps, {"trivial_path": settings.get("trivial_path", False)}
    )
    reverse = _weights_result(
        "reverse-ais", record["reverse_log_weights"], record["reverse_log_z_start"], n_steps,
        _verdict_settings(record.get("reverse_settings") or {}), reciprocal=True,
    )  # fmt: skip
    whole = _weights_result("sandwich", weights, start, n_steps, settings, seconds=seconds)
    return SandwichResult(
        **{f.name: getattr(whole, f.name) for f in fields(LogZResult)}, forward=forward, reverse=reverse
    )


def log_prob_stage(
    ctx: Context,
    name: str,
    model: Any,
    config: dict[str, Any],
    splits: dict[str, Tensor],
    log_z: LogZResult,
    *,
    label: str = "log-prob",
) -> dict[str, Any]:
    """Mean log-probabilities (exact ``log p*``, or the mean-field bound) of each split with the
    ``log Z`` band carried through (``results/NAME-LABEL.json``)."""

    def compute() -> dict[str, Any]:
        out = {}
        for split, x in splits.items():
            out[split] = dataset_log_prob(
                model, x.to(device=model.device, dtype=model.dtype), log_z
            ).to_dict()
        return out

    cfg = {
        **config,
        "log_z": log_z.log_z,
        "log_z_method": log_z.method,
        # the band and verdict it carries: a record made from another reading of the same log Z
        # (before record_log_z kept them) is refused, not reused with a stale verdict
        "log_z_band": [log_z.band.minus_3sigma, log_z.band.plus_3sigma],
        "log_z_reliable": None if (verdict := log_z.reliability()) is None else verdict.reliable,
        "splits": {k: int(v.shape[0]) for k, v in splits.items()},
    }
    return stage(ctx.path("results", f"{name}-{label}.json"), cfg, compute)


# ----------------------------------------------------------------------------------- variational
#: The variational methods of the comparisons, in table order (:mod:`boltzkit.variational`).
VARIATIONAL_METHODS = ("mean-field", "bethe", "tap", "trw")


def finite_or_none(x: Any) -> Any:
    """``x`` with every non-finite float replaced by ``None`` (strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite_or_none(v) for v in x]
    return x


def variational_stage(
    ctx: Context, name: str, model: Any, config: dict[str, Any], options: Callable[[str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Mean-field, Bethe, TAP and TRW ``log Z`` of ``model``, each a stage of its own
    (``variational/NAME-METHOD.json``; its config names only what that method uses, so a change of
    the TRW settings recomputes TRW alone). Convergence warnings are not raised: whether each method
    converged is in its record. ``options(method)`` gives each method's keyword arguments.

    Returns
    -------
    dict
        Per method, :meth:`~boltzkit.variational.VariationalResult.to_dict`.
    """
    out: dict[str, dict[str, Any]] = {}
    start_seed = ctx.seed_for("variational", name)
    for method in VARIATIONAL_METHODS:
        kwargs = dict(options(method))
        if method in ("mean-field", "tap"):
            kwargs["seed"] = start_seed

        def compute(method: str = method, kwargs: dict[str, Any] = kwargs) -> dict[str, Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = variational_log_z(model, method, **kwargs)
            return {"model": name, "result": finite_or_none(result.to_dict()), "seconds": result.seconds}

        cfg = {**config, "method": method, "options": kwargs}
        out[method] = stage(ctx.path("variational", f"{name}-{method}.json"), cfg, compute)["result"]
    return out


# -------------------------------------------------------------------------------------- samples
def samples_stage(
    ctx: Context,
    name: str,
    draw: Callable[[torch.Generator], Tensor],
    config: dict[str, Any],
    *,
    seed: int | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Binary samples of a model as a stage: ``draw(generator)`` with a generator seeded by
    ``seed`` (default: derived from the run's seed and ``name``; it joins the config), kept as
    ``samples/NAME.npy`` (uint8, shape ``(n, n_units)``) beside its record ``samples/NAME.json``
    (config, ``n``, ``seconds``). Returns both."""
    seed = ctx.seed_for("samples", name) if seed is None else int(seed)
    config = {**config, "seed": seed}
    path = ctx.path("samples", f"{name}.npy")
    meta = path.with_suffix(".json")
    done = load_json(meta)
    if done is not None and path.is_file():
        check_config(meta, done.get("config"), normalized(config))
        return np.load(path), done
    g = make_generator(seed, ctx.device)
    t0 = time.perf_counter()
    x = draw(g).detach().cpu().round().numpy().astype(np.uint8)
    seconds = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as f:
        np.save(f, x)
    return x, save_stage(meta, config, {"n": int(x.shape[0]), "seconds": seconds})


__all__ = [
    "EXECUTORS",
    "VARIATIONAL_METHODS",
    "Context",
    "TaskRun",
    "ais_record",
    "ais_stage",
    "betas_key",
    "check_config",
    "cores",
    "exact_stage",
    "finite_or_none",
    "first_runs",
    "load_json",
    "load_stage",
    "log_prob_stage",
    "log_z_summary",
    "model_stage",
    "normalized",
    "record_log_z",
    "run_tasks",
    "samples_stage",
    "save_stage",
    "stage",
    "stage_seed",
    "threads_for",
    "recipe_config",
    "train_stage",
    "variational_stage",
    "zoo_model",
]
