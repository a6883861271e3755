"""Learning curves from a training history (``boltzkit train --history PATH``: ``PATH.csv`` and
``PATH.json``, one record per epoch; the ``history_`` of a :mod:`boltzkit.sklearn` estimator).

The log-likelihood panel draws every column whose name holds ``log_lik`` or ``log_prob`` (the
exact ``train_log_lik`` / ``valid_log_lik`` that training records for tractable models, and any
AIS estimates a monitor adds); the second panel is the reconstruction error ``recon_error``.
Several histories are drawn on the same axes, labelled by file name.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from boltzkit.errors import BoltzkitError, warn
from boltzkit.learning.history import History
from boltzkit.plots._backend import new_figure, save_png

HistorySource = str | os.PathLike | History | Sequence[dict[str, Any]]


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _not_text(p: Path) -> BoltzkitError:
    return BoltzkitError(
        "this history file is not text",
        got=f"{p} (not UTF-8)",
        expected="the CSV or JSON history that boltzkit train --history PATH writes",
    )


def _non_finite(records: list[dict[str, Any]], key: str) -> list[str]:
    """The epochs at which ``key`` holds a number that is not finite (NaN, inf): a run that
    diverged, which the curves cannot draw."""
    out = []
    for i, rec in enumerate(records):
        value = rec.get(key)
        try:
            x = float(value) if value not in (None, "") else 0.0
        except (TypeError, ValueError):
            continue
        if not math.isfinite(x):
            out.append(str(rec.get("epoch", i + 1)))
    return out


def read_history(source: HistorySource) -> list[dict[str, Any]]:
    """The per-epoch records of a history: a ``.csv`` or ``.json`` file, a :class:`History`, or a
    list of records."""
    if isinstance(source, History):
        return source.to_list()
    if not isinstance(source, (str, os.PathLike)):
        return [dict(r) for r in source]
    p = Path(source)
    suffix = p.suffix.lower()
    if suffix == ".json":
        try:
            records = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BoltzkitError("this history file is not valid JSON", got=f"{p} ({exc})") from None
        except UnicodeDecodeError:
            raise _not_text(p) from None
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise BoltzkitError(
                "a JSON history is a list of per-epoch records", got=f"{p} holds a {type(records).__name__}"
            )
        return records
    if suffix == ".csv":
        try:
            with open(p, encoding="utf-8", newline="") as f:
                return [dict(row) for row in csv.DictReader(f)]
        except UnicodeDecodeError:
            raise _not_text(p) from None
    raise BoltzkitError(
        "unknown history file type",
        got=str(p),
        expected="PATH.csv or PATH.json (boltzkit train --history PATH)",
    )


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for i, rec in enumerate(records):
        y = _number(rec.get(key))
        if y is None:
            continue
        x = _number(rec.get("epoch"))
        xs.append(x if x is not None else float(i + 1))
        ys.append(y)
    return xs, ys


def _likelihood_columns(records: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for rec in records:
        for key in rec:
            if ("log_lik" in key or "log_prob" in key) and _number(rec.get(key)) is not None:
                seen.setdefault(key, None)
    return list(seen)


def _label(source: HistorySource, index: int) -> str:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name
    return f"run {index + 1}"


def plot_history(
    sources: HistorySource | Sequence[HistorySource],
    out: str | os.PathLike,
    *,
    title: str | None = None,
) -> Path:
    """Draw learning curves (log-likelihoods, reconstruction error) against the epoch as a PNG.

    Parameters
    ----------
    sources
        One history or several (files, :class:`History` objects or lists of records).
    out
        The PNG to write.
    title
        Figure title (default: none).
    """
    if isinstance(sources, (str, os.PathLike, History)) or (
        isinstance(sources, Sequence) and sources and isinstance(sources[0], dict)
    ):
        sources = [sources]  # type: ignore[list-item]
    runs = [(_label(s, i), read_history(s)) for i, s in enumerate(sources)]  # type: ignore[arg-type]
    lik = {label: _likelihood_columns(recs) for label, recs in runs}
    has_lik = any(lik.values())
    has_recon = any(_series(recs, "recon_error")[0] for _, recs in runs)
    if not has_lik and not has_recon:
        raise BoltzkitError(
            "nothing to draw: the history has no log-likelihood and no reconstruction error",
            got=", ".join(label for label, _ in runs),
            hint="train with --history PATH; log-likelihoods are recorded when log Z is tractable.",
        )
    for label, recs in runs:  # a diverged run must not look like one that stopped cleanly
        for key in [*lik[label], "recon_error"]:
            if bad := _non_finite(recs, key):
                shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
                warn(f"{label}: {key} is not a finite number at epoch {shown} (the run diverged?): not drawn")
    n_panels = int(has_lik) + int(has_recon)
    fig = new_figure(5.0 * n_panels, 3.6)
    axes = list(fig.subplots(1, n_panels, squeeze=False)[0])
    several = len(runs) > 1
    if has_lik:
        ax = axes.pop(0)
        for label, recs in runs:
            for key in lik[label]:
                xs, ys = _series(recs, key)
                name = key.replace("_", " ")
                ax.plot(
                    xs,
                    ys,
                    marker="o" if len(xs) < 30 else None,
                    ms=3,
                    ls="--" if key.startswith("valid") else "-",
                    label=f"{label}: {name}" if several else name,
                )
        ax.set_xlabel("epoch")
        ax.set_ylabel("mean log-likelihood (nats)")
        ax.set_title("log-likelihood")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if has_recon:
        ax = axes.pop(0)
        for label, recs in runs:
            xs, ys = _series(recs, "recon_error")
            if xs:
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, ms=3, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel("squared error per example")
        ax.set_title("reconstruction error")
        ax.grid(alpha=0.3)
        if several:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_png(fig, out)


__all__ = ["plot_history", "read_history"]
