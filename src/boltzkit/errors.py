"""Errors raised at boltzkit's public entry points.

Every error says what was wrong, what was got, what was expected and, where it helps, a hint.
The command line prints ``str(error)`` and exits non-zero without a traceback.
"""

from __future__ import annotations

import contextlib
import numbers
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path


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


_PACKAGE_DIR = str(Path(__file__).resolve().parent)


def _is_internal(filename: str) -> bool:
    """Whether a frame's file is boltzkit's own or one of torch's (its ``no_grad`` decorator
    adds a frame between an estimator and its caller)."""
    try:
        path = str(Path(filename).resolve())
    except (OSError, RuntimeError):  # "<string>", "<stdin>", a file since removed
        return False
    if path.startswith(_PACKAGE_DIR):
        return True
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    return torch_file is not None and path.startswith(str(Path(torch_file).resolve().parent))


def warn(message: str | Warning, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` naming the first line outside boltzkit (and torch) that led to it.

    The one way boltzkit warns: a Python caller's warning points at the caller's own line, however
    deep inside the package (and behind how many of torch's decorators) it was raised, where a
    fixed ``stacklevel`` points at boltzkit's code whenever a call path has one more frame.
    """
    frame = sys._getframe(1)  # the boltzkit function that warns
    level = 2  # warnings.warn's stacklevel of that function's caller
    while frame.f_back is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    if isinstance(message, Warning):
        category = type(message)
    warnings.warn(message, category, stacklevel=level)


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


class Terminated(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` that :func:`terminate_as_interrupt` raises for a signal, with its
    number (``signum``), so that a command ends with the status a shell expects of it (143 for
    SIGTERM, where Ctrl-C's is 130)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = int(signum)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` in the main thread while the block runs, so that a run
    stopped by it (a session's time limit, ``kill``) ends as Ctrl-C ends it: a command says where
    its checkpoint is, and the experiment engine stops its worker processes instead of leaving
    them behind; elsewhere (another thread, no SIGTERM) nothing changes."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def interrupt(signum, frame) -> None:  # noqa: ANN001
        raise Terminated(signum)

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
