"""The experiment engine: stages (reuse, refusal of other settings, damaged files), tasks on an
executor, the report's verdict marks, and a small reproduction end to end with resume after a kill."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from boltzkit.data import mnist_available
from boltzkit.errors import BoltzkitError, terminate_as_interrupt
from boltzkit.estimators.result import LogZResult
from boltzkit.experiments import engine
from boltzkit.experiments.report import UNRELIABLE, Table, Verdicts, band, cell, log_z_cells


def test_a_stage_is_computed_once_and_refuses_other_settings(tmp_path: Path) -> None:
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"value": 3.5}

    path = tmp_path / "results" / "x.json"
    first = engine.stage(path, {"n": 1, "t": (1, 2)}, compute)
    again = engine.stage(path, {"n": 1, "t": [1, 2]}, compute)  # tuples read back as lists
    assert first == again and len(calls) == 1 and first["config"] == {"n": 1, "t": [1, 2]}
    assert "seconds" in first
    with pytest.raises(BoltzkitError, match="other settings"):
        engine.stage(path, {"n": 2, "t": [1, 2]}, compute)
    path.write_text('{"config": {"n": 1')  # a file cut short by a kill is computed again
    assert engine.stage(path, {"n": 1, "t": [1, 2]}, compute)["value"] == 3.5 and len(calls) == 2


def test_a_stage_whose_config_held_the_whole_recipe_stays_valid_under_the_same_settings(
    tmp_path: Path,
) -> None:
    """A review's finding: configs once held ``recipe.to_dict()`` (summary and sources too), and a
    change of what they hold refused every folder made before it. Stored recipes are compared by
    their settings, at any depth (later stages copy a model's config into theirs)."""
    from boltzkit.learning.recipes import RECIPES

    recipe = RECIPES["sm2008-cd1"].replace(epochs=3)
    old_form = {k: v for k, v in recipe.to_dict().items() if k != "meant_for"}  # as written before
    path = tmp_path / "results" / "ais.json"
    path.parent.mkdir(parents=True)
    stored = {"model": {"recipe": old_form, "seed": 0}, "runs": 100}
    path.write_text(json.dumps({"config": stored, "value": 1.0}))
    config = {"model": {"recipe": engine.recipe_config(recipe), "seed": 0}, "runs": 100}
    assert engine.stage(path, config, lambda: {"value": 2.0})["value"] == 1.0  # taken, not recomputed
    other = {"model": {"recipe": engine.recipe_config(recipe.replace(lr=0.01)), "seed": 0}, "runs": 100}
    with pytest.raises(BoltzkitError, match="other settings"):
        engine.stage(path, other, lambda: {"value": 2.0})
    # rewording a recipe's summary or sources changes nothing a stage compares
    assert engine.recipe_config(recipe) == engine.recipe_config(
        dataclasses.replace(recipe, summary="reworded", sources={})
    )


@dataclass(frozen=True)
class Square:
    x: int

    @property
    def key(self) -> str:
        return f"square-{self.x}"

    def identity(self) -> dict:
        return {"x": self.x}


def square(task: Square, offset: int) -> dict:
    return {"y": task.x**2 + offset}


def test_tasks_run_once_and_resume(tmp_path: Path) -> None:
    tasks = [Square(i) for i in range(4)]
    run = engine.run_tasks(tasks[:2], square, tmp_path, args=(1,), progress=False)
    assert run.ran == 2 and [r["y"] for r in run.records] == [1, 2]
    run = engine.run_tasks(tasks, square, tmp_path, args=(1,), progress=False)
    assert (run.ran, run.skipped) == (2, 2) and [r["y"] for r in run.records] == [1, 2, 5, 10]
    assert json.loads((tmp_path / "square-3.json").read_text())["config"] == {"x": 3}
    with pytest.raises(BoltzkitError, match="twice"):
        engine.run_tasks([Square(1), Square(1)], square, tmp_path, args=(0,), progress=False)


def square_and_finish_the_last_elsewhere(task: Square, folder: Path, last: Square) -> dict:
    """``square``, and meanwhile another run (a second process on the folder) finishes ``last``."""
    if task.x == 0:
        engine.save_stage(folder / f"{last.key}.json", last.identity(), {"y": -1})
    return {"y": task.x**2}


def square_but_not_one(task: Square) -> dict:
    if task.x == 1:
        raise RuntimeError("task 1 fails")
    return {"y": task.x**2}


def test_a_failing_task_of_the_process_executor_leaves_the_others_saved(tmp_path: Path) -> None:
    """A review's finding (2026-12-04): the first task to fail left the pool, which still ran
    every task already given to it, and their records were never written (hours of a grid lost)."""
    tasks = [Square(i) for i in range(6)]
    with pytest.raises(RuntimeError, match="task 1 fails") as info:
        engine.run_tasks(tasks, square_but_not_one, tmp_path, executor="processes", workers=2, progress=False)
    assert "1 of 6 tasks failed; the records of the others are saved" in "".join(info.value.__notes__)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"square-{i}.json" for i in (0, 2, 3, 4, 5)]
    run = engine.run_tasks(tasks[2:], square_but_not_one, tmp_path, progress=False)
    assert (run.ran, run.skipped) == (0, 4)  # resumed from the saved records


