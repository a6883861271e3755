"""Errors raised at boltzkit's public entry points.

Every error says what was wrong, what was got, what was expected and, where it helps, a hint.
The command line prints ``str(error)`` and exits non-zero without a traceback.
"""

from __future__ import annotations

import numbers


class BoltzkitError(ValueError):
    """A user-facing error with a one-paragraph message.

    Parameters
    ----------
    what
        What was wrong, as a short sentence.
    got
        What the caller gave (optional).
    expected
        What was expected instead (optional).
    hint
        How to fix it (optional).
    """

    def __init__(
        self,
        what: str,
        *,
        got: object | None = None,
        expected: object | None = None,
        hint: str | None = None,
    ) -> None:
        self.what = what
        self.got = got
        self.expected = expected
        self.hint = hint
        parts = [what.rstrip(".") + "."]
        if got is not None:
            parts.append(f"Got: {got}.")
        if expected is not None:
            parts.append(f"Expected: {expected}.")
        if hint:
            parts.append(f"Hint: {hint}")
        super().__init__(" ".join(parts))


class IntractableError(BoltzkitError):
    """Exact enumeration was asked for a model whose smaller layer is too large."""


class DataError(BoltzkitError):
    """A data set is missing, malformed, non-binary or of the wrong width."""


class ModelFileError(BoltzkitError):
    """A model file is missing, truncated, foreign, or holds invalid parameters."""


class BoltzkitWarning(UserWarning):
    """The base of boltzkit's warnings: ``warnings.simplefilter("error", BoltzkitWarning)`` makes
    every one of them an error."""


class UnreliableEstimateWarning(BoltzkitWarning):
    """An estimate came back with ``reliable: false`` (its record says why and what to do); raised
    by every estimator of :mod:`boltzkit.estimators` so that Python callers see the verdict
    without asking for it."""


def whole_number(value: object, what: str, *, minimum: int | None = None, hint: str | None = None) -> int:
    """``value`` as an ``int`` when it is a whole number (numpy's integers too; never a bool, a
    float or a string) of at least ``minimum``; else a :class:`BoltzkitError` naming ``what``.
    The one check of counts and seeds given in Python."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BoltzkitError(f"{what} must be a whole number", got=repr(value), hint=hint)
    if minimum is not None and value < minimum:
        raise BoltzkitError(
            f"{what} must be an integer >= {minimum}",
            got=repr(value),
            expected=f">= {minimum}",
            hint=hint,
        )
    return int(value)


def positive_int(value: object, what: str, *, hint: str | None = None) -> int:
    """:func:`whole_number` of at least 1 ("``what`` must be a positive integer")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise BoltzkitError(
            f"{what} must be a positive integer", got=repr(value), expected="an integer >= 1", hint=hint
        )
    return int(value)
