"""``boltzkit reproduce salakhutdinov-2008-table1 / -table2``: Salakhutdinov (2008), Tables 1-2.

The end-to-end tests run both experiments through the registry with tiny overrides (small hidden
layers, one epoch on a few hundred cases, short AIS schedules, few chains) so that together they
take seconds; they need the binarized MNIST files (``BOLTZKIT_DATA_DIR``). The pieces that need
no data (schedule names, resumable stages, settings notes, the variational settings) are tested on
their own. The variational stage (mean-field, Bethe, TAP, TRW) runs on the same tiny models, with
3 Frank-Wolfe steps of TRW for Table 1 and the uniform ``rho`` of Table 2's quick mode.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from boltzkit.data import mnist_available
from boltzkit.errors import BoltzkitError
from boltzkit.estimators import exact_log_z
from boltzkit.experiments import EXPERIMENTS, run_experiment
from boltzkit.experiments.engine import VARIATIONAL_METHODS
from boltzkit.experiments.engine import stage as cached_stage
from boltzkit.experiments.report import VariationalSettings, with_variational_overrides
from boltzkit.experiments.s2008_common import (
    PAPER_TRAINING,
    ModelSpec,
    TrainingSettings,
    resolve_schedule,
    training_differences,
)
from boltzkit.io import load_model

NO_MNIST = "needs the binarized MNIST files (BOLTZKIT_DATA_DIR)"


def needs_mnist(test: Any) -> Any:
    """Mark ``test`` as needing MNIST and skip it when the files are missing."""
    return pytest.mark.mnist(pytest.mark.skipif(not mnist_available(), reason=NO_MNIST)(test))


#: AIS with 1,000 steps and 50 runs on these tiny, briefly trained models is long enough to land
#: within this many of its own standard errors of the exact value.
N_STDERR = 4.0
#: Rounding slack of the guaranteed bounds (nats): mean-field <= ln Z <= TRW.
BOUND_SLACK = 1e-6
#: What each variational method says about ln Z.
EXPECTED_BOUNDS = {"mean-field": "lower", "bethe": "none", "tap": "none", "trw": "upper"}

TABLE1_MODELS = (
    ModelSpec("RBM", "rbm", "mnist", 10),
    ModelSpec("SRBM", "srbm", "mnist-patches", 20),
    ModelSpec("BM", "bm", "mnist-patches", 5),
)
TABLE1_KW: dict[str, Any] = {
    "quick": True,
    "seed": 3,
    "device": "cpu",
    "n_chains": 50,
    "betas": "s2:0.1",
    "epochs": 1,
    "train_size": 600,
    "progress": False,
    "models": TABLE1_MODELS,
    "fw_steps": 3,
}
# 20 hidden units: more than log-probabilities enumerate (16), so the BM's is the mean-field bound
TABLE2_MODELS = (
    ModelSpec("RBM", "rbm", "mnist", 20),
    ModelSpec("SRBM", "srbm", "mnist", 20),
    ModelSpec("BM", "bm", "mnist", 20),
)
TABLE2_KW: dict[str, Any] = {
    "quick": True,
    "seed": 5,
    "device": "cpu",
    "n_chains": 20,
    "betas": "s2:0.01",
    "epochs": 1,
    "train_size": 300,
    "test_size": 200,
    "sample_chains": 6,
    "sample_sweeps": 5,
    "progress": False,
    "models": TABLE2_MODELS,
}


def _mtimes(
    folder: Path, subs: tuple[str, ...] = ("models", "results", "samples", "variational")
) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns
        for sub in subs
        for p in sorted((folder / sub).glob("*"))
    }


def _check_variational(rec: dict[str, Any], true_log_z: float | None) -> None:
    """The four methods are there, finite, of the expected kind, and the bounds hold."""
    var = rec["variational"]
    assert list(var) == list(VARIATIONAL_METHODS), rec["model"]
    for method, v in var.items():
        assert math.isfinite(v["log_z"]) and v["seconds"] >= 0, (rec["model"], method)
        assert v["bound"] == EXPECTED_BOUNDS[method], (rec["model"], method, v["bound"])
    assert rec["bethe_log_z"] == var["bethe"]["log_z"] and rec["trw_log_z"] == var["trw"]["log_z"]
    assert var["mean-field"]["log_z"] <= var["trw"]["log_z"] + BOUND_SLACK
    if true_log_z is not None:
        assert var["mean-field"]["log_z"] <= true_log_z + BOUND_SLACK, rec["model"]
        assert true_log_z <= var["trw"]["log_z"] + BOUND_SLACK, rec["model"]


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def table1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if not mnist_available():
        pytest.skip(NO_MNIST)
    out = tmp_path_factory.mktemp("s2t1")
    return out, run_experiment("salakhutdinov-2008-table1", out_dir=out, **TABLE1_KW)


@pytest.fixture(scope="module")
def table2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    if not mnist_available():
        pytest.skip(NO_MNIST)
    out = tmp_path_factory.mktemp("s2t2")
    return out, run_experiment("salakhutdinov-2008-table2", out_dir=out, **TABLE2_KW)


# ----------------------------------------------------------------------------------- no data
def test_both_experiments_are_registered() -> None:
    assert {"salakhutdinov-2008-table1", "salakhutdinov-2008-table2"} <= set(EXPERIMENTS)


@pytest.mark.parametrize(
    ("spec", "scale", "steps"),
    [("paper", 1.0, 10_000), ("paper", 0.1, 1_000), ("s2", 0.1, 10_000), ("s2:0.01", 1.0, 100)],
)
def test_schedule_names(spec: str, scale: float, steps: int) -> None:
    betas, label = resolve_schedule(spec, scale)
    assert isinstance(betas, torch.Tensor) and betas.numel() - 1 == steps
    assert float(betas[0]) == 0.0 and float(betas[-1]) == 1.0 and bool((betas[1:] > betas[:-1]).all())
    assert f"{steps:,} steps" in label
    assert resolve_schedule("500", 0.1) == ("500", "500")  # other schedules pass through
    with pytest.raises(BoltzkitError):
        resolve_schedule("s2:fast", 1.0)


def test_training_differences_name_what_differs() -> None:
    assert training_differences(PAPER_TRAINING) == []
    notes = training_differences(TrainingSettings(epochs=5, lr=0.1, train_size=1000))
    assert len(notes) == 3 and any("epochs: 5" in n for n in notes) and any("1,000" in n for n in notes)


def test_variational_settings_and_overrides() -> None:
    s = VariationalSettings()
    assert s.options("trw") == {"rho": "optimized", "fw_steps": 30}
    assert s.options("mean-field") == s.options("tap") == s.options("bethe") == {}  # the library's starts
    assert VariationalSettings(n_starts=5).options("tap") == {"n_starts": 5}
    u = with_variational_overrides(s, trw_rho="uniform", fw_steps=2)
    assert u.options("trw") == {"rho": "uniform"} and "uniform" in u.trw_label()
    assert with_variational_overrides(s, fw_steps=4).options("trw")["fw_steps"] == 4
    with pytest.raises(BoltzkitError):
        with_variational_overrides(s, trw_rho="tree")
    with pytest.raises(BoltzkitError):
        with_variational_overrides(s, fw_steps=-1)


def test_cached_stage_reuses_and_refuses_other_settings(tmp_path: Path) -> None:
    calls = []
    path = tmp_path / "r.json"

    def compute() -> dict[str, Any]:
        calls.append(1)
        return {"value": 1.5}

    first = cached_stage(path, {"a": 1, "b": (2, 3)}, compute)
    again = cached_stage(path, {"a": 1, "b": (2, 3)}, compute)
    assert first == again and first["value"] == 1.5 and "seconds" in first and len(calls) == 1
    with pytest.raises(BoltzkitError, match="other settings"):
        cached_stage(path, {"a": 2, "b": (2, 3)}, compute)


# --------------------------------------------------------------------------------- Table 1
@needs_mnist
def test_table1_writes_its_report(table1: tuple[Path, dict[str, Any]]) -> None:
    out, summary = table1
    for name in ("table1.md", "table1.csv", "table1.json"):
        assert (out / name).is_file()
    assert ("fig3_top_ais_runs.png" in summary["files"]) == _has_matplotlib()
    assert ("logz_methods.png" in summary["files"]) == _has_matplotlib()
    assert (out / "logz_methods.png").is_file() == _has_matplotlib()
    md = (out / "table1.md").read_text()
    # paper values beside ours; the Bethe and TRW columns are filled on our side too
    assert "354.88" in md and "1205.26" in md and "350.75" in md and "— / 350.75" not in md
    assert "— / 1205.26" not in md
    assert "Settings that differ from the paper" in md and "epochs: 1 (the paper: 500)" in md
    assert "## ln Z by every method" in md and "at most 3 Frank-Wolfe steps" in md
    csv = (out / "table1.csv").read_text().splitlines()
    assert len(csv) == 1 + 2 * len(TABLE1_MODELS)  # the 10-run and the 50-run rows
    cols = csv[0].split(",")
    for line in csv[1:]:
        row = dict(zip(cols, line.split(","), strict=True))
        assert math.isfinite(float(row["bethe_log_z"])) and math.isfinite(float(row["trw_log_z"]))


@needs_mnist
def test_table1_variational_columns_and_bounds(table1: tuple[Path, dict[str, Any]]) -> None:
    out, summary = table1
    doc = json.loads((out / "table1.json").read_text())
    assert doc["variational"] == {"trw_rho": "optimized", "fw_steps": 3, "n_starts": None}
    for rec in doc["models"]:
        _check_variational(rec, rec["exact"]["log_z"])
        trw = rec["variational"]["trw"]
        assert trw["rho"] == "optimized" and trw["fw_steps"] <= 3
        assert trw["fw_history"] == sorted(trw["fw_history"], reverse=True)  # the bound only decreases
    # the comparison: exact, AIS and the four methods per model, in the JSON and the CSV
    rows = doc["logz_methods"]
    assert [r["method"] for r in rows[:6]] == ["exact", "ais", *VARIATIONAL_METHODS]
    assert len(rows) == 6 * len(TABLE1_MODELS)
    assert all(r["reference"] == "exact" and math.isfinite(r["minus_reference"]) for r in rows)
    assert all((r["reliable"] is None) == (r["method"] != "ais") for r in rows)  # AIS's verdict alone
    paper = {(r["model"], r["method"]): r["paper_log_z"] for r in rows}
    assert (
        paper[("RBM", "bethe")] == 350.75 and paper[("BM", "trw")] == 20.28 and paper[("BM", "tap")] is None
    )
    csv = (out / "logz_methods.csv").read_text().splitlines()
    assert len(csv) == 1 + len(rows) and csv[0].startswith("mode,model,layer_sizes,method,log_z")


@needs_mnist
def test_table1_exact_log_z_is_that_of_the_saved_model(table1: tuple[Path, dict[str, Any]]) -> None:
    out, _ = table1
    doc = json.loads((out / "table1.json").read_text())
    assert [m["model"] for m in doc["models"]] == ["RBM", "SRBM", "BM"]
    assert doc["paper"]["SRBM"]["true_log_z"] == 116.72
    for rec in doc["models"]:
        model, meta = load_model(out / "models" / f"{rec['model'].lower()}.safetensors")
        assert model.kind == rec["kind"] and meta["training"]["config"]["training"]["epochs"] == 1
        assert rec["exact"]["log_z"] == pytest.approx(exact_log_z(model, max_bits=25).log_z, abs=1e-9)


@needs_mnist
def test_table1_ais_agrees_with_exact(table1: tuple[Path, dict[str, Any]]) -> None:
    out, _ = table1
    for rec in json.loads((out / "table1.json").read_text())["models"]:
        a, exact = rec["ais"], rec["exact"]["log_z"]
        assert a["n_chains"] == 50 and a["n_steps"] == 1_000
        assert a["log_z_minus_sigma"] <= a["log_z"] <= a["log_z_plus_sigma"] <= a["log_z_plus_3sigma"]
        assert 0 < a["log_z_stderr"] and math.isfinite(a["log_z"])
        assert abs(a["log_z"] - exact) <= N_STDERR * a["log_z_stderr"], rec["model"]
        assert rec["ais_10"]["n_chains"] == 10


@needs_mnist
def test_table1_rerun_reuses_saved_results(table1: tuple[Path, dict[str, Any]]) -> None:
    out, summary = table1
    before = _mtimes(out)
    # per model: its file, its exact and AIS records, and four variational records
    assert len(before) == (3 + len(VARIATIONAL_METHODS)) * len(TABLE1_MODELS)
    again = run_experiment("salakhutdinov-2008-table1", out_dir=out, **TABLE1_KW)
    assert _mtimes(out) == before
    assert again["models"] == summary["models"]
    # other settings into the same folder are refused, not mixed in (training, or TRW alone)
    with pytest.raises(BoltzkitError, match="other settings"):
        run_experiment("salakhutdinov-2008-table1", out_dir=out, **{**TABLE1_KW, "epochs": 2})
    with pytest.raises(BoltzkitError, match="trw.json was made with other settings"):
        run_experiment("salakhutdinov-2008-table1", out_dir=out, **{**TABLE1_KW, "fw_steps": 4})


@needs_mnist
def test_table1_folder_without_variational_results_gains_them(table1: tuple[Path, dict[str, Any]]) -> None:
    """A folder whose variational records are gone (made before that stage existed, or deleted):
    models and exact/AIS records are reused as they are, the variational values alone are computed
    again, and they are the same."""
    out, summary = table1
    for p in (out / "variational").glob("*.json"):
        p.unlink()
    kept = _mtimes(out, ("models", "results"))
    again = run_experiment("salakhutdinov-2008-table1", out_dir=out, **TABLE1_KW)
    assert _mtimes(out, ("models", "results")) == kept
    assert len(list((out / "variational").glob("*.json"))) == len(VARIATIONAL_METHODS) * len(TABLE1_MODELS)
    for new, old in zip(again["models"], summary["models"], strict=True):
        _check_variational(new, new["exact"]["log_z"])
        assert new["bethe_log_z"] == pytest.approx(old["bethe_log_z"], abs=1e-9)
        assert new["trw_log_z"] == pytest.approx(old["trw_log_z"], abs=1e-6)


# --------------------------------------------------------------------------------- Table 2
@needs_mnist
def test_table2_report_bounds_and_samples(table2: tuple[Path, dict[str, Any]]) -> None:
    out, summary = table2
    for name in ("table2.md", "table2.csv", "table2.json"):
        assert (out / name).is_file()
    assert ("fig4_samples.png" in summary["files"]) == _has_matplotlib()
    assert ("logz_methods.png" in summary["files"]) == _has_matplotlib()
    md = (out / "table2.md").read_text()
    assert "390.76" in md and "-85.59 (text: -85.68)" in md and "lower bound" in md
    assert "5 Gibbs sweeps from random states (the paper: 100,000)" in md
    assert "## ln Z by every method" in md and "— / 378.98" not in md and "uniform ρ" in md
    doc = json.loads((out / "table2.json").read_text())
    bounds = {m["model"]: m["bound"] for m in doc["models"]}
    assert bounds == {"RBM": "estimate", "SRBM": "estimate", "BM": "lower"}  # exact log p*, AIS ln Ẑ
    for rec in doc["models"]:
        a = rec["ais"]
        assert a["n_chains"] == 20 and a["n_steps"] == 100 and math.isfinite(a["log_z"])
        assert rec["test"]["n"] == 200 and rec["train"]["n"] == 300
        for split in ("train", "test"):
            lp = rec[split]
            assert math.isfinite(lp["mean_log_prob"]) and lp["mean_log_prob"] < 0
            assert lp["mean_log_prob"] == pytest.approx(lp["mean_neg_free_energy"] - a["log_z"])
        stem = out / "samples" / rec["model"].lower()
        v = torch.from_numpy(np.load(stem.with_suffix(".npy")))
        assert v.shape == (6, 784) and set(v.unique().tolist()) <= {0, 1}
        assert json.loads(stem.with_suffix(".json").read_text())["config"]["sweeps"] == 5


@needs_mnist
def test_table2_variational_columns(table2: tuple[Path, dict[str, Any]]) -> None:
    out, _ = table2
    doc = json.loads((out / "table2.json").read_text())
    for rec in doc["models"]:
        _check_variational(rec, None)  # no exact ln Z: the bounds only bracket each other
        assert rec["variational"]["trw"]["rho"] == "uniform"  # quick mode: no Frank-Wolfe steps
    rows = doc["logz_methods"]
    assert len(rows) == 5 * len(TABLE2_MODELS) and all(r["reference"] == "AIS" for r in rows)
    assert {r["paper_log_z"] for r in rows if r["method"] == "bethe"} == {378.98, 148.11, 197.26}
    csv = (out / "table2.csv").read_text().splitlines()
    cols = csv[0].split(",")
    for line in csv[1:]:
        assert math.isfinite(float(dict(zip(cols, line.split(","), strict=True))["bethe_log_z"]))


@needs_mnist
def test_table2_rerun_reuses_saved_results(table2: tuple[Path, dict[str, Any]]) -> None:
    out, summary = table2
    before = _mtimes(out)
    # per model: its file; AIS and log-probabilities; the samples and their record; the variational values
    assert len(before) == (5 + len(VARIATIONAL_METHODS)) * len(TABLE2_MODELS)
    again = run_experiment("salakhutdinov-2008-table2", out_dir=out, **TABLE2_KW)
    assert _mtimes(out) == before
    assert again["models"] == summary["models"]


@needs_mnist
def test_full_table2_takes_its_models_from_the_zoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full mode uses the zoo model that stands for a spec (trained once, elsewhere) instead of
    training it: the report names it and its command, and AIS on it agrees with exact log Z."""
    from boltzkit.data import load_dataset
    from boltzkit.experiments.zoo_cards import measure, publish
    from boltzkit.io import save_model
    from boltzkit.learning import train_model

    monkeypatch.setenv("BOLTZKIT_ZOO_DIR", str(tmp_path / "zoo"))
    x = load_dataset("mnist", split="train").x[:300]
    model, _ = train_model(x, kind="rbm", hidden=10, epochs=1, seed=0, progress=False)
    save_model(model, tmp_path / "tiny.safetensors", metadata={"training": {"command": "tiny"}})
    measured = measure(model, train_x=x, test_x=load_dataset("mnist", split="test").x[:200])
    publish(tmp_path / "tiny.safetensors", "tiny-rbm", measured=measured, command="boltzkit train tiny",
            data="mnist", test_data="mnist")  # fmt: skip
    out = tmp_path / "run"
    summary = run_experiment(
        "salakhutdinov-2008-table2", out_dir=out, quick=False, seed=5, device="cpu", n_chains=20,
        betas="s2:0.01", test_size=200, sample_chains=4, sample_sweeps=3, progress=False, trw_rho="uniform",
        models=(ModelSpec("RBM", "rbm", "mnist", 10, zoo="tiny-rbm"),),
    )  # fmt: skip
    (rec,) = summary["models"]
    assert rec["training"]["source"] == "zoo:tiny-rbm" and not (out / "models").exists()
    report = (out / "table2.md").read_text()
    assert "the zoo's `tiny-rbm`, trained by `boltzkit train tiny`" in report
    truth = exact_log_z(load_model("zoo:tiny-rbm")[0]).log_z
    assert abs(rec["ais"]["log_z"] - truth) <= N_STDERR * rec["ais"]["log_z_stderr"]
