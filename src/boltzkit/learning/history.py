"""Per-epoch training history: a list of flat records, written as CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boltzkit.atomic import atomic_write_text


def _clean(value: Any) -> Any:
    """JSON-safe scalar: non-finite floats become ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class History:
    """Records of a training run, one ``dict`` per epoch.

    Typical keys: ``epoch`` (1-based), ``seconds`` (training time of the epoch), ``elapsed``
    (cumulative), ``recon_error`` (mean over examples of ``||v - p(v|h)||^2``, ``h ~ p(h|v)``,
    measured on the iterates during the epoch, so not of an average the run returns),
    ``lr``, ``k``, and where the model is tractable ``log_z``, ``train_log_lik``,
    ``valid_log_lik`` (exact mean log-likelihoods in nats).

    ``settings`` holds the settings the run used, as :func:`~boltzkit.learning.api.train` resolved
    them (the learning-rate schedule, positive phase and k schedule that ran, defaults included);
    they are not part of the records' CSV and JSON, and neither is ``sparse_products``.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    #: whether the run's products of sparse binary states took the lookup
    #: (``boltzkit._numerics.sparse_products``; ``None`` before it trained)
    sparse_products: bool | None = None

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        self.records.append(record)
        return record

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.records[index]

    def __iter__(self):
        return iter(self.records)

    @property
    def columns(self) -> list[str]:
        """All keys, in order of first appearance."""
        seen: dict[str, None] = {}
        for rec in self.records:
            for key in rec:
                seen.setdefault(key, None)
        return list(seen)

    def column(self, name: str) -> list[Any]:
        """Values of one key per epoch (``None`` where missing)."""
        return [rec.get(name) for rec in self.records]

    @property
    def last(self) -> dict[str, Any] | None:
        return self.records[-1] if self.records else None

    # ------------------------------------------------------------------------------- export
    def to_list(self) -> list[dict[str, Any]]:
        return [{k: _clean(v) for k, v in rec.items()} for rec in self.records]

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The records as a JSON array; written atomically to ``path`` when given."""
        text = json.dumps(self.to_list(), indent=1, allow_nan=False) + "\n"
        if path is not None:
            atomic_write_text(path, text, parents=True)
        return text

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """The records as CSV with a header row (missing values empty); atomic when ``path`` is given."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.columns, restval="", lineterminator="\n")
        writer.writeheader()
        for rec in self.to_list():
            writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
        text = buf.getvalue()
        if path is not None:
            atomic_write_text(path, text, parents=True)
        return text

    @classmethod
    def from_list(cls, records: list[dict[str, Any]]) -> History:
        return cls([dict(r) for r in records])

    @classmethod
    def read_json(cls, path: str | os.PathLike) -> History:
        return cls.from_list(json.loads(Path(path).read_text(encoding="utf-8")))


def history_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """CSV and JSON paths for a history base path.

    ``run.csv`` -> (``run.csv``, ``run.json``); ``run.json`` -> (``run.csv``, ``run.json``); any
    other name gets both suffixes appended (``run/history`` -> ``run/history.csv``, ``.json``).
    """
    p = Path(path)
    if p.suffix.lower() in (".csv", ".json"):
        return p.with_suffix(".csv"), p.with_suffix(".json")
    return p.with_name(p.name + ".csv"), p.with_name(p.name + ".json")


__all__ = ["History", "history_paths"]
