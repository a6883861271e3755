"""``boltzkit reproduce bruegge-fischer-igel-2013`` on a smoke plan: every part runs in seconds,
the report carries the paper's numbers beside ours, and a second run resumes without training."""

from __future__ import annotations

import json
import re

import pytest

from boltzkit.errors import BoltzkitError, BoltzkitWarning
from boltzkit.experiments import EXPERIMENTS
from boltzkit.experiments.bfi2013 import PAPER_LL, PAPER_TAU, make_plan, parse_only, run_bfi2013
from boltzkit.experiments.bfi2013.report import ladder_section, pooled_section, table2_section


def test_smoke_run_writes_every_part_and_resumes(tmp_path):
    summary = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"))
    report = (tmp_path / "bfi2013.md").read_text()
    for title in ("Table 1", "Table 2", "Table 3", "Table 4", "Table 5", "Table 6", "Fig. 3", "SMOKE MODE"):
        assert title in report
    assert "-3.986813*" in report and "22.46" in report and "| 637 |" in report  # S3's values beside ours
    assert summary["tasks_run"] > 0 and json.loads((tmp_path / "bfi2013.json").read_text())["plan"] == "smoke"
    # every table's numbers as CSV too, the same rows as the markdown, S3's beside ours
    import csv

    def rows(name: str) -> list[dict[str, str]]:
        assert name in summary["files"]
        with open(tmp_path / name) as f:
            return list(csv.DictReader(f))

    tau = rows("bfi2013-tau.csv")
    assert {r["mode"] for r in tau} == {"smoke"}
    problems = ["bars-and-stripes", "artificial-modes:0.1", "artificial-modes:0.01", "mnist", "mnist500"]
    assert [r["problem"] for r in tau] == problems
    assert tau[0]["paper_tau_gibbs"] == "22.46" and float(tau[0]["tau_gibbs"]) > 0 and tau[3]["rbms"] == "0"
    assert f"| {float(tau[0]['tau_gibbs']):.2f} |" in report
    # Table 2 again from pooled chains on the plan's pooled problems (smoke: Bars and Stripes)
    pooled = rows("bfi2013-tau-pooled.csv")
    assert [(r["problem"], r["rbms"], r["n_chains"], r["records"]) for r in pooled] == [
        ("bars-and-stripes", "1", "2", "2")
    ]
    calls = sum(int(pooled[0][k]) for k in ("rbms_flip_faster", "rbms_gibbs_faster", "rbms_undecided"))
    assert calls == 1 and pooled[0]["p_value"] == ""  # one RBM: no signed-rank test
    assert "### Table 2 from pooled chains (not in S3)" in report and "| 2 × 400 |" in report
    assert "fig4_pooled_acf.png" in summary["files"] and "](fig4_pooled_acf.png)" in report
    record = summary["results"]["table2_pooled"]["bars-and-stripes"][0]["flip"]
    assert record["config"]["n_chains"] == 2 and len(record["tau_ar_chains"]) == 2
    assert "acf" not in record and record["tau_sokal_sd"] > 0
    pooled_records = sorted((tmp_path / "act").glob("*_2chains.json"))
    assert len(pooled_records) == 2
    classes = rows("bfi2013-classes.csv")
    per_table = [(t, op) for t in ("table3", "table4") for _ in range(2) for op in ("gibbs", "flip")]
    assert [(r["table"], r["operator"]) for r in classes] == per_table
    assert classes[1]["paper_median"] == "944"  # AM p_mut 0.1, T: S3 Table 3
    assert classes[4]["censored"] != "" and classes[0]["censored"] == ""  # censoring is Table 4's
    slem = rows("bfi2013-slem.csv")
    assert [r["n"] for r in slem] == ["2", "3", "4"] and all(0 <= float(r["c_10"]) <= 1 for r in slem)
    ladders = rows("bfi2013-ladders.csv")  # the tempering cells' swap rates and round trips
    assert ladders and all(r["algorithm"].startswith("pt:") for r in ladders)
    assert "tempering ladders" in report
    rates = [float(x) for x in ladders[0]["swap_rates"].split()]
    assert all(0 <= x <= 1 for x in rates) and float(ladders[0]["min_swap_rate"]) == min(rates)
    again = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table1,table3")
    assert again["tasks_run"] == 0 and again["tasks_skipped"] > 0
    assert "Table 3" in (tmp_path / "bfi2013.md").read_text()

    # a look at the mixing parts while they run: records missing, nothing trained or sampled
    act_flip = next((tmp_path / "act").glob("bars-and-stripes_*_flip.json"))
    cc_records = sorted((tmp_path / "classes").glob("artificial-modes-0.1_*_gibbs.json"))
    removed = {path: json.loads(path.read_text()) for path in (act_flip, cc_records[0])}
    for path in removed:
        path.unlink()
    (tmp_path / "slem.json").unlink()
    kept = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file() and "finished" not in p.name}
    seen = run_bfi2013(
        out_dir=tmp_path, plan=make_plan("smoke"), only="table2,table3,table4,fig3", finished_only=True
    )
    assert seen["tasks_run"] == 0 and seen["report"] == "bfi2013-finished.md"
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # no record written, no model trained
    assert not (tmp_path / "slem.json").exists() and len(list((tmp_path / "act").glob("*.json"))) == 7
    finished = (tmp_path / "bfi2013-finished.md").read_text()
    assert "Table 2: 2 of the 3 kept models have both operators' records." in finished
    assert "Tables 3-4: 3 of the 4 kept models have both operators' records." in finished
    assert "Table 2 from pooled chains: 1 of the 1 kept models have both operators' records." in finished
    assert "Top: the SLEM study has no record here yet." in finished
    tau = {r["problem"]: r for r in _csv(tmp_path / "bfi2013-finished-tau.csv")}
    assert tau["bars-and-stripes"]["rbms"] == "0" and tau["artificial-modes:0.1"]["rbms"] == "1"
    assert "bfi2013-finished-slem.csv" not in seen["files"]
    assert {"bfi2013-finished-fig4_acf.png", "bfi2013-finished-fig3_curves.png"} <= set(seen["files"])
    assert "](bfi2013-finished-fig4_acf.png)" in finished  # the whole run's figures stay as they were
    assert seen["results"]["classes"]["artificial-modes:0.1"]["gibbs"]["class_changes"] == [
        json.loads(cc_records[1].read_text())["class_changes"]
    ]

    # a model whose records are all there is not needed again: without the kept models (a session
    # that did not keep their files), a run trains only the two whose records are missing, and
    # their records come back as they were (same seeds, same model, same chain)
    pooled_before = []  # the pooled records too: the retrained model is the same, so are its chains
    for path in pooled_records:
        pooled_before.append(json.loads(path.read_text()))
        path.unlink()
    for model in (tmp_path / "models").glob("*.safetensors"):
        (tmp_path / "tasks" / f"{model.stem}.json").unlink()
        model.unlink()
    resumed = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table2,table3,table4")
    look = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table2", finished_only=True)
    head = (tmp_path / look["report"]).read_text().split("## Table 2")[0]
    assert "> Finished tasks only: Table 2: 3 of the 3 kept models" in head  # no likelihood task planned
    assert resumed["tasks_run"] == 2 and resumed["tasks_skipped"] == 5
    assert len(list((tmp_path / "models").glob("*.safetensors"))) == 2
    removed.update({path: before for path, before in zip(pooled_records, pooled_before, strict=True)})
    for path, before in removed.items():
        after = json.loads(path.read_text())
        assert {k: v for k, v in after.items() if k != "seconds"} == {
            k: v for k, v in before.items() if k != "seconds"
        }


