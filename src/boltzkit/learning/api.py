"""One call to train an RBM: :func:`train_rbm`, used by the command line and paper reproductions."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.errors import BoltzkitError
from boltzkit.learning.callbacks import Callback, Checkpointer, ExactLogLikelihood, HistoryWriter, ProgressBar
from boltzkit.learning.gradients import make_learner
from boltzkit.learning.history import History
from boltzkit.learning.schedules import parse_k_schedule
from boltzkit.learning.trainer import Trainer, check_binary_data, data_fingerprint
from boltzkit.models.rbm import RBM
from boltzkit.samplers.operators import make_operator

#: Visible-bias initialisation clips the data mean to ``[EPS, 1 - EPS]`` before the logit.
VBIAS_CLIP = 1e-3


def visible_bias_from_data(x: Tensor, eps: float = VBIAS_CLIP) -> Tensor:
    """``log(p / (1 - p))`` of the per-unit data mean ``p`` clipped to ``[eps, 1 - eps]``.

    Hinton (2010, "A practical guide to training RBMs", Sec. 8): with these visible biases and
    zero weights the model's visible marginals equal the data's. Shape ``(n_visible,)``, float64.
    """
    p = (x.sum(0, dtype=torch.float64) / x.shape[0]).clamp(eps, 1.0 - eps)
    return torch.log(p) - torch.log1p(-p)


def init_rbm(
    n_visible: int,
    n_hidden: int,
    *,
    generator: torch.Generator,
    data: Tensor | None = None,
    scale: float = 0.01,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> RBM:
    """A fresh RBM: ``W ~ N(0, scale^2)`` from ``generator``, hidden biases 0, visible biases from
    the data mean (:func:`visible_bias_from_data`) when ``data`` is given, else 0."""
    rbm = RBM.random(n_visible, n_hidden, scale=scale, generator=generator, dtype=dtype, device=device)
    if data is not None:
        with torch.no_grad():
            rbm.vbias.copy_(visible_bias_from_data(data).to(rbm.vbias))
    return rbm


def _positive_int(value: object, name: str, hint: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BoltzkitError(
            f"{name} must be a positive integer", got=repr(value), expected="an integer >= 1", hint=hint
        )
    return value


def _non_negative_float(
    value: object, name: str, *, strictly: bool = False, upper: float | None = None
) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        v = math.nan
    ok = math.isfinite(v) and (v > 0 if strictly else v >= 0) and (upper is None or v < upper)
    if not ok:
        bound = "> 0" if strictly else ">= 0"
        if upper is not None:
            bound += f" and < {upper:g}"
        raise BoltzkitError(f"{name} must be a finite number {bound}", got=repr(value))
    return v


def train_rbm(
    train_x: Tensor,
    *,
    n_hidden: int,
    method: str = "cd",
    k: int = 1,
    k_schedule: str | None = None,
    epochs: int = 1,
    lr: float = 0.05,
    batch_size: int = 100,
    sampler: str = "gibbs",
    n_chains: int = 100,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    valid_x: Tensor | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    history_path: str | os.PathLike | None = None,
    progress: bool = True,
    init_vbias_from_data: bool = True,
    exact_ll_max_bits: int = 20,
    callbacks: Sequence[Callback] = (),
    lr_decay: bool | None = None,
) -> tuple[RBM, History]:
    """Train a binary RBM by CD-k or PCD-k with SGD.

    The gradient of the mean log-likelihood (Salakhutdinov & Murray 2008, Sec. 2) is
    ``E_data[v h^T] - E_model[v h^T]`` (biases alike); CD-k estimates the model term from ``k``
    sweeps started at the data (S&M 2008, Eq. 7), PCD-k from persistent chains (Tieleman 2008).
    The sampler may be Gibbs, flip-the-state or a blend (Brügge, Fischer & Igel 2013).

    Parameters
    ----------
    train_x
        Binary training data, shape ``(n_examples, n_visible)``.
    n_hidden
        Number of hidden units.
    method
        ``"cd"`` or ``"pcd"``.
    k
        Sweeps per update (fixed); ignored when ``k_schedule`` is given.
    k_schedule
        Spec of a schedule over epochs, e.g. ``"1:25"`` / ``"linear:1:25"`` (the CD25 model of
        S&M 2008 raised ``k`` from 1 to 25), ``"geometric:1:25"``, ``"constant:3"``.
    epochs
        Passes over the training data.
    lr
        Learning rate of SGD. For PCD it decays linearly to 0 over the run (see ``lr_decay``).
    batch_size
        Examples per update (the last minibatch of an epoch may be smaller).
    sampler
        ``"gibbs"``, ``"flip"`` or ``"blend:ALPHA"`` (``"blend:A_V,A_H"``).
    n_chains
        Persistent chains for PCD (unused by CD).
    momentum, weight_decay
        Of ``torch.optim.SGD``; weight decay applies to ``W`` only, not to the biases.
    seed
        Seeds the single ``torch.Generator`` behind initialisation, shuffling and sampling.
    device, dtype
        Where and in what precision to train (``"auto"`` picks CUDA when present).
    valid_x
        Optional held-out data; its exact log-likelihood is recorded when tractable.
    checkpoint_path
        Checkpoint file; written after the last epoch and every ``checkpoint_every`` epochs.
    checkpoint_every
        Interval in epochs (0: only at the end).
    resume
        Continue from ``checkpoint_path`` when it exists (with the same settings); the result
        equals that of an uninterrupted run. When it does not exist, training starts afresh.
    history_path
        Where to write the per-epoch history as CSV and JSON (``PATH.csv`` / ``PATH.json``).
    progress
        Show a progress bar on stderr.
    init_vbias_from_data
        Visible biases ``log(p / (1 - p))`` of the data means (else 0).
    exact_ll_max_bits
        Record exact ``log Z`` and mean log-likelihoods each epoch when
        ``min(n_visible, n_hidden) <= exact_ll_max_bits``.
    callbacks
        Extra :class:`~boltzkit.learning.callbacks.Callback` instances.
    lr_decay
        Decay the learning rate linearly to 0 over all updates (``torch.optim.lr_scheduler.LinearLR``);
        default ``True`` for PCD and ``False`` for CD.

    Returns
    -------
    (RBM, History)
        The trained model and the per-epoch records.

    Raises
    ------
    BoltzkitError
        On invalid arguments or data (:class:`~boltzkit.errors.DataError`), or a checkpoint of a
        different run.

    Examples
    --------
    >>> x = (torch.rand(200, 16, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    >>> rbm, hist = train_rbm(x, n_hidden=5, epochs=2, progress=False)
    >>> len(hist), rbm.W.shape
    (2, torch.Size([16, 5]))
    """
    # ------------------------------------------------------------------------ validation
    n_hidden = _positive_int(n_hidden, "n_hidden")
    method_name = str(method).strip().lower()
    if method_name not in ("cd", "pcd"):
        raise BoltzkitError("unknown learning method", got=repr(method), expected="'cd' or 'pcd'")
    k = _positive_int(k, "k", hint="k is the number of sampling sweeps per update, e.g. 1 for CD-1.")
    schedule = parse_k_schedule(k_schedule if k_schedule is not None else k)
    epochs = _positive_int(epochs, "epochs")
    batch_size = _positive_int(batch_size, "batch_size")
    n_chains = _positive_int(n_chains, "n_chains")
    lr = _non_negative_float(lr, "the learning rate lr", strictly=True)
    momentum = _non_negative_float(momentum, "momentum", upper=1.0)
    weight_decay = _non_negative_float(weight_decay, "weight_decay")
    checkpoint_every = int(checkpoint_every)
    if checkpoint_every < 0:
        raise BoltzkitError("checkpoint_every must be >= 0", got=checkpoint_every)
    if resume and checkpoint_path is None:
        raise BoltzkitError(
            "resume needs a checkpoint path", hint="pass checkpoint_path (--checkpoint FILE)."
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BoltzkitError("seed must be an integer", got=repr(seed))
    if (
        not isinstance(dtype, torch.dtype)
        or not dtype.is_floating_point
        or dtype
        in (
            torch.float16,
            torch.bfloat16,
        )
    ):
        raise BoltzkitError("dtype must be torch.float32 or torch.float64", got=repr(dtype))
    operator = make_operator(sampler)
    dev = resolve_device(device)
    train_x = check_binary_data(train_x, "training data")
    n_visible = int(train_x.shape[1])
    if valid_x is not None:
        valid_x = check_binary_data(valid_x, "validation data", n_visible)
    if lr_decay is None:
        lr_decay = method_name == "pcd"

    # ---------------------------------------------------------------------- construction
    x = train_x.to(device=dev, dtype=dtype).contiguous()
    gen = make_generator(int(seed), dev)
    rbm = init_rbm(
        n_visible, n_hidden, generator=gen, data=x if init_vbias_from_data else None, dtype=dtype, device=dev
    )
    learner = make_learner(method_name, k=schedule(0, epochs), sampler=operator, n_chains=n_chains)
    optimizer = torch.optim.SGD(
        [
            {"params": [rbm.W], "weight_decay": weight_decay},
            {"params": [rbm.vbias, rbm.hbias], "weight_decay": 0.0},
        ],
        lr=lr,
        momentum=momentum,
    )
    scheduler = None
    if lr_decay:
        n_updates = epochs * math.ceil(x.shape[0] / min(batch_size, x.shape[0]))
        scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=1.0, end_factor=0.0, total_iters=n_updates
        )
    settings: dict[str, Any] = {
        "n_visible": n_visible,
        "n_hidden": n_hidden,
        "method": method_name,
        "k_schedule": schedule.spec,
        "sampler": operator.name,
        "n_chains": n_chains if method_name == "pcd" else None,
        "epochs": epochs,
        "lr": lr,
        "lr_decay": bool(lr_decay),
        "batch_size": batch_size,
        "momentum": momentum,
        "weight_decay": weight_decay,
        "seed": seed,
        "device": dev.type,
        "dtype": str(dtype).replace("torch.", ""),
        "init_vbias_from_data": bool(init_vbias_from_data),
        "train_data": data_fingerprint(x),
    }
    cbs: list[Callback] = [ExactLogLikelihood(exact_ll_max_bits)]
    cbs.extend(callbacks)
    if history_path is not None:
        cbs.append(HistoryWriter(history_path))
    if progress:
        cbs.append(ProgressBar())
    if checkpoint_path is not None:
        cbs.append(Checkpointer(checkpoint_path, checkpoint_every))
    trainer = Trainer(
        rbm,
        learner,
        optimizer,
        x,
        epochs=epochs,
        batch_size=batch_size,
        generator=gen,
        scheduler=scheduler,
        scheduler_interval="batch",
        k_schedule=schedule,
        valid_x=valid_x,
        callbacks=cbs,
        settings=settings,
        check_data=False,
    )
    if resume:
        path = Path(checkpoint_path)  # type: ignore[arg-type]
        if path.exists():
            trainer.load_checkpoint(path)
        else:
            warnings.warn(f"no checkpoint at {path}; training from the start", stacklevel=2)
    history = trainer.fit()
    rbm.zero_grad(set_to_none=True)
    return rbm, history


__all__ = ["init_rbm", "train_rbm", "visible_bias_from_data"]
