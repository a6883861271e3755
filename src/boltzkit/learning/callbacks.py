"""Trainer callbacks: monitoring, progress, history files and checkpoints.

A callback is told when training begins and ends and when each epoch begins and ends. At the end
of an epoch the trainer has already appended the epoch's record (a ``dict``) to its history, and
calls the callbacks in ascending :attr:`Callback.order`: metric callbacks (order 0) add keys to the
record, then writers (50), the progress bar (60) and the checkpointer (100) see the complete
record. Callbacks that draw random numbers must use their own generator: the trainer's generator
belongs to training, and touching it would break exact resumption.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import Tensor
from tqdm.auto import tqdm

from boltzkit.errors import warn
from boltzkit.learning.history import History, history_paths


class Trainer(Protocol):
    """What a callback sees of the training loop (:class:`boltzkit.learning.trainer.Trainer`
    satisfies it): the model and its learner, the data, the history, the iterate average (or
    ``None``), the epochs finished so far (the 0-based index of the epoch under way at
    ``on_epoch_begin``) and the planned number, a checkpoint writer and a way to stop early."""

    model: Any
    learner: Any
    train_x: Tensor
    valid_x: Tensor | None
    history: History
    average: Any
    epoch: int
    epochs: int

    def save_checkpoint(self, path: str | os.PathLike) -> None: ...

    def stop(self) -> None: ...


class Callback:
    """Base class; override the hooks you need.

    Attributes
    ----------
    order
        Callbacks run in ascending order at each hook (stable for ties).
    """

    order: int = 0

    def on_train_begin(self, trainer: Trainer) -> None:
        """Before the first epoch of this call to :meth:`Trainer.fit` (also after a resume)."""

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        """Before epoch ``epoch`` (1-based)."""

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        """After an epoch; ``record`` is ``trainer.history[-1]`` and may be extended in place."""

    def on_train_end(self, trainer: Trainer) -> None:
        """After the last epoch (or after a stop)."""


class LogLikelihood(Callback):
    """Log-likelihood monitor: calls a function that measures the model and adds its numbers to
    the epoch's record.

    The learning layer does not know how log Z is obtained: the caller hands in ``evaluate``
    (e.g. :func:`boltzkit.estimators.likelihood.exact_log_likelihoods`, which enumerates when the
    model is small enough and returns nothing otherwise).

    Parameters
    ----------
    evaluate
        ``evaluate(model, datasets) -> dict`` with ``datasets = {"train": x, "valid": x}`` (the
        trainer's data unless given here); the returned items (e.g. ``log_z``,
        ``train_log_lik``) go into the record.
    every
        Evaluate every ``every`` epochs (and always at the last one).
    train_x, valid_x
        Data to evaluate; default the trainer's training and validation data.

    Warns
    -----
    Once, when one measurement takes more than :attr:`COSTLY` times the epoch's training (and over
    :attr:`NOTICEABLE` seconds): the monitor then sets the run's pace (an exact log-likelihood
    enumerates ``2^bits`` states per example), and the warning names the ``every`` that keeps it
    within the training time.
    """

    order = 0
    COSTLY = 2.0
    NOTICEABLE = 1.0

    def __init__(
        self,
        evaluate: Callable[[Any, dict[str, torch.Tensor]], dict[str, Any]],
        *,
        every: int = 1,
        train_x: torch.Tensor | None = None,
        valid_x: torch.Tensor | None = None,
    ) -> None:
        self.evaluate = evaluate
        self.every = max(1, int(every))
        self.train_x = train_x
        self.valid_x = valid_x
        self._warned = False

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        epoch = record["epoch"]
        if epoch % self.every and epoch != trainer.epochs:
            return
        datasets = {"train": self.train_x if self.train_x is not None else trainer.train_x}
        valid_x = self.valid_x if self.valid_x is not None else trainer.valid_x
        if valid_x is not None:
            datasets["valid"] = valid_x
        t0 = time.perf_counter()
        record.update(self.evaluate(trainer.model, datasets))
        self._check_cost(time.perf_counter() - t0, float(record.get("seconds") or 0.0), trainer, epoch)

    def _check_cost(self, seconds: float, epoch_seconds: float, trainer: Trainer, epoch: int) -> None:
        """Warn once when measuring costs more than :attr:`COSTLY` epochs of training."""
        if self._warned or epoch == trainer.epochs:
            return
        if seconds <= max(self.COSTLY * epoch_seconds, self.NOTICEABLE):
            return
        self._warned = True
        every = math.ceil(seconds / max(epoch_seconds, 1e-3))
        warn(
            f"the log-likelihood monitor took {seconds:.2f} s after {epoch_seconds:.2f} s of training "
            f"in epoch {epoch}: measuring every {self.every} epoch(s) is most of this run's time; "
            f"measure every {every} epochs (--monitor-every {every}, or monitor_every={every}) to "
            "keep it within the training time",
        )


class HistoryWriter(Callback):
    """Rewrite the history as CSV and JSON (atomically) after every epoch.

    Parameters
    ----------
    path
        Base path; see :func:`boltzkit.learning.history.history_paths`.
    """

    order = 50

    def __init__(self, path: str | os.PathLike) -> None:
        self.csv_path, self.json_path = history_paths(path)

    def _write(self, trainer: Trainer) -> None:
        trainer.history.to_csv(self.csv_path)
        trainer.history.to_json(self.json_path)

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self._write(trainer)


class ProgressBar(Callback):
    """A tqdm bar over epochs on stderr, showing the latest record's main numbers."""

    order = 60
    KEYS = ("recon_error", "train_log_lik", "valid_log_lik", "k", "lr")

    def __init__(self, *, desc: str | None = None, file: Any = None, leave: bool = True) -> None:
        self.desc = desc
        self.file = file
        self.leave = leave
        self._bar: Any = None

    def on_train_begin(self, trainer: Trainer) -> None:
        self._bar = tqdm(
            total=trainer.epochs,
            initial=trainer.epoch,
            desc=self.desc or f"training {trainer.learner.describe()}",
            unit="epoch",
            file=self.file if self.file is not None else sys.stderr,
            leave=self.leave,
            dynamic_ncols=True,
        )

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        if self._bar is None:
            return
        post = {}
        for key in self.KEYS:
            value = record.get(key)
            if value is not None:
                post[key] = f"{value:.4g}" if isinstance(value, float) else value
        self._bar.set_postfix(post, refresh=False)
        self._bar.update(1)

    def on_train_end(self, trainer: Trainer) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Checkpointer(Callback):
    """Save a checkpoint every ``every`` epochs and after the last epoch.

    Parameters
    ----------
    path
        Checkpoint file (written atomically, see :mod:`boltzkit.learning.checkpoint`).
    every
        Interval in epochs; ``0`` saves only after the last epoch.
    min_seconds
        Skip a periodic save when fewer seconds than this have passed since the last one (the last
        epoch is always saved): many short epochs then cost a few writes, not one each, and an
        interrupted run loses at most this much work. ``0`` saves on every interval.
    """

    order = 100

    def __init__(self, path: str | os.PathLike, every: int = 1, *, min_seconds: float = 0.0) -> None:
        self.path = path
        self.every = int(every)
        self.min_seconds = float(min_seconds)
        self._last_save = 0.0  # set when training begins

    def on_train_begin(self, trainer: Trainer) -> None:
        self._last_save = time.perf_counter()

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        epoch = record["epoch"]
        waited = time.perf_counter() - self._last_save >= self.min_seconds
        if epoch == trainer.epochs or (self.every > 0 and epoch % self.every == 0 and waited):
            trainer.save_checkpoint(self.path)
            self._last_save = time.perf_counter()


