"""The machine a process runs on: its per-user cache, its identity, and what was measured on it.

Some choices are properties of the host, not of the work: whether the lookup product of sparse
binary states beats the dense one (:func:`boltzkit._numerics.sparse_products`) is. A measurement
made in each process decides the same way only where the two sides lie far apart; on a host near
the margin, or one busy with other work while it measures, two processes could choose differently
and the same seed would then give different numbers. So a measurement is made once per host and
remembered (:func:`remembered`), in the per-user cache, under a key that names the CPU, the torch
version and the number of threads (:func:`host_key`); every later process on the host reads it.

This module is on the ground floor: it imports nothing from boltzkit but :mod:`boltzkit.atomic`.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from boltzkit.atomic import atomic_write_text

__all__ = ["default_cache_dir", "host_key", "remembered", "remembered_path"]

#: The file of remembered measurements, in :func:`default_cache_dir`.
REMEMBERED_FILE = "host-measurements.json"


def default_cache_dir() -> Path:
    """Per-user cache: ``$XDG_CACHE_HOME/boltzkit``, or ``~/.cache/boltzkit`` when unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "boltzkit"


def remembered_path() -> Path:
    """Where the measurements of this host are kept (:data:`REMEMBERED_FILE` in the cache)."""
    return default_cache_dir() / REMEMBERED_FILE


def _cpu() -> str:
    """The first processor's model name, family, model and stepping (``/proc/cpuinfo``), else
    what :mod:`platform` says."""
    try:
        fields: dict[str, str] = {}
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block ends here
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
        keys = ("model name", "cpu family", "model", "stepping")
        described = " / ".join(fields[k] for k in keys if fields.get(k))
        if described:
            return described
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def host_key() -> str:
    """The CPU, the torch version and the number of torch threads: what a measurement of speed
    on this host depends on, e.g. ``"AMD EPYC / 25 / 1 / 1 | torch 2.13.0+cpu | 2 threads"``."""
    return f"{_cpu()} | torch {torch.__version__} | {torch.get_num_threads()} threads"


def _read(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, unreadable or torn by hand: measure again
        return {}
    return content if isinstance(content, dict) else {}


def remembered(name: str, measure: Callable[[], dict[str, Any]], *, again: bool = False) -> dict[str, Any]:
    """The record ``name`` measured on this host (:func:`host_key`), measuring it the first time.

    Parameters
    ----------
    name
        What was measured, e.g. ``"sparse_products"``.
    measure
        Returns the record, a JSON-able dict; called only when this host has none (or ``again``).
    again
        Measure even if a record exists, and keep the new one.

    Returns
    -------
    dict
        The record, with ``"host"`` (the key it is filed under). Processes that start together
        take turns on a lock file, so the first measures and the others read its record. Where
        the cache cannot be written the record is still returned, and the next process measures
        again: then the processes of a host may choose differently.
    """
    path = remembered_path()
    key = host_key()

    def kept() -> dict[str, Any] | None:
        by_host = _read(path).get(name)
        record = by_host.get(key) if isinstance(by_host, dict) else None
        return record if isinstance(record, dict) and not again else None

    if (record := kept()) is not None:
        return {**record, "host": key}
    with _lock(path):  # one process measures; one that waited reads what it found
        if (record := kept()) is not None:
            return {**record, "host": key}
        record = measure()
        records = _read(path)
        by_host = records.get(name) if isinstance(records.get(name), dict) else {}
        records[name] = {**by_host, key: record}
        try:
            atomic_write_text(path, json.dumps(records, indent=2, sort_keys=True) + "\n", parents=True)
        except Exception:  # noqa: BLE001 - a read-only home: the choice holds for this process only
            pass
    return {**record, "host": key}


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s ``.lock`` file (``fcntl.flock``; none where the platform or
    the directory does not allow one: the measurement then holds for this process only)."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - closed below
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # releases the lock