def test_pooled_chains_are_table_2s_only(tmp_path):
    """Fig. 4 alone samples S3's one chain per model, not Table 2's pooled chains."""
    summary = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="fig4", datasets="bars-and-stripes")
    assert "fig4_acf.png" in summary["files"] and "table2_pooled" not in summary["results"]
    records = sorted(p.name for p in (tmp_path / "act").glob("*.json"))
    assert len(records) == 2 and not any("chains" in name for name in records)


def _csv(path) -> list[dict[str, str]]:
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


def test_the_ladders_average_each_cell_and_name_the_cut_ones():
    def record(dataset, algorithm, operator, rates=None, trips=0):
        task = {"dataset": dataset, "algorithm": algorithm, "lr": 0.01, "operator": operator}
        return {"task": task} if rates is None else {"task": task, "swap_rates": rates, "round_trips": trips}

    records = [
        record("mnist", "pt:3:2", "flip", [0.0, 0.2], 0),
        record("mnist", "pt:3:2", "gibbs", [0.0, 0.2], 0),
        record("mnist", "pt:3:2", "gibbs", [0.002, 0.4], 2),
        record("mnist", "cd:5", "gibbs"),  # no ladder: not a row
        record("bars-and-stripes", "pt:3:10", "gibbs", [0.5, 0.7], 10),
        record("bars-and-stripes", "pt:3:2", "gibbs", [0.5, 0.7], 20),
    ]
    text, table = ladder_section(records)
    rows = [values for _, values in table.rows]
    # data sets in S3's order, then temperatures, k, learning rate and G before T
    assert [(r["dataset"], r["algorithm"], r["operator"]) for r in rows] == [
        ("bars-and-stripes", "pt:3:2", "gibbs"),
        ("bars-and-stripes", "pt:3:10", "gibbs"),
        ("mnist", "pt:3:2", "gibbs"),
        ("mnist", "pt:3:2", "flip"),
    ]
    mnist_g = rows[2]
    assert mnist_g["runs"] == 2 and mnist_g["round_trips"] == 1.0
    assert [float(x) for x in mnist_g["swap_rates"].split()] == pytest.approx([0.001, 0.3])
    assert mnist_g["min_swap_rate"] == pytest.approx(0.001)
    assert "In 2 of 4 rows a pair swaps less than once in a hundred rounds" in text
    assert ladder_section([record("mnist", "cd:5", "gibbs")]) is None