class SwapRates(Callback):
    """Parallel tempering's ladder in each epoch's record: the swap acceptance of every pair of
    adjacent temperatures during the epoch (``swap_rates``) and the replicas' round trips so far
    (``round_trips``).

    Parameters
    ----------
    learner
        A tempering learner (:class:`~boltzkit.learning.gradients.PTLearner`): anything with
        ``swap_totals`` (acceptances per pair summed over all rounds, and the rounds),
        ``round_trips`` (an int), ``betas`` and ``adaptive_ladder``.

    Warns
    -----
    Once, when an epoch ends in which no replica completed a round trip (hottest temperature to
    ``beta = 1`` and back) while some adjacent pair swaps in fewer than :attr:`BLOCKED` of its tries.
    The ladder is then cut at that pair: the chains at ``beta = 1`` never receive a state from the
    hot end, whose smoothed distributions are what makes tempering mix faster (S3 Sec. 1; Desjardins
    et al. 2010), and the negative phase is single-temperature sampling at ``t`` times its cost. An
    epoch of fewer than ``2 (t - 1)`` swap rounds, too short for any round trip, is not judged. The
    warning names the pair and the remedies: more temperatures, a ladder that moves towards equal
    swap rates (``--ladder adaptive``, unless it already does), or Gibbs chains at the same cost.
    """

    order = 0
    BLOCKED = 0.01

    def __init__(self, learner: Any) -> None:
        self.learner = learner
        self._start: tuple[torch.Tensor, int, int] | None = None
        self._warned = False

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        accepted, rounds = self.learner.swap_totals
        self._start = (accepted, rounds, int(self.learner.round_trips))

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        accepted, rounds = self.learner.swap_totals
        start_accepted, start_rounds, start_trips = self._start or (torch.zeros_like(accepted), 0, 0)
        if rounds <= start_rounds:  # no swap round this epoch: nothing to say
            return
        rates = ((accepted - start_accepted) / (rounds - start_rounds)).tolist()
        trips = int(self.learner.round_trips)
        record["swap_rates"] = [round(r, 4) for r in rates]
        record["round_trips"] = trips
        # a round trip takes at least 2 (t - 1) swap rounds: a shorter epoch proves nothing
        too_short = rounds - start_rounds < 2 * len(rates)
        if self._warned or too_short or trips > start_trips or not rates or min(rates) >= self.BLOCKED:
            return
        self._warned = True
        pair = min(range(len(rates)), key=rates.__getitem__)
        betas = getattr(self.learner, "betas", None)
        where = (
            f"between beta = {float(betas[pair]):.3g} and {float(betas[pair + 1]):.3g} (the ladder now)"
            if betas is not None and len(betas) == len(rates) + 1
            else f"between temperatures {pair} and {pair + 1}"
        )
        warn(
            f"parallel tempering's ladder is cut: in epoch {record['epoch']} no replica made a round "
            f"trip, and the swaps {where} were accepted in {rates[pair]:.2%} of tries (every pair's "
            f"rates: {', '.join(f'{r:.3f}' for r in rates)}); the chains at beta = 1 get nothing from "
            "the hot replicas, so this negative phase is single-temperature sampling at "
            f"{len(rates) + 1} times its cost. Use more temperatures (--temperatures), "
            + (
                ""
                if getattr(self.learner, "adaptive_ladder", False)
                else "a ladder that moves towards equal swap rates (--ladder adaptive), "
            )
            + "or persistent Gibbs chains",
        )


