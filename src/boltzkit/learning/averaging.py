"""Iterate averaging: the trained model is an average of the parameters SGD visited.

Stochastic-approximation learning (PCD/SAP: S2 Sec. 4.1.1) moves the parameters by noisy
gradients whose noise does not vanish at a constant learning rate: the last iterate jitters around
the point the expected update reaches. Averaging the iterates removes most of that jitter at no
cost in sampling (Polyak & Juditsky 1992); for RBMs trained by stochastic approximation Swersky,
Chen, Marlin & de Freitas (2010) report higher test log-likelihoods from averaged parameters than
from the last iterate. Two averages, both kept by ``torch.optim.swa_utils.AveragedModel``:

* ``"ema:DECAY"``: the exponential moving average ``theta_bar <- DECAY theta_bar + (1 - DECAY)
  theta`` after every update (time constant ``1 / (1 - DECAY)`` updates);
* ``"polyak:E"``: the uniform mean of every iterate from the first update of epoch ``E`` (1-based)
  on (Polyak & Juditsky 1992, Eq. 3; stochastic weight averaging in torch's terms).

``"ema:DECAY@E"`` also starts the EMA at epoch ``E``. Only the model's parameters are averaged; the
persistent chains, the optimizer and the learning rate follow the raw iterates, and the averaged
parameters replace the model's when training ends (:func:`boltzkit.learning.api.train`). A trainer's
checkpoint holds both, so a resumed run reaches the same average.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, get_swa_multi_avg_fn

from boltzkit.errors import BoltzkitError, whole_number

#: Kinds of iterate average.
AVERAGES = ("ema", "polyak")
_EXPECTED = "'none', 'ema:DECAY' (0 < DECAY < 1, optionally '@E'), or 'polyak:E' (an epoch >= 1)"


class ParameterAverage:
    """An average of the parameter iterates, updated after every SGD step from epoch ``start`` on.

    Parameters
    ----------
    kind
        ``"ema"`` (exponential moving average) or ``"polyak"`` (uniform mean of the iterates).
    decay
        EMA only: the weight of the old average per update, in (0, 1).
    start
        First epoch (1-based) whose updates are averaged.
    """

    def __init__(self, kind: str, *, decay: float | None = None, start: int = 1) -> None:
        if kind not in AVERAGES:
            raise BoltzkitError("unknown iterate average", got=repr(kind), expected=_EXPECTED)
        if kind == "ema" and (decay is None or not 0.0 < float(decay) < 1.0):
            raise BoltzkitError("an EMA's decay must lie in (0, 1)", got=repr(decay), expected=_EXPECTED)
        start = whole_number(start, "the first averaged epoch", minimum=1)
        self.kind = kind
        self.decay = None if decay is None else float(decay)
        self.start = start
        self.averaged: AveragedModel | None = None

    @property
    def spec(self) -> str:
        """The spec string :func:`parse_average` reads back."""
        if self.kind == "polyak":
            return f"polyak:{self.start}"
        return f"ema:{self.decay!r}" + (f"@{self.start}" if self.start > 1 else "")

    def active(self, epoch_index: int) -> bool:
        """Whether the updates of epoch ``epoch_index`` (0-based) are averaged."""
        return epoch_index + 1 >= self.start

    @property
    def n_averaged(self) -> int:
        """Iterates averaged so far."""
        return 0 if self.averaged is None else int(self.averaged.n_averaged)

    def setup(self, model: torch.nn.Module) -> None:
        """Start an empty average over ``model``'s parameters (a no-op once set up)."""
        if self.averaged is not None:
            return
        multi_avg_fn = get_ema_multi_avg_fn(self.decay) if self.kind == "ema" else get_swa_multi_avg_fn()
        self.averaged = AveragedModel(model, multi_avg_fn=multi_avg_fn)

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        """Fold the current parameters into the average (the first call copies them)."""
        self.averaged.update_parameters(model)  # type: ignore[union-attr]

    @torch.no_grad()
    def apply(self, model: torch.nn.Module) -> bool:
        """Copy the averaged parameters into ``model``; ``False`` (and nothing copied) when no
        iterate was averaged, e.g. when training ended before epoch ``start``."""
        if self.n_averaged == 0:
            return False
        for target, source in zip(model.parameters(), self.averaged.module.parameters(), strict=True):  # type: ignore[union-attr]
            target.copy_(source)
        return True

    def state_dict(self) -> dict[str, Any]:
        """The averaged parameters and their count (tensors), for checkpoints."""
        if self.averaged is None:
            return {}
        return {name: t.detach().clone() for name, t in self.averaged.state_dict().items()}

    def load_state_dict(self, state: dict[str, Tensor], model: torch.nn.Module) -> None:
        """Restore :meth:`state_dict` output over ``model``'s parameters."""
        self.averaged = None
        self.setup(model)
        if state:
            self.averaged.load_state_dict(state)  # type: ignore[union-attr]


def parse_average(spec: str | ParameterAverage | None) -> ParameterAverage | None:
    """``None`` / ``"none"`` (no averaging), ``"ema:DECAY[@E]"`` or ``"polyak:E"``."""
    if spec is None or isinstance(spec, ParameterAverage):
        return spec
    text = str(spec).strip().lower()
    if text in ("", "none"):
        return None
    kind, _, arg = text.partition(":")
    decay_text, _, start_text = arg.partition("@") if kind == "ema" else ("", "", arg)
    try:
        decay = float(decay_text) if kind == "ema" else None
        start = int(start_text) if start_text else 1
    except ValueError:
        raise BoltzkitError("unknown iterate average", got=repr(spec), expected=_EXPECTED) from None
    if kind == "polyak" and not start_text:
        raise BoltzkitError("polyak averaging needs its first epoch", got=repr(spec), expected=_EXPECTED)
    return ParameterAverage(kind, decay=decay, start=start)


__all__ = ["AVERAGES", "ParameterAverage", "parse_average"]
