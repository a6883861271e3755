"""The training loop: minibatches, learner, optimizer, scheduler, callbacks, checkpoints.

Each epoch shuffles the training rows with the trainer's generator and walks through them in
minibatches (the last one may be smaller). For every minibatch the learner writes the gradient of
the negative log-likelihood estimate into ``param.grad`` and the optimizer takes a step, followed
by the learning-rate scheduler when it steps per update. Nothing else happens per minibatch: no
checks, no host synchronisation, no extra products.

:meth:`Trainer.state_dict` captures everything the remaining epochs depend on (parameters,
optimizer and scheduler state, the generator's state, the learner's state such as PCD chains, the
epoch counter and the history), so a run killed after a checkpoint and resumed with
:meth:`Trainer.load_checkpoint` ends with exactly the parameters of an uninterrupted run (same
device, seed and torch version).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import (
    SPARSE_PRODUCTS_ENV,
    SPARSE_PRODUCTS_SETTINGS,
    sparse_products,
    sparse_products_as,
    sparse_products_setting,
)
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, positive_int, warn
from boltzkit.learning.averaging import ParameterAverage
from boltzkit.learning.callbacks import Callback
from boltzkit.learning.checkpoint import (
    generator_state,
    load_checkpoint,
    restore_generator,
    save_checkpoint,
    state_to,
)
from boltzkit.learning.gradients import Learner
from boltzkit.learning.history import History
from boltzkit.learning.recipes import RECIPE_TEXTS
from boltzkit.learning.schedules import (
    ConstantK,
    KSchedule,
    MomentumSchedule,
    parse_k_schedule,
    parse_momentum,
)
from boltzkit.models.boltzmann import BoltzmannMachine


def _setting_changes(saved: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, saved, now)`` for every setting that differs; a dict of settings (a recipe) is
    compared key by key (``recipe.lr``), so a change shows once and alone. A setting the saved
    run did not record at all (a checkpoint of a version that did not record it, e.g. the
    positive phase's parameters) cannot be compared and is passed over."""
    out: list[tuple[str, Any, Any]] = []
    for key in sorted(set(saved) | set(now)):
        if key not in saved:
            continue
        a, b = saved.get(key), now.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend((f"{key}.{k}", x, y) for k, x, y in _setting_changes(a, b))
        else:
            out.append((key, a, b))
    return out