def sleep_long(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def test_an_interrupted_process_run_ends_its_workers() -> None:
    """SIGTERM (a session's time limit) left a --workers run's processes behind (review of
    2026-12-04); an interrupt now ends them instead of waiting for their tasks."""
    import multiprocessing
    import signal
    import time
    from concurrent.futures import ProcessPoolExecutor

    with terminate_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # SIGTERM raises KeyboardInterrupt
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(sleep_long, 60.0) for _ in range(3)]
    processes = list(pool._processes.values())
    engine._stop_workers(pool)
    # The pool's own thread reaps the workers and fails their futures too, and a process reaped by
    # one thread reads as alive to another for a moment: wait for both, rather than racing them.
    deadline = time.monotonic() + 30
    for process in processes:
        while process.is_alive() and time.monotonic() < deadline:
            process.join(timeout=0.1)
        assert not process.is_alive()
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)  # (concurrent.futures.wait takes a cancelled future for one still pending)
    assert all(f.done() for f in futures)  # finished (with the workers' end) or cancelled, none running


def test_a_task_another_run_finished_meanwhile_is_taken_from_its_record(tmp_path: Path) -> None:
    tasks = [Square(i) for i in range(3)]
    run = engine.run_tasks(
        tasks, square_and_finish_the_last_elsewhere, tmp_path, args=(tmp_path, tasks[-1]), progress=False
    )
    assert (run.ran, run.skipped) == (2, 1)
    assert [r["y"] for r in run.records] == [0, 1, -1]  # the other run's record, not computed again


def test_unreliable_estimates_are_marked_and_their_bands_withheld() -> None:
    verdicts = Verdicts()
    good = {"reliable": True}
    bad = {"reliable": False, "reason": "ESS 1.4 of 100", "advice": "use a longer schedule"}
    assert verdicts.mark("model A", good) == "" and verdicts.mark("model B", None) == ""
    mark = verdicts.mark("model B", bad)
    assert mark == f" {UNRELIABLE}1" and verdicts.mark("model B", bad) == mark  # one footnote per reason
    text = "\n".join(verdicts.lines())
    assert "ESS 1.4 of 100" in text and "longer schedule" in text
    assert band(1.0, 2.0, bad) == "unsupported" and band(1.0, 2.0, good) == "1.00, 2.00"


def _ais(log_z: float, reliable: bool) -> dict:
    return {
        "log_z": log_z, "log_z_minus_sigma": log_z - 0.1, "log_z_plus_sigma": log_z + 0.1,
        "log_z_minus_3sigma": log_z - 0.3, "log_z_plus_3sigma": log_z + 0.3, "log_z_stderr": 0.01,
        "n_chains": 100, "seconds": 1.0, "reliable": reliable,
        "reliability_reason": None if reliable else "Pareto k-hat 0.9 > 0.7", "advice": "more steps",
    }  # fmt: skip


def test_a_table_writes_the_same_rows_as_markdown_and_csv() -> None:
    table = Table(("model", "ln Z"), ("model", "log_z", "paper_log_z"))
    table.add(["RBM", cell("1.00", "2.00")], model="RBM", log_z=1.0, paper_log_z=2.0)
    table.add(["BM", cell("3.00", "—")], model="BM", log_z=3.0)
    assert table.markdown() == ["| model | ln Z |", "|---|---|", "| RBM | 1.00 / 2.00 |", "| BM | 3.00 / — |"]
    assert table.csv(mode="quick") == "mode,model,log_z,paper_log_z\nquick,RBM,1.0,2.0\nquick,BM,3.0,\n"
    with pytest.raises(ValueError, match="2 columns"):
        table.add(["one cell"], model="x")
    with pytest.raises(ValueError, match="no column"):
        table.add(["x", "y"], log_Z=1.0)


