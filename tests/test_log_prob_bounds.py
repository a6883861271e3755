"""What a mean log-probability is when its log Z is a deterministic bound or approximation:
an upper bound on log Z (TRW) makes a lower bound on log p, a lower bound (mean-field) an upper
one, and against a mean-field lower bound on log p*(v) nothing is bounded."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import F64, random_machine
from test_cli import last_json, run

from boltzkit.estimators import exact_log_z
from boltzkit.estimators.likelihood import dataset_log_prob
from boltzkit.estimators.result import LogZResult, log_prob_bound
from boltzkit.io import save_model


def _deterministic(log_z: float, bound: str) -> LogZResult:
    return LogZResult.deterministic("x", log_z, bound=bound, converged=True, iterations=1, residual=0.0)


@pytest.mark.parametrize(
    ("value_bound", "z_bound", "expected"),
    [
        ("exact", "upper", "lower"),
        ("exact", "lower", "upper"),
        ("exact", "none", "none"),
        ("lower", "upper", "lower"),
        ("lower", "lower", "none"),
        ("lower", "none", "none"),
    ],
)
def test_a_deterministic_log_z_turns_the_bound(value_bound: str, z_bound: str, expected: str) -> None:
    bound, note = log_prob_bound(value_bound, _deterministic(1.0, z_bound))
    assert bound == expected and note is not None and "log Z is x's" in note
    assert log_prob_bound(value_bound, LogZResult.exact(1.0)) == (value_bound, None)


def test_the_bounds_hold_against_the_exact_value() -> None:
    model = random_machine("srbm", (7, 4), 2)
    x = (torch.rand(40, 7, generator=torch.Generator().manual_seed(1)) < 0.5).to(F64)
    log_z = exact_log_z(model).log_z
    exact = dataset_log_prob(model, x, log_z).mean_log_prob
    over = dataset_log_prob(model, x, _deterministic(log_z + 0.5, "upper"))
    under = dataset_log_prob(model, x, _deterministic(log_z - 0.5, "lower"))
    assert over.bound == "lower" and over.mean_log_prob == pytest.approx(exact - 0.5)
    assert under.bound == "upper" and under.mean_log_prob == pytest.approx(exact + 0.5)
    assert "upper bound" in over.to_dict()["bound_note"]


def test_the_command_line_names_the_bound_and_a_dbn_takes_a_variational_log_z(tmp_path) -> None:
    model = random_machine("srbm", (7, 4), 3)
    save_model(model, tmp_path / "m.safetensors")
    x = (np.random.default_rng(0).random((30, 7)) < 0.5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ("evaluate", tmp_path / "m.safetensors", "--data", tmp_path / "x.npy", "--json")
    exact = last_json(run(*args))
    assert exact["bound"] == "exact"
    mf = last_json(run(*args, "--logz", "mean-field"))
    assert mf["bound"] == "upper" and mf["mean_log_prob"] >= exact["mean_log_prob"] - 1e-9
    bethe = last_json(run(*args, "--logz", "bethe"))
    assert bethe["bound"] == "none" and "approximation" in bethe["bound_note"]
    g = np.random.default_rng(1)
    dbn = {"W_0": g.normal(0, 1, (7, 4)), "vbias_0": np.zeros(7), "hbias_0": np.zeros(4)}
    dbn |= {"W_1": g.normal(0, 1, (4, 3)), "vbias_1": np.zeros(4), "hbias_1": np.zeros(3)}
    np.savez(tmp_path / "dbn.npz", **dbn)
    result = run(
        "evaluate", tmp_path / "dbn.npz", "--data", tmp_path / "x.npy", "--logz", "mean-field", "--json"
    )
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.exit_code == 0 and record["bound"] == "none" and record["total_error_3std"] is None
    human = run("evaluate", tmp_path / "dbn.npz", "--data", tmp_path / "x.npy", "--logz", "mean-field")
    assert human.exit_code == 0 and "approximate mean log p(v)" in human.stdout


def test_an_ising_models_evaluation_reports_log_z_as_logz_does(tmp_path) -> None:
    g = np.random.default_rng(2)
    J = np.triu(g.normal(0, 0.5, (6, 6)), 1)
    np.savez(tmp_path / "ising.npz", J=J + J.T, h=g.normal(0, 0.3, 6))
    np.save(tmp_path / "s.npy", np.where(g.random((20, 6)) < 0.5, -1, 1).astype(np.int8))
    log_z = last_json(run("logz", tmp_path / "ising.npz", "--json"))["log_z"]
    record = last_json(run("evaluate", tmp_path / "ising.npz", "--data", tmp_path / "s.npy", "--json"))
    assert record["log_z"] == pytest.approx(log_z, abs=1e-9) and "ising" in record["convention"]
    assert record["logz"]["log_z"] == pytest.approx(log_z, abs=1e-9)  # the nested record, too
    assert record["mean_neg_free_energy"] - record["log_z"] == pytest.approx(
        record["mean_log_prob"], abs=1e-9
    )


def test_a_sampled_log_z_makes_an_exact_log_p_an_estimate() -> None:
    """Exact log p*(v) less an AIS log Z: "estimate" (its band carries the error), not "exact";
    a mean-field log p*(v) stays a "lower" bound, as with the DBN bounds."""
    from boltzkit.estimators import ais, base_rate_path

    srbm, bm = random_machine("srbm", (6, 4), 2), random_machine("bm", (6, 20), 3)
    x = (torch.rand(30, 6, generator=torch.Generator().manual_seed(1)) < 0.5).to(F64)
    sampled = ais(base_rate_path(srbm), n_chains=50, betas=200, seed=0, check=False)
    assert log_prob_bound("exact", sampled) == ("estimate", "log Z sampled by ais, log p*(v) exact")
    assert log_prob_bound("lower", sampled) == ("lower", None)
    res = dataset_log_prob(srbm, x, sampled)
    assert res.bound == "estimate" and res.to_dict()["bound_note"].startswith("log Z sampled by ais")
    assert res.mean_log_prob_minus_3sigma <= res.mean_log_prob <= res.mean_log_prob_plus_3sigma
    bm_sampled = ais(base_rate_path(bm), n_chains=20, betas=50, seed=0, check=False)
    assert dataset_log_prob(bm, x, bm_sampled, method="mean-field").bound == "lower"


def test_mean_field_is_exact_where_the_hidden_units_are_independent_given_v() -> None:
    """Found by a probe: ``--log-p mean-field`` on an RBM called the same number "lower" that
    ``auto`` called an "estimate". Given v an RBM's (and an SRBM's) hidden units are independent,
    so mean-field's q(h) is p(h | v) and its value log p*(v) itself: exact, an estimate beside a
    sampled log Z; with a hidden layer left to enumerate (a DBM) it is a lower bound."""
    from boltzkit.estimators import ais, base_rate_path
    from boltzkit.estimators.likelihood import log_unnormalized_visible

    x = (torch.rand(30, 6, generator=torch.Generator().manual_seed(1)) < 0.5).to(F64)
    for kind in ("rbm", "srbm"):
        model = random_machine(kind, (6, 4), 2)
        exact, bound, _ = log_unnormalized_visible(model, x, method="exact")
        field, field_bound, _ = log_unnormalized_visible(model, x, method="mean-field")
        assert bound == field_bound == "exact" and torch.allclose(field, exact, atol=1e-10)
        sampled = ais(base_rate_path(model), n_chains=20, betas=50, seed=0, check=False)
        assert dataset_log_prob(model, x, sampled, method="mean-field").bound == "estimate"
    dbm = random_machine("dbm", (6, 4, 3), 2)
    assert log_unnormalized_visible(dbm, x, method="mean-field")[1] == "lower"
