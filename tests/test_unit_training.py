"""Gaussian and categorical visible units train under the one trainer of every model
(:class:`boltzkit.learning.Trainer` with :class:`~boltzkit.learning.unit_rbm.UnitRBMLearner` or
:class:`~boltzkit.learning.unit_dbm.UnitDBMLearner`): checkpoints that resume exactly, the
learning-rate, momentum and k schedules, flip-the-state chains where the unit type has a rule,
sigma fixed or learned, and every ``train`` option through the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import KillAfter, Killed, unit_rbm
from test_cli import assert_clean_failure, last_json, run
from test_unit_dbm import mixture_data

from boltzkit.errors import BoltzkitError
from boltzkit.estimators import dataset_log_prob, exact_log_z
from boltzkit.estimators.unit_rbm import exact_sample_units
from boltzkit.io import load_model
from boltzkit.learning import load_checkpoint, train_model, train_unit_dbm, train_unit_rbm
from boltzkit.learning.recipes import get_recipe
from boltzkit.learning.unit_rbm import UnitRBMLearner, init_unit_rbm

F64 = torch.float64


def _data(units: str, n: int = 200, seed: int = 0) -> torch.Tensor:
    teacher = unit_rbm(units, 6, 3, seed=seed, scale=1.5)
    return exact_sample_units(teacher, n, torch.Generator().manual_seed(seed + 1)).visible


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
@pytest.mark.parametrize("kind", ["rbm", "dbm"])
def test_a_killed_run_resumes_to_the_parameters_of_an_uninterrupted_one(units, kind, tmp_path) -> None:
    x = _data(units)
    hidden = 4 if kind == "rbm" else [4, 3]
    method = "pcd" if kind == "dbm" else "cd"
    common = {
        "kind": kind, "hidden": hidden, "visible": units, "method": method, "k": 2, "epochs": 4,
        "lr": 0.02, "batch_size": 20, "n_chains": 10, "momentum": "0.5,0.9@2", "seed": 3, "device": "cpu",
        "progress": False,
    }  # fmt: skip
    full, full_history = train_model(x, **common)
    ckpt = tmp_path / "unit.ckpt"
    with pytest.raises(Killed):
        train_model(x, checkpoint_path=ckpt, checkpoint_every=1, callbacks=[KillAfter(2)], **common)
    assert load_checkpoint(ckpt)["epoch"] == 2
    resumed, history = train_model(x, checkpoint_path=ckpt, checkpoint_every=1, resume=True, **common)
    for name, value in full.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], value), name
    monitor = "free_energy_gap" if kind == "rbm" else "mean_field_sweeps"
    assert [r[monitor] for r in history] == [r[monitor] for r in full_history]
    assert [r["momentum"] for r in history] == [0.5, 0.5, 0.9, 0.9]


def test_the_schedules_apply_to_unit_models() -> None:
    x = _data("gaussian")
    _, history = train_unit_rbm(
        x, "gaussian", 3, epochs=4, lr=0.01, lr_schedule="step:2", k_schedule="step:2:3", batch_size=50
    )
    assert [r["k"] for r in history] == [1, 1, 2, 2]
    assert [r["lr"] for r in history] == pytest.approx([0.01, 0.01, 0.005, 0.005])
    _, constant = train_unit_rbm(x, "gaussian", 3, epochs=2, lr=0.01, lr_schedule="constant", batch_size=50)
    assert [r["lr"] for r in constant] == [0.01, 0.01]


def test_flip_the_state_chains_learn_a_categorical_rbm() -> None:
    """CD with Liu's Metropolized Gibbs for the categorical units (and the binary flip for the hidden
    ones) learns as Gibbs chains do: both lift the held-out log-likelihood well above the start."""
    teacher = unit_rbm("categorical:3", 6, 4, seed=11, scale=2.0)
    g = torch.Generator().manual_seed(12)
    train, test = (exact_sample_units(teacher, 2000, g).visible for _ in range(2))
    start = init_unit_rbm(
        train, teacher.visible_units, 4, generator=torch.Generator().manual_seed(0), dtype=F64
    )
    before = dataset_log_prob(start, test, exact_log_z(start)).mean_log_prob
    best = dataset_log_prob(teacher, test, exact_log_z(teacher)).mean_log_prob
    for sampler, method in (("gibbs", "cd"), ("flip", "cd"), ("pt:3", "pcd")):  # and tempered chains
        model, _ = train_unit_rbm(
            train, teacher.visible_units, 4, sampler=sampler, method=method, epochs=15, lr=0.05,
            batch_size=20, init_scale=0.1, n_chains=20,
        )  # fmt: skip
        after = dataset_log_prob(model, test, exact_log_z(model)).mean_log_prob
        assert after - before > 0.7 * (best - before), sampler
    with pytest.raises(BoltzkitError, match="no rule for gaussian units"):
        train_unit_rbm(_data("gaussian"), "gaussian", 3, sampler="flip", epochs=1)
    with pytest.raises(BoltzkitError, match="not at tempered replicas"):
        UnitRBMLearner("cd", sampler="pt:3")


def test_fixed_sigma_stays_at_the_data_and_binary_options_are_refused() -> None:
    x = _data("gaussian")
    start = init_unit_rbm(x, "gaussian", 3, generator=torch.Generator().manual_seed(0))
    fixed, _ = train_unit_rbm(x, "gaussian", 3, epochs=2, learn_sigma=False, seed=0)
    learned, _ = train_unit_rbm(x, "gaussian", 3, epochs=2, seed=0)
    assert torch.equal(fixed.sigma, start.sigma) and not torch.equal(learned.sigma, start.sigma)
    for option, match in (
        ({"reconstruction": "mean"}, "reconstruction 'mean' applies to binary"),
        ({"centering": "average"}, "centering applies to binary"),
        ({"positive": "mean-field"}, "positive phase"),
        ({"method": "pt"}, "method 'pt' applies to binary"),
        ({"damping": 0.9}, "damping of 0.9 applies to binary"),
    ):
        with pytest.raises(BoltzkitError, match=match):
            train_unit_rbm(x, "gaussian", 3, epochs=1, **option)
    with pytest.raises(BoltzkitError, match="learns by persistent chains"):
        train_unit_dbm(x, "gaussian", [3, 2], method="cd", epochs=1)
    with pytest.raises(BoltzkitError, match="Gaussian visible units"):
        train_model((x > 0).float(), hidden=3, learn_sigma=False, progress=False)
    with pytest.raises(BoltzkitError, match="Gaussian visible units"):
        train_unit_rbm(_data("categorical:3"), "categorical:3", 3, learn_sigma=False, epochs=1)


def test_the_command_line_honours_every_option_for_unit_models(tmp_path) -> None:
    data = tmp_path / "cats.csv"
    np.savetxt(data, _data("categorical:3", 300).numpy(), delimiter=",", fmt="%d")
    out, history = tmp_path / "potts.safetensors", tmp_path / "potts-history"
    args = [
        "train", "--data", data, "--visible", "categorical:3", "--hidden", 4, "--epochs", 3,
        "--batch-size", 50, "--method", "pcd", "--chains", 20, "--sampler", "flip",
        "--lr-schedule", "constant", "--lr", 0.02,
        "--k-schedule", "1:3", "--init-scale", 0.5, "--history", history, "--out", out, "--json",
    ]  # fmt: skip
    trained = last_json(run(*args))
    settings = trained["settings"]
    assert (settings["sampler"], settings["lr_schedule"], settings["k_schedule"]) == (
        "flip",
        "constant",
        "1:3",
    )
    assert [r["k"] for r in trained["history"]] == [1, 2, 3] and {r["lr"] for r in trained["history"]} == {
        0.02
    }
    assert json.loads((tmp_path / "potts-history.json").read_text())[-1]["epoch"] == 3
    model, metadata = load_model(out)
    assert metadata["training"]["visible_units"] == "categorical:3"
    assert float(model.W.detach().std()) > 0.1  # --init-scale 0.5, not the default 0.01
    assert trained["log_z"] == pytest.approx(exact_log_z(model.double()).log_z, abs=1e-4)
    gauss = tmp_path / "g.npy"
    np.save(gauss, _data("gaussian", 300).numpy())
    fixed = last_json(
        run("train", "--data", gauss, "--visible", "gaussian", "--hidden", 3, "--epochs", 1, "--fixed-sigma",
            "--out", tmp_path / "g.safetensors", "--json")
    )  # fmt: skip
    assert fixed["settings"]["learn_sigma"] is False
    # a recipe's learning rate holds for Gaussian units too; the units' own default only stands in
    # where neither --lr nor a recipe gives one
    recipe = last_json(
        run("train", "--data", gauss, "--visible", "gaussian", "--hidden", 3, "--epochs", 1,
            "--recipe", "sm2008-cd1", "--reconstruction", "sample", "--out", tmp_path / "r.safetensors",
            "--json")
    )  # fmt: skip
    assert recipe["settings"]["lr"] == get_recipe("sm2008-cd1").lr != fixed["settings"]["lr"]
    warned = run(
        "train", "--data", gauss, "--visible", "gaussian", "--hidden", 3, "--epochs", 1,
        "--recipe", "sm2008-cd1", "--reconstruction", "sample", "--out", tmp_path / "w.safetensors",
    )  # fmt: skip
    assert "set for binary units" in warned.output and "give --lr" in warned.output
    assert "applies to binary visible units" in assert_clean_failure(
        run("train", "--data", gauss, "--visible", "gaussian", "--hidden", 3, "--reconstruction", "mean",
            "--out", tmp_path / "m.safetensors")
    )  # fmt: skip
    assert "--fixed-sigma applies to Gaussian" in assert_clean_failure(
        run("train", "--data", "bars-and-stripes", "--hidden", 3, "--fixed-sigma",
            "--out", tmp_path / "b.npz")
    )  # fmt: skip
    assert "--bottom" in assert_clean_failure(
        run("train", "--data", gauss, "--visible", "gaussian", "--model", "dbn", "--hidden", "3,2",
            "--out", tmp_path / "d.safetensors")
    )  # fmt: skip


def test_scikit_learn_fits_a_dbm_over_gaussian_or_categorical_units() -> None:
    from boltzkit.sklearn import BoltzmannMachineEstimator

    for units, kind in (("gaussian", "gaussian"), ("categorical", "categorical:3")):
        x = mixture_data(kind, 400, 5).numpy()
        est = BoltzmannMachineEstimator(
            kind="dbm", n_components=(4, 3), visible_units=units, n_iter=3, learning_rate=0.01, batch_size=20,
            random_state=0,
        )  # fmt: skip
        est.fit(x)
        assert est.model_.kind == f"{units}-dbm" and np.isfinite(est.score(x))
        assert est.transform(x[:5]).shape == (5, 7)
        again = BoltzmannMachineEstimator(**est.get_params())
        for _ in range(3):
            again.partial_fit(x)
        for name, value in est.model_.state_dict().items():
            assert torch.equal(again.model_.state_dict()[name], value), name


def test_gaussian_data_far_from_zero_trains_without_a_false_divergence() -> None:
    """The visible biases start at the data's means (here 1e4): the divergence check scales with
    the data's scale, so only a real blow-up stops the run."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 6, generator=g, dtype=torch.float64) * 1000 + 1e4
    model, history = train_model(
        x, kind="rbm", hidden=4, visible="gaussian", epochs=1, lr=1e-4, progress=False
    )
    assert len(history) == 1 and float(model.vbias.detach().abs().max()) > 5e3


