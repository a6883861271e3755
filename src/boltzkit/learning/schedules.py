"""Schedules over a training run: the number ``k`` of sampling sweeps per update, the momentum by
epoch and the learning rate by update.

Salakhutdinov & Murray (2008, Sec. 6) trained their best RBM, CD25(500), "by starting with T=1,
and gradually increasing T to 25 during the course of CD training" (after Carreira-Perpinan &
Hinton 2005). A :class:`KSchedule` maps the epoch index ``e = 0 .. epochs - 1`` to ``k``:

* :class:`ConstantK` -- ``k(e) = k``;
* :class:`LinearK` -- ``k(e) = round(k_start + (k_end - k_start) e / (epochs - 1))``, so the first
  epoch uses ``k_start`` and the last ``k_end``;
* :class:`GeometricK` -- the same with ``log k`` interpolated linearly (more epochs at small ``k``);
* :class:`StepK` -- ``k(e) = min(k_max, floor(e / every) + 1)``: one more sweep every ``every``
  epochs, the ``CD = ceil(epoch/20)`` of Salakhutdinov's published RBM code (with
  ``every = 20`` a run of 500 epochs reaches ``k = 25``). Unlike the others it does not depend on
  the length of the run, so a run that is extended keeps the ``k`` of its earlier epochs.

Schedules are pure functions of the epoch index (no state), so resuming a run needs only the
epoch counter. Specs as the command line writes them are parsed by :func:`parse_k_schedule`:
``"3"``, ``"constant:3"``, ``"1:25"``, ``"linear:1:25"``, ``"geometric:1:25"``, ``"step:20:25"``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from boltzkit.errors import BoltzkitError, positive_int

_SPEC_HELP = (
    "'K', 'constant:K', 'K_START:K_END', 'linear:K_START:K_END', 'geometric:K_START:K_END' or "
    "'step:EVERY:K_MAX'"
)


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


class KSchedule(ABC):
    """Number of sweeps ``k`` as a function of the epoch index (0-based)."""

    @abstractmethod
    def __call__(self, epoch: int, epochs: int) -> int:
        """``k`` for epoch ``epoch`` of a run of ``epochs`` epochs (``0 <= epoch < epochs``)."""

    @property
    @abstractmethod
    def spec(self) -> str:
        """The schedule as a spec string that :func:`parse_k_schedule` reads back."""

    def values(self, epochs: int) -> list[int]:
        """``k`` for every epoch of a run of ``epochs`` epochs."""
        return [self(e, epochs) for e in range(epochs)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


def _check_k(value: object, name: str) -> int:
    return positive_int(value, f"the number of sampling sweeps {name}")


@dataclass(frozen=True, repr=False)
class ConstantK(KSchedule):
    """``k(e) = k`` for every epoch."""

    k: int

    def __post_init__(self) -> None:
        _check_k(self.k, "k")

    def __call__(self, epoch: int, epochs: int) -> int:
        return self.k

    @property
    def spec(self) -> str:
        return f"constant:{self.k}"


@dataclass(frozen=True, repr=False)
class LinearK(KSchedule):
    """``k(e) = round(k_start + (k_end - k_start) * e / (epochs - 1))`` (half rounds up).

    With one epoch the run uses ``k_start``. ``k_end < k_start`` (a falling schedule) is allowed.
    """

    k_start: int
    k_end: int

    def __post_init__(self) -> None:
        _check_k(self.k_start, "k_start")
        _check_k(self.k_end, "k_end")

    def _fraction(self, epoch: int, epochs: int) -> float:
        if epochs <= 1:
            return 0.0
        return min(max(epoch, 0), epochs - 1) / (epochs - 1)

    def __call__(self, epoch: int, epochs: int) -> int:
        t = self._fraction(epoch, epochs)
        return _round_half_up(self.k_start + (self.k_end - self.k_start) * t)

    @property
    def spec(self) -> str:
        return f"linear:{self.k_start}:{self.k_end}"


@dataclass(frozen=True, repr=False)
class GeometricK(LinearK):
    """``k(e) = round(k_start * (k_end / k_start) ** (e / (epochs - 1)))``."""

    def __call__(self, epoch: int, epochs: int) -> int:
        t = self._fraction(epoch, epochs)
        return max(1, _round_half_up(self.k_start * (self.k_end / self.k_start) ** t))

    @property
    def spec(self) -> str:
        return f"geometric:{self.k_start}:{self.k_end}"


@dataclass(frozen=True, repr=False)
class StepK(KSchedule):
    """``k(e) = min(k_max, floor(e / every) + 1)``: ``k`` grows by one every ``every`` epochs.

    Salakhutdinov's RBM code sets ``CD = ceil(epoch/20)`` at the start of each (1-based) epoch and
    divides the learning rate by it (the learning-rate schedule ``"step:20"``); S&M 2008 Sec. 5.1
    trained CD25(500) "by starting with T=1, and gradually increasing T to 25", which this
    schedule reaches after ``every * (k_max - 1)`` epochs.
    """

    every: int
    k_max: int

    def __post_init__(self) -> None:
        _check_k(self.every, "every")
        _check_k(self.k_max, "k_max")

    def __call__(self, epoch: int, epochs: int) -> int:
        return min(self.k_max, max(epoch, 0) // self.every + 1)

    @property
    def spec(self) -> str:
        return f"step:{self.every}:{self.k_max}"


def _parse_int(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise BoltzkitError(
            "cannot read the k schedule",
            got=repr(spec),
            expected=f"{_SPEC_HELP} with positive integers",
            hint="for the CD25 model of Salakhutdinov & Murray (2008) use '1:25'.",
        )
    return value


def parse_k_schedule(spec: str | int | KSchedule) -> KSchedule:
    """Read a k schedule from a spec.

    Parameters
    ----------
    spec
        An integer or ``"K"`` / ``"constant:K"`` (fixed ``k``), ``"K_START:K_END"`` or
        ``"linear:K_START:K_END"`` (linear in epochs), ``"geometric:K_START:K_END"``,
        ``"step:EVERY:K_MAX"`` (one more sweep every ``EVERY`` epochs, at most ``K_MAX``); a
        :class:`KSchedule` is returned unchanged.

    Returns
    -------
    KSchedule

    Raises
    ------
    BoltzkitError
        For anything else.

    Examples
    --------
    >>> parse_k_schedule("1:25").values(5)
    [1, 7, 13, 19, 25]
    >>> parse_k_schedule("step:2:3").values(8)
    [1, 1, 2, 2, 3, 3, 3, 3]
    """
    if isinstance(spec, KSchedule):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        return ConstantK(_check_k(spec, "k"))
    if not isinstance(spec, str):
        raise BoltzkitError("a k schedule must be a spec string", got=repr(spec), expected=_SPEC_HELP)
    parts = [p.strip() for p in spec.strip().lower().split(":")]
    kind = "linear"
    if parts and parts[0] in ("constant", "const", "fixed", "linear", "geometric", "geom", "step"):
        kind = parts.pop(0)
    if kind in ("constant", "const", "fixed") and len(parts) == 1:
        return ConstantK(_parse_int(parts[0], spec))
    if len(parts) == 1 and kind == "linear" and ":" not in spec:
        return ConstantK(_parse_int(parts[0], spec))
    if len(parts) == 2 and kind in ("linear", "geometric", "geom", "step"):
        a, b = (_parse_int(p, spec) for p in parts)
        if kind == "step":
            return StepK(a, b)
        return LinearK(a, b) if kind == "linear" else GeometricK(a, b)
    raise BoltzkitError("cannot read the k schedule", got=repr(spec), expected=_SPEC_HELP)


# ------------------------------------------------------------------------------ momentum
_MOMENTUM_HELP = "a number in [0, 1), or 'M0,M1@E' (M0 for the first E epochs, then M1)"


@dataclass(frozen=True)
class MomentumSchedule:
    """Momentum by epoch: ``initial`` for the first ``switch_epoch`` epochs, then ``final``.

    Hinton & Salakhutdinov's RBM code (2006, also behind S&M 2008 and S2) and Hinton's practical
    guide (2010, Sec. 9) start at 0.5 and switch to 0.9 after 5 epochs: ``"0.5,0.9@5"``. A
    constant momentum is ``switch_epoch = 0``. Pure in the epoch index, so a resumed run needs
    only the epoch counter.
    """

    initial: float
    final: float
    switch_epoch: int = 0

    def __post_init__(self) -> None:
        for value in (self.initial, self.final):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value < 1.0):
                raise BoltzkitError("momentum must be in [0, 1)", got=repr(value), expected=_MOMENTUM_HELP)
        if (
            isinstance(self.switch_epoch, bool)
            or not isinstance(self.switch_epoch, int)
            or self.switch_epoch < 0
        ):
            raise BoltzkitError(
                "the momentum switch epoch must be an integer >= 0", got=repr(self.switch_epoch)
            )

    def __call__(self, epoch: int) -> float:
        """Momentum of epoch ``epoch`` (0-based)."""
        return float(self.initial if epoch < self.switch_epoch else self.final)

    @property
    def spec(self) -> str:
        if self.switch_epoch == 0 or self.initial == self.final:
            return f"{self.final:g}"
        return f"{self.initial:g},{self.final:g}@{self.switch_epoch}"

    @property
    def constant(self) -> bool:
        return self.switch_epoch == 0 or self.initial == self.final


def parse_momentum(spec: str | float | MomentumSchedule) -> MomentumSchedule:
    """``0.9``, ``"0.9"`` or ``"0.5,0.9@5"`` (0.5 for epochs 1-5, then 0.9).

    Examples
    --------
    >>> [parse_momentum("0.5,0.9@5")(e) for e in (0, 4, 5)]
    [0.5, 0.5, 0.9]
    """
    if isinstance(spec, MomentumSchedule):
        return spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return MomentumSchedule(float(spec), float(spec), 0)
    text = str(spec).strip()
    try:
        if "@" in text:
            values, epoch = text.split("@")
            m0, m1 = (float(v) for v in values.split(","))
            return MomentumSchedule(m0, m1, int(epoch))
        value = float(text)
    except ValueError:
        raise BoltzkitError("cannot read the momentum", got=repr(spec), expected=_MOMENTUM_HELP) from None
    return MomentumSchedule(value, value, 0)


# ------------------------------------------------------------------------- learning rate
_LR_HELP = "'constant', 'linear' (to 0 over the run), 'linear-after:E', 'inverse:E' or 'step:E'"


@dataclass(frozen=True)
class LRSchedule:
    """Learning-rate factor by update: ``lr_t = lr * factor(t)``.

    * ``constant`` -- 1 (Hinton & Salakhutdinov 2006; S&M 2008's CD training);
    * ``linear`` -- falls linearly from 1 to 0 over all updates (S2 Sec. 5: "gradually decreased
      to 0"; the stochastic approximation conditions of S2 Sec. 4.1.1 need a decreasing rate);
    * ``linear-after:E`` -- 1 for the first ``E`` epochs, then linearly to 0 at the last update
      (train at full speed, then anneal the noise of the estimates away);
    * ``inverse:E`` -- ``1 / (1 + t / (E * updates per epoch))``, the ``epsilon / (1 + epoch / E)``
      of Salakhutdinov's PCD code;
    * ``step:E`` -- ``1 / ceil(epoch / E)`` for the 1-based epoch of update ``t``, the
      ``epsilon_0 / CD`` with ``CD = ceil(epoch/20)`` of Salakhutdinov's CD code, which pairs it
      with the k schedule ``"step:20:K"`` (:class:`StepK`): the rate falls as ``k`` grows.

    Pure in the update counter (``torch.optim.lr_scheduler.LambdaLR`` keeps it), so resuming needs
    no extra state.
    """

    kind: str = "constant"
    epochs: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "linear", "linear-after", "inverse", "step"):
            raise BoltzkitError("unknown learning-rate schedule", got=repr(self.kind), expected=_LR_HELP)
        if self.kind in ("linear-after", "inverse", "step") and (
            not isinstance(self.epochs, int) or self.epochs < 1
        ):
            raise BoltzkitError(
                f"a '{self.kind}' learning-rate schedule needs a positive number of epochs",
                got=repr(self.epochs),
                expected=_LR_HELP,
            )

    def factor(self, update: int, n_updates: int, per_epoch: int) -> float:
        """Factor of update ``update`` (0-based) in a run of ``n_updates`` updates."""
        if self.kind == "constant":
            return 1.0
        if self.kind == "inverse":
            return 1.0 / (1.0 + update / (self.epochs * per_epoch))
        if self.kind == "step":
            return 1.0 / (update // (self.epochs * per_epoch) + 1)
        start = 0 if self.kind == "linear" else min(self.epochs * per_epoch, n_updates - 1)
        if update < start:
            return 1.0
        return max(0.0, 1.0 - (update - start) / max(1, n_updates - start))

    @property
    def spec(self) -> str:
        return self.kind if self.kind in ("constant", "linear") else f"{self.kind}:{self.epochs}"

    @property
    def decays(self) -> bool:
        return self.kind != "constant"


def method_lr_schedule(method: str, spec: str | LRSchedule | None) -> str | LRSchedule:
    """The rate schedule that ``spec = None`` stands for with learning ``method``: constant for CD,
    linear decay to 0 for persistent chains (PCD, SAP, PT; S2 Sec. 5, Tieleman 2008); any other
    ``spec`` unchanged."""
    if spec is not None:
        return spec
    return "constant" if str(method).strip().lower() == "cd" else "linear"


def parse_lr_schedule(spec: str | LRSchedule | bool | None) -> LRSchedule:
    """``"constant"``, ``"linear"``, ``"linear-after:E"``, ``"inverse:E"``, ``"step:E"``; ``True`` / ``False``
    mean ``linear`` / ``constant`` (the older ``lr_decay`` flag)."""
    if isinstance(spec, LRSchedule):
        return spec
    if spec is None or spec is False:
        return LRSchedule("constant")
    if spec is True:
        return LRSchedule("linear")
    text = str(spec).strip().lower()
    kind, _, tail = text.partition(":")
    if not tail:
        return LRSchedule(kind)
    try:
        epochs = int(tail)
    except ValueError:
        raise BoltzkitError(
            "cannot read the learning-rate schedule", got=repr(spec), expected=_LR_HELP
        ) from None
    return LRSchedule(kind, epochs)


__all__ = [
    "ConstantK",
    "GeometricK",
    "KSchedule",
    "LRSchedule",
    "LinearK",
    "MomentumSchedule",
    "StepK",
    "parse_k_schedule",
    "parse_lr_schedule",
    "parse_momentum",
]