def test_log_z_cells_withhold_the_bands_of_an_unreliable_estimate() -> None:
    verdicts = Verdicts()
    paper = (10.0, (9.9, 10.1), (9.7, 10.3))
    good = log_z_cells(_ais(5.0, True), paper, verdicts, "A")
    assert good == ["5.00 / 10.00", "4.90, 5.10 / 9.90, 10.10", "4.70, 5.30 / 9.70, 10.30"]
    bad = log_z_cells(_ais(5.0, False), None, verdicts, "B")
    assert bad == [f"5.00 {UNRELIABLE}1 / —", "unsupported / —", "unsupported / —"]
    assert "B: Pareto k-hat 0.9 > 0.7 (advice: more steps)" in "\n".join(verdicts.lines())


@pytest.mark.parametrize("module", ["s2008_table1", "s2008_table2"])
def test_s2_tables_mark_an_unreliable_ais_estimate_and_print_no_band_for_it(module: str) -> None:
    """S2's Tables 1 and 2: the 10-run row of a small AIS run is often unreliable; its bands, and
    those of the log-probabilities that subtract it, are not printed."""
    import importlib

    mod = importlib.import_module(f"boltzkit.experiments.{module}")
    rec = {"model": "RBM", "exact": {"log_z": 5.05}, "bethe_log_z": 4.0, "trw_log_z": 6.0, "bound": "exact"}
    rec["ais"], rec["ais_10"] = _ais(5.0, True), _ais(5.2, False)
    lp = {"mean_log_prob": -90.0, "mean_log_prob_minus_3sigma": -90.3, "mean_log_prob_plus_3sigma": -89.7}
    rec["test"], rec["train"] = {**lp, "data_stderr": 0.2}, lp
    verdicts = Verdicts()
    if module == "s2008_table1":
        table = mod._table([rec], 100, verdicts)
    else:
        rec["ais"] = _ais(5.0, False)
        table = mod._table([rec], verdicts)
    md = "\n".join(table.markdown())
    assert "unsupported" in md and UNRELIABLE in md and "Pareto k-hat" in "\n".join(verdicts.lines())
    rows = [dict(zip(table.csv_columns, r, strict=True)) for r in table.csv_rows()]
    # the CSV carries each row's verdict: table 1's first row is the 10-run estimate
    expected = [(5.2, False), (5.0, True)] if module == "s2008_table1" else [(5.0, False)]
    assert [(r["log_z"], r["reliable"]) for r in rows] == expected
    for r in rows:  # the CSV prints no band the estimate cannot support either
        assert (r["log_z_minus_3sigma"] is None) == (r["reliable"] is False)
    if module == "s2008_table2":
        assert "-90.00 ‡1" in md  # the test log-probability subtracts the unreliable ln Ẑ


def test_the_first_runs_of_an_estimate_keep_what_the_whole_run_failed() -> None:
    """A 10-run row was judged on its own 10 weights alone (a review of 2026-12-07): a schedule
    check the whole run failed, or a heavy tail all its weights show, now fail it too."""
    from boltzkit.experiments.engine import first_runs

    g = torch.Generator().manual_seed(0)
    calm = torch.randn(100, generator=g, dtype=torch.float64) * 0.1
    failed = {"name": "schedule halved", "passed": False, "reason": "moved by 2 nats", "advice": "more betas"}
    run = LogZResult.from_log_weights("ais", calm, log_z_start=1.0, n_steps=100, checks=[failed])
    ten = first_runs(run, 10)
    assert ten.n_chains == 10 and not ten.reliability().reliable
    assert "(all 100 runs) moved by 2 nats" in ten.reliability().reason
    assert (
        first_runs(LogZResult.from_log_weights("ais", calm, log_z_start=1.0, n_steps=100), 10)
        .reliability()
        .reliable
    )
    heavy = calm.clone()
    heavy[50] = 30.0  # one weight past every other among all the runs, none among the first ten
    whole = LogZResult.from_log_weights("ais", heavy, log_z_start=1.0, n_steps=100)
    assert not whole.reliability().reliable
    first = first_runs(whole, 10).reliability()
    assert not first.reliable and first.reason.startswith("(all 100 runs)")
    equal = torch.zeros(100, dtype=torch.float64)  # a trivial path: equal weights are the right answer
    trivial = LogZResult.from_log_weights("ais", equal, log_z_start=1.0, n_steps=100, trivial_path=True)
    assert trivial.reliability().reliable and first_runs(trivial, 10).reliability().reliable