def test_table2_counts_the_chains_whose_ar_time_misses_a_slow_tail():
    plan = make_plan("full")  # 10^6 steps, ACFs to lag 2,000
    slow = [1.0] + [0.05] * 2000  # a plateau: the ACF sums to 201
    fast = [1.0, 0.5, 0.25] + [0.0] * 1998  # sums to 2.5

    def chain(tau_ar: float, acf: list[float]) -> dict:
        return {"tau_ar": tau_ar, "tau_sokal": tau_ar, "reliable": True, "acf": acf}

    taus = {
        "bars-and-stripes": [
            {"gibbs": chain(30.0, slow), "flip": chain(2.5, fast)},  # G's AR time misses the plateau
            {"gibbs": chain(200.0, slow), "flip": chain(2.4, fast)},
        ]
    }
    text, table = table2_section(taus, plan)
    bas = next(values for _, values in table.rows if values["problem"] == "bars-and-stripes")
    assert bas["tau_gibbs_acf_sum"] == pytest.approx(201.0) and bas["tau_flip_acf_sum"] == pytest.approx(2.5)
    assert bas["chains_ar_misses_tail"] == 1 and bas["chains"] == 4
    assert "| 1 of 4 |" in text and "ACF to lag 2,000" in text
    assert bas["chains_acf_undecayed"] == 2  # the plateau is still 0.05 at lag 2,000 (sd 0.003)


def test_table2_judges_a_chains_length_by_the_larger_of_its_ar_and_sokal_times():
    """A chain of 10^6 steps whose AR time is 3,000 but whose Sokal time is 30,000 spans only 33
    Sokal times: not long enough. A Sokal time that went wrong (negative, as for T's alternating
    energies) leaves the AR time, and an infinite AR time never counts."""
    plan = make_plan("full")
    acf = [1.0, 0.5, 0.25] + [0.0] * 1998

    def chain(tau_ar: float, tau_sokal: float) -> dict:
        return {"tau_ar": tau_ar, "tau_sokal": tau_sokal, "reliable": True, "acf": acf}

    taus = {
        "bars-and-stripes": [
            {"gibbs": chain(3_000.0, 30_000.0), "flip": chain(2.0, -5.0)},
            {"gibbs": chain(float("inf"), 10.0), "flip": chain(19_000.0, 1.0)},
        ]
    }
    _, table = table2_section(taus, plan)
    bas = next(values for _, values in table.rows if values["problem"] == "bars-and-stripes")
    assert bas["chains_of_50_tau"] == 2 and bas["chains_acf_undecayed"] == 0


