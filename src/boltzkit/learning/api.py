"""One call to train a model: :func:`train` (any member of the family, from its initial state),
:func:`train_model` (initialise a model of a kind, then train it) and :func:`train_rbm` (the
recipe for RBMs), used by the command line and the paper reproductions."""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, positive_int, warn, whole_number
from boltzkit.learning.averaging import ParameterAverage, parse_average
from boltzkit.learning.callbacks import (
    Callback,
    Checkpointer,
    HistoryWriter,
    LogLikelihood,
    ProgressBar,
    SwapRates,
)
from boltzkit.learning.centering import Centering, parse_centering
from boltzkit.learning.gradients import PTLearner, make_learner
from boltzkit.learning.history import History
from boltzkit.learning.phases import (
    ClampedChains,
    ExactConditional,
    MeanFieldPhase,
    PositivePhase,
    default_positive,
)
from boltzkit.learning.recipes import SETTINGS, Recipe, get_recipe, recipe_misuse
from boltzkit.learning.schedules import (
    LRSchedule,
    MomentumSchedule,
    method_lr_schedule,
    parse_k_schedule,
    parse_lr_schedule,
    parse_momentum,
)
from boltzkit.learning.trainer import Trainer, data_fingerprint, sgd_optimizer
from boltzkit.learning.unit_dbm import UnitDBMLearner, init_unit_dbm
from boltzkit.learning.unit_rbm import UnitRBMLearner, init_unit_rbm, prepared
from boltzkit.models.boltzmann import BoltzmannMachine, kind_coupling_keys
from boltzkit.models.rbm import RBM
from boltzkit.models.unit_dbm import UnitDBM
from boltzkit.models.unit_rbm import UnitRBM
from boltzkit.samplers.operators import make_operator
from boltzkit.units import UnitType, unit_type

#: Models whose visible units are Gaussian or categorical: they train by their own learners.
UNIT_MODELS = (UnitRBM, UnitDBM)

#: Model kinds :func:`init_model` builds.
TRAINABLE_KINDS = ("rbm", "srbm", "bm", "dbm", "fvbm")
#: Learning methods.
METHODS = ("cd", "pcd", "sap", "pt")
#: Positive phases by name.
POSITIVE_PHASES = ("auto", "exact", "mean-field", "clamped-chains")

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


