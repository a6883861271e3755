"""Errors raised at boltzkit's public entry points.

Every error says what was wrong, what was got, what was expected and, where it helps, a hint.
The command line prints ``str(error)`` and exits non-zero without a traceback.
"""

from __future__ import annotations


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