def test_pooled_table2_calls_each_rbm_by_two_sds_and_tests_across_rbms():
    """Per RBM: T faster (1,000 vs 700, sd 50 and 40: 4.7 sd), no call (500 vs 520, sd 100 each),
    G faster (300 vs 400, sd 10 each: 7.1 sd), and no call where a Sokal time is not positive, an
    RBM then left out of the means and the test. Across the other three RBMs, the signed-rank test
    of the paired times; chains of 4 x 10^6 steps are long enough for tau up to 80,000 (by the
    larger of the AR and Sokal times). Where the test is significant, the operator it favours."""
    from scipy.stats import wilcoxon

    plan = make_plan("full")

    def rec(tau: float, sd: float, tau_ar: float = 10.0, undecayed: bool = False) -> dict:
        return {"tau_sokal": tau, "tau_sokal_sd": sd, "tau_ar": tau_ar, "undecayed_at_window": undecayed}

    rows = [
        {"gibbs": rec(1_000.0, 50.0), "flip": rec(700.0, 40.0)},
        {"gibbs": rec(500.0, 100.0, undecayed=True), "flip": rec(520.0, 100.0)},
        {"gibbs": rec(300.0, 10.0), "flip": rec(400.0, 10.0, tau_ar=90_000.0)},
        {"gibbs": rec(90_000.0, 10.0), "flip": rec(-3.0, 1.0)},
    ]
    text, table = pooled_section({"mnist": rows, "mnist500": []}, ["mnist", "bars-and-stripes"], plan)
    row, missing = (values for _, values in table.rows)
    assert (row["rbms_flip_faster"], row["rbms_gibbs_faster"], row["rbms_undecided"]) == (1, 1, 2)
    taus_g, taus_t = [1_000.0, 500.0, 300.0], [700.0, 520.0, 400.0]  # the fourth RBM's T time went wrong
    assert row["p_value"] == pytest.approx(wilcoxon(taus_t, taus_g).pvalue) and row["faster_by_test"] is None
    assert row["rbms_tau_invalid"] == 1 and "| 4 (1 with τ ≤ 0 left out) |" in text
    assert row["records_of_50_tau"] == 6 and row["records"] == 8 and row["records_sokal_undecayed"] == 1
    assert row["tau_gibbs"] == pytest.approx(sum(taus_g) / 3) and row["n_chains"] == 8
    assert missing["problem"] == "bars-and-stripes" and missing["rbms"] == 0
    assert "| 8 × 4,000,000 |" in text and "| 6 of 8 | 1 of 8 |" in text
    faster = [{"gibbs": rec(100.0 * k, 1.0), "flip": rec(50.0 * k, 1.0)} for k in range(1, 9)]
    _, table = pooled_section({"mnist": faster}, ["mnist"], plan)
    row = table.rows[0][1]
    assert row["p_value"] < 0.05 and row["faster_by_test"] == "flip" and row["rbms_flip_faster"] == 8
    # where Sokal's window had not decayed, the time summed to decay is the one compared (and judged)
    slow = {**rec(100.0, 1.0, undecayed=True), "tau_decayed": 90_000.0, "tau_decayed_sd": 100.0}
    _, table = pooled_section({"mnist": [{"gibbs": slow, "flip": rec(200.0, 1.0)}]}, ["mnist"], plan)
    row = table.rows[0][1]
    assert row["rbms_flip_faster"] == 1 and row["tau_gibbs"] == 90_000.0 and row["tau_gibbs_sokal"] == 100.0
    assert row["records_of_50_tau"] == 1 and row["records_sokal_undecayed"] == 1


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


