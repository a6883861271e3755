"""The two studies beside the paper reproductions (``boltzkit reproduce ais-operators`` and
``learning-recipes``): each writes its table once, as markdown and as CSV, from the same rows."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from conftest import random_rbm

from boltzkit.experiments import ais_operators, learning_study
from boltzkit.experiments.engine import TaskRun
from boltzkit.experiments.learning_study import VARIANTS


def _csv_rows(path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_ais_operators_table_on_a_small_model(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 6 x 4 RBM (exact log Z known) every sampler and schedule gets a row; the CSV holds the
    markdown's rows, and the bias it reports is the mean estimate's distance from the exact value."""
    rbm = random_rbm(6, 4, seed=3, scale=0.5)
    data = (torch.rand(64, 6, generator=torch.Generator().manual_seed(4)) < 0.5).double()
    monkeypatch.setattr(ais_operators, "_models", lambda *a, **k: [("tiny 6x4", rbm, data)])
    summary = ais_operators.run_ais_operators(out_dir=tmp_path, quick=True, seed=1, device="cpu", n_chains=20)
    assert {"ais_operators.md", "ais_operators.csv", "ais_operators.json"} <= set(summary["files"])
    rows = _csv_rows(tmp_path / "ais_operators.csv")
    assert {r["mode"] for r in rows} == {"quick"}
    assert [(r["n_steps"], r["sampler"]) for r in rows] == [
        (str(k), op) for k in (100, 1000) for op in ais_operators.OPERATORS
    ]
    md = (tmp_path / "ais_operators.md").read_text()
    for r, rec in zip(rows, summary["rows"], strict=True):
        assert float(r["bias"]) == rec["bias"] and float(r["sd_log_z"]) == rec["sd_log_z"]
        assert f"| tiny 6x4 | {r['n_steps']} | {r['sampler']} | {rec['bias']:+.4f} |" in md
        # ten independent estimates, each with ~0.01-nat errors on this easy model: the mean is near exact
        assert abs(rec["bias"]) <= 5 * rec["sd_log_z"] / math.sqrt(rec["n_runs"]) + 1e-3
    assert json.loads((tmp_path / "ais_operators.json").read_text())["rows"] == summary["rows"]


def test_learning_study_table(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learning study's rows (here made up, one per variant) appear once in the markdown, with
    the best marked, and unchanged in the CSV: its variant names hold commas ("PCD-1, 100 chains"),
    which the CSV quotes (it used to split them into extra fields)."""
    records = [
        {"variant": v, "test": -140.0 + i, "train": -139.0 + i,
         "log_z": 300.0 + i, "seconds_per_epoch": 1.5, "chain_activity": 0.1, "data_activity": 0.13}
        for i, v in enumerate(VARIANTS)
    ]  # fmt: skip
    monkeypatch.setattr(learning_study, "run_tasks", lambda *a, **k: TaskRun(records, 0, len(records), 0.0))
    summary = learning_study.run_learning_study(out_dir=tmp_path, quick=True)
    rows = _csv_rows(tmp_path / "learning.csv")
    assert [r["variant"] for r in rows] == [r["variant"] for r in records]
    assert {r["mode"] for r in rows} == {"quick"}  # read alone, the CSV says its numbers are not full size
    assert [float(r["test"]) for r in rows] == [r["test"] for r in records]
    md = (tmp_path / "learning.md").read_text()
    best = records[-1]
    assert f"| {best['variant']} | {best['test']:.2f} (best) |" in md and md.count("(best)") == 1
    assert summary["files"] == ["learning.md", "learning.csv", "learning.json"]