def _as_recorded_now(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings as this version compares them: a recipe by its settings alone (not its name and
    texts), and a command-line recipe's centering and average of ``"none"`` (as they were recorded
    before they were recorded as ``None``) as ``None``."""
    recipe = settings.get("recipe")
    if not isinstance(recipe, dict):
        return settings
    fixed = {
        k: None if k in ("centering", "average") and v == "none" else v
        for k, v in recipe.items()
        if k not in RECIPE_TEXTS
    }
    return {**settings, "recipe": fixed}


def _recipe_hint(saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """A resume refused because a recipe's settings changed under its name: which recipe has them.

    Only where the checkpoint's recipe has the renamed recipe's settings on every key by which the
    two recipes differ, and this run's recipe does not (an override elsewhere, such as ``--lr``,
    keeps the hint; a changed seed alone does not give it)."""
    from boltzkit.learning.recipes import RENAMED_SETTINGS, get_recipe

    def base(record: dict[str, Any]) -> str | None:  # a recipe's name, without the "+" of replace()
        recipe = record.get("recipe")
        return str(recipe.get("name") or "").rstrip("+") if isinstance(recipe, dict) else None

    def settings_of(recipe: dict[str, Any]) -> dict[str, Any]:
        return _as_recorded_now({"recipe": recipe})["recipe"]

    name = base(saved)
    if name is None or base(now) != name or name not in RENAMED_SETTINGS:
        return None
    old = settings_of(get_recipe(RENAMED_SETTINGS[name]).to_dict())
    new = settings_of(get_recipe(name).to_dict())
    apart = [key for key in old if old[key] != new.get(key)]
    saved_recipe, now_recipe = settings_of(saved["recipe"]), settings_of(now["recipe"])
    if (
        apart
        and all(k not in saved_recipe or saved_recipe[k] == old[k] for k in apart)  # older: fewer keys
        and any(now_recipe.get(k) != old[k] for k in apart)
    ):
        return (
            f"the recipe {name!r} changed its settings on 2026-12-01; the interrupted run's are now "
            f"the recipe {RENAMED_SETTINGS[name]!r}: resume with --recipe {RENAMED_SETTINGS[name]}"
        )
    return None


# --------------------------------------------------------------------------------- validation
#: Parameters beyond this magnitude (times the data's largest magnitude, where that is above 1:
#: Gaussian units start their biases at the data's means) mean training diverged.
EXPLODED = 1e4
#: A fall of the training log-likelihood by more than this many nats (or this fraction of its
#: best value, whichever is larger) from its best value is reported.
FALL_NATS, FALL_FRACTION = 5.0, 0.1


def data_fingerprint(x: Tensor) -> str:
    """Identity of a data matrix: ``"sha256:HEX:NxD"``, the SHA-256 of its values in their dtype
    (as laid out row by row) with its shape. A checkpoint resumes only on data of the same
    fingerprint; any changed, moved or swapped value changes it (about 0.4 s for 60,000 MNIST
    rows of float32 on one core)."""
    values = x.detach().cpu().contiguous().view(torch.uint8).numpy()  # the bytes, in any dtype
    digest = hashlib.sha256(values).hexdigest()
    return f"sha256:{digest}:{x.shape[0]}x{x.shape[1]}"


def legacy_data_fingerprint(x: Tensor) -> str:
    """The fingerprint checkpoints recorded before :func:`data_fingerprint` hashed the values:
    shape, number of ones and a position-weighted sum (weights repeating every 97 rows and 89
    columns, so some changes of the data kept it). Used only to resume such a checkpoint."""
    n, d = x.shape
    xf = x.to(torch.float32)
    row_w = (torch.arange(n, device=x.device) % 97 + 1).to(torch.float32)
    col_w = (torch.arange(d, device=x.device) % 89 + 1).to(torch.float64)
    weighted = float((row_w @ xf).to(torch.float64) @ col_w)
    return f"{n}x{d}:{int(xf.sum().item())}:{weighted:.0f}"


# ------------------------------------------------------------------------------------- trainer
FUSED_DTYPES = (torch.float32, torch.float64)


def sgd_optimizer(
    couplings: Sequence[Tensor], others: Sequence[Tensor], *, lr: float, momentum: float, weight_decay: float
) -> torch.optim.SGD:
    """The one optimizer of training: ``torch.optim.SGD`` with momentum, the L2 penalty
    ``weight_decay`` on the couplings only (Hinton 2010, Sec. 10: not on the biases).

    It runs torch's fused step (one pass over each parameter: decay, momentum buffer and update
    together) where every parameter allows it (float32 or float64 on CPU or CUDA), else the
    ``foreach`` step, whose four passes over the 784 x 500 weights took a fifth of a CD-1 epoch on
    an Intel host (BENCHMARKS.md). Both compute ``b <- m b + g + lambda W; W <- W - lr b``; they
    agree to the rounding of float32 (the fused one keeps no extra precision there). A checkpoint
    restores its own choice with the optimizer's state. A torch without the fused CPU step (before
    2.4) gets the ``foreach`` one. The fused step needs every parameter's gradient at every step
    once any has a momentum buffer: the learners write all of them (``set_gradients``).
    """
    params = [*couplings, *others]
    fused = (
        bool(params)
        and all(p.dtype in FUSED_DTYPES and p.device.type in ("cpu", "cuda") for p in params)
        and len({p.device for p in params}) == 1
    )
    groups = [
        {"params": list(couplings), "weight_decay": float(weight_decay)},
        {"params": list(others), "weight_decay": 0.0},
    ]
    settings = {"lr": float(lr), "momentum": float(momentum)}
    kept = [group for group in groups if group["params"]]  # a checkpoint's groups are these
    if fused:
        try:
            return torch.optim.SGD(kept, **settings, fused=True)
        except (TypeError, RuntimeError):  # an older torch: no fused SGD, or none on the CPU
            pass
    return torch.optim.SGD(kept, **settings)


class Trainer:
    """Minibatch training of a Boltzmann machine with a learner and any ``torch.optim`` optimizer.

    Parameters
    ----------
    model
        Any member of the Boltzmann machine family; its parameters must be the ones ``optimizer``
        holds.
    learner
        CD-k, PCD-k or SAP (:mod:`boltzkit.learning.gradients`).
    optimizer
        Any ``torch.optim.Optimizer`` over the model's parameters.
    train_x
        Training data, shape ``(n_examples, n_visible)``, values in {0, 1}; copied once to the
        model's device and dtype.
    epochs
        Total number of epochs of the run (a resumed run counts the ones already done).
    batch_size
        Rows per minibatch.
    generator
        ``torch.Generator`` on the model's device (or a seed): shuffling, chains and samples.
    scheduler
        Optional ``torch.optim.lr_scheduler`` instance over ``optimizer``.
    scheduler_interval
        ``"batch"`` (step after every update) or ``"epoch"``.
    k_schedule
        Sweeps per update by epoch: a :class:`KSchedule` or spec (``"1:25"``); default the
        learner's fixed ``k``.
    momentum_schedule
        Momentum by epoch (a :class:`~boltzkit.learning.schedules.MomentumSchedule` or spec
        ``"0.5,0.9@5"``), set in every parameter group at the start of each epoch; default: the
        optimizer's own, unchanged.
    valid_x
        Optional validation data (used by callbacks).
    callbacks
        :class:`~boltzkit.learning.callbacks.Callback` instances.
    settings
        JSON-able description of the run, stored in checkpoints; a checkpoint whose settings
        differ is refused on resume.
    average
        Optional :class:`~boltzkit.learning.averaging.ParameterAverage` of the iterates, updated
        after every optimizer step of its epochs; the trainer keeps it (and checkpoints it) but
        never copies it into the model: :func:`boltzkit.learning.api.train` does, after
        :meth:`fit`.

    Attributes
    ----------
    epoch
        Number of completed epochs.
    history
        Per-epoch records.
    """

    def __init__(
        self,
        model: BoltzmannMachine,
        learner: Learner,
        optimizer: torch.optim.Optimizer,
        train_x: Tensor,
        *,
        epochs: int,
        batch_size: int = 100,
        generator: torch.Generator | int = 0,
        scheduler: Any = None,
        scheduler_interval: str = "batch",
        k_schedule: KSchedule | str | int | None = None,
        momentum_schedule: MomentumSchedule | str | None = None,
        valid_x: Tensor | None = None,
        callbacks: Sequence[Callback] = (),
        settings: dict[str, Any] | None = None,
        check_data: bool = True,
        average: ParameterAverage | None = None,
    ) -> None:
        self.model = model
        self.learner = learner
        self.optimizer = optimizer
        self.epochs = positive_int(epochs, "epochs")
        self.batch_size = positive_int(batch_size, "batch_size")
        if scheduler_interval not in ("batch", "epoch"):
            raise BoltzkitError("scheduler_interval must be 'batch' or 'epoch'", got=repr(scheduler_interval))
        self.scheduler = scheduler
        self.scheduler_interval = scheduler_interval
        self.k_schedule = ConstantK(learner.k) if k_schedule is None else parse_k_schedule(k_schedule)
        self.momentum_schedule = None if momentum_schedule is None else parse_momentum(momentum_schedule)
        n_visible = model.n_visible
        kw = {"device": model.device, "dtype": model.dtype}
        if check_data:
            train_x = check_binary(train_x, source="training data", n_visible=n_visible)
            if valid_x is not None:
                valid_x = check_binary(valid_x, source="validation data", n_visible=n_visible)
        self.train_x = train_x.to(**kw).contiguous()
        self.valid_x = None if valid_x is None else valid_x.to(**kw)
        if isinstance(generator, torch.Generator):
            self.generator = generator
        else:
            self.generator = torch.Generator(device=model.device)
            self.generator.manual_seed(int(generator))
        if self.generator.device.type != model.device.type:
            raise BoltzkitError(
                "the generator must live on the model's device",
                got=str(self.generator.device),
                expected=str(model.device),
            )
        self.callbacks = sorted(callbacks, key=lambda cb: getattr(cb, "order", 0))
        self.settings = dict(settings or {})
        self.average = average
        self.epoch = 0
        self.elapsed = 0.0
        self.history = History(settings=self.settings)
        self._stop = False
        self._warned_fall = False
        self._data_scale = 1.0  # max(1, |x|) of the training data, set when fit() begins
        #: whether this run's products of sparse binary states take the lookup
        #: (``_numerics.sparse_products``): this process's choice, or a resumed checkpoint's
        self.sparse_products: bool | None = None

    # --------------------------------------------------------------------------------- loop
    def stop(self) -> None:
        """Ask the trainer to stop after the current epoch (callable from a callback)."""
        self._stop = True

    def fit(self) -> History:
        """Train from :attr:`epoch` up to :attr:`epochs`; returns the history."""
        self._stop = False
        # the data's scale: Gaussian units start their biases at the data's means
        self._data_scale = max(1.0, float(self.train_x.abs().max()) if self.train_x.numel() else 1.0)
        self._check_parameters(self.epoch, None)  # a start already beyond the limit is no divergence
        self.learner.setup(self.model, self.train_x, self.generator)
        if self.average is not None:
            self.average.setup(self.model)
        if self.sparse_products is None:
            self.sparse_products = sparse_products()
        self.history.sparse_products = self.sparse_products
        for cb in self.callbacks:
            cb.on_train_begin(self)
        try:
            with sparse_products_as(self.sparse_products):
                while self.epoch < self.epochs and not self._stop:
                    self._one_epoch()
        finally:
            for cb in self.callbacks:
                cb.on_train_end(self)
        return self.history

    def _one_epoch(self) -> None:
        index = self.epoch  # 0-based index of this epoch
        k = self.k_schedule(index, self.epochs)
        self.learner.k = k
        if self.momentum_schedule is not None:
            for group in self.optimizer.param_groups:
                group["momentum"] = self.momentum_schedule(index)
        lr = float(self.optimizer.param_groups[0]["lr"])
        for cb in self.callbacks:
            cb.on_epoch_begin(self, index + 1)
        t0 = time.perf_counter()
        recon = self.run_epoch()
        if self.train_x.device.type == "cuda":
            torch.cuda.synchronize(self.train_x.device)
        seconds = time.perf_counter() - t0
        self._check_parameters(index + 1, lr)
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            self.scheduler.step()
        self.epoch = index + 1
        self.elapsed += seconds
        record: dict[str, Any] = {
            "epoch": self.epoch,
            "seconds": seconds,
            "elapsed": self.elapsed,
            "recon_error": recon,
            "lr": lr,
            "k": k,
            **self.learner.epoch_summary(),
        }
        if self.momentum_schedule is not None:
            record["momentum"] = self.momentum_schedule(index)
        self.history.append(record)
        for cb in self.callbacks:
            cb.on_epoch_end(self, record)
        self._watch_history(record)

    @torch.no_grad()
    def _check_parameters(self, epoch: int, lr: float | None) -> None:
        """Stop a diverged run before its parameters are recorded: non-finite values, or values
        beyond :data:`EXPLODED` times the data's scale (no trained Boltzmann machine has such
        weights). ``lr=None``: the model training starts from (or resumes at ``epoch``), refused
        as a start rather than called a divergence (a review's finding: a given model of |W| =
        1e29 was said to have diverged in epoch 1 for a learning rate too large)."""
        if lr is None:
            what = "training cannot start from this model" + (f" (resumed at epoch {epoch})" if epoch else "")
            hint = (
                "training starts from these parameters (a model given to train further, or a "
                "checkpoint): start from another model, or rescale this one."
            )
        else:
            what = f"training diverged in epoch {epoch}"
            hint = (
                f"the learning rate {lr:g} is too large for this model and data: lower it (e.g. --lr "
                f"{lr / 10:g}), and check --momentum; the last checkpoint, if any, holds the epoch before."
            )
        for name, param in self.model.named_parameters():
            finite = torch.isfinite(param)
            if not bool(finite.all()):
                raise BoltzkitError(
                    f"{what}: parameter {name} holds {int((~finite).sum())} NaN or infinite values",
                    hint=hint,
                )
            top = float(param.abs().max()) if param.numel() else 0.0
            limit = EXPLODED * self._data_scale
            if top > limit:
                raise BoltzkitError(
                    f"{what}: parameter {name} "
                    + ("holds" if lr is None else "reached")
                    + f" |{name}| = {top:.3g}",
                    expected=f"values below {limit:g}",
                    hint=hint,
                )

    def _watch_history(self, record: dict[str, Any]) -> None:
        """Warn once when the monitored training log-likelihood falls sharply from its best."""
        value = record.get("train_log_lik")
        if value is None or self._warned_fall:
            return
        best = max(r["train_log_lik"] for r in self.history.records if r.get("train_log_lik") is not None)
        if best - value > max(FALL_NATS, FALL_FRACTION * abs(best)):
            self._warned_fall = True
            warn(
                f"the training log-likelihood fell from {best:.4g} to {value:.4g} nats by epoch "
                f"{record['epoch']}: the learning rate may be too large (or, with persistent chains, k too "
                "small for them to keep up)",
            )

    @torch.no_grad()
    def run_epoch(self) -> float | None:
        """One pass over the shuffled training data; returns the mean reconstruction error.

        This is the hot loop: index a minibatch into a reused buffer, let the learner write the
        gradients, step the optimizer (and a per-update scheduler).
        """
        x = self.train_x
        n = x.shape[0]
        bs = min(self.batch_size, n)
        g = self.generator
        model = self.model
        perm = torch.randperm(n, generator=g, device=x.device)
        full = torch.empty((bs, x.shape[1]), dtype=x.dtype, device=x.device)
        set_gradients = self.learner.set_gradients
        opt_step = self.optimizer.step
        sched_step = (
            self.scheduler.step if self.scheduler is not None and self.scheduler_interval == "batch" else None
        )
        average_step = (
            self.average.update if self.average is not None and self.average.active(self.epoch) else None
        )
        recon_sum = torch.zeros((), dtype=x.dtype, device=x.device)
        tracked = False
        for start in range(0, n, bs):
            idx = perm[start : start + bs]
            batch = torch.index_select(x, 0, idx, out=full) if idx.shape[0] == bs else x.index_select(0, idx)
            r = set_gradients(model, batch, g)
            opt_step()
            if sched_step is not None:
                sched_step()
            if average_step is not None:
                average_step(model)
            if r is not None:
                recon_sum += r
                tracked = True
        return float(recon_sum) / n if tracked else None

    # ---------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """All state the remaining epochs depend on (tensors and JSON-able values)."""
        return {
            "epoch": self.epoch,
            "epochs": self.epochs,
            "elapsed": self.elapsed,
            "model": {k: v.detach() for k, v in self.model.state_dict().items()},
            "model_shape": list(self.model.layer_sizes),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "generator": generator_state(self.generator),
            "sparse_products": sparse_products() if self.sparse_products is None else self.sparse_products,
            "learner": self.learner.state_dict(),
            "learner_method": self.learner.method,
            "average": None if self.average is None else self.average.state_dict(),
            "history": [dict(r) for r in self.history.records],
            "settings": self.settings,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; refuses a checkpoint of a different run."""
        if list(state["model_shape"]) != list(self.model.layer_sizes):
            raise BoltzkitError(
                "the checkpoint holds a model of a different shape",
                got=f"{tuple(state['model_shape'])}",
                expected=f"{tuple(self.model.layer_sizes)} (units per layer)",
                hint="resume with the settings of the interrupted run, or start a new run.",
            )
        if state["learner_method"] != self.learner.method:
            raise BoltzkitError(
                "the checkpoint was written by a different learning method",
                got=state["learner_method"],
                expected=self.learner.method,
            )
        recorded = state.get("settings") or {}
        saved = _as_recorded_now(recorded)
        if saved and self.settings:
            now = _as_recorded_now(self.settings)
            saved_data = saved.get("train_data")
            if isinstance(saved_data, str) and not saved_data.startswith("sha256:") and "train_data" in now:
                now = {**now, "train_data": legacy_data_fingerprint(self.train_x)}  # an older checkpoint
            diff = _setting_changes(saved, now)
            if diff:
                shown = ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in diff)
                raise BoltzkitError(
                    "the checkpoint belongs to a run with different settings",
                    got=shown,
                    expected="the settings of the interrupted run",
                    hint=_recipe_hint(recorded, self.settings)
                    or (
                        "the training data differ from the interrupted run's (their fingerprint; a DBN's "
                        "upper layer trains on the output of the layers below, which another --data or "
                        "--bottom changes): "
                        if any(k == "train_data" for k, _, _ in diff)
                        else ""
                    )
                    + "resume with the same arguments, or delete the checkpoint to start over.",
                )
        if int(state["epochs"]) != self.epochs:
            raise BoltzkitError(
                "the checkpoint belongs to a run with a different number of epochs",
                got=self.epochs,
                expected=int(state["epochs"]),
                hint="the learning-rate and k schedules depend on the total; resume with the same epochs.",
            )
        # the products as the interrupted run took them; a checkpoint without the key was written
        # by a version that took the lookup wherever it applied (2026-11-26 to 12-02)
        self.sparse_products = bool(state.get("sparse_products", True))
        fixed = SPARSE_PRODUCTS_SETTINGS[sparse_products_setting()]
        if fixed is not None and fixed != self.sparse_products:  # the variable names the other path
            path = {True: "lookup", False: "dense product"}
            warn(
                f"${SPARSE_PRODUCTS_ENV} asks for the {path[fixed]} of sparse states, but the "
                f"interrupted run took the {path[self.sparse_products]}: "
                "the resumed run takes it again, so that it ends with an uninterrupted run's parameters "
                "(start over, not resuming, to train on the other path)"
            )
        device = self.model.device
        self.model.load_state_dict({k: v.to(device) for k, v in state["model"].items()})
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.learner.load_state_dict(state_to(state["learner"], device, self.model.dtype))
        restore_generator(self.generator, state["generator"])
        if self.average is not None:
            saved_average = state.get("average") or {}
            self.average.load_state_dict({k: v.to(device) for k, v in saved_average.items()}, self.model)
        self.epoch = int(state["epoch"])
        self.elapsed = float(state.get("elapsed", 0.0))
        self.history = History([dict(r) for r in state["history"]], settings=self.settings)

    def save_checkpoint(self, path: str | os.PathLike) -> None:
        """Write :meth:`state_dict` atomically to ``path`` (safetensors + JSON header)."""
        save_checkpoint(path, self.state_dict())

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore a checkpoint written by :meth:`save_checkpoint`."""
        self.load_state_dict(load_checkpoint(path))


__all__ = ["Trainer", "data_fingerprint", "sgd_optimizer"]
