"""Greedy layer-wise training of deep belief networks (Hinton et al. 2006; S1 Sec. 4.1).

Recursive greedy learning (S1 Sec. 4.1):

1. fit RBM 0 to the data;
2. freeze it and train RBM 1 on vectors drawn from its approximate posterior
   ``q(x_1 | v) = sigmoid(W_0^T v + hbias_0)``, which maximises ``sum_h q(h | v) log p(h)`` of S1
   Eq. 20 and so the variational bound of Eq. 19 on ``log p(v)``;
3. proceed recursively for as many layers as desired.

Each RBM is trained by :func:`~boltzkit.learning.api.train` (CD-k, PCD or SAP, any transition
operator, any k schedule). What an upper RBM is trained on is an option (``layer_data``):

``"samples"`` (default; S1: "use samples from p(h1 | v, W1) as the data")
    binary vectors drawn from ``q`` (layer by layer through every frozen RBM below), drawn afresh
    every epoch from a generator seeded by ``(seed, layer, epoch)``, so that resuming a layer
    gives the same data;
``"probs"``
    the posterior probabilities passed up (the mean-field pass), fixed over the epochs.

With ``init_transpose`` a new layer starts as the RBM below with its parameters transposed
(``W_(l+1) = W_l^T``, visible and hidden biases swapped; S1 Sec. 5.2): the DBN then defines
exactly the distribution over ``v`` of the DBN without the new layer, so that training it can
only raise the bound on the training data's log-likelihood (S1 Sec. 4.1).

Runs resume layer by layer: with ``checkpoint_dir`` every layer has its own checkpoint
(``layer_L.ckpt``), written after every epoch; a resumed run reloads finished layers from their
checkpoints and continues the interrupted one where it stopped.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzkit._numerics import make_generator, resolve_device
from boltzkit.data.dataset import check_binary
from boltzkit.errors import BoltzkitError, positive_int, warn, whole_number
from boltzkit.learning.api import METHODS, init_rbm, train
from boltzkit.learning.averaging import parse_average
from boltzkit.learning.callbacks import Callback
from boltzkit.learning.history import History
from boltzkit.learning.recipes import LAYER_DATA, Recipe, get_recipe, recipe_misuse
from boltzkit.models.dbn import DBN, recognition_pass
from boltzkit.models.rbm import RBM
from boltzkit.models.unit_rbm import UnitRBM

#: Settings that may differ between layers (a value, or one value per hidden layer).
PER_LAYER = (
    "method",
    "k",
    "k_schedule",
    "epochs",
    "lr",
    "batch_size",
    "sampler",
    "n_chains",
    "momentum",
    "weight_decay",
    "init_transpose",
)


def derived_seed(seed: int, *keys: int) -> int:
    """A seed for one part of a run (a layer, an epoch), fixed by ``seed`` and ``keys``."""
    value = int(seed) & (2**62 - 1)
    for key in keys:
        value = (value * 1_000_003 + int(key) + 7_919) % (2**62)
    return value


def layer_data(
    rbms: Sequence[RBM], x: Tensor, *, mode: str = "samples", generator: torch.Generator | None = None
) -> Tensor:
    """The data of the layer above ``rbms``: ``x`` passed up through their approximate posteriors.

    ``mode="samples"`` draws each layer from ``q(x_(l+1) | x_l)`` in turn; ``"probs"`` passes
    the probabilities up. With no RBMs, ``x`` itself.
    """
    if mode not in LAYER_DATA:
        raise BoltzkitError("unknown layer data", got=repr(mode), expected=" or ".join(map(repr, LAYER_DATA)))
    with torch.no_grad():
        return recognition_pass(rbms, x, mode=mode, generator=generator)


class ResampleLayerData(Callback):
    """Draws a layer's training data afresh at the start of every epoch (``layer_data="samples"``).

    The data of epoch ``e`` come from a generator seeded by ``derived_seed(seed, layer, e)``, not
    from the trainer's generator, so a resumed run sees the same data as an uninterrupted one.
    """

    order = -100

    def __init__(self, below: Sequence[RBM], x: Tensor, *, seed: int, layer: int) -> None:
        self.below = list(below)
        self.x = x
        self.seed = int(seed)
        self.layer = int(layer)

    def data(self, epoch: int) -> Tensor:
        g = make_generator(derived_seed(self.seed, self.layer, epoch), self.x.device)
        return layer_data(self.below, self.x, mode="samples", generator=g)

    def on_epoch_begin(self, trainer: Any, epoch: int) -> None:
        trainer.train_x = (
            self.data(epoch).to(device=trainer.model.device, dtype=trainer.model.dtype).contiguous()
        )


def transposed_start(rbm: RBM, n_hidden: int, *, generator: torch.Generator, scale: float = 0.01) -> RBM:
    """The next layer's start from the RBM below (S1 Sec. 5.2): ``rbm`` with visible and hidden
    roles exchanged, so that the DBN defines exactly the distribution over ``v`` of the DBN
    without the new layer and the bound of S1 Eq. 19 starts at its value; training the new layer
    can then only raise the bound on the training data (S1 Sec. 4.1).

    A wider layer (``n_hidden`` above ``rbm.n_visible``) gets the extra hidden units with zero
    biases and couplings ``~ N(0, scale^2)`` from ``generator``: with zero couplings they would
    add the same constant to every ``log p*(h)`` and leave the start exact; the small random ones
    perturb it only slightly and let the new units learn different features (identical units would
    get identical gradients forever). S1 started its 2,000-unit layers at random, and their bound
    then starts far below the RBM's; this start keeps the greedy guarantee at any width.
    """
    start = rbm.swapped()
    extra = int(n_hidden) - start.n_hidden
    if extra < 0:
        raise BoltzkitError(
            "the transposed start cannot be narrower than the RBM below",
            got=n_hidden,
            expected=f">= {start.n_hidden}",
        )
    if extra == 0:
        return start
    kw = {"dtype": start.dtype, "device": start.device}
    noise = scale * torch.randn(
        start.n_visible, extra, generator=generator, device=generator.device, dtype=start.dtype
    )
    return RBM(
        start.n_visible,
        int(n_hidden),
        weights=torch.cat([start.W.detach(), noise.to(start.device)], 1),
        vbias=start.vbias.detach(),
        hbias=torch.cat([start.hbias.detach(), torch.zeros(extra, **kw)]),
        **kw,
    )


def _per_layer(value: Any, name: str, n: int, frozen: int = 0) -> list[Any]:
    """One value per layer: a list or tuple of ``n`` values, or of ``n - frozen`` (one per layer
    trained above ``frozen`` given bottom layers, whose entries are then placeholders, unused), or
    a single value for all."""
    if isinstance(value, (list, tuple)):
        if frozen >= n:  # a bottom with every layer, or more: refused below for that
            return list(value)
        if frozen and len(value) == n - frozen:
            return [value[0]] * frozen + list(value)
        if len(value) != n:
            raise BoltzkitError(
                f"{name} must be one value, or one value per hidden layer",
                got=f"{len(value)} values",
                expected=f"{n} (hidden layers {n})"
                + (f" or {n - frozen} (the layers trained above the {frozen} bottom ones)" if frozen else ""),
            )
        return list(value)
    return [value] * n


def train_dbn(
    train_x: Tensor,
    hidden: Sequence[int],
    *,
    seed: int = 0,
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float32,
    recipe: str | Recipe | None = None,
    method: str | Sequence[str] | None = None,
    k: int | Sequence[int] | None = None,
    k_schedule: str | None | Sequence[str | None] = None,
    epochs: int | Sequence[int] | None = None,
    lr: float | Sequence[float] | None = None,
    batch_size: int | Sequence[int] | None = None,
    sampler: str | Sequence[str] | None = None,
    n_chains: int | Sequence[int] | None = None,
    momentum: float | str | Sequence[float | str] | None = None,
    weight_decay: float | Sequence[float] | None = None,
    init_transpose: bool | Sequence[bool] = False,
    layer_data_mode: str | None = None,
    bottom: Sequence[RBM] | DBN | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    checkpoint_seconds: float = 0.0,
    progress: bool = True,
    init_vbias_from_data: bool | None = None,
    monitor: Callable[[Any, dict[str, Tensor]], dict[str, Any]] | None = None,
    layer_callbacks: Callable[[int], Sequence[Callback]] | None = None,
) -> tuple[DBN, list[History | None]]:
    """Train a DBN greedily, one RBM at a time, bottom first.

    Parameters
    ----------
    train_x
        Binary training data ``(n, n_visible)``.
    hidden
        Units of every hidden layer, bottom first (``[500, 2000]``: S1's DBNs).
    seed
        Seeds everything: layer ``l`` draws its initial weights and trains from a generator
        seeded with ``derived_seed(seed, l)``; sampled layer data from ``derived_seed(seed, l,
        epoch)``.
    device, dtype
        Where and in what precision to train.
    recipe
        A :class:`~boltzkit.learning.recipes.Recipe` (or its name) for every layer: its settings
        are the defaults of the arguments below (its ``layer_data`` that of
        ``layer_data_mode``); without one, the defaults of :func:`~boltzkit.learning.api.train`.
    method, k, k_schedule, epochs, lr, batch_size, sampler, n_chains, momentum, weight_decay
        As for :func:`~boltzkit.learning.api.train`; each a single value for every layer, or a
        list with one value per hidden layer (entries for the layers in ``bottom`` are unused) or
        one per layer trained above ``bottom``; ``None`` takes the recipe's value.
    init_transpose
        Start layer ``l >= 1`` as the transposed RBM below (S1 Sec. 5.2; a wider layer gets extra
        units with small random couplings: :func:`transposed_start`): one flag for every layer
        above the first, or one per layer (the first layer's must be ``False``). Such a layer
        needs at least as many hidden units as the RBM below has visible units (a 784-500 RBM
        below: at least 784), else it cannot hold the transposed couplings and is refused.
    layer_data_mode
        ``"samples"`` (binary samples of the posterior, redrawn every epoch; S1's choice) or
        ``"probs"`` (posterior probabilities).
    bottom
        RBMs (or a DBN) already trained for the lowest layers (e.g. a Table 1 RBM): used as
        they are, frozen; their sizes must agree with ``hidden``. The lowest may be a
        :class:`~boltzkit.models.unit_rbm.UnitRBM` (Gaussian or categorical visible units, trained
        by :func:`~boltzkit.learning.api.train_unit_rbm`): ``train_x`` then holds real values
        or category indices, and the binary layers above train on its ``q(h | v)``.
    checkpoint_dir, resume, checkpoint_seconds
        Per-layer checkpoints ``layer_L.ckpt`` in this folder after every epoch (and a layer's
        last), or only when ``checkpoint_seconds`` have passed since the last write; ``resume``
        continues from them (finished layers are reloaded, not retrained).
    progress
        Progress bars.
    init_vbias_from_data
        A randomly initialised layer takes its visible biases from the mean of its data (default:
        the recipe's, else yes).
    monitor
        ``monitor(rbm, {"train": layer_data}) -> dict``, recorded each epoch of every layer.
    layer_callbacks
        ``layer_callbacks(l)`` gives extra trainer callbacks for layer ``l``.

    Returns
    -------
    (DBN, list)
        The DBN and every layer's :class:`~boltzkit.learning.history.History` (``None`` for
        the layers taken from ``bottom``).
    """
    if isinstance(hidden, numbers.Integral):  # one layer above the bottom
        hidden = [hidden]
    sizes = [positive_int(h, "a hidden layer size") for h in hidden]
    if not sizes:
        raise BoltzkitError("hidden layer sizes must be positive integers", got=list(hidden))
    seed = whole_number(seed, "seed")
    base = get_recipe(recipe) if recipe is not None else None
    defaults = base.train_kwargs() if base is not None else {}
    layer_data_mode = layer_data_mode or (base.layer_data if base is not None else "samples")
    if layer_data_mode not in LAYER_DATA:
        raise BoltzkitError(
            "unknown layer data", got=repr(layer_data_mode), expected=" or ".join(map(repr, LAYER_DATA))
        )
    if init_vbias_from_data is None:
        init_vbias_from_data = base.init_vbias == "data" if base is not None else True
    init_scale = base.init_scale if base is not None else 0.01
    n = len(sizes)
    given = {
        "method": method,
        "k": k,
        "k_schedule": k_schedule,
        "epochs": epochs,
        "lr": lr,
        "batch_size": batch_size,
        "sampler": sampler,
        "n_chains": n_chains,
        "momentum": momentum,
        "weight_decay": weight_decay,
    }
    fallback = {"method": "cd", "k": 1, "epochs": 1, "lr": 0.05, "batch_size": 100, "sampler": "gibbs",
                "n_chains": 100, "momentum": 0.0, "weight_decay": 0.0}  # fmt: skip
    if k is not None and k_schedule is None:  # a given k is a fixed k (as Recipe.replace has it)
        defaults.pop("k_schedule", None)
    n_frozen = 0 if bottom is None else len(bottom.rbms if isinstance(bottom, DBN) else list(bottom))
    per = {
        name: _per_layer(
            value if value is not None else defaults.get(name, fallback.get(name)), name, n, n_frozen
        )
        for name, value in given.items()
    }
    if isinstance(init_transpose, (list, tuple)):
        per["init_transpose"] = _per_layer(init_transpose, "init_transpose", n)
    else:  # one flag: every layer above the first
        per["init_transpose"] = [False] + [bool(init_transpose)] * (n - 1)
    extra = {
        key: defaults[key]
        for key in ("lr_schedule", "reconstruction", "centering", "average", "temperatures")
        if key in defaults
    }
    for m in per["method"]:
        if str(m).strip().lower() not in METHODS:
            raise BoltzkitError("unknown learning method", got=repr(m), expected=", ".join(METHODS))
    average = parse_average(extra.get("average"))
    trained_epochs = [int(e) for e in per["epochs"][n_frozen:]] or [int(e) for e in per["epochs"]]
    if average is not None and average.start > min(trained_epochs):
        raise BoltzkitError(
            "iterate averaging starts after the last epoch of a layer",
            got=f"{average.spec} with epochs {trained_epochs}",
            hint="lower E in ema:DECAY@E or polyak:E, or train every layer for more epochs.",
        )
    dev = resolve_device(device)
    below: list[RBM | UnitRBM] = []
    if bottom is not None:
        below = list(bottom.rbms) if isinstance(bottom, DBN) else list(bottom)
    if below and isinstance(below[0], UnitRBM):  # Gaussian or categorical data, checked by its units
        x = below[0].check_data(train_x, "training data").to(device=dev, dtype=dtype)
    else:
        x = check_binary(train_x, source="training data").to(device=dev, dtype=dtype)
    if below:
        if len(below) > n:
            raise BoltzkitError("more bottom RBMs than hidden layers", got=len(below), expected=f"<= {n}")
        bottom_sizes = [below[0].n_visible, *(r.n_hidden for r in below)]
        if list(bottom_sizes[1:]) != sizes[: len(below)] or bottom_sizes[0] != x.shape[1]:
            raise BoltzkitError(
                "the bottom RBMs do not fit the data and hidden layer sizes",
                got=f"bottom layers {list(bottom_sizes)}",
                expected=f"[{x.shape[1]}, {', '.join(map(str, sizes[: len(below)]))}]",
            )
        below = [r.to(device=dev, dtype=dtype) for r in below]
    if len(below) == n:
        raise BoltzkitError(
            "the bottom already holds every layer: there is nothing to train",
            got=f"{len(below)} bottom RBMs for hidden layers {sizes}",
            hint="add the size of a new layer on top (e.g. --hidden "
            + ",".join(map(str, [*sizes, sizes[-1]]))
            + ").",
        )
    if base is not None:  # a recipe made for other layers trains them as told, with a warning
        misused: dict[str, tuple[str, str, list[int]]] = {}  # one warning per text, bottom first
        for l in range(len(below), n):
            role = "dbn-bottom" if l == 0 else "dbn-upper"
            start = "transposed" if per["init_transpose"][l] else "random"
            text = recipe_misuse(base, role=role, start=start)
            if text is not None:
                misused.setdefault(text, (role, start, []))[2].append(l)
        for role, start, layers in misused.values():
            warn(recipe_misuse(base, role=role, start=start, layers=layers))
    for l in range(
        len(below), n
    ):  # before any layer trains: a refusal after hours of the layers below wastes them
        if not per["init_transpose"][l]:
            continue
        if l == 0:
            raise BoltzkitError(
                "the first layer cannot start as a transposed layer below",
                hint="init_transpose applies to layers 1 and up.",
            )
        width_below = int(x.shape[1]) if l == 1 else int(sizes[l - 2])  # the visible units of the RBM below
        if sizes[l] < width_below:
            raise BoltzkitError(
                f"hidden layer {l + 1} cannot start as the transposed RBM below it: it is narrower",
                got=f"{sizes[l]} hidden units",
                expected=f"at least {width_below} (the visible units of the RBM below it)",
                hint="widen the layer, or start it at random (no init_transpose for it).",
            )
    ckpt_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
    if ckpt_dir is not None:
        if ckpt_dir.exists() and not ckpt_dir.is_dir():
            raise BoltzkitError(
                "a DBN's checkpoint is a folder (one file per layer), and this path is a file",
                got=str(ckpt_dir),
                hint="give a folder name to --checkpoint.",
            )
        ckpt_dir.mkdir(parents=True, exist_ok=True)
    histories: list[History | None] = [None] * len(below)
    for l in range(len(below), n):
        n_vis = x.shape[1] if l == 0 else sizes[l - 1]
        gen = make_generator(derived_seed(seed, l), dev)
        transpose = bool(per["init_transpose"][l])
        callbacks: list[Callback] = []
        if layer_data_mode == "samples" and l > 0:
            resample = ResampleLayerData(below, x, seed=seed, layer=l)
            data = resample.data(1)
            callbacks.append(resample)
        else:
            data = layer_data(below, x, mode="probs")  # the data themselves for l = 0
        if transpose:  # (the first layer and a narrower one are refused before the loop)
            if isinstance(below[-1], UnitRBM):
                raise BoltzkitError(
                    f"hidden layer {l + 1} cannot start as the transposed RBM below it: its "
                    f"{below[-1].visible_units.name} visible units cannot be a binary layer's hidden units",
                    hint="start it at random (no --init-transpose).",
                )
            rbm = transposed_start(below[-1], sizes[l], generator=gen, scale=init_scale).to(
                device=dev, dtype=dtype
            )
        else:
            rbm = init_rbm(
                n_vis,
                sizes[l],
                generator=gen,
                data=data if init_vbias_from_data else None,
                scale=init_scale,
                dtype=dtype,
                device=dev,
            )
        if layer_callbacks is not None:
            callbacks.extend(layer_callbacks(l))
        checkpoint = None if ckpt_dir is None else ckpt_dir / f"layer_{l}.ckpt"
        layer_method = str(per["method"][l])
        history = train(
            rbm,
            data,
            generator=gen,
            method=layer_method,
            k=int(per["k"][l]),
            k_schedule=per["k_schedule"][l],
            epochs=int(per["epochs"][l]),
            lr=float(per["lr"][l]),
            batch_size=int(per["batch_size"][l]),
            sampler=str(per["sampler"][l]),
            n_chains=int(per["n_chains"][l]),
            momentum=per["momentum"][l],
            weight_decay=float(per["weight_decay"][l]),
            checkpoint_path=checkpoint,
            checkpoint_every=1 if checkpoint is not None else 0,
            checkpoint_seconds=checkpoint_seconds,
            resume=bool(resume and checkpoint is not None and checkpoint.is_file()),
            progress=progress,
            monitor=monitor,
            callbacks=callbacks,
            probabilities=layer_data_mode == "probs" and l > 0,
            **{
                **extra,
                "reconstruction": extra.get("reconstruction", "sample") if layer_method == "cd" else "sample",
            },
            settings={
                "dbn_layer": l,
                "dbn_layer_sizes": [int(x.shape[1]), *sizes],
                "layer_data": layer_data_mode if l > 0 else "data",
                "init": "transpose" if transpose else "random",
                "seed": seed,
                "init_vbias_from_data": bool(init_vbias_from_data),
                "init_scale": init_scale,
                "recipe": None if base is None else base.to_dict(),
            },
        )
        below.append(rbm)
        histories.append(history)
    return DBN(below), histories


__all__ = [
    "LAYER_DATA",
    "PER_LAYER",
    "ResampleLayerData",
    "derived_seed",
    "layer_data",
    "train_dbn",
    "transposed_start",
]