class LambdaCallback(Callback):
    """A callback from plain functions, e.g. ``LambdaCallback(on_epoch_end=lambda t, r: ...)``."""

    def __init__(
        self,
        *,
        on_train_begin: Any = None,
        on_epoch_begin: Any = None,
        on_epoch_end: Any = None,
        on_train_end: Any = None,
        order: int = 0,
    ) -> None:
        self.order = order
        self._hooks = {
            "on_train_begin": on_train_begin,
            "on_epoch_begin": on_epoch_begin,
            "on_epoch_end": on_epoch_end,
            "on_train_end": on_train_end,
        }

    def on_train_begin(self, trainer: Trainer) -> None:
        if self._hooks["on_train_begin"]:
            self._hooks["on_train_begin"](trainer)

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        if self._hooks["on_epoch_begin"]:
            self._hooks["on_epoch_begin"](trainer, epoch)

    def on_epoch_end(self, trainer: Trainer, record: dict[str, Any]) -> None:
        if self._hooks["on_epoch_end"]:
            self._hooks["on_epoch_end"](trainer, record)

    def on_train_end(self, trainer: Trainer) -> None:
        if self._hooks["on_train_end"]:
            self._hooks["on_train_end"](trainer)


__all__ = [
    "Callback",
    "Checkpointer",
    "HistoryWriter",
    "LambdaCallback",
    "LogLikelihood",
    "ProgressBar",
    "SwapRates",
]
