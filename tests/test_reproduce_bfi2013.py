"""``boltzkit reproduce bruegge-fischer-igel-2013`` on a smoke plan: every part runs in seconds,
the report carries the paper's numbers beside ours, and a second run resumes without training."""

from __future__ import annotations

import json

import pytest

from boltzkit.errors import BoltzkitError
from boltzkit.experiments import EXPERIMENTS
from boltzkit.experiments.bfi2013 import PAPER_LL, PAPER_TAU, make_plan, parse_only, run_bfi2013


def test_smoke_run_writes_every_part_and_resumes(tmp_path):
    summary = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"))
    report = (tmp_path / "bfi2013.md").read_text()
    for title in ("Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 6", "Fig. 3", "SMOKE MODE"):
        assert title in report
    assert "-3.986813*" in report and "22.46" in report and "| 637 |" in report  # S3's values beside ours
    assert summary["tasks_run"] > 0 and json.loads((tmp_path / "bfi2013.json").read_text())["plan"] == "smoke"
    again = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table1,table3")
    assert again["tasks_run"] == 0 and again["tasks_skipped"] > 0
    assert "Table 3" in (tmp_path / "bfi2013.md").read_text()


def test_paper_values_and_parts():
    assert "bruegge-fischer-igel-2013" in EXPERIMENTS
    assert sum(len(rows) for rows in PAPER_LL.values()) == 18 + 12 + 9 + 9 + 14 + 14
    starred = [r for rows in PAPER_LL.values() for r in rows if r.star == "a"]
    assert [(r.algorithm, r.lr, r.gibbs) for r in starred] == [("pcd:1", 0.01, -4.944813)]
    assert PAPER_TAU["mnist500"] == (522.39, 432.12, 17.28)
    assert parse_only("table1, fig3") == ("table1", "fig3")
    with pytest.raises(BoltzkitError, match="part"):
        parse_only("table7")
    with pytest.raises(BoltzkitError, match="plan"):
        make_plan("huge")
    full = make_plan("full")
    assert full.reps == 25 and full.updates["mnist"] == 20_000 and full.act_steps == 1_000_000