def init_model(
    kind: str,
    n_visible: int,
    hidden: Sequence[int] | int,
    *,
    generator: torch.Generator,
    data: Tensor | None = None,
    scale: float = 0.01,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> BoltzmannMachine:
    """A fresh model of ``kind``: couplings between layers ``~ N(0, scale^2)`` from ``generator``,
    laterals zero (an SRBM or BM starts as the RBM it extends), hidden biases 0, visible biases
    from the data mean (:func:`visible_bias_from_data`) when ``data`` is given.

    Parameters
    ----------
    kind
        ``"rbm"``, ``"srbm"``, ``"bm"``, ``"dbm"`` or ``"fvbm"`` (no hidden units: laterals between
        the visible units; ``hidden=0`` of any kind means it too).
    n_visible
        Visible units.
    hidden
        Hidden units: one number for rbm/srbm/bm, one per hidden layer for a DBM, 0 (or ignored)
        for an fvbm.
    """
    kind = str(kind).strip().lower()
    if kind not in TRAINABLE_KINDS:
        raise BoltzkitError("unknown model kind", got=repr(kind), expected=", ".join(TRAINABLE_KINDS))
    sizes = [int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden]
    if kind == "fvbm" or sizes == [0]:  # no hidden units: a fully visible Boltzmann machine
        kw = {"dtype": dtype, "device": device}
        model = BoltzmannMachine(
            [int(n_visible)],
            {(0, 0): torch.zeros(n_visible, n_visible, **kw)},
            [torch.zeros(n_visible, **kw)],
            **kw,
        )
        if data is not None:
            with torch.no_grad():
                model.bias(0).copy_(visible_bias_from_data(data).to(model.bias(0)))
        return model
    if not sizes or any(h < 1 for h in sizes):
        raise BoltzkitError("hidden layer sizes must be positive integers", got=hidden)
    if kind != "dbm" and len(sizes) != 1:
        raise BoltzkitError(
            f"a {kind} has one hidden layer", got=f"{len(sizes)} sizes", hint="use --model dbm for several."
        )
    if kind == "rbm":
        return init_rbm(
            n_visible, sizes[0], generator=generator, data=data, scale=scale, dtype=dtype, device=device
        )
    layer_sizes = [int(n_visible), *sizes]
    kw = {"generator": generator, "dtype": dtype, "device": device}
    weights = [
        torch.randn(a, b, **kw) * scale for a, b in zip(layer_sizes[:-1], layer_sizes[1:], strict=True)
    ]
    if kind == "dbm":
        model = BoltzmannMachine.dbm(layer_sizes, weights=weights, dtype=dtype, device=device)
    elif kind == "srbm":
        model = BoltzmannMachine.srbm(n_visible, sizes[0], W=weights[0], dtype=dtype, device=device)
    else:
        model = BoltzmannMachine.bm(n_visible, sizes[0], W=weights[0], dtype=dtype, device=device)
    if data is not None:
        with torch.no_grad():
            model.bias(0).copy_(visible_bias_from_data(data).to(model.bias(0)))
    return model


def make_positive(spec: str | PositivePhase, *, damping: float = 0.5) -> PositivePhase | None:
    """``"auto"`` (``None``: chosen per model), ``"exact"``, ``"mean-field"`` or ``"clamped-chains"``."""
    if isinstance(spec, PositivePhase):
        return spec
    name = str(spec).strip().lower()
    if name == "auto":
        return None
    if name == "exact":
        return ExactConditional()
    if name == "mean-field":
        return MeanFieldPhase(damping=damping)
    if name == "clamped-chains":
        return ClampedChains()
    raise BoltzkitError("unknown positive phase", got=repr(spec), expected=", ".join(POSITIVE_PHASES))


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


def _refuse_binary_options(
    model: UnitRBM | UnitDBM,
    method: str,
    *,
    positive: str | PositivePhase,
    probabilities: bool,
    reconstruction: str,
    centering: str | Centering | None,
    damping: float,
) -> None:
    """A clear error for each training option that a model with Gaussian or categorical visible
    units cannot take (rather than ignoring it)."""
    units = model.visible_units.name
    refused = [
        (method == "pt", f"method {method!r}", "cd or pcd (a DBM: pcd)"),
        (
            not (isinstance(positive, str) and positive.strip().lower() == "auto"),
            f"positive phase {positive!r}",
            "'auto' (exact p(h | v) for an RBM, mean-field for a DBM)",
        ),
        (probabilities, "probabilities as data", "values of the visible unit type"),
        (reconstruction != "sample", f"reconstruction {reconstruction!r}", "'sample'"),
        (parse_centering(centering) is not None, "centering", "no centering"),
        (
            float(damping) != 0.5,
            f"a mean-field damping of {damping:g}",
            "the default (a unit DBM's mean field alternates its odd and even layers undamped)",
        ),
    ]
    for bad, got, expected in refused:
        if bad:
            raise BoltzkitError(
                f"{got} applies to binary visible units only",
                got=f"{got} for a {model.kind} with {units} visible units",
                expected=expected,
            )


def train(
    model: BoltzmannMachine | UnitRBM | UnitDBM,
    train_x: Tensor,
    *,
    generator: torch.Generator,
    method: str = "cd",
    k: int = 1,
    k_schedule: str | None = None,
    epochs: int = 1,
    lr: float = 0.05,
    batch_size: int = 100,
    sampler: str = "gibbs",
    n_chains: int = 100,
    temperatures: int = 10,
    ladder: str = "uniform",
    positive: str | PositivePhase = "auto",
    damping: float = 0.5,
    momentum: float | str | MomentumSchedule = 0.0,
    weight_decay: float = 0.0,
    valid_x: Tensor | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    checkpoint_seconds: float = 0.0,
    resume: bool = False,
    history_path: str | os.PathLike | None = None,
    progress: bool = True,
    monitor: Callable[[Any, dict[str, Tensor]], dict[str, Any]] | None = None,
    monitor_every: int = 1,
    callbacks: Sequence[Callback] = (),
    lr_schedule: str | LRSchedule | None = None,
    settings: dict[str, Any] | None = None,
    probabilities: bool = False,
    reconstruction: str = "sample",
    centering: str | Centering | None = None,
    average: str | ParameterAverage | None = None,
    learn_sigma: bool = True,
) -> History:
    """Train any member of the Boltzmann machine family in place with SGD.

    The gradient of the mean log-likelihood is ``E_data[T] - E_model[T]`` of the sufficient
    statistics (S2 Eqs. 35, 47, 51): the data term from the positive phase (exact ``p(h | v)`` for
    RBMs and SRBMs, damped mean-field for BMs and DBMs: S2 Sec. 4.3), the model term from CD-k
    chains started at the data (S&M 2008, Eq. 7) or persistent chains (PCD, SAP: S2 Sec. 4.1.1),
    with any sampler (Brügge, Fischer & Igel 2013).

    Parameters
    ----------
    model
        The model, trained in place (its dtype and device are the training's). An RBM or DBM with
        Gaussian or categorical visible units (:class:`~boltzkit.models.unit_rbm.UnitRBM`,
        :class:`~boltzkit.models.unit_dbm.UnitDBM`) trains by its own learner
        (:class:`~boltzkit.learning.unit_rbm.UnitRBMLearner`: CD-k or PCD;
        :class:`~boltzkit.learning.unit_dbm.UnitDBMLearner`: mean-field and persistent chains)
        under the same trainer, schedules, checkpoints and history; centering, a mean
        reconstruction, other positive phases and parallel-tempering learning are for binary
        units and refused.
    train_x
        Training data, shape ``(n_examples, n_visible)``: binary, or what the model's visible
        unit type takes (real values, category indices).
    generator
        The one ``torch.Generator`` behind shuffling and sampling (on the model's device).
    method
        ``"cd"``, ``"pcd"`` or ``"sap"`` (persistent chains; ``sap`` names S2's procedure).
    k, k_schedule
        Sweeps per update, fixed or by epoch (``"1:25"``, ``"geometric:1:25"``, ...).
    epochs, lr, batch_size
        Passes over the data, SGD learning rate, examples per update.
    sampler
        ``"gibbs"``, ``"flip"``, ``"blend:ALPHA"``, ``"A+B"`` (cycle) or ``"A*N"`` (repeat).
    n_chains
        Persistent chains (``pcd``/``sap``; ``pt``: chains per replica).
    temperatures, ladder
        Parallel tempering (``method="pt"``, t-PT_k of Brügge, Fischer & Igel 2013): replicas and
        the ladder of inverse temperatures (``"uniform"`` on [0, 1] as S3, ``"geometric"``,
        ``"adaptive"``); ``k`` is the number of sweeps between swap rounds. Each epoch's record
        gets the swap rates and the round trips.
    positive, damping
        Positive phase (``"auto"``, ``"exact"``, ``"mean-field"``, ``"clamped-chains"``) and the
        mean-field damping.
    momentum
        Of ``torch.optim.SGD``: a number, or a schedule by epoch ``"0.5,0.9@5"`` (0.5 for the
        first 5 epochs, then 0.9: :class:`~boltzkit.learning.schedules.MomentumSchedule`).
    weight_decay
        L2 penalty of ``torch.optim.SGD`` on the couplings, not on the biases.
    valid_x
        Optional held-out data (for the monitor).
    checkpoint_path, checkpoint_every, checkpoint_seconds, resume
        Atomic checkpoints after the last epoch and every ``checkpoint_every`` epochs, skipping a
        periodic one when fewer than ``checkpoint_seconds`` have passed since the last; ``resume``
        continues from ``checkpoint_path`` when it exists (with the same settings), reaching the
        parameters of an uninterrupted run.
    history_path
        Where to write the per-epoch history (``PATH.csv`` / ``PATH.json``).
    progress
        Show a progress bar on stderr.
    monitor, monitor_every
        ``monitor(model, {"train": x, "valid": x}) -> dict`` added to the epoch's record every
        ``monitor_every`` epochs (e.g. :func:`boltzkit.estimators.likelihood.exact_log_likelihoods`).
    callbacks
        Extra callbacks.
    lr_schedule
        The learning rate by update (:class:`~boltzkit.learning.schedules.LRSchedule`):
        ``"constant"``, ``"linear"`` (to 0 over all updates: S2 Sec. 5, "gradually decreased to
        0"), ``"linear-after:E"``, ``"inverse:E"``; default ``"linear"`` for persistent chains and
        ``"constant"`` for CD.
    settings
        Extra JSON-able settings stored in checkpoints.
    probabilities
        ``train_x`` may hold probabilities in [0, 1] rather than bits (the posterior
        probabilities a DBN layer is trained on: :mod:`boltzkit.learning.stacking`).
    reconstruction
        CD's last visible update: ``"sample"`` or ``"mean"`` (the conditional probabilities, as
        in Hinton & Salakhutdinov's code: :class:`~boltzkit.learning.phases.ContrastiveDivergence`).
    centering
        ``None`` or a :class:`~boltzkit.learning.centering.Centering` (spec ``"average"``,
        ``"data"``, ``"model"``, optionally ``":RATE"``): centered gradients (Melchior, Fischer &
        Wiskott 2016); the model stays an ordinary one.
    average
        ``None``, ``"ema:DECAY[@E]"`` or ``"polyak:E"`` (a
        :class:`~boltzkit.learning.averaging.ParameterAverage`): iterate averaging (Polyak &
        Juditsky 1992; Swersky et al. 2010 for RBMs). The model ends with the averaged parameters;
        the chains and the optimizer follow the raw iterates while training, and so do the
        monitored values of every epoch but the last, which are re-measured on the average (the
        record gets ``"averaged": True``).
    learn_sigma
        Gaussian visible units: learn ``log sigma`` too (else sigma stays where it started).

    Returns
    -------
    History
        The per-epoch records.
    """
    method_name = str(method).strip().lower()
    if method_name not in METHODS:
        raise BoltzkitError(
            "unknown learning method", got=repr(method), expected="'cd', 'pcd', 'sap' or 'pt'"
        )
    k = positive_int(k, "k", hint="k is the number of sampling sweeps per update, e.g. 1 for CD-1.")
    schedule = parse_k_schedule(k_schedule if k_schedule is not None else k)
    epochs = positive_int(epochs, "epochs")
    batch_size = positive_int(batch_size, "batch_size")
    n_chains = positive_int(n_chains, "n_chains")
    lr = _non_negative_float(lr, "the learning rate lr", strictly=True)
    momentum_schedule = parse_momentum(momentum)
    centering = parse_centering(centering)
    # a fresh average for every run: an instance handed in (or reused) never carries another run's
    average = parse_average(average.spec if isinstance(average, ParameterAverage) else average)
    if average is not None and average.start > epochs:
        raise BoltzkitError(
            "iterate averaging starts after the last epoch",
            got=f"{average.spec} with {epochs} epochs",
            expected=f"a first averaged epoch <= {epochs}",
            hint="lower E in ema:DECAY@E or polyak:E, or train for more epochs.",
        )
    weight_decay = _non_negative_float(weight_decay, "weight_decay")
    checkpoint_every = int(checkpoint_every)
    if checkpoint_every < 0:
        raise BoltzkitError("checkpoint_every must be >= 0", got=checkpoint_every)
    if resume and checkpoint_path is None:
        raise BoltzkitError(
            "resume needs a checkpoint path", hint="pass checkpoint_path (--checkpoint FILE)."
        )
    operator = make_operator(sampler)
    lr_plan = parse_lr_schedule(method_lr_schedule(method_name, lr_schedule))
    if lr_plan.kind == "linear-after" and lr_plan.epochs >= epochs:
        raise BoltzkitError(
            "the learning rate's decay starts after the last epoch",
            got=f"{lr_plan.spec} with {epochs} epochs",
            expected=f"linear-after:E with E < {epochs}",
            hint="lower E, train for more epochs, or use --lr-schedule constant.",
        )
    pt_options = {"temperatures": temperatures, "ladder": ladder} if method_name == "pt" else {}
    if reconstruction != "sample" and method_name != "cd":
        raise BoltzkitError(
            "a mean reconstruction applies to CD only", got=f"method {method_name!r}",
            hint="persistent chains must stay binary: use reconstruction='sample' (--reconstruction sample).",
        )  # fmt: skip
    if not learn_sigma and not (isinstance(model, UNIT_MODELS) and model.visible_units.has_sigma):
        raise BoltzkitError(
            "learn_sigma=False applies to Gaussian visible units",
            got=f"a {model.kind}"
            + (f" with {model.visible_units.name} visible units" if isinstance(model, UNIT_MODELS) else ""),
        )
    if isinstance(model, UNIT_MODELS):
        _refuse_binary_options(
            model, method_name, positive=positive, probabilities=probabilities, reconstruction=reconstruction,
            centering=centering, damping=damping,
        )  # fmt: skip
        x = model.check_data(train_x, "training data").to(device=model.device, dtype=model.dtype).contiguous()
        if valid_x is not None:
            valid_x = model.check_data(valid_x, "validation data")
        unit_learner = UnitRBMLearner if isinstance(model, UnitRBM) else UnitDBMLearner
        learner: Any = unit_learner(
            method_name, schedule(0, epochs), operator, n_chains=n_chains, learn_sigma=learn_sigma
        )
        couplings, others = learner.parameter_groups(model)
    else:
        if probabilities:
            x = check_probabilities(train_x, source="training data", n_visible=model.n_visible)
        else:
            x = check_binary(train_x, source="training data", n_visible=model.n_visible)
        x = x.to(device=model.device, dtype=model.dtype).contiguous()
        if valid_x is not None:
            valid_x = check_binary(valid_x, source="validation data", n_visible=model.n_visible)
        learner = make_learner(
            method_name,
            k=schedule(0, epochs),
            sampler=operator,
            n_chains=n_chains,
            # "auto" resolved here, so that a BM's or DBM's mean field takes the damping given
            positive=make_positive(positive, damping=damping) or default_positive(model, damping=damping),
            cd_reconstruction=reconstruction,
            **pt_options,
        )
        learner.centering = centering
        coupling_names = {model.coupling_name(l, m) for l, m in model.coupling_keys}
        named = list(model.named_parameters())
        couplings = [p for n, p in named if n in coupling_names]
        others = [p for n, p in named if n not in coupling_names]
    optimizer = sgd_optimizer(
        couplings, others, lr=lr, momentum=momentum_schedule(0), weight_decay=weight_decay
    )
    scheduler = None
    if lr_plan.decays:
        per_epoch = math.ceil(x.shape[0] / min(batch_size, x.shape[0]))
        n_updates = epochs * per_epoch
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, partial(lr_plan.factor, n_updates=n_updates, per_epoch=per_epoch)
        )
    run_settings: dict[str, Any] = {
        "kind": model.kind,
        "layer_sizes": list(model.layer_sizes),
        **(
            {"visible_units": model.visible_units.name, "learn_sigma": learner.learns_sigma(model)}
            if isinstance(model, UNIT_MODELS)
            else {}
        ),
        "method": method_name,
        "k_schedule": schedule.spec,
        "sampler": operator.name,
        "n_chains": n_chains if method_name != "cd" else None,
        **pt_options,
        "positive": learner.positive_phase(model).name,
        "positive_settings": learner.positive_phase(model).settings(),
        "epochs": epochs,
        "lr": lr,
        "lr_schedule": lr_plan.spec,
        "batch_size": batch_size,
        "momentum": momentum_schedule.spec,
        "weight_decay": weight_decay,
        "reconstruction": reconstruction if method_name == "cd" else None,
        "centering": None if centering is None else centering.spec,
        "average": None if average is None else average.spec,
        "device": model.device.type,
        "dtype": str(model.dtype).replace("torch.", ""),
        "train_data": data_fingerprint(x),
        **(settings or {}),
    }
    cbs: list[Callback] = []
    if monitor is not None:
        cbs.append(LogLikelihood(monitor, every=monitor_every))
    if isinstance(learner, PTLearner):
        cbs.append(SwapRates(learner))
    cbs.extend(callbacks)
    if history_path is not None:
        cbs.append(HistoryWriter(history_path))
    if progress:
        cbs.append(ProgressBar())
    if checkpoint_path is not None:
        cbs.append(Checkpointer(checkpoint_path, checkpoint_every, min_seconds=checkpoint_seconds))
    trainer = Trainer(
        model,
        learner,
        optimizer,
        x,
        epochs=epochs,
        batch_size=batch_size,
        generator=generator,
        scheduler=scheduler,
        scheduler_interval="batch",
        k_schedule=schedule,
        momentum_schedule=None if momentum_schedule.constant else momentum_schedule,
        valid_x=valid_x,
        callbacks=cbs,
        settings=run_settings,
        check_data=False,
        average=average,
    )
    if resume:
        path = Path(checkpoint_path)  # type: ignore[arg-type]
        if path.exists():
            trainer.load_checkpoint(path)
        else:
            warn(f"no checkpoint at {path}; training from the start")
    history = trainer.fit()
    if average is not None and average.apply(model) and monitor is not None and len(history):
        # the last record describes the model returned: re-measure it with the averaged parameters
        datasets = {"train": x} if valid_x is None else {"train": x, "valid": valid_x.to(x)}
        history.records[-1].update(monitor(model, datasets))
        history.records[-1]["averaged"] = True
        if history_path is not None:
            HistoryWriter(history_path).on_epoch_end(trainer, history.records[-1])
    model.zero_grad(set_to_none=True)
    return history