def test_a_restricted_plan_runs_one_data_set_and_finds_its_records_again(tmp_path):
    from boltzkit.experiments.bfi2013 import AM01, BAS, DATASETS, parse_datasets, restrict_plan

    only_bas = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table5,table6", datasets=BAS)
    report = (tmp_path / "bfi2013.md").read_text()
    assert "Data sets run: Bars and Stripes" in report
    assert "### Artificial Modes, p_mut = 0.01 (not run)" in report
    assert "### Bars and Stripes (not run)" not in report
    tasks = sorted(p.name for p in (tmp_path / "tasks").glob("*.json"))
    assert len(tasks) == only_bas["tasks_run"] == 4  # PCD_1 at one rate, 2 operators x 2 repetitions
    assert all(name.startswith("bars-and-stripes") for name in tasks)
    curves = "bfi2013-table5-bars-and-stripes-curves.png"  # the learning curves behind the cells
    assert curves in only_bas["files"] and f"]({curves})" in report and (tmp_path / curves).is_file()
    # the figure's cells: one per algorithm and rate of the plan, a row that has not run as empty panels
    from dataclasses import replace

    from boltzkit.experiments.bfi2013.report import cell_curves

    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "tasks").glob("*.json"))]
    smoke = make_plan("smoke")
    with_pcd5 = (*smoke.algorithms["table5", BAS], "pcd:5")  # a row with no runs
    wider = replace(smoke, algorithms={**smoke.algorithms, ("table5", BAS): with_pcd5})
    drawn = cell_curves("table5", wider, records)
    assert list(drawn) == [BAS]  # data sets without runs have no figure
    assert [(c["algorithm"], "updates" in c) for c in drawn[BAS]] == [("PCD_1", True), ("PCD_5", False)]

    # a look with another plan's options finds none of its tasks, and says so (review of 2026-12-04)
    _copy_tasks(tmp_path, tmp_path / "look")
    with pytest.warns(BoltzkitWarning, match="none of the .* tasks of this plan .quick. has a record"):
        run_bfi2013(out_dir=tmp_path / "look", plan=make_plan("quick"), only="table1", finished_only=True)
    # the finished cells alone, without training, into their own report (bfi2013.md stays)
    seen = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), finished_only=True)
    assert seen["report"] == "bfi2013-finished.md" and (tmp_path / "bfi2013.md").read_text() == report
    finished = (tmp_path / "bfi2013-finished.md").read_text()
    assert seen["tasks_run"] == 0 and seen["tasks_skipped"] == 4
    # the smoke plan's likelihood tables: Table 1 (8 tasks), Table 5 (4) and Table 6 (8)
    assert "> Finished tasks only: 4 of the 20 tasks of these tables have records;" in finished
    assert "### Artificial Modes, p_mut = 0.01 (not run)" in finished
    assert re.search(r"T has the higher median in [01] of 1 complete cells run here\.", finished)
    # the same cells as CSV: every S3 row of these tables, ours where run (Table 5's PCD_1 on BAS)
    import csv

    with open(tmp_path / "bfi2013-finished.csv") as f:
        rows = list(csv.DictReader(f))
    assert "bfi2013-finished.csv" in seen["files"]
    assert {r["table"] for r in rows} == {"table1", "table5", "table6"}
    ours = [r for r in rows if r["pairs"]]
    assert [(r["table"], r["dataset"], r["pairs"]) for r in ours] == [("table5", BAS, "2")]
    cell = seen["results"]["table5"][0]
    assert float(ours[0]["median_gibbs"]) == cell["median_a"] and float(ours[0]["paper_gibbs"]) < 0

    # one repetition of one operator missing: one pair left, medians over it, the cell not counted
    (tmp_path / "tasks" / next(t for t in tasks if "_flip_r1_" in t)).unlink()
    run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table5", finished_only=True)
    finished = (tmp_path / "bfi2013-finished.md").read_text()
    assert "| 1 |" in finished and "in 0 of 0 complete cells run here (1 incomplete" in finished
    flip_r0 = tmp_path / "tasks" / next(t for t in tasks if "_flip_r0_" in t)
    kept = flip_r0.read_bytes()
    flip_r0.unlink()  # no pair at all: still an incomplete cell
    run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table5", finished_only=True)
    finished = (tmp_path / "bfi2013-finished.md").read_text()
    assert "| 0 |" in finished and "in 0 of 0 complete cells run here (1 incomplete" in finished
    flip_r0.write_bytes(kept)
    for part in ("table3", "fig3"):
        with pytest.raises(BoltzkitError, match="needs a data set the run leaves out"):
            run_bfi2013(
                out_dir=tmp_path, plan=make_plan("smoke"), only=part, datasets=AM01 if part == "fig3" else BAS
            )

    # the full plan finds the Bars-and-Stripes records: it trains the missing one and Table 6's cells
    everything = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table5,table6")
    assert everything["tasks_skipped"] == 3 and everything["tasks_run"] == 1 + 8
    assert "### Artificial Modes, p_mut = 0.01 (not run)" not in (tmp_path / "bfi2013.md").read_text()

    plan = restrict_plan(make_plan("full"), "artificial-modes:0.01, bars-and-stripes")
    assert plan.datasets == (BAS, AM01) and {d for _, d in plan.algorithms} == {BAS, AM01}
    assert parse_datasets(list(DATASETS)) == DATASETS
    with pytest.raises(BoltzkitError, match="artificial-modes:0.1 or artificial-modes:0.01"):
        parse_datasets("artificial-modes")