@pytest.mark.parametrize("units", ["gaussian", "categorical:3"])
def test_every_entry_point_trains_unit_models_with_the_same_defaults(units, tmp_path) -> None:
    """train_model(visible=...), train_unit_rbm and the command line share unit_training_defaults."""
    from boltzkit.learning.api import unit_training_defaults

    x = _data(units)
    defaults = unit_training_defaults(units)
    _, by_model = train_model(x, kind="rbm", hidden=3, visible=units, epochs=2, batch_size=50, progress=False)
    _, by_units = train_unit_rbm(x, units, 3, epochs=2, batch_size=50)
    assert by_model[0]["lr"] == by_units[0]["lr"] == defaults["lr"]
    data = tmp_path / "x.npy"
    np.save(data, x.numpy())
    out = tmp_path / "m.safetensors"
    record = last_json(run("train", "--data", data, "--visible", units, "--hidden", 3, "--epochs", 2,
                           "--batch-size", 50, "--out", out, "--json"))  # fmt: skip
    assert record["history"][0]["lr"] == defaults["lr"]
    training = load_model(out)[1]["training"]
    assert training["lr_schedule"] == "linear" and float(training["momentum"]) == defaults["momentum"]


def test_a_unit_dbm_given_cd_takes_chains_as_the_persistent_chains_it_runs(tmp_path) -> None:
    """--method cd on a Gaussian DBM runs persistent chains (with a warning), so --chains applies."""
    data = tmp_path / "x.npy"
    np.save(data, _data("gaussian").numpy())
    out = tmp_path / "d.safetensors"
    args = ("--visible", "gaussian", "--model", "dbm", "--hidden", "3,2", "--method", "cd", "--chains", 10)
    result = run("train", "--data", data, *args, "--epochs", 1, "--batch-size", 50, "--out", out)
    assert result.exit_code == 0, result.output
    assert "taken as pcd" in result.stderr
    training = load_model(out)[1]["training"]
    assert training["method"] == "pcd" and training["n_chains"] == 10