def check_probabilities(x: object, *, source: str, n_visible: int) -> Tensor:
    """A finite ``(n, n_visible)`` tensor of values in [0, 1] (data that may be probabilities)."""
    t = torch.as_tensor(x)
    if t.dim() != 2 or t.shape[0] == 0 or t.shape[1] != n_visible or not t.is_floating_point():
        raise BoltzkitError(
            f"{source} must be a non-empty floating-point matrix with one column per visible unit",
            got=f"shape {tuple(t.shape)}, dtype {t.dtype}",
            expected=f"(n, {n_visible})",
        )
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()) or bool((t > 1).any()):
        raise BoltzkitError(f"{source} must hold probabilities in [0, 1]", got="values outside [0, 1]")
    return t


def _check_dtype(dtype: object) -> None:
    if (
        not isinstance(dtype, torch.dtype)
        or not dtype.is_floating_point
        or dtype in (torch.float16, torch.bfloat16)
    ):
        raise BoltzkitError("dtype must be torch.float32 or torch.float64", got=repr(dtype))


#: Learning rate of Gaussian and categorical visible units when neither an argument nor a recipe
#: gives one: Hinton (2010, Sec. 13.2) for Gaussian units, ours for categorical ones.
UNIT_LR = {"gaussian": 0.001, "categorical": 0.01}