def test_the_cli_options_of_a_restricted_look(tmp_path):
    from typer.testing import CliRunner

    from boltzkit.cli.main import app

    runner = CliRunner()
    # an option the experiment does not take is refused before anything runs, never ignored
    refused = {
        "learning-recipes": (
            ["--datasets", "mnist"],
            ["--finished-only"],
            ["--only", "x"],
            ["--chains", "50"],
        ),
        "bruegge-fischer-igel-2013": (
            ["--chains", "50"],
            ["--betas", "1000"],
            ["--epochs", "3"],
            ["--no-zoo"],
        ),
        "ais-operators": (["--betas", "1000"], ["--epochs", "3"], ["--workers", "2"], ["--no-progress"]),
        "salakhutdinov-murray-2008-table2": (["--betas", "1000"], ["--only", "x"]),
    }
    for name, options in refused.items():
        for option in options:
            result = runner.invoke(app, ["reproduce", name, "--quick", *option, "--out", str(tmp_path)])
            assert result.exit_code != 0 and f"{option[0]} does not apply to {name}" in result.output
            assert "takes:" in result.output  # and the options it does take
    learning = ["reproduce", "learning-recipes", "--quick", "--out", str(tmp_path)]
    assert "--device does not apply" in runner.invoke(app, [*learning, "--device", "cpu"]).output
    # executor options that contradict each other are refused too (each would be ignored)
    for option, message in (
        (["--address", "auto"], "--address names a Ray cluster"),
        (["--executor", "ray", "--workers", "2"], "counts local processes"),
        (["--executor", "inline", "--workers", "2"], "counts local processes"),
    ):
        result = runner.invoke(app, [*learning, *option])
        assert result.exit_code != 0 and message in result.output
    assert not any(tmp_path.iterdir())
    from boltzkit.experiments.registry import experiment_options, run_experiment

    assert {"only", "datasets", "executor", "workers"} <= set(experiment_options("bruegge-fischer-igel-2013"))
    assert "n_chains" not in experiment_options("bruegge-fischer-igel-2013")
    assert {"n_chains", "betas", "epochs", "use_zoo"} <= set(
        experiment_options("salakhutdinov-murray-2008-table1")
    )
    with pytest.raises(BoltzkitError, match="learning-recipes does not take n_chains"):
        run_experiment("learning-recipes", out_dir=tmp_path, quick=True, n_chains=10)
    with pytest.raises(BoltzkitError, match="unknown experiment"):
        run_experiment("no-such-table", out_dir=tmp_path)
    args = ["reproduce", "bruegge-fischer-igel-2013", "--finished-only", "--datasets", "bars-and-stripes"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Finished tasks only: 0 of the " in (tmp_path / "bfi2013-finished.md").read_text()


def test_the_likelihood_tasks_fill_every_cell_pair_by_pair():
    """A sweep stopped partway leaves every cell with the same number of pairs, give or take one."""
    from boltzkit.experiments.bfi2013 import likelihood_tasks

    full = make_plan("full")
    tasks = likelihood_tasks(full, ("table1", "table5", "table6"), 0, True)
    cells = {t.cell[:3] for t in tasks}
    assert len(tasks) == 2 * full.reps * len(cells)
    for stop in (1, 2 * len(cells) - 1, 2 * len(cells) + 3, len(tasks) // 2):
        done = tasks[:stop]
        pairs = {c: sum(t.cell[:3] == c and t.operator == "flip" for t in done) for c in cells}
        assert max(pairs.values()) - min(pairs.values()) <= 1
    for gibbs, flip in zip(tasks[0::2], tasks[1::2], strict=True):  # G and T of a repetition side by side
        assert (gibbs.cell[:3], gibbs.repetition) == (flip.cell[:3], flip.repetition)
        assert (gibbs.operator, flip.operator) == ("gibbs", "flip")


def test_a_plan_restricted_to_one_cell_keeps_the_task_identities(tmp_path):
    from boltzkit.experiments.bfi2013 import AM01, BAS, likelihood_tasks, restrict_plan

    full = make_plan("full")
    cell = restrict_plan(full, AM01, algorithms="pt:10:10", lrs="0.01")
    assert cell.algorithms == {("table6", AM01): ("pt:10:10",)} and cell.lrs == {("table6", AM01): (0.01,)}
    assert "algorithms pt:10:10; learning rates 0.01" in cell.notes[-1]
    assert cell.cells_only and not restrict_plan(full, AM01).cells_only  # the report's name follows
    ids = {t.task_id for t in likelihood_tasks(cell, ("table6",), 0, False)}
    planned = {t.task_id for t in likelihood_tasks(full, ("table6",), 0, False)}
    assert len(ids) == 2 * full.reps and ids < planned  # 25 pairs of G and T, found again by the full plan
    assert all(i.startswith("artificial-modes-0.01_pt-10-10_lr0.01_") for i in ids)
    # an algorithm alone keeps its data sets and rates; Tables 2-4 keep their models
    pt = restrict_plan(full, algorithms=["PT:10:10"])
    assert set(pt.algorithms) == {("table6", AM01), ("table6", "artificial-modes:0.1")}
    assert pt.datasets == full.datasets and pt.act_models == full.act_models
    with pytest.raises(BoltzkitError, match="unknown algorithm") as err:
        restrict_plan(full, algorithms="pt:10:3")
    assert "pt:10:10" in str(err.value)
    for bad in ("0.2", "fast"):
        with pytest.raises(BoltzkitError, match="unknown learning rate"):
            restrict_plan(full, lrs=bad)
    with pytest.raises(BoltzkitError, match="no likelihood cell of these data sets"):
        restrict_plan(full, BAS, algorithms="pt:10:10")  # Table 6's algorithm, not Bars and Stripes'

    # one cell of the smoke plan runs on its own; the other cells of its table are "not run", and
    # its report goes to bfi2013-cells.md, leaving the folder's whole report as it was
    (tmp_path / "bfi2013.md").write_text("the whole run's report")
    out = run_bfi2013(out_dir=tmp_path, plan=make_plan("smoke"), only="table1", algorithms="cd:5")
    report = (tmp_path / "bfi2013-cells.md").read_text()
    assert out["report"] == "bfi2013-cells.md"
    assert (tmp_path / "bfi2013.md").read_text() == "the whole run's report"
    assert out["tasks_run"] == 4 and "algorithms cd:5; learning rates all" in report
    assert all(p.name.startswith("bars-and-stripes_cd-5_") for p in (tmp_path / "tasks").glob("*.json"))
    assert "| CD_5 | 0.05 | -" in report and "| 5-PT_1 | 0.05 | not run | not run |" in report

    from typer.testing import CliRunner

    from boltzkit.cli.main import app

    args = ["reproduce", "bruegge-fischer-igel-2013", "--finished-only", "--only", "table1"]
    result = CliRunner().invoke(
        app, [*args, "--algorithms", "cd:5", "--learning-rates", "0.05", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    finished = (
        tmp_path / "bfi2013-finished.md"
    ).read_text()  # the full plan: the smoke records are not its tasks
    assert "algorithms cd:5; learning rates 0.05" in finished and "Finished tasks only: 0 of the " in finished
    result = CliRunner().invoke(app, [*args, "--algorithms", "gibbs", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "unknown algorithm" in result.output


def test_a_reproduction_refuses_an_out_file_and_makes_no_folder_for_bad_settings(tmp_path) -> None:
    """A review's findings (2026-12-04): an --out that is a file gave 'error: File exists', and an
    unknown --only was refused after the --out folder had been made."""
    from test_cli import assert_clean_failure, run

    (tmp_path / "afile").write_text("")
    message = assert_clean_failure(
        run("reproduce", "bruegge-fischer-igel-2013", "--quick", "--out", tmp_path / "afile")
    )
    assert "--out names a file" in message
    message = assert_clean_failure(
        run(
            "reproduce", "bruegge-fischer-igel-2013", "--quick", "--only", "table9", "--out", tmp_path / "new"
        )
    )
    assert "unknown part" in message and not (tmp_path / "new").exists()


def _copy_tasks(source, target) -> None:  # noqa: ANN001
    """Copy ``source/tasks`` to ``target/tasks`` (a folder of another plan's records to look at)."""
    import shutil

    shutil.copytree(source / "tasks", target / "tasks")