@pytest.mark.parametrize(("module", "model"), [("s2008_table1", "RBM"), ("sm2008_table1", "CD1(25)")])
def test_the_papers_ais_columns_stand_only_beside_a_row_of_their_100_runs(module: str, model: str) -> None:
    """With ``--chains 10`` the 10-run row carried S1's and S2's 100-run AIS values (a review of
    2026-12-07); they stand beside a row of 100 runs only, and the true ln Z beside every row."""
    import importlib

    mod = importlib.import_module(f"boltzkit.experiments.{module}")
    lp = {"mean_log_prob": -90.0, "mean_log_prob_minus_3sigma": -90.3, "mean_log_prob_plus_3sigma": -89.7}
    split = {"test": lp, "train": lp}
    for n_chains, shown in ((10, False), (100, True)):
        rec = {"model": model, "exact": {"log_z": 5.05}, "ais": {**_ais(5.0, True), "n_chains": n_chains},
               "bethe_log_z": 4.0, "trw_log_z": 6.0, "estimate": split, "true": split}  # fmt: skip
        rows = mod._table([rec], n_chains, Verdicts()).csv_rows()
        values = [dict(zip(mod.CSV_COLUMNS, r, strict=True)) for r in rows]
        values = [v for v in values if v["runs"] == n_chains]  # (a 100-run report has a 10-run row too)
        assert len(values) == 1
        assert (values[0]["paper_log_z"] is not None) == shown, n_chains
        assert values[0]["paper_true_log_z"] == mod.PAPER[model].true_log_z