def unit_training_defaults(units: UnitType | str) -> dict[str, Any]:
    """The training settings of non-binary visible units where neither an argument nor a recipe
    gives them: :data:`UNIT_LR`, momentum 0.5 (Hinton 2010, Sec. 9) and the rate decaying linearly
    to 0 (S2 Sec. 5). One source for :func:`train_model`, :func:`train_unit_rbm`,
    :func:`train_unit_dbm` and ``boltzkit train``."""
    name = unit_type(units).name.split(":")[0]
    return {"lr": UNIT_LR.get(name, UNIT_LR["categorical"]), "momentum": 0.5, "lr_schedule": "linear"}


def train_model(
    train_x: Tensor,
    *,
    kind: str = "rbm",
    hidden: Sequence[int] | int = 500,
    seed: int = 0,
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float32,
    recipe: str | Recipe | None = None,
    init_vbias_from_data: bool | None = None,
    init_scale: float | None = None,
    init: BoltzmannMachine | UnitRBM | UnitDBM | None = None,
    visible: str | UnitType = "binary",
    **kwargs: Any,
) -> tuple[BoltzmannMachine | UnitRBM | UnitDBM, History]:
    """Initialise a model of ``kind`` (:func:`init_model`) and :func:`train` it.

    One ``torch.Generator`` seeded with ``seed`` draws the initial weights and then drives
    training, so the same seed gives the same model. ``kwargs`` go to :func:`train`.

    Parameters
    ----------
    recipe
        A named :class:`~boltzkit.learning.recipes.Recipe` (``"sm2008-cd25"``, ...) or a recipe:
        its settings are the defaults of every training and initialisation argument; arguments
        given here override them, and the settings actually used are recorded under
        ``settings["recipe"]`` (so in a saved model's metadata). Without a recipe,
        :func:`train`'s own defaults apply.
    init_vbias_from_data, init_scale
        Visible biases from the data's log-odds (default yes) and the scale of the initial
        couplings (default 0.01), unless the recipe says otherwise. A model started from ``init``
        draws no initial weights, so neither may be given with it.
    init
        Start from (a copy of) this model instead of a fresh one, to train a finished model
        further; it must have the given sizes and be of ``kind`` or a model ``kind`` extends (an
        RBM starts an SRBM or BM, an SRBM a BM: the couplings it lacks start at zero, so training
        starts from its distribution; :meth:`BoltzmannMachine.embedded`).
    visible
        The visible unit type: ``"binary"``, ``"gaussian"`` or ``"categorical:Q"``. Gaussian and
        categorical units make an RBM (:class:`~boltzkit.models.unit_rbm.UnitRBM`) or a DBM
        (``kind="dbm"``: :class:`~boltzkit.models.unit_dbm.UnitDBM`) whose visible layer starts at
        the unit type's base-rate fit to the data (Gaussian: the data's means and standard
        deviations, floored at 5% of the largest; categorical: the log of the smoothed
        frequencies), the couplings drawn on the CPU from ``seed`` (on another device a generator
        there, seeded with ``seed``, drives the rest).

    Returns
    -------
    (BoltzmannMachine, History)
    """
    seed = whole_number(
        seed, "seed", hint="a torch.Generator drives train() and sample(); train_model takes a seed"
    )
    _check_dtype(dtype)
    if init is not None and (init_scale is not None or init_vbias_from_data is not None):
        given = "init_scale" if init_scale is not None else "init_vbias_from_data"
        raise BoltzkitError(
            f"{given} sets the initial weights of a fresh model; a model started from init draws none",
            got=f"{given}={init_scale if init_scale is not None else init_vbias_from_data!r} with init=a "
            f"{getattr(init, 'kind', type(init).__name__)}",
            hint=f"drop {given}, or drop init to train a fresh model.",
        )
    recipe_record = None
    if recipe is not None:
        chosen = get_recipe(recipe)
        overrides = {key: kwargs.pop(key) for key in list(kwargs) if key in SETTINGS}
        if init_scale is not None:
            overrides["init_scale"] = float(init_scale)
        if init_vbias_from_data is not None:
            overrides["init_vbias"] = "data" if init_vbias_from_data else "zero"
        chosen = chosen.replace(**overrides)
        misuse = recipe_misuse(chosen, role="model", start="random" if init is None else "given")
        if misuse is not None:
            warn(misuse)
        kwargs = {**chosen.train_kwargs(), **kwargs}
        start = chosen.init_kwargs()
        init_scale, init_vbias_from_data = start["init_scale"], start["init_vbias_from_data"]
        recipe_record = chosen.to_dict()
    init_scale = 0.01 if init_scale is None else float(init_scale)
    init_vbias_from_data = True if init_vbias_from_data is None else bool(init_vbias_from_data)
    if str(kwargs.get("method", "cd")) != "pt":
        kwargs.pop("temperatures", None)
    units = unit_type(visible)
    if units.name != "binary":
        if recipe is None:
            kwargs = {**unit_training_defaults(units), **kwargs}
        model, gen, x_dev = _unit_model(
            train_x, units, kind, hidden, init=init, seed=seed, device=device, dtype=dtype,
            init_scale=init_scale, init_vbias_from_data=init_vbias_from_data,
        )  # fmt: skip
        settings = {
            "seed": seed, "init_scale": init_scale, "recipe": recipe_record, "visible_units": units.name,
            "init": "a given model" if init is not None else "random", **kwargs.pop("settings", {}),
        }  # fmt: skip
        return model, train(model, x_dev, generator=gen, settings=settings, **kwargs)
    if isinstance(init, UNIT_MODELS):
        raise BoltzkitError(
            "the starting model has other visible units than the model to train",
            got=f"{init.visible_units.name} visible units", expected="binary (or pass visible=...)",
        )  # fmt: skip
    dev = resolve_device(device)
    if kwargs.get("probabilities"):  # probabilities in [0, 1] as data (train's own option)
        x = check_probabilities(train_x, source="training data", n_visible=torch.as_tensor(train_x).shape[-1])
    else:
        x = check_binary(train_x, source="training data")
    gen = make_generator(int(seed), dev)
    x_dev = x.to(device=dev, dtype=dtype)
    if init is not None:
        sizes = [int(x.shape[1]), *([int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden])]
        sizes = [s for s in sizes if s > 0]
        target = str(kind).strip().lower()
        keys = kind_coupling_keys(target, len(sizes))
        if init.layer_sizes[0] != sizes[0]:
            raise BoltzkitError(
                "the starting model's visible units do not match the data's columns",
                got=f"a {init.kind} with layers {list(init.layer_sizes)}, data of {sizes[0]} columns",
                expected=f"data of {init.layer_sizes[0]} columns, as the model was trained on",
                hint="give the data the model was trained on (or another of its width).",
            )
        if list(init.layer_sizes) != sizes or not set(init.coupling_keys) <= keys:
            raise BoltzkitError(
                "the starting model does not match the model to train",
                got=f"a {init.kind} with layers {list(init.layer_sizes)}",
                expected=f"a {kind} with layers {sizes}, or a model it extends (an RBM starts an SRBM or BM)",
            )
        if init.kind == target:
            model = init.detached_copy(dtype=dtype, device=dev)
        else:  # an RBM starts an SRBM or BM, an SRBM a BM: the new couplings start at zero
            model = init.embedded(keys).detached_copy(dtype=dtype, device=dev)
    else:
        model = init_model(
            kind, int(x.shape[1]), hidden, generator=gen, data=x_dev if init_vbias_from_data else None,
            scale=init_scale, dtype=dtype, device=dev,
        )  # fmt: skip
    settings = {
        "seed": seed,
        "init_vbias_from_data": init_vbias_from_data,
        "init_scale": init_scale,
        "recipe": recipe_record,
        "init": "a given model" if init is not None else "random",
        **kwargs.pop("settings", {}),
    }
    history = train(model, x_dev, generator=gen, settings=settings, **kwargs)
    return model, history


