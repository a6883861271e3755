"""Schedules for the number ``k`` of sampling sweeps per parameter update.

Salakhutdinov & Murray (2008, Sec. 6) trained their best RBM, CD25(500), "by starting with T=1,
and gradually increasing T to 25 during the course of CD training" (after Carreira-Perpinan &
Hinton 2005). A :class:`KSchedule` maps the epoch index ``e = 0 .. epochs - 1`` to ``k``:

* :class:`ConstantK` -- ``k(e) = k``;
* :class:`LinearK` -- ``k(e) = round(k_start + (k_end - k_start) e / (epochs - 1))``, so the first
  epoch uses ``k_start`` and the last ``k_end``;
* :class:`GeometricK` -- the same with ``log k`` interpolated linearly (more epochs at small ``k``).

Schedules are pure functions of the epoch index (no state), so resuming a run needs only the
epoch counter. Specs as the command line writes them are parsed by :func:`parse_k_schedule`:
``"3"``, ``"constant:3"``, ``"1:25"``, ``"linear:1:25"``, ``"geometric:1:25"``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from boltzkit.errors import BoltzkitError

_SPEC_HELP = "'K', 'constant:K', 'K_START:K_END', 'linear:K_START:K_END' or 'geometric:K_START:K_END'"


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
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BoltzkitError(
            f"the number of sampling sweeps {name} must be a positive integer",
            got=repr(value),
            expected="an integer >= 1",
        )
    return value


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
        ``"linear:K_START:K_END"`` (linear in epochs), ``"geometric:K_START:K_END"``; a
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
    """
    if isinstance(spec, KSchedule):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        return ConstantK(_check_k(spec, "k"))
    if not isinstance(spec, str):
        raise BoltzkitError("a k schedule must be a spec string", got=repr(spec), expected=_SPEC_HELP)
    parts = [p.strip() for p in spec.strip().lower().split(":")]
    kind = "linear"
    if parts and parts[0] in ("constant", "const", "fixed", "linear", "geometric", "geom"):
        kind = parts.pop(0)
    if kind in ("constant", "const", "fixed") and len(parts) == 1:
        return ConstantK(_parse_int(parts[0], spec))
    if len(parts) == 1 and kind == "linear" and ":" not in spec:
        return ConstantK(_parse_int(parts[0], spec))
    if len(parts) == 2 and kind in ("linear", "geometric", "geom"):
        a, b = (_parse_int(p, spec) for p in parts)
        return LinearK(a, b) if kind == "linear" else GeometricK(a, b)
    raise BoltzkitError("cannot read the k schedule", got=repr(spec), expected=_SPEC_HELP)


__all__ = ["ConstantK", "GeometricK", "KSchedule", "LinearK", "parse_k_schedule"]