@pytest.mark.mnist
@pytest.mark.skipif(not mnist_available(), reason="needs the binarized MNIST files (BOLTZKIT_DATA_DIR)")
def test_a_small_reproduction_end_to_end_resumes_after_a_kill(tmp_path: Path, monkeypatch) -> None:
    from boltzkit.experiments import sm2008_table1 as t1

    models = (
        t1.ModelSpec("CD1(25)", 4, "sm2008-cd1", "sm2008-not-in-the-zoo"),
        t1.ModelSpec("CD1(20)", 3, "sm2008-cd1", "sm2008-not-in-the-zoo"),
        # a model beyond the paper's, shown beside one of its rows
        t1.ModelSpec("CD1(20) sampled", 3, "sm2008-cd1", "sm2008-not-in-the-zoo", paper_row="CD1(20)"),
    )
    kw = {"out_dir": tmp_path, "quick": True, "device": "cpu", "n_chains": 20, "betas": 101, "epochs": 1,
          "progress": False, "models": models, "ratio_betas": 1001}  # fmt: skip
    real = t1.log_prob_stage
    seen = []

    def killed_at_the_second_model(ctx, name, *args, **kwargs):
        seen.append(name)
        if name == "cd1_20":
            raise KeyboardInterrupt  # the run is killed half-way
        return real(ctx, name, *args, **kwargs)

    monkeypatch.setattr(t1, "log_prob_stage", killed_at_the_second_model)
    with pytest.raises(KeyboardInterrupt):
        t1.run_table1(**kw)
    done = {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*.json")}
    assert "cd1_25-ais.json" in done and "cd1_20-ais.json" in done and not (tmp_path / "table1.md").exists()
    monkeypatch.setattr(t1, "log_prob_stage", real)
    summary = t1.run_table1(**kw)
    for name, mtime in done.items():  # every finished stage was reused, not redone
        assert next(tmp_path.rglob(name)).stat().st_mtime_ns == mtime, name
    md = (tmp_path / "table1.md").read_text()
    assert "-151.57" in md and "Ratio of partition functions" in md
    beside = [line for line in md.splitlines() if line.startswith("| 20 | CD1(20) sampled |")]
    assert len(beside) == 1 and "/ -164.52" in beside[0]  # S1's CD1(20) test log p stands beside it
    for rec in summary["models"]:
        exact, ais = rec["exact"]["log_z"], rec["ais"]
        assert (
            ais["log_z_minus_3sigma"] - 1e-9 <= exact <= ais["log_z_plus_3sigma"] + 1e-9
            or not ais["reliable"]
        )
        assert rec["true"]["test"]["bound"] == "exact"
    ratio = summary["ratio"]
    assert ratio["log_ratio_minus_3sigma"] <= ratio["true_log_ratio"] <= ratio["log_ratio_plus_3sigma"]
    rerun = t1.run_table1(**kw)  # a finished run only rewrites its report
    assert [r["ais"] for r in rerun["models"]] == [r["ais"] for r in summary["models"]]


def test_a_stored_estimate_comes_back_with_its_band_and_verdict() -> None:
    """record_log_z rebuilds what ais_record stored: a sandwich whole (its band spans both ends, its
    verdict holds the gap check), and a plain AIS with the checks its weights cannot show."""
    import torch
    from conftest import random_rbm

    from boltzkit.estimators import estimate_log_z
    from boltzkit.estimators.result import LogZResult

    model = random_rbm(12, 6, 3, scale=1.0)
    data = (torch.rand(200, 12, generator=torch.Generator().manual_seed(0)) < 0.5).double()
    for method in ("sandwich", "ais"):
        result = estimate_log_z(model, method, base_rate_data=data, n_chains=30, betas=200, seed=1)
        back = engine.record_log_z(json.loads(json.dumps(engine.ais_record(result))))
        assert back.log_z == pytest.approx(result.log_z, abs=1e-9)
        assert back.band.plus_3sigma == pytest.approx(result.band.plus_3sigma, abs=1e-9)
        assert back.reliability().reliable == result.reliability().reliable
        if method == "sandwich":  # the upper end is the reverse run's, not the forward run's
            assert abs(back.band.plus_3sigma - result.forward.band.plus_3sigma) > 1e-6
            assert back.settings["log_z_upper"] == pytest.approx(result.settings["log_z_upper"])
    failed = {"name": "halving", "passed": False, "reason": "the estimate moved", "advice": "more betas"}
    spread = 0.01 * torch.randn(50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    plain = LogZResult.from_log_weights("ais", spread, log_z_start=1.0, n_steps=9)
    assert plain.reliability().reliable
    rec = engine.ais_record(plain)
    rec["ais_settings"] = {"checks": [failed], "trivial_path": False}
    verdict = engine.record_log_z(rec).reliability()
    assert not verdict.reliable and "the estimate moved" in verdict.reason


def test_a_record_written_before_n_steps_was_named_so_reads_its_steps() -> None:
    """``n_steps`` was called ``n_betas`` (though it held the steps: 299 for 300 betas); an output
    folder of that time still resumes, with its steps."""
    import torch

    from boltzkit.estimators.result import LogZResult, stored_steps

    weights = 0.01 * torch.arange(20, dtype=torch.float64)
    rec = engine.ais_record(LogZResult.from_log_weights("ais", weights, log_z_start=1.0, n_steps=299))
    assert rec["ais"]["n_steps"] == 299 and "n_betas" not in rec["ais"]
    rec["ais"]["n_betas"] = rec["ais"].pop("n_steps")
    assert engine.record_log_z(json.loads(json.dumps(rec))).n_steps == 299
    assert stored_steps({"n_steps": 7}) == 7 and stored_steps({"n_betas": 7}) == 7 and stored_steps({}) == 0


def test_schedules_of_one_length_are_different_stages_and_samples_keep_their_seed(tmp_path: Path) -> None:
    """A stage names a tensor schedule by its values, so a schedule of the same length is not taken
    for another's record; a samples stage records the seed that drew it and draws the same again."""
    import numpy as np
    import torch

    linear, bent = torch.linspace(0, 1, 11, dtype=torch.float64), torch.linspace(0, 1, 11).double() ** 2
    assert engine.betas_key(linear) != engine.betas_key(bent)
    assert engine.betas_key(linear) == engine.betas_key(linear.clone())
    assert engine.betas_key("paper") == "paper"
    assert engine.betas_key(linear).startswith("10 steps, sha256 ")

    ctx = engine.Context(out_dir=tmp_path, seed=3)

    def draw(g: torch.Generator) -> torch.Tensor:
        return (torch.rand(4, 5, generator=g) < 0.5).double()

    x, record = engine.samples_stage(ctx, "m", draw, {"model": "m"})
    assert x.shape == (4, 5) and x.dtype == np.uint8
    assert record["config"]["seed"] == ctx.seed_for("samples", "m")
    again, _ = engine.samples_stage(ctx, "m", lambda g: pytest.fail("recomputed"), {"model": "m"})
    assert (again == x).all()
    elsewhere = engine.Context(out_dir=tmp_path / "b", seed=3)
    y, record = engine.samples_stage(elsewhere, "m", draw, {"model": "m"}, seed=record["config"]["seed"])
    assert (y == x).all() and record["seconds"] >= 0
    with pytest.raises(BoltzkitError, match="other settings"):
        engine.samples_stage(ctx, "m", draw, {"model": "m"}, seed=4)


def test_a_context_path_has_its_folder_so_any_stage_may_write_first(tmp_path: Path) -> None:
    """A full S1 Table 2 run whose models all came from the zoo reached its mixtures with no
    models/ folder and failed to save the first one: the context's paths now bring their folder."""
    import torch

    from boltzkit.io import save_model
    from boltzkit.models import RBM

    ctx = engine.Context(out_dir=tmp_path / "run", seed=0)
    target = ctx.path("models", "mob_10.safetensors")
    assert target.parent.is_dir() and not target.exists()
    save_model(RBM(3, 2, dtype=torch.float64), target)
    assert target.is_file()