def _unit_model(
    train_x: Tensor,
    units: UnitType,
    kind: str,
    hidden: Sequence[int] | int,
    *,
    init: BoltzmannMachine | UnitRBM | UnitDBM | None,
    seed: int,
    device: str | torch.device,
    dtype: torch.dtype,
    init_scale: float,
    init_vbias_from_data: bool,
) -> tuple[UnitRBM | UnitDBM, torch.Generator, Tensor]:
    """:func:`train_model`'s model, generator and data for Gaussian or categorical visible units."""
    kind = str(kind).strip().lower()
    sizes = [int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden]
    if (
        kind not in ("rbm", "dbm")
        or (kind == "rbm" and len(sizes) != 1)
        or (kind == "dbm" and len(sizes) < 2)
    ):
        raise BoltzkitError(
            f"{units.name} visible units make an RBM (one hidden layer) or a DBM (two or more)",
            got=f"kind {kind!r} with hidden layers {sizes}",
            expected="kind='rbm' with one hidden size, or kind='dbm' with several",
        )
    if not init_vbias_from_data:
        raise BoltzkitError(
            f"{units.name} visible units start at their base-rate fit to the data",
            got="init_vbias_from_data=False (init_vbias 'zero')",
            hint="drop it: the fit also gives Gaussian units their starting sigma.",
        )
    model_class = UnitRBM if kind == "rbm" else UnitDBM
    if init is not None and (not isinstance(init, model_class) or list(init.layer_sizes[1:]) != sizes):
        raise BoltzkitError(
            "the starting model does not match the model to train",
            got=f"a {init.kind} with layers {list(init.layer_sizes)}",
            expected=f"a {units.name} {kind} with hidden layers {sizes}",
        )

    def fresh(x: Tensor, units: UnitType, *, generator: torch.Generator) -> UnitRBM | UnitDBM:
        if kind == "rbm":
            return init_unit_rbm(x, units, sizes[0], init_scale=init_scale, generator=generator, dtype=dtype)
        return init_unit_dbm(x, units, sizes, init_scale=init_scale, generator=generator, dtype=dtype)

    start = None if init is None else copy.deepcopy(init).to(dtype=dtype)
    return prepared(train_x, units, fresh, init=start, seed=seed, device=device)


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
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float32,
    valid_x: Tensor | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    history_path: str | os.PathLike | None = None,
    progress: bool = True,
    init_vbias_from_data: bool = True,
    monitor: Callable[[Any, dict[str, Tensor]], dict[str, Any]] | None = None,
    callbacks: Sequence[Callback] = (),
    lr_schedule: str | None = None,
) -> tuple[RBM, History]:
    """Train a binary RBM by CD-k or PCD-k with SGD: the RBM recipe of :func:`train_model`.

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
    k, k_schedule
        Sweeps per update (fixed), or a schedule over epochs, e.g. ``"1:25"`` (the CD25 model of
        S&M 2008 raised ``k`` from 1 to 25), ``"geometric:1:25"``, ``"constant:3"``.
    epochs, lr, batch_size
        Passes over the data; SGD learning rate (for PCD it decays linearly to 0, see
        ``lr_schedule``); examples per update.
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
    valid_x, checkpoint_path, checkpoint_every, resume, history_path, progress, callbacks, lr_schedule
        As for :func:`train`.
    init_vbias_from_data
        Visible biases ``log(p / (1 - p))`` of the data means (else 0).
    monitor
        ``monitor(model, datasets) -> dict`` recorded each epoch, e.g.
        ``functools.partial(boltzkit.estimators.likelihood.exact_log_likelihoods, max_bits=20)``
        (exact log Z and log-likelihoods when tractable).

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
    n_hidden = positive_int(n_hidden, "n_hidden")
    if str(method).strip().lower() not in ("cd", "pcd"):
        raise BoltzkitError("unknown learning method", got=repr(method), expected="'cd' or 'pcd'")
    model, history = train_model(
        train_x,
        kind="rbm",
        hidden=n_hidden,
        seed=seed,
        device=device,
        dtype=dtype,
        init_vbias_from_data=init_vbias_from_data,
        method=method,
        k=k,
        k_schedule=k_schedule,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        sampler=sampler,
        n_chains=n_chains,
        momentum=momentum,
        weight_decay=weight_decay,
        valid_x=valid_x,
        checkpoint_path=checkpoint_path,
        checkpoint_every=checkpoint_every,
        resume=resume,
        history_path=history_path,
        progress=progress,
        monitor=monitor,
        callbacks=callbacks,
        lr_schedule=lr_schedule,
    )
    return model, history  # type: ignore[return-value]


def train_unit_rbm(
    x: Tensor,
    visible: UnitType | str,
    n_hidden: int,
    *,
    init: UnitRBM | None = None,
    **kwargs: Any,
) -> tuple[UnitRBM, History]:
    """Train a Gaussian-Bernoulli or categorical RBM on ``x`` (real values or category indices):
    :func:`~boltzkit.learning.api.train_model` with ``visible`` units and one hidden layer of
    ``n_hidden``. ``kwargs`` go to :func:`~boltzkit.learning.api.train` (``method`` ``"cd"`` or
    ``"pcd"``, ``k``, ``epochs``, ``lr``, ``lr_schedule`` (default: linear decay to 0),
    ``momentum``, ``weight_decay``, ``batch_size``, ``n_chains``, ``sampler``, ``learn_sigma``,
    ``progress``, checkpoints, ...) and ``train_model`` (``seed``, ``device``, ``init_scale``,
    ``dtype``, ``recipe``; ``init``: a model to train further). Defaults: 10 epochs, and
    :func:`unit_training_defaults` (Gaussian units at 0.001, as Hinton 2010, Sec. 13.2 suggests,
    categorical at 0.01; momentum 0.5; the rate decaying linearly to 0).

    Returns
    -------
    (model, history)
        The trained model and one record per epoch (the monitored free-energy gap of data and
        negative samples among them).
    """
    kwargs = {"epochs": 10, "progress": False, "device": "cpu", **kwargs}
    return train_model(x, kind="rbm", hidden=int(n_hidden), visible=visible, init=init, **kwargs)  # type: ignore[return-value]


def train_unit_dbm(
    x: Tensor,
    visible: UnitType | str,
    hidden: Sequence[int],
    *,
    init: UnitDBM | None = None,
    **kwargs: Any,
) -> tuple[UnitDBM, History]:
    """Train a Gaussian or categorical DBM on ``x`` (real values or category indices):
    :func:`~boltzkit.learning.api.train_model` with ``visible`` units, ``kind="dbm"`` and
    ``method="pcd"`` (S2 Sec. 4.1: 100 persistent chains unless ``n_chains`` says otherwise).
    ``kwargs`` go to :func:`~boltzkit.learning.api.train` (``k``, ``epochs``, ``lr``,
    ``lr_schedule`` (default linear decay to 0, S2 Sec. 5), ``momentum``, ``weight_decay``,
    ``batch_size``, ``n_chains``, ``sampler``, ``learn_sigma``, ``progress``, checkpoints, ...) and
    ``train_model`` (``seed``, ``device``, ``init_scale``, ``dtype``; ``init``: a model to train
    further).

    Returns
    -------
    (model, history)
        The trained model and one record per epoch (the mean mean-field sweeps of its positive
        phases among them).
    """
    kwargs = {"method": "pcd", "epochs": 10, "progress": False, "device": "cpu", **kwargs}
    return train_model(x, kind="dbm", hidden=list(hidden), visible=visible, init=init, **kwargs)  # type: ignore[return-value]


__all__ = [
    "METHODS",
    "POSITIVE_PHASES",
    "TRAINABLE_KINDS",
    "init_model",
    "init_rbm",
    "make_positive",
    "train",
    "train_model",
    "train_rbm",
    "train_unit_dbm",
    "train_unit_rbm",
    "visible_bias_from_data",
]
