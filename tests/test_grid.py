"""The experiment grid: seeded, paired, resumable tasks; in-process, local-process and Ray executors
give the same records; aggregation with the Wilcoxon signed-rank test and S3's stars."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch
from conftest import Killed
from scipy.stats import wilcoxon

from boltzkit.data import load_dataset
from boltzkit.errors import BoltzkitError
from boltzkit.estimators.likelihood import exact_log_likelihoods
from boltzkit.experiments.grid import (
    GridTask,
    aggregate,
    algorithm_label,
    checkpoint_path,
    load_record,
    load_task_model,
    make_grid,
    mean_curves,
    min_significant_pairs,
    model_path,
    parse_algorithm,
    run_grid,
    run_task,
    task_path,
    train_task,
)
from boltzkit.experiments.mixing_study import autocorrelation_stage, finite_mean, mean_acf, quartiles
from boltzkit.learning.api import visible_bias_from_data
from boltzkit.learning.checkpoint import load_checkpoint, save_checkpoint

TINY = {"n_hidden": 3, "n_updates": 30, "eval_every": 10}
DATA = "bars-and-stripes:size=3"


def tiny_grid(algorithms=("cd:2", "pt:3:1"), repetitions=2) -> list[GridTask]:
    return make_grid([DATA], algorithms, [0.1], ("gibbs", "flip"), repetitions, **TINY)


def test_algorithms_and_labels():
    assert parse_algorithm("pt:20:5") == {"method": "pt", "k": 5, "temperatures": 20}
    assert [algorithm_label(a) for a in ("cd:5", "pcd:10", "pt:20:1")] == ["CD_5", "PCD_10", "20-PT_1"]
    for bad in ("cd", "cd:0", "pt:1:1", "pt:5", "gibbs:3"):
        with pytest.raises(BoltzkitError, match="algorithm"):
            parse_algorithm(bad)
    with pytest.raises(BoltzkitError, match="learning rate"):
        GridTask(DATA, "cd:1", 0.0, "gibbs", 0)


def test_operators_of_one_repetition_share_their_seed():
    tasks = tiny_grid()
    assert len(tasks) == 2 * 2 * 2 and len({t.task_id for t in tasks}) == len(tasks)
    by = {(t.algorithm, t.repetition, t.operator): t for t in tasks}
    assert by["cd:2", 0, "gibbs"].pair_seed == by["cd:2", 0, "flip"].pair_seed
    assert by["cd:2", 0, "gibbs"].pair_seed != by["cd:2", 1, "gibbs"].pair_seed
    first = run_task(by["cd:2", 0, "gibbs"])
    other = run_task(by["cd:2", 0, "flip"])
    assert first["log_lik"][0] == other["log_lik"][0]  # same initial weights
    assert first["updates"] == [0, 10, 20, 30] and first["max_log_lik"] == max(first["log_lik"])
    assert run_task(by["cd:2", 0, "gibbs"])["log_lik"] == first["log_lik"]  # deterministic
    pt = run_task(by["pt:3:1", 0, "flip"])
    assert len(pt["swap_rates"]) == 2 and pt["label"] == "3-PT_1"


def test_visible_biases_from_the_data_change_only_those_and_keep_s3s_identities():
    """``init_vbias="data"`` starts the visible biases at the data's log-odds and leaves the other
    draws as S3's start makes them; S3's tasks keep the names and identities of their records."""
    s3 = GridTask(DATA, "pcd:1", 0.1, "gibbs", 0, **TINY)
    data = replace(s3, init_vbias="data")
    assert s3.task_id == "bars-and-stripes-size-3_pcd-1_lr0.1_gibbs_r0_34ef97"  # as before the option
    assert "init_vbias" not in s3.identity() and data.identity()["init_vbias"] == "data"
    assert data.task_id != s3.task_id and data.pair_seed == s3.pair_seed
    ids = {replace(s3, dtype="float32").task_id, replace(s3, device="cuda").task_id, s3.task_id}
    assert len(ids) == 3  # precision and device are part of the record's name, as of its identity
    x = load_dataset(DATA, split="train").x
    starts = {}

    def keep_start(task):
        def on_eval(update, rbm):
            starts.setdefault(task.init_vbias, [p.detach().clone() for p in (rbm.W, rbm.vbias, rbm.hbias)])

        return on_eval

    for task in (s3, data):
        train_task(replace(task, n_updates=1, eval_every=1), x, on_eval=keep_start(task))
    (w0, b0, c0), (w1, b1, c1) = starts["normal"], starts["data"]
    assert torch.equal(w0, w1) and torch.equal(c0, c1)
    assert torch.allclose(b1, visible_bias_from_data(x).to(b1)) and b0.abs().max() < 0.1
    with pytest.raises(BoltzkitError, match="init_vbias"):
        GridTask(DATA, "cd:1", 0.1, "gibbs", 0, init_vbias="zero")


def kill_at(update):
    """An ``on_eval`` that kills the training when it evaluates ``update``."""

    def on_eval(u, rbm):
        if u == update:
            raise Killed

    return on_eval


@pytest.mark.parametrize("algorithm", ["pt:3:1", "pcd:2"])
def test_a_training_killed_mid_way_resumes_from_its_checkpoint_bit_for_bit(tmp_path, algorithm):
    """Persistent chains, swap statistics, the generator and the minibatch order all come back:
    the resumed run's curve, ladder record and parameters equal an uninterrupted run's."""
    task = GridTask(DATA, algorithm, 0.1, "flip", 0, n_hidden=3, n_updates=25, eval_every=5, batch_size=3)
    x = load_dataset(DATA, split="train").x
    whole_rbm, whole = train_task(task, x)
    ckpt = tmp_path / "task.ckpt"

    with pytest.raises(Killed):  # killed at update 15: the checkpoint holds update 14
        train_task(task, x, checkpoint=ckpt, checkpoint_seconds=0.0, on_eval=kill_at(15))
    assert ckpt.is_file()
    evaluated = []
    rbm, resumed = train_task(
        task, x, checkpoint=ckpt, checkpoint_seconds=0.0, on_eval=lambda u, _: evaluated.append(u)
    )
    assert evaluated == [15, 20, 25]  # it went on from update 15, not from the start
    for key in ("updates", "log_lik", "max_log_lik", "swap_rates", "round_trips"):
        assert resumed.get(key) == whole.get(key), key
    for name, value in whole_rbm.state_dict().items():
        assert torch.equal(rbm.state_dict()[name], value), name
    other = replace(task, lr=0.2)  # a checkpoint is never resumed into another task
    with pytest.raises(BoltzkitError, match="another grid task"):
        train_task(other, x, checkpoint=ckpt)
    ckpt.unlink()
    with pytest.raises(Killed):
        train_task(task, x, checkpoint=ckpt, checkpoint_seconds=0.0, on_eval=kill_at(15))
    save_checkpoint(ckpt, {**load_checkpoint(ckpt), "device": "cuda"})  # a generator state of a GPU
    with pytest.raises(BoltzkitError, match="another kind of device"):
        train_task(task, x, checkpoint=ckpt)


def test_a_sweep_resumes_a_killed_training_and_removes_the_checkpoints_records_make_redundant(tmp_path):
    tasks = tiny_grid(("pt:3:1",), repetitions=1)
    whole = [run_task(t) for t in tasks]
    x = load_dataset(DATA, split="train").x
    ckpt = checkpoint_path(tmp_path / "checkpoints", tasks[0])
    with pytest.raises(Killed):  # another task's checkpoint in its place shows that the sweep reads it
        train_task(replace(tasks[0], lr=0.2), x, checkpoint=ckpt, checkpoint_seconds=0.0, on_eval=kill_at(20))
    with pytest.raises(BoltzkitError, match="another grid task"):
        run_grid(tasks, tmp_path, progress=False)
    ckpt.unlink()
    with pytest.raises(Killed):
        train_task(tasks[0], x, checkpoint=ckpt, checkpoint_seconds=0.0, on_eval=kill_at(20))
    run = run_grid(tasks, tmp_path, progress=False)
    assert run.ran == len(tasks) and not ckpt.exists()  # removed once its record was written
    assert [r["log_lik"] for r in run.records] == [r["log_lik"] for r in whole]
    ckpt.write_bytes(b"left behind")  # as if killed between writing the record and removing it
    again = run_grid(tasks, tmp_path, progress=False)
    assert again.skipped == len(tasks) and not ckpt.exists()


def test_a_killed_sweep_resumes_without_rerunning_finished_tasks(tmp_path):
    tasks = tiny_grid(("cd:2",))
    first = run_grid(tasks, tmp_path, progress=False)
    assert first.ran == len(tasks) and first.skipped == 0 and len(first.records) == len(tasks)
    again = run_grid(tasks, tmp_path, progress=False)
    assert again.ran == 0 and again.skipped == len(tasks)
    assert [r["log_lik"] for r in again.records] == [r["log_lik"] for r in first.records]
    # a task killed mid-write leaves a damaged or missing file: only those run again
    task_path(tmp_path, tasks[0]).write_text('{"version": 1, "tas')
    task_path(tmp_path, tasks[1]).unlink()
    resumed = run_grid(tasks, tmp_path, progress=False)
    assert resumed.ran == 2 and resumed.skipped == len(tasks) - 2
    assert [r["log_lik"] for r in resumed.records] == [r["log_lik"] for r in first.records]
    assert load_record(tmp_path, tasks[0])["task"] == tasks[0].to_dict()
    # a record of other settings is not taken for this task
    changed = GridTask(**{**tasks[0].to_dict(), "n_updates": 20})
    assert load_record(tmp_path, changed) is None
    json.loads(task_path(tmp_path, tasks[0]).read_text())


def test_kept_models_are_written_beside_the_records(tmp_path):
    task = GridTask(DATA, "cd:2", 0.1, "flip", 0, keep_model=True, **TINY)
    run = run_grid([task], tmp_path, progress=False)
    assert run.ran == 1 and "parameters" not in run.records[0]
    rbm = load_task_model(tmp_path, task)
    assert rbm.W.shape == (9, 3) and rbm.W.dtype == torch.float64
    ll = exact_log_likelihoods(rbm, {"train": load_dataset(DATA).x})["train_log_lik"]
    assert ll == pytest.approx(run.records[0]["final_log_lik"], abs=1e-9)
    # the same run without the model is found finished; asking for a missing model reruns it
    plain = GridTask(**{**task.to_dict(), "keep_model": False})
    assert run_grid([plain], tmp_path, progress=False).ran == 0
    model_path(tmp_path, task).unlink()
    assert run_grid([task], tmp_path, progress=False).ran == 1


def test_local_processes_give_the_in_process_records(tmp_path):
    tasks = tiny_grid(("cd:2",))
    inline = run_grid(tasks, tmp_path / "inline", progress=False)
    procs = run_grid(tasks, tmp_path / "procs", executor="processes", workers=2, progress=False)
    assert procs.ran == len(tasks) and procs.workers == 2
    assert [r["log_lik"] for r in procs.records] == [r["log_lik"] for r in inline.records]


def test_ray_local_cluster_gives_the_in_process_records(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    # Ray starts its workers at nice 15: beside the suite's other worker they would wait a minute
    # for a share of the CPU, so this local cluster starts them at the suite's own priority.
    monkeypatch.setenv("RAY_worker_niceness", "0")
    tasks = tiny_grid(("cd:2",), repetitions=1)
    inline = run_grid(tasks, tmp_path / "inline", progress=False)
    on_ray = run_grid(
        tasks,
        tmp_path / "ray",
        executor="ray",
        progress=False,
        ray_init={"num_cpus": 1, "include_dashboard": False},
    )
    assert on_ray.ran == len(tasks)
    assert [r["log_lik"] for r in on_ray.records] == [r["log_lik"] for r in inline.records]


def _record(algorithm, lr, op, rep, value):
    return {
        "task": {"dataset": "d", "algorithm": algorithm, "lr": lr, "operator": op, "repetition": rep},
        "max_log_lik": value,
    }


def test_aggregate_medians_wilcoxon_and_stars():
    g = [-4.0, -4.1, -3.9, -4.2, -4.05, -3.95, -4.15]
    t = [x + 0.1 + 0.01 * i for i, x in enumerate(g)]  # flip better in every pair
    records = [_record("cd:5", 0.05, "gibbs", i, v) for i, v in enumerate(g)]
    records += [_record("cd:5", 0.05, "flip", i, v) for i, v in enumerate(t)]
    records += [_record("cd:5", 0.1, "gibbs", i, v) for i, v in enumerate(g[:3])]
    records += [_record("cd:5", 0.1, "flip", i, v) for i, v in enumerate(t[:3])]
    cells = aggregate(records)
    assert len(cells) == 2
    c = cells[0]
    assert c.median_a == pytest.approx(sorted(g)[3]) and c.median_b == pytest.approx(sorted(t)[3])
    assert c.p_value == pytest.approx(float(wilcoxon(t, g).pvalue)) and c.p_value < 0.05
    assert c.better == "b" and c.marked("b").endswith("*") and not c.marked("a").endswith("*")
    assert c.label == "CD_5" and c.n_pairs == 7
    few = cells[1]  # three pairs can never reach p < 0.05
    assert few.n_pairs == 3 and few.better is None and few.p_value > 0.05
    assert min_significant_pairs() == 6
    nan_cell = aggregate([_record("cd:5", 0.1, "gibbs", 0, None)])[0]
    assert math.isnan(nan_cell.median_b) and nan_cell.p_value is None


def test_bad_executor_and_duplicates_are_refused(tmp_path):
    tasks = tiny_grid(("cd:2",), repetitions=1)
    with pytest.raises(BoltzkitError, match="executor"):
        run_grid(tasks, tmp_path, executor="slurm")
    with pytest.raises(BoltzkitError, match="twice"):
        run_grid(tasks + tasks[:1], tmp_path)
    with pytest.raises(BoltzkitError, match="workers"):
        run_grid(tasks, tmp_path, executor="processes", workers=0)
    assert torch.get_num_threads() >= 1


def test_mean_curves_average_one_cells_runs_per_operator(tmp_path):
    tasks = tiny_grid(("cd:2", "pt:3:1"), repetitions=2)
    records = run_grid(tasks, tmp_path, progress=False).records
    curves = mean_curves(records, dataset=DATA, algorithm="cd:2", lr=0.1)
    mine = {
        op: [
            r["log_lik"] for r in records if r["task"]["algorithm"] == "cd:2" and r["task"]["operator"] == op
        ]
        for op in ("gibbs", "flip")
    }
    assert curves["runs"] == 2 and curves["updates"] == [0, 10, 20, 30]
    assert curves["runs_by_operator"] == {"gibbs": 2, "flip": 2}
    # the level over the last quarter of the updates (here the evaluation at 30 alone), per operator
    for op, runs in mine.items():
        assert curves["end_level"][op] == pytest.approx((runs[0][-1] + runs[1][-1]) / 2, abs=1e-12)
    # a missing evaluation is left out of the mean at its update; a run without its pair is left out
    import copy

    edited = copy.deepcopy(records)
    gibbs = [r for r in edited if r["task"]["algorithm"] == "cd:2" and r["task"]["operator"] == "gibbs"]
    gibbs[0]["log_lik"][1] = None
    unpaired = copy.deepcopy(gibbs[0])
    unpaired["task"]["repetition"] = 7
    unpaired["log_lik"] = [0.0, 0.0, 0.0, 0.0]
    gaps = mean_curves([*edited, unpaired], dataset=DATA, algorithm="cd:2", lr=0.1)
    assert gaps["gibbs"][1] == pytest.approx(gibbs[1]["log_lik"][1], abs=1e-12)
    assert gaps["runs_by_operator"] == {"gibbs": 2, "flip": 2}
    # runs evaluated at other updates are not averaged with the rest
    gibbs[0]["updates"] = [0, 5, 20, 30]
    assert mean_curves(edited, dataset=DATA, algorithm="cd:2", lr=0.1) is None
    for op, runs in mine.items():
        assert curves[op] == pytest.approx([(a + b) / 2 for a, b in zip(*runs, strict=True)], abs=1e-12)
    # a cell with no run of one operator has no curves
    assert (
        mean_curves(
            [r for r in records if r["task"]["operator"] == "gibbs"], dataset=DATA, algorithm="cd:2", lr=0.1
        )
        is None
    )
    assert mean_curves(records, dataset=DATA, algorithm="cd:2", lr=0.05) is None


def test_mixing_stages_on_a_kept_model_are_computed_once(tmp_path):
    task = GridTask(DATA, "cd:2", 0.1, "gibbs", 0, keep_model=True, **TINY)
    run_grid([task], tmp_path, progress=False)
    first = autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=50, seed=3)
    assert len(first["acf"]) == 51 and first["acf"][0] == pytest.approx(1.0)
    assert first["tau_ar"] > 0 and first["tau_sokal"] is not None
    again = autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=50, seed=3)
    assert again == first  # read back from out/act, not recomputed
    with pytest.raises(BoltzkitError):  # other settings never silently reuse a record
        autocorrelation_stage(tmp_path, task, "flip", steps=300, burn_in=10, max_lag=50, seed=3)
    assert (
        autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=50, seed=3, n_chains=1)
        == first
    )
    with pytest.raises(BoltzkitError, match="n_chains"):
        autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=50, seed=3, n_chains=0)
    assert first["max_lag"] == 50 and first["device"] == "cpu"
    # max_lag only cuts what a record keeps: a shorter lag is served from it, a longer one refused
    short = autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=20, seed=3)
    assert short["acf"] == first["acf"][:21] and short["tau_ar"] == first["tau_ar"]
    assert short["max_lag"] == 20
    with pytest.raises(BoltzkitError, match="to lag 50, and lag 80 is asked for"):
        autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=80, seed=3)
    for bad in (-3, 0, True, 2.5):  # a lag is a positive whole number (a review wrote max_lag -3)
        with pytest.raises(BoltzkitError, match="max_lag"):
            autocorrelation_stage(tmp_path, task, "flip", steps=400, burn_in=10, max_lag=bad, seed=3)
    acf = mean_acf([{"gibbs": {"acf": [1.0, 0.5, 0.2]}}, {"gibbs": {"acf": [1.0, 0.3]}}], ("gibbs",))
    assert acf["gibbs"] == pytest.approx([1.0, 0.4])
    assert quartiles([1, 2, 3, 4, 5]) == (2.0, 3.0, 4.0)
    assert finite_mean([1.0, math.nan, 3.0]) == 2.0 and math.isnan(finite_mean([math.inf]))


def test_pooled_chains_of_a_kept_model_find_its_exact_tau(tmp_path):
    """The stage with many chains, on a kept model of independent units (W = 0): Gibbs draws
    independent states (tau = 1) and flip-the-state gives each unit the eigenvalue -(1 - p)/p, so
    the energy's tau is exact (as in test_autocorrelation). The pooled Sokal time lies within
    K_SIGMA standard deviations of it, the recorded sd is the windowed sum's, and S3's one-chain
    record keeps its own file, name and seed."""
    from conftest import F64, K_SIGMA

    from boltzkit.diagnostics.autocorrelation import windowed_sd
    from boltzkit.io import save_model
    from boltzkit.models import RBM

    task = GridTask(DATA, "cd:2", 0.1, "gibbs", 0, keep_model=True, **TINY)
    run_grid([task], tmp_path, progress=False)
    g = torch.Generator().manual_seed(5)
    b, c = torch.randn(9, generator=g, dtype=F64) * 1.5, torch.randn(3, generator=g, dtype=F64) * 1.5
    save_model(
        RBM(9, 3, weights=torch.zeros(9, 3, dtype=F64), vbias=b, hbias=c, dtype=F64),
        model_path(tmp_path, task),
    )
    a = torch.cat([b, c])
    p1 = torch.sigmoid(a)
    p, weight = torch.maximum(p1, 1 - p1), a**2 * p1 * (1 - p1)
    n_chains, steps = 32, 3000
    for op, lam in (("gibbs", torch.zeros_like(p)), ("flip", -(1 - p) / p)):
        truth = float((weight * (1 + lam) / (1 - lam)).sum() / weight.sum())
        rec = autocorrelation_stage(
            tmp_path, task, op, steps=steps, burn_in=5, max_lag=50, seed=3, n_chains=n_chains
        )
        total = n_chains * steps
        assert rec["tau_sokal_sd"] == pytest.approx(windowed_sd(rec["tau_sokal"], rec["sokal_window"], total))
        sd = windowed_sd(max(truth, 1.0), rec["sokal_window"], total)  # anticorrelated: the scale of tau = 1
        assert abs(rec["tau_sokal"] - truth) < K_SIGMA * sd, (op, rec["tau_sokal"], truth, sd)
        assert len(rec["tau_ar_chains"]) == n_chains and rec["tau_ar"] == pytest.approx(
            sum(rec["tau_ar_chains"]) / n_chains
        )
        assert not rec["undecayed_at_window"] and len(rec["acf"]) == 51
        assert rec["acf_log_lags"][0] == 1 and rec["acf_log_lags"][-1] == steps - 1
        assert (tmp_path / "act" / f"{task.task_id}_{op}_{n_chains}chains.json").is_file()
    one = autocorrelation_stage(tmp_path, task, "flip", steps=steps, burn_in=5, max_lag=50, seed=3)
    assert "n_chains" not in one["config"] and (tmp_path / "act" / f"{task.task_id}_flip.json").is_file()
