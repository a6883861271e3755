"""Requests too big for the machine: refuse them before they allocate, warn before a long wait.

* :func:`require_memory` refuses a request whose working memory is beyond what the machine has,
  with the size it needs and what to do instead (instead of the allocator's raw text, or of the
  operating system killing the process after minutes of swapping).
* :func:`describe_allocation_failure` turns torch's allocator message ("you tried to allocate N
  bytes") into the same sentence, for requests that no check foresaw.
* :class:`Forecast` watches a long loop (AIS steps, chunks of exact enumeration) and warns once,
  a couple of seconds in, when at its measured pace the loop will take more than a few minutes,
  saying how long and what to change. Measuring the pace is more honest than a formula: it
  includes the model, the device and whatever else shares the machine.
"""

from __future__ import annotations

import os
import re
import time

import torch

from boltzkit.errors import BoltzkitError, BoltzkitWarning, warn

__all__ = [
    "SLOW_SECONDS",
    "Forecast",
    "ResourceError",
    "SlowRequestWarning",
    "available_bytes",
    "describe_allocation_failure",
    "format_bytes",
    "format_seconds",
    "require_memory",
]

#: A run forecast to take longer than this (seconds) gets a :class:`SlowRequestWarning`, forecast
#: from the pace of its first ``FORECAST_AFTER_S`` seconds.
SLOW_SECONDS = 300.0
FORECAST_AFTER_S = 2.0


class ResourceError(BoltzkitError):
    """A request needs more memory than the machine has."""


class SlowRequestWarning(BoltzkitWarning):
    """A run will take longer than :data:`SLOW_SECONDS` at its measured pace."""


def format_bytes(n_bytes: float) -> str:
    """``3.1 TB``-style text (powers of 1000)."""
    value = float(n_bytes)
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if value < 1000 or unit == "PB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """``"about 3.2 hours"``-style text."""
    for limit, unit in ((120, "seconds"), (7200, "minutes"), (172800, "hours")):
        if seconds < limit:
            scale = {"seconds": 1, "minutes": 60, "hours": 3600}[unit]
            return (
                f"about {seconds / scale:.1f} {unit}" if unit != "seconds" else f"about {seconds:.0f} seconds"
            )
    days = seconds / 86400
    return f"about {days:.1f} days" if days < 3650 else f"about {days / 365.25:.3g} years"


def available_bytes(device: torch.device | str | None = None) -> int:
    """Memory a request may use: free memory on a CUDA device, else the machine's physical memory
    (``os.sysconf``; a generous figure, since what is free changes by the second)."""
    dev = torch.device("cpu" if device is None else device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return 1 << 62


def require_memory(n_bytes: float, *, what: str, hint: str, device: torch.device | str | None = None) -> None:
    """Refuse a request of ``n_bytes`` beyond the memory of ``device`` (:func:`available_bytes`).

    Parameters
    ----------
    n_bytes
        The request's working memory, estimated by the caller.
    what
        What is being asked for, e.g. ``"an AIS schedule of 1,000,000,000 betas"``.
    hint
        What to do instead.

    Raises
    ------
    ResourceError
        Saying what needs how much, what the machine has, and the hint.
    """
    dev = torch.device("cpu" if device is None else device)
    have = available_bytes(dev)
    if n_bytes > have:
        raise ResourceError(
            f"{what} needs about {format_bytes(n_bytes)} of memory",
            got=f"{format_bytes(have)} on this {'GPU' if dev.type == 'cuda' else 'machine'}",
            hint=hint,
        )


_ALLOCATION = re.compile(r"(?:tried to allocate|Tried to allocate)\s+([\d.]+)\s*(bytes|[KMGT]i?B)")
_UNIT = {
    "bytes": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
}


def describe_allocation_failure(message: str) -> str | None:
    """A plain sentence for torch's "can't allocate memory" errors, or ``None`` for other text."""
    if "allocate" not in message or ("memory" not in message and "Memory" not in message):
        return None
    found = _ALLOCATION.search(message)
    size = f" of {format_bytes(float(found.group(1)) * _UNIT.get(found.group(2), 1))}" if found else ""
    return (
        f"out of memory: one array{size} did not fit (this machine has "
        f"{format_bytes(available_bytes())}); ask for fewer hidden units, chains or samples, a smaller "
        "batch, or a shorter schedule"
    )


class Forecast:
    """Warn once when a loop of ``total`` units of work will take longer than ``limit_s``.

    Call :meth:`update` with the units done so far after each unit; once ``after_s`` seconds have
    passed it extrapolates the pace measured so far and, if the whole loop will take longer than
    ``limit_s``, issues one :class:`SlowRequestWarning` naming the estimated time and ``hint``.

    Parameters
    ----------
    total
        Units of work in the loop (AIS steps, enumeration chunks).
    what
        The run, e.g. ``"AIS with 100 chains and 1,000,000 steps"``.
    hint
        What to change for a shorter run.
    limit_s, after_s
        The warning threshold and how long to measure before forecasting (default
        :data:`SLOW_SECONDS` and :data:`FORECAST_AFTER_S`).
    """

    def __init__(
        self,
        total: int,
        *,
        what: str,
        hint: str,
        limit_s: float | None = None,
        after_s: float | None = None,
    ) -> None:
        self.total = int(total)
        self.what = what
        self.hint = hint
        self.limit_s = float(SLOW_SECONDS if limit_s is None else limit_s)
        self.after_s = float(FORECAST_AFTER_S if after_s is None else after_s)
        self.start = time.perf_counter()
        self.done = False
        self.forecast_s: float | None = None

    def update(self, n_done: int) -> None:
        """Record progress (``n_done`` of ``total`` units); forecast once ``after_s`` has passed."""
        if self.done or n_done <= 0:
            return
        elapsed = time.perf_counter() - self.start
        if elapsed < self.after_s:
            return
        self.done = True
        self.forecast_s = elapsed * self.total / n_done
        if self.forecast_s > self.limit_s:
            warn(
                SlowRequestWarning(
                    f"{self.what} will take {format_seconds(self.forecast_s)} at its measured pace "
                    f"({n_done:,} of {self.total:,} done in {elapsed:.1f} s); {self.hint}"
                ),
            )
