"""Mixture of Bernoullis (the baseline of S&M 2008, Sec. 5.1): exact log p(v), sampling, EM with
smoothing, files and the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import F64, K_SIGMA, assert_frequencies_match, bars_and_stripes, bit_matrix, bits_to_index
from typer.testing import CliRunner

from boltzkit.cli.main import app
from boltzkit.errors import BoltzkitError, ModelFileError
from boltzkit.io import load_model, save_model
from boltzkit.learning import train_mixture
from boltzkit.models import MixtureOfBernoullis

runner = CliRunner()


def mixture(k: int = 3, d: int = 5, seed: int = 0) -> MixtureOfBernoullis:
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(k, generator=g, dtype=F64) + 0.2
    mu = torch.rand(k, d, generator=g, dtype=F64) * 0.9 + 0.05
    return MixtureOfBernoullis(w / w.sum(), mu)


def test_log_prob_is_exact_and_normalised():
    mob = mixture()
    v = bit_matrix(5)
    lp = mob.log_prob(v)
    assert float(torch.logsumexp(lp, 0)) == pytest.approx(0.0, abs=1e-12)
    row = v[11]
    by_hand = sum(
        float(mob.weights[k])
        * math.prod(float(m if x else 1 - m) for x, m in zip(row, mob.means[k], strict=True))
        for k in range(3)
    )
    assert float(lp[11]) == pytest.approx(math.log(by_hand), rel=1e-12)
    assert torch.allclose(mob.responsibilities(v).sum(1), torch.ones(32, dtype=F64))


def test_invalid_parameters_are_refused():
    with pytest.raises(BoltzkitError, match="strictly between 0 and 1"):
        MixtureOfBernoullis(torch.tensor([1.0]), torch.tensor([[0.0, 0.5]]))
    with pytest.raises(BoltzkitError, match="sum to 1"):
        MixtureOfBernoullis(torch.tensor([0.5, 0.6]), torch.full((2, 3), 0.5))


def test_samples_follow_the_distribution():
    mob = mixture(k=2, d=4, seed=1)
    x, k = mob.sample(40_000, torch.Generator().manual_seed(0), return_components=True)
    assert x.shape == (40_000, 4) and set(k.unique().tolist()) <= {0, 1}
    assert_frequencies_match(bits_to_index(x), torch.exp(mob.log_prob(bit_matrix(4))), n_se=K_SIGMA)


def test_em_raises_its_objective_and_never_reaches_0_or_1():
    """EM (with smoothing: a MAP EM) never lowers its objective; a pixel that is always off in the
    data still gets a probability strictly above 0. (Products in float64: in float32 the objective
    wobbles by ~1e-7 near convergence.)"""
    x = bars_and_stripes()
    x[:, 0] = 0.0  # never on
    mob, hist = train_mixture(x, 4, seed=0, max_iter=60, tol=0.0, device="cpu", progress=False, dtype=F64)
    objective = hist.column("objective")
    assert len(objective) == 60
    assert all(b >= a - 1e-12 for a, b in zip(objective, objective[1:], strict=False))
    assert bool((mob.means > 0).all()) and bool((mob.means < 1).all())
    n_k = mob.weights * (32 + 4 * 1.0) - 1.0  # pi_k = (N_k + b) / (n + K b), b = 1
    assert torch.allclose(mob.means[:, 0], 1.0 / (n_k + 2.0))  # mu = (0 + a) / (N_k + 2a), a = 1
    assert float(mob.weights.sum()) == pytest.approx(1.0, abs=1e-12)
    assert hist.last["train_log_lik"] > hist[0]["train_log_lik"]


def test_em_recovers_a_well_separated_mixture():
    truth = MixtureOfBernoullis(
        torch.tensor([0.3, 0.7], dtype=F64),
        torch.tensor([[0.9] * 6 + [0.1] * 6, [0.1] * 6 + [0.9] * 6], dtype=F64),
    )
    x = truth.sample(4000, torch.Generator().manual_seed(2))
    fitted, _ = train_mixture(x, 2, seed=1, device="cpu", progress=False, dtype=torch.float64)
    true_ll = float(truth.log_prob(x).mean())
    fit_ll = float(fitted.log_prob(x).mean())
    se = float(truth.log_prob(x).std()) / math.sqrt(x.shape[0])
    assert fit_ll >= true_ll - 1e-3  # the maximum-likelihood fit is at least as good on its own data
    assert fit_ll - true_ll < K_SIGMA * se
    order = torch.argsort(fitted.weights)
    assert torch.allclose(fitted.weights[order], truth.weights, atol=0.03)
    assert torch.allclose(fitted.means[order], truth.means, atol=0.03)


def test_em_settings_are_checked():
    x = bars_and_stripes()
    with pytest.raises(BoltzkitError, match="smoothing"):
        train_mixture(x, 2, smoothing=0.0, progress=False, device="cpu")
    with pytest.raises(BoltzkitError, match="more components"):
        train_mixture(x, 33, progress=False, device="cpu")


def test_files_round_trip_and_plain_npz(tmp_path):
    mob = mixture(k=4, d=7, seed=3)
    save_model(mob, tmp_path / "m.safetensors", metadata={"data": "x"})
    model, md = load_model(tmp_path / "m.safetensors")
    assert isinstance(model, MixtureOfBernoullis) and md["kind"] == "mixture" and md["n_components"] == 4
    assert torch.equal(model.means, mob.means)
    np.savez(tmp_path / "plain.npz", weights=mob.weights.numpy(), means=mob.means.numpy())
    assert isinstance(load_model(tmp_path / "plain.npz")[0], MixtureOfBernoullis)
    means = mob.means.numpy().copy()
    means[1, 2] = 1.0
    np.savez(tmp_path / "bad.npz", weights=mob.weights.numpy(), means=means)
    with pytest.raises(ModelFileError, match="strictly between 0 and 1"):
        load_model(tmp_path / "bad.npz")


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_command_line(tmp_path):
    out = tmp_path / "mob.safetensors"
    rec = _json(runner.invoke(app, [
        "train", "--model", "mixture", "--components", "4", "--data", "bars-and-stripes", "--epochs", "30",
        "--out", str(out), "--json",
    ]))  # fmt: skip
    model, md = load_model(out)
    assert isinstance(model, MixtureOfBernoullis) and md["training"]["components"] == 4
    x = bars_and_stripes()
    assert rec["train_log_lik"] == pytest.approx(float(model.log_prob(x).mean()), abs=1e-9)
    ev = _json(runner.invoke(app, ["evaluate", str(out), "--data", "bars-and-stripes", "--json"]))
    assert ev["bound"] == "exact" and ev["mean_log_prob"] == pytest.approx(rec["train_log_lik"], abs=1e-9)
    s = runner.invoke(app, ["sample", str(out), "--out", str(tmp_path / "s.npy"), "--chains", "9"])
    assert s.exit_code == 0, s.output
    assert np.load(tmp_path / "s.npy").shape == (9, 16)
    assert _json(runner.invoke(app, ["logz", str(out), "--json"]))["log_z"] == 0.0
    drawn = runner.invoke(
        app, ["sample", str(out), "--out", str(tmp_path / "t.npy"), "--sampler", "pt:3", "--json"]
    )
    assert "--sampler unused" in drawn.stderr and _json(drawn)["sampler"] is None
    by_ais = runner.invoke(app, ["logz", str(out), "--method", "ais", "--json"])
    assert _json(by_ais)["method"] == "exact" and "--method ais not run" in by_ais.stderr
    for option, value, instead in (("--hidden", "4", "--components"), ("--recipe", "sm2008-cd1", "--epochs")):
        refused = runner.invoke(app, [
            "train", "--model", "mixture", option, value, "--data", "bars-and-stripes",
            "--out", str(tmp_path / "other.safetensors"),
        ])  # fmt: skip
        assert refused.exit_code == 1 and instead in refused.stderr and "Traceback" not in refused.output
